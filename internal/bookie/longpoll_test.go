package bookie

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/wire"
)

// stepGo is a Config.Go that queues the bookie's spawned work for the test
// to run on its own goroutine, one function at a time, as the simulator
// does: with it and a manual clock, a long poll runs with no goroutine of
// its own and every interleaving is the test's choice.
type stepGo struct{ queue []func() }

func (g *stepGo) spawn(fn func()) { g.queue = append(g.queue, fn) }

// runOne runs the oldest queued function; false if none is queued.
func (g *stepGo) runOne() bool {
	if len(g.queue) == 0 {
		return false
	}
	fn := g.queue[0]
	g.queue = g.queue[1:]
	fn()
	return true
}

func (g *stepGo) runAll() {
	for g.runOne() {
	}
}

// liveWatches counts the memStore's uncancelled, unwoken LAC watches.
func liveWatches(s *memStore, ledgerID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if l := s.ledgers[ledgerID]; l != nil {
		for _, w := range l.watches {
			if w.wake != nil {
				n++
			}
		}
	}
	return n
}

func newSteppedHarness(t *testing.T) (*harness, *stepGo, *memStore) {
	g := &stepGo{}
	st := newMemStore()
	return newHarness(t, st, Config{Go: g.spawn}), g, st
}

// TestLongPollStepped drives the long-poll code without goroutines: the LAC
// watch wakes it, the timer expires it, Close ends it, each only through
// work handed to Config.Go; one answer per poll, timers and watches
// released.
func TestLongPollStepped(t *testing.T) {
	const ledger = 7
	t.Run("woken", func(t *testing.T) {
		h, g, st := newSteppedHarness(t)
		h.mustAdd(wire.ProtocolV3, ledger, 0, 1) // known LAC 0
		p1 := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 5000, true))
		p2 := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 5000, true))
		if h.clock.Waiters() != 0 || len(g.queue) != 2 {
			t.Fatalf("before arming: %d timers, %d queued", h.clock.Waiters(), len(g.queue))
		}
		g.runAll() // arm both
		if h.clock.Waiters() != 2 || liveWatches(st, ledger) != 2 || p1.answered() || p2.answered() {
			t.Fatalf("armed: %d timers, %d watches", h.clock.Waiters(), liveWatches(st, ledger))
		}
		h.mustAdd(wire.ProtocolV3, ledger, 2, 2) // carries LAC 1: wakes both
		if h.clock.Waiters() != 0 || len(g.queue) != 2 || p1.answered() {
			t.Fatalf("woken: %d timers, %d queued", h.clock.Waiters(), len(g.queue))
		}
		g.runOne() // answers in arrival order
		if !p1.answered() || p2.answered() {
			t.Fatal("the first woken poll is not answered first")
		}
		g.runAll()
		for _, p := range []*pending{p1, p2} {
			resp := p.wait()
			if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != 1 || resp.Read.MaxLAC != 1 {
				t.Fatalf("woken long poll: %v entry %d maxLAC %d", st, resp.Read.EntryID, resp.Read.MaxLAC)
			}
		}
		if liveWatches(st, ledger) != 0 {
			t.Fatal("a watch outlives its poll")
		}
	})
	t.Run("expired", func(t *testing.T) {
		h, g, st := newSteppedHarness(t)
		h.mustAdd(wire.ProtocolV3, ledger, 0, 1)
		p := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 1000, true))
		g.runAll()
		h.clock.Advance(999 * time.Millisecond)
		if len(g.queue) != 0 || p.answered() {
			t.Fatal("expired before its timeOut")
		}
		h.clock.Advance(time.Millisecond)
		if len(g.queue) != 1 || liveWatches(st, ledger) != 1 {
			t.Fatalf("at its timeOut: %d queued, %d watches", len(g.queue), liveWatches(st, ledger))
		}
		g.runAll()
		resp := p.wait()
		if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != -1 || resp.Read.MaxLAC != 0 {
			t.Fatalf("expired long poll: %v entry %d maxLAC %d", st, resp.Read.EntryID, resp.Read.MaxLAC)
		}
		if liveWatches(st, ledger) != 0 || h.clock.Waiters() != 0 {
			t.Fatal("the expired poll kept its watch or timer")
		}
	})
	t.Run("closed while waiting", func(t *testing.T) {
		h, g, st := newSteppedHarness(t)
		h.mustAdd(wire.ProtocolV3, ledger, 0, 1)
		p := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 5000, true))
		g.runAll()
		h.b.Close()
		if h.clock.Waiters() != 0 || len(g.queue) != 1 {
			t.Fatalf("after Close: %d timers, %d queued", h.clock.Waiters(), len(g.queue))
		}
		g.runAll()
		if resp := p.wait(); resp.Read.EntryID != -1 {
			t.Fatalf("answered on close with entry %d", resp.Read.EntryID)
		}
		if liveWatches(st, ledger) != 0 || p.answered() {
			t.Fatal("a watch outlives Close, or a second answer")
		}
	})
	t.Run("closed before arming", func(t *testing.T) {
		// Close comes between Handle and the spawned arm: the arm finds
		// the bookie closed, answers once, and leaves no watch behind.
		h, g, st := newSteppedHarness(t)
		h.mustAdd(wire.ProtocolV3, ledger, 0, 1)
		p := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 5000, true))
		h.b.Close()
		g.runAll()
		if resp := p.wait(); resp.Read.EntryID != -1 {
			t.Fatalf("answered on close with entry %d", resp.Read.EntryID)
		}
		if p.answered() || liveWatches(st, ledger) != 0 || h.clock.Waiters() != 0 {
			t.Fatal("a second answer, or a watch or timer left behind")
		}
		if reqs, polls := h.b.InFlight(); reqs != 0 || polls != 0 {
			t.Fatalf("in flight after the answer: %d requests, %d long polls", reqs, polls)
		}
	})
}

