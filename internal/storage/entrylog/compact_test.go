package entrylog

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
)

// TestCompaction: GC keeps every live entry readable through the
// relocations, drops dead ledgers, and removes the old logs; it also
// survives a crash right after it finished.
func TestCompaction(t *testing.T) {
	mem := vfs.NewCrashableMem()
	clock := autoClock{clock.NewManual(time.Unix(0, 0))}
	const rate = 1 << 20 // bytes per simulated second
	opts := Options{MaxLogBytes: 16 << 10, CompactionLimiter: NewRateLimiter(clock, rate, 4<<10)}
	s := openStore(t, mem, opts)
	x := newFakeIndex()
	ledgers := []int64{1, 2, 3, 4, 5, 6}
	for round := int64(0); round < 6; round++ {
		addAll(t, s, ledgers, round*5, round*5+5)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	// Ledger 1's entry 0 is written twice: the index points at the newer copy.
	if err := s.Add(1, 0, body(1, 0, size(1, 0))); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	dead := map[int64]bool{2: true, 4: true, 5: true}
	for l := range dead {
		s.DropLedger(l)
		x.deleteLedger(l)
	}
	live := func(l int64) bool { return !dead[l] }
	stale, _ := x.get(3, 0)
	before := s.Usage(live)
	var oldLogs []uint64
	for _, u := range before {
		if u.Sealed && u.LiveFraction() < 0.9 {
			oldLogs = append(oldLogs, u.LogID)
		}
	}
	if len(oldLogs) < 3 {
		t.Fatalf("only %d logs to compact: %+v", len(oldLogs), before)
	}
	t0 := clock.Now()
	st, err := s.GC(0.9, live, x.relocate)
	if err != nil {
		t.Fatal(err)
	}
	if st.LogsRemoved != len(oldLogs) || st.EntriesDropped == 0 || st.EntriesMoved == 0 {
		t.Fatalf("stats %+v for %d logs", st, len(oldLogs))
	}
	// The limiter paced reads and writes on the injected clock.
	minTime := time.Duration(float64(st.BytesRead+st.BytesWritten-8<<10) / rate * float64(time.Second))
	if el := clock.Now().Sub(t0); el < minTime {
		t.Fatalf("compaction of %d bytes took %v of clock time, want ≥ %v", st.BytesRead+st.BytesWritten, el, minTime)
	}
	for _, id := range oldLogs {
		if _, err := mem.Stat(mem.PathJoin("ledgers", LogFileName(id))); err == nil {
			t.Fatalf("compacted log %d still exists", id)
		}
	}
	check := func(s *Store) {
		for _, l := range ledgers {
			for e := int64(0); e < 30; e++ {
				if dead[l] {
					if _, ok := x.get(l, e); ok {
						t.Fatalf("dead entry %d/%d came back", l, e)
					}
					continue
				}
				mustReadBack(t, s, x, l, e, size(l, e))
			}
		}
	}
	check(s)
	// A reader holding a location from before the compaction is told to
	// look it up again.
	if _, err := s.Read(3, 0, stale); !errors.Is(err, ErrLogRemoved) {
		if loc, _ := x.get(3, 0); loc != stale {
			t.Fatalf("stale location: got %v, want ErrLogRemoved", err)
		}
	}
	for _, u := range s.Usage(live) {
		if u.LiveBytes != u.TotalBytes && u.Sealed {
			// Only the duplicate of ledger 1 entry 0 may remain dead-but-live.
			if u.TotalBytes-u.LiveBytes > int64(3*30*(RecordHeaderSize+1000)) {
				t.Fatalf("dead bytes remain after GC: %+v", u)
			}
		}
	}

	// Crash after GC returned: everything live still reads back.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	s2 := openStore(t, crashed, Options{})
	defer s2.Close()
	check(s2)
}

// TestCompactionApplyFails: when the index cannot take the relocations,
// the old log stays and every entry stays readable at its old location.
func TestCompactionApplyFails(t *testing.T) {
	s := openStore(t, vfs.NewMem(), Options{MaxLogBytes: 8 << 10})
	defer s.Close()
	x := newFakeIndex()
	for round := int64(0); round < 6; round++ {
		addAll(t, s, []int64{1, 2}, round*5, round*5+5)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	s.DropLedger(2)
	x.deleteLedger(2)
	live := func(l int64) bool { return l == 1 }
	if _, err := s.GC(0.99, live, func([]Relocation) error { return errors.New("index down") }); err == nil {
		t.Fatal("GC hid the apply error")
	}
	for e := int64(0); e < 30; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
	// The current log is never compacted.
	for _, u := range s.Usage(live) {
		if !u.Sealed {
			if _, err := s.CompactLog(u.LogID, live, x.relocate); !errors.Is(err, ErrNotSealed) {
				t.Fatalf("compacting the current log: %v", err)
			}
		}
	}
	// And a retry with a working index succeeds.
	if _, err := s.GC(0.99, live, x.relocate); err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 30; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
}

// TestCompactionConcurrent runs adds, flushes, reads and GC at once (for
// the race detector) and checks every live entry at the end.
func TestCompactionConcurrent(t *testing.T) {
	s := openStore(t, vfs.NewMem(), Options{MaxLogBytes: 32 << 10, ReadCacheBytes: 8 << 10})
	defer s.Close()
	x := newFakeIndex()
	live := func(l int64) bool { return l%3 != 0 }
	done := make(chan struct{})
	errc := make(chan error, 3)
	go func() {
		for {
			select {
			case <-done:
				errc <- nil
				return
			default:
			}
			if _, err := s.GC(0.7, live, x.relocate); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-done:
				errc <- nil
				return
			default:
			}
			l := int64(1 + rng.IntN(8))
			if !live(l) {
				continue
			}
			e := int64(rng.IntN(40))
			// Whether the index has the entry is looked at before the
			// read: the writer may add and flush it while the read runs,
			// and an entry absent when the read began may rightly be
			// reported absent. An entry the index had must read back.
			had := x.has(l, e)
			b, err := readVia(s, x, l, e)
			if errors.Is(err, ErrLogRemoved) {
				b, err = readVia(s, x, l, e)
			}
			if err != nil && had {
				errc <- err
				return
			}
			_ = b
		}
	}()
	for round := int64(0); round < 8; round++ {
		addAll(t, s, []int64{1, 2, 3, 4, 5, 6, 7, 8}, round*5, round*5+5)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
		for l := int64(3); l <= 8; l += 3 {
			s.DropLedger(l)
			x.deleteLedger(l)
		}
	}
	close(done)
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for l := int64(1); l <= 8; l++ {
		if !live(l) {
			continue
		}
		for e := int64(0); e < 40; e++ {
			mustReadBack(t, s, x, l, e, size(l, e))
		}
	}
}

func (x *fakeIndex) has(l, e int64) bool {
	_, ok := x.get(l, e)
	return ok
}
