package ledgerstore

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
)

func TestAddReadFenceReopen(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	s := mustOpen(t, fs, cfg)
	for l := int64(1); l <= 3; l++ {
		for e := int64(0); e < 20; e++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
		}
	}
	mustRead(t, s, 2, 5, entryBody(2, 5, 4, 0, 100))
	mustRead(t, s, 2, -1, entryBody(2, 19, 18, 0, 100))
	if lac, err := s.LastAddConfirmed(2); err != nil || lac != 18 {
		t.Fatalf("LAC = %d, %v; want 18", lac, err)
	}
	if _, err := s.ReadEntry(2, 20); !errors.Is(err, storage.ErrNoEntry) {
		t.Fatalf("read past end: %v, want ErrNoEntry", err)
	}
	if _, err := s.ReadEntry(99, 0); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("read unknown ledger: %v, want ErrNoLedger", err)
	}
	if err := fence(t, s, 3); err != nil {
		t.Fatal(err)
	}
	if err := addSync(t, s, 3, 20, entryBody(3, 20, 19, 0, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced ledger: %v", err)
	}
	if err := addSync(t, s, 3, 20, entryBody(3, 20, 19, 0, 10), storage.AddOptions{Recovery: true}); err != nil {
		t.Fatalf("recovery add to fenced ledger: %v", err)
	}
	r := newResult()
	s.AddEntry(1, 50, []byte("bad"), entryBody(1, 50, 0, 0, 1), storage.AddOptions{}, r)
	if err := r.wait(t); !errors.Is(err, storage.ErrUnauthorized) {
		t.Fatalf("bad key: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, fs, cfg)
	defer s.Close()
	for l := int64(1); l <= 3; l++ {
		for e := int64(0); e < 20; e++ {
			mustRead(t, s, l, e, entryBody(l, e, e-1, 0, 100))
		}
	}
	mustRead(t, s, 3, 20, entryBody(3, 20, 19, 0, 10))
	if err := addSync(t, s, 3, 21, entryBody(3, 21, 20, 0, 10), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced ledger after reopen: %v", err)
	}
	var ids []int64
	if err := s.Entries(1, func(e int64) bool { ids = append(ids, e); return true }); err != nil || len(ids) != 20 {
		t.Fatalf("Entries: %v %v", ids, err)
	}
	var ls []int64
	_ = s.Ledgers(func(l int64) bool { ls = append(ls, l); return true })
	if len(ls) != 3 {
		t.Fatalf("Ledgers: %v", ls)
	}
	if err := s.DeleteLedger(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadEntry(1, 0); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("read deleted: %v", err)
	}
}

// TestManualJournal: with ManualJournal an add completes only when the
// owner steps the journals (the simulator's mode).
func TestManualJournal(t *testing.T) {
	cfg := testConfig()
	cfg.ManualJournal = true
	s := mustOpen(t, vfs.NewMem(), cfg)
	defer s.Close()
	r := newResult()
	s.AddEntry(5, 0, masterKey(5), entryBody(5, 0, -1, 0, 10), storage.AddOptions{}, r)
	select {
	case err := <-r.ch:
		t.Fatalf("add completed (%v) before the journal was stepped", err)
	default:
	}
	if n, err := s.StepJournals(); err != nil || n != 2 { // master key + entry
		t.Fatalf("StepJournals = %d, %v; want 2 records", n, err)
	}
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	mustRead(t, s, 5, 0, entryBody(5, 0, -1, 0, 10))
}
