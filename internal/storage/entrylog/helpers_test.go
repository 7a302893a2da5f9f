package entrylog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
)

func newManualClock() *clock.Manual { return clock.NewManual(time.Unix(1_000_000, 0)) }

// waitTimers blocks until n timers are pending on c (so an Advance cannot
// race ahead of the goroutine that is about to wait). It fails the test
// after a generous real-time bound instead of hanging.
func waitTimers(t *testing.T, c *clock.Manual, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d timers (have %d)", n, c.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
}

// autoClock is a manual clock that advances itself by whatever a timer is
// armed for: a wait never blocks, and the clock records the simulated time
// spent waiting.
type autoClock struct{ *clock.Manual }

func (c autoClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Manual.NewTimer(d)
	c.Advance(max(d, 0))
	return t
}

// fakeIndex is the caller's side in tests: a map with the compare-and-set
// relocation the package comment requires.
type fakeIndex struct {
	mu   sync.Mutex
	locs map[entryKey]Location
}

func newFakeIndex() *fakeIndex { return &fakeIndex{locs: make(map[entryKey]Location)} }

func (x *fakeIndex) put(ps []Placement) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range ps {
		x.locs[entryKey{p.LedgerID, p.EntryID}] = p.Loc
	}
	return nil
}

func (x *fakeIndex) relocate(rs []Relocation) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range rs {
		k := entryKey{r.LedgerID, r.EntryID}
		if cur, ok := x.locs[k]; ok && cur == r.Old {
			x.locs[k] = r.New
		}
	}
	return nil
}

func (x *fakeIndex) get(l, e int64) (Location, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	loc, ok := x.locs[entryKey{l, e}]
	return loc, ok
}

func (x *fakeIndex) deleteLedger(l int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.locs {
		if k.ledgerID == l {
			delete(x.locs, k)
		}
	}
}

// body is the deterministic content of an entry.
func body(l, e int64, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(l), uint64(e)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func openStore(t testing.TB, fs vfs.FS, opts Options) *Store {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = newManualClock()
	}
	s, err := Open(fs, "ledgers", opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readVia reads an entry the way the integrator (ledgerstore) does: the
// caches, then the index (the entry and up to 100 following ones, without a
// gap), then the log with read-ahead, the fill token taken before the
// index lookup.
func readVia(s *Store, x *fakeIndex, l, e int64) ([]byte, error) {
	if b, ok := s.ReadCachedEntry(l, e); ok {
		return b, nil
	}
	epoch := s.FillEpoch()
	loc, ok := x.get(l, e)
	if !ok {
		return nil, fmt.Errorf("no such entry %d/%d", l, e)
	}
	var next []Want
	for id := e + 1; id <= e+100; id++ {
		nl, ok := x.get(l, id)
		if !ok {
			break
		}
		next = append(next, Want{EntryID: id, Loc: nl})
	}
	return s.ReadAhead(l, Want{EntryID: e, Loc: loc}, next, epoch)
}

func mustReadBack(t *testing.T, s *Store, x *fakeIndex, l, e int64, size int) {
	t.Helper()
	got, err := readVia(s, x, l, e)
	if err != nil {
		t.Fatalf("ledger %d entry %d: %v", l, e, err)
	}
	if !bytes.Equal(got, body(l, e, size)) {
		t.Fatalf("ledger %d entry %d: bytes differ", l, e)
	}
}
