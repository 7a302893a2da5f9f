package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
)

// The TLS interop tests (compat/tls, spec/security.md): bookies and
// clients of both implementations configured with BookKeeper's own keys
// and PEM files (tlsKeyStoreType=PEM, tlsTrustStoreType=PEM), mutual TLS and
// BookieAuthZFactory with authorizedRoles=writer,bookie. Certificates are
// generated at test time (internal/tlsconf/tlstest), for 127.0.0.1.

// tlsPKI is a test CA and the certificates of the TLS tests.
type tlsPKI struct {
	ca *tlstest.CA
	// bookie (role bookie) is every bookie's; writer (role writer) the
	// authorised clients'; reader (role reader) is valid but not
	// authorised; stranger (role writer) is signed by another CA.
	bookie, writer, reader, stranger tlstest.Files
}

func newTLSPKI(t *testing.T) tlsPKI {
	t.Helper()
	ca := tlstest.NewCA(t, "folio-compat-ca")
	other := tlstest.NewCA(t, "stranger-ca")
	issue := func(name, ou string) tlstest.Files {
		return ca.Write(t, t.TempDir(), name, ca.Issue(t, tlstest.Leaf{CommonName: name, OU: ou}))
	}
	p := tlsPKI{ca: ca, bookie: issue("bookie", "0:bookie"), writer: issue("writer", "0:writer;1:compat"), reader: issue("reader", "0:reader")}
	st := other.Write(t, t.TempDir(), "stranger", other.Issue(t, tlstest.Leaf{CommonName: "stranger", OU: "0:writer"}))
	p.stranger = tlstest.Files{CA: p.bookie.CA, Cert: st.Cert, Key: st.Key} // trusts the bookies, presents a stranger
	return p
}

// tlsKeys are BookKeeper's TLS keys for PEM files f with client
// authentication, the same on bookies and clients (the working setup of
// spec/security.md §2).
func tlsKeys(f tlstest.Files) map[string]string {
	return map[string]string{
		"tlsProviderFactoryClass": "org.apache.bookkeeper.tls.TLSContextFactory",
		"tlsProvider":             "JDK",
		"tlsKeyStoreType":         "PEM",
		"tlsKeyStore":             f.Key,
		"tlsCertificatePath":      f.Cert,
		"tlsTrustStoreType":       "PEM",
		"tlsTrustStore":           f.CA,
		"tlsClientAuthentication": "true",
	}
}

// bookieTLSKeys are a bookie's: TLS with its certificate and
// BookieAuthZFactory.
func (p tlsPKI) bookieTLSKeys() map[string]string {
	k := tlsKeys(p.bookie)
	k["bookieAuthProviderFactoryClass"] = "org.apache.bookkeeper.tls.BookieAuthZFactory"
	k["authorizedRoles"] = "writer,bookie"
	return k
}

