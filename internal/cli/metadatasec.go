package cli

import (
	"errors"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/pki"
)

// The metadata store's TLS and authentication for `folio shell` and `folio
// autorecovery`: flags, else environment variables named as the bookie's
// keys are (server.EnvName), so that one set of exported variables
// configures bookies, shell and AutoRecovery alike:
//
//	--metadata-tls-ca          FOLIO_METADATA_SERVICE_TLS_CA_FILE      metadataServiceTlsCaFile
//	--metadata-tls-cert        FOLIO_METADATA_SERVICE_TLS_CERT_FILE    metadataServiceTlsCertFile
//	--metadata-tls-key         FOLIO_METADATA_SERVICE_TLS_KEY_FILE     metadataServiceTlsKeyFile
//	--metadata-user            FOLIO_METADATA_SERVICE_USER             metadataServiceUser
//	--metadata-password-file   FOLIO_METADATA_SERVICE_PASSWORD_PATH    metadataServicePasswordPath
//
// TLS is on with an etcd+https:// URI. Errors name the flag or the variable
// the bad value came from.

// metadataSecurityFlags hold the flags' values.
type metadataSecurityFlags struct {
	fs                                  *pflag.FlagSet
	ca, cert, key, user, passwordFile   string
	caFlag, certFlag, keyFlag, userFlag string
	passwordFlag                        string
}

const (
	flagMetadataTLSCA        = "metadata-tls-ca"
	flagMetadataTLSCert      = "metadata-tls-cert"
	flagMetadataTLSKey       = "metadata-tls-key"
	flagMetadataUser         = "metadata-user"
	flagMetadataPasswordFile = "metadata-password-file"
)

func (f *metadataSecurityFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.ca, flagMetadataTLSCA, "", "PEM CA certificates that sign etcd's certificate, for an etcd+https:// URI (default $"+server.EnvName(server.KeyMetadataTLSCAFile)+", else the system's roots)")
	fs.StringVar(&f.cert, flagMetadataTLSCert, "", "PEM client certificate for an etcd that requires one (default $"+server.EnvName(server.KeyMetadataTLSCertFile)+")")
	fs.StringVar(&f.key, flagMetadataTLSKey, "", "PEM private key of --metadata-tls-cert (default $"+server.EnvName(server.KeyMetadataTLSKeyFile)+")")
	fs.StringVar(&f.user, flagMetadataUser, "", "etcd user (default $"+server.EnvName(server.KeyMetadataUser)+")")
	fs.StringVar(&f.passwordFile, flagMetadataPasswordFile, "", "file holding the etcd user's password (default $"+server.EnvName(server.KeyMetadataPasswordPath)+")")
}

// settings resolves each setting: the flag when given, else its
// environment variable; each named by where it came from.
func (f *metadataSecurityFlags) settings(env Env) server.MetadataSecuritySettings {
	pick := func(flag, value, key string) (string, string) {
		if f.fs != nil && f.fs.Changed(flag) {
			return value, "--" + flag
		}
		name := server.EnvName(key)
		if env.Getenv != nil {
			if v := env.Getenv(name); v != "" {
				return v, "$" + name
			}
		}
		return "", "--" + flag
	}
	var s server.MetadataSecuritySettings
	var t pki.TLSFiles
	t.CAFile, t.CASetting = pick(flagMetadataTLSCA, f.ca, server.KeyMetadataTLSCAFile)
	t.CertFile, t.CertSetting = pick(flagMetadataTLSCert, f.cert, server.KeyMetadataTLSCertFile)
	t.KeyFile, t.KeySetting = pick(flagMetadataTLSKey, f.key, server.KeyMetadataTLSKeyFile)
	s.TLS = t
	s.User, s.UserSetting = pick(flagMetadataUser, f.user, server.KeyMetadataUser)
	s.PasswordPath, s.PasswordSetting = pick(flagMetadataPasswordFile, f.passwordFile, server.KeyMetadataPasswordPath)
	return s
}

