package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/pki"
)

// The security of the bookie's metadata store connection and of its admin
// HTTP server: configuration keys, and LoadSecurity, which reads and checks
// every file they name before the bookie contacts anything.
//
// Security configuration fails closed (DESIGN.md §2): a key naming a file
// that is missing, unreadable or in a format Folio does not read, a
// combination that contradicts itself, or a setting the configured store
// cannot honour is a start-up error naming the key and the file, never a
// warning after which the bookie runs less protected than configured.
//
// Metadata store keys (Folio's own: BookKeeper's etcd driver has no TLS
// or authentication; PEM files):
//
//	metadataServiceTlsCaFile     CA certificates that sign etcd's certificate
//	metadataServiceTlsCertFile   client certificate chain, for an etcd that requires one
//	metadataServiceTlsKeyFile    its private key (PKCS#8, PKCS#1 or SEC 1; unencrypted)
//	metadataServiceUser          etcd user
//	metadataServicePasswordPath  file holding that user's password
//
// TLS is on when metadataServiceUri is etcd+https://…; TLS keys with a
// plaintext etcd:// URI, a user without a password file (or the other
// way round), or any of these keys with a ZooKeeper store are refused.
//
// Admin HTTP server keys: BookKeeper's httpServerTlsEnable,
// httpServerKeyStorePath, httpServerKeyStorePassword,
// httpServerTrustStorePath and httpServerTrustStorePassword, read as PEM
// (BookKeeper reads JKS there; a JKS or PKCS#12 file is refused, naming
// the key): httpServerKeyStorePath is the private key, Folio's
// httpServerCertificatePath its certificate chain, and
// httpServerTrustStorePath the CAs of the client certificates, which are
// then required, as BookKeeper requires them whenever TLS is on. Without a
// trust store Folio serves TLS without client certificates. Folio's own
// httpServerAuthTokenPath names a file holding a bearer token that every
// route but the health and metrics ones requires (AdminOptions), and
// httpServerPprofEnabled serves /debug/pprof. The HTTP keys are checked
// only when httpServerEnabled is true.

// MetadataSecurityConfig is the metadata store connection's security
// (the metadataService* keys): file paths, read by LoadSecurity.
type MetadataSecurityConfig struct {
	TLSCAFile, TLSCertFile, TLSKeyFile string
	User, PasswordPath                 string
}

// HTTPSecurityConfig is the admin HTTP server's security (the
// httpServer* keys besides httpServerEnabled, Host and Port).
type HTTPSecurityConfig struct {
	TLSEnable bool
	// KeyStorePath is the server's private key and CertificatePath its
	// certificate chain (PEM).
	KeyStorePath, CertificatePath string
	// KeyStorePassword must be empty: Folio reads unencrypted keys.
	KeyStorePassword string
	// TrustStorePath, when set, holds the CAs whose client certificates
	// the server requires.
	TrustStorePath string
	// TrustStorePassword is accepted and unused: a PEM trust store has no
	// password.
	TrustStorePassword string
	// AuthTokenPath names the file of the bearer token.
	AuthTokenPath string
	// PprofEnabled serves /debug/pprof.
	PprofEnabled bool
}

// Configuration key names of this file.
const (
	KeyMetadataTLSCAFile      = "metadataServiceTlsCaFile"
	KeyMetadataTLSCertFile    = "metadataServiceTlsCertFile"
	KeyMetadataTLSKeyFile     = "metadataServiceTlsKeyFile"
	KeyMetadataUser           = "metadataServiceUser"
	KeyMetadataPasswordPath   = "metadataServicePasswordPath"
	KeyHTTPTLSEnable          = "httpServerTlsEnable"
	KeyHTTPKeyStorePath       = "httpServerKeyStorePath"
	KeyHTTPKeyStorePassword   = "httpServerKeyStorePassword"
	KeyHTTPCertificatePath    = "httpServerCertificatePath"
	KeyHTTPTrustStorePath     = "httpServerTrustStorePath"
	KeyHTTPTrustStorePassword = "httpServerTrustStorePassword"
	KeyHTTPAuthTokenPath      = "httpServerAuthTokenPath"
	KeyHTTPPprofEnabled       = "httpServerPprofEnabled"
)

