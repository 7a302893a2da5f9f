package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/tlsconf"
)

// The security of bookie connections: BookKeeper's TLS keys
// (AbstractConfiguration, with Java's names and meaning), its authorisation
// provider keys, the client side of the bookie's own connections to other
// bookies (AutoRecovery), and permittedStartupUsers. Everything here fails
// closed: a key asking for security Folio does not implement, or a setting
// Folio cannot honour, stops the bookie at start-up with an error naming the
// key, before the metadata store is contacted (Config.Validate).

// TLSContextFactory is the tlsProviderFactoryClass Folio implements:
// BookKeeper's TLSContextFactory, with PEM files.
const TLSContextFactory = "org.apache.bookkeeper.tls.TLSContextFactory"

// DefaultStartTLSTimeout is Java's startTLSTimeoutSecs.
const DefaultStartTLSTimeout = 10 * time.Second

// SecurityConfig is the security part of a bookie's Config. Fields hold
// the keys as read; Config.Validate checks them together.
type SecurityConfig struct {
	// TLSProviderFactoryClass enables TLS (tlsProviderFactoryClass): it
	// must be TLSContextFactory. TLSProvider (tlsProvider, OpenSSL or JDK)
	// picks a Java engine and is accepted and ignored.
	TLSProviderFactoryClass string
	TLSProvider             string
	// TLSClientAuthentication: the bookie requires a client certificate
	// that verifies against the trust store; the bookie's own client
	// presents its certificate (tlsClientAuthentication).
	TLSClientAuthentication bool
	// The key store: its type (tlsKeyStoreType; Java's default JKS; Folio
	// reads PEM only), the private key file for PEM (tlsKeyStore, PKCS#8),
	// and a password file (tlsKeyStorePasswordPath: encrypted keys are not
	// supported). TLSCertificatePath is the certificate chain for PEM.
	TLSKeyStoreType         string
	TLSKeyStore             string
	TLSKeyStorePasswordPath string
	TLSCertificatePath      string
	// The trust store: type (tlsTrustStoreType, default JKS; PEM only) and
	// the CA certificates file (tlsTrustStore). tlsTrustStorePasswordPath
	// has no use with PEM (Java ignores it too).
	TLSTrustStoreType         string
	TLSTrustStore             string
	TLSTrustStorePasswordPath string
	// TLSEnabledProtocols and TLSEnabledCipherSuites restrict the
	// handshake (tlsEnabledProtocols, tlsEnabledCipherSuites; Java's names).
	TLSEnabledProtocols    []string
	TLSEnabledCipherSuites []string
	// TLSCertFilesRefresh re-reads the key, certificate and trust files at
	// this period when they changed (tlsCertFilesRefreshDurationSeconds;
	// 0 never): new connections use the new files.
	TLSCertFilesRefresh time.Duration

	// The bookie's own client (AutoRecovery): host name verification of
	// the bookies it connects to (tlsHostnameVerificationEnabled, default
	// false), the time allowed for START_TLS and the handshake
	// (startTLSTimeoutSecs), and Java's deprecated client aliases of the
	// store keys (clientKeyStoreType, clientKeyStore,
	// clientKeyStorePasswordPath, clientTrustStoreType, clientTrustStore,
	// clientTrustStorePasswordPath), which take precedence for the client.
	TLSHostnameVerification      bool
	StartTLSTimeout              time.Duration
	ClientKeyStoreType           string
	ClientKeyStore               string
	ClientKeyStorePasswordPath   string
	ClientTrustStoreType         string
	ClientTrustStore             string
	ClientTrustStorePasswordPath string

	// BookieAuthProviderFactoryClass authenticates connections
	// (bookieAuthProviderFactoryClass): empty for none, or
	// BookieAuthZFactory with AuthorizedRoles (authorizedRoles).
	// ClientAuthProviderFactoryClass (clientAuthProviderFactoryClass) is
	// the bookie's own client's: Folio implements none.
	BookieAuthProviderFactoryClass string
	AuthorizedRoles                []string
	ClientAuthProviderFactoryClass string

	// PermittedStartupUsers: when set, the bookie starts only as one of
	// these users (permittedStartupUsers).
	PermittedStartupUsers    []string
	permittedStartupUsersSet bool
}

