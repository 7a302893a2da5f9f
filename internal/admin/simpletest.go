package admin

import (
	"bytes"
	"context"
	"fmt"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
)

// SimpleTestOptions configure SimpleTest (BookKeeper's simpletest flags).
type SimpleTestOptions struct {
	EnsembleSize, WriteQuorum, AckQuorum int
	Entries                              int
	// EntrySize is the payload size in bytes (≥ 1); 0 means 100.
	EntrySize int
	// Keep leaves the ledger in place instead of deleting it.
	Keep bool
	// Progress, if set, is told of each phase ("write", "read") with the
	// entries done so far; called from the caller's goroutine.
	Progress func(phase string, done, total int)
}

// SimpleTestResult is the outcome of SimpleTest; its JSON is simpletest's
// `-o json` document.
type SimpleTestResult struct {
	LedgerID int64 `json:"ledgerId"`
	// Ensemble is the ensemble the ledger was created on (its first
	// segment's bookies).
	Ensemble       []string `json:"ensemble"`
	EntriesWritten int      `json:"entriesWritten"`
	EntriesRead    int      `json:"entriesRead"`
	LastEntryID    int64    `json:"lastEntryId"`
	Deleted        bool     `json:"-"`
}

// simpleTestPayload is entry i's payload: its id in text, padded with a
// fixed pattern to size bytes, so a misplaced entry is detected.
func simpleTestPayload(i, size int) []byte {
	b := []byte(fmt.Sprintf("folio simpletest entry %d ", i))
	for len(b) < size {
		b = append(b, byte('a'+len(b)%26))
	}
	return b[:size]
}

// SimpleTest creates a ledger, appends o.Entries entries (pipelined),
// closes it, opens it again, reads every entry back and compares it, and
// deletes the ledger unless o.Keep, as BookKeeper's simpletest does. On
// failure the result tells how far it got; the ledger is then left in
// place (its id is in the result when it was created) for inspection.
func SimpleTest(ctx context.Context, c *client.Client, md metadata.LedgerManager, o SimpleTestOptions) (SimpleTestResult, error) {
	res := SimpleTestResult{LedgerID: -1, LastEntryID: -1, Ensemble: []string{}}
	if o.EntrySize <= 0 {
		o.EntrySize = 100
	}
	progress := func(phase string, done int) {
		if o.Progress != nil {
			o.Progress(phase, done, o.Entries)
		}
	}
	w, err := c.CreateLedger(ctx, client.LedgerOptions{
		EnsembleSize: o.EnsembleSize, WriteQuorumSize: o.WriteQuorum, AckQuorumSize: o.AckQuorum,
	})
	if err != nil {
		return res, fmt.Errorf("creating the ledger: %w", err)
	}
	res.LedgerID = w.ID()
	// Acknowledgements come in order, so waiting on the futures in order
	// reports progress as entries become durable.
	futures := make([]*client.AppendFuture, o.Entries)
	for i := range futures {
		futures[i] = w.AppendAsync(simpleTestPayload(i, o.EntrySize))
	}
	for i, f := range futures {
		id, err := f.Wait(ctx)
		if err != nil {
			_ = w.Close(ctx)
			return res, fmt.Errorf("ledger %d: appending entry %d: %w", res.LedgerID, i, err)
		}
		if id != int64(i) {
			_ = w.Close(ctx)
			return res, fmt.Errorf("ledger %d: append %d got entry id %d", res.LedgerID, i, id)
		}
		res.EntriesWritten++
		if (i+1)%100 == 0 || i+1 == o.Entries {
			progress("write", i+1)
		}
	}
	if err := w.Close(ctx); err != nil {
		return res, fmt.Errorf("ledger %d: closing: %w", res.LedgerID, err)
	}
	r, err := c.OpenLedger(ctx, res.LedgerID, client.OpenOptions{})
	if err != nil {
		return res, fmt.Errorf("ledger %d: opening to read back: %w", res.LedgerID, err)
	}
	defer r.Close()
	res.LastEntryID, err = r.ReadLastAddConfirmed(ctx)
	if err != nil {
		return res, fmt.Errorf("ledger %d: reading the LAC: %w", res.LedgerID, err)
	}
	if want := int64(o.Entries) - 1; res.LastEntryID != want {
		return res, fmt.Errorf("ledger %d: closed at entry %d, want %d", res.LedgerID, res.LastEntryID, want)
	}
	if o.Entries > 0 {
		for e, err := range r.Entries(ctx, 0, res.LastEntryID) {
			if err != nil {
				return res, fmt.Errorf("ledger %d: reading back: %w", res.LedgerID, err)
			}
			if e.ID != int64(res.EntriesRead) || !bytes.Equal(e.Payload, simpleTestPayload(res.EntriesRead, o.EntrySize)) {
				return res, fmt.Errorf("ledger %d: entry %d read back differs from what was written", res.LedgerID, e.ID)
			}
			res.EntriesRead++
			if res.EntriesRead%100 == 0 || res.EntriesRead == o.Entries {
				progress("read", res.EntriesRead)
			}
		}
	}
	if m, _, err := md.ReadLedger(ctx, res.LedgerID); err == nil && len(m.Ensembles) > 0 {
		for _, b := range m.Ensembles[0].Ensemble {
			res.Ensemble = append(res.Ensemble, string(b))
		}
	}
	if !o.Keep {
		if err := c.DeleteLedger(ctx, res.LedgerID); err != nil {
			return res, fmt.Errorf("ledger %d: deleting: %w", res.LedgerID, err)
		}
		res.Deleted = true
	}
	return res, nil
}