func init() {
	configKeys = append(configKeys,
		configKey{KeyMetadataTLSCAFile, stringKey(func(c *Config) *string { return &c.MetadataSecurity.TLSCAFile })},
		configKey{KeyMetadataTLSCertFile, stringKey(func(c *Config) *string { return &c.MetadataSecurity.TLSCertFile })},
		configKey{KeyMetadataTLSKeyFile, stringKey(func(c *Config) *string { return &c.MetadataSecurity.TLSKeyFile })},
		configKey{KeyMetadataUser, stringKey(func(c *Config) *string { return &c.MetadataSecurity.User })},
		configKey{KeyMetadataPasswordPath, stringKey(func(c *Config) *string { return &c.MetadataSecurity.PasswordPath })},
		configKey{KeyHTTPTLSEnable, boolKey(func(c *Config) *bool { return &c.HTTPSecurity.TLSEnable })},
		configKey{KeyHTTPKeyStorePath, stringKey(func(c *Config) *string { return &c.HTTPSecurity.KeyStorePath })},
		configKey{KeyHTTPKeyStorePassword, stringKey(func(c *Config) *string { return &c.HTTPSecurity.KeyStorePassword })},
		configKey{KeyHTTPCertificatePath, stringKey(func(c *Config) *string { return &c.HTTPSecurity.CertificatePath })},
		configKey{KeyHTTPTrustStorePath, stringKey(func(c *Config) *string { return &c.HTTPSecurity.TrustStorePath })},
		configKey{KeyHTTPTrustStorePassword, stringKey(func(c *Config) *string { return &c.HTTPSecurity.TrustStorePassword })},
		configKey{KeyHTTPAuthTokenPath, stringKey(func(c *Config) *string { return &c.HTTPSecurity.AuthTokenPath })},
		configKey{KeyHTTPPprofEnabled, boolKey(func(c *Config) *bool { return &c.HTTPSecurity.PprofEnabled })},
	)
}

// Security is what LoadSecurity read: ready to use.
type Security struct {
	// Metadata is how the bookie (and AutoRecovery in its process)
	// connects to the metadata store.
	Metadata metadata.Security
	// HTTPTLS is the admin HTTP server's TLS configuration; nil serves
	// plaintext.
	HTTPTLS *tls.Config
	// HTTP are the admin handler's options (token, pprof).
	HTTP AdminOptions
}

// LoadSecurity reads and checks every security setting of c, reporting
// every problem at once. It does no network I/O: call it before anything
// is contacted.
func (c *Config) LoadSecurity() (Security, error) {
	var sec Security
	var errs []error
	if c.ZKEnableSecurity {
		errs = append(errs, errZKEnableSecurity)
	}
	md, err := c.MetadataSecurity.load(c.MetadataServiceURI)
	if err != nil {
		errs = append(errs, err)
	}
	sec.Metadata = md
	if c.HTTPServerEnabled {
		sec.HTTPTLS, sec.HTTP, err = c.HTTPSecurity.load()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Security{}, fmt.Errorf("security configuration: %w", errors.Join(errs...))
	}
	return sec, nil
}

// LoadMetadataSecurity reads only the metadata store settings (for tools
// that open the bookie's store without running the bookie).
func (c *Config) LoadMetadataSecurity() (metadata.Security, error) {
	sec, err := c.MetadataSecurity.load(c.MetadataServiceURI)
	if err != nil {
		return sec, fmt.Errorf("security configuration: %w", err)
	}
	return sec, nil
}

var errZKEnableSecurity = errors.New("zkEnableSecurity=true asks for ZooKeeper ACLs, which Folio does not support: its znodes would be open to anyone; remove the key (and run ZooKeeper without required authentication)")

// MetadataSecuritySettings are metadata store security settings with the
// names of the settings they came from (configuration keys, flags or
// environment variables), for errors that say which one to fix. Empty
// values are not set.
type MetadataSecuritySettings struct {
	// TLS are the CA, client certificate and key files.
	TLS pki.TLSFiles
	// User and its setting; PasswordPath, the file of its password, and
	// its setting.
	User, UserSetting             string
	PasswordPath, PasswordSetting string
}

func (m MetadataSecurityConfig) settings() MetadataSecuritySettings {
	return MetadataSecuritySettings{
		TLS: pki.TLSFiles{CAFile: m.TLSCAFile, CertFile: m.TLSCertFile, KeyFile: m.TLSKeyFile,
			CASetting: KeyMetadataTLSCAFile, CertSetting: KeyMetadataTLSCertFile, KeySetting: KeyMetadataTLSKeyFile},
		User: m.User, UserSetting: KeyMetadataUser,
		PasswordPath: m.PasswordPath, PasswordSetting: KeyMetadataPasswordPath,
	}
}

func (m MetadataSecurityConfig) load(uri string) (metadata.Security, error) {
	return LoadMetadataSecurity(uri, m.settings())
}

