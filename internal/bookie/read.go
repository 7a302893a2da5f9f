package bookie

import (
	"fmt"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/wire"
)

// isLongPoll: a READ with previousLAC set and no fence flag is a long-poll
// read (RequestUtils.isLongPollReadRequest). Only v3 can carry it.
func isLongPoll(r *wire.ReadRequest) bool {
	return r.HasPreviousLAC && r.Flag != wire.ReadFlagFenceLedger
}

// read serves READ_ENTRY and v2 READ: a plain read, or a fence read (spec
// §2.5.2, §6; protocol.md §4.2).
func (b *Bookie) read(req *wire.Request, resp *wire.Response) {
	r := &req.Read
	if r.Flag == wire.ReadFlagFenceLedger {
		b.fenceRead(req, resp)
		return
	}
	if r.Flag == wire.ReadFlagEntryPiggyback {
		// ENTRY_PIGGYBACK needs previousLAC (a long poll, handled
		// elsewhere) and entry -1.
		b.fillStatus(req, resp, wire.StatusBadRequest)
		return
	}
	body, err := b.readStored(r.LedgerID, r.EntryID)
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "read", r.LedgerID, r.EntryID))
		return
	}
	b.fillStatus(req, resp, wire.StatusOK)
	resp.Read.Body, resp.Read.HasBody = body, true
	if req.Protocol == wire.ProtocolV3 {
		b.setMaxLAC(r.LedgerID, &resp.Read)
	}
}

// setMaxLAC piggybacks the bookie's known LAC on a v3 read, when known.
func (b *Bookie) setMaxLAC(ledgerID int64, rr *wire.ReadResponse) {
	if lac, err := b.store.LastAddConfirmed(ledgerID); err == nil {
		rr.MaxLAC, rr.HasMaxLAC = lac, true
	}
}

// fenceRead fences the ledger durably, creating it fenced if unknown, and
// only then reads (protocol.md §4.2, §5). A missing key is EUA before any
// fencing: fencing without the password is unsafe. Java answers a negative
// read without waiting for the fence to be durable; Folio always waits (the
// store's Fence returns only once durable). The reply carries no maxLAC, as
// Java's fence path sends none.
func (b *Bookie) fenceRead(req *wire.Request, resp *wire.Response) {
	r := &req.Read
	if !r.HasMasterKey {
		b.fillStatus(req, resp, wire.StatusUnauthorized)
		return
	}
	if err := b.store.Fence(b.ctx, r.LedgerID, r.MasterKey); err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "fence", r.LedgerID, r.EntryID))
		return
	}
	body, err := b.readStored(r.LedgerID, r.EntryID)
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "fence read", r.LedgerID, r.EntryID))
		return
	}
	b.fillStatus(req, resp, wire.StatusOK)
	resp.Read.Body, resp.Read.HasBody = body, true
}

// batchRead serves v2 BATCH_READ_ENTRY (spec §3.4): entries from
// StartEntryID on, at most MaxCount (≤ 0: no limit), while the response frame
// (prefix included: 36 bytes, plus 4 + len per entry) stays within
// min(MaxSize, Config.MaxBatchReadSize). The first entry is always included;
// the batch stops silently at the first entry that cannot be read; only a
// failure on the first entry is an error status. With the fence flag it
// fences first, as a fence read does.
func (b *Bookie) batchRead(req *wire.Request, resp *wire.Response) {
	br := &req.BatchRead
	if br.Fence {
		if br.MasterKey == nil {
			b.fillStatus(req, resp, wire.StatusUnauthorized)
			return
		}
		if err := b.store.Fence(b.ctx, br.LedgerID, br.MasterKey); err != nil {
			b.fillStatus(req, resp, b.statusLogged(err, "batch fence", br.LedgerID, br.StartEntryID))
			return
		}
	}
	limit := b.cfg.MaxBatchReadSize
	if br.MaxSize < limit {
		limit = br.MaxSize
	}
	if rr, ok := b.store.(storage.RangeReader); ok {
		// One index walk and reads in disk order (storage.RangeReader);
		// the frame is the 36-byte prefix plus 4 + len per entry.
		entries, err := rr.ReadEntries(br.LedgerID, br.StartEntryID, int(br.MaxCount), limit-36, 4)
		if len(entries) == 0 && err == nil {
			err = fmt.Errorf("store returned no entry and no error for ledger %d entry %d", br.LedgerID, br.StartEntryID)
		}
		if len(entries) == 0 {
			b.fillStatus(req, resp, b.statusLogged(err, "batch read", br.LedgerID, br.StartEntryID))
			return
		}
		if err != nil {
			b.statusLogged(err, "batch read", br.LedgerID, br.StartEntryID+int64(len(entries)))
		}
		for _, e := range entries {
			b.metrics.EntryBytes(false, len(e))
		}
		b.fillStatus(req, resp, wire.StatusOK)
		resp.BatchRead.Entries = entries
		return
	}
	first, err := b.readStored(br.LedgerID, br.StartEntryID)
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "batch read", br.LedgerID, br.StartEntryID))
		return
	}
	entries := [][]byte{first}
	size := int64(36 + 4 + len(first))
	// Entry -1 is "the last entry": nothing follows it.
	for id := br.StartEntryID + 1; br.StartEntryID >= 0 && (br.MaxCount <= 0 || len(entries) < int(br.MaxCount)); id++ {
		body, err := b.readStored(br.LedgerID, id)
		if err != nil {
			if !isNegative(err) {
				b.statusLogged(err, "batch read", br.LedgerID, id)
			}
			break
		}
		if size+4+int64(len(body)) > limit {
			break
		}
		size += 4 + int64(len(body))
		entries = append(entries, body)
	}
	b.fillStatus(req, resp, wire.StatusOK)
	resp.BatchRead.Entries = entries
}

// readStored reads an entry from the store and counts its bytes.
func (b *Bookie) readStored(ledgerID, entryID int64) ([]byte, error) {
	body, err := b.store.ReadEntry(ledgerID, entryID)
	if err == nil {
		b.metrics.EntryBytes(false, len(body))
	}
	return body, err
}
