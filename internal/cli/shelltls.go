package cli

import (
	"crypto/tls"
	"errors"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// The TLS settings of a command's bookie connections: --tls-ca, --tls-cert
// and --tls-key, else $FOLIO_TLS_CA, $FOLIO_TLS_CERT and $FOLIO_TLS_KEY.
// With a CA every bookie connection is upgraded with START_TLS and the
// bookie's certificate verified against it (no host name check, as Java's
// client); the certificate and key (PEM, PKCS#8) are presented to bookies
// that require client certificates (tlsClientAuthentication), and with
// BookieAuthZFactory their OU must carry an authorised role.
const (
	TLSCAEnv   = "FOLIO_TLS_CA"
	TLSCertEnv = "FOLIO_TLS_CERT"
	TLSKeyEnv  = "FOLIO_TLS_KEY"
)

// bookieTLSFlags are the flags; ShellOptions.BookieTLS holds them.
type bookieTLSFlags struct {
	ca, cert, key string
}

func (f *bookieTLSFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "", "PEM CA certificates that verify the bookies; turns on TLS to bookies (default $"+TLSCAEnv+")")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM client certificate presented to bookies, for bookies that require one (default $"+TLSCertEnv+")")
	fs.StringVar(&f.key, "tls-key", "", "PKCS#8 PEM private key of --tls-cert (default $"+TLSKeyEnv+")")
}

// config returns the TLS configuration of the bookie connections, nil
// for plaintext.
func (f *bookieTLSFlags) config(env Env) (*tls.Config, error) {
	pick := func(flag, name string) string {
		if flag != "" || env.Getenv == nil {
			return flag
		}
		return env.Getenv(name)
	}
	ca, cert, key := pick(f.ca, TLSCAEnv), pick(f.cert, TLSCertEnv), pick(f.key, TLSKeyEnv)
	if ca == "" {
		if cert != "" || key != "" {
			return nil, WithHint(errors.New("a TLS client certificate is set but no CA: TLS to bookies needs --tls-ca"),
				"set --tls-ca (or $"+TLSCAEnv+") to the CA certificates that sign the bookies' certificates")
		}
		return nil, nil
	}
	cfg, err := client.TLSConfigFromPEM(ca, cert, key)
	if err != nil {
		return nil, WithHint(err, "check --tls-ca, --tls-cert and --tls-key ($"+TLSCAEnv+", $"+TLSCertEnv+", $"+TLSKeyEnv+")")
	}
	return cfg, nil
}

// bookieTLS is the TLS configuration of the shell's bookie connections.
func (o *ShellOptions) bookieTLS() (*tls.Config, error) { return o.BookieTLS.config(o.env) }

// newBookies returns direct bookie connections with the shell's TLS
// settings, resolving bookie ids through md's registrations.
func (o *ShellOptions) newBookies(log *slog.Logger, md metadata.Registration) (*rereplication.Bookies, error) {
	t, err := o.bookieTLS()
	if err != nil {
		return nil, err
	}
	b := rereplication.NewBookiesTLS(0, log, t)
	b.ResolveWith(md)
	return b, nil
}
