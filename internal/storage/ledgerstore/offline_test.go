package ledgerstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
)

// diskConfig is testConfig on real directories under dir.
func diskConfig(dir string) Config {
	cfg := testConfig()
	cfg.JournalDirs = []string{filepath.Join(dir, "j0"), filepath.Join(dir, "j1")}
	cfg.LedgerDirs = []string{filepath.Join(dir, "l0"), filepath.Join(dir, "l1")}
	return cfg
}

// fillStore writes ledgers 1..6 (entries of several KiB, so that the logs
// roll over), fences ledger 2, sets an explicit LAC on ledger 3, deletes
// ledger 4 after fencing it and ledger 5 without, and returns every entry
// that must read back.
func fillStore(t *testing.T, s *Store) map[[2]int64][]byte {
	t.Helper()
	want := map[[2]int64][]byte{}
	for l := int64(1); l <= 6; l++ {
		for e := int64(0); e < 40; e++ {
			b := entryBody(l, e, e-1, 1, 3000+int(e)*17)
			mustAdd(t, s, l, e, b)
			want[[2]int64{l, e}] = b
		}
		if err := s.FlushWriteCache(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fence(t, s, 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lac := entryBody(3, 0, 0, 0, 0)[:16]
	if err := s.SetExplicitLAC(ctx, 3, masterKey(3), append(lac, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if err := fence(t, s, 4); err != nil {
		t.Fatal(err)
	}
	for _, l := range []int64{4, 5} {
		if err := s.DeleteLedger(ctx, l); err != nil {
			t.Fatal(err)
		}
		for e := int64(0); e < 40; e++ {
			delete(want, [2]int64{l, e})
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return want
}

func readAll(t *testing.T, s *Store, want map[[2]int64][]byte) {
	t.Helper()
	for k, b := range want {
		mustRead(t, s, k[0], k[1], b)
	}
}

// TestRebuildIndexLostIndex: a store whose indexes were deleted refuses to
// open; rebuilt from the entry logs, it opens and serves every entry it
// held, keeps deleted ledgers deleted, and refuses adds to ledgers whose
// fence state was lost.
func TestRebuildIndexLostIndex(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	want := fillStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range cfg.LedgerDirs {
		if err := os.RemoveAll(filepath.Join(d, "index")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(vfs.Default, cfg); !errors.Is(err, ErrDataLost) {
		t.Fatalf("Open without indexes: %v, want ErrDataLost", err)
	}
	// The master keys the journals no longer hold come from the callback
	// (the shell's: the ledger metadata's password), except ledger 1's.
	asked := map[int64]bool{}
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{AcceptLostFences: true, MasterKey: func(id int64) ([]byte, bool, error) {
		asked[id] = true
		return masterKey(id), id != 1, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !asked[1] {
		t.Fatalf("the callback was not asked for ledger 1's key: %v", asked)
	}
	if len(rep.Rebuilt) != 2 || len(rep.Skipped) != 0 || len(rep.Damage) != 0 {
		t.Fatalf("report %+v", rep)
	}
	var entries int64
	for _, d := range rep.Rebuilt {
		t.Logf("rebuilt %+v", d)
		entries += d.Entries
		if d.Why != "the index is missing" || d.OldIndex != "" || d.LogsScanned == 0 {
			t.Fatalf("rebuilt %+v", d)
		}
	}
	// Deleted ledgers' records are still in the logs (no GC ran): without
	// the old index they come back, fenced, until the bookie's GC finds
	// their metadata gone; the rest reads back exactly.
	if entries < int64(len(want)) {
		t.Fatalf("indexed %d entries, want at least %d", entries, len(want))
	}
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	readAll(t, s, want)
	for l := int64(1); l <= 6; l++ {
		last, err := s.LastAddConfirmed(l)
		if err != nil || last < 38 {
			t.Fatalf("ledger %d LAC %d, %v", l, last, err)
		}
	}
	// Fence state was lost with the index: every rebuilt ledger without a
	// journaled state is fenced. Ledger 1's key is unknown: its adds are
	// unauthorised; ledger 3 has its key back: fenced, and a recovery
	// (fence with the key, recovery add) works.
	if err := addSync(t, s, 1, 40, entryBody(1, 40, 39, 1, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrUnauthorized) {
		t.Fatalf("add to rebuilt ledger 1 (key unknown): %v, want unauthorised", err)
	}
	if err := addSync(t, s, 3, 40, entryBody(3, 40, 39, 1, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to rebuilt ledger 3: %v, want fenced", err)
	}
	if err := fence(t, s, 3); err != nil {
		t.Fatalf("fence of rebuilt ledger 3 with its key: %v", err)
	}
	if err := addSync(t, s, 3, 40, entryBody(3, 40, 39, 1, 10), storage.AddOptions{Recovery: true}); err != nil {
		t.Fatalf("recovery add to rebuilt ledger 3: %v", err)
	}
	// A new ledger works as usual.
	mustAdd(t, s, 10, 0, entryBody(10, 0, -1, 1, 10))
}

// TestRebuildIndexCorruptIndex: an index that still opens but holds a
// value that does not decode is rebuilt, keeping the states that decode
// (fence bits, explicit LAC, fenced-and-deleted markers), and the old
// index is kept aside.
func TestRebuildIndexKeepsReadableState(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	want := fillStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rebuilt) != 0 || len(rep.Skipped) != 2 {
		t.Fatalf("sound indexes: report %+v", rep)
	}
	rep, err = RebuildIndex(vfs.Default, cfg, RebuildOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Rebuilt {
		if d.OldIndex == "" || d.UnknownKeys != 0 || d.StatesKept == 0 {
			t.Fatalf("rebuilt %+v", d)
		}
	}
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	readAll(t, s, want)
	// Deleted ledgers stay deleted (the old index's listing was complete).
	for _, l := range []int64{4, 5} {
		if _, err := s.ReadEntry(l, 0); !errors.Is(err, storage.ErrNoLedger) {
			t.Fatalf("deleted ledger %d: %v", l, err)
		}
	}
	// Fenced-and-deleted stays fenced; 2 fenced; 1 takes adds; 3 keeps
	// its explicit LAC.
	if err := addSync(t, s, 4, 0, entryBody(4, 0, -1, 1, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced-and-deleted ledger 4: %v", err)
	}
	if err := addSync(t, s, 2, 40, entryBody(2, 40, 39, 1, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced ledger 2: %v", err)
	}
	mustAdd(t, s, 1, 40, entryBody(1, 40, 39, 1, 10))
	if lac, err := s.ExplicitLAC(3); err != nil || !bytes.HasSuffix(lac, []byte{1, 2, 3}) {
		t.Fatalf("explicit LAC of 3: %x, %v", lac, err)
	}
}

// corruptMiddle flips a byte in the middle of the largest entry log of
// ledger directory d and returns its path.
func corruptMiddle(t *testing.T, d string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(d, "entrylogs", "*.log"))
	var path string
	var size int64
	for _, p := range logs {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			path, size = p, st.Size()
		}
	}
	if path == "" {
		t.Fatalf("no entry log in %s", d)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], size/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], size/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRebuildIndexDamagedLog: damage inside an entry log is reported with
// the file and offset and refuses the rebuild (nothing changes); accepted
// explicitly, the entries before the damage are indexed.
func TestRebuildIndexDamagedLog(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	fillStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bad := corruptMiddle(t, cfg.LedgerDirs[1])
	ix := filepath.Join(cfg.LedgerDirs[1], "index")
	if err := os.RemoveAll(ix); err != nil {
		t.Fatal(err)
	}
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{AcceptLostFences: true})
	var de *DamageError
	if !errors.As(err, &de) || len(de.Damage) != 1 || de.Damage[0].File != bad || de.Damage[0].TornTail || de.Damage[0].Remaining <= 0 {
		t.Fatalf("RebuildIndex on a damaged log: %v (%+v)", err, rep)
	}
	if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("error %q", err)
	}
	if _, err := os.Stat(ix); !os.IsNotExist(err) {
		t.Fatalf("the refused rebuild created %s: %v", ix, err)
	}
	rep, err = RebuildIndex(vfs.Default, cfg, RebuildOptions{AcceptDamage: true, AcceptLostFences: true})
	if err != nil || len(rep.Rebuilt) != 1 || len(rep.Damage) != 1 {
		t.Fatalf("accepted damage: %+v, %v", rep, err)
	}
	s = mustOpen(t, vfs.Default, cfg)
	s.Close()
}

// TestCheckConsistency: a sound store has no problems; a damaged record is
// reported with its ledger, entry and location.
func TestCheckConsistency(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	want := fillStore(t, s)
	// While the store is open, the check refuses.
	if _, err := CheckConsistency(vfs.Default, cfg); !errors.Is(err, ErrInUse) {
		t.Fatalf("check while open: %v", err)
	}
	if _, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{All: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("rebuild while open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := CheckConsistency(vfs.Default, cfg)
	if err != nil || len(res.Problems) != 0 || res.Entries != int64(len(want)) {
		t.Fatalf("sound store: %+v, %v (want %d entries)", res, err, len(want))
	}
	bad := corruptMiddle(t, cfg.LedgerDirs[0])
	res, err = CheckConsistency(vfs.Default, cfg)
	if err != nil || len(res.Problems) != 1 {
		t.Fatalf("damaged store: %+v, %v", res, err)
	}
	p := res.Problems[0]
	if p.LedgerID%2 != 0 || p.EntryID < 0 || p.Location.LogID == 0 || !strings.Contains(p.Reason, bad) {
		t.Fatalf("problem %+v", p)
	}
	// A missing index with logs is a problem too.
	if err := os.RemoveAll(filepath.Join(cfg.LedgerDirs[1], "index")); err != nil {
		t.Fatal(err)
	}
	res, _ = CheckConsistency(vfs.Default, cfg)
	if len(res.Problems) != 2 || !strings.Contains(res.Problems[1].Reason, "rebuild-index") {
		t.Fatalf("missing index: %+v", res.Problems)
	}
}

// TestLastMarks reads each journal's checkpoint position.
func TestLastMarks(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	marks, err := LastMarks(vfs.Default, cfg)
	if err != nil || len(marks) != 2 || marks[0].Checkpointed {
		t.Fatalf("new store: %+v, %v", marks, err)
	}
	s := mustOpen(t, vfs.Default, cfg)
	fillStore(t, s)
	marks, err = LastMarks(vfs.Default, cfg)
	s.Close()
	if err != nil || len(marks) != 2 {
		t.Fatalf("%+v, %v", marks, err)
	}
	for _, m := range marks {
		if !m.Checkpointed || m.Position.File == 0 || m.Position.Offset <= 0 {
			t.Fatalf("mark %+v", m)
		}
	}
}
