package ledgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/index"
)

// The fixture: ledgers 1..4 spread over both ledger and journal
// directories of testConfig, ten entries each; ledger 3 is fenced.
const (
	fixtureLedgers = 4
	fixtureEntries = 10
	fencedLedger   = 3
)

func populate(t *testing.T, s *Store) {
	t.Helper()
	for l := int64(1); l <= fixtureLedgers; l++ {
		for e := int64(0); e < fixtureEntries; e++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
		}
	}
	if err := fence(t, s, fencedLedger); err != nil {
		t.Fatal(err)
	}
}

// checkPopulated: every fixture entry reads back and the fence holds.
func checkPopulated(t *testing.T, s *Store) {
	t.Helper()
	for l := int64(1); l <= fixtureLedgers; l++ {
		for e := int64(0); e < fixtureEntries; e++ {
			mustRead(t, s, l, e, entryBody(l, e, e-1, 0, 100))
		}
	}
	checkFenced(t, s)
}

func checkFenced(t *testing.T, s *Store) {
	t.Helper()
	e := int64(fixtureEntries + 100)
	if err := addSync(t, s, fencedLedger, e, entryBody(fencedLedger, e, e-1, 0, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("normal add to fenced ledger %d: %v, want ErrFenced (the fence was lost)", fencedLedger, err)
	}
}

// populated returns a closed store holding the fixture (entry logs written,
// checkpoints recorded).
func populated(t *testing.T) (*vfs.MemFS, Config) {
	t.Helper()
	mem, cfg := vfs.NewCrashableMem(), testConfig()
	s := mustOpen(t, mem, cfg)
	populate(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, cfg
}

// tree lists every file and directory under the roots with its size, to
// show that a refused Open changed nothing. With skipPebble, the files
// inside an index directory are left out (opening a Pebble database
// rewrites its manifest and options files, which changes no data).
func tree(t *testing.T, fs vfs.FS, skipPebble bool, roots ...string) []string {
	t.Helper()
	var out []string
	var walk func(string)
	walk = func(p string) {
		fi, err := fs.Stat(p)
		if err != nil {
			return
		}
		if !fi.IsDir() {
			out = append(out, fmt.Sprintf("%s %d", p, fi.Size()))
			return
		}
		out = append(out, p+"/")
		if skipPebble && strings.HasSuffix(p, "/index") {
			return
		}
		names, err := fs.List(p)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		for _, n := range names {
			walk(fs.PathJoin(p, n))
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

func allDirs(cfg Config) []string { return append(slices.Clone(cfg.JournalDirs), cfg.LedgerDirs...) }

// openRefused opens, expects a *LostError for path whose message carries
// the wanted phrases, and checks that the refused Open changed no file.
func openRefused(t *testing.T, fs vfs.FS, cfg Config, path string, want ...string) *LostError {
	t.Helper()
	return openRefusedTree(t, fs, cfg, false, path, want...)
}

// openRefusedUnstamped is openRefused for a refusal that comes after the
// indexes were opened (an index without a stamp).
func openRefusedUnstamped(t *testing.T, fs vfs.FS, cfg Config, path string, want ...string) *LostError {
	t.Helper()
	return openRefusedTree(t, fs, cfg, true, path, want...)
}

func openRefusedTree(t *testing.T, fs vfs.FS, cfg Config, skipPebble bool, path string, want ...string) *LostError {
	t.Helper()
	before := tree(t, fs, skipPebble, allDirs(cfg)...)
	s, err := Open(fs, cfg)
	if err == nil {
		s.Close()
		t.Fatalf("Open succeeded; want it refused because %s is lost", path)
	}
	var le *LostError
	if !errors.As(err, &le) || !errors.Is(err, ErrDataLost) {
		t.Fatalf("Open: %v; want a *LostError", err)
	}
	if le.Path != path {
		t.Fatalf("LostError names %s, want %s: %v", le.Path, path, err)
	}
	for _, w := range append([]string{path, "refusing to open", "no such entry", "AutoRecovery", "bookieformat"}, want...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if after := tree(t, fs, skipPebble, allDirs(cfg)...); !slices.Equal(before, after) {
		t.Fatalf("a refused Open changed the directories:\nbefore %v\nafter  %v", before, after)
	}
	return le
}

func removeAll(t *testing.T, fs vfs.FS, path string) {
	t.Helper()
	if err := fs.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, fs vfs.FS, from, to string) {
	t.Helper()
	if err := fs.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestLostIndexIsRefused: removing only a ledger directory's index/ (entry
// logs, LAYOUT, CHECKPOINTs left in place), emptying it, or replacing it
// with a fresh index is refused, naming the path; putting the original
// back opens the store with every entry and the fence.
func TestLostIndexIsRefused(t *testing.T) {
	mem, cfg := populated(t)
	lost := "/l1/index"
	rename(t, mem, lost, "/saved")
	t.Logf("message: %v", openRefused(t, mem, cfg, lost, "is missing", "/l1/LAYOUT records store id"))

	if err := mem.MkdirAll(lost, 0o755); err != nil {
		t.Fatal(err)
	}
	openRefused(t, mem, cfg, lost, "is missing", "/l1/LAYOUT records store id")

	removeAll(t, mem, lost)
	fresh, err := index.Open(mem, lost, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Close()
	openRefusedUnstamped(t, mem, cfg, lost, "carries no store id")

	removeAll(t, mem, lost)
	rename(t, mem, "/saved", lost)
	s := mustOpen(t, mem, cfg)
	checkPopulated(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLostCheckpointIsRefused: a journal directory without its CHECKPOINT
// (deleted alone, the whole directory wiped, or an id-less copy put back)
// is refused; the original opens.
func TestLostCheckpointIsRefused(t *testing.T) {
	mem, cfg := populated(t)
	path := "/j1/CHECKPOINT"
	rename(t, mem, path, "/saved")
	err := openRefused(t, mem, cfg, path, "CHECKPOINT is missing", "journal files")
	t.Logf("message: %v", err)

	// Without journal files too (a wiped journal directory): the LAYOUT's
	// store id is the evidence.
	removeAll(t, mem, "/j1")
	openRefused(t, mem, cfg, path, "CHECKPOINT is missing", "/l0/LAYOUT records store id")
	if err := mem.MkdirAll("/j1", 0o755); err != nil {
		t.Fatal(err)
	}
	openRefused(t, mem, cfg, path, "CHECKPOINT is missing")

	// A version 1 CHECKPOINT (an old copy) in a stamped store.
	writeV1(t, mem, "/j1", checkpointFile, encodeCheckpointV1(checkpoint{journalIndex: 1, journalCount: 2, ledgerDirCount: 2}))
	openRefused(t, mem, cfg, path, "carries no store id")

}

// TestSwappedDirectoriesAreRefused: a journal directory of another store,
// and indexes swapped between ledger directories, are layout errors.
func TestSwappedDirectoriesAreRefused(t *testing.T) {
	mem, cfg := populated(t)
	other, _ := populated(t)
	removeAll(t, mem, "/j1")
	copyTree(t, other, mem, "/j1")
	if _, err := Open(mem, cfg); !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "different stores") {
		t.Fatalf("journal directory of another store: %v", err)
	}

	mem, cfg = populated(t)
	rename(t, mem, "/l0/index", "/l0/index.tmp")
	rename(t, mem, "/l1/index", "/l0/index")
	rename(t, mem, "/l0/index.tmp", "/l1/index")
	if _, err := Open(mem, cfg); !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "/l0/index belongs to ledger directory 1 of 2") {
		t.Fatalf("swapped indexes: %v", err)
	}
}

// copyTree copies dir from one file system to another.
func copyTree(t *testing.T, from, to vfs.FS, dir string) {
	t.Helper()
	if err := to.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := from.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := from.PathJoin(dir, n)
		fi, err := from.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			copyTree(t, from, to, p)
			continue
		}
		src, err := from.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := to.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		if err := dst.Sync(); err != nil {
			t.Fatal(err)
		}
		dst.Close()
	}
}

// TestLostLayoutIsRepaired: a LAYOUT holds no data; a deleted one is
// rewritten from the index stamp.
func TestLostLayoutIsRepaired(t *testing.T) {
	mem, cfg := populated(t)
	removeAll(t, mem, "/l1/LAYOUT")
	s := mustOpen(t, mem, cfg)
	checkPopulated(t, s)
	id := s.StoreID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkStamped(t, mem, cfg, id)
}

// checkStamped: every LAYOUT, CHECKPOINT and index stamp carries id.
func checkStamped(t *testing.T, fs vfs.FS, cfg Config, id StoreID) {
	t.Helper()
	if id == (StoreID{}) {
		t.Fatal("zero store id")
	}
	for i, dir := range cfg.LedgerDirs {
		path := fs.PathJoin(dir, layoutFile)
		b, ok, err := readSmallFile(fs, path)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", path, ok, err)
		}
		l, err := decodeLayout(path, b)
		if err != nil || l != (layout{index: uint32(i), count: uint32(len(cfg.LedgerDirs)), dirs: uint32(len(cfg.LedgerDirs)), storeID: id}) {
			t.Fatalf("%s: %+v %v, want store id %s", path, l, err, id)
		}
		ix, err := index.Open(fs, fs.PathJoin(dir, "index"), index.Options{MustExist: true})
		if err != nil {
			t.Fatal(err)
		}
		st, ok, err := ix.Stamp()
		ix.Close()
		if err != nil || !ok || st != (index.Stamp{StoreID: id, Shard: uint32(i), Shards: uint32(len(cfg.LedgerDirs))}) {
			t.Fatalf("stamp of %s: %+v %v %v", dir, st, ok, err)
		}
	}
	for i, dir := range cfg.JournalDirs {
		path := fs.PathJoin(dir, checkpointFile)
		b, ok, err := readSmallFile(fs, path)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", path, ok, err)
		}
		c, err := decodeCheckpoint(path, b)
		if err != nil || c.storeID != id || c.journalIndex != uint32(i) {
			t.Fatalf("%s: %+v %v, want store id %s", path, c, err, id)
		}
	}
}

// encodeCheckpointV1 and encodeLayoutV1 write version 1 files exactly as
// Folio did before store ids (pinned by TestStoreFilesGolden).
func encodeCheckpointV1(c checkpoint) []byte {
	b := []byte(checkpointMagic)
	b = binary.BigEndian.AppendUint32(b, fileVersionLegacy)
	b = binary.BigEndian.AppendUint32(b, c.journalIndex)
	b = binary.BigEndian.AppendUint32(b, c.journalCount)
	b = binary.BigEndian.AppendUint32(b, c.ledgerDirCount)
	b = binary.BigEndian.AppendUint64(b, c.pos.File)
	b = binary.BigEndian.AppendUint64(b, uint64(c.pos.Offset))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func encodeLayoutV1(index, count uint32) []byte {
	b := []byte(layoutMagic)
	b = binary.BigEndian.AppendUint32(b, fileVersionLegacy)
	b = binary.BigEndian.AppendUint32(b, index)
	b = binary.BigEndian.AppendUint32(b, count)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// encodeLayoutV2 writes a version 2 LAYOUT exactly as Folio did before
// capacity directories (pinned by TestStoreFilesGolden).
func encodeLayoutV2(index, count uint32, id StoreID) []byte {
	b := []byte(layoutMagic)
	b = binary.BigEndian.AppendUint32(b, fileVersion)
	b = binary.BigEndian.AppendUint32(b, index)
	b = binary.BigEndian.AppendUint32(b, count)
	b = append(b, id[:]...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func writeV1(t *testing.T, fs vfs.FS, dir, name string, data []byte) {
	t.Helper()
	if err := writeFileAtomic(fs, dir, name, data); err != nil {
		t.Fatal(err)
	}
}

// makeLegacy turns a closed store into what Folio wrote before store ids:
// version 1 LAYOUT and CHECKPOINT files (positions kept) and indexes
// without a stamp.
func makeLegacy(t *testing.T, fs vfs.FS, cfg Config) {
	t.Helper()
	nl, nj := uint32(len(cfg.LedgerDirs)), uint32(len(cfg.JournalDirs))
	for i, dir := range cfg.LedgerDirs {
		if _, err := fs.Stat(fs.PathJoin(dir, layoutFile)); err == nil {
			writeV1(t, fs, dir, layoutFile, encodeLayoutV1(uint32(i), nl))
		}
		ixDir := fs.PathJoin(dir, "index")
		if _, err := fs.Stat(ixDir); err != nil {
			continue
		}
		db, err := pebble.Open(ixDir, &pebble.Options{FS: fs, ErrorIfNotExists: true, Logger: quietPebble{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Delete([]byte("mstamp"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		ix, err := index.Open(fs, ixDir, index.Options{MustExist: true})
		if err != nil {
			t.Fatal(err)
		}
		_, ok, err := ix.Stamp()
		ix.Close()
		if ok || err != nil {
			t.Fatalf("the stamp of %s survived its deletion (%v): makeLegacy deletes the wrong key", ixDir, err)
		}
	}
	for i, dir := range cfg.JournalDirs {
		path := fs.PathJoin(dir, checkpointFile)
		b, ok, err := readSmallFile(fs, path)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		c, err := decodeCheckpoint(path, b)
		if err != nil {
			t.Fatal(err)
		}
		writeV1(t, fs, dir, checkpointFile, encodeCheckpointV1(checkpoint{journalIndex: uint32(i), journalCount: nj, ledgerDirCount: nl, pos: c.pos}))
	}
}

// TestUpgradeFromLegacyStore: a store written before store ids opens with
// its entries and fences, is stamped by that open, and from then on a lost
// index is refused on the store-id evidence.
func TestUpgradeFromLegacyStore(t *testing.T) {
	mem, cfg := populated(t)
	makeLegacy(t, mem, cfg)
	s := mustOpen(t, mem, cfg)
	checkPopulated(t, s)
	id := s.StoreID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkStamped(t, mem, cfg, id)
	s = mustOpen(t, mem, cfg)
	if s.StoreID() != id {
		t.Fatalf("store id changed across a reopen: %s, then %s", id, s.StoreID())
	}
	s.Close()

	// Now the loss of an index that never got an entry log is caught too.
	cfg4 := testConfig()
	cfg4.LedgerDirs = []string{"/l0", "/l1", "/l2", "/l3"}
	cfg4.JournalDirs = []string{"/j0"}
	mem = vfs.NewMem()
	s = mustOpen(t, mem, cfg4)
	mustAdd(t, s, 4, 0, entryBody(4, 0, -1, 0, 10)) // shard 0 only
	s.Close()
	removeAll(t, mem, "/l3/index")
	openRefused(t, mem, cfg4, "/l3/index", "/l3/LAYOUT records store id")
}

// TestLostDataInLegacyStore: in a store written before store ids, entry
// logs prove that their index existed, journal files that their
// CHECKPOINT existed, and a non-zero checkpoint that every index existed.
func TestLostDataInLegacyStore(t *testing.T) {
	mem, cfg := populated(t)
	makeLegacy(t, mem, cfg)
	removeAll(t, mem, "/l0/index")
	openRefused(t, mem, cfg, "/l0/index", "/l0/entrylogs holds entry logs")

	mem, cfg = populated(t)
	makeLegacy(t, mem, cfg)
	removeAll(t, mem, "/j0/CHECKPOINT")
	openRefused(t, mem, cfg, "/j0/CHECKPOINT", "/j0 holds journal files")

	// A shard that never flushed: the checkpoint is the evidence.
	cfg4 := testConfig()
	cfg4.LedgerDirs = []string{"/l0", "/l1", "/l2", "/l3"}
	cfg4.JournalDirs = []string{"/j0"}
	mem = vfs.NewMem()
	s := mustOpen(t, mem, cfg4)
	mustAdd(t, s, 4, 0, entryBody(4, 0, -1, 0, 10))
	s.Close()
	makeLegacy(t, mem, cfg4)
	removeAll(t, mem, "/l3/index")
	openRefused(t, mem, cfg4, "/l3/index", "/j0/CHECKPOINT records a checkpoint")
}

// TestLegacyIndexLossBeforeAnyCheckpointOpens: absence alone is not
// evidence. A legacy store that crashed before its first checkpoint and
// flush has every record in its journal, so an index missing then is
// rebuilt by replay, losing nothing.
func TestLegacyIndexLossBeforeAnyCheckpointOpens(t *testing.T) {
	mem, cfg := vfs.NewCrashableMem(), testConfig()
	s := mustOpen(t, mem, cfg)
	populate(t, s)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	for _, dir := range cfg.LedgerDirs {
		if has, err := entrylog.HasLogs(crashed, dir+"/entrylogs"); has || err != nil {
			t.Fatalf("entry logs were written before the crash (%v): the test needs a store that never flushed", err)
		}
	}
	makeLegacy(t, crashed, cfg)
	removeAll(t, crashed, "/l1/index")
	s = mustOpen(t, crashed, cfg)
	defer s.Close()
	checkPopulated(t, s)
}

// TestCrashBeforeFirstCheckpointStarts: a new store that acknowledged adds
// and a fence and crashed before its first checkpoint (journal synced,
// nothing else) opens, with the entries and the fence.
func TestCrashBeforeFirstCheckpointStarts(t *testing.T) {
	for _, pct := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced=%d%%", pct), func(t *testing.T) {
			mem, cfg := vfs.NewCrashableMem(), testConfig()
			s := mustOpen(t, mem, cfg)
			populate(t, s)
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: newRand(uint64(pct))})
			s.Close()
			s = mustOpen(t, crashed, cfg)
			checkPopulated(t, s)
			id := s.StoreID()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkStamped(t, crashed, cfg, id)
		})
	}
}

// TestCrashDuringFirstOpen crash-clones before every sync of a new store's
// first Open, and of a legacy store's upgrading Open, keeping none, half
// (outside Pebble's directories) or all unsynced data: every clone opens
// (no false "lost"), with the legacy store's entries and fence, and ends
// fully stamped.
func TestCrashDuringFirstOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool
	}{{"new", false}, {"upgrade", true}} {
		t.Run(tc.name, func(t *testing.T) {
			prepare := func() (*vfs.MemFS, Config) {
				if !tc.legacy {
					return vfs.NewCrashableMem(), testConfig()
				}
				mem, cfg := populated(t)
				makeLegacy(t, mem, cfg)
				return mem, cfg
			}
			// Count the sync points, then crash at each in turn.
			mem, cfg := prepare()
			var syncs atomic.Int64
			s := mustOpen(t, errorfsWrapSyncs(mem, func(string) { syncs.Add(1) }), cfg)
			s.Close()
			if syncs.Load() < 10 {
				t.Fatalf("only %d syncs in the first Open", syncs.Load())
			}
			partial := 0
			for k := 0; k < int(syncs.Load()); k++ {
				for _, pct := range []int{0, 50, 100} {
					mem, cfg := prepare()
					var crashed *vfs.MemFS
					var where string
					n := 0
					var mu sync.Mutex
					fs := errorfsWrapSyncs(mem, func(path string) {
						mu.Lock()
						defer mu.Unlock()
						if n == k {
							where = path
							// A random subset of unsynced directory entries
							// inside Pebble's directory can keep its manifest
							// marker without the manifest it names, which
							// Pebble cannot open (its own crash model, not the
							// store's); crash there with none or all kept.
							if pct == 50 && strings.Contains(path, "/index") {
								pct = 100
							}
							crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: newRand(uint64(k))})
						}
						n++
					})
					s, err := Open(fs, cfg)
					if err != nil {
						t.Fatal(err)
					}
					s.Close()
					if crashed == nil { // fewer syncs this time: crash after the last
						crashed, where = mem.CrashClone(vfs.CrashCloneCfg{}), "end"
					}
					if pct == 50 {
						partial++
					}
					s, err = Open(crashed, cfg)
					if err != nil {
						t.Fatalf("crash before sync %d (%s), %d%% unsynced kept: reopen: %v", k, where, pct, err)
					}
					if tc.legacy {
						checkPopulated(t, s)
					}
					id := s.StoreID()
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					checkStamped(t, crashed, cfg, id)
				}
			}
			t.Logf("%d sync points, each crashed with none and all of the unsynced data kept, %d of them (outside Pebble) also with half", syncs.Load(), partial)
		})
	}
}

// TestFenceSurvivesEveryAcceptedRestart: a fenced ledger stays fenced
// across every restart Open accepts (clean, crash, upgrade, repaired
// LAYOUT, a refused restart and the restored directory).
func TestFenceSurvivesEveryAcceptedRestart(t *testing.T) {
	mem, cfg := vfs.NewCrashableMem(), testConfig()
	s := mustOpen(t, mem, cfg)
	populate(t, s)
	reopen := func(how string, fs vfs.FS) {
		t.Helper()
		var err error
		if s, err = Open(fs, cfg); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		checkPopulated(t, s)
	}
	// Crash before any checkpoint (the fence only in the journal).
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	mem = crashed
	reopen("crash before the first checkpoint", mem)
	s.Close()
	reopen("clean restart", mem)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: newRand(7)})
	s.Close()
	mem = crashed
	reopen("crash after a checkpoint", mem)
	s.Close()
	makeLegacy(t, mem, cfg)
	reopen("upgrade from a legacy store", mem)
	s.Close()
	removeAll(t, mem, "/l1/LAYOUT")
	reopen("LAYOUT repaired", mem)
	s.Close()
	rename(t, mem, "/l1/index", "/saved")
	openRefused(t, mem, cfg, "/l1/index")
	rename(t, mem, "/saved", "/l1/index")
	reopen("index restored after a refused start", mem)
	s.Close()
}

// errorfsWrapSyncs calls before(path) just before every file or directory
// sync on mem.
func errorfsWrapSyncs(mem *vfs.MemFS, before func(path string)) vfs.FS {
	return errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			before(op.Path)
		}
		return nil
	}))
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
