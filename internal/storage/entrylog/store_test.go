package entrylog

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func size(l, e int64) int { return 100 + int((l*7+e*13)%900) }

func addAll(t *testing.T, s *Store, ledgers []int64, from, to int64) {
	t.Helper()
	for e := from; e < to; e++ {
		for _, l := range ledgers {
			if err := s.Add(l, e, body(l, e, size(l, e))); err != nil {
				t.Fatalf("add %d/%d: %v", l, e, err)
			}
		}
	}
}

func TestAddFlushReadBack(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs, Options{ReadAheadBytes: -1})
	defer s.Close()
	x := newFakeIndex()
	ledgers := []int64{7, 3, 1 << 40, 0}
	addAll(t, s, ledgers, 0, 50)

	// Before the flush every entry is served by the write cache.
	for _, l := range ledgers {
		for e := int64(0); e < 50; e++ {
			mustReadBack(t, s, x, l, e, size(l, e))
		}
	}
	var got []Placement
	if err := s.Flush(func(ps []Placement) error { got = ps; return x.put(ps) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 200 {
		t.Fatalf("%d placements, want 200", len(got))
	}
	// Sorted by (ledger, entry), at ascending offsets of one log.
	if !slices.IsSortedFunc(got, func(a, b Placement) int {
		return cmp.Or(cmp.Compare(a.LedgerID, b.LedgerID), cmp.Compare(a.EntryID, b.EntryID))
	}) {
		t.Fatal("placements not sorted by (ledger, entry)")
	}
	for i := 1; i < len(got); i++ {
		if got[i].Loc.Offset <= got[i-1].Loc.Offset {
			t.Fatal("offsets not ascending")
		}
	}
	if s.CachedBytes() != 0 {
		t.Fatalf("cache holds %d bytes after flush", s.CachedBytes())
	}
	for _, l := range ledgers {
		for e := int64(0); e < 50; e++ {
			if _, ok := s.ReadCached(l, e); ok {
				t.Fatal("entry still cached after flush")
			}
			mustReadBack(t, s, x, l, e, size(l, e))
		}
	}
	// Nothing to flush is a no-op.
	if err := s.Flush(func([]Placement) error { t.Fatal("apply called"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestRotationAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs, Options{MaxLogBytes: 8 << 10})
	x := newFakeIndex()
	for round := int64(0); round < 4; round++ {
		addAll(t, s, []int64{1, 2, 3}, round*10, round*10+10)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	logs := map[uint64]bool{}
	for _, loc := range x.locs {
		logs[loc.LogID] = true
		if loc.Offset+int64(loc.Size) > 8<<10+2<<10 {
			t.Fatalf("log grew past the limit: %v", loc)
		}
	}
	if len(logs) < 5 {
		t.Fatalf("only %d logs for ~80 KiB with an 8 KiB limit", len(logs))
	}
	usageBefore := s.Usage(func(int64) bool { return true })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, fs, Options{MaxLogBytes: 8 << 10})
	defer s.Close()
	for l := int64(1); l <= 3; l++ {
		for e := int64(0); e < 40; e++ {
			mustReadBack(t, s, x, l, e, size(l, e))
		}
	}
	usageAfter := s.Usage(func(int64) bool { return true })
	if len(usageAfter) != len(usageBefore) {
		t.Fatalf("usage: %d logs before reopen, %d after", len(usageBefore), len(usageAfter))
	}
	for i := range usageAfter {
		if usageAfter[i].TotalBytes != usageBefore[i].TotalBytes || !usageAfter[i].Sealed {
			t.Fatalf("usage after reopen %+v, before %+v", usageAfter[i], usageBefore[i])
		}
	}
	// New writes go to a new log, never appended to an old one.
	addAll(t, s, []int64{9}, 0, 1)
	var p []Placement
	if err := s.Flush(func(ps []Placement) error { p = ps; return nil }); err != nil {
		t.Fatal(err)
	}
	for id := range logs {
		if p[0].Loc.LogID <= id {
			t.Fatalf("new flush went to log %d, old logs go up to %d", p[0].Loc.LogID, id)
		}
	}
}

func TestBackPressure(t *testing.T) {
	clock := newManualClock()
	const wait = 3 * time.Second
	s := openStore(t, vfs.NewMem(), Options{Clock: clock, WriteCacheBytes: 10 * (1000 + entryOverheadBytes), MaxAddWait: wait})
	defer s.Close()
	for e := int64(0); e < 10; e++ {
		if err := s.Add(1, e, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.FlushWanted():
	default:
		t.Fatal("a half-full cache did not ask for a flush")
	}

	// A full cache: the add waits, and fails after MaxAddWait of clock time.
	done := make(chan error, 1)
	go func() { done <- s.Add(1, 10, make([]byte, 1000)) }()
	waitTimers(t, clock, 1)
	clock.Advance(wait - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("add returned before its deadline: %v", err)
	default:
	}
	clock.Advance(time.Millisecond)
	if err := <-done; !errors.Is(err, ErrWriteCacheFull) {
		t.Fatalf("got %v, want ErrWriteCacheFull", err)
	}

	// A waiting add proceeds as soon as a flush frees space.
	go func() { done <- s.Add(1, 11, make([]byte, 1000)) }()
	waitTimers(t, clock, 1)
	if err := s.Flush(func([]Placement) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("add after flush: %v", err)
	}
	if _, ok := s.ReadCached(1, 11); !ok {
		t.Fatal("entry added after the wait is not cached")
	}

	// An entry that can never fit fails at once.
	if err := s.Add(2, 0, make([]byte, 20000)); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("got %v, want ErrEntryTooLarge", err)
	}
	if err := s.Add(-1, 0, nil); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("got %v, want ErrInvalidID", err)
	}
}

// TestCrash: what a completed flush returned survives a crash, whatever
// part of the unsynced data the crash keeps.
func TestCrash(t *testing.T) {
	for seed := uint64(0); seed < 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 42))
		mem := vfs.NewCrashableMem()
		toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected}
		fs := errorfs.Wrap(mem, errorfs.Any(errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpFileSync {
				return toggle.MaybeError(op)
			}
			return nil
		})))
		s := openStore(t, fs, Options{MaxLogBytes: 16 << 10})
		x := newFakeIndex()
		flushed := int64(0)
		for round := int64(0); round < 5; round++ {
			addAll(t, s, []int64{1, 2}, round*8, round*8+8)
			if err := s.Flush(x.put); err != nil {
				t.Fatal(err)
			}
			flushed = round*8 + 8
		}
		// One more flush whose fsync fails: written, never synced.
		addAll(t, s, []int64{1, 2}, flushed, flushed+8)
		toggle.On()
		if err := s.Flush(x.put); !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("flush with failing sync: %v", err)
		}
		for e := flushed; e < flushed+8; e++ {
			if _, ok := s.ReadCached(1, e); !ok {
				t.Fatal("entries of a failed flush left the write cache")
			}
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
		s.Close()

		s2 := openStore(t, crashed, Options{})
		for l := int64(1); l <= 2; l++ {
			for e := int64(0); e < flushed; e++ {
				mustReadBack(t, s2, x, l, e, size(l, e))
			}
		}
		s2.Close()
	}
}

