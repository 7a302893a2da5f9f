package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// The Java client API tests: org.foliodb.compat.Driver (java/src/main/java/
// .../Driver.java), Apache BookKeeper 4.17's own BookKeeper client on its etcd
// metadata driver, against a `folio standalone` cluster of three Folio bookies
// and the Folio client, on the same etcd.

const (
	javaCmdTimeout = 2 * time.Minute
	password       = "compat-pw"
)

// The digest types, by their Java (client.api.DigestType) and Folio names.
var digests = []struct {
	java  string
	folio client.DigestType
}{
	{"CRC32", client.DigestCRC32},
	{"CRC32C", client.DigestCRC32C},
	{"MAC", client.DigestHMAC},
	{"DUMMY", client.DigestDummy},
}

// payload is entry i of a ledger written with seed: the same bytes as
// Driver.payload on the Java side (empty entry 0, a 256 KiB entry every 50).
func payload(seed, i int64) []byte {
	var n int64
	switch {
	case i == 0:
		n = 0
	case i%50 == 7:
		n = 256*1024 + i
	default:
		n = (i*131+seed*7)%3000 + 1
	}
	b := make([]byte, n)
	for j := range n {
		b[j] = byte((seed*31 + i*17 + j*7) & 0xff)
	}
	return b
}

// result is one JSON line printed by Driver.
type result map[string]any

// int reads an integer field (decoded as json.Number: ledger ids need all
// 64 bits).
func (r result) int(k string) int64 {
	n, _ := r[k].(json.Number)
	i, _ := n.Int64()
	return i
}

func (r result) str(k string) string { s, _ := r[k].(string); return s }

// javaProc is a running Driver: its JSON lines as they come.
type javaProc struct {
	t      *testing.T
	args   []string
	lines  chan result
	done   chan error
	stderr *bytes.Buffer
	all    []result
	mu     sync.Mutex
}

// startDriver starts `Driver <cmd> --uri ... --protocol mode args...`.
func startDriver(t *testing.T, classpath, uri, mode, cmd string, args ...string) *javaProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), javaCmdTimeout)
	full := append([]string{"-cp", classpath, "org.foliodb.compat.Driver", cmd, "--uri", uri, "--protocol", mode}, args...)
	c := exec.CommandContext(ctx, "java", javaArgs(full...)...)
	p := &javaProc{t: t, args: full[3:], lines: make(chan result, 1024), done: make(chan error, 1), stderr: &bytes.Buffer{}}
	c.Stderr = p.stderr
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		cancel()
		t.Fatalf("compat: start java: %v", err)
	}
	go func() {
		defer cancel()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r result
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber()
			if err := dec.Decode(&r); err != nil {
				r = result{"unparsed": sc.Text()}
			}
			p.mu.Lock()
			p.all = append(p.all, r)
			p.mu.Unlock()
			p.lines <- r
		}
		close(p.lines)
		p.done <- c.Wait()
	}()
	t.Cleanup(func() { _ = c.Process.Kill() })
	return p
}

// next returns the next JSON line, failing the test on exit or timeout.
func (p *javaProc) next(timeout time.Duration) result {
	p.t.Helper()
	select {
	case r, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("compat: java %v ended early\n--- stderr (tail) ---\n%s", p.args, tail(p.stderr.String(), 40))
		}
		return r
	case <-time.After(timeout):
		p.t.Fatalf("compat: java %v: no output within %v\n--- stderr (tail) ---\n%s", p.args, timeout, tail(p.stderr.String(), 40))
	}
	return nil
}

// wait waits for the process to end and returns its results with an "op" key.
func (p *javaProc) wait() []result {
	p.t.Helper()
	for range p.lines {
	}
	if err := <-p.done; err != nil {
		p.t.Fatalf("compat: java %v: %v\n--- stderr (tail) ---\n%s", p.args, err, tail(p.stderr.String(), 40))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ops []result
	for _, r := range p.all {
		if _, ok := r["op"]; ok {
			ops = append(ops, r)
		}
		if u, ok := r["unparsed"]; ok {
			p.t.Errorf("compat: java %v printed a non-JSON line: %v", p.args, u)
		}
	}
	return ops
}

// runDriver runs a Driver command to its end and returns its "op" results,
// failing the test on any result with a non-zero error.
func runDriver(t *testing.T, classpath, uri, mode, cmd string, args ...string) []result {
	t.Helper()
	p := startDriver(t, classpath, uri, mode, cmd, args...)
	ops := p.wait()
	for _, r := range ops {
		if r.int("error") != 0 {
			t.Fatalf("compat: java %s %v: error %d: %s\n--- stderr (tail) ---\n%s", cmd, args, r.int("error"), r.str("message"), tail(p.stderr.String(), 40))
		}
	}
	return ops
}

func newFolioClient(t *testing.T, uri, mode string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri, UseV2WireProtocol: mode == "v2"})
	if err != nil {
		t.Fatalf("compat: folio client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// folioReadAll opens ledger id (with recovery or not) and reads 0..LAC.
func folioReadAll(ctx context.Context, t *testing.T, c *client.Client, id int64, recovery bool) (int64, [][]byte) {
	t.Helper()
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte(password), Recovery: recovery})
	if err != nil {
		t.Fatalf("compat: folio open ledger %d (recovery %v): %v", id, recovery, err)
	}
	lac, err := r.ReadLastAddConfirmed(ctx)
	if err != nil {
		t.Fatalf("compat: folio read LAC of %d: %v", id, err)
	}
	var out [][]byte
	if lac >= 0 {
		entries, err := r.Read(ctx, 0, lac)
		if err != nil {
			t.Fatalf("compat: folio read ledger %d 0..%d: %v", id, lac, err)
		}
		for i, e := range entries {
			if e.ID != int64(i) {
				t.Fatalf("compat: folio read ledger %d: entry %d has id %d", id, i, e.ID)
			}
			out = append(out, e.Payload)
		}
	}
	return lac, out
}

