package ledgerstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// spillEntries adds entries [from, to) of each ledger, 200 bytes each.
func spillEntries(t *testing.T, s *Store, ledgers []int64, from, to int64) {
	t.Helper()
	for _, l := range ledgers {
		for e := from; e < to; e++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 200))
		}
	}
}

func spillReadAll(t *testing.T, s *Store, ledgers []int64, from, to int64) {
	t.Helper()
	for _, l := range ledgers {
		for e := from; e < to; e++ {
			mustRead(t, s, l, e, entryBody(l, e, e-1, 0, 200))
		}
	}
}

// logDirOf returns the directory of the entry log holding (l, e).
func logDirOf(t *testing.T, s *Store, l, e int64) string {
	t.Helper()
	sh := s.shardFor(l)
	loc, err := sh.ix.Get(l, e)
	if err != nil {
		t.Fatalf("location of %d/%d: %v", l, e, err)
	}
	d, ok := sh.el.LogDir(loc.LogID)
	if !ok {
		t.Fatalf("log %d of %d/%d unknown", loc.LogID, l, e)
	}
	return d
}

// TestSpillOneDirFull: with one ledger directory full, adds to its ledgers
// keep succeeding and their entry logs land in the other directory; the
// entries read back after a restart, after a compaction of the spilled
// log, and after rebuild-index (which must scan the spilled logs).
func TestSpillOneDirFull(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	cfg.GCThreshold = 0.99
	s := mustOpen(t, mem, cfg)
	early, late := []int64{2, 3}, []int64{4, 5} // shard 0: 2, 4; shard 1: 3, 5
	spillEntries(t, s, early, 0, 10)
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	if d := logDirOf(t, s, 2, 0); d != "/l0/entrylogs" {
		t.Fatalf("ledger 2 before the disk filled: %s", d)
	}
	s.SetLedgerDirFull(0, true)
	spillEntries(t, s, late, 0, 10)
	spillEntries(t, s, early, 10, 20)
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []int64{4, 2} {
		e := int64(0)
		if l == 2 {
			e = 10
		}
		if d := logDirOf(t, s, l, e); d != "/l1/entrylogs-shard-0" {
			t.Fatalf("ledger %d (shard 0) with /l0 full: entry log in %s, want /l1/entrylogs-shard-0", l, d)
		}
	}
	if d := logDirOf(t, s, 5, 0); d != "/l1/entrylogs" {
		t.Fatalf("ledger 5 (shard 1): %s", d)
	}
	spillReadAll(t, s, early, 0, 20)
	spillReadAll(t, s, late, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: the spilled logs are found again.
	s = mustOpen(t, mem, cfg)
	spillReadAll(t, s, early, 0, 20)
	spillReadAll(t, s, late, 0, 10)
	// Compaction of the spilled log: ledger 4 deleted, ledger 2's entries
	// in it move to the own directory (writable again).
	s.SetLedgerDirFull(0, false)
	if err := s.DeleteLedger(contextBackground(), 4); err != nil {
		t.Fatal(err)
	}
	st, err := s.GC()
	if err != nil || st.LogsRemoved == 0 {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	if d := logDirOf(t, s, 2, 10); d != "/l0/entrylogs" {
		t.Fatalf("after compacting the spilled log ledger 2's entries are in %s", d)
	}
	if names, err := mem.List("/l1/entrylogs-shard-0"); err != nil || len(names) != 0 {
		t.Fatalf("spill directory after GC: %v, %v", names, err)
	}
	spillReadAll(t, s, []int64{2, 3, 5}, 0, 10)
	spillReadAll(t, s, []int64{2, 3}, 10, 20)
	// Spill again, then restart and rebuild the index of shard 0 from its
	// logs in both directories.
	s.SetLedgerDirFull(0, true)
	spillEntries(t, s, []int64{6}, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.RemoveAll("/l0/index"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem, cfg); !errors.Is(err, ErrDataLost) {
		t.Fatalf("open without /l0/index: %v", err)
	}
	rep, err := RebuildIndex(mem, cfg, RebuildOptions{AcceptLostFences: true})
	if err != nil {
		t.Fatalf("RebuildIndex: %v", err)
	}
	if len(rep.Rebuilt) != 1 || rep.Rebuilt[0].LogsScanned < 2 {
		t.Fatalf("rebuild report %+v: want /l0 rebuilt from logs in both directories", rep)
	}
	s = mustOpen(t, mem, cfg)
	defer s.Close()
	spillReadAll(t, s, []int64{2, 3, 5, 6}, 0, 10)
	spillReadAll(t, s, []int64{2, 3}, 10, 20)
}

// TestSpillCheckConsistency: the offline check reads spilled logs.
func TestSpillCheckConsistency(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	s := mustOpen(t, mem, cfg)
	s.SetLedgerDirFull(1, true)
	spillEntries(t, s, []int64{1, 2}, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := CheckConsistency(mem, cfg)
	if err != nil || len(res.Problems) != 0 || res.Entries != 20 {
		t.Fatalf("CheckConsistency: %+v, %v", res, err)
	}
	dirs, err := EntryLogDirs(mem, "/l0")
	if err != nil || fmt.Sprint(dirs) != "[/l0/entrylogs /l0/entrylogs-shard-1]" {
		t.Fatalf("EntryLogDirs(/l0): %v, %v", dirs, err)
	}
	// Losing the spilled log is a problem the check reports.
	names, _ := mem.List("/l0/entrylogs-shard-1")
	for _, n := range names {
		if err := mem.Remove("/l0/entrylogs-shard-1/" + n); err != nil {
			t.Fatal(err)
		}
	}
	if res, err = CheckConsistency(mem, cfg); err != nil || len(res.Problems) != 10 {
		t.Fatalf("CheckConsistency without the spilled log: %d problems, %v", len(res.Problems), err)
	}
}

// expandBase writes a store with two ledger directories and closes it.
func expandBase(t *testing.T) (*vfs.MemFS, Config) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	s := mustOpen(t, mem, cfg)
	spillEntries(t, s, []int64{1, 2, 3}, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, cfg
}

func expanded(cfg Config) Config {
	cfg.LedgerDirs = append(append([]string(nil), cfg.LedgerDirs...), "/l2")
	cfg.AllowExpansion = true
	return cfg
}

func readLayout(t *testing.T, fs vfs.FS, dir string) layout {
	t.Helper()
	path := dir + "/" + layoutFile
	b, ok, err := readSmallFile(fs, path)
	if err != nil || !ok {
		t.Fatalf("%s: %v (exists %v)", path, err, ok)
	}
	l, err := decodeLayout(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestExpansion: a directory appended with AllowExpansion joins the store
// as a capacity directory: old data reads back, new logs can land in it,
// and from then on it cannot be removed or wiped.
func TestExpansion(t *testing.T) {
	mem, cfg := expandBase(t)
	ecfg := expanded(cfg)

	without := ecfg
	without.AllowExpansion = false
	if _, err := Open(mem, without); !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "allowStorageExpansion=true") ||
		!strings.Contains(err.Error(), "/l2") {
		t.Fatalf("expansion without AllowExpansion: %v", err)
	}
	if _, err := mem.Stat("/l2/" + layoutFile); err == nil {
		t.Fatal("a refused expansion wrote a LAYOUT")
	}

	s := mustOpen(t, mem, ecfg)
	spillReadAll(t, s, []int64{1, 2, 3}, 0, 10)
	id := s.StoreID()
	for p, dir := range ecfg.LedgerDirs {
		if l := readLayout(t, mem, dir); l != (layout{index: uint32(p), count: 2, dirs: 3, storeID: id}) {
			t.Fatalf("%s LAYOUT %+v", dir, l)
		}
	}
	// Sharding is unchanged: ledger 4 is in shard 0; with both shard
	// directories full its log goes to the capacity directory.
	s.SetLedgerDirFull(0, true)
	s.SetLedgerDirFull(1, true)
	spillEntries(t, s, []int64{4, 5}, 0, 10)
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	if d := logDirOf(t, s, 4, 0); d != "/l2/entrylogs-shard-0" {
		t.Fatalf("ledger 4 with the shard directories full: %s", d)
	}
	if d := logDirOf(t, s, 5, 0); d != "/l2/entrylogs-shard-1" {
		t.Fatalf("ledger 5 with the shard directories full: %s", d)
	}
	// With every directory full the shards keep writing where they are.
	s.SetLedgerDirFull(2, true)
	spillEntries(t, s, []int64{4}, 10, 20)
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	if d := logDirOf(t, s, 4, 10); d != "/l2/entrylogs-shard-0" {
		t.Fatalf("all full: %s", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen: recorded now, AllowExpansion no longer needed.
	again := ecfg
	again.AllowExpansion = false
	s = mustOpen(t, mem, again)
	spillReadAll(t, s, []int64{1, 2, 3, 5}, 0, 10)
	spillReadAll(t, s, []int64{4}, 0, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Removing the directory from the list is refused: its logs would be
	// lost.
	_, err := Open(mem, cfg)
	if !errors.Is(err, ErrDataLost) || !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "records 3 ledger directories") {
		t.Fatalf("shrink: %v", err)
	}
	// A wiped capacity directory (LAYOUT gone) is lost data.
	if err := mem.Remove("/l2/" + layoutFile); err != nil {
		t.Fatal(err)
	}
	_, err = Open(mem, ecfg)
	var lost *LostError
	if !errors.As(err, &lost) || lost.Path != "/l2/"+layoutFile || !strings.Contains(lost.Evidence, "records 3 ledger directories") {
		t.Fatalf("capacity LAYOUT deleted: %v", err)
	}
}

// TestExpansionRefusesNonEmptyDir: a new directory must be empty but for
// the bookie's cookie.
func TestExpansionRefusesNonEmptyDir(t *testing.T) {
	mem, cfg := expandBase(t)
	ecfg := expanded(cfg)
	if err := mem.MkdirAll("/l2/entrylogs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(mem, "/l2", "VERSION", []byte("cookie")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem, ecfg); !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "/l2 is not empty (it holds entrylogs)") {
		t.Fatalf("non-empty new directory: %v", err)
	}
	if err := mem.RemoveAll("/l2/entrylogs"); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, mem, ecfg) // the cookie alone is fine
	spillReadAll(t, s, []int64{1, 2, 3}, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A LAYOUT of another store is refused too.
	other, ocfg := expandBase(t)
	_ = ocfg
	b, _, err := readSmallFile(other, "/l0/"+layoutFile)
	if err != nil {
		t.Fatal(err)
	}
	mem2, cfg2 := expandBase(t)
	if err := mem2.MkdirAll("/l2", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(mem2, "/l2", layoutFile, b); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem2, expanded(cfg2)); !errors.Is(err, ErrLayout) {
		t.Fatalf("a foreign LAYOUT in the new directory: %v", err)
	}
	// A store written before store ids has no id to compare with: a
	// LAYOUT at the new position is still refused unless a CHECKPOINT of
	// the store records its id (it would otherwise adopt another store's).
	mem3, cfg3 := expandBase(t)
	makeLegacy(t, mem3, cfg3)
	if err := mem3.MkdirAll("/l2", 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := encodeLayout(layout{index: 2, count: 2, dirs: 3, storeID: goldenID})
	if err := writeFileAtomic(mem3, "/l2", layoutFile, foreign); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem3, expanded(cfg3)); !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "which no CHECKPOINT of this store records") {
		t.Fatalf("a foreign LAYOUT in the new directory of a legacy store: %v", err)
	}
	if err := mem3.Remove("/l2/" + layoutFile); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, mem3, expanded(cfg3)) // the legacy store expands
	defer s.Close()
	spillReadAll(t, s, []int64{1, 2, 3}, 0, 10)
	if l := readLayout(t, mem3, "/l2"); l != (layout{index: 2, count: 2, dirs: 3, storeID: s.StoreID()}) {
		t.Fatalf("legacy store's new LAYOUT %+v", l)
	}
}

// TestExpansionCrash: a crash after any step of the expansion leaves a
// store that opens with the new configuration (completing the expansion)
// and, until an old directory's LAYOUT records the new count, with the
// old one too; after that the old one is refused as lost data, never
// opened without the new directory.
func TestExpansionCrash(t *testing.T) {
	base, cfg := expandBase(t)
	ecfg := expanded(cfg)
	// Count the steps.
	steps := 0
	probe := base.CrashClone(vfs.CrashCloneCfg{})
	pcfg := ecfg
	pcfg.openHook = func(p string) {
		if isLayoutStep(p) {
			steps++
		}
	}
	s := mustOpen(t, probe, pcfg)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if steps != 3 { // the new LAYOUT, then the two old ones
		t.Fatalf("%d expansion steps, want 3", steps)
	}
	for k := range steps {
		t.Run(fmt.Sprint("crash after step ", k), func(t *testing.T) {
			img := base.CrashClone(vfs.CrashCloneCfg{})
			var snap *vfs.MemFS
			var points []string
			n := 0
			hcfg := ecfg
			hcfg.openHook = func(point string) {
				if !isLayoutStep(point) {
					return
				}
				if n == k {
					snap = img.CrashClone(vfs.CrashCloneCfg{})
				}
				if n <= k {
					points = append(points, point)
				}
				n++
			}
			s := mustOpen(t, img, hcfg)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			oldRewritten := false
			for _, p := range points {
				oldRewritten = oldRewritten || p == "layout"
			}
			// The old configuration first (on a copy).
			old := snap.CrashClone(vfs.CrashCloneCfg{})
			so, err := Open(old, cfg)
			switch {
			case !oldRewritten && err != nil:
				t.Fatalf("old configuration before any old LAYOUT changed: %v", err)
			case !oldRewritten:
				spillReadAll(t, so, []int64{1, 2, 3}, 0, 10)
				spillEntries(t, so, []int64{7}, 0, 5)
				if err := so.Close(); err != nil {
					t.Fatal(err)
				}
				// The expansion still completes afterwards.
				snap = old
			case !errors.Is(err, ErrDataLost):
				t.Fatalf("old configuration after an old LAYOUT recorded 3 directories: %v, want ErrDataLost", err)
			}
			s = mustOpen(t, snap, ecfg)
			defer s.Close()
			spillReadAll(t, s, []int64{1, 2, 3}, 0, 10)
			if !oldRewritten {
				spillReadAll(t, s, []int64{7}, 0, 5)
			}
			id := s.StoreID()
			for p, dir := range ecfg.LedgerDirs {
				if l := readLayout(t, snap, dir); l != (layout{index: uint32(p), count: 2, dirs: 3, storeID: id}) {
					t.Fatalf("%s LAYOUT after completing: %+v", dir, l)
				}
			}
		})
	}
}

func isLayoutStep(point string) bool { return point == "expand-added-layout" || point == "layout" }

// TestExpansionInterruptedThenFewer: an expansion by two directories
// crashes after the first one's LAYOUT (which records 4 directories);
// adding only that one afterwards opens: an added directory's LAYOUT is
// not evidence of the store's directory count.
func TestExpansionInterruptedThenFewer(t *testing.T) {
	mem, cfg := expandBase(t)
	two := expanded(cfg)
	two.LedgerDirs = append(two.LedgerDirs, "/l3")
	var snap *vfs.MemFS
	hcfg := two
	hcfg.openHook = func(point string) {
		if point == "expand-added-layout" && snap == nil {
			snap = mem.CrashClone(vfs.CrashCloneCfg{})
		}
	}
	img := mem.CrashClone(vfs.CrashCloneCfg{})
	mem = img
	s := mustOpen(t, img, hcfg)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if l := readLayout(t, snap, "/l2"); l.dirs != 4 {
		t.Fatalf("the snapshot's /l2 LAYOUT %+v, want one recording 4 directories", l)
	}
	s = mustOpen(t, snap, expanded(cfg))
	defer s.Close()
	spillReadAll(t, s, []int64{1, 2, 3}, 0, 10)
	if l := readLayout(t, snap, "/l2"); l.dirs != 3 {
		t.Fatalf("/l2 LAYOUT after adding it alone: %+v", l)
	}
}

// TestSpillSurvivesCrash: a spill directory created by a flush and the log
// in it are durable once the checkpoint that covers them is: after a crash
// (only synced data survives) the entries read back from the spilled log,
// not from journal replay (the checkpoint passed their records).
func TestSpillSurvivesCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	s := mustOpen(t, mem, cfg)
	s.SetLedgerDirFull(0, true)
	spillEntries(t, s, []int64{2, 4}, 0, 10)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if d := logDirOf(t, s, 2, 0); d != "/l1/entrylogs-shard-0" {
		t.Fatalf("ledger 2: %s", d)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, crashed, cfg)
	defer s.Close()
	spillReadAll(t, s, []int64{2, 4}, 0, 10)
	if d := logDirOf(t, s, 4, 9); d != "/l1/entrylogs-shard-0" {
		t.Fatalf("after the crash ledger 4's entries are in %s (replayed?), want the spilled log", d)
	}
}
