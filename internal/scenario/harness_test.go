package scenario_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// waitTimeout bounds every wait of the harness.
const waitTimeout = 60 * time.Second

// writer is a writer process (see runWriter) and its directory.
type writer struct {
	t    *testing.T
	dir  string
	cmd  *exec.Cmd
	exit chan error
}

// startWriter re-executes the test binary as a writer creating a ledger
// with quorum "E,Qw,Qa" and appending in mode ("sync:N", "pipe:N",
// "async:N"); probe makes it wait for the probe file before its last
// appends. It is SIGKILLed at cleanup if still running.
func startWriter(t *testing.T, cl *testcluster.Cluster, quorum, mode string, probe bool) *writer {
	t.Helper()
	w := &writer{t: t, dir: t.TempDir(), exit: make(chan error, 1)}
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(os.Environ(), envWriterDir+"="+w.dir, envURI+"="+cl.URI, envQuorum+"="+quorum, envMode+"="+mode)
	if probe {
		w.cmd.Env = append(w.cmd.Env, envProbe+"=1")
	}
	stderr, err := os.Create(filepath.Join(w.dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr, w.cmd.Stdout = stderr, stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exit <- w.cmd.Wait(); stderr.Close() }()
	t.Cleanup(w.kill)
	return w
}

func (w *writer) path(name string) string { return filepath.Join(w.dir, name) }

func (w *writer) stderr() string {
	b, _ := os.ReadFile(w.path("stderr"))
	return string(b)
}

// waitFor polls cond until it holds, failing the test (with the writer's
// stderr) after waitTimeout or if the writer exits first with an error.
func (w *writer) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		select {
		case err := <-w.exit:
			w.exit <- err
			if !cond() {
				w.t.Fatalf("writer exited (%v) while waiting for %s; its log ends %q; stderr:\n%s", err, what, w.logTail(5), w.stderr())
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("writer: no %s within %v; stderr:\n%s", what, waitTimeout, w.stderr())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logTail is the first failed completion in the writer's log (if any),
// then its last n completions.
func (w *writer) logTail(n int) []string {
	lines := w.results().lines
	var out []string
	if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "err ") }); i >= 0 && i < len(lines)-n {
		out = append(out, lines[i], "…")
	}
	return append(out, lines[max(0, len(lines)-n):]...)
}

func (w *writer) exists(name string) bool {
	_, err := os.Stat(w.path(name))
	return err == nil
}

// ledgerID waits for the writer to create its ledger.
func (w *writer) ledgerID() int64 {
	w.t.Helper()
	w.waitFor("ledger", func() bool { return w.exists(fileLedger) })
	b, err := os.ReadFile(w.path(fileLedger))
	if err != nil {
		w.t.Fatal(err)
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		w.t.Fatal(err)
	}
	return id
}

// waitAcked waits until at least n appends were acknowledged.
func (w *writer) waitAcked(n int) {
	w.t.Helper()
	w.waitFor(strconv.Itoa(n)+" acknowledged appends", func() bool { return len(w.results().acked) >= n })
}

// waitExit waits for the writer to exit and fails the test if it failed.
func (w *writer) waitExit() {
	w.t.Helper()
	select {
	case err := <-w.exit:
		w.exit <- err
		if err != nil {
			w.t.Fatalf("writer failed: %v; stderr:\n%s", err, w.stderr())
		}
	case <-time.After(waitTimeout):
		w.t.Fatalf("writer did not exit within %v; stderr:\n%s", waitTimeout, w.stderr())
	}
}

// kill SIGKILLs the writer (no-op once it exited).
func (w *writer) kill() {
	_ = w.cmd.Process.Kill()
	err := <-w.exit
	w.exit <- err
}

// writerResults is the writer's log read back from disk.
type writerResults struct {
	acked []int64
	// lines are the completions in order: "ok <id>" or "err <class> …".
	lines []string
}

func (w *writer) results() writerResults {
	b, _ := os.ReadFile(w.path(fileLog))
	var r writerResults
	text := string(b)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i] // a torn last line (SIGKILL) is not a result
	} else {
		text = ""
	}
	for _, l := range strings.Split(text, "\n") {
		if l == "" {
			continue
		}
		r.lines = append(r.lines, l)
		if id, ok := strings.CutPrefix(l, "ok "); ok {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				w.t.Fatalf("writer log line %q", l)
			}
			r.acked = append(r.acked, n)
		}
	}
	return r
}

