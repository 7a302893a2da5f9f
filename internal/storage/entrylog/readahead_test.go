package entrylog

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// damage flips a byte inside the body of the record at loc.
func damage(t *testing.T, fs vfs.FS, loc Location) {
	t.Helper()
	f, err := fs.OpenReadWrite(fs.PathJoin("ledgers", LogFileName(loc.LogID)), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], loc.Offset+RecordHeaderSize+1); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b[:], loc.Offset+RecordHeaderSize+1); err != nil {
		t.Fatal(err)
	}
}

func cached(s *Store, l, e int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.readCache.get(entryKey{l, e})
	return ok
}

func flushed(t *testing.T, fs vfs.FS, opts Options, ledgers []int64, n int64) (*Store, *fakeIndex) {
	t.Helper()
	s := openStore(t, fs, opts)
	x := newFakeIndex()
	addAll(t, s, ledgers, 0, n)
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	return s, x
}

// A damaged record after the target: the target reads, the damaged entry
// is not cached (nor is anything after it lost: the intact ones after it
// are cached), and reading the damaged entry is a CorruptionError naming
// its place, never a miss or a wrong body.
func TestReadAheadSkipsDamage(t *testing.T) {
	fs := vfs.NewMem()
	s, x := flushed(t, fs, Options{}, []int64{1, 2}, 10)
	defer s.Close()
	bad, _ := x.get(1, 3)
	damage(t, fs, bad)
	mustReadBack(t, s, x, 1, 0, size(1, 0))
	if cached(s, 1, 3) {
		t.Fatal("damaged entry cached")
	}
	for _, e := range []int64{1, 2, 4, 9} {
		if !cached(s, 1, e) {
			t.Fatalf("intact entry %d not cached", e)
		}
	}
	_, err := readVia(s, x, 1, 3)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != bad.Offset {
		t.Fatalf("reading the damaged entry: %v, want a CorruptionError at offset %d", err, bad.Offset)
	}
	if cached(s, 1, 4) && cached(s, 1, 3) {
		t.Fatal("damage cached by its own read")
	}
}

// Damage in the target: its error, and nothing read ahead is cached from
// that read (the span's bytes may be anything).
func TestReadAheadTargetDamaged(t *testing.T) {
	fs := vfs.NewMem()
	s, x := flushed(t, fs, Options{}, []int64{1}, 10)
	defer s.Close()
	bad, _ := x.get(1, 0)
	damage(t, fs, bad)
	_, err := readVia(s, x, 1, 0)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want corruption", err)
	}
	s.mu.Lock()
	n := len(s.mu.readCache.m)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d entries cached by a failed read", n)
	}
}

