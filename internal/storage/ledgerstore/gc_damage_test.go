package ledgerstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/foliodb/folio/internal/storage/entrylog"
)

// Regression (review 2, finding 5): after a restart, entrylog.Open's scan
// stopped silently at the first record that did not verify, so a log's
// usage counted only the prefix. Damage in a DEAD ledger's record at the
// front of a log made the log look wholly dead, and the dead-logs-only GC
// pass removed it with every live, indexed entry after the damage. A log
// that does not verify to its end (other than a torn tail) is now kept.
func TestGCKeepsLogDamagedBeforeLiveEntries(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	// Ledgers 2 (to be deleted) and 4 (live) share ledger dir 0; one flush
	// writes 2's records, then 4's, into one log.
	want := map[int64][]byte{}
	for e := int64(0); e < 10; e++ {
		mustAdd(t, s, 2, e, entryBody(2, e, e-1, 1, 3000))
	}
	for e := int64(0); e < 30; e++ {
		b := entryBody(4, e, e-1, 1, 3000)
		mustAdd(t, s, 4, e, b)
		want[e] = b
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.DeleteLedger(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := onlyLog(t, cfg.LedgerDirs[0])
	recs := recordsOf(t, path)
	if recs[2].LedgerID != 2 {
		t.Fatalf("setup: record 2 is ledger %d", recs[2].LedgerID)
	}
	// Bit rot in a record of the deleted ledger 2.
	patch(t, path, recs[2].Offset+24+100, []byte{0xee})
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	for e, b := range want {
		mustRead(t, s, 4, e, b) // all readable before GC
	}
	st, kind, err := s.GCTick(false)
	t.Logf("GCTick: %+v %s %v", st, kind, err)
	if st.LogsDamaged != 1 {
		t.Errorf("GC stats %+v: want the damaged log counted in LogsDamaged", st)
	}
	if d := s.DamagedLogs(); len(d) != 1 || d[0].File != path {
		t.Errorf("DamagedLogs: %v, want %s", d, path)
	}
	lost := 0
	for e, b := range want {
		got, err := s.ReadEntry(4, e)
		if err != nil || string(got) != string(b) {
			lost++
			if e == 0 {
				t.Logf("ledger 4 entry 0 after GC: %v", err)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("GC (dead logs only) destroyed %d of %d live entries of ledger 4", lost, len(want))
	}
}

// Regression (review 2, finding 6): entrylog.Open deleted any log whose
// header read all zero, whatever its size, as an "empty log" created at a
// crash. createLog syncs the header before any record, so a zero header
// followed by data is damage: the store must keep the file (here Open
// refuses, naming it) rather than delete 20 indexed, checkpointed entries.
func TestOpenKeepsLogWithZeroedHeader(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	want := map[int64][]byte{}
	for e := int64(0); e < 20; e++ {
		b := entryBody(2, e, e-1, 1, 3000)
		mustAdd(t, s, 2, e, b)
		want[e] = b
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := onlyLog(t, cfg.LedgerDirs[0])
	patch(t, path, 0, make([]byte, entrylog.HeaderSize))
	s2, err := Open(vfs.Default, cfg)
	if err == nil {
		s2.Close()
		t.Fatal("Open accepted a log whose header is zero but which holds records")
	}
	if !errors.Is(err, entrylog.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open: %v, want a corruption error naming %s", err, path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Open removed %s, which held 20 verified records: %v", path, err)
	}
	// A log that is all zero is what a crash right after its creation
	// leaves; Open still removes that one.
	patch(t, path, 0, make([]byte, 20*3100))
	if err := os.Truncate(path, 20*3100); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(vfs.Default, cfg)
	if err == nil {
		s3.Close()
	}
	if _, serr := os.Stat(path); !os.IsNotExist(serr) {
		t.Errorf("Open kept an all-zero log %s (open: %v)", path, err)
	}
}

// A forced compaction whose output write hits ENOSPC leaves the old log,
// the index and reads intact, and a later tick (space back) compacts.
func TestForcedCompactionENOSPCMidMoveKeepsData(t *testing.T) {
	mem := vfs.NewMem()
	var fail atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && strings.HasSuffix(op.Path, ".compacting") &&
			(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpFileSync) {
			return syscall.ENOSPC
		}
		return nil
	}))
	cfg := testConfig()
	cfg.Compaction = &CompactionPolicy{MinorThreshold: 0.9, MinorInterval: time.Hour, MajorThreshold: 0.9, MajorInterval: time.Hour, ForceWhenNoSpace: true}
	s := mustOpen(t, fs, cfg)
	defer s.Close()
	want := map[[2]int64][]byte{}
	for _, l := range []int64{2, 4} {
		for e := int64(0); e < 60; e++ {
			b := entryBody(l, e, e-1, 1, 3000)
			mustAdd(t, s, l, e, b)
			if l == 4 {
				want[[2]int64{l, e}] = b
			}
		}
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.DeleteLedger(ctx, 2); err != nil {
		t.Fatal(err)
	}
	s.SetNoSpace(true)
	fail.Store(true)
	st, kind, err := s.GCTick(false)
	t.Logf("tick on a full disk: %+v %s %v", st, kind, err)
	for k, b := range want {
		mustRead(t, s, k[0], k[1], b)
	}
	fail.Store(false)
	st, kind, err = s.GCTick(false)
	t.Logf("tick with space: %+v %s %v", st, kind, err)
	for k, b := range want {
		mustRead(t, s, k[0], k[1], b)
	}
	if s.Err() != nil {
		t.Fatalf("store failed: %v", s.Err())
	}
	names, _ := mem.List("/l0/entrylogs")
	t.Logf("entrylogs: %v", names)
}

// Regression (review 2, finding 7): on a full disk with
// isForceGCAllowWhenNoSpace, a forced compaction that failed for lack of
// space aborted the whole tick (entrylog.GC stopped at the first error,
// gcWith at the first directory): wholly dead logs, whose removal needs no
// space and is the only thing that frees some, were never removed. GC now
// removes dead logs first and keeps going after one log's failure.
func TestForcedGCRemovesDeadLogsDespiteFailedCompaction(t *testing.T) {
	mem := vfs.NewMem()
	var fail atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && strings.HasSuffix(op.Path, ".compacting") &&
			(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpFileSync) {
			return syscall.ENOSPC
		}
		return nil
	}))
	cfg := testConfig()
	cfg.Compaction = &CompactionPolicy{MinorThreshold: 0.2, MinorInterval: time.Hour, MajorThreshold: 0.8, MajorInterval: 24 * time.Hour, ForceWhenNoSpace: true}
	s := mustOpen(t, fs, cfg)
	defer s.Close()
	// Ledger dir 0: ledgers 2 and 4 interleaved in one sealed log (then 2
	// is deleted: a compaction candidate). Ledger dir 1: ledger 3 alone
	// fills a sealed log (then deleted: wholly dead).
	for e := int64(0); e < 50; e++ {
		mustAdd(t, s, 2, e, entryBody(2, e, e-1, 1, 3000))
		mustAdd(t, s, 4, e, entryBody(4, e, e-1, 1, 3000))
		mustAdd(t, s, 3, e, entryBody(3, e, e-1, 1, 3000))
		mustAdd(t, s, 3, e+1000, entryBody(3, e+1000, e-1, 1, 3000))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range []int64{2, 3} {
		if err := s.DeleteLedger(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := mem.List("/l1/entrylogs")
	s.SetNoSpace(true)
	fail.Store(true)
	for i := 0; i < 3; i++ {
		st, kind, err := s.GCTick(false)
		t.Logf("tick %d on a full disk: %+v %s %v", i, st, kind, err)
	}
	after, _ := mem.List("/l1/entrylogs")
	t.Logf("/l1/entrylogs before %v after %v", before, after)
	if len(after) >= len(before) {
		t.Fatalf("no wholly dead log of /l1 was removed in 3 forced ticks on a full disk (compaction in /l0 failing with ENOSPC blocks it)")
	}
}
