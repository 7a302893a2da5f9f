package etcd_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/pki"
)

// openSec opens uri with sec, failing the test on error.
func openSec(t *testing.T, uri string, sec metadata.Security) *etcd.Driver {
	t.Helper()
	d, err := metadata.Open(ctxOf(t), uri, metadata.Options{DialTimeout: 10 * time.Second, Security: sec})
	if err != nil {
		t.Fatalf("metadata.Open(%s): %v", uri, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d.(*etcd.Driver)
}

// openErr opens uri with sec, which must fail. dial is the dial timeout:
// the failures that reach no endpoint take all of it, while an etcd that
// checks a password answers within it (bcrypt is slow under -race).
func openErr(t *testing.T, uri string, sec metadata.Security, dial time.Duration) error {
	t.Helper()
	d, err := metadata.Open(ctxOf(t), uri, metadata.Options{DialTimeout: dial, Security: sec})
	if err == nil {
		d.Close()
		t.Fatalf("metadata.Open(%s) succeeded", uri)
	}
	return err
}

// rootClient is a raw etcd client on a secure server, as root when the
// server checks users.
func rootClient(t *testing.T, s *etcdtest.Secure) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 10 * time.Second, TLS: s.ClientTLS(t)}
	if s.Opts.Auth {
		cfg.Username, cfg.Password = "root", etcdtest.RootPassword
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestContractOverTLSWithAuth runs the whole driver contract on an etcd
// that requires client certificates and users: every operation (leases,
// transactions, watches, ranges) works with the permissions a Folio user
// gets, read-write on its prefix.
func TestContractOverTLSWithAuth(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.SecureOptions{ClientCertAuth: true, Auth: true})
	sec := srv.Security(t)
	c := rootClient(t, srv)
	metadatatest.Run(t, func(t *testing.T) *metadatatest.Harness {
		scope := etcdtest.Scope(t)
		uri := etcdtest.URI(srv.Server, scope)
		return &metadatatest.Harness{
			Driver:     openSec(t, uri, sec),
			Open:       func(t *testing.T) metadata.Driver { return openSec(t, uri, sec) },
			Raw:        rawWriter{c: c, scope: scope},
			SessionTTL: sessionTTL,
			ExpireSession: func(t *testing.T, s metadata.Session) {
				id := s.(interface{ LeaseID() clientv3.LeaseID }).LeaseID()
				if _, err := c.Revoke(ctxOf(t), id); err != nil {
					t.Fatalf("revoke lease %x: %v", int64(id), err)
				}
			},
		}
	})
}

// TestTLSRefusals: every way of getting TLS wrong fails at Open with an
// error that names the endpoint and says what is wrong, within the dial
// timeout; none hangs.
func TestTLSRefusals(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.SecureOptions{ClientCertAuth: true})
	scope := etcdtest.Scope(t)
	uri := etcdtest.URI(srv.Server, scope)
	if !strings.HasPrefix(uri, "etcd+https://") {
		t.Fatalf("URI of a TLS etcd: %s", uri)
	}
	ep := "https://" + srv.ClientAddr()

	// The right CA and client certificate work.
	d := openSec(t, uri, srv.Security(t))
	if _, err := d.InitNewCluster(ctxOf(t)); err != nil {
		t.Fatal(err)
	}

	other, _, err := pki.EnsureDir(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	untrusted, err := pki.TLSFiles{CAFile: other.CA(), CertFile: srv.Dir.ClientCert(), KeyFile: srv.Dir.ClientKey()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	foreignClient, err := pki.TLSFiles{CAFile: srv.Dir.CA(), CertFile: other.ClientCert(), KeyFile: other.ClientKey()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	noClientCert, err := pki.TLSFiles{CAFile: srv.Dir.CA()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	plainURI := "etcd://" + srv.ClientAddr() + scope

	cases := []struct {
		name string
		uri  string
		sec  metadata.Security
		is   error
		want []string
	}{
		{"server signed by an unknown CA", uri, metadata.Security{TLS: untrusted}, metadata.ErrTLS,
			[]string{ep, "certificate signed by unknown authority", "the configured CA does not sign etcd's certificate"}},
		{"system roots only", uri, metadata.Security{}, metadata.ErrTLS,
			[]string{ep, "unknown authority", "no CA is configured"}},
		{"no client certificate", uri, metadata.Security{TLS: noClientCert}, metadata.ErrTLS,
			[]string{ep, "the server refused the client certificate", "certificate required", "etcd requires a client certificate"}},
		{"client certificate of another CA", uri, metadata.Security{TLS: foreignClient}, metadata.ErrTLS,
			[]string{ep, "the server refused the client certificate", "etcd does not trust the client certificate"}},
		{"plaintext URI on a TLS etcd", plainURI, metadata.Security{}, metadata.ErrTLS,
			[]string{"http://" + srv.ClientAddr(), "the server speaks TLS, but the URI is plaintext"}},
		{"TLS settings with a plaintext URI", plainURI, srv.Security(t), metadata.ErrBadSecurity,
			[]string{"http://" + srv.ClientAddr() + " is plaintext", "etcd+https://"}},
		{"TLS URI on a plaintext etcd", "etcd+https://" + shared.ClientAddr() + scope, srv.Security(t), metadata.ErrTLS,
			[]string{"https://" + shared.ClientAddr(), "does not speak TLS"}},
		{"unknown URI type", "etcd+tls://" + srv.ClientAddr() + scope, metadata.Security{}, metadata.ErrBadURI,
			[]string{`unknown etcd URI type "tls"`}},
		{"user information in the URI", "etcd+https://u:p@" + srv.ClientAddr() + scope, srv.Security(t), metadata.ErrBadURI,
			[]string{"user information in an etcd URI is not used"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := openErr(t, c.uri, c.sec, 2*time.Second)
			t.Logf("%v", err)
			if !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if el := time.Since(start); el > 30*time.Second {
				t.Errorf("took %v", el)
			}
		})
	}
}

// TestAuthentication: etcd users work, and wrong or missing credentials,
// or a user without permission on the scope, fail at Open naming the
// endpoint and the user.
func TestAuthentication(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.SecureOptions{Auth: true})
	scope := etcdtest.Scope(t)
	uri := etcdtest.URI(srv.Server, scope)
	ep := "https://" + srv.ClientAddr()
	tlsOnly := metadata.Security{TLS: srv.ClientTLS(t)}

	d := openSec(t, uri, srv.Security(t))
	if _, err := d.InitNewCluster(ctxOf(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadInstanceID(ctxOf(t)); err != nil {
		t.Fatal(err)
	}

	wrong := srv.Security(t)
	wrong.Password = "not-the-password"
	unknown := srv.Security(t)
	unknown.User = "mallory"
	half := tlsOnly
	half.User = etcdtest.User
	cases := []struct {
		name string
		uri  string
		sec  metadata.Security
		is   error
		want []string
	}{
		{"wrong password", uri, wrong, metadata.ErrAuthFailed,
			[]string{ep, `as user "folio"`, "authentication failed, invalid user ID or password"}},
		{"unknown user", uri, unknown, metadata.ErrAuthFailed, []string{ep, `as user "mallory"`, "authentication failed"}},
		{"no credentials", uri, tlsOnly, metadata.ErrAuthFailed, []string{ep, "user name is empty", "etcd has authentication enabled"}},
		{"user without password", uri, half, metadata.ErrBadSecurity, []string{`user ("folio") needs a password`}},
		{"scope outside the user's permission", etcdtest.URI(srv.Server, "/elsewhere"), srv.Security(t), metadata.ErrPermissionDenied,
			[]string{ep, `as user "folio"`, "permission denied", "grant-permission"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := openErr(t, c.uri, c.sec, 30*time.Second)
			t.Logf("%v", err)
			if !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	// A request after Open that the user may not make is
	// ErrPermissionDenied too (here: a key outside the prefix, through the
	// driver's own client).
	_, err := d.Client().Get(ctxOf(t), "/elsewhere")
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("read outside the prefix: %v", err)
	}
}

// TestCredentialsWithoutEtcdAuth: a user and password given to an etcd
// with authentication disabled work (clients get credentials before
// etcd's authentication is switched on) and draw a warning.
func TestCredentialsWithoutEtcdAuth(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.SecureOptions{})
	var logs bytes.Buffer
	sec := metadata.Security{TLS: srv.ClientTLS(t), User: "folio", Password: "x"}
	d, err := metadata.Open(ctxOf(t), etcdtest.URI(srv.Server, etcdtest.Scope(t)), metadata.Options{
		DialTimeout: 10 * time.Second, Security: sec, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !strings.Contains(logs.String(), "etcd has authentication disabled") {
		t.Fatalf("no warning; logs:\n%s", logs.String())
	}
}
