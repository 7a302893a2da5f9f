package admin

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

func newMemory(t *testing.T) (*memory.Store, metadata.Driver) {
	t.Helper()
	st := memory.NewStore(memory.Options{})
	d := st.Open()
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.InitNewCluster(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, d
}

func ledgerOn(t *testing.T, d metadata.Driver, ensembles ...[]metadata.BookieID) int64 {
	t.Helper()
	m := metadatatest.NewLedgerMetadata(len(ensembles[0]), len(ensembles[0]), len(ensembles[0]))
	m.Ensembles = nil
	for i, e := range ensembles {
		m.Ensembles = append(m.Ensembles, metadata.Segment{FirstEntryID: int64(i * 10), Ensemble: e})
	}
	id, _, err := d.CreateLedger(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestReplaceBookieInLedgers: every ensemble naming the old id is
// rewritten, others are left alone (not even written), a version conflict
// (a writer's ensemble change in between) is re-read and retried without
// losing the writer's change, the limit counts examined ledgers, and a
// second run finds nothing to do.
func TestReplaceBookieInLedgers(t *testing.T) {
	ctx := t.Context()
	st, d := newMemory(t)
	old, nu := metadata.BookieID("10.0.0.1:3181"), metadata.BookieID("10.0.0.9:3181")
	a, b, c := metadata.BookieID("10.0.0.2:3181"), metadata.BookieID("10.0.0.3:3181"), metadata.BookieID("10.0.0.4:3181")
	l1 := ledgerOn(t, d, []metadata.BookieID{old, a, b}, []metadata.BookieID{c, a, old})
	l2 := ledgerOn(t, d, []metadata.BookieID{a, b, c})
	l3 := ledgerOn(t, d, []metadata.BookieID{b, old, c})
	_, v2, _ := d.ReadLedger(ctx, l2)

	// A writer changes l3's ensemble just before our write of it (the
	// second write: l1's comes first, l2 is not written).
	writes, fired := 0, false
	st.SetHook(func(ctx context.Context, op memory.Op, _ string, phase memory.Phase) error {
		if op != memory.OpWriteLedger || phase != memory.Before || fired {
			return nil
		}
		if writes++; writes < 2 {
			return nil
		}
		fired = true
		m, v, err := d.ReadLedger(ctx, l3)
		if err != nil {
			return err
		}
		m.Ensembles = append(m.Ensembles, metadata.Segment{FirstEntryID: 5, Ensemble: []metadata.BookieID{b, old, a}})
		_, err = d.WriteLedger(ctx, l3, m, v)
		return err
	})
	res, err := ReplaceBookieInLedgers(ctx, d, old, nu, ReplaceBookieOptions{UpdatesPerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	st.SetHook(nil)
	if !fired {
		t.Fatal("the conflicting write did not happen")
	}
	if res.Examined != 3 || !slices.Equal(res.Updated, []int64{l1, l3}) {
		t.Fatalf("result %+v, want 3 examined, %d and %d updated", res, l1, l3)
	}
	m1, _, _ := d.ReadLedger(ctx, l1)
	if !slices.Equal(m1.Ensembles[0].Ensemble, []metadata.BookieID{nu, a, b}) || !slices.Equal(m1.Ensembles[1].Ensemble, []metadata.BookieID{c, a, nu}) {
		t.Fatalf("ledger %d: %v", l1, m1.Ensembles)
	}
	m3, _, _ := d.ReadLedger(ctx, l3)
	if len(m3.Ensembles) != 2 || !slices.Equal(m3.Ensembles[1].Ensemble, []metadata.BookieID{b, nu, a}) {
		t.Fatalf("ledger %d lost the writer's change or kept %s: %v", l3, old, m3.Ensembles)
	}
	if _, v, _ := d.ReadLedger(ctx, l2); v != v2 {
		t.Fatalf("ledger %d was written although it does not name %s", l2, old)
	}

	again, err := ReplaceBookieInLedgers(ctx, d, old, nu, ReplaceBookieOptions{UpdatesPerSecond: 1000})
	if err != nil || len(again.Updated) != 0 {
		t.Fatalf("second run: %+v, %v", again, err)
	}
	limited, err := ReplaceBookieInLedgers(ctx, d, nu, old, ReplaceBookieOptions{UpdatesPerSecond: 1000, Limit: 1})
	if err != nil || limited.Examined != 1 || !slices.Equal(limited.Updated, []int64{l1}) {
		t.Fatalf("limit 1: %+v, %v", limited, err)
	}

	// An ensemble that names both ids: refused, naming the ledger.
	l4 := ledgerOn(t, d, []metadata.BookieID{a, b, c})
	if _, err := ReplaceBookieInLedgers(ctx, d, a, b, ReplaceBookieOptions{UpdatesPerSecond: 1000}); err == nil {
		t.Fatalf("replacing %s by %s in ledger %d, which names both, succeeded", a, b, l4)
	}
}

// TestRestoreLedgerMetadata: a dump restores into an absent ledger; over
// an existing one it is refused unless update, which replaces it; bytes that
// are not ledger metadata are refused as corrupt.
func TestRestoreLedgerMetadata(t *testing.T) {
	ctx := t.Context()
	_, d := newMemory(t)
	id := ledgerOn(t, d, []metadata.BookieID{"10.0.0.1:3181", "10.0.0.2:3181"})
	dump, err := DumpLedgerMetadata(ctx, d, id)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := d.ReadLedger(ctx, id)
	if _, err := RestoreLedgerMetadata(ctx, d, id, dump, false); !errors.Is(err, metadata.ErrLedgerExists) {
		t.Fatalf("restore over existing metadata: %v", err)
	}
	res, err := RestoreLedgerMetadata(ctx, d, id, dump, true)
	if err != nil || res.Created {
		t.Fatalf("restore --update: %+v, %v", res, err)
	}
	if err := d.DeleteLedger(ctx, id, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	res, err = RestoreLedgerMetadata(ctx, d, id, dump, false)
	if err != nil || !res.Created {
		t.Fatalf("restore into an absent ledger: %+v, %v", res, err)
	}
	if got, _, err := d.ReadLedger(ctx, id); err != nil || !got.Equal(want) {
		t.Fatalf("restored %+v (%v), want %+v", got, err, want)
	}
	if _, err := RestoreLedgerMetadata(ctx, d, id+1, []byte("not metadata"), false); !errors.Is(err, metadata.ErrCorruptMetadata) {
		t.Fatalf("restore of garbage: %v", err)
	}
	if _, err := DumpLedgerMetadata(ctx, d, id+1); !errors.Is(err, metadata.ErrNoSuchLedger) {
		t.Fatalf("dump of an absent ledger: %v", err)
	}
}
