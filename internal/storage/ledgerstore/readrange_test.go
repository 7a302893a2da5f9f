package ledgerstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/entrylog"
)

// damageEntry flips a byte in the body of (l, e)'s record in its entry log
// and returns the file's path and the record's offset.
func damageEntry(t *testing.T, fs vfs.FS, s *Store, l, e int64) (string, int64) {
	t.Helper()
	sh := s.shardFor(l)
	loc, err := sh.ix.Get(l, e)
	if err != nil {
		t.Fatal(err)
	}
	path := fs.PathJoin(logDirOf(t, s, l, e), entrylog.LogFileName(loc.LogID))
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := loc.Offset + entrylog.RecordHeaderSize + 30
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xa5
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	return path, loc.Offset
}

// ReadEntries returns what a ReadEntry loop returns, for entries in the
// entry logs (two flushes, interleaved with another ledger), in the read
// cache and in the write cache, and ends at the first absent entry.
func TestReadEntriesMatchesReadEntry(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), testConfig())
	defer s.Close()
	const l, other = 2, 4 // the same shard
	var bodies [][]byte
	add := func(from, to int64) {
		for e := from; e < to; e++ {
			b := entryBody(l, e, e-1, 0, 100+int(e%7)*50)
			bodies = append(bodies, b)
			mustAdd(t, s, l, e, b)
			mustAdd(t, s, other, e, entryBody(other, e, e-1, 0, 80))
		}
	}
	add(0, 40)
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	add(40, 70)
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	add(70, 80)                       // stays in the write cache
	mustRead(t, s, l, 50, bodies[50]) // fills the read cache after 50

	check := func(first int64, maxCount int, maxBytes int64, want int) {
		t.Helper()
		got, err := s.ReadEntries(l, first, maxCount, maxBytes, 4)
		if err != nil {
			t.Fatalf("ReadEntries(%d, %d, %d): %v", first, maxCount, maxBytes, err)
		}
		if len(got) != want {
			t.Fatalf("ReadEntries(%d, %d, %d): %d entries, want %d", first, maxCount, maxBytes, len(got), want)
		}
		for i, b := range got {
			if string(b) != string(bodies[first+int64(i)]) {
				t.Fatalf("entry %d differs", first+int64(i))
			}
		}
	}
	check(0, 0, 1<<30, 80)   // all: logs, read cache, write cache; ends at 80 (absent)
	check(35, 10, 1<<30, 10) // across the two flushes
	check(75, 0, 1<<30, 5)
	// Byte bound: the first always, then 4 + len each while within.
	check(0, 0, 1, 1)
	check(0, 0, int64(4+len(bodies[0])+4+len(bodies[1])), 2)
	// Entry -1 is the last entry, alone.
	got, err := s.ReadEntries(l, -1, 10, 1<<30, 4)
	if err != nil || len(got) != 1 || string(got[0]) != string(bodies[79]) {
		t.Fatalf("entry -1: %v (%d entries)", err, len(got))
	}
	// Absent first entry, unknown ledger: the store's certain answers.
	if _, err := s.ReadEntries(l, 80, 10, 1<<30, 4); !errors.Is(err, storage.ErrNoEntry) {
		t.Fatalf("past the end: %v", err)
	}
	if _, err := s.ReadEntries(99, 0, 10, 1<<30, 4); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("unknown ledger: %v", err)
	}
}

// Damage is never absence: damage in the first entry is the error (a
// corruption naming the file and offset), damage later ends the run with
// the entries before it and the corruption as the reason.
func TestReadEntriesDamage(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.ReadCacheBytes = -1 // every read goes to the log
	s := mustOpen(t, fs, cfg)
	defer s.Close()
	const l = 2
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 200))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	path, off := damageEntry(t, fs, s, l, 5)
	got, err := s.ReadEntries(l, 0, 0, 1<<30, 4)
	var ce *entrylog.CorruptionError
	if len(got) != 5 || !errors.As(err, &ce) || ce.File != path || ce.Offset != off {
		t.Fatalf("got %d entries and %v, want 5 and a corruption at %s@%d", len(got), err, path, off)
	}
	got, err = s.ReadEntries(l, 5, 0, 1<<30, 4)
	if len(got) != 0 || !errors.As(err, &ce) || errors.Is(err, storage.ErrNoEntry) {
		t.Fatalf("damaged first entry: %d entries, %v", len(got), err)
	}
	if got, err := s.ReadEntries(l, 6, 0, 1<<30, 4); err != nil || len(got) != 14 {
		t.Fatalf("after the damage: %d entries, %v", len(got), err)
	}
}

// Read-ahead on a damaged neighbour: the entry asked for reads, the damaged
// one is a corruption when asked for (not a miss, not cached), and the
// ones after it read.
func TestReadAheadDamagedNeighbour(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, fs, testConfig())
	defer s.Close()
	const l = 3
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	path, off := damageEntry(t, fs, s, l, 4)
	for e := int64(0); e < 20; e++ {
		got, err := s.ReadEntry(l, e)
		if e == 4 {
			var ce *entrylog.CorruptionError
			if !errors.As(err, &ce) || ce.File != path || ce.Offset != off {
				t.Fatalf("damaged entry: %v", err)
			}
			continue
		}
		if err != nil || string(got) != string(entryBody(l, e, e-1, 0, 100)) {
			t.Fatalf("entry %d: %v", e, err)
		}
	}
}