// LoadMetadataSecurity checks the settings against the metadata service
// URI and reads their files: TLS settings need an etcd+https:// URI, a user
// needs a password file and the other way round, and only etcd takes any
// of them. Every problem is reported, each naming its setting (and file).
func LoadMetadataSecurity(uri string, s MetadataSecuritySettings) (metadata.Security, error) {
	var sec metadata.Security
	var set, tlsSet []string
	for _, kv := range [][2]string{{s.TLS.CASetting, s.TLS.CAFile}, {s.TLS.CertSetting, s.TLS.CertFile}, {s.TLS.KeySetting, s.TLS.KeyFile}} {
		if kv[1] != "" {
			tlsSet = append(tlsSet, kv[0])
		}
	}
	set = append(set, tlsSet...)
	if s.User != "" {
		set = append(set, s.UserSetting)
	}
	if s.PasswordPath != "" {
		set = append(set, s.PasswordSetting)
	}
	if len(set) == 0 {
		return sec, nil
	}
	u, err := metadata.ParseURI(uri)
	if err != nil {
		return sec, err
	}
	if u.Scheme != "etcd" {
		return sec, fmt.Errorf("%s: the metadata store %s is reached without TLS or authentication (only etcd has them in Folio): remove the setting(s), or use an etcd store", strings.Join(set, ", "), uri)
	}
	var errs []error
	if len(tlsSet) > 0 {
		if u.SchemeType != "https" {
			tlsURI := &metadata.URI{Scheme: "etcd", SchemeType: "https", Hosts: u.Hosts, Scope: u.Scope}
			errs = append(errs, fmt.Errorf("%s set, but the metadata service URI %s is plaintext: use %s for TLS, or remove the TLS settings",
				strings.Join(tlsSet, ", "), uri, tlsURI))
		} else if sec.TLS, err = s.TLS.ClientConfig(); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case s.User != "" && s.PasswordPath == "":
		errs = append(errs, fmt.Errorf("%s is set but %s is not: the user needs its password file", s.UserSetting, s.PasswordSetting))
	case s.User == "" && s.PasswordPath != "":
		errs = append(errs, fmt.Errorf("%s is set but %s is not: whose password is it?", s.PasswordSetting, s.UserSetting))
	case s.User != "":
		sec.User = s.User
		if sec.Password, err = pki.ReadSecret(s.PasswordSetting, s.PasswordPath); err != nil {
			errs = append(errs, err)
		}
	}
	return sec, errors.Join(errs...)
}

func (h HTTPSecurityConfig) load() (*tls.Config, AdminOptions, error) {
	opts := AdminOptions{Pprof: h.PprofEnabled}
	var errs []error
	if h.AuthTokenPath != "" {
		tok, err := pki.ReadSecret(KeyHTTPAuthTokenPath, h.AuthTokenPath)
		if err != nil {
			errs = append(errs, err)
		}
		opts.Token = tok
	}
	if !h.TLSEnable {
		for _, kv := range [][2]string{{KeyHTTPKeyStorePath, h.KeyStorePath}, {KeyHTTPCertificatePath, h.CertificatePath}, {KeyHTTPTrustStorePath, h.TrustStorePath}} {
			if kv[1] != "" {
				errs = append(errs, fmt.Errorf("%s is set but %s is not true: the admin HTTP server would serve plaintext; set %s=true, or remove %s", kv[0], KeyHTTPTLSEnable, KeyHTTPTLSEnable, kv[0]))
			}
		}
		return nil, opts, errors.Join(errs...)
	}
	if h.KeyStorePassword != "" {
		errs = append(errs, fmt.Errorf("%s is set: Folio reads the admin HTTP server's key as an unencrypted PEM file (%s) and takes no key store password; decrypt the key, keep it readable by Folio's user only, and remove %s",
			KeyHTTPKeyStorePassword, KeyHTTPKeyStorePath, KeyHTTPKeyStorePassword))
	}
	if h.KeyStorePath == "" || h.CertificatePath == "" {
		errs = append(errs, fmt.Errorf("%s=true needs %s (the PEM private key) and %s (its PEM certificate chain)", KeyHTTPTLSEnable, KeyHTTPKeyStorePath, KeyHTTPCertificatePath))
		return nil, opts, errors.Join(errs...)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	pair, err := pki.LoadKeyPair(KeyHTTPCertificatePath, h.CertificatePath, KeyHTTPKeyStorePath, h.KeyStorePath)
	if err != nil {
		errs = append(errs, err)
	} else {
		if pair.Leaf.NotAfter.Before(time.Now()) {
			errs = append(errs, fmt.Errorf("%s %s: the certificate expired at %s", KeyHTTPCertificatePath, h.CertificatePath, pair.Leaf.NotAfter.Format(time.RFC3339)))
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	if h.TrustStorePath != "" {
		pool, err := pki.LoadCertPool(KeyHTTPTrustStorePath, h.TrustStorePath)
		if err != nil {
			errs = append(errs, err)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	if len(errs) > 0 {
		return nil, opts, errors.Join(errs...)
	}
	return conf, opts, nil
}
