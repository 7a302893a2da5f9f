package bookie

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// The semantic tests also run against the real storage engine on an
// in-memory file system.
func init() {
	storeFactories = append(storeFactories, storeFactory{"ledgerstore", newTestLedgerStore})
}

func newTestLedgerStore(t *testing.T) storage.Store {
	t.Helper()
	s, err := ledgerstore.Open(vfs.NewMem(), ledgerstore.Config{
		JournalDirs:          []string{"/journal"},
		LedgerDirs:           []string{"/ledgers0", "/ledgers1"},
		Clock:                clock.Real{},
		WriteCacheBytes:      4 << 20,
		ReadCacheBytes:       1 << 20,
		IndexCacheBytes:      1 << 20,
		MaxEntryLogBytes:     1 << 20,
		JournalPreallocBytes: 64 << 10,
		JournalMaxFileBytes:  1 << 20,
		Manual:               true,
	})
	if err != nil {
		t.Fatalf("ledgerstore.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("ledgerstore.Close: %v", err)
		}
	})
	return s
}
