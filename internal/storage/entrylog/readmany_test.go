package entrylog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// sectorFS counts the bytes read through it and fails a ReadAt reaching
// past bad (when bad > 0) with EIO after returning the bytes before bad, as
// a pread over a bad sector does. With once set, the sector heals after
// failing one read (a transient error).
type sectorFS struct {
	vfs.FS
	st *sectorState
}

type sectorState struct {
	bad       atomic.Int64
	once      atomic.Bool
	bytesRead atomic.Int64
	reads     atomic.Int64
}

type sectorFile struct {
	vfs.File
	st *sectorState
}

func (p sectorFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	return sectorFile{f, p.st}, nil
}

func (f sectorFile) ReadAt(b []byte, off int64) (int, error) {
	f.st.reads.Add(1)
	f.st.bytesRead.Add(int64(len(b)))
	bad := f.st.bad.Load()
	if bad <= 0 || off+int64(len(b)) <= bad {
		return f.File.ReadAt(b, off)
	}
	if f.st.once.Load() {
		f.st.bad.Store(0)
	}
	eio := &os.PathError{Op: "read", Path: "device", Err: syscall.EIO}
	if off >= bad {
		return 0, eio
	}
	n, err := f.File.ReadAt(b[:bad-off], off)
	if err != nil {
		return n, err
	}
	return n, eio
}

// sparseAmong writes n entries of ledger 1 (bodySize bytes each), each
// followed by a gapSize-byte entry of ledger 2, one flush per pair, and
// returns the wants for ledger 1.
func sparseAmong(t *testing.T, s *Store, n int64, bodySize, gapSize int) []Want {
	t.Helper()
	x := newFakeIndex()
	for e := range n {
		if err := s.Add(1, e, body(1, e, bodySize)); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(2, e, body(2, e, gapSize)); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	var wants []Want
	for e := range n {
		loc, _ := x.get(1, e)
		wants = append(wants, Want{EntryID: e, Loc: loc})
	}
	return wants
}

// Tiny entries sparse among another ledger's large records (each gap just
// under MaxReadGapBytes): ReadMany reads at most twice the records' bytes
// plus one gap, not the 4 MiB runs gap-joining alone would, and the bodies
// it returns do not pin the bytes read with them.
func TestReadManySparseReadsAndRetainsLittle(t *testing.T) {
	st := &sectorState{}
	s := openStore(t, sectorFS{vfs.NewMem(), st}, Options{WriteCacheBytes: 64 << 20})
	defer s.Close()
	const n, bodySize = 500, 40
	wants := sparseAmong(t, s, n, bodySize, 60<<10)
	recBytes := int64(n * (RecordHeaderSize + bodySize))

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	st.bytesRead.Store(0)
	res := s.ReadMany(1, wants)
	read := st.bytesRead.Load()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	for i, r := range res {
		if r.Err != nil || !bytes.Equal(r.Body, body(1, int64(i), bodySize)) {
			t.Fatalf("entry %d: %v", i, r.Err)
		}
	}
	live := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	runtime.KeepAlive(res)
	t.Logf("records %d bytes; read %d, allocated %d, live after GC %d", recBytes, read, alloc, live)
	if read > 2*recBytes+s.opts.MaxReadGapBytes {
		t.Errorf("read %d bytes for %d bytes of records", read, recBytes)
	}
	// The results and their bodies, with generous slack for the runtime;
	// the unfixed read retained ~1500 times the bodies.
	if live > 10*recBytes {
		t.Errorf("ReadMany retains %d bytes for %d bytes of bodies", live, recBytes)
	}
}

// Entries of ledger 1 each followed by a small record of ledger 2 are
// still joined into few reads: the ratio rule spares the common case.
func TestReadManyJoinsAcrossSmallGaps(t *testing.T) {
	st := &sectorState{}
	s := openStore(t, sectorFS{vfs.NewMem(), st}, Options{WriteCacheBytes: 64 << 20})
	defer s.Close()
	wants := sparseAmong(t, s, 100, 200, 300)
	st.reads.Store(0)
	res := s.ReadMany(1, wants)
	for i, r := range res {
		if r.Err != nil || !bytes.Equal(r.Body, body(1, int64(i), 200)) {
			t.Fatalf("entry %d: %v", i, r.Err)
		}
	}
	if n := st.reads.Load(); n != 1 {
		t.Fatalf("%d reads for 100 entries 300 bytes apart, want 1", n)
	}
}

// A bad sector inside entry 5's record, past the target: the bytes before
// it are valid, so the target reads (read-ahead does not fail it) and so
// do the entries before it in a batch; entry 5 itself reports the I/O
// error naming the file and its offset, never absence.
func TestReadPartialIOError(t *testing.T) {
	st := &sectorState{}
	s, x := flushed(t, sectorFS{vfs.NewMem(), st}, Options{}, []int64{1}, 10)
	defer s.Close()
	var wants []Want
	for e := range int64(10) {
		l, _ := x.get(1, e)
		wants = append(wants, Want{EntryID: e, Loc: l})
	}
	loc5 := wants[5].Loc
	st.bad.Store(loc5.Offset + 10)

	got, err := s.ReadAhead(1, wants[0], wants[1:], s.FillEpoch())
	if err != nil || !bytes.Equal(got, body(1, 0, size(1, 0))) {
		t.Fatalf("ReadAhead target 0 with a bad sector in entry 5: %v", err)
	}
	if cached(s, 1, 1) {
		t.Errorf("a read that failed filled the cache")
	}
	checkEIO := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) ||
			!strings.Contains(err.Error(), LogFileName(loc5.LogID)) || !strings.Contains(err.Error(), fmt.Sprint(loc5.Offset)) {
			t.Errorf("%s: %v, want EIO naming %s offset %d", what, err, LogFileName(loc5.LogID), loc5.Offset)
		}
	}
	_, err = s.ReadAhead(1, wants[5], wants[6:], s.FillEpoch())
	checkEIO("ReadAhead of the damaged entry", err)

	res := s.ReadMany(1, wants)
	for e := range 5 {
		if res[e].Err != nil || !bytes.Equal(res[e].Body, body(1, int64(e), size(1, int64(e)))) {
			t.Errorf("ReadMany entry %d (before the bad sector): %v", e, res[e].Err)
		}
	}
	checkEIO("ReadMany of the damaged entry", res[5].Err)
}

