package server

import (
	"context"
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// TestOpenStoreFullDirAtStart: a ledger directory that is already full
// when the bookie opens its storage takes no entry log from the start,
// before any disk check (so journal replay and the first flushes spill
// too): openStore hands the verdict to the store's Open.
func TestOpenStoreFullDirAtStart(t *testing.T) {
	cfg := procConfig(t, "")
	cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold = 0.95, 0.9
	ufs := newUsageFS()
	full := CurrentDir(cfg.LedgerDirs[0])
	ufs.setFull(full)
	st, closeSt, err := openStore(&cfg, slog.New(slog.DiscardHandler), nil, ufs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSt(context.Background())
	// Ledger 2 lives in shard 0 (ledger id mod 2), the full directory's.
	const ledger = 2
	body := make([]byte, 16, 300)
	binary.BigEndian.PutUint64(body[0:], ledger)
	binary.BigEndian.PutUint64(body[8:], 0)
	body = append(body, payloadOf(ledger, 0)...)
	done := make(addDone, 1)
	st.AddEntry(ledger, 0, []byte("key"), body, storage.AddOptions{}, done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := st.(*ledgerstore.Store).FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	if in := filesHolding(t, filepath.Join(full, "entrylogs"), payloadOf(ledger, 0)); len(in) > 0 {
		t.Fatalf("entry went to the directory that was full at start: %v", in)
	}
	if in := filesHolding(t, CurrentDir(cfg.LedgerDirs[1]), payloadOf(ledger, 0)); len(in) != 1 {
		t.Fatalf("entry in %v of the other directory, want one entry log", in)
	}
}
