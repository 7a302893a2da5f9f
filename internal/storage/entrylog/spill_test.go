package entrylog

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// freeFS reports chosen free space per directory: a real disk cannot be
// filled on demand, and MemFS reports no usage at all.
type freeFS struct {
	vfs.FS
	mu   sync.Mutex
	free map[string]uint64
}

func (f *freeFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for dir, free := range f.free {
		if path == dir || strings.HasPrefix(path, dir+"/") {
			return vfs.DiskUsage{TotalBytes: 1000, AvailBytes: free, UsedBytes: 1000 - free}, nil
		}
	}
	return vfs.DiskUsage{}, errors.New("freeFS: no usage configured for " + path)
}

var spillDirs = []string{"own", "a", "b"}

func newFreeFS() *freeFS {
	return &freeFS{FS: vfs.NewCrashableMem(), free: map[string]uint64{"own": 500, "a": 300, "b": 600}}
}

func openSpill(t *testing.T, fs vfs.FS) *Store {
	t.Helper()
	s, err := OpenDirs(fs, spillDirs, Options{Clock: newManualClock(), MaxLogBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// flushEntries adds entries [from, to) of ledger l and flushes them.
func flushEntries(t *testing.T, s *Store, x *fakeIndex, l, from, to int64) {
	t.Helper()
	for e := from; e < to; e++ {
		if err := s.Add(l, e, body(l, e, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(x.put); err != nil {
		t.Fatal(err)
	}
}

// dirOf returns the directory holding the log of entry (l, e).
func dirOf(t *testing.T, s *Store, x *fakeIndex, l, e int64) string {
	t.Helper()
	loc, ok := x.get(l, e)
	if !ok {
		t.Fatalf("entry %d/%d not indexed", l, e)
	}
	d, ok := s.LogDir(loc.LogID)
	if !ok {
		t.Fatalf("log %d of entry %d/%d unknown", loc.LogID, l, e)
	}
	return d
}

// TestSpillPlacement: new logs go to the own directory unless it is full,
// else to the writable directory with the most free space (ties: the
// lowest index); a current log in a directory that became full is left at
// the next flush; with every directory full the store keeps writing where
// it is; a directory marked writable again takes new logs.
func TestSpillPlacement(t *testing.T) {
	fs := newFreeFS()
	s := openSpill(t, fs)
	defer s.Close()
	x := newFakeIndex()
	flushEntries(t, s, x, 1, 0, 5)
	if d := dirOf(t, s, x, 1, 0); d != "own" {
		t.Fatalf("first log in %s, want own", d)
	}
	s.SetDirFull(0, true)
	s.SetDirFull(0, true) // idempotent
	flushEntries(t, s, x, 1, 5, 10)
	if d := dirOf(t, s, x, 1, 5); d != "b" {
		t.Fatalf("own full: log in %s, want b (most free space)", d)
	}
	s.SetDirFull(2, true)
	flushEntries(t, s, x, 1, 10, 15)
	if d := dirOf(t, s, x, 1, 10); d != "a" {
		t.Fatalf("own and b full: log in %s, want a", d)
	}
	s.SetDirFull(2, false)
	fs.mu.Lock()
	fs.free["a"], fs.free["b"] = 600, 600
	fs.mu.Unlock()
	s.SetDirFull(1, true)
	flushEntries(t, s, x, 1, 15, 20)
	if d := dirOf(t, s, x, 1, 15); d != "b" {
		t.Fatalf("only b writable: log in %s", d)
	}
	s.SetDirFull(1, false)
	s.SetDirFull(2, true)
	flushEntries(t, s, x, 1, 20, 25)
	if d := dirOf(t, s, x, 1, 20); d != "a" {
		t.Fatalf("b full: log in %s, want a", d)
	}
	s.SetDirFull(2, false)
	s.SetDirFull(1, true)
	s.SetDirFull(1, false)
	// Everything full: the store keeps writing where it is.
	for i := range spillDirs {
		s.SetDirFull(i, true)
	}
	before, _ := x.get(1, 20)
	flushEntries(t, s, x, 1, 25, 30)
	if loc, _ := x.get(1, 25); loc.LogID != before.LogID {
		t.Fatalf("all full: moved from log %d to log %d, want the same log", before.LogID, loc.LogID)
	}
	// The own directory is writable again: the log leaves the full a.
	s.SetDirFull(0, false)
	flushEntries(t, s, x, 1, 30, 35)
	if d := dirOf(t, s, x, 1, 30); d != "own" {
		t.Fatalf("own writable again: log in %s", d)
	}
	// Ties between spill directories go to the lowest index.
	s.SetDirFull(1, false)
	s.SetDirFull(2, false)
	s.SetDirFull(0, true)
	flushEntries(t, s, x, 1, 35, 40)
	if d := dirOf(t, s, x, 1, 35); d != "a" {
		t.Fatalf("equal free space in a and b: log in %s, want a", d)
	}
	for e := int64(0); e < 40; e++ {
		mustReadBack(t, s, x, 1, e, 100)
	}
	if names, err := fs.List("b"); err != nil || len(names) == 0 {
		t.Fatalf("b holds %v, %v", names, err)
	}
}

// TestSpillReopen: logs in every directory are found again at Open, read
// back, and new log ids continue after the highest one in any directory.
func TestSpillReopen(t *testing.T) {
	fs := newFreeFS()
	s := openSpill(t, fs)
	x := newFakeIndex()
	flushEntries(t, s, x, 1, 0, 5)
	s.SetDirFull(0, true)
	flushEntries(t, s, x, 2, 0, 5)
	spilled, _ := x.get(2, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSpill(t, fs)
	defer s.Close()
	for _, l := range []int64{1, 2} {
		for e := int64(0); e < 5; e++ {
			mustReadBack(t, s, x, l, e, 100)
		}
	}
	if d := dirOf(t, s, x, 2, 0); d != "b" {
		t.Fatalf("after reopen the spilled log is in %s", d)
	}
	flushEntries(t, s, x, 3, 0, 5)
	if loc, _ := x.get(3, 0); loc.LogID <= spilled.LogID {
		t.Fatalf("new log %d reuses an id at or below the spilled log %d", loc.LogID, spilled.LogID)
	}
	// The offline reader and listing see the spilled logs too.
	files, err := LogFiles(fs, spillDirs...)
	if err != nil || len(files) != 3 {
		t.Fatalf("LogFiles: %+v, %v", files, err)
	}
	rd := NewFileReader(fs, spillDirs...)
	defer rd.Close()
	if _, err := rd.Read(2, 0, spilled); err != nil {
		t.Fatalf("offline read of the spilled log: %v", err)
	}
}

// TestSpillDuplicateLogID: the same log id in two directories fails Open
// (and the offline listing and reader) with an error naming both files,
// never picking one.
func TestSpillDuplicateLogID(t *testing.T) {
	fs := newFreeFS()
	s := openSpill(t, fs)
	x := newFakeIndex()
	flushEntries(t, s, x, 1, 0, 5)
	loc, _ := x.get(1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	src := "own/" + LogFileName(loc.LogID)
	dst := "b/" + LogFileName(loc.LogID)
	if err := fs.MkdirAll("b", 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, fs, src, dst)
	check := func(what string, err error) {
		t.Helper()
		var ce *CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), dst) {
			t.Fatalf("%s: %v, want a corruption error naming %s and %s", what, err, src, dst)
		}
	}
	_, err := OpenDirs(fs, spillDirs, Options{Clock: newManualClock()})
	check("OpenDirs", err)
	_, err = LogFiles(fs, spillDirs...)
	check("LogFiles", err)
	rd := NewFileReader(fs, spillDirs...)
	defer rd.Close()
	_, err = rd.Read(1, 0, loc)
	check("FileReader", err)
}

func copyFile(t *testing.T, fs vfs.FS, src, dst string) {
	t.Helper()
	in, err := fs.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := fs.Create(dst, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSpillCompaction: a spilled log is compacted into the own directory
// (the preferred writable one), a log in the full own directory is
// compacted into a spill directory, and everything reads back, also after
// a restart.
func TestSpillCompaction(t *testing.T) {
	fs := newFreeFS()
	s := openSpill(t, fs)
	x := newFakeIndex()
	s.SetDirFull(0, true)
	flushEntries(t, s, x, 1, 0, 5) // in b
	flushEntries(t, s, x, 2, 0, 5)
	spilled, _ := x.get(1, 0)
	s.SetDirFull(0, false)
	flushEntries(t, s, x, 3, 0, 5) // the current log stays in b (not full)
	s.SetDirFull(2, true)
	flushEntries(t, s, x, 4, 0, 5) // leaves the full b: in own
	inOwn, _ := x.get(4, 0)
	if d := dirOf(t, s, x, 4, 0); d != "own" {
		t.Fatalf("ledger 4 in %s", d)
	}
	s.SetDirFull(2, false)
	flushEntries(t, s, x, 5, 0, 1) // seals nothing; own's log stays current
	// Compact the spilled log (ledger 2 dead): its live entries go to own.
	s.DropLedger(2)
	x.deleteLedger(2)
	live := func(l int64) bool { return l != 2 && l != 3 }
	st, err := s.CompactLog(spilled.LogID, live, x.relocate)
	if err != nil || st.LogsRemoved != 1 || st.EntriesMoved != 5 {
		t.Fatalf("compacting the spilled log: %+v, %v", st, err)
	}
	if d := dirOf(t, s, x, 1, 0); d != "own" {
		t.Fatalf("compaction output of a spilled log in %s, want own", d)
	}
	if _, err := fs.Stat("b/" + LogFileName(spilled.LogID)); err == nil {
		t.Fatal("the compacted spilled log is still on disk")
	}
	// Roll to a new log elsewhere so that own's log is sealed, then
	// compact it while own is full: the output goes to a spill directory.
	s.SetDirFull(0, true)
	flushEntries(t, s, x, 6, 0, 5)
	s.DropLedger(5)
	x.deleteLedger(5)
	live2 := func(l int64) bool { return live(l) && l != 5 }
	if st, err := s.CompactLog(inOwn.LogID, live2, x.relocate); err != nil || st.LogsRemoved != 1 {
		t.Fatalf("compacting own's log: %+v, %v", st, err)
	}
	if d := dirOf(t, s, x, 4, 0); d != "b" {
		t.Fatalf("compaction output with own full in %s, want b", d)
	}
	check := func() {
		t.Helper()
		for _, l := range []int64{1, 4, 6} {
			for e := int64(0); e < 5; e++ {
				mustReadBack(t, s, x, l, e, 100)
			}
		}
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSpill(t, fs)
	defer s.Close()
	check()
}

// TestSpillGCRemovesSpilledLog: GC removes a dead log wherever it lives.
func TestSpillGCRemovesSpilledLog(t *testing.T) {
	fs := newFreeFS()
	s := openSpill(t, fs)
	x := newFakeIndex()
	s.SetDirFull(0, true)
	flushEntries(t, s, x, 1, 0, 5)
	spilled, _ := x.get(1, 0)
	s.SetDirFull(0, false)
	s.SetDirFull(2, true)
	flushEntries(t, s, x, 2, 0, 5) // seals the spilled log
	s.DropLedger(1)
	x.deleteLedger(1)
	st, err := s.GC(0.5, func(l int64) bool { return l != 1 }, x.relocate)
	if err != nil || st.LogsRemoved != 1 {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	path := "b/" + LogFileName(spilled.LogID)
	if _, err := fs.Stat(path); err == nil {
		t.Fatalf("%s survived GC", path)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSpill(t, fs)
	defer s.Close()
	for e := int64(0); e < 5; e++ {
		mustReadBack(t, s, x, 2, e, 100)
	}
	if _, ok := s.LogDir(spilled.LogID); ok {
		t.Fatal("the removed log came back at Open")
	}
}

// TestSpillConcurrentToggle: directories turning full and writable while
// flushes and compactions run lose nothing (run with -race).
func TestSpillConcurrentToggle(t *testing.T) {
	fs := newFreeFS()
	s, err := OpenDirs(fs, spillDirs, Options{Clock: newManualClock(), MaxLogBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	x := newFakeIndex()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.SetDirFull(i%3, i%2 == 0)
		}
	}()
	for l := int64(1); l <= 6; l++ {
		flushEntries(t, s, x, l, 0, 20)
		if l%2 == 0 {
			dead := l - 1
			s.DropLedger(dead)
			x.deleteLedger(dead)
			if _, err := s.GC(0.9, func(id int64) bool { return id%2 == 0 }, x.relocate); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	check := func() {
		t.Helper()
		for l := int64(2); l <= 6; l += 2 {
			for e := int64(0); e < 20; e++ {
				mustReadBack(t, s, x, l, e, 100)
			}
		}
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSpill(t, fs)
	defer s.Close()
	check()
}