// A transient error failing the span: ReadAhead retries the target alone
// and ReadMany each record past the failure, so all of them read.
func TestReadTransientIOErrorRetried(t *testing.T) {
	st := &sectorState{}
	s, x := flushed(t, sectorFS{vfs.NewMem(), st}, Options{}, []int64{1}, 10)
	defer s.Close()
	var wants []Want
	for e := range int64(10) {
		l, _ := x.get(1, e)
		wants = append(wants, Want{EntryID: e, Loc: l})
	}
	st.once.Store(true)
	st.bad.Store(wants[0].Loc.Offset + 5) // inside the target's record
	got, err := s.ReadAhead(1, wants[0], wants[1:], s.FillEpoch())
	if err != nil || !bytes.Equal(got, body(1, 0, size(1, 0))) {
		t.Fatalf("ReadAhead after a transient error: %v", err)
	}
	st.bad.Store(wants[3].Loc.Offset + 5)
	for e, r := range s.ReadMany(1, wants) {
		if r.Err != nil || !bytes.Equal(r.Body, body(1, int64(e), size(1, int64(e)))) {
			t.Fatalf("ReadMany entry %d after a transient error: %v", e, r.Err)
		}
	}
}

// Ledger churn that never fills the cache (keys leave by removeLedger and
// remove, not eviction) keeps the fifo proportional to the live keys, and
// eviction stays oldest-first across the compactions.
func TestReadCacheFifoBounded(t *testing.T) {
	c := newReadCache(16 << 20)
	for l := range int64(3000) {
		for e := range int64(100) {
			c.put(entryKey{l, e}, make([]byte, 10))
		}
		c.remove(entryKey{l, 0})
		c.put(entryKey{l, 0}, make([]byte, 10)) // re-put: a duplicate slot
		c.removeLedger(l)
	}
	if n := len(c.fifo) - c.head; n > 2*len(c.m)+readCacheSlack {
		t.Fatalf("fifo holds %d keys with %d cached", n, len(c.m))
	}
	// Eviction order after churn: fill exactly, then one more evicts the
	// oldest live key only.
	per := int64(100) + entryOverheadBytes
	c = newReadCache(10 * per)
	for e := range int64(10) {
		c.put(entryKey{1, e}, make([]byte, 100))
	}
	for i := range 3000 {
		k := entryKey{2, int64(i)}
		c.put(k, make([]byte, 1))
		c.remove(k)
	}
	c.put(entryKey{1, 10}, make([]byte, 100))
	for e := range int64(11) {
		if _, ok := c.get(entryKey{1, e}); ok != (e != 0) {
			t.Fatalf("entry %d cached %v after eviction", e, ok)
		}
	}
}

