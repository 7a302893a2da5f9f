package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/pki"
)

// testCA is a local CA directory for the test.
func testCA(t *testing.T) pki.Dir {
	t.Helper()
	d, _, err := pki.EnsureDir(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadSecurityFailsClosed: every security setting Folio cannot honour,
// and every file it cannot use, stops the start with a message naming the
// key (and the file); nothing is contacted first (the URIs name ports where
// nothing listens).
func TestLoadSecurityFailsClosed(t *testing.T) {
	ca := testCA(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	jks := writeFile(t, dir, "keystore.jks", "\xfe\xed\xfe\xed\x00\x00\x00\x02")
	pw := writeFile(t, dir, "pw", "secret\n")
	const tlsURI = "etcd+https://127.0.0.1:1/ledgers"
	cases := []struct {
		name string
		set  []string
		want []string
	}{
		{"missing CA file", []string{"metadataServiceUri=" + tlsURI, "metadataServiceTlsCaFile=" + missing},
			[]string{"security configuration: metadataServiceTlsCaFile " + missing + ": cannot read it: no such file or directory"}},
		{"client key without certificate", []string{"metadataServiceUri=" + tlsURI, "metadataServiceTlsCaFile=" + ca.CA(), "metadataServiceTlsKeyFile=" + ca.ClientKey()},
			[]string{"metadataServiceTlsKeyFile is set but metadataServiceTlsCertFile is not"}},
		{"key of another certificate", []string{"metadataServiceUri=" + tlsURI, "metadataServiceTlsCertFile=" + ca.ClientCert(), "metadataServiceTlsKeyFile=" + ca.ServerKey()},
			[]string{"metadataServiceTlsKeyFile " + ca.ServerKey() + ": this key does not belong to the certificate in metadataServiceTlsCertFile " + ca.ClientCert()}},
		{"TLS with a plaintext URI", []string{"metadataServiceUri=etcd://127.0.0.1:1/ledgers", "metadataServiceTlsCaFile=" + ca.CA()},
			[]string{"metadataServiceTlsCaFile set, but the metadata service URI etcd://127.0.0.1:1/ledgers is plaintext: use etcd+https://127.0.0.1:1/ledgers for TLS"}},
		{"user without password", []string{"metadataServiceUser=folio"},
			[]string{"metadataServiceUser is set but metadataServicePasswordPath is not"}},
		{"missing password file", []string{"metadataServiceUser=folio", "metadataServicePasswordPath=" + missing},
			[]string{"metadataServicePasswordPath " + missing + ": cannot read it"}},
		{"security on ZooKeeper", []string{"metadataServiceUri=zk://127.0.0.1:1/ledgers", "metadataServiceUser=folio", "metadataServicePasswordPath=" + pw},
			[]string{"metadataServiceUser, metadataServicePasswordPath: the metadata store zk://127.0.0.1:1/ledgers is reached without TLS or authentication"}},
		{"zkEnableSecurity", []string{"metadataServiceUri=zk://127.0.0.1:1/ledgers", "zkEnableSecurity=true"},
			[]string{"zkEnableSecurity=true asks for ZooKeeper ACLs"}},
		{"HTTP TLS without key and certificate", []string{"httpServerEnabled=true", "httpServerTlsEnable=true"},
			[]string{"httpServerTlsEnable=true needs httpServerKeyStorePath (the PEM private key) and httpServerCertificatePath"}},
		{"HTTP key store is JKS", []string{"httpServerEnabled=true", "httpServerTlsEnable=true", "httpServerKeyStorePath=" + jks, "httpServerCertificatePath=" + ca.ServerCert()},
			[]string{"httpServerKeyStorePath " + jks + ": unsupported file format: this is a Java KeyStore (JKS)"}},
		{"HTTP trust store is JKS", []string{"httpServerEnabled=true", "httpServerTlsEnable=true", "httpServerKeyStorePath=" + ca.ServerKey(),
			"httpServerCertificatePath=" + ca.ServerCert(), "httpServerTrustStorePath=" + jks},
			[]string{"httpServerTrustStorePath " + jks + ": unsupported file format"}},
		{"HTTP key store password", []string{"httpServerEnabled=true", "httpServerTlsEnable=true", "httpServerKeyStorePath=" + ca.ServerKey(),
			"httpServerCertificatePath=" + ca.ServerCert(), "httpServerKeyStorePassword=changeit"},
			[]string{"httpServerKeyStorePassword is set: Folio reads the admin HTTP server's key as an unencrypted PEM file"}},
		{"HTTP TLS files without TLS", []string{"httpServerEnabled=true", "httpServerKeyStorePath=" + ca.ServerKey()},
			[]string{"httpServerKeyStorePath is set but httpServerTlsEnable is not true: the admin HTTP server would serve plaintext"}},
		{"missing token file", []string{"httpServerEnabled=true", "httpServerAuthTokenPath=" + missing},
			[]string{"httpServerAuthTokenPath " + missing + ": cannot read it"}},
		{"several problems at once", []string{"metadataServiceUri=" + tlsURI, "metadataServiceTlsCaFile=" + missing, "httpServerEnabled=true", "httpServerAuthTokenPath=" + missing},
			[]string{"metadataServiceTlsCaFile " + missing, "httpServerAuthTokenPath " + missing}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := procConfig(t, "etcd://127.0.0.1:1/ledgers")
			for _, kv := range c.set {
				k, v, _ := strings.Cut(kv, "=")
				if err := cfg.Set(k, v, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, err := cfg.LoadSecurity()
			if err == nil {
				t.Fatal("LoadSecurity accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			// StartProcess refuses before contacting the store: nothing
			// listens on port 1, and the error is the configuration's.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, perr := StartProcess(ctx, cfg, ProcessOptions{}); perr == nil || !strings.Contains(perr.Error(), "security configuration") {
				t.Errorf("StartProcess: %v", perr)
			}
		})
	}

	// The HTTP keys are not checked while the server is off.
	cfg := procConfig(t, "etcd://127.0.0.1:1/ledgers")
	cfg.HTTPSecurity.AuthTokenPath = missing
	if _, err := cfg.LoadSecurity(); err != nil {
		t.Errorf("HTTP keys with httpServerEnabled=false: %v", err)
	}
	// And Folio's defaults: the admin HTTP server is off, as BookKeeper's.
	if DefaultConfig().HTTPServerEnabled {
		t.Error("httpServerEnabled defaults to true")
	}
}

// httpsClient trusts ca and, with withCert, presents its client
// certificate.
func httpsClient(t *testing.T, ca pki.Dir, withCert bool) *http.Client {
	t.Helper()
	f := pki.TLSFiles{CAFile: ca.CA()}
	if withCert {
		f.CertFile, f.KeyFile = ca.ClientCert(), ca.ClientKey()
	}
	conf, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string, http.Header, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, nil
}

// TestAdminHTTPSecurity runs a bookie whose admin HTTP server serves TLS
// with client certificates and a token, on an etcd that requires client
// certificates and a user: the bookie registers, the open routes answer
// without the token, the others need it, pprof is off, and a client
// without a certificate or speaking plaintext gets nothing.
func TestAdminHTTPSecurity(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.SecureOptions{ClientCertAuth: true, Auth: true})
	uri := etcdtest.URI(srv.Server, etcdtest.Scope(t))
	ctx := context.Background()
	md, err := metadata.Open(ctx, uri, metadata.Options{Security: srv.Security(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	ca := testCA(t)
	dir := t.TempDir()
	const token = "0123456789abcdef-token"
	cfg := procConfig(t, uri)
	for _, kv := range [][2]string{
		{"metadataServiceTlsCaFile", srv.Dir.CA()}, {"metadataServiceTlsCertFile", srv.Dir.ClientCert()}, {"metadataServiceTlsKeyFile", srv.Dir.ClientKey()},
		{"metadataServiceUser", etcdtest.User}, {"metadataServicePasswordPath", writeFile(t, dir, "pw", etcdtest.Password+"\n")},
		{"httpServerEnabled", "true"}, {"httpServerTlsEnable", "true"},
		{"httpServerKeyStorePath", ca.ServerKey()}, {"httpServerCertificatePath", ca.ServerCert()}, {"httpServerTrustStorePath", ca.CA()},
		{"httpServerAuthTokenPath", writeFile(t, dir, "token", token+"\n")},
	} {
		if err := cfg.Set(kv[0], kv[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	p := procStart(t, cfg, ProcessOptions{})
	select {
	case <-p.Registered():
	case <-time.After(30 * time.Second):
		t.Fatal("the bookie did not register on the secure etcd")
	}
	if p.HTTPScheme() != "https" {
		t.Fatalf("scheme %s", p.HTTPScheme())
	}
	base := "https://" + p.HTTPAddr()
	c := httpsClient(t, ca, true)

	for _, path := range openPaths {
		if code, body, _, err := get(t, c, base+path, ""); err != nil || code != 200 {
			t.Errorf("%s without the token: %d %s %v", path, code, body, err)
		}
	}
	for _, path := range []string{"/api/v1/bookie/info", "/api/v1/bookie/state/readonly", "/api/v1/bookie/gc", "/api/v1/bookie/ledger/info?ledger_id=1",
		"/api/v1/bookie/state/../info", "/nonexistent"} {
		code, _, h, err := get(t, c, base+path, "")
		if err != nil || code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s without the token: %d %v", path, code, err)
		}
		if code, _, _, _ := get(t, c, base+path, "wrong"+token); code != 401 {
			t.Errorf("%s with a wrong token: %d", path, code)
		}
	}
	if code, body, _, err := get(t, c, base+"/api/v1/bookie/info", token); err != nil || code != 200 || !strings.Contains(body, "totalSpace") {
		t.Errorf("info with the token: %d %s %v", code, body, err)
	}
	if code, _, _, _ := get(t, c, base+"/debug/pprof/", token); code != 404 {
		t.Errorf("pprof without httpServerPprofEnabled: %d", code)
	}

	// No client certificate: the handshake fails (BookKeeper requires one
	// whenever its HTTP server serves TLS with a trust store).
	if _, _, _, err := get(t, httpsClient(t, ca, false), base+"/heartbeat", ""); err == nil {
		t.Error("a client without a certificate was served")
	}
	// Plaintext HTTP to the TLS port gets no answer.
	if code, _, _, err := get(t, &http.Client{Timeout: 10 * time.Second}, "http://"+p.HTTPAddr()+"/heartbeat", ""); err == nil && code == 200 {
		t.Error("plaintext HTTP was served")
	}
}

// TestAdminHTTPServerTLSWithoutTrustStore: without a trust store the
// server serves TLS to clients without certificates (Folio's extension;
// BookKeeper has no such mode), and pprof is served when enabled, behind
// the token.
func TestAdminHTTPServerTLSWithoutTrustStore(t *testing.T) {
	uri, _ := procEtcd(t)
	ca := testCA(t)
	cfg := procConfig(t, uri)
	cfg.HTTPServerEnabled = true
	cfg.HTTPSecurity = HTTPSecurityConfig{TLSEnable: true, KeyStorePath: ca.ServerKey(), CertificatePath: ca.ServerCert(), PprofEnabled: true,
		AuthTokenPath: writeFile(t, t.TempDir(), "token", "tok-tok-tok")}
	p := procStart(t, cfg, ProcessOptions{})
	c := httpsClient(t, ca, false)
	base := "https://" + p.HTTPAddr()
	if code, _, _, err := get(t, c, base+"/heartbeat", ""); err != nil || code != 200 {
		t.Errorf("heartbeat: %d %v", code, err)
	}
	if code, _, _, _ := get(t, c, base+"/debug/pprof/", ""); code != 401 {
		t.Errorf("pprof without the token: %d", code)
	}
	if code, body, _, _ := get(t, c, base+"/debug/pprof/", "tok-tok-tok"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof with the token: %d", code)
	}
	// A client that does not trust the CA fails its handshake.
	other := testCA(t)
	if _, _, _, err := get(t, httpsClient(t, other, false), base+"/heartbeat", ""); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Errorf("untrusted server certificate: %v", err)
	}
}
