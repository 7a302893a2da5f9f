package standalone

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/pki"
)

// TestBookieTLSSettings: the bookie TLS keys a secure standalone hands its
// bookies once they read them are BookKeeper's PEM set, on the directory's
// files.
func TestBookieTLSSettings(t *testing.T) {
	d, _, err := pki.EnsureDir(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range BookieTLSSettings(d) {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		"tlsProviderFactoryClass": "org.apache.bookkeeper.tls.TLSContextFactory",
		"tlsKeyStoreType":         "PEM", "tlsKeyStore": d.ServerKey(), "tlsCertificatePath": d.ServerCert(),
		"tlsTrustStoreType": "PEM", "tlsTrustStore": d.CA(), "tlsClientAuthentication": "true",
		"bookieAuthProviderFactoryClass": "org.apache.bookkeeper.tls.BookieAuthZFactory",
		"authorizedRoles":                pki.LocalClientRole,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if want[k] == "" {
			t.Errorf("unexpected %s=%s", k, v)
		}
		if strings.HasSuffix(v, ".pem") {
			if _, err := os.Stat(v); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
	}
}

// TestTLSDirRefusedWhenIncomplete: a TLS directory missing a file stops
// the start before anything runs (new certificates would lock out every
// client given the old CA), and the bookies' metadata keys name the
// directory's files.
func TestTLSDirRefusedWhenIncomplete(t *testing.T) {
	tlsDir := filepath.Join(t.TempDir(), "tls")
	var logs bytes.Buffer
	cfg := Config{TLSDir: tlsDir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := cfg.withDefaults(); err != nil {
		t.Fatal(err)
	}
	sec, err := loadSecurity(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sec.httpTLS == nil || sec.metadata.TLS == nil || sec.etcdTLS == nil || !sec.etcdTLS.ClientCertAuth {
		t.Fatalf("security %+v", sec)
	}
	bc, err := bookieConfig(&cfg, 0, 3181, "etcd+https://127.0.0.1:2379/ledgers", sec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bc.LoadSecurity(); err != nil {
		t.Fatalf("the bookies' security settings: %v", err)
	}
	srvTLS, authz, err := bc.Security.ServerTLS(clock.Real{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("the bookies' TLS: %v", err)
	}
	if srvTLS == nil || srvTLS.GetConfigForClient == nil || authz == nil {
		t.Fatalf("the bookies do not serve TLS with authorisation: %+v %v", srvTLS, authz)
	}
	if hello, err := srvTLS.GetConfigForClient(&tls.ClientHelloInfo{}); err != nil || hello.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("the bookies do not require client certificates: %v %v", hello, err)
	}
	if c := sec.bookieClientTLS; c == nil || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Errorf("AutoRecovery's bookie connections are not secured: %+v", c)
	}
	if bc.MetadataSecurity != (server.MetadataSecurityConfig{TLSCAFile: sec.dir.CA(), TLSCertFile: sec.dir.ClientCert(), TLSKeyFile: sec.dir.ClientKey()}) {
		t.Errorf("bookie metadata security %+v", bc.MetadataSecurity)
	}

	if err := os.Remove(filepath.Join(tlsDir, pki.ServerKeyFile)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Run(context.Background(), Config{Bookies: 1, DataDir: t.TempDir(), TLSDir: tlsDir, Stdout: &out,
		EtcdClientPort: 1, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "--tls-dir: TLS directory "+tlsDir+" holds") || !strings.Contains(err.Error(), "but not server-key.pem") {
		t.Fatalf("Run on an incomplete TLS directory: %v", err)
	}
}