// unsupportedSecurityKeys configure security Folio does not implement
// (SASL and Kerberos). Setting any of them is an error: the operator asked
// for protection the bookie would not give.
var unsupportedSecurityKeys = []string{
	"saslJaasBookieSectionName", "saslJaasAuditorSectionName", "saslJaasClientSectionName",
	"saslJaasClientAllowedIds", "kerberos.kinit", "bookkeeper.sasl.servicename",
}

func secString(f func(*SecurityConfig) *string) func(*Config, string) error {
	return stringKey(func(c *Config) *string { return f(&c.Security) })
}

// rawListKey reads a comma-separated list keeping empty elements, as
// Commons Configuration's getStringArray does (so that "a,,b" can be refused).
func rawListKey(f func(*SecurityConfig) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		if strings.TrimSpace(v) != "" {
			for _, s := range strings.Split(v, ",") {
				out = append(out, strings.TrimSpace(s))
			}
		}
		*f(&c.Security) = out
		return nil
	}
}

var securityKeys = []configKey{
	{"tlsProviderFactoryClass", secString(func(s *SecurityConfig) *string { return &s.TLSProviderFactoryClass })},
	{"tlsProvider", secString(func(s *SecurityConfig) *string { return &s.TLSProvider })},
	{"tlsClientAuthentication", boolKey(func(c *Config) *bool { return &c.Security.TLSClientAuthentication })},
	{"tlsKeyStoreType", secString(func(s *SecurityConfig) *string { return &s.TLSKeyStoreType })},
	{"tlsKeyStore", secString(func(s *SecurityConfig) *string { return &s.TLSKeyStore })},
	{"tlsKeyStorePasswordPath", secString(func(s *SecurityConfig) *string { return &s.TLSKeyStorePasswordPath })},
	{"tlsCertificatePath", secString(func(s *SecurityConfig) *string { return &s.TLSCertificatePath })},
	{"tlsTrustStoreType", secString(func(s *SecurityConfig) *string { return &s.TLSTrustStoreType })},
	{"tlsTrustStore", secString(func(s *SecurityConfig) *string { return &s.TLSTrustStore })},
	{"tlsTrustStorePasswordPath", secString(func(s *SecurityConfig) *string { return &s.TLSTrustStorePasswordPath })},
	{"tlsEnabledProtocols", listKey(func(c *Config) *[]string { return &c.Security.TLSEnabledProtocols })},
	{"tlsEnabledCipherSuites", listKey(func(c *Config) *[]string { return &c.Security.TLSEnabledCipherSuites })},
	{"tlsCertFilesRefreshDurationSeconds", secondsKey(func(c *Config) *time.Duration { return &c.Security.TLSCertFilesRefresh })},
	{"tlsHostnameVerificationEnabled", boolKey(func(c *Config) *bool { return &c.Security.TLSHostnameVerification })},
	{"startTLSTimeoutSecs", secondsKey(func(c *Config) *time.Duration { return &c.Security.StartTLSTimeout })},
	{"clientKeyStoreType", secString(func(s *SecurityConfig) *string { return &s.ClientKeyStoreType })},
	{"clientKeyStore", secString(func(s *SecurityConfig) *string { return &s.ClientKeyStore })},
	{"clientKeyStorePasswordPath", secString(func(s *SecurityConfig) *string { return &s.ClientKeyStorePasswordPath })},
	{"clientTrustStoreType", secString(func(s *SecurityConfig) *string { return &s.ClientTrustStoreType })},
	{"clientTrustStore", secString(func(s *SecurityConfig) *string { return &s.ClientTrustStore })},
	{"clientTrustStorePasswordPath", secString(func(s *SecurityConfig) *string { return &s.ClientTrustStorePasswordPath })},
	{"bookieAuthProviderFactoryClass", secString(func(s *SecurityConfig) *string { return &s.BookieAuthProviderFactoryClass })},
	{"authorizedRoles", rawListKey(func(s *SecurityConfig) *[]string { return &s.AuthorizedRoles })},
	{"clientAuthProviderFactoryClass", secString(func(s *SecurityConfig) *string { return &s.ClientAuthProviderFactoryClass })},
	{"permittedStartupUsers", func(c *Config, v string) error {
		c.Security.permittedStartupUsersSet = true
		return rawListKey(func(s *SecurityConfig) *[]string { return &s.PermittedStartupUsers })(c, v)
	}},
}

