package etcdtest

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/pki"
)

// Credentials of StartSecure's etcd.
const (
	RootPassword = "root-secret"
	User         = "folio"
	Password     = "folio-secret"
	// UserPrefix is what User may read and write: every Scope.
	UserPrefix = "/folio-test/"
)

// SecureOptions choose what StartSecure's etcd demands.
type SecureOptions struct {
	// ClientCertAuth requires a client certificate signed by the test CA.
	ClientCertAuth bool
	// Auth turns on etcd's authentication with the root user and User
	// (password Password, read-write on UserPrefix).
	Auth bool
}

// Secure is an embedded etcd serving TLS with certificates of a test CA
// generated in a t.TempDir(), as `folio standalone --tls-dir` makes them.
type Secure struct {
	*embedetcd.Server
	// Dir holds ca.pem, server.pem, client.pem and their keys.
	Dir  pki.Dir
	Opts SecureOptions
}

// StartSecure starts an embedded etcd that serves clients over TLS only
// (and, as o says, checks client certificates and users), stopped by
// t.Cleanup.
func StartSecure(t testing.TB, o SecureOptions, opts ...Option) *Secure {
	t.Helper()
	dir, _, err := pki.EnsureDir(t.TempDir(), time.Now())
	if err != nil {
		t.Fatalf("etcdtest: test CA: %v", err)
	}
	all := []Option{WithConfig(func(c *embedetcd.Config) {
		c.ClientTLS = &embedetcd.TLS{CertFile: dir.ServerCert(), KeyFile: dir.ServerKey(), TrustedCAFile: dir.CA(), ClientCertAuth: o.ClientCertAuth}
		if o.Auth {
			c.Auth = &embedetcd.Auth{RootPassword: RootPassword, BcryptCost: 4, Users: []embedetcd.User{{Name: User, Password: Password, Prefix: UserPrefix}}}
		}
	})}
	srv := Start(t, append(all, opts...)...)
	return &Secure{Server: srv, Dir: dir, Opts: o}
}

// ClientTLS is a client TLS configuration that trusts the test CA and
// presents the test client certificate.
func (s *Secure) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	c, err := pki.TLSFiles{CAFile: s.Dir.CA(), CertFile: s.Dir.ClientCert(), KeyFile: s.Dir.ClientKey()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Security is what a Folio process needs to connect: the client TLS
// configuration and, with Auth, User and Password.
func (s *Secure) Security(t testing.TB) metadata.Security {
	t.Helper()
	sec := metadata.Security{TLS: s.ClientTLS(t)}
	if s.Opts.Auth {
		sec.User, sec.Password = User, Password
	}
	return sec
}