// given reports whether any flag was given on the command line.
func (f *metadataSecurityFlags) given() bool {
	if f.fs == nil {
		return false
	}
	for _, n := range []string{flagMetadataTLSCA, flagMetadataTLSCert, flagMetadataTLSKey, flagMetadataUser, flagMetadataPasswordFile} {
		if f.fs.Changed(n) {
			return true
		}
	}
	return false
}

// MetadataSecurity reads the shell's metadata store security settings
// (flags, else environment) for the store at o.MetadataURI().
func (o *ShellOptions) MetadataSecurity() (metadata.Security, error) {
	if o.security != nil {
		return *o.security, nil
	}
	sec, err := server.LoadMetadataSecurity(o.MetadataURI(), o.metadataSec.settings(o.env))
	if err != nil {
		return sec, WithHint(err, "fix --"+flagMetadataTLSCA+", --"+flagMetadataTLSCert+", --"+flagMetadataTLSKey+", --"+flagMetadataUser+
			", --"+flagMetadataPasswordFile+" or their $FOLIO_METADATA_SERVICE_* variables")
	}
	o.security = &sec
	return sec, nil
}

// clientConfig is a client configuration for the shell's store.
func (o *ShellOptions) clientConfig() (client.Config, error) {
	sec, err := o.MetadataSecurity()
	if err != nil {
		return client.Config{}, err
	}
	t, err := o.bookieTLS()
	if err != nil {
		return client.Config{}, err
	}
	return client.Config{MetadataServiceURI: o.MetadataURI(), MetadataTLS: sec.TLS, MetadataUser: sec.User, MetadataPassword: sec.Password, TLS: t}, nil
}

// securityHint is the hint of a metadata store refusal; "" for other
// errors.
func securityHint(err error) string {
	switch {
	case errors.Is(err, metadata.ErrTLS):
		return "check the URI's scheme (etcd+https:// for TLS) and --" + flagMetadataTLSCA + " (the CA that signs etcd's certificate), --" +
			flagMetadataTLSCert + " and --" + flagMetadataTLSKey + " (a client certificate etcd trusts)"
	case errors.Is(err, metadata.ErrAuthFailed):
		return "check --" + flagMetadataUser + " and --" + flagMetadataPasswordFile + " (or a client certificate whose common name is an etcd user)"
	case errors.Is(err, metadata.ErrPermissionDenied):
		return "the etcd user needs read-write permission on the cluster's keys: etcdctl role grant-permission --prefix <role> readwrite <scope>"
	case errors.Is(err, metadata.ErrBadSecurity):
		return "fix the metadata store security settings (--" + flagMetadataTLSCA + ", --" + flagMetadataUser + ", …)"
	}
	return ""
}

// adminHTTPFlags are the flags of a shell command that reads bookies'
// admin HTTP servers: the TLS files for https servers and the token file
// of servers with httpServerAuthTokenPath.
type adminHTTPFlags struct {
	ca, cert, key, tokenFile string
}

func (f *adminHTTPFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ca, "http-tls-ca", "", "PEM CA certificates that sign the admin HTTP servers' certificates (https://; default: the system's roots)")
	fs.StringVar(&f.cert, "http-tls-cert", "", "PEM client certificate for admin HTTP servers that require one")
	fs.StringVar(&f.key, "http-tls-key", "", "PEM private key of --http-tls-cert")
	fs.StringVar(&f.tokenFile, "http-token-file", "", "file holding the admin token (a bookie's httpServerAuthTokenPath)")
}

// apply reads the files into e's client and token.
func (f *adminHTTPFlags) apply(e *admin.HTTPEndpoints) error {
	files := pki.TLSFiles{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key,
		CASetting: "--http-tls-ca", CertSetting: "--http-tls-cert", KeySetting: "--http-tls-key"}
	if files.Any() {
		conf, err := files.ClientConfig()
		if err != nil {
			return err
		}
		e.Client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
	}
	if f.tokenFile != "" {
		tok, err := pki.ReadSecret("--http-token-file", f.tokenFile)
		if err != nil {
			return err
		}
		e.Token = tok
	}
	return nil
}