func init() {
	// The security keys are Config keys like any other (files,
	// FOLIO_<KEY> variables, --set).
	configKeys = append(configKeys, securityKeys...)
	for _, k := range unsupportedSecurityKeys {
		configKeys = append(configKeys, configKey{k, func(*Config, string) error {
			return errors.New("SASL and Kerberos authentication are not supported by Folio; remove the key (Folio's authentication is TLS client certificates with " + BookieAuthZFactory + ")")
		}})
	}
}

// TLSEnabled reports whether the bookie serves TLS (tlsProviderFactoryClass
// is set).
func (s *SecurityConfig) TLSEnabled() bool { return s.TLSProviderFactoryClass != "" }

// storeType is a store type as Java reads it: the default JKS when unset.
func storeType(v string) string {
	if v == "" {
		return "JKS"
	}
	return v
}

// pemStoreError explains a store type Folio cannot read.
func pemStoreError(key, typ, fileKey, what string) error {
	unset := ""
	if typ == "" {
		unset = " (Java's default when unset)"
	}
	switch strings.ToUpper(storeType(typ)) {
	case "JKS", "PKCS12":
		return fmt.Errorf("%s=%s%s: Folio reads PEM files only; set %s=PEM and %s to the %s (convert the store with keytool -importkeystore and openssl pkcs12)",
			key, storeType(typ), unset, key, fileKey, what)
	}
	return fmt.Errorf("%s=%s: unknown store type; Folio reads PEM (Java also knows JKS and PKCS12)", key, typ)
}