func TestCorruptRecordNamesFileAndOffset(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs, Options{ReadAheadBytes: -1, ReadCacheBytes: -1})
	defer s.Close()
	x := newFakeIndex()
	addAll(t, s, []int64{5}, 0, 4)
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	loc, _ := x.get(5, 2)
	path := fs.PathJoin("ledgers", LogFileName(loc.LogID))
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, loc.Offset+RecordHeaderSize+3); err != nil {
		t.Fatal(err)
	}
	f.Close()

	check := func(err error, off int64) {
		t.Helper()
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v, want a CorruptionError", err)
		}
		if ce.File != path || ce.Offset != off {
			t.Fatalf("error names %s@%d, want %s@%d", ce.File, ce.Offset, path, off)
		}
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("message %q does not name the file", err)
		}
	}
	_, err = s.Read(5, 2, loc)
	check(err, loc.Offset)
	// A location that points at another entry's record.
	loc1, _ := x.get(5, 1)
	_, err = s.Read(5, 3, loc1)
	check(err, loc1.Offset)
	// A location past the end of the file (a torn tail).
	bad := Location{LogID: loc.LogID, Offset: loc.Offset + 1<<20, Size: 10}
	_, err = s.Read(5, 3, bad)
	check(err, bad.Offset)
	// Intact neighbours still read.
	mustReadBack(t, s, x, 5, 1, size(5, 1))
	mustReadBack(t, s, x, 5, 3, size(5, 3))
	// A log this store never had is not "no such entry".
	if _, err := s.Read(5, 3, Location{LogID: 999, Offset: 32, Size: 1}); !errors.Is(err, ErrNoLog) {
		t.Fatalf("got %v, want ErrNoLog", err)
	}
}

func TestTornTailAtOpen(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs, Options{})
	x := newFakeIndex()
	addAll(t, s, []int64{1}, 0, 5)
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	loc, _ := x.get(1, 0)
	s.Close()
	path := fs.PathJoin("ledgers", LogFileName(loc.LogID))
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	// Half a record header of garbage: a write torn by a crash.
	if _, err := f.WriteAt([]byte{0, 0, 1, 0, 9, 9, 9, 9, 1, 2}, st.Size()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// And a log whose header never reached the disk.
	empty, _ := fs.Create(fs.PathJoin("ledgers", LogFileName(loc.LogID+1)), vfs.WriteCategoryUnspecified)
	empty.Close()

	s = openStore(t, fs, Options{})
	defer s.Close()
	for e := int64(0); e < 5; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
	if _, err := fs.Stat(fs.PathJoin("ledgers", LogFileName(loc.LogID+1))); err == nil {
		t.Fatal("the empty log was not removed at Open")
	}
	u := s.Usage(func(int64) bool { return true })
	if len(u) != 1 || u[0].TotalBytes != int64(5*RecordHeaderSize+size(1, 0)+size(1, 1)+size(1, 2)+size(1, 3)+size(1, 4)) {
		t.Fatalf("usage after torn tail: %+v", u)
	}
	// A log with a bad header (not a torn create) is an error naming it.
	g, _ := fs.Create(fs.PathJoin("ledgers", LogFileName(50)), vfs.WriteCategoryUnspecified)
	g.Write([]byte(strings.Repeat("x", HeaderSize)))
	g.Close()
	if _, err := Open(fs, "ledgers", Options{Clock: newManualClock()}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), LogFileName(50)) {
		t.Fatalf("bad header: got %v", err)
	}
}

