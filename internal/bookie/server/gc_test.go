package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// gcStore opens a real ledgerstore on a temporary directory.
func gcStore(t *testing.T) *ledgerstore.Store {
	t.Helper()
	dir := t.TempDir()
	st, err := ledgerstore.Open(vfs.Default, ledgerstore.Config{
		JournalDirs: []string{dir + "/journal"}, LedgerDirs: []string{dir + "/ledgers"}, Clock: clock.Real{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type addDone chan error

func (d addDone) AddComplete(err error) { d <- err }

var gcPassword = []byte("pw")

// gcAdd stores entries 0..n-1 of a ledger and waits until they are durable.
func gcAdd(t *testing.T, st storage.Store, ledgerID int64, n int) {
	t.Helper()
	dg, err := digest.New(digest.CRC32C, gcPassword)
	if err != nil {
		t.Fatal(err)
	}
	mk := digest.MasterKey(gcPassword)
	for e := int64(0); e < int64(n); e++ {
		body := dg.AppendEntry(nil, ledgerID, e, e-1, 5*(e+1), []byte("entry"))
		done := make(addDone, 1)
		st.AddEntry(ledgerID, e, mk[:], body, storage.AddOptions{}, done)
		if err := <-done; err != nil {
			t.Fatalf("add %d/%d: %v", ledgerID, e, err)
		}
	}
}

func gcMetadata(t *testing.T) (*memory.Store, *memory.Driver) {
	t.Helper()
	ms := memory.NewStore(memory.Options{})
	d := ms.Open()
	t.Cleanup(func() { d.Close() })
	if _, err := d.InitNewCluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ms, d
}

func gcCreate(t *testing.T, d metadata.LedgerManager, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if _, err := d.CreateLedgerMetadata(context.Background(), id, metadatatest.NewLedgerMetadata(3, 2, 2)); err != nil {
			t.Fatal(err)
		}
	}
}

func held(t *testing.T, st storage.Store) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	if err := st.Ledgers(func(id int64) bool { out[id] = true; return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGCDeletesLedgersWhoseMetadataIsGone(t *testing.T) {
	st := gcStore(t)
	_, md := gcMetadata(t)
	gcCreate(t, md, 1, 2)
	gcAdd(t, st, 1, 3)
	gcAdd(t, st, 2, 3)
	gcAdd(t, st, 3, 2) // no metadata at all: garbage
	if err := md.DeleteLedger(context.Background(), 2, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	gc := NewGC(st, md, time.Hour, nil, slog.Default())
	res := gc.RunOnce(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Deleted) != 2 || res.Deleted[0] != 2 || res.Deleted[1] != 3 {
		t.Fatalf("deleted %v, want [2 3]", res.Deleted)
	}
	for _, id := range []int64{2, 3} {
		if _, err := st.ReadEntry(id, 0); !errors.Is(err, storage.ErrNoLedger) {
			t.Errorf("ledger %d entry 0 after GC: %v, want ErrNoLedger", id, err)
		}
	}
	for e := int64(0); e < 3; e++ {
		if _, err := st.ReadEntry(1, e); err != nil {
			t.Errorf("live ledger 1 entry %d: %v", e, err)
		}
	}
	if h := held(t, st); !h[1] || h[2] || h[3] {
		t.Errorf("store holds %v after GC", h)
	}
}

func TestGCFailedListingDeletesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   memory.Op
	}{
		{"listing fails", memory.OpListLedgers},
		{"re-read fails", memory.OpReadLedger},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := gcStore(t)
			ms, md := gcMetadata(t)
			gcAdd(t, st, 7, 2) // no metadata: a candidate
			ms.SetHook(memory.FailOps(map[memory.Op]error{tc.op: errors.New("injected: store unreachable")}))
			gc := NewGC(st, md, time.Hour, nil, slog.Default())
			res := gc.RunOnce(context.Background())
			if res.Err == nil {
				t.Fatal("pass succeeded despite the failure")
			}
			if len(res.Deleted) != 0 || !held(t, st)[7] {
				t.Fatalf("deleted %v on a failed pass", res.Deleted)
			}
			if _, err := st.ReadEntry(7, 1); err != nil {
				t.Fatalf("entry lost: %v", err)
			}
			// Once the store answers again, the next pass collects.
			ms.SetHook(nil)
			if res := gc.RunOnce(context.Background()); res.Err != nil || len(res.Deleted) != 1 {
				t.Fatalf("second pass: %+v", res)
			}
		})
	}
}

// racingLister creates ledgers as the GC pass's listing ends: one whose
// metadata appears after the listing passed its key, one whose first entry
// reaches the bookie after the pass took its snapshot of the store.
type racingLister struct {
	metadata.LedgerManager
	after func()
	once  bool
}

func (r *racingLister) ListLedgers(ctx context.Context, start int64, limit int) ([]int64, error) {
	ids, err := r.LedgerManager.ListLedgers(ctx, start, limit)
	if len(ids) == 0 && !r.once { // the listing just ended
		r.once = true
		r.after()
	}
	return ids, err
}

func TestGCKeepsLedgersCreatedDuringThePass(t *testing.T) {
	st := gcStore(t)
	_, md := gcMetadata(t)
	gcCreate(t, md, 1)
	gcAdd(t, st, 1, 1)
	gcAdd(t, st, 5, 2) // metadata not yet visible when the listing runs
	lister := &racingLister{LedgerManager: md, after: func() {
		gcCreate(t, md, 5)
		gcAdd(t, st, 6, 1) // a ledger the pass has never seen
	}}
	gc := NewGC(st, lister, time.Hour, nil, slog.Default())
	res := gc.RunOnce(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Deleted) != 0 {
		t.Fatalf("deleted %v", res.Deleted)
	}
	if len(res.Kept) != 1 || res.Kept[0] != 5 {
		t.Fatalf("kept after re-read %v, want [5]", res.Kept)
	}
	if h := held(t, st); !h[1] || !h[5] || !h[6] {
		t.Fatalf("store holds %v", h)
	}
}

func TestGCNeverRunsAtBoot(t *testing.T) {
	st := gcStore(t)
	_, md := gcMetadata(t)
	gcAdd(t, st, 9, 1) // garbage
	clk := clock.NewManual(time.Unix(0, 0))
	gc := NewGC(st, md, time.Hour, clk, slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gc.Run(ctx); close(done) }()
	waitFor(t, "the loop to wait for its first period", func() bool { return clk.Waiters() == 1 })
	if _, n := gc.Last(); n != 0 || !held(t, st)[9] {
		t.Fatal("a pass ran at boot")
	}
	clk.Advance(time.Hour)
	// The second wait begins after the first pass.
	waitFor(t, "one pass and the next wait", func() bool {
		_, n := gc.Last()
		return n == 1 && clk.Waiters() == 1
	})
	if res, n := gc.Last(); n != 1 || len(res.Deleted) != 1 {
		t.Fatalf("after one period: %d passes, %+v", n, res)
	}
	cancel()
	<-done
}
