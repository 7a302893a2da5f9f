package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
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
	c := exec.CommandContext(ctx, "java", full...)
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

// TestJavaClientInterop runs the Java BookKeeper client and the Folio client
// against each other on three Folio bookies, with the v3 protocol and with
// useV2WireProtocol=true on both sides.
func TestJavaClientInterop(t *testing.T) {
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
			fc := newFolioClient(t, cluster.uri, mode)
			seedBase := int64(mi+1) * 100
			var folioLedgers []int64

			t.Run("JavaWritesFolioReads", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				const n = 60
				seed := seedBase + 1
				var names []string
				for _, d := range digests {
					names = append(names, d.java)
				}
				ops := runDriver(t, classpath, cluster.uri, mode, "write", "--digest", strings.Join(names, ","),
					"--password", password, "--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed),
					"--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2")
				if len(ops) != len(digests) {
					t.Fatalf("java write: %d results, want %d: %v", len(ops), len(digests), ops)
				}
				for _, r := range ops {
					id := r.int("ledgerId")
					if !r["closed"].(bool) || r.int("lac") != n-1 {
						t.Errorf("java write %s: %v", r.str("digest"), r)
					}
					lac, got := folioReadAll(ctx, t, fc, id, false)
					if lac != n-1 {
						t.Errorf("folio read of Java ledger %d (%s): LAC %d, want %d", id, r.str("digest"), lac, n-1)
					}
					checkPayloads(t, "folio read of Java "+r.str("digest")+" ledger", id, seed, got, n)
				}
			})

			t.Run("FolioWritesJavaReads", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				const n = 60
				seed := seedBase + 2
				var ids []string
				for _, d := range digests {
					w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
						DigestType: d.folio, Password: []byte(password)})
					if err != nil {
						t.Fatalf("folio create (%v): %v", d.folio, err)
					}
					for i := range int64(n) {
						if _, err := w.Append(ctx, payload(seed, i)); err != nil {
							t.Fatalf("folio append %d: %v", i, err)
						}
					}
					if err := w.Close(ctx); err != nil {
						t.Fatalf("folio close: %v", err)
					}
					folioLedgers = append(folioLedgers, w.ID())
					ids = append(ids, fmt.Sprint(w.ID()))
				}
				ops := runDriver(t, classpath, cluster.uri, mode, "read", "--ledger", strings.Join(ids, ","), "--password", password)
				if len(ops) != len(digests) {
					t.Fatalf("java read: %d results, want %d", len(ops), len(digests))
				}
				for i, r := range ops {
					if r.str("digest") != digests[i].java || !r["closed"].(bool) || r.int("lac") != n-1 {
						t.Errorf("java read of Folio %v ledger: %v", digests[i].folio, r)
					}
					checkPayloads(t, "java read of Folio "+digests[i].java+" ledger", r.int("ledgerId"), seed, javaEntries(t, r), n)
				}
			})

			t.Run("JavaSeesFolioMetadata", func(t *testing.T) {
				if len(folioLedgers) == 0 {
					t.Skip("no Folio ledgers (FolioWritesJavaReads failed)")
				}
				listed := runDriver(t, classpath, cluster.uri, mode, "list")[0]
				var javaIDs []int64
				for _, v := range listed["ledgers"].([]any) {
					id, _ := v.(json.Number).Int64()
					javaIDs = append(javaIDs, id)
				}
				for _, id := range folioLedgers {
					if !slices.Contains(javaIDs, id) {
						t.Errorf("Java's ledger listing %v lacks Folio ledger %d", javaIDs, id)
					}
				}
				var total int64
				for i := range int64(60) {
					total += int64(len(payload(seedBase+2, i)))
				}
				var idList []string
				for _, id := range folioLedgers {
					idList = append(idList, fmt.Sprint(id))
				}
				mds := runDriver(t, classpath, cluster.uri, mode, "meta", "--ledger", strings.Join(idList, ","))
				if len(mds) != len(folioLedgers) {
					t.Fatalf("java meta: %d results for %d ledgers", len(mds), len(folioLedgers))
				}
				for i, md := range mds {
					id := folioLedgers[i]
					want := map[string]any{"ledgerId": id, "ensembleSize": 3, "writeQuorum": 2, "ackQuorum": 2,
						"state": "CLOSED", "lastEntryId": 59, "length": total, "digest": digests[i].java,
						"hasPassword": true, "password": hex.EncodeToString([]byte(password)), "formatVersion": 3}
					for k, v := range want {
						if n, ok := md[k].(json.Number); ok {
							md[k] = n.String()
							v = fmt.Sprint(v)
						}
						if md[k] != v {
							t.Errorf("Java's metadata of Folio ledger %d: %s = %v, want %v", id, k, md[k], v)
						}
					}
					ens, _ := md["ensembles"].(map[string]any)
					first, _ := ens["0"].([]any)
					if len(ens) != 1 || len(first) != 3 {
						t.Errorf("Java's metadata of Folio ledger %d: ensembles %v", id, md["ensembles"])
					}
					for _, b := range first {
						if !slices.Contains(cluster.bookies, b.(string)) {
							t.Errorf("Java's metadata of Folio ledger %d: bookie %v is not one of %v", id, b, cluster.bookies)
						}
					}
				}
			})

			t.Run("JavaRecoversFolioWriter", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				seed := seedBase + 3
				w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
					DigestType: client.DigestCRC32C, Password: []byte(password)})
				if err != nil {
					t.Fatal(err)
				}
				acked := int64(-1)
				var writeErr error
				var wg sync.WaitGroup
				started := make(chan struct{})
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int64(0); ; i++ {
						if i == 20 {
							close(started)
						}
						id, err := w.Append(ctx, payload(seed, i))
						if err != nil {
							writeErr = err
							if i < 20 {
								close(started)
							}
							return
						}
						acked = id
						time.Sleep(2 * time.Millisecond)
					}
				}()
				<-started
				r := runDriver(t, classpath, cluster.uri, mode, "read", "--ledger", fmt.Sprint(w.ID()), "--password", password, "--recovery")[0]
				wg.Wait()
				if !errors.Is(writeErr, client.ErrLedgerFenced) {
					t.Errorf("folio writer after Java's recovery: %v, want ErrLedgerFenced", writeErr)
				}
				lac := r.int("lac")
				if !r["closed"].(bool) || lac < acked {
					t.Errorf("Java recovery closed at %d (closed %v); the Folio writer had acknowledged up to %d", lac, r["closed"], acked)
				}
				checkPayloads(t, "java recovery read of Folio ledger", w.ID(), seed, javaEntries(t, r), lac+1)
				flac, got := folioReadAll(ctx, t, fc, w.ID(), false)
				if flac != lac {
					t.Errorf("folio sees LAC %d after Java's recovery closed at %d", flac, lac)
				}
				checkPayloads(t, "folio read after Java recovery", w.ID(), seed, got, lac+1)
				t.Logf("Folio writer acknowledged 0..%d, Java recovery closed at %d", acked, lac)
			})

			t.Run("FolioRecoversJavaWriter", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				seed := seedBase + 4
				p := startDriver(t, classpath, cluster.uri, mode, "write", "--digest", "CRC32C", "--password", password,
					"--entries", "100000", "--seed", fmt.Sprint(seed), "--until-error", "--close", "false", "--pause-ms", "2")
				created := p.next(30 * time.Second)
				id := created.int("created")
				if id == 0 {
					t.Fatalf("java write: first line %v", created)
				}
				for acks := 0; acks < 20; {
					if _, ok := p.next(30 * time.Second)["ack"]; ok {
						acks++
					}
				}
				lac, got := folioReadAll(ctx, t, fc, id, true)
				ops := p.wait()
				if len(ops) != 1 {
					t.Fatalf("java writer results: %v", ops)
				}
				wr := ops[0]
				if wr.int("error") != -101 {
					t.Errorf("java writer after Folio's recovery: error %d (%s), want -101 (LedgerFencedException)", wr.int("error"), wr.str("message"))
				}
				if wr.int("lastAck") > lac {
					t.Errorf("Folio recovery closed at %d; the Java writer had acknowledged up to %d", lac, wr.int("lastAck"))
				}
				checkPayloads(t, "folio recovery read of Java ledger", id, seed, got, lac+1)
				jr := runDriver(t, classpath, cluster.uri, mode, "read", "--ledger", fmt.Sprint(id), "--password", password)[0]
				if jr.int("lac") != lac || !jr["closed"].(bool) {
					t.Errorf("Java sees %v after Folio's recovery closed at %d", jr, lac)
				}
				checkPayloads(t, "java read after Folio recovery", id, seed, javaEntries(t, jr), lac+1)
				t.Logf("Java writer acknowledged 0..%d, Folio recovery closed at %d", wr.int("lastAck"), lac)
			})

			t.Run("JavaTailsFolioLedger", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				const n = 20
				seed := seedBase + 5
				w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
					DigestType: client.DigestCRC32C, Password: []byte(password)})
				if err != nil {
					t.Fatal(err)
				}
				p := startDriver(t, classpath, cluster.uri, mode, "tail", "--ledger", fmt.Sprint(w.ID()), "--password", password,
					"--count", fmt.Sprint(n), "--timeout-ms", "40000")
				if r := p.next(30 * time.Second); r["ready"] != true {
					t.Fatalf("java tail: %v", r)
				}
				// Entry i becomes visible to readers with entry i+1 (its LAC):
				// n+1 appends let the tailer see entries 0..n-1.
				for i := range int64(n + 1) {
					if _, err := w.Append(ctx, payload(seed, i)); err != nil {
						t.Fatal(err)
					}
					time.Sleep(50 * time.Millisecond)
				}
				ops := p.wait()
				p.mu.Lock()
				var got [][]byte
				for _, r := range p.all {
					if h, ok := r["data"].(string); ok {
						if r.int("entry") != int64(len(got)) {
							t.Errorf("java tail: entry %d, want %d", r.int("entry"), len(got))
						}
						b, _ := hex.DecodeString(h)
						got = append(got, b)
					}
				}
				p.mu.Unlock()
				if len(ops) != 1 || ops[0].int("error") != 0 {
					t.Errorf("java tail: %v", ops)
				}
				checkPayloads(t, "java tail of Folio ledger", w.ID(), seed, got, n)
				if len(ops) == 1 {
					t.Logf("java tail: %d entries in %d polls (%d retries before the first entry, %d LAC reads, last LAC from a poll %d)",
						ops[0].int("seen"), ops[0].int("polls"), ops[0].int("retries"), ops[0].int("lacReads"), ops[0].int("lastPollLac"))
					// With v3 every poll is a long poll that waits for the next entry:
					// a busy loop would mean the bookie answers long polls at once.
					if mode == "v3" && ops[0].int("polls") > 2*n+5 {
						t.Errorf("java tail (v3): %d polls for %d entries: the long polls did not wait", ops[0].int("polls"), n)
					}
				}
				_ = w.Close(ctx)
			})
		})
	}
}
