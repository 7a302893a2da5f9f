package cli

import (
	"context"
	"errors"

	"github.com/foliodb/folio/admin"
	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
)

// openAdmin opens the public admin API (package admin) on the shell's
// metadata store, security and bookie TLS, with the hints openMetadata
// gives. The shell's cluster operations are this API's: commands parse
// flags, call it and print.
// Each of configure, if any, then adjusts the client configuration (a
// command's own settings, such as recover's placement flags).
func openAdmin(ctx context.Context, o *ShellOptions, configure ...func(*client.Config)) (*admin.Admin, error) {
	cfg, err := o.clientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Logger = warnLogger(o)
	for _, f := range configure {
		f(&cfg)
	}
	a, err := admin.New(ctx, admin.Config{Client: cfg})
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, metadata.ErrBadURI), errors.Is(err, metadata.ErrNotBuilt):
		return nil, WithHint(err, "set --metadata-service-uri or $"+MetadataURIEnv+", e.g. "+DefaultMetadataURI)
	case securityHint(err) != "":
		return nil, WithHint(err, securityHint(err))
	}
	return nil, WithHint(err, "check that the metadata store is running and reachable")
}

// autoRecoveryError gives an AutoRecovery command's error its hint when the
// metadata store has no AutoRecovery.
func autoRecoveryError(err error) error {
	if errors.Is(err, admin.ErrNotSupported) {
		return WithHint(err, "use an etcd:// metadata service URI")
	}
	return err
}
