package standalone

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/pki"
)

// A secure standalone (`folio standalone --tls-dir DIR`).
//
// DIR holds a local CA (package pki): ca.pem and ca-key.pem, one server
// certificate (server.pem, server-key.pem; valid for 127.0.0.1, ::1 and
// localhost) that etcd, the admin HTTP server and the bookies present, and
// one client certificate (client.pem, client-key.pem; subject OU "0:folio",
// BookKeeper's role format) for clients, the shell and the standalone's
// own connections. They are generated at the first start and reused on
// every later one; a directory that holds some of the files, or files that
// do not check against each other, is a start-up error (generating new
// ones would lock out every client given the old CA).
//
// With it:
//   - etcd serves TLS only and requires a client certificate of the CA
//     (etcd's --client-cert-auth); the metadata URI is etcd+https://…;
//   - the admin HTTP server serves https and requires a client
//     certificate of the CA, as BookKeeper's does with httpServerTlsEnable;
//   - the bookies and AutoRecovery reach etcd with the client certificate;
//   - the bookies serve START_TLS with the server certificate, require a
//     client certificate of the CA (tlsClientAuthentication) and authorise
//     connections by its role (BookKeeper's BookieAuthZFactory, role
//     "folio"): a plaintext client, or one with a certificate of another CA
//     or role, is refused every request; AutoRecovery's bookie connections
//     use TLS with the client certificate.

// security is what a standalone's parts get from TLSDir; the zero value
// (no TLSDir) is plaintext everywhere.
type security struct {
	dir *pki.Dir
	// etcdTLS is the embedded etcd's client listener.
	etcdTLS *embedetcd.TLS
	// metadata is the standalone's own connection to etcd, and its
	// AutoRecovery's.
	metadata metadata.Security
	// bookieMetadata are the bookies' metadataServiceTls* keys (they share
	// the standalone's driver, but check their configuration as any
	// bookie does).
	bookieMetadata server.MetadataSecurityConfig
	// httpTLS is the admin HTTP server's TLS.
	httpTLS *tls.Config
	// bookieSettings are the bookies' tls* and authorisation keys
	// (BookieTLSSettings), applied before the --bookie-set ones.
	bookieSettings []string
	// bookieClientTLS secures AutoRecovery's bookie connections.
	bookieClientTLS *tls.Config
}

// loadSecurity makes or checks cfg.TLSDir and loads what the parts need.
func loadSecurity(cfg *Config) (security, error) {
	if cfg.TLSDir == "" {
		return security{}, nil
	}
	d, created, err := pki.EnsureDir(cfg.TLSDir, time.Now())
	if err != nil {
		return security{}, fmt.Errorf("--tls-dir: %w", err)
	}
	if created {
		cfg.Logger.Info("generated a local CA and certificates", "dir", d.Path)
	} else {
		cfg.Logger.Info("using the local CA and certificates", "dir", d.Path)
	}
	clientTLS, err := pki.TLSFiles{CAFile: d.CA(), CertFile: d.ClientCert(), KeyFile: d.ClientKey(),
		CASetting: "--tls-dir " + pki.CAFile, CertSetting: "--tls-dir " + pki.ClientCertFile, KeySetting: "--tls-dir " + pki.ClientKeyFile}.ClientConfig()
	if err != nil {
		return security{}, err
	}
	pair, err := pki.LoadKeyPair("--tls-dir "+pki.ServerCertFile, d.ServerCert(), "--tls-dir "+pki.ServerKeyFile, d.ServerKey())
	if err != nil {
		return security{}, err
	}
	return security{
		dir:            &d,
		etcdTLS:        &embedetcd.TLS{CertFile: d.ServerCert(), KeyFile: d.ServerKey(), TrustedCAFile: d.CA(), ClientCertAuth: true},
		metadata:       metadata.Security{TLS: clientTLS},
		bookieMetadata: server.MetadataSecurityConfig{TLSCAFile: d.CA(), TLSCertFile: d.ClientCert(), TLSKeyFile: d.ClientKey()},
		httpTLS: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{pair},
			ClientCAs:    clientTLS.RootCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		},
		bookieSettings:  BookieTLSSettings(d),
		bookieClientTLS: clientTLS.Clone(),
	}, nil
}

// BookieTLSSettings are the bookie configuration keys (BookKeeper's,
// spec/security.md §2) that make a bookie serve START_TLS with d's server
// certificate, require client certificates of d's CA, and admit only
// connections whose certificate carries the role pki.LocalClientRole
// (BookieAuthZFactory): what a secure standalone's bookies run with.
func BookieTLSSettings(d pki.Dir) []string {
	return []string{
		"tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory",
		"tlsKeyStoreType=PEM",
		"tlsKeyStore=" + d.ServerKey(),
		"tlsCertificatePath=" + d.ServerCert(),
		"tlsTrustStoreType=PEM",
		"tlsTrustStore=" + d.CA(),
		"tlsClientAuthentication=true",
		"bookieAuthProviderFactoryClass=org.apache.bookkeeper.tls.BookieAuthZFactory",
		"authorizedRoles=" + pki.LocalClientRole,
	}
}
