package scenario_test

// The metadata store fails over (Folio issue 16 item 6): etcd runs as a
// 3-member cluster of processes, and its leader is SIGKILLed (and then a
// quorum of members lost and restored) while writers append and change
// ensembles, while a recovery runs, and while AutoRecovery re-replicates.
// Everyone (bookies, writers, recoverer, AutoRecovery) is given the
// multi-endpoint URI etcd://h1:p1;h2:p2;h3:p3/scope.
//
// Every outage is held until the party under test has demonstrably hit it:
// its metadata driver logs "etcd unavailable; retrying" for the request it
// is making (the writers' stderr, the AutoRecovery process's log, the
// recoverer's logger). Only then is the quorum restored. So each scenario
// proves that the operation rode through the outage, not that it happened
// to run before or after it.
//
// Checked after each: every acknowledged entry is readable byte-exact
// (digest-verified reads); every ledger is CLOSED with lastEntryId ≥ every
// acknowledged id (and at the writer's own end when it closed it); the
// metadata history has the expected shape; every bookie process is
// registered again; and the operations that were running completed.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/testcluster"
)

// retryMark is what the metadata driver logs when a request fails because
// etcd is unavailable and it will retry (internal/metadata/etcd retry.go).
const retryMark = "etcd unavailable; retrying"

// startFailoverCluster is a cluster of n bookie processes on a 3-member
// etcd cluster of processes with short raft timings.
func startFailoverCluster(t *testing.T, n int) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("process-level")
	}
	start := time.Now()
	cl := testcluster.Start(t, n, testcluster.WithEtcdCluster(testcluster.EtcdOptions{}))
	if !strings.Contains(cl.URI, ";") {
		t.Fatalf("metadata URI %s names one endpoint", cl.URI)
	}
	t.Logf("3 etcd members and %d bookies up in %v; URI %s", n, time.Since(start).Round(time.Millisecond), cl.URI)
	return cl
}

// loseQuorum SIGKILLs the leader and one other member: the one left cannot
// elect a leader. It returns the two killed members.
func loseQuorum(t *testing.T, ec *testcluster.EtcdCluster) (leader, other *testcluster.EtcdMember) {
	t.Helper()
	leader = ec.Leader()
	for _, m := range ec.Members {
		if m != leader && m.Running() {
			other = m
			break
		}
	}
	leader.Kill()
	other.Kill()
	t.Logf("etcd: leader %s and %s killed, no quorum", leader.Name, other.Name)
	return leader, other
}

// restoreQuorum restarts m and waits until a quorum holds a leader.
func restoreQuorum(t *testing.T, ec *testcluster.EtcdCluster, m *testcluster.EtcdMember) {
	t.Helper()
	m.Start()
	m.WaitReady()
	t.Logf("etcd: %s restarted, %s leads", m.Name, ec.Leader().Name)
}

// waitAllRegistered waits until every bookie is registered writable: they
// kept their registrations or registered again. It logs which bookies lost
// their session in an outage and registered again.
func waitAllRegistered(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	var again []string
	for _, b := range cl.Bookies {
		b.WaitRegistered(false)
		if log, _ := os.ReadFile(b.LogPath()); strings.Contains(string(log), "metadata session lost; registering again") {
			again = append(again, string(b.ID))
		}
	}
	t.Logf("all %d bookies registered; %d of them after losing their session in an outage %v", len(cl.Bookies), len(again), again)
}

// logSize is the current length of a log file (0 if absent): waitLogLine
// from there sees only what is logged later.
func logSize(path string) int {
	b, _ := os.ReadFile(path)
	return len(b)
}