// javaEntries decodes the "entries" of a Driver read result.
func javaEntries(t *testing.T, r result) [][]byte {
	t.Helper()
	raw, _ := r["entries"].([]any)
	out := make([][]byte, len(raw))
	for i, h := range raw {
		b, err := hex.DecodeString(h.(string))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func checkPayloads(t *testing.T, who string, id, seed int64, got [][]byte, n int64) {
	t.Helper()
	if int64(len(got)) != n {
		t.Errorf("%s: ledger %d: %d entries, want %d", who, id, len(got), n)
	}
	for i, b := range got {
		if want := payload(seed, int64(i)); !bytes.Equal(b, want) {
			t.Errorf("%s: ledger %d entry %d: %d bytes differ from the %d written", who, id, i, len(b), len(want))
		}
	}
}

// JavaClientInterop (TestJavaClientInterop) runs the Java BookKeeper client and the Folio client
// against each other on three Folio bookies, with the v3 protocol and with
// useV2WireProtocol=true on both sides; and BookKeeper's own shell
// (BookieShell) on Folio's metadata and bookies.
func JavaClientInterop(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	cluster := startStandalone(t, 3)
	defer func() {
		if t.Failed() {
			t.Logf("--- folio standalone log %s (tail) ---\n%s", cluster.logPath, tailFile(cluster.logPath, 60))
		}
	}()

	for mi, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			e := interopEnv{classpath: classpath, uri: cluster.uri, mode: mode, fc: newFolioClient(t, cluster.uri, mode),
				bookies: cluster.bookies, where: "Folio bookies", folio: cluster.bin}
			seedBase := int64(mi+1) * 100
			const n = 60
			var folioLedgers []int64
			t.Run("JavaWritesFolioReads", func(t *testing.T) { javaWritesFolioReads(t, e, seedBase+1, n) })
			t.Run("FolioWritesJavaReads", func(t *testing.T) { folioLedgers = folioWritesJavaReads(t, e, seedBase+2, n) })
			t.Run("JavaSeesFolioMetadata", func(t *testing.T) {
				if len(folioLedgers) == 0 {
					t.Skip("no Folio ledgers (FolioWritesJavaReads failed)")
				}
				javaSeesFolioMetadata(t, e, folioLedgers, seedBase+2, n)
			})
			t.Run("JavaRecoversFolioWriter", func(t *testing.T) { javaRecoversFolioWriter(t, e, seedBase+3) })
			t.Run("FolioRecoversJavaWriter", func(t *testing.T) { folioRecoversJavaWriter(t, e, seedBase+4) })
			t.Run("JavaTailsFolioLedger", func(t *testing.T) { javaTailsFolioLedger(t, e, seedBase+5) })
			t.Run("FolioTailsJavaLedger", func(t *testing.T) { folioTailsJavaLedger(t, e, seedBase+6) })
			t.Run("JavaWritesAdvFolioReads", func(t *testing.T) { javaWritesAdvFolioReads(t, e, seedBase+7, n) })
			t.Run("FolioWritesAdvJavaReads", func(t *testing.T) { folioWritesAdvJavaReads(t, e, seedBase+8, n) })
			if mode == "v3" {
				// The shell reads metadata (protocol-independent) and
				// entries with the v3 default; once is enough.
				t.Run("JavaShellOnFolio", func(t *testing.T) {
					if len(folioLedgers) == 0 {
						t.Skip("no Folio ledgers (FolioWritesJavaReads failed)")
					}
					javaShellSeesCluster(t, e, folioLedgers, n)
				})
			}
		})
	}
}