// validate checks the keys together. autoRecovery says the bookie runs a
// client of its own (its AutoRecovery), whose TLS settings are checked
// too. Files are not read here (see Config.Validate).
func (s *SecurityConfig) validate(autoRecovery bool) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch s.BookieAuthProviderFactoryClass {
	case "":
	case BookieAuthZFactory:
		if len(s.AuthorizedRoles) == 0 {
			add("bookieAuthProviderFactoryClass is set to 'BookieAuthZFactory' but no roles set for configuration field 'authorizedRoles'")
		} else if slices.Contains(s.AuthorizedRoles, "") {
			add("authorizedRoles=%s: an empty role (BookieAuthZFactory refuses it)", strings.Join(s.AuthorizedRoles, ","))
		}
		if !s.TLSEnabled() {
			add("bookieAuthProviderFactoryClass=%s authorises by TLS client certificate, but TLS is off: set tlsProviderFactoryClass=%s (every connection would be refused)", BookieAuthZFactory, TLSContextFactory)
		} else if !s.TLSClientAuthentication {
			add("bookieAuthProviderFactoryClass=%s needs client certificates: set tlsClientAuthentication=true (every connection would be refused)", BookieAuthZFactory)
		}
	default:
		add("bookieAuthProviderFactoryClass=%s: Folio implements only %s (TLS certificate roles); SASL, Kerberos and custom providers are not supported, and the bookie will not start unauthenticated",
			s.BookieAuthProviderFactoryClass, BookieAuthZFactory)
	}
	if s.ClientAuthProviderFactoryClass != "" {
		add("clientAuthProviderFactoryClass=%s: Folio's bookie client implements no authentication provider (it authenticates with its TLS certificate); remove the key", s.ClientAuthProviderFactoryClass)
	}

	if !s.TLSEnabled() {
		// Keys that only make sense with TLS: someone meant to turn it on.
		for _, k := range []struct{ key, v string }{
			{"tlsKeyStore", s.TLSKeyStore}, {"tlsCertificatePath", s.TLSCertificatePath}, {"tlsTrustStore", s.TLSTrustStore},
			{"clientKeyStore", s.ClientKeyStore}, {"clientTrustStore", s.ClientTrustStore},
		} {
			if k.v != "" {
				add("%s is set but tlsProviderFactoryClass is not, so TLS would be off: set tlsProviderFactoryClass=%s, or remove %s", k.key, TLSContextFactory, k.key)
			}
		}
		if s.TLSClientAuthentication {
			add("tlsClientAuthentication=true but tlsProviderFactoryClass is not set, so TLS is off and no client would be authenticated: set tlsProviderFactoryClass=%s", TLSContextFactory)
		}
		return errors.Join(errs...)
	}

	if s.TLSProviderFactoryClass != TLSContextFactory {
		add("tlsProviderFactoryClass=%s: Folio implements only %s (TLS from PEM files), and will not start without the TLS asked for", s.TLSProviderFactoryClass, TLSContextFactory)
	}
	// The server side: key store and certificate, trust store with client
	// authentication.
	if !strings.EqualFold(s.TLSKeyStoreType, "PEM") {
		errs = append(errs, pemStoreError("tlsKeyStoreType", s.TLSKeyStoreType, "tlsKeyStore", "PKCS#8 private key file (and tlsCertificatePath to the certificate chain)"))
	} else {
		if s.TLSKeyStore == "" {
			add("tlsKeyStore is required with TLS: the bookie's private key file (PEM, PKCS#8)")
		}
		if s.TLSCertificatePath == "" {
			add("tlsCertificatePath is required with tlsKeyStoreType=PEM: the bookie's certificate chain file")
		}
	}
	if s.TLSKeyStorePasswordPath != "" {
		add("tlsKeyStorePasswordPath=%s: encrypted private keys are not supported by Folio; use an unencrypted PKCS#8 key file readable only by the bookie's user", s.TLSKeyStorePasswordPath)
	}
	if s.TLSClientAuthentication {
		if !strings.EqualFold(s.TLSTrustStoreType, "PEM") {
			errs = append(errs, pemStoreError("tlsTrustStoreType", s.TLSTrustStoreType, "tlsTrustStore", "file of the CA certificates that sign client certificates"))
		} else if s.TLSTrustStore == "" {
			add("tlsTrustStore is required with tlsClientAuthentication=true: the CA certificates that verify clients (PEM)")
		}
	}
	if _, err := tlsconf.ParseRestrictions(s.TLSEnabledProtocols, s.TLSEnabledCipherSuites, "tlsEnabledProtocols", "tlsEnabledCipherSuites"); err != nil {
		errs = append(errs, err)
	}

	if autoRecovery {
		// The client side (Java's ClientConfiguration(serverConf): the
		// client* aliases first, then the tls* keys).
		tt, tk := firstSet(s.ClientTrustStoreType, "clientTrustStoreType", s.TLSTrustStoreType, "tlsTrustStoreType")
		ts, tsk := firstSet(s.ClientTrustStore, "clientTrustStore", s.TLSTrustStore, "tlsTrustStore")
		if !strings.EqualFold(tt, "PEM") {
			errs = append(errs, fmt.Errorf("AutoRecovery's client verifies bookies with the trust store: %w", pemStoreError(tk, tt, tsk, "CA certificates file")))
		} else if ts == "" {
			add("%s is required for AutoRecovery's TLS client (autoRecoveryDaemonEnabled=true): the CA certificates that verify bookies (PEM)", tsk)
		}
		if s.ClientTrustStorePasswordPath != "" || s.ClientKeyStorePasswordPath != "" {
			add("clientKeyStorePasswordPath and clientTrustStorePasswordPath are not supported: Folio reads unencrypted PEM files only")
		}
		if s.TLSClientAuthentication {
			kt, kk := firstSet(s.ClientKeyStoreType, "clientKeyStoreType", s.TLSKeyStoreType, "tlsKeyStoreType")
			if !strings.EqualFold(kt, "PEM") {
				errs = append(errs, fmt.Errorf("AutoRecovery's client presents a certificate: %w", pemStoreError(kk, kt, "tlsKeyStore", "PKCS#8 private key file")))
			}
		}
	}
	return errors.Join(errs...)
}

// firstSet returns the first non-empty value and its key, else the second
// key with an empty value.
func firstSet(v1, k1, v2, k2 string) (string, string) {
	if v1 != "" {
		return v1, k1
	}
	return v2, k2
}

func (s *SecurityConfig) restrictions() tlsconf.Restrictions {
	r, _ := tlsconf.ParseRestrictions(s.TLSEnabledProtocols, s.TLSEnabledCipherSuites, "tlsEnabledProtocols", "tlsEnabledCipherSuites")
	return r
}

