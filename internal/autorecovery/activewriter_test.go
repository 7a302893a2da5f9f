package autorecovery_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// activeWriter appends size-byte entries to one ledger, one at a time with
// a pause between them, until stopped or an append fails.
type activeWriter struct {
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		acked int64 // the last acknowledged entry id (-1: none)
		err   error // the first append error
	}
}

func startActiveWriter(ctx context.Context, w *client.WriteHandle, size int, pause time.Duration) *activeWriter {
	a := &activeWriter{stop: make(chan struct{}), done: make(chan struct{})}
	a.mu.acked = -1
	go func() {
		defer close(a.done)
		for e := int64(0); ; e++ {
			select {
			case <-a.stop:
				return
			case <-time.After(pause):
			}
			id, err := w.Append(ctx, bigPayload(w.ID(), e, size))
			if err == nil && id != e {
				err = fmt.Errorf("append acknowledged as entry %d, want %d", id, e)
			}
			a.mu.Lock()
			if err != nil {
				a.mu.err = err
			} else {
				a.mu.acked = id
			}
			a.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return a
}

// state returns the last acknowledged entry and the first error.
func (a *activeWriter) state() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.acked, a.mu.err
}

// halt stops the appends and waits for the one in flight.
func (a *activeWriter) halt() (int64, error) {
	close(a.stop)
	<-a.done
	return a.state()
}

// #20, active-writer variant: a bookie of an OPEN ledger's ensemble dies
// while its writer appends. The writer replaces the bookie itself (a new
// segment), so AutoRecovery must neither fence it (the grace period is
// for writers that do not) nor wait for the close: the earlier segment is
// a closed fragment (spec §6.4, §6.6) and is re-replicated while the
// ledger is OPEN. The writer keeps appending after the repair without an
// error, then closes; everything acknowledged is readable and stored on
// each bookie of its write set.
//
// Nothing here is timed. The grace period is longer than the test, so a
// repair while the ledger is OPEN cannot have waited for it. AutoRecovery
// starts once the writer's new segment is stored: then the dead bookie is
// only in a closed fragment when the auditor first looks. (Were it still in
// the open last segment, leaving the ledger to its writer for the grace
// period would be right, and this test would wait for nothing.)
func TestActiveWriterReplacesLostBookie(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	const (
		grace = time.Hour
		size  = 100
		pause = 5 * time.Millisecond
	)
	cl := testcluster.Start(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, AddEntryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pw := []byte("pw")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	id := w.ID()
	ledger := func() *metadata.LedgerMetadata {
		t.Helper()
		m, _, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	names := func(m *metadata.LedgerMetadata, b metadata.BookieID) bool {
		return slices.ContainsFunc(m.Ensembles, func(s metadata.Segment) bool { return slices.Contains(s.Ensemble, b) })
	}
	aw := startActiveWriter(ctx, w, size, pause)
	defer func() {
		select {
		case <-aw.stop:
		default:
			aw.halt()
		}
	}()
	// healthy fails the test as soon as the writer has had an error.
	healthy := func() bool {
		if _, err := aw.state(); err != nil {
			t.Fatalf("the writer's append failed: %v", err)
		}
		return true
	}
	waitFor(ctx, t, "50 entries acknowledged", func() bool { acked, _ := aw.state(); return healthy() && acked >= 50 })

	m := ledger()
	var dead *testcluster.Bookie
	for _, b := range cl.Bookies {
		if b.ID == m.LastEnsemble().Ensemble[1] {
			dead = b
		}
	}
	ackedBeforeKill, _ := aw.state()
	dead.Kill()
	killed := time.Now()

	// The writer's ensemble change: a new segment without the dead bookie.
	var key int64
	waitFor(ctx, t, "the writer's ensemble change", func() bool {
		m := ledger()
		if !healthy() || len(m.Ensembles) < 2 || slices.Contains(m.LastEnsemble().Ensemble, dead.ID) {
			return false
		}
		key = m.LastEnsemble().FirstEntryID
		return true
	})
	changed := time.Since(killed)
	if key-1 < ackedBeforeKill {
		t.Fatalf("new segment at entry %d, but entry %d was acknowledged before the kill", key, ackedBeforeKill)
	}
	dead.WaitUnregistered()
	unregistered := time.Since(killed)

	d := cl.StartAutoRecovery("127.0.0.1:1", "--workers", "1",
		"--lost-bookie-recovery-delay", "0s", "--open-ledger-rereplication-grace-period", grace.String())
	waitFor(ctx, t, "segment 0 re-replicated off the dead bookie while the writer keeps the ledger OPEN (spec §6.6 step 3)", func() bool {
		m := ledger()
		if m.State != metadata.LedgerOpen {
			t.Fatalf("ledger %d is %v (end %d, segments %v) while its writer appends", id, m.State, m.LastEntryID, m.Ensembles)
		}
		return healthy() && !names(m, dead.ID) && len(underReplicated(ctx, t, cl.MD)) == 0
	})
	repaired := time.Since(killed)
	ackedAtRepair, _ := aw.state()

	waitFor(ctx, t, "the writer to go on after the repair", func() bool {
		acked, _ := aw.state()
		return healthy() && acked >= ackedAtRepair+100
	})
	if m := ledger(); m.State != metadata.LedgerOpen {
		t.Fatalf("ledger %d is %v before its writer closed it", id, m.State)
	}
	last, err := aw.halt()
	if err != nil {
		t.Fatalf("the writer's append failed: %v", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("closing the ledger after AutoRecovery repaired a segment: %v", err)
	}
	t.Logf("ensemble change at entry %d after %v; %s unregistered after %v; segment re-replicated (ledger OPEN, entry %d acknowledged) after %v; closed at %d after %v",
		key, changed, dead.ID, unregistered, ackedAtRepair, repaired, last, time.Since(killed))
	if ackedAtRepair >= last {
		t.Fatalf("no append after the re-replication (last %d)", last)
	}

	m = ledger()
	if !m.IsClosed() || m.LastEntryID != last {
		t.Fatalf("ledger %d: state %v end %d, want closed at %d", id, m.State, m.LastEntryID, last)
	}
	var firsts []int64
	for _, s := range m.Ensembles {
		firsts = append(firsts, s.FirstEntryID)
	}
	if !slices.Equal(firsts, []int64{0, key}) {
		t.Fatalf("segments start at %v, want [0 %d] (the writer's one change, AutoRecovery adds none)", firsts, key)
	}
	if ur := underReplicated(ctx, t, cl.MD); len(ur) != 0 {
		t.Fatalf("under-replicated after the close: %+v", ur)
	}
	// Each entry stored, verified, on each bookie of its write set; no
	// segment names the dead bookie.
	checkIntact(ctx, t, cl.MD, map[int64]int64{id: last}, nil, size, dead.ID)

	// A fresh client reads everything back without recovery.
	rc, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := rc.OpenLedger(ctx, id, client.OpenOptions{Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, 0, last)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != last+1 {
		t.Fatalf("read %d entries, want %d", len(got), last+1)
	}
	for e, g := range got {
		if !bytes.Equal(g.Payload, bigPayload(id, int64(e), size)) {
			t.Fatalf("entry %d differs", e)
		}
	}

	// The daemon's log: the auditor marked the ledger, the worker copied
	// segment 0 off the dead bookie, and never fenced the ledger.
	d.Kill()
	logText, err := os.ReadFile(d.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(logText), "\n")
	has := func(parts ...string) bool {
		return slices.ContainsFunc(lines, func(l string) bool {
			return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l+" ", p) })
		})
	}
	ledgerKV := fmt.Sprintf(" ledger=%d ", id) // a whole field
	if !has(`msg="audit marked ledgers under-replicated"`, "lost=["+string(dead.ID)+"]") {
		t.Errorf("no audit marked %s's ledgers; daemon log:\n%s", dead.ID, logText)
	}
	if !has(`msg="re-replicated fragment"`, ledgerKV, "segment=0", "from="+string(dead.ID)) {
		t.Errorf("no re-replication of ledger %d segment 0 from %s; daemon log:\n%s", id, dead.ID, logText)
	}
	if has("fenced", ledgerKV) {
		t.Errorf("the worker fenced ledger %d; daemon log:\n%s", id, logText)
	}
}