// Reads racing with adds and flushes: every entry acknowledged before a
// ReadEntries call starts is in its answer (a flush moving entries from the
// write cache to the index during the call never makes one look absent),
// and every body is the right one. Run with -race.
func TestReadEntriesRacingFlushes(t *testing.T) {
	cfg := testConfig()
	cfg.ReadCacheBytes = 64 << 10 // small: fills, evictions and misses
	s := mustOpen(t, vfs.NewMem(), cfg)
	defer s.Close()
	const l, n = 2, 3000
	var acked atomic.Int64 // entries 0 … acked-1 are acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := int64(0); e < n; e++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100+int(e%5)*40))
			acked.Store(e + 1)
		}
		close(stop)
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.FlushWriteCache(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	check := func(first int64, got [][]byte) bool {
		for i, b := range got {
			e := first + int64(i)
			if string(b) != string(entryBody(l, e, e-1, 0, 100+int(e%5)*40)) {
				t.Errorf("entry %d: wrong body", e)
				return false
			}
		}
		return true
	}
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		known := acked.Load()
		if known == 0 {
			continue
		}
		first := known / 2
		got, err := s.ReadEntries(l, first, 0, 1<<30, 4)
		if err != nil {
			t.Fatalf("ReadEntries from %d with %d acknowledged: %v", first, known, err)
		}
		if int64(len(got)) < known-first {
			t.Fatalf("ReadEntries from %d returned %d entries, %d were acknowledged before the call", first, len(got), known-first)
		}
		if !check(first, got) {
			return
		}
		if b, err := s.ReadEntry(l, known-1); err != nil || !check(known-1, [][]byte{b}) {
			t.Fatalf("ReadEntry(%d): %v", known-1, err)
		}
	}
	wg.Wait()
}

// A ledger deleted and re-created under the same id: reads return the new
// ledger's entries, never the old one's read ahead into the cache.
func TestReadCacheLedgerRecreated(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), testConfig())
	defer s.Close()
	const l = 2
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	mustRead(t, s, l, 0, entryBody(l, 0, -1, 0, 100)) // reads 1… ahead
	if err := s.DeleteLedger(contextBackground(), l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadEntry(l, 1); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("deleted ledger: %v", err)
	}
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 1, 100)) // salt 1: other bytes
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 20; e++ {
		mustRead(t, s, l, e, entryBody(l, e, e-1, 1, 100))
	}
	got, err := s.ReadEntries(l, 0, 0, 1<<30, 4)
	if err != nil || len(got) != 20 {
		t.Fatalf("ReadEntries: %d entries, %v", len(got), err)
	}
	for e, b := range got {
		if string(b) != string(entryBody(l, int64(e), int64(e)-1, 1, 100)) {
			t.Fatalf("ReadEntries: entry %d is not the re-created ledger's", e)
		}
	}
}

// The interleaving ForgetCached exists for, made deterministic with hooks:
// a reader takes its fill token after DeleteLedger's DropLedger and walks
// the index before the index deletion, so its read-ahead caches the old
// ledger's entries; the ledger id is then re-created with fewer entries. A
// read of an entry the new ledger has not written is "no such entry",
// never the old ledger's bytes.
func TestReadAheadBetweenDropAndIndexDeletion(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), testConfig())
	defer s.Close()
	const l = 3
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	readerAt := make(chan struct{}) // the reader is about to take its token
	readerGo := make(chan struct{}) // let it
	dropped := make(chan struct{})  // DeleteLedger has dropped the caches
	deleteGo := make(chan struct{}) // let it delete the index
	var readerHeld, deleteHeld atomic.Bool
	s.setHook(func(p string) {
		switch {
		case p == "read:locate" && readerHeld.CompareAndSwap(false, true):
			close(readerAt)
			<-readerGo
		case p == "delete:dropped" && deleteHeld.CompareAndSwap(false, true):
			close(dropped)
			<-deleteGo
		}
	})
	readDone := make(chan error, 1)
	go func() {
		b, err := s.ReadEntry(l, 0)
		if err == nil && string(b) != string(entryBody(l, 0, -1, 0, 100)) {
			err = errors.New("wrong body")
		}
		readDone <- err
	}()
	<-readerAt
	deleteDone := make(chan error, 1)
	go func() { deleteDone <- s.DeleteLedger(contextBackground(), l) }()
	<-dropped
	close(readerGo) // token after DropLedger, index walk before its deletion
	if err := <-readDone; err != nil {
		t.Fatalf("read racing the deletion: %v", err)
	}
	close(deleteGo)
	if err := <-deleteDone; err != nil {
		t.Fatal(err)
	}
	s.setHook(nil)

	for e := int64(0); e < 5; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 1, 100)) // salt 1: other bytes
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	for e := int64(5); e < 20; e++ {
		if b, err := s.ReadEntry(l, e); !errors.Is(err, storage.ErrNoEntry) {
			t.Fatalf("re-created ledger, unwritten entry %d: %d bytes, %v; want no such entry", e, len(b), err)
		}
	}
	got, err := s.ReadEntries(l, 0, 0, 1<<30, 4)
	if err != nil || len(got) != 5 {
		t.Fatalf("ReadEntries: %d entries, %v; want the new ledger's 5", len(got), err)
	}
	for e, b := range got {
		if string(b) != string(entryBody(l, int64(e), int64(e)-1, 1, 100)) {
			t.Fatalf("ReadEntries: entry %d is not the re-created ledger's", e)
		}
	}
}

