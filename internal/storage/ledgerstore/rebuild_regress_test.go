package ledgerstore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/entrylog"
)

// recordsOf returns the records of the entry log at path, bodies dropped.
func recordsOf(t *testing.T, path string) []entrylog.Record {
	t.Helper()
	var out []entrylog.Record
	err := entrylog.ScanFile(vfs.Default, path, func(r entrylog.Record) error {
		r.Body = nil
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", path, err)
	}
	return out
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func onlyLog(t *testing.T, d string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(d, "entrylogs", "*.log"))
	if len(logs) != 1 {
		t.Fatalf("want one log in %s, have %v", d, logs)
	}
	return logs[0]
}

// Regression (review 2, finding 1): a bit flip in the length field of a
// record in the middle of a sealed, checkpointed entry log makes the record
// claim more bytes than the file holds. That is not a torn tail (verifiable
// records follow it): RebuildIndex must refuse with a DamageError rather
// than drop every later record, whose journal records are long gone (reads
// would answer "no such entry" for acknowledged entries, DESIGN §6).
func TestRebuildRefusesLengthFlipMidLog(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	want := map[int64][]byte{}
	for e := int64(0); e < 40; e++ {
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := onlyLog(t, cfg.LedgerDirs[0])
	recs := recordsOf(t, path)
	st, _ := os.Stat(path)
	// Flip bit 20 of the length field of record 5 (of 40): the header now
	// claims ~1 MiB, more than the 100 KiB left in the file.
	off := recs[5].Offset
	var h [4]byte
	f, _ := os.Open(path)
	f.ReadAt(h[:], off)
	f.Close()
	n := binary.BigEndian.Uint32(h[:]) ^ (1 << 20)
	if int64(n)+24 <= st.Size()-off {
		t.Fatalf("test setup: length %d fits", n)
	}
	binary.BigEndian.PutUint32(h[:], n)
	patch(t, path, off, h[:])
	if err := os.RemoveAll(filepath.Join(cfg.LedgerDirs[0], "index")); err != nil {
		t.Fatal(err)
	}
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{AcceptLostFences: true})
	var de *DamageError
	if !errors.As(err, &de) {
		t.Errorf("RebuildIndex accepted mid-log damage as a torn tail without AcceptDamage: err=%v damage=%+v", err, rep.Damage)
	}
	if err != nil {
		return
	}
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	lost := 0
	for e, b := range want {
		got, err := s.ReadEntry(2, e)
		if err != nil || string(got) != string(b) {
			lost++
			if errors.Is(err, storage.ErrNoEntry) && e == 5 {
				t.Logf("entry %d: %v", e, err)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged, checkpointed entries unreadable after the rebuild (\"no such entry\")", lost, len(want))
	}
}

// Regression (review 2, finding 1): a log whose 32-byte header reads as
// zeros but which holds verified records after it (a zeroed first block;
// not a crash artifact, since createLog syncs the header before any record)
// is damage: RebuildIndex refuses instead of dropping the whole log.
func TestRebuildRefusesZeroedHeaderBeforeRecords(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, 2, e, entryBody(2, e, e-1, 1, 3000))
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
	os.RemoveAll(filepath.Join(cfg.LedgerDirs[0], "index"))
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{AcceptLostFences: true})
	var de *DamageError
	if !errors.As(err, &de) {
		t.Fatalf("RebuildIndex took a log of 20 records with a zeroed header for a torn tail: err=%v damage=%+v", err, rep.Damage)
	}
}

// renameFailFS fails the rename of index.rebuild into place, leaving what a
// crash between the swap's two renames leaves.
type renameFailFS struct{ vfs.FS }

func (f renameFailFS) Rename(a, b string) error {
	if strings.HasSuffix(a, "index.rebuild") {
		return errors.New("injected crash")
	}
	return f.FS.Rename(a, b)
}

// Regression (review 2, finding 4): a crash between "index →
// index.replaced-N" and "index.rebuild → index" left no index; the next
// RebuildIndex deleted the finished index.rebuild and rebuilt without the
// old index, losing every salvaged master key, fence bit and explicit LAC
// (here: ledger 6's master key, and deleted ledger 4 came back). The swap is
// now resumable: the rerun puts the complete index.rebuild in place.
func TestRebuildResumesSwapInterruptedBetweenRenames(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	want := fillStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := RebuildIndex(renameFailFS{vfs.Default}, cfg, RebuildOptions{All: true}); err == nil {
		t.Fatal("injected failure not hit")
	}
	for _, d := range cfg.LedgerDirs[:1] {
		if _, err := os.Stat(filepath.Join(d, "index")); !os.IsNotExist(err) {
			t.Fatalf("setup: index still in place: %v", err)
		}
	}
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Rebuilt {
		t.Logf("rerun: %+v", d)
	}
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	readAll(t, s, want)
	// Ledger dir 0 holds ledgers 2 (fenced), 4 (fenced, then deleted) and
	// 6 (open, key known); the old index, now index.replaced-1, knew all.
	if err := addSync(t, s, 6, 40, entryBody(6, 40, 39, 1, 10), storage.AddOptions{}); err != nil {
		t.Errorf("add to ledger 6 (unfenced, key known to the old index) after the resumed rebuild: %v", err)
	}
	if _, err := s.ReadEntry(4, 0); !errors.Is(err, storage.ErrNoLedger) {
		t.Errorf("fenced-and-deleted ledger 4 after the resumed rebuild: %v, want no such ledger", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.LedgerDirs[0], "index.replaced-1")); err == nil {
		t.Logf("the old index is still in index.replaced-1, unused")
	}
}

// Regression (review 2, finding 3): a ledger fenced on this bookie that
// holds none of its entries here (striping, or fenced before any entry
// arrived): once the journal files with its master-key and fence records
// are checkpointed away and the index is lost, only the metadata knows it.
// RebuildIndex must give every ledger whose ensembles name this bookie
// (RebuildOptions.EnsembleLedgers) a fenced state, so that the old writer's
// next add is refused (DESIGN §6 invariant 3); without the list it refuses.
func TestRebuildFencesEnsembleLedgerWithoutEntries(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(dir)
	s := mustOpen(t, vfs.Default, cfg)
	mustAdd(t, s, 4, 0, entryBody(4, 0, -1, 1, 100)) // create ledger 4 with one entry...
	if err := fence(t, s, 6); err != nil {           // ...and fence ledger 6, which has no entry here
		t.Fatal(err)
	}
	// Roll journal 0 (ledgers 2, 4, 6 use it) well past the fence record.
	for e := int64(0); e < 300; e++ {
		mustAdd(t, s, 2, e, entryBody(2, e, e-1, 1, 3000))
		if e%50 == 49 {
			if err := s.FlushWriteCache(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(cfg.LedgerDirs[0], "index")); err != nil {
		t.Fatal(err)
	}
	if _, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{}); !errors.Is(err, ErrFencesUnknown) {
		t.Fatalf("RebuildIndex without a ledger list or AcceptLostFences: %v, want ErrFencesUnknown", err)
	}
	rep, err := RebuildIndex(vfs.Default, cfg, RebuildOptions{
		EnsembleLedgers: func() ([]int64, error) { return []int64{2, 4, 6, 7}, nil },
		MasterKey:       func(id int64) ([]byte, bool, error) { return masterKey(id), true, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Rebuilt {
		t.Logf("rebuilt %+v", d)
	}
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	if info, err := s.LedgerInfo(6); err != nil || !info.Fenced {
		t.Errorf("ledger 6 after rebuild: %+v, %v (want fenced)", info, err)
	}
	if err := addSync(t, s, 6, 0, entryBody(6, 0, -1, 1, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("the old writer's add to fenced ledger 6 after the rebuild: %v, want ErrFenced", err)
	}
}