// javaClientConf writes a Java client configuration file with the TLS keys
// of f (nil: an empty file, a plaintext client) and returns its path.
func javaClientConf(t *testing.T, f *tlstest.Files) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.conf")
	var b strings.Builder
	if f != nil {
		keys := tlsKeys(*f)
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			fmt.Fprintf(&b, "%s=%s\n", k, keys[k])
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// folioTLSClient is a Folio client with TLS from f (PEM, as Java's).
func folioTLSClient(t *testing.T, uri, mode string, f tlstest.Files) *client.Client {
	t.Helper()
	cfg, err := client.TLSConfigFromPEM(f.CA, f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri, UseV2WireProtocol: mode == "v2", TLS: cfg})
	if err != nil {
		t.Fatalf("compat: folio client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// folioBookie is a `folio bookie` process.
type folioBookie struct {
	addr, logPath string
}

// startFolioBookie runs `folio bookie` (binary bin) on the etcd at uri with
// a bk_server.conf holding extra, until the test ends; it returns once the
// bookie listens.
func startFolioBookie(t *testing.T, bin, uri string, extra map[string]string) folioBookie {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	conf := map[string]string{
		"bookiePort":         fmt.Sprint(port),
		"listenHost":         "127.0.0.1",
		"advertisedAddress":  "127.0.0.1",
		"allowLoopback":      "true",
		"metadataServiceUri": uri,
		"httpServerEnabled":  "false",
		"journalDirectories": filepath.Join(dir, "journal"),
		"ledgerDirectories":  filepath.Join(dir, "ledgers"),
		"zkTimeout":          "10000",
	}
	maps.Copy(conf, extra)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		fmt.Fprintf(&b, "%s=%s\n", k, conf[k])
	}
	confPath := filepath.Join(dir, "bk_server.conf")
	if err := os.WriteFile(confPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fb := folioBookie{addr: fmt.Sprintf("127.0.0.1:%d", port), logPath: filepath.Join(dir, "bookie.log")}
	logf, err := os.Create(fb.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "bookie", "--conf", confPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("compat: start folio bookie: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(standaloneStopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(standaloneStartTimeout)
	for {
		select {
		case err := <-exited:
			t.Fatalf("compat: folio bookie exited: %v\n%s", err, tailFile(fb.logPath, 40))
		default:
		}
		if c, err := net.DialTimeout("tcp", fb.addr, time.Second); err == nil {
			c.Close()
			return fb
		}
		if time.Now().After(deadline) {
			t.Fatalf("compat: folio bookie %s not listening within %v\n%s", fb.addr, standaloneStartTimeout, tailFile(fb.logPath, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runDriverAnyError runs a Driver command to its end and returns its "op"
// results whatever their error.
func runDriverAnyError(t *testing.T, classpath, uri, mode, cmd string, args ...string) ([]result, string) {
	t.Helper()
	p := startDriver(t, classpath, uri, mode, cmd, args...)
	ops := p.wait()
	return ops, p.stderr.String()
}

// tlsRoundTrip: the Java client (TLS, role writer) writes, the Folio
// client (TLS, role writer) reads; the Folio client writes, Java reads;
// with mode's protocol on both sides, E=3 over the cluster's bookies.
func tlsRoundTrip(t *testing.T, classpath, uri, mode string, p tlsPKI, seed int64, where string) {
	t.Helper()
	const n = 30
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fc := folioTLSClient(t, uri, mode, p.writer)
	conf := javaClientConf(t, &p.writer)
	ops := runDriver(t, classpath, uri, mode, "write", "--client-conf", conf, "--digest", "CRC32C,MAC",
		"--password", password, "--ensemble", "3", "--write-quorum", "3", "--ack-quorum", "2",
		"--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed))
	for _, r := range ops {
		lac, got := folioReadAll(ctx, t, fc, r.int("ledgerId"), false)
		if lac != n-1 {
			t.Errorf("folio read (TLS) of a Java %s ledger on %s: LAC %d", r.str("digest"), where, lac)
		}
		checkPayloads(t, "folio read (TLS) of a Java "+r.str("digest")+" ledger on "+where, r.int("ledgerId"), seed, got, n)
	}
	var ids []string
	for _, d := range []client.DigestType{client.DigestCRC32, client.DigestCRC32C} {
		w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2,
			DigestType: d, Password: []byte(password)})
		if err != nil {
			t.Fatalf("folio create (TLS) on %s: %v", where, err)
		}
		for i := range int64(n) {
			if _, err := w.Append(ctx, payload(seed+1, i)); err != nil {
				t.Fatalf("folio append (TLS) %d on %s: %v", i, where, err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, fmt.Sprint(w.ID()))
	}
	ops = runDriver(t, classpath, uri, mode, "read", "--client-conf", conf, "--ledger", strings.Join(ids, ","), "--password", password)
	for _, r := range ops {
		if r.int("lac") != n-1 {
			t.Errorf("java read (TLS) of a Folio ledger on %s: LAC %d", where, r.int("lac"))
		}
		checkPayloads(t, "java read (TLS) of a Folio ledger on "+where, r.int("ledgerId"), seed+1, javaEntries(t, r), n)
	}
}

// TLSJavaClientOnFolioBookies (compat/tls): three `folio bookie` processes
// with TLS, client certificates and BookieAuthZFactory. The Java client
// with TLS writes and reads there, with both protocols, and so does the
// Folio client; a Java client with a certificate of a role not listed, one
// of another CA, and one without TLS are refused, as Java bookies refuse
// them (UnauthorizedAccessException for the authorisation refusals), and
// store nothing.
func TLSJavaClientOnFolioBookies(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	cluster := startStandalone(t, 0)
	p := newTLSPKI(t)
	var ids []string
	var fbs []folioBookie
	for range 3 {
		fb := startFolioBookie(t, cluster.bin, cluster.uri, p.bookieTLSKeys())
		fbs = append(fbs, fb)
		ids = append(ids, fb.addr)
	}
	defer func() {
		if t.Failed() {
			for _, fb := range fbs {
				t.Logf("--- folio bookie %s log (tail) ---\n%s", fb.addr, tailFile(fb.logPath, 30))
			}
		}
	}()
	waitRegistered(t, cluster.uri, ids)
	for mi, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			tlsRoundTrip(t, classpath, cluster.uri, mode, p, int64(mi+1)*1000, "Folio bookies")
		})
	}

	// Refused Java clients. UnauthorizedAccessException is -102.
	for _, c := range []struct {
		name string
		conf string
		want int64 // 0: any error
	}{
		{"role not listed", javaClientConf(t, &p.reader), -102},
		{"no TLS", javaClientConf(t, nil), -102},
		{"certificate of another CA", javaClientConf(t, &p.stranger), 0},
	} {
		t.Run("JavaRefused/"+c.name, func(t *testing.T) {
			ops, stderr := runDriverAnyError(t, classpath, cluster.uri, "v3", "write", "--client-conf", c.conf,
				"--password", password, "--ensemble", "3", "--write-quorum", "3", "--ack-quorum", "3", "--entries", "3", "--seed", "5")
			if len(ops) != 1 {
				t.Fatalf("Java %s: no write result\n%s", c.name, tail(stderr, 30))
			}
			r := ops[0]
			if r.int("error") == 0 || r.int("lastAck") != -1 || (c.want != 0 && r.int("error") != c.want) {
				t.Fatalf("Java client with %s: error %d (want %d), last ack %d: %s", c.name, r.int("error"), c.want, r.int("lastAck"), r.str("message"))
			}
			t.Logf("Java client with %s refused: error %d: %s", c.name, r.int("error"), r.str("message"))
			// Nothing was stored: a Folio client with recovery finds an
			// empty ledger.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fc := folioTLSClient(t, cluster.uri, "v3", p.writer)
			if lac, got := folioReadAll(ctx, t, fc, r.int("ledgerId"), true); lac != -1 || len(got) != 0 {
				t.Fatalf("the refused client's ledger holds entries up to %d", lac)
			}
		})
	}
}

// TLSMixedEnsemble (compat/tls): one `folio bookie` and two Apache
// BookKeeper bookies, all with TLS, client certificates and
// BookieAuthZFactory, so every E=3 ledger spans both implementations: the
// Java and the Folio client, each with TLS, write and read each other's
// ledgers with both protocols. The Folio client is refused by the Java
// bookies as by its own when its certificate's role is not listed, or when
// another CA signed it.
func TLSMixedEnsemble(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	cluster := startStandalone(t, 0)
	p := newTLSPKI(t)
	w0, w1 := startJavaBookieConf(t, classpath, cluster.uri, p.bookieTLSKeys()), startJavaBookieConf(t, classpath, cluster.uri, p.bookieTLSKeys())
	fb := startFolioBookie(t, cluster.bin, cluster.uri, p.bookieTLSKeys())
	jbs := []javaBookie{w0(), w1()}
	defer func() {
		if t.Failed() {
			for _, jb := range jbs {
				t.Logf("--- Java bookie %s log (tail) ---\n%s", jb.addr, tailFile(jb.logPath, 40))
			}
			t.Logf("--- folio bookie %s log (tail) ---\n%s", fb.addr, tailFile(fb.logPath, 30))
		}
	}()
	waitRegistered(t, cluster.uri, []string{jbs[0].addr, jbs[1].addr, fb.addr})
	for mi, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			tlsRoundTrip(t, classpath, cluster.uri, mode, p, int64(mi+1)*1000+500, "the mixed ensemble")
		})
	}

	for _, c := range []struct {
		name         string
		files        tlstest.Files
		unauthorized bool
	}{
		{"role not listed", p.reader, true},
		{"certificate of another CA", p.stranger, false},
	} {
		t.Run("FolioRefused/"+c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fc := folioTLSClient(t, cluster.uri, "v3", c.files)
			w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte(password)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Append(ctx, []byte("must not be stored"))
			switch {
			case err == nil:
				t.Fatalf("Folio client with %s: append succeeded", c.name)
			case c.unauthorized && !errors.Is(err, client.ErrUnauthorized):
				t.Fatalf("Folio client with %s: %v, want ErrUnauthorized", c.name, err)
			case !strings.Contains(err.Error(), "bookie connection security failed"):
				t.Fatalf("Folio client with %s: %v, want a TLS refusal", c.name, err)
			}
			t.Logf("Folio client with %s refused: %v", c.name, err)

			// Each Java bookie on its own refuses Folio's client the way
			// it refuses Java's (a START_TLS answer with EIO after the
			// handshake for the role, a failed handshake for the CA).
			cfg, err := client.TLSConfigFromPEM(c.files.CA, c.files.Cert, c.files.Key)
			if err != nil {
				t.Fatal(err)
			}
			bks := rereplication.NewBookiesTLS(0, nil, cfg)
			defer bks.Close()
			for _, jb := range jbs {
				row := admin.GetBookieInfo(ctx, bks, []string{jb.addr})[0]
				if !strings.Contains(row.Error, "bookie connection security failed") ||
					(c.unauthorized && !strings.Contains(row.Error, "not authorized there")) {
					t.Fatalf("Java bookie %s, Folio client with %s: %q", jb.addr, c.name, row.Error)
				}
				t.Logf("Java bookie %s refused Folio's client with %s: %s", jb.addr, c.name, row.Error)
			}
		})
	}
	// ... and serves it with an authorised certificate.
	cfg, err := client.TLSConfigFromPEM(p.writer.CA, p.writer.Cert, p.writer.Key)
	if err != nil {
		t.Fatal(err)
	}
	bks := rereplication.NewBookiesTLS(0, nil, cfg)
	defer bks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, row := range admin.GetBookieInfo(ctx, bks, []string{jbs[0].addr, jbs[1].addr, fb.addr}) {
		if row.Error != "" || row.TotalDiskCapacity <= 0 {
			t.Fatalf("bookie info over TLS from %s: %+v", row.ID, row)
		}
	}
}
