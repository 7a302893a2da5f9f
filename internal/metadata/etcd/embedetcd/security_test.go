package embedetcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/pki"
)

func tlsClient(t *testing.T, s *embedetcd.Server, conf *tls.Config, user, password string) (*clientv3.Client, error) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		TLS: conf, Username: user, Password: password})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestTLSAndAuthSurviveRestart: a member with ClientTLS serves https only,
// turns authentication on at its first start with the users asked for,
// and keeps them (and the switch) across a restart on its data directory.
// A user without a password logs in by its client certificate's common
// name.
func TestTLSAndAuthSurviveRestart(t *testing.T) {
	dir, _, err := pki.EnsureDir(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := embedetcd.Config{
		DataDir:   t.TempDir(),
		ClientTLS: &embedetcd.TLS{CertFile: dir.ServerCert(), KeyFile: dir.ServerKey(), TrustedCAFile: dir.CA(), ClientCertAuth: true},
		Auth: &embedetcd.Auth{RootPassword: "r00t", Users: []embedetcd.User{
			{Name: "folio", Password: "pw", Prefix: "/ledgers"},
			{Name: pki.LocalClientName, Prefix: "/ledgers"}, // by certificate
		}},
		UnsafeNoFsync: true,
	}
	s := start(t, cfg)
	if !strings.HasPrefix(s.ClientURL(), "https://") || s.MetadataURI("/ledgers") != "etcd+https://"+s.ClientAddr()+"/ledgers" {
		t.Fatalf("client URL %s, URI %s", s.ClientURL(), s.MetadataURI("/ledgers"))
	}
	conf, err := pki.TLSFiles{CAFile: dir.CA(), CertFile: dir.ClientCert(), KeyFile: dir.ClientKey()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := tlsClient(t, s, conf, "folio", "pw")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, "/ledgers/k", "v"); err != nil {
			t.Fatalf("folio writes its prefix: %v", err)
		}
		if _, err := c.Put(ctx, "/other", "v"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("folio writes outside its prefix: %v", err)
		}
		if _, err := tlsClient(t, s, conf, "folio", "wrong"); !errors.Is(err, rpctypes.ErrAuthFailed) {
			t.Fatalf("wrong password: %v", err)
		}
		// No password: the certificate's common name is the user.
		byCert, err := tlsClient(t, s, conf, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if r, err := byCert.Get(ctx, "/ledgers/k"); err != nil || len(r.Kvs) != 1 {
			t.Fatalf("read by certificate: %v %v", r, err)
		}
		st, err := byCert.AuthStatus(ctx)
		if err != nil || !st.Enabled {
			t.Fatalf("auth status %v, %v", st, err)
		}
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Restart with another root password: the stored one stays (Auth is
	// applied once).
	cfg.Auth.RootPassword = "ignored"
	s = start(t, cfg)
	defer s.Close()
	check()
	root, err := tlsClient(t, s, conf, "root", "r00t")
	if err != nil {
		t.Fatalf("root with its first password: %v", err)
	}
	if _, err := root.Put(context.Background(), "/other", "v"); err != nil {
		t.Fatal(err)
	}
}

func TestSecurityConfigChecked(t *testing.T) {
	for _, c := range []struct {
		cfg  embedetcd.Config
		want string
	}{
		{embedetcd.Config{ClientTLS: &embedetcd.TLS{CertFile: "x"}}, "needs CertFile and KeyFile"},
		{embedetcd.Config{ClientTLS: &embedetcd.TLS{CertFile: "x", KeyFile: "y", ClientCertAuth: true}}, "needs TrustedCAFile"},
		{embedetcd.Config{ClientTLS: &embedetcd.TLS{CertFile: "/nonexistent.pem", KeyFile: "/nonexistent-key.pem"}}, "no such file"},
		{embedetcd.Config{Auth: &embedetcd.Auth{}}, "needs a RootPassword"},
		{embedetcd.Config{Auth: &embedetcd.Auth{RootPassword: "r", Users: []embedetcd.User{{Name: "u", Prefix: "/"}}}}, "could only log in by client certificate"},
	} {
		c.cfg.DataDir = t.TempDir()
		_, err := embedetcd.Start(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