// errors returns the classes of the failed completions.
func (r writerResults) errors() []string {
	var out []string
	for _, l := range r.lines {
		if rest, ok := strings.CutPrefix(l, "err "); ok {
			class, _, _ := strings.Cut(rest, " ")
			out = append(out, class)
		}
	}
	return out
}

// checkWriterLog: acknowledgements are contiguous from 0 and in order
// (invariant 5), and nothing succeeds after the first failure (a fenced or
// closed writer never reports success again).
func checkWriterLog(t *testing.T, r writerResults) {
	t.Helper()
	failed := false
	next := int64(0)
	for _, l := range r.lines {
		if strings.HasPrefix(l, "err ") {
			failed = true
			continue
		}
		id, _ := strconv.ParseInt(strings.TrimPrefix(l, "ok "), 10, 64)
		if failed {
			t.Errorf("writer: %q after a failed append", l)
		}
		if id != next {
			t.Errorf("writer: acknowledged %d, expected %d (acks must be contiguous and ordered)", id, next)
		}
		next = id + 1
	}
}

// newClient is a recoverer or checker: a client of its own, with short
// timeouts so that dead bookies cost little.
func newClient(t *testing.T, cl *testcluster.Cluster, mod func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{MetadataServiceURI: cl.URI, AddEntryTimeout: 2 * time.Second, ReadEntryTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// recoverLedger opens id with recovery and returns the end it reports.
func recoverLedger(ctx context.Context, c *client.Client, id int64) (int64, error) {
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: writerPassword, Recovery: true})
	if err != nil {
		return -2, err
	}
	defer r.Close()
	if !r.IsClosed() {
		return -2, errors.New("recovered handle is not closed")
	}
	return r.ReadLastAddConfirmed(ctx)
}

func mustRecover(t *testing.T, c *client.Client, id int64) int64 {
	t.Helper()
	end, err := recoverLedger(ctxFor(t), c, id)
	if err != nil {
		t.Fatalf("recover ledger %d: %v", id, err)
	}
	return end
}

// checkU runs the universal checks of spec §8.2 on a closed ledger:
// U1 CLOSED; U2 every acknowledged id ≤ lastEntryId; U3 every id
// 0..lastEntryId reads back byte-exact as the writer sent it; U4 every end
// a recoverer reported is the stored one. It returns the metadata.
func checkU(t *testing.T, cl *testcluster.Cluster, c *client.Client, id int64, w *writer, ends ...int64) *metadata.LedgerMetadata {
	t.Helper()
	ctx := ctxFor(t)
	md, _, err := cl.MD.ReadLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if md.State != metadata.LedgerClosed {
		t.Fatalf("U1: ledger %d is %v, want CLOSED", id, md.State)
	}
	end := md.LastEntryID
	if w != nil {
		res := w.results()
		checkWriterLog(t, res)
		for _, a := range res.acked {
			if a > end {
				t.Errorf("U2: acknowledged entry %d is above the end %d: LOST", a, end)
			}
		}
	}
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: writerPassword})
	if err != nil {
		t.Fatal(err)
	}
	if end >= 0 {
		entries, err := r.Read(ctx, 0, end)
		if err != nil {
			t.Fatalf("U3: read 0..%d: %v", end, err)
		}
		var length int64
		for i, e := range entries {
			if e.ID != int64(i) || !bytes.Equal(e.Payload, payloadOf(id, int64(i))) {
				t.Fatalf("U3: entry %d (id %d) is not what the writer sent", i, e.ID)
			}
			length += int64(len(e.Payload))
		}
		if int64(len(entries)) != end+1 {
			t.Fatalf("U3: read %d entries of 0..%d", len(entries), end)
		}
		if length != md.Length {
			t.Errorf("U3: entries 0..%d hold %d bytes, metadata length %d", end, length, md.Length)
		}
	} else if md.Length != 0 {
		t.Errorf("empty ledger closed with length %d", md.Length)
	}
	for i, e := range ends {
		if e != end {
			t.Errorf("U4: recoverer %d reported end %d, the stored end is %d", i, e, end)
		}
	}
	return md
}