// loadFiles reads every file the configuration names, so that a missing or
// unreadable one stops the bookie at start-up. Only after validate passed.
func (s *SecurityConfig) loadFiles(autoRecovery bool) error {
	if !s.TLSEnabled() {
		return nil
	}
	if _, _, err := s.ServerTLS(nil, nil); err != nil {
		return err
	}
	if autoRecovery {
		if _, err := s.ClientTLS(nil, nil); err != nil {
			return fmt.Errorf("AutoRecovery's TLS client: %w", err)
		}
	}
	return nil
}

// ServerTLS returns the TLS configuration and the Authorizer of the bookie's
// listener (Options.TLS, Options.Authorizer), both nil without TLS. clk
// times the file refresh and log receives reloads (nil: wall clock, no
// logs). Call it on a validated Config.
func (s *SecurityConfig) ServerTLS(clk clock.Clock, log *slog.Logger) (*tls.Config, Authorizer, error) {
	if !s.TLSEnabled() {
		return nil, nil, nil
	}
	cfg, err := tlsconf.NewServer(tlsconf.Options{
		Files:         tlsconf.Files{Cert: s.TLSCertificatePath, Key: s.TLSKeyStore, CA: s.TLSTrustStore},
		Names:         tlsconf.Names{Cert: "tlsCertificatePath", Key: "tlsKeyStore", CA: "tlsTrustStore"},
		ClientAuth:    s.TLSClientAuthentication,
		Restrictions:  s.restrictions(),
		RefreshPeriod: s.TLSCertFilesRefresh,
		Clock:         clk,
		Logger:        log,
	})
	if err != nil {
		return nil, nil, err
	}
	var auth Authorizer
	if s.BookieAuthProviderFactoryClass == BookieAuthZFactory {
		auth = RoleAuthorizer{Roles: slices.Clone(s.AuthorizedRoles)}
	}
	return cfg, auth, nil
}

// ClientTLS returns the TLS configuration of the bookie's own connections
// to other bookies (its AutoRecovery), as Java builds its client from the
// server configuration: the trust store verifies the bookies, and with
// tlsClientAuthentication the bookie's key and certificate are presented (so
// with BookieAuthZFactory on the other bookies, the bookie's certificate
// needs an authorised role). nil without TLS.
func (s *SecurityConfig) ClientTLS(clk clock.Clock, log *slog.Logger) (*tls.Config, error) {
	if !s.TLSEnabled() {
		return nil, nil
	}
	ca, caKey := firstSet(s.ClientTrustStore, "clientTrustStore", s.TLSTrustStore, "tlsTrustStore")
	o := tlsconf.Options{
		Files:          tlsconf.Files{CA: ca},
		Names:          tlsconf.Names{Cert: "tlsCertificatePath", CA: caKey},
		VerifyHostname: s.TLSHostnameVerification,
		Restrictions:   s.restrictions(),
		RefreshPeriod:  s.TLSCertFilesRefresh,
		Clock:          clk,
		Logger:         log,
	}
	if s.TLSClientAuthentication {
		key, keyKey := firstSet(s.ClientKeyStore, "clientKeyStore", s.TLSKeyStore, "tlsKeyStore")
		o.Files.Cert, o.Files.Key, o.Names.Key = s.TLSCertificatePath, key, keyKey
	}
	return tlsconf.NewClient(o)
}

// StartTLSTimeoutOrDefault is StartTLSTimeout, or Java's default.
func (s *SecurityConfig) StartTLSTimeoutOrDefault() time.Duration {
	if s.StartTLSTimeout > 0 {
		return s.StartTLSTimeout
	}
	return DefaultStartTLSTimeout
}

// CheckStartupUser refuses to start as a user not in
// permittedStartupUsers, with Java's message (BookieServer.validateUser).
func (s *SecurityConfig) CheckStartupUser() error {
	if !s.permittedStartupUsersSet {
		return nil
	}
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("permittedStartupUsers is set but the current user is unknown: %w", err)
	}
	if slices.Contains(s.PermittedStartupUsers, u.Username) {
		return nil
	}
	return fmt.Errorf("System cannot start because current user isn't in permittedStartupUsers. Current user: %s permittedStartupUsers: [%s]",
		u.Username, strings.Join(s.PermittedStartupUsers, ", "))
}