// TestLongPollPinsEvictedLedger: a long poll waiting on a ledger of the
// real store (files on disk) keeps the ledger's state in memory through
// any number of eviction sweeps, is answered when the LAC passes, and the
// ledger is evicted once nobody waits; a poll armed after the eviction
// reloads it and sees the same LAC.
func TestLongPollPinsEvictedLedger(t *testing.T) {
	const ledger = 11
	dir := t.TempDir()
	st, err := ledgerstore.Open(vfs.Default, ledgerstore.Config{
		JournalDirs:    []string{filepath.Join(dir, "journal")},
		LedgerDirs:     []string{filepath.Join(dir, "ledgers")},
		Clock:          clock.Real{},
		Manual:         true,
		LedgerIdleTime: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	sweep := func(n int) {
		t.Helper()
		if err := st.FlushWriteCache(); err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := st.EvictIdleLedgers(); err != nil {
				t.Fatal(err)
			}
		}
	}
	g := &stepGo{}
	h := newHarness(t, st, Config{Go: g.spawn})
	h.mustAdd(wire.ProtocolV3, ledger, 0, 1) // known LAC 0
	p := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 60000, true))
	g.runAll() // arm
	sweep(5)
	if st.CachedLedgers() != 1 || p.answered() {
		t.Fatalf("waiting poll: %d ledgers cached, answered %v", st.CachedLedgers(), p.answered())
	}
	h.mustAdd(wire.ProtocolV3, ledger, 2, 2) // carries LAC 1: wakes the poll
	g.runAll()
	if r := p.wait(); responseStatus(r) != wire.StatusOK || r.Read.MaxLAC != 1 {
		t.Fatalf("woken poll: %v, maxLAC %d", responseStatus(r), r.Read.MaxLAC)
	}
	sweep(2)
	if st.CachedLedgers() != 0 {
		t.Fatalf("no poll waiting: %d ledgers cached, want 0", st.CachedLedgers())
	}
	p = h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 60000, true))
	g.runAll()
	if r := p.wait(); responseStatus(r) != wire.StatusOK || r.Read.MaxLAC != 1 || r.Read.EntryID != 1 {
		t.Fatalf("poll after eviction: %v, entry %d, maxLAC %d; want OK, entry 1, maxLAC 1", responseStatus(r), r.Read.EntryID, r.Read.MaxLAC)
	}
}