// TestErrorInjection: write, sync and read errors surface; nothing is
// lost silently, and a failed log is never written again.
func TestErrorInjection(t *testing.T) {
	for _, kind := range []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileSync} {
		mem := vfs.NewMem()
		toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected}
		fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == kind && strings.HasSuffix(op.Path, ".log") {
				return toggle.MaybeError(op)
			}
			return nil
		}))
		s := openStore(t, fs, Options{})
		x := newFakeIndex()
		addAll(t, s, []int64{1}, 0, 3)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
		first, _ := x.get(1, 0)
		addAll(t, s, []int64{1}, 3, 6)
		toggle.On()
		if err := s.Flush(x.put); !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("%v: flush returned %v", kind, err)
		}
		if _, ok := x.get(1, 3); ok {
			t.Fatalf("%v: a failed flush reached the index", kind)
		}
		for e := int64(0); e < 6; e++ {
			mustReadBack(t, s, x, 1, e, size(1, e)) // cache or log: never lost
		}
		toggle.Off()
		if err := s.Flush(x.put); err != nil {
			t.Fatalf("%v: retry: %v", kind, err)
		}
		loc, _ := x.get(1, 3)
		if loc.LogID == first.LogID {
			t.Fatalf("%v: retry wrote to the failed log %d", kind, loc.LogID)
		}
		for e := int64(0); e < 6; e++ {
			mustReadBack(t, s, x, 1, e, size(1, e))
		}
		s.Close()
	}

	// Read errors are errors, not "no such entry" and not corruption.
	mem := vfs.NewMem()
	toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected}
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileReadAt {
			return toggle.MaybeError(op)
		}
		return nil
	}))
	s := openStore(t, fs, Options{ReadCacheBytes: -1})
	defer s.Close()
	x := newFakeIndex()
	addAll(t, s, []int64{1}, 0, 2)
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	toggle.On()
	loc, _ := x.get(1, 1)
	if _, err := s.Read(1, 1, loc); !errors.Is(err, errorfs.ErrInjected) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("read with injected error: %v", err)
	}
	toggle.Off()
	mustReadBack(t, s, x, 1, 1, size(1, 1))
}

func TestDropLedger(t *testing.T) {
	s := openStore(t, vfs.NewMem(), Options{})
	defer s.Close()
	x := newFakeIndex()
	addAll(t, s, []int64{1, 2}, 0, 3)
	// A flush whose apply fails leaves its generation frozen.
	if err := s.Flush(func([]Placement) error { return errors.New("index down") }); err == nil {
		t.Fatal("apply error not returned")
	}
	addAll(t, s, []int64{1, 2}, 3, 5) // active generation
	s.DropLedger(2)
	if _, ok := s.ReadCached(2, 4); ok {
		t.Fatal("dropped ledger still cached")
	}
	for i := 0; i < 2; i++ {
		if err := s.Flush(func(ps []Placement) error {
			for _, p := range ps {
				if p.LedgerID == 2 {
					t.Fatalf("flush placed entry %d of the dropped ledger", p.EntryID)
				}
			}
			return x.put(ps)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for e := int64(0); e < 5; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
}

func TestReadAhead(t *testing.T) {
	s := openStore(t, vfs.NewMem(), Options{ReadAheadEntries: 5})
	defer s.Close()
	x := newFakeIndex()
	addAll(t, s, []int64{1, 2}, 0, 20)
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	mustReadBack(t, s, x, 1, 0, size(1, 0))
	s.mu.Lock()
	n := len(s.mu.readCache.m)
	_, hasTarget := s.mu.readCache.get(entryKey{1, 0})
	_, hasNext := s.mu.readCache.get(entryKey{1, 1})
	_, hasOther := s.mu.readCache.get(entryKey{2, 0})
	s.mu.Unlock()
	// The five following entries (ReadAheadEntries), not the target (the
	// reader has it), nothing of the other ledger.
	if !hasNext || hasOther || hasTarget || n != 5 {
		t.Fatalf("read-ahead cached %d entries (target %v, next %v, other ledger %v)", n, hasTarget, hasNext, hasOther)
	}
	// Served from the read cache, byte-exact, and bounded.
	for e := int64(1); e < 20; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.readCache.bytes > s.opts.ReadCacheBytes {
		t.Fatalf("read cache over its bound: %d", s.mu.readCache.bytes)
	}
}