// A fill that overlapped a DropLedger or a flush's release is not cached;
// an Add of a cached entry removes the cached copy; a fill does not cache
// what the write cache holds.
func TestReadAheadInvalidation(t *testing.T) {
	fs := vfs.NewMem()
	s, x := flushed(t, fs, Options{}, []int64{1}, 10)
	defer s.Close()
	fillFrom := func(epoch uint64, e int64) {
		t.Helper()
		loc, _ := x.get(1, e)
		next := []Want{}
		for id := e + 1; id < 10; id++ {
			l, _ := x.get(1, id)
			next = append(next, Want{EntryID: id, Loc: l})
		}
		if _, err := s.ReadAhead(1, Want{EntryID: e, Loc: loc}, next, epoch); err != nil {
			t.Fatal(err)
		}
	}

	epoch := s.FillEpoch()
	s.DropLedger(2) // any ledger: the token is per store
	fillFrom(epoch, 0)
	if cached(s, 1, 1) {
		t.Fatal("fill cached across a DropLedger")
	}
	epoch = s.FillEpoch()
	if err := s.Add(3, 0, body(3, 0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	fillFrom(epoch, 0)
	if cached(s, 1, 1) {
		t.Fatal("fill cached across a flush")
	}

	fillFrom(s.FillEpoch(), 0)
	if !cached(s, 1, 5) {
		t.Fatal("entry 5 not cached")
	}
	// A rewrite (different bytes, to prove which copy is served) removes
	// the cached copy; the write cache serves the new one.
	nb := bytes.Repeat([]byte{7}, 33)
	if err := s.Add(1, 5, nb); err != nil {
		t.Fatal(err)
	}
	if cached(s, 1, 5) {
		t.Fatal("Add left the older cached copy")
	}
	// A fill while the rewrite is in the write cache does not cache the
	// older record.
	fillFrom(s.FillEpoch(), 2)
	if cached(s, 1, 5) {
		t.Fatal("fill cached an entry the write cache holds")
	}
	if got, _ := s.ReadCachedEntry(1, 5); !bytes.Equal(got, nb) {
		t.Fatal("write cache does not serve the rewrite")
	}
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	if got, err := readVia(s, x, 1, 5); err != nil || !bytes.Equal(got, nb) {
		t.Fatalf("after the flush: %v, bytes equal %v", err, bytes.Equal(got, nb))
	}
	// ForgetCached (after the index deletion) empties the ledger from the
	// cache and keeps a fill that started before it out.
	fillFrom(s.FillEpoch(), 0)
	epoch = s.FillEpoch()
	s.ForgetCached(1)
	for e := int64(0); e < 10; e++ {
		if cached(s, 1, e) {
			t.Fatalf("entry %d cached after ForgetCached", e)
		}
	}
	fillFrom(epoch, 0)
	if cached(s, 1, 1) {
		t.Fatal("fill cached across a ForgetCached")
	}
	// DropLedger empties the ledger from the cache.
	fillFrom(s.FillEpoch(), 0)
	s.DropLedger(1)
	for e := int64(0); e < 10; e++ {
		if cached(s, 1, e) {
			t.Fatalf("entry %d cached after DropLedger", e)
		}
	}
}

// Locations the index gives that do not hold the named entry (a stale or
// wrong index) are not cached and do not fail the target.
func TestReadAheadWrongLocation(t *testing.T) {
	fs := vfs.NewMem()
	s, x := flushed(t, fs, Options{}, []int64{1}, 10)
	defer s.Close()
	loc0, _ := x.get(1, 0)
	loc2, _ := x.get(1, 2)
	loc3, _ := x.get(1, 3)
	got, err := s.ReadAhead(1, Want{EntryID: 0, Loc: loc0}, []Want{{EntryID: 1, Loc: loc3}, {EntryID: 2, Loc: loc2}}, s.FillEpoch())
	if err != nil || !bytes.Equal(got, body(1, 0, size(1, 0))) {
		t.Fatalf("target: %v", err)
	}
	if cached(s, 1, 1) || cached(s, 1, 3) {
		t.Fatal("a record cached under the wrong entry")
	}
	if !cached(s, 1, 2) {
		t.Fatal("the correct location was not cached")
	}
}

// The batch bounds: entries, bytes, the read cache, and MaxReadBytes.
func TestReadAheadBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want int
	}{
		{"entries", Options{ReadAheadEntries: 3}, 3},
		{"bytes", Options{ReadAheadBytes: 1}, 1},
		{"span", Options{MaxReadBytes: 1}, 0},
		{"off", Options{ReadAheadEntries: -1}, 0},
		{"off-bytes", Options{ReadAheadBytes: -1}, 0},
		{"no-cache", Options{ReadCacheBytes: -1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, x := flushed(t, vfs.NewMem(), tc.opts, []int64{1}, 20)
			defer s.Close()
			mustReadBack(t, s, x, 1, 0, size(1, 0))
			s.mu.Lock()
			n := len(s.mu.readCache.m)
			s.mu.Unlock()
			if n != tc.want {
				t.Fatalf("%d cached, want %d", n, tc.want)
			}
		})
	}
}

