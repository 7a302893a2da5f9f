package ledgerstore

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
)

// LedgerInfo reports the fence bit and LAC and never changes anything: an
// unfenced ledger stays unfenced (adds still succeed), an unknown ledger
// stays unknown, and the answers survive a reopen.
func TestLedgerInfoIsReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	s := mustOpen(t, fs, cfg)
	if _, err := s.LedgerInfo(7); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("unknown ledger: %v", err)
	}
	if _, err := s.LedgerInfo(-1); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("negative ledger id: %v", err)
	}
	for e := int64(0); e < 5; e++ {
		mustAdd(t, s, 1, e, entryBody(1, e, e-1, 0, 50))
		mustAdd(t, s, 2, e, entryBody(2, e, e-1, 0, 50))
	}
	for range 3 {
		info, err := s.LedgerInfo(1)
		if err != nil {
			t.Fatal(err)
		}
		if info != (storage.LedgerInfo{LastAddConfirmed: 3, LastEntryID: 4}) {
			t.Fatalf("ledger 1: %+v", info)
		}
	}
	// Still open for adds: LedgerInfo did not fence.
	mustAdd(t, s, 1, 5, entryBody(1, 5, 4, 0, 50))
	// Still unknown: LedgerInfo did not create.
	if _, err := s.LedgerInfo(7); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("unknown ledger after LedgerInfo: %v", err)
	}
	if err := s.Ledgers(func(id int64) bool {
		if id == 7 {
			t.Error("LedgerInfo created ledger 7")
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if err := fence(t, s, 2); err != nil {
		t.Fatal(err)
	}
	info, err := s.LedgerInfo(2)
	if err != nil || info != (storage.LedgerInfo{Fenced: true, LastAddConfirmed: 3, LastEntryID: 4}) {
		t.Fatalf("fenced ledger 2: %+v, %v", info, err)
	}
	if err := s.DeleteLedger(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	info, err = s.LedgerInfo(2)
	if err != nil || !info.Fenced || !info.Deleted || info.LastEntryID != -1 {
		t.Fatalf("fenced-and-deleted ledger 2: %+v, %v", info, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, fs, cfg)
	defer s.Close()
	// Reopened: state comes from the index (ledger 1 not loaded yet).
	info, err = s.LedgerInfo(1)
	if err != nil || info != (storage.LedgerInfo{LastAddConfirmed: 4, LastEntryID: 5}) {
		t.Fatalf("ledger 1 after reopen: %+v, %v", info, err)
	}
	info, err = s.LedgerInfo(2)
	if err != nil || !info.Fenced || !info.Deleted {
		t.Fatalf("ledger 2 after reopen: %+v, %v", info, err)
	}
	mustAdd(t, s, 1, 6, entryBody(1, 6, 5, 0, 50))
	if _, err := s.LedgerInfo(7); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("unknown ledger after reopen: %v", err)
	}
}