// A compaction that removes the entry logs between ReadEntries' index walk
// and its read: each entry whose log is gone is looked up again, and every
// body is exact. The ledger reference ReadEntries takes is given back.
func TestReadEntriesLogRemovedMidRead(t *testing.T) {
	// Without a read cache every read goes to the entry logs.
	s, _, _ := compactionStore(t, &CompactionPolicy{MajorThreshold: 0.7, MajorInterval: time.Hour},
		func(c *Config) { c.ReadCacheBytes, c.ReadAheadBytes = -1, -1 })
	defer s.Close()
	var st GCStats
	var gcErr error
	var ran atomic.Bool
	s.setHook(func(p string) {
		if p == "readentries:located" && ran.CompareAndSwap(false, true) {
			st, _, gcErr = s.GCTick(true)
		}
	})
	got, err := s.ReadEntries(1, 0, 0, 1<<30, 4)
	s.setHook(nil)
	if gcErr != nil || st.EntriesMoved == 0 || st.LogsRemoved == 0 {
		t.Fatalf("compaction during the read: %+v, %v", st, gcErr)
	}
	if err != nil || len(got) != 120 {
		t.Fatalf("ReadEntries: %d entries, %v", len(got), err)
	}
	for e, b := range got {
		if string(b) != string(entryBody(1, int64(e), int64(e)-1, 0, 700)) {
			t.Fatalf("entry %d: wrong body", e)
		}
	}
	if l := s.ledgers.acquireExisting(1); l != nil {
		s.ledgers.release(l)
		if l.refs != 0 {
			t.Fatalf("ledger 1 holds %d references after the reads", l.refs)
		}
	}
}

// A ledger deleted and written again while ReadEntries looks up entries
// whose logs a compaction removed: the re-read of such an entry must not
// put the new ledger's entry after the old ledger's in one answer.
func TestReadEntriesRereadAfterDeletion(t *testing.T) {
	for _, at := range []int{1, 2} { // the deletion before the first re-read, or the second
		t.Run(fmt.Sprintf("reread%d", at), func(t *testing.T) { testReadEntriesRereadAfterDeletion(t, at, false) })
	}
	// Entries 1.. written again (same bytes) sit in the write cache: only
	// entry 0 is re-read, and the cached bodies after it are the old
	// ledger's.
	t.Run("reread1-rest-cached", func(t *testing.T) { testReadEntriesRereadAfterDeletion(t, 1, true) })
}

func testReadEntriesRereadAfterDeletion(t *testing.T, at int, cacheRest bool) {
	s, _, _ := compactionStore(t, &CompactionPolicy{MajorThreshold: 0.7, MajorInterval: time.Hour},
		func(c *Config) { c.ReadCacheBytes, c.ReadAheadBytes = -1, -1 })
	defer s.Close()
	if cacheRest {
		for e := int64(1); e < 120; e++ {
			mustAdd(t, s, 1, e, entryBody(1, e, e-1, 0, 700))
		}
	}
	var gcErr error
	rereads := 0
	s.setHook(func(p string) {
		switch p {
		case "readentries:located":
			_, _, gcErr = s.GCTick(true)
		case "readentries:reread":
			if rereads++; rereads != at {
				return
			}
			if err := s.DeleteLedger(contextBackground(), 1); err != nil {
				t.Error(err)
			}
			for e := int64(0); e < 120; e++ {
				mustAdd(t, s, 1, e, entryBody(1, e, e-1, 1, 700))
			}
		}
	})
	got, err := s.ReadEntries(1, 0, 0, 1<<30, 4)
	s.setHook(nil)
	if gcErr != nil {
		t.Fatal(gcErr)
	}
	if rereads < at {
		t.Fatalf("%d entries re-read; the deletion never ran inside the read", rereads)
	}
	if err != nil || len(got) == 0 {
		t.Fatalf("ReadEntries: %d entries, %v", len(got), err)
	}
	old, fresh := 0, 0
	for e, b := range got {
		switch string(b) {
		case string(entryBody(1, int64(e), int64(e)-1, 0, 700)):
			old++
		case string(entryBody(1, int64(e), int64(e)-1, 1, 700)):
			fresh++
		default:
			t.Fatalf("entry %d: bytes of neither incarnation", e)
		}
	}
	if old > 0 && fresh > 0 {
		t.Fatalf("one answer holds %d entries of the deleted ledger and %d of the new one", old, fresh)
	}
}