// ReadMany reads in (log, offset) order, one read per run of nearby
// records, and reports each entry's own outcome in the caller's order.
func TestReadManyCoalescesAndReportsPerEntry(t *testing.T) {
	var reads atomic.Int64
	counting := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileReadAt {
			reads.Add(1)
		}
		return nil
	})
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, counting)
	s, x := flushed(t, fs, Options{MaxReadGapBytes: 1}, []int64{1, 2}, 30)
	defer s.Close()
	// A second flush puts entries 30..39 in another run of the same log.
	addAll(t, s, []int64{1, 2}, 30, 40)
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	var wants []Want
	for _, e := range []int64{35, 0, 1, 2, 31, 3, 30, 4} { // any order
		loc, _ := x.get(1, e)
		wants = append(wants, Want{EntryID: e, Loc: loc})
	}
	reads.Store(0)
	res := s.ReadMany(1, wants)
	for i, w := range wants {
		if res[i].Err != nil || !bytes.Equal(res[i].Body, body(1, w.EntryID, size(1, w.EntryID))) {
			t.Fatalf("entry %d: %v", w.EntryID, res[i].Err)
		}
	}
	// Runs: 0..4 and 30,31 are contiguous (gap ≤ 1 byte), 35 is alone.
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d reads, want 3", n)
	}

	// Damage one record: only that entry fails, with its place; a
	// location naming another entry fails as corruption too.
	bad, _ := x.get(1, 2)
	damage(t, mem, bad)
	loc5, _ := x.get(1, 5)
	wants = append(wants, Want{EntryID: 6, Loc: loc5}, Want{EntryID: 7, Loc: Location{LogID: 999, Offset: 32, Size: 10}})
	res = s.ReadMany(1, wants)
	for i, w := range wants {
		switch {
		case w.EntryID == 2:
			var ce *CorruptionError
			if !errors.As(res[i].Err, &ce) || ce.Offset != bad.Offset {
				t.Fatalf("damaged entry: %v", res[i].Err)
			}
		case w.EntryID == 6:
			if !errors.Is(res[i].Err, ErrCorrupt) {
				t.Fatalf("wrong location: %v", res[i].Err)
			}
		case w.EntryID == 7:
			if !errors.Is(res[i].Err, ErrNoLog) {
				t.Fatalf("missing log: %v", res[i].Err)
			}
		case res[i].Err != nil:
			t.Fatalf("entry %d: %v", w.EntryID, res[i].Err)
		}
	}
}

// An I/O error fails the entries of that read with the error (not
// corruption, not absence).
func TestReadManyIOError(t *testing.T) {
	var fail atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpFileReadAt {
			return errorfs.ErrInjected
		}
		return nil
	})
	s, x := flushed(t, errorfs.Wrap(vfs.NewMem(), inj), Options{}, []int64{1}, 5)
	defer s.Close()
	var wants []Want
	for e := int64(0); e < 5; e++ {
		loc, _ := x.get(1, e)
		wants = append(wants, Want{EntryID: e, Loc: loc})
	}
	fail.Store(true)
	for _, r := range s.ReadMany(1, wants) {
		if !errors.Is(r.Err, errorfs.ErrInjected) || errors.Is(r.Err, ErrCorrupt) {
			t.Fatalf("got %v, want the injected I/O error", r.Err)
		}
	}
}

// A ledger whose entries lie sparsely among another ledger's large ones:
// the read-ahead stops where the span would be mostly the other ledger's
// bytes (at most 4 read per byte wanted, plus one gap), not at 4 MiB.
func TestReadAheadSparse(t *testing.T) {
	s := openStore(t, vfs.NewMem(), Options{MaxReadGapBytes: 1})
	defer s.Close()
	x := newFakeIndex()
	for e := int64(0); e < 20; e++ {
		// One flush per entry: 100 B of ledger 1, then 8 KiB of ledger 2.
		if err := s.Add(1, e, body(1, e, 100)); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(2, e, body(2, e, 8<<10)); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := readVia(s, x, 1, 0); err != nil || !bytes.Equal(got, body(1, 0, 100)) {
		t.Fatalf("entry 0: %v", err)
	}
	s.mu.Lock()
	n := len(s.mu.readCache.m)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d entries read ahead through 8 KiB of another ledger each, want none", n)
	}
}