// checkRecoveryHistory checks the history of ledger id's metadata key in
// etcd, every value from its creation on (spec §8.2 #9): one or more OPEN
// versions (the create, then ensemble changes by the writer), exactly one
// IN_RECOVERY version, which changes nothing but the state, and exactly one
// CLOSED version, the last (nothing was written after the close), closed
// at every end given. With stable (no bookie failed before the close, so
// that nothing called for an ensemble change) the create is the only OPEN
// version and the close changes only the state and the close values. It
// returns the history.
func checkRecoveryHistory(t *testing.T, cl *testcluster.Cluster, id int64, stable bool, ends ...int64) []testcluster.LedgerVersion {
	t.Helper()
	h, err := cl.LedgerHistory(ctxFor(t), id)
	if err != nil {
		t.Fatalf("metadata history: %v", err)
	}
	desc := testcluster.FormatHistory(h)
	t.Logf("ledger %d metadata history: %s", id, desc)
	opens := 0
	for opens < len(h) && h[opens].Metadata.State == metadata.LedgerOpen {
		opens++
	}
	if opens == 0 || len(h) != opens+2 || h[opens].Metadata.State != metadata.LedgerInRecovery || h[opens+1].Metadata.State != metadata.LedgerClosed {
		t.Fatalf("metadata history %s: want OPEN versions, then exactly one IN_RECOVERY, then exactly one CLOSED and no write after it", desc)
	}
	marked := h[opens-1].Metadata.Clone()
	marked.State = metadata.LedgerInRecovery
	if !marked.Equal(h[opens].Metadata) {
		t.Errorf("metadata history %s: marking IN_RECOVERY changed more than the state: %+v, then %+v", desc, h[opens-1].Metadata, h[opens].Metadata)
	}
	closed := h[opens+1].Metadata
	if stable {
		if opens != 1 {
			t.Errorf("metadata history %s: %d OPEN versions with no bookie failure, want only the create", desc, opens)
		}
		want := h[opens].Metadata.Clone()
		want.State, want.LastEntryID, want.Length = metadata.LedgerClosed, closed.LastEntryID, closed.Length
		if !want.Equal(closed) {
			t.Errorf("metadata history %s: with no bookie failure the close changed more than the state and close values: %+v, then %+v", desc, h[opens].Metadata, closed)
		}
	}
	for i, e := range ends {
		if e != closed.LastEntryID {
			t.Errorf("metadata history %s: recoverer %d reported end %d, the CLOSED version's is %d", desc, i, e, closed.LastEntryID)
		}
	}
	return h
}

// rawAdd sends one normal (non-recovery) ADD_ENTRY for ledger id straight
// to a bookie and returns its status.
func rawAdd(t *testing.T, bookie string, id, entryID int64) wire.Status {
	t.Helper()
	tr := mustTransport(t, transport.Config{Protocol: wire.ProtocolV3})
	defer tr.Close()
	dig, err := digest.New(digest.Type(metadata.DigestCRC32C), writerPassword)
	if err != nil {
		t.Fatal(err)
	}
	mk := digest.MasterKey(writerPassword)
	body := dig.AppendEntry(nil, id, entryID, entryID-1, 0, []byte("late add"))
	req := wire.Request{
		Header: wire.Header{Op: wire.OpAddEntry},
		Has:    wire.BodyAdd,
		Add:    wire.AddRequest{LedgerID: id, EntryID: entryID, MasterKey: mk[:], Body: body},
	}
	type res struct {
		st  wire.Status
		err error
	}
	ch := make(chan res, 1)
	tr.Send(bookie, id, &req, func(resp *wire.Response, err error) {
		if err != nil {
			ch <- res{err: err}
			return
		}
		st := resp.Status
		if st == wire.StatusOK {
			st = resp.Add.Status
		}
		ch <- res{st: st}
	})
	r := <-ch
	if r.err != nil {
		t.Fatalf("raw add to %s: %v", bookie, r.err)
	}
	return r.st
}

// ensembleOf returns the ledger's first ensemble as bookies of the cluster.
func ensembleOf(t *testing.T, cl *testcluster.Cluster, id int64) []*testcluster.Bookie {
	t.Helper()
	md, _, err := cl.MD.ReadLedger(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []*testcluster.Bookie
	for _, bid := range md.Ensembles[0].Ensemble {
		for _, b := range cl.Bookies {
			if b.ID == bid {
				out = append(out, b)
			}
		}
	}
	return out
}

// mustTransport is transport.New for a configuration known to be valid.
func mustTransport(tb testing.TB, cfg transport.Config) *transport.Transport {
	tb.Helper()
	tr, err := transport.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}