// waitLogLine polls the log at path until a line written after offset from
// contains all of subs.
func waitLogLine(t *testing.T, what, path string, from int, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		b, _ := os.ReadFile(path)
		if from < len(b) {
			for _, line := range strings.Split(string(b[from:]), "\n") {
				ok := true
				for _, s := range subs {
					ok = ok && strings.Contains(line, s)
				}
				if ok {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in %s within %v; it ends:\n%s", what, path, waitTimeout, lastLines(b, 20))
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writerClose reads a "stream" writer's close result: its end, or fails.
func writerClose(t *testing.T, w *writer) int64 {
	t.Helper()
	b, err := os.ReadFile(w.path(fileClosed))
	if err != nil {
		t.Fatalf("writer close result: %v; stderr:\n%s", err, w.stderr())
	}
	end, ok := strings.CutPrefix(string(b), "ok ")
	if !ok {
		t.Fatalf("writer could not close its ledger: %s", b)
	}
	n, err := strconv.ParseInt(end, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitMoreAcked waits until each writer acknowledged more appends than
// before[i] + n: they resumed.
func waitMoreAcked(t *testing.T, ws []*writer, before []int, n int) {
	t.Helper()
	for i, w := range ws {
		w.waitAcked(before[i] + n)
	}
}

func ackedCounts(ws []*writer) []int {
	out := make([]int, len(ws))
	for i, w := range ws {
		out[i] = len(w.results().acked)
	}
	return out
}

// checkWriterHistory: the ledger's metadata went through OPEN versions only
// (the create and the writer's ensemble changes, at least minChanges of
// them, none of which changed a segment below the previous last one) to one
// CLOSED version at end, written last; no recovery touched it.
func checkWriterHistory(t *testing.T, cl *testcluster.Cluster, id int64, minChanges int, end int64) {
	t.Helper()
	h, err := cl.LedgerHistory(ctxFor(t), id)
	if err != nil {
		t.Fatal(err)
	}
	desc := testcluster.FormatHistory(h)
	t.Logf("ledger %d metadata history: %s", id, desc)
	last := h[len(h)-1].Metadata
	if last.State != metadata.LedgerClosed || last.LastEntryID != end {
		t.Fatalf("history %s: want CLOSED at %d last", desc, end)
	}
	for _, v := range h[:len(h)-1] {
		if v.Metadata.State != metadata.LedgerOpen {
			t.Fatalf("history %s: a %v version before the close (no recovery should have run)", desc, v.Metadata.State)
		}
	}
	if changes := len(h) - 2; changes < minChanges {
		t.Errorf("history %s: %d ensemble changes, want ≥ %d", desc, changes, minChanges)
	}
	for i := 1; i < len(h); i++ {
		prev, cur := h[i-1].Metadata.Ensembles, h[i].Metadata.Ensembles
		if len(cur) < len(prev) || !slices.EqualFunc(prev[:len(prev)-1], cur[:len(prev)-1], func(a, b metadata.Segment) bool {
			return a.FirstEntryID == b.FirstEntryID && slices.Equal(a.Ensemble, b.Ensemble)
		}) {
			t.Errorf("history %s: version %d rewrote an earlier segment", desc, i)
		}
	}
}

// TestEtcdFailoverWhileWriting: writers append in pipelined mode while (1)
// the etcd leader is SIGKILLed and at once a bookie of every ensemble, so
// that every writer changes its ensemble across the election; then (2) etcd
// loses its quorum and another ensemble bookie is killed, so that every
// ensemble change waits, retrying, until a member comes back. Each time one
// fresh bookie is the only replacement. The writers
// never fail an append, resume after each outage, and close their ledgers
// themselves at their last acknowledged entry.
func TestEtcdFailoverWhileWriting(t *testing.T) {
	cl := startFailoverCluster(t, 3)
	ec := cl.EtcdCluster
	checker := newClient(t, cl, nil)
	// Created while only b0..b2 run: every ensemble is {b0, b1, b2}.
	quorums := []string{"3,3,2", "3,2,2", "3,3,2"}
	var ws []*writer
	for _, q := range quorums {
		ws = append(ws, startWriter(t, cl, q, "stream:1000000", false))
	}
	ids := make([]int64, len(ws))
	for i, w := range ws {
		ids[i] = w.ledgerID()
	}
	waitMoreAcked(t, ws, make([]int, len(ws)), 50)
	spare := cl.NewBookie()
	spare.Start()
	spare.WaitRegistered(false)
	b0, b1 := cl.Bookies[0], cl.Bookies[1]

	// (1) The leader dies, and so does a bookie of every ensemble.
	leader := ec.Leader()
	before := ackedCounts(ws)
	leader.Kill()
	b0.Kill()
	killed := time.Now()
	t.Logf("etcd leader %s and bookie %s killed with %v acknowledged", leader.Name, b0.ID, before)
	waitMoreAcked(t, ws, before, 100)
	t.Logf("writers resumed %v after the kill; %s leads", time.Since(killed).Round(time.Millisecond), ec.Leader().Name)
	restoreQuorum(t, ec, leader)
	// The replacement for (2) is a bookie the writers never failed to
	// reach. (A restarted b0 would do as well once registered, but a
	// writer's transport may still hold it in reconnect backoff from its
	// death, up to 5 s, and fail sends to it at once.)
	b0.WaitUnregistered()
	spare2 := cl.NewBookie()
	spare2.Start()
	spare2.WaitRegistered(false)

	// (2) No quorum; another bookie of every ensemble dies. Each writer's
	// ensemble change (metadata write) fails and is retried...
	logged := make([]int, len(ws))
	for i, w := range ws {
		logged[i] = logSize(w.path("stderr"))
	}
	down, other := loseQuorum(t, ec)
	before = ackedCounts(ws)
	b1.Kill()
	lost := time.Now()
	for i, w := range ws {
		waitLogLine(t, "retried ledger write", w.path("stderr"), logged[i], retryMark, fmt.Sprintf("write ledger %d ", ids[i]))
	}
	t.Logf("every writer's ensemble change retried against a store without quorum (%v after the bookie kill)", time.Since(lost).Round(time.Millisecond))
	// ...and goes through once a quorum is back.
	restoreQuorum(t, ec, other)
	waitMoreAcked(t, ws, before, 100)
	t.Logf("writers resumed %v after the quorum was lost", time.Since(lost).Round(time.Millisecond))
	restoreQuorum(t, ec, down)
	b0.Start()
	b1.Start()
	waitAllRegistered(t, cl)

	for _, w := range ws {
		if err := os.WriteFile(w.path(fileStop), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range ws {
		w.waitExit()
		res := w.results()
		if errs := res.errors(); len(errs) > 0 {
			t.Errorf("writer %d: %d appends failed (%v); log ends %v", i, len(errs), errs, res.lines[max(0, len(res.lines)-5):])
		}
		end := writerClose(t, w)
		if want := res.acked[len(res.acked)-1]; end != want {
			t.Errorf("writer %d closed at %d, its last acknowledged entry is %d", i, end, want)
		}
		md := checkU(t, cl, checker, ids[i], w, end)
		checkWriterHistory(t, cl, ids[i], 2, end)
		for _, seg := range md.Ensembles[len(md.Ensembles)-1:] {
			if slices.Contains(seg.Ensemble, b1.ID) {
				t.Errorf("ledger %d: last ensemble %v still has %s, killed before the close", ids[i], seg.Ensemble, b1.ID)
			}
		}
		t.Logf("writer %d (%s): %d entries acknowledged, closed at %d, %d segments", i, quorums[i], len(res.acked), end, len(md.Ensembles))
	}
}

// retrySignal is a slog handler for the recoverer's client: it logs through
// t and reports the requests the metadata driver retries.
type retrySignal struct {
	t       *testing.T
	mu      sync.Mutex
	retried []string
	changed chan struct{}
}

func newRetrySignal(t *testing.T) *retrySignal {
	return &retrySignal{t: t, changed: make(chan struct{}, 1)}
}

func (h *retrySignal) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *retrySignal) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *retrySignal) WithGroup(string) slog.Handler                { return h }
func (h *retrySignal) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	var req string
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		if a.Key == "request" {
			req = a.Value.String()
		}
		return true
	})
	h.t.Logf("recoverer: %s", b.String())
	if strings.Contains(r.Message, retryMark) {
		h.mu.Lock()
		h.retried = append(h.retried, req)
		h.mu.Unlock()
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// wait waits until a retried request contains sub.
func (h *retrySignal) wait(sub string) {
	h.t.Helper()
	timeout := time.After(waitTimeout)
	for {
		h.mu.Lock()
		found := slices.ContainsFunc(h.retried, func(r string) bool { return strings.Contains(r, sub) })
		h.mu.Unlock()
		if found {
			return
		}
		select {
		case <-h.changed:
		case <-timeout:
			h.t.Fatalf("no retried request %q within %v", sub, waitTimeout)
		}
	}
}

// TestEtcdFailoverDuringRecovery: a writer is SIGKILLed with appends in
// flight; its ledger's recovery marks it IN_RECOVERY, and then, while the
// recovery fences and reads (the bookies are held with SIGSTOP until the
// outage is in place, so that nothing of it is done before), etcd loses its
// leader and its quorum. The recovery's close is retried until a quorum is
// back and then succeeds: the ledger is closed once, at an end that keeps
// every acknowledged entry, and reads back byte-exact.
func TestEtcdFailoverDuringRecovery(t *testing.T) {
	cl := startFailoverCluster(t, 3)
	ec := cl.EtcdCluster
	checker := newClient(t, cl, nil)
	w := startWriter(t, cl, "3,3,2", "stream:1000000", false)
	id := w.ledgerID()
	w.waitAcked(200)
	w.kill()
	acked := w.results().acked
	t.Logf("writer killed after %d acknowledged appends", len(acked))

	for _, b := range cl.Bookies {
		b.Pause()
	}
	logs := newRetrySignal(t)
	recoverer := newClient(t, cl, func(c *client.Config) {
		// The bookies are paused for a moment: no read may time out.
		c.ReadEntryTimeout, c.AddEntryTimeout, c.MetadataTimeout = waitTimeout, waitTimeout, waitTimeout
		c.Logger = slog.New(logs)
	})
	type result struct {
		end int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := recoverLedger(ctxFor(t), recoverer, id)
		done <- result{end, err}
	}()
	ctx := ctxFor(t)
	deadline := time.Now().Add(waitTimeout)
	for {
		md, _, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if md.State == metadata.LedgerInRecovery {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger %d not IN_RECOVERY within %v: %v", id, waitTimeout, md.State)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	down, other := loseQuorum(t, ec)
	for _, b := range cl.Bookies {
		b.Resume()
	}
	logs.wait(fmt.Sprintf("write ledger %d ", id))
	t.Log("the recovery's close was retried against a store without quorum")
	restoreQuorum(t, ec, other)
	r := <-done
	if r.err != nil {
		t.Fatalf("recovery: %v", r.err)
	}
	restoreQuorum(t, ec, down)
	waitAllRegistered(t, cl)

	checkU(t, cl, checker, id, w, r.end)
	checkRecoveryHistory(t, cl, id, true, r.end)
	if r.end < acked[len(acked)-1] {
		t.Fatalf("recovered end %d is below the last acknowledged entry %d", r.end, acked[len(acked)-1])
	}
	t.Logf("recovered end %d; last acknowledged %d", r.end, acked[len(acked)-1])
}

// TestEtcdFailoverDuringReReplication: closed ledgers lose a bookie, and
// AutoRecovery (a separate process, its copying throttled so that it takes
// seconds) re-replicates them. While a replication worker holds a ledger's
// lock and ledgers remain under-replicated, etcd loses its leader and its
// quorum; AutoRecovery's requests are retried until a quorum is back. In
// the end no ledger is under-replicated, none references the lost bookie,
// every entry is stored byte-exact on every bookie of its write set, and
// every ledger is closed where it was.
func TestEtcdFailoverDuringReReplication(t *testing.T) {
	cl := startFailoverCluster(t, 3)
	ec := cl.EtcdCluster
	ctx := ctxFor(t)
	c := newClient(t, cl, nil)
	// Written while only b0..b2 run: b3 is every ledger's only replacement.
	const ledgers, entries = 8, 20
	payload := func(id, e int64) []byte { return payloadOf(id, e*7) }
	ends := map[int64]int64{}
	for i := range ledgers {
		qw := 2 + i%2
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: qw, AckQuorumSize: 2, Password: writerPassword})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(entries) {
			if _, err := w.Append(ctx, payload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ends[w.ID()] = entries - 1
	}
	target := cl.NewBookie()
	target.Start()
	target.WaitRegistered(false)
	victim := cl.Bookies[0]
	victim.Kill()
	victim.WaitUnregistered()

	// About 0.2 s of copying per ledger.
	ar := cl.StartAutoRecovery("127.0.0.1:1", "--workers", "1", "--rate-limit", "20000")
	raw := cl.MD.(*etcd.Driver).Client()
	locks := cl.MD.(*etcd.Driver).Scope() + "/underreplication/locks/"
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := raw.Get(ctx, locks, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replication lock within %v; AutoRecovery log %s:\n%s", waitTimeout, ar.LogPath(), tailFile(ar.LogPath()))
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	pending := underReplicated(t, cl)
	if len(pending) == 0 {
		t.Fatal("re-replication finished before the outage could start: slow it down")
	}
	logged := logSize(ar.LogPath())
	down, other := loseQuorum(t, ec)
	lost := time.Now()
	t.Logf("etcd lost its quorum with %d ledgers under-replicated and a lock held", len(pending))
	waitLogLine(t, "retried request", ar.LogPath(), logged, retryMark)
	restoreQuorum(t, ec, other)
	restoreQuorum(t, ec, down)

	deadline = time.Now().Add(2 * waitTimeout)
	for {
		if len(underReplicated(t, cl)) == 0 && refsTo(t, cl, ends, victim.ID) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-replication not done within %v; AutoRecovery log %s:\n%s", 2*waitTimeout, ar.LogPath(), tailFile(ar.LogPath()))
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	t.Logf("re-replication done %v after the quorum was lost", time.Since(lost).Round(time.Millisecond))
	if exited, err := ar.Exited(); exited {
		t.Fatalf("AutoRecovery exited (%v); log %s:\n%s", err, ar.LogPath(), tailFile(ar.LogPath()))
	}
	b, _ := os.ReadFile(ar.LogPath())
	var warns []string
	for _, l := range strings.Split(string(b[logged:]), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			warns = append(warns, l)
		}
	}
	t.Logf("AutoRecovery's warnings from the outage on (%d):\n%s", len(warns), strings.Join(warns[:min(len(warns), 20)], "\n"))
	victim.Start()
	waitAllRegistered(t, cl)
	for id, end := range ends {
		md, _, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if md.State != metadata.LedgerClosed || md.LastEntryID != end {
			t.Errorf("ledger %d is %v at %d, was closed at %d", id, md.State, md.LastEntryID, end)
		}
		testcluster.CheckStored(ctx, t, cl.MD, id, writerPassword, func(e int64) []byte { return payload(id, e) })
	}
}

// underReplicated lists the ledgers marked under-replicated.
func underReplicated(t *testing.T, cl *testcluster.Cluster) []int64 {
	t.Helper()
	ar, ok := cl.MD.(metadata.AutoRecoveryDriver)
	if !ok {
		t.Fatalf("%T has no AutoRecovery support", cl.MD)
	}
	recs, err := ar.ListUnderReplicatedLedgers(ctxFor(t), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range recs {
		ids = append(ids, r.LedgerID)
	}
	return ids
}

// refsTo counts the segments of the given ledgers whose ensemble holds b.
func refsTo(t *testing.T, cl *testcluster.Cluster, ends map[int64]int64, b metadata.BookieID) int {
	t.Helper()
	n := 0
	for id := range ends {
		md, _, err := cl.MD.ReadLedger(ctxFor(t), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range md.Ensembles {
			if slices.Contains(seg.Ensemble, b) {
				n++
			}
		}
	}
	return n
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(b, 30)
}
