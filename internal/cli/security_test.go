package cli_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/pki"
	"github.com/foliodb/folio/internal/testcluster"
)

// runFolio runs the folio binary with args and extra environment variables
// and returns its exit code and output, failing the test on a stack trace.
func runFolio(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("folio %v: %v", args, err)
	}
	if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic:") {
		t.Fatalf("folio %v printed a stack trace:\n%s", args, errb.String())
	}
	return code, out.String(), errb.String()
}

// wantFailure checks a refused command: exit code 1 and every wanted
// phrase in its stderr.
func wantFailure(t *testing.T, what string, code int, stderr string, want ...string) {
	t.Helper()
	if code != 1 {
		t.Errorf("%s: exit %d, want 1\nstderr: %s", what, code, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr does not say %q:\n%s", what, w, stderr)
		}
	}
}

// TestSecureEtcdEndToEnd runs a cluster of `folio bookie` processes on an
// etcd that serves only TLS, requires client certificates and checks
// users; one bookie also runs AutoRecovery, and a `folio autorecovery`
// daemon runs beside them. The shell, the Go client and AutoRecovery
// (which re-replicates a killed bookie's ledgers) all work with the
// metadata security settings; wrong credentials, an untrusted CA, a
// missing client certificate or a plaintext URI get a clear error from
// the shell, naming the endpoint.
func TestSecureEtcdEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 3, testcluster.WithSecureEtcd(etcdtest.SecureOptions{ClientCertAuth: true, Auth: true}),
		testcluster.WithSettings(autoRecoveryBookieSettings...))
	arBookie := cl.NewBookie()
	arBookie.Start("--autorecovery")
	arBookie.WaitRegistered(false)
	if !strings.HasPrefix(cl.URI, "etcd+https://") {
		t.Fatalf("URI %s", cl.URI)
	}
	sh := func(args ...string) (int, string, string) {
		return shell(t, cl.URI, append(slices.Clone(cl.MetadataFlags), args...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The shell.
	code, out, errOut := sh("listbookies", "-o", "json")
	if code != 0 {
		t.Fatalf("listbookies: %d %s", code, errOut)
	}
	var bookies []admin.BookieStatus
	mustJSON(t, out, &bookies)
	if len(bookies) != 4 {
		t.Fatalf("listbookies: %v", bookies)
	}
	if code, _, errOut := sh("simpletest", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2", "--entries", "20"); code != 0 {
		t.Fatalf("simpletest: %d %s", code, errOut)
	}

	// The Go client.
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI,
		MetadataTLS: cl.Security.TLS, MetadataUser: cl.Security.User, MetadataPassword: cl.Security.Password})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeLedgers(ctx, t, c, cl.MD, 6, 10)

	// AutoRecovery: the daemon and the bookie's both reach the store; one
	// of them is the auditor, and a killed bookie's ledgers move.
	cl.StartAutoRecovery("127.0.0.1:1", "--lost-bookie-recovery-delay", "0s")
	waitUntil(ctx, t, "an auditor", func() bool {
		code, out, _ := sh("whoisauditor", "-o", "json")
		return code == 0 && strings.Contains(out, "127.0.0.1:")
	})
	victim := cl.Bookies[0]
	victim.Kill()
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	waitUntil(ctx, t, "re-replication off "+victim.Addr(), func() bool {
		on, err := admin.LedgersOnBookie(ctx, cl.MD, victim.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(on) == 0 && len(ur) == 0
	})
	checkReplicated(ctx, t, cl.MD, ends, victim.ID)

	// Refusals, each naming the endpoint and what to fix.
	ep := "https://" + cl.Etcd.ClientAddr()
	d := cl.Secure.Dir
	dir := t.TempDir()
	wrongPW := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other, _, err := pki.EnsureDir(filepath.Join(dir, "other-ca"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certFlags := []string{"--metadata-tls-ca", d.CA(), "--metadata-tls-cert", d.ClientCert(), "--metadata-tls-key", d.ClientKey()}
	userFlags := []string{"--metadata-user", etcdtest.User, "--metadata-password-file", wrongPW}
	code, _, errOut = shell(t, cl.URI, append(slices.Clone(certFlags), append(userFlags, "listbookies")...)...)
	wantFailure(t, "wrong password", code, errOut, ep, `as user "folio"`, "authentication failed, invalid user ID or password", "hint: check --metadata-user and --metadata-password-file")
	code, _, errOut = shell(t, cl.URI, "--metadata-tls-ca", d.CA(), "listbookies")
	wantFailure(t, "no client certificate", code, errOut, ep, "the server refused the client certificate", "etcd requires a client certificate")
	code, _, errOut = shell(t, cl.URI, "--metadata-tls-ca", other.CA(), "--metadata-tls-cert", d.ClientCert(), "--metadata-tls-key", d.ClientKey(), "listbookies")
	wantFailure(t, "untrusted CA", code, errOut, ep, "certificate signed by unknown authority", "the configured CA does not sign etcd's certificate")
	plain := strings.Replace(cl.URI, "etcd+https://", "etcd://", 1)
	code, _, errOut = shell(t, plain, "listbookies")
	wantFailure(t, "plaintext URI", code, errOut, "http://"+cl.Etcd.ClientAddr(), "the server speaks TLS, but the URI is plaintext")
	code, _, errOut = shell(t, plain, append(slices.Clone(certFlags), "listbookies")...)
	wantFailure(t, "TLS flags with a plaintext URI", code, errOut,
		"--metadata-tls-ca, --metadata-tls-cert, --metadata-tls-key set, but the metadata service URI "+plain+" is plaintext: use "+cl.URI)
}

// TestSecurityFailsClosed: `folio bookie`, `folio autorecovery` and the
// shell refuse security settings they cannot honour, or whose files they
// cannot use, with exit code 1 and a message naming the key (or flag, or
// variable) and the file, before contacting anything (the store's port
// has no listener: had they tried, they would say it is not reachable).
func TestSecurityFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the folio binary")
	}
	dir := t.TempDir()
	ca, _, err := pki.EnsureDir(filepath.Join(dir, "ca"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	jks := filepath.Join(dir, "keystore.jks")
	if err := os.WriteFile(jks, []byte("\xfe\xed\xfe\xed\x00\x00\x00\x02"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tlsURI = "etcd+https://127.0.0.1:1/ledgers"
	bookie := func(set ...string) []string {
		args := []string{"bookie", "--set", "journalDirectories=" + filepath.Join(dir, "j"), "--set", "ledgerDirectories=" + filepath.Join(dir, "l"),
			"--set", "allowLoopback=true", "--set", "advertisedAddress=127.0.0.1", "--set", "bookiePort=0"}
		for _, kv := range set {
			args = append(args, "--set", kv)
		}
		return args
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"bookie: missing CA file", nil, bookie("metadataServiceUri="+tlsURI, "metadataServiceTlsCaFile="+missing),
			[]string{"folio: starting the bookie: security configuration: metadataServiceTlsCaFile " + missing + ": cannot read it: no such file or directory"}},
		{"bookie: missing client key", nil, bookie("metadataServiceUri="+tlsURI, "metadataServiceTlsCaFile="+ca.CA(), "metadataServiceTlsCertFile="+ca.ClientCert(),
			"metadataServiceTlsKeyFile="+missing), []string{"metadataServiceTlsKeyFile " + missing + ": cannot read it"}},
		{"bookie: TLS keys with a plaintext URI", nil, bookie("metadataServiceUri=etcd://127.0.0.1:1/ledgers", "metadataServiceTlsCaFile="+ca.CA()),
			[]string{"metadataServiceTlsCaFile set, but the metadata service URI etcd://127.0.0.1:1/ledgers is plaintext"}},
		{"bookie: missing password file", nil, bookie("metadataServiceUri="+tlsURI, "metadataServiceUser=folio", "metadataServicePasswordPath="+missing),
			[]string{"metadataServicePasswordPath " + missing + ": cannot read it"}},
		{"bookie: zkEnableSecurity", nil, bookie("metadataServiceUri=zk://127.0.0.1:1/ledgers", "zkEnableSecurity=true"),
			[]string{"zkEnableSecurity=true asks for ZooKeeper ACLs, which Folio does not support"}},
		{"bookie: user on ZooKeeper", nil, bookie("metadataServiceUri=zk://127.0.0.1:1/ledgers", "metadataServiceUser=folio", "metadataServicePasswordPath="+ca.CA()),
			[]string{"metadataServiceUser, metadataServicePasswordPath: the metadata store zk://127.0.0.1:1/ledgers is reached without TLS or authentication"}},
		{"bookie: JKS HTTP key store", nil, bookie("metadataServiceUri=etcd://127.0.0.1:1/ledgers", "httpServerEnabled=true", "httpServerTlsEnable=true",
			"httpServerKeyStorePath="+jks, "httpServerCertificatePath="+ca.ServerCert()),
			[]string{"httpServerKeyStorePath " + jks + ": unsupported file format: this is a Java KeyStore (JKS)"}},
		{"bookie: missing HTTP token file", nil, bookie("metadataServiceUri=etcd://127.0.0.1:1/ledgers", "httpServerEnabled=true", "httpServerAuthTokenPath="+missing),
			[]string{"httpServerAuthTokenPath " + missing + ": cannot read it"}},
		{"autorecovery: missing CA file", nil, []string{"autorecovery", "--id", "127.0.0.1:1", "--metadata-service-uri", tlsURI, "--metadata-tls-ca", missing},
			[]string{"folio: --metadata-tls-ca " + missing + ": cannot read it: no such file or directory"}},
		{"autorecovery: missing CA file from the environment", []string{"FOLIO_METADATA_SERVICE_TLS_CA_FILE=" + missing},
			[]string{"autorecovery", "--id", "127.0.0.1:1", "--metadata-service-uri", tlsURI},
			[]string{"folio: $FOLIO_METADATA_SERVICE_TLS_CA_FILE " + missing + ": cannot read it"}},
		{"autorecovery: certificate without key", nil, []string{"autorecovery", "--id", "127.0.0.1:1", "--metadata-service-uri", tlsURI, "--metadata-tls-cert", ca.ClientCert()},
			[]string{"--metadata-tls-cert is set but --metadata-tls-key is not"}},
		{"shell: user without password", nil, []string{"shell", "--metadata-service-uri", tlsURI, "--metadata-user", "folio", "listbookies"},
			[]string{"folio: --metadata-user is set but --metadata-password-file is not", "hint: fix --metadata-tls-ca"}},
		{"shell: TLS on ZooKeeper", nil, []string{"shell", "--metadata-service-uri", "zk://127.0.0.1:1/ledgers", "--metadata-tls-ca", ca.CA(), "listledgers"},
			[]string{"--metadata-tls-ca: the metadata store zk://127.0.0.1:1/ledgers is reached without TLS or authentication"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runFolio(t, c.env, c.args...)
			wantFailure(t, c.name, code, stderr, c.want...)
			if strings.Contains(stderr, "not reachable") {
				t.Errorf("it contacted the store first:\n%s", stderr)
			}
		})
	}
}

// TestStandaloneTLSDir: `folio standalone --tls-dir` generates a CA and
// certificates, serves etcd over TLS with client certificates and the
// admin HTTP server over https; the shell connects with the flags it
// prints (or their environment variables), not without them; a restart
// reuses the certificates and keeps the ledgers.
func TestStandaloneTLSDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone cluster")
	}
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	sa := testcluster.StartStandalone(t, filepath.Join(dir, "data"), "--tls-dir", tlsDir, "--bookies", "2")
	if !strings.HasPrefix(sa.URI, "etcd+https://127.0.0.1:") {
		t.Fatalf("URI %s", sa.URI)
	}
	d := pki.Dir{Path: tlsDir}
	before := map[string][]byte{}
	for _, f := range []string{d.CA(), d.CAKey(), d.ServerCert(), d.ServerKey(), d.ClientCert(), d.ClientKey()} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("--tls-dir did not write %s: %v", f, err)
		}
		before[f] = b
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The screen follows the readiness line on stderr.
	waitUntil(ctx, t, "the screen saying how to connect", func() bool {
		screen, _ := os.ReadFile(sa.LogPath())
		return strings.Contains(string(screen), "FOLIO_METADATA_SERVICE_TLS_CA_FILE='"+d.CA()+"'")
	})
	mdFlags := []string{"--metadata-tls-ca", d.CA(), "--metadata-tls-cert", d.ClientCert(), "--metadata-tls-key", d.ClientKey()}
	flags := append(slices.Clone(mdFlags), "--tls-ca", d.CA(), "--tls-cert", d.ClientCert(), "--tls-key", d.ClientKey())
	var bookies []admin.BookieStatus
	mustJSON(t, mustShell(t, sa.URI, append(slices.Clone(flags), "listbookies", "-o", "json")...), &bookies)
	if len(bookies) != 2 {
		t.Fatalf("listbookies: %v", bookies)
	}
	mustShell(t, sa.URI, append(slices.Clone(flags), "simpletest", "--ensemble", "2", "--write-quorum", "2", "--ack-quorum", "2", "--entries", "10", "--keep")...)
	// The environment variables the screen prints work as the flags do.
	env := []string{"FOLIO_METADATA_SERVICE_URI=" + sa.URI, "FOLIO_METADATA_SERVICE_TLS_CA_FILE=" + d.CA(),
		"FOLIO_METADATA_SERVICE_TLS_CERT_FILE=" + d.ClientCert(), "FOLIO_METADATA_SERVICE_TLS_KEY_FILE=" + d.ClientKey(),
		"FOLIO_TLS_CA=" + d.CA(), "FOLIO_TLS_CERT=" + d.ClientCert(), "FOLIO_TLS_KEY=" + d.ClientKey()}
	code, out, errOut := runFolio(t, env, "shell", "listledgers", "-o", "json")
	var ledgers []map[string]int64
	if code != 0 {
		t.Fatalf("listledgers with the environment: %d %s", code, errOut)
	}
	mustJSON(t, out, &ledgers)
	if len(ledgers) != 1 {
		t.Fatalf("ledgers: %v", ledgers)
	}
	lid := strconv.FormatInt(ledgers[0]["ledgerId"], 10)
	// The bookies admit only TLS clients with the CA's certificate: without
	// the bookie TLS flags (etcd's alone) the reads are refused.
	code, _, errOut = shell(t, sa.URI, append(slices.Clone(mdFlags), "readledger", lid)...)
	wantFailure(t, "readledger in plaintext from TLS bookies", code, errOut, "a bookie refused this client (unauthorized)", "--tls-ca")
	// Without the client certificate etcd refuses.
	code, _, errOut = shell(t, sa.URI, "--metadata-tls-ca", d.CA(), "listbookies")
	wantFailure(t, "shell without the client certificate", code, errOut, "refused the client certificate")

	// The admin HTTP server: https, client certificate required.
	httpAddr := standaloneHTTPAddr(t, filepath.Join(dir, "data"))
	withCert, err := pki.TLSFiles{CAFile: d.CA(), CertFile: d.ClientCert(), KeyFile: d.ClientKey()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: withCert}, Timeout: 30 * time.Second}
	resp, err := hc.Get("https://" + httpAddr + "/heartbeat")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "OK\n" {
		t.Fatalf("heartbeat: %d %q", resp.StatusCode, body)
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: withCert.RootCAs}}, Timeout: 30 * time.Second}
	if resp, err := noCert.Get("https://" + httpAddr + "/heartbeat"); err == nil {
		resp.Body.Close()
		t.Fatal("the admin HTTP server served a client without a certificate")
	}
	// inspectledger reads the fence bits from the https server with the
	// client certificate.
	var ins struct {
		Bookies []struct {
			Fenced      *bool
			FenceSource string
		}
	}
	mustJSON(t, mustShell(t, sa.URI, append(slices.Clone(flags), "inspectledger", lid, "-o", "json", "--http", "https://"+httpAddr,
		"--http-tls-ca", d.CA(), "--http-tls-cert", d.ClientCert(), "--http-tls-key", d.ClientKey())...), &ins)
	if len(ins.Bookies) != 2 {
		t.Fatalf("inspectledger: %+v", ins)
	}
	for _, b := range ins.Bookies {
		if b.Fenced == nil || *b.Fenced || b.FenceSource != "https://"+httpAddr {
			t.Errorf("inspectledger over https: %+v", b)
		}
	}
	if resp, err := hc.Get("https://" + httpAddr + "/debug/pprof/"); err != nil || resp.StatusCode != 404 {
		t.Errorf("pprof without --http-pprof: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A restart reuses every file and keeps the ledger.
	sa.Terminate()
	sa.Start()
	for f, b := range before {
		if now, _ := os.ReadFile(f); !bytes.Equal(now, b) {
			t.Errorf("%s changed across the restart", f)
		}
	}
	code, out, errOut = runFolio(t, env, "shell", "listledgers", "-o", "json")
	if code != 0 {
		t.Fatalf("listledgers after the restart: %d %s", code, errOut)
	}
	var again []map[string]int64
	mustJSON(t, out, &again)
	if len(again) != 1 || again[0]["ledgerId"] != ledgers[0]["ledgerId"] {
		t.Fatalf("ledgers after the restart: %v, before %v", again, ledgers)
	}
	// The entries, read over TLS with the environment's certificate.
	code, out, errOut = runFolio(t, env, "shell", "readledger", lid, "-o", "json")
	if code != 0 {
		t.Fatalf("readledger over TLS after the restart: %d %s", code, errOut)
	}
	var entries []json.RawMessage
	mustJSON(t, out, &entries)
	if len(entries) != 10 {
		t.Fatalf("readledger after the restart: %d entries, want 10", len(entries))
	}
	if screen, _ := os.ReadFile(sa.LogPath()); !strings.Contains(string(screen), "using the local CA and certificates") {
		t.Errorf("the restart did not say it reused the CA:\n%s", screen) // logged before the readiness line
	}
}

// standaloneHTTPAddr reads the admin HTTP port a standalone recorded.
func standaloneHTTPAddr(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "ports.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ HTTP int }
	if err := json.Unmarshal(b, &p); err != nil || p.HTTP == 0 {
		t.Fatalf("ports.json: %s %v", b, err)
	}
	return "127.0.0.1:" + strconv.Itoa(p.HTTP)
}