// A compaction that removes the log after ReadAhead or ReadMany found it
// and before they read it: ErrLogRemoved (the caller looks the entry up
// again), never damage or absence; the new locations read exact bodies.
func TestReadLogRemovedBeforeRead(t *testing.T) {
	s := openStore(t, vfs.NewMem(), Options{MaxLogBytes: 4 << 10})
	defer s.Close()
	x := newFakeIndex()
	for round := int64(0); round < 4; round++ {
		addAll(t, s, []int64{1, 2}, round*10, round*10+10)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	wantsOf := func() []Want {
		var ws []Want
		for e := range int64(10) {
			l, _ := x.get(1, e)
			ws = append(ws, Want{EntryID: e, Loc: l})
		}
		return ws
	}
	wants := wantsOf()
	logID := wants[0].Loc.LogID
	for _, u := range s.Usage(func(int64) bool { return true }) {
		if u.LogID == logID && !u.Sealed {
			t.Fatalf("log %d of entries 0..9 not sealed", logID)
		}
	}
	live := func(int64) bool { return true }
	compact := func() {
		s.beforeRead = nil
		if _, err := s.CompactLog(logID, live, x.relocate); err != nil {
			t.Fatal(err)
		}
	}

	s.beforeRead = compact
	if _, err := s.ReadAhead(1, wants[0], wants[1:], s.FillEpoch()); !errors.Is(err, ErrLogRemoved) {
		t.Fatalf("ReadAhead of a log removed before the read: %v", err)
	}
	for e, w := range wantsOf() {
		if got, err := s.Read(1, w.EntryID, w.Loc); err != nil || !bytes.Equal(got, body(1, int64(e), size(1, int64(e)))) {
			t.Fatalf("entry %d at its new location: %v", e, err)
		}
	}

	// Again for ReadMany, compacting the log the entries moved to.
	wants = wantsOf()
	logID = wants[0].Loc.LogID
	addAll(t, s, []int64{3}, 0, 40) // seal it
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
	s.beforeRead = compact
	for e, r := range s.ReadMany(1, wants) {
		if wants[e].Loc.LogID == logID && !errors.Is(r.Err, ErrLogRemoved) {
			t.Fatalf("ReadMany entry %d of a log removed before the read: %v", e, r.Err)
		}
	}
	for e, r := range s.ReadMany(1, wantsOf()) {
		if r.Err != nil || !bytes.Equal(r.Body, body(1, int64(e), size(1, int64(e)))) {
			t.Fatalf("ReadMany entry %d at its new location: %v", e, r.Err)
		}
	}
}
