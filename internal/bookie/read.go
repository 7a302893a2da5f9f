package bookie

import (
	"time"

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

// startLongPoll serves a long-poll read (spec §2.5.4): wait, up to the
// request's timeOut, for the known LAC to pass previousLAC, then answer. It
// holds a long-poll slot rather than an in-flight one, and its own
// goroutine while it waits.
func (b *Bookie) startLongPoll(req *wire.Request, respond Responder, start time.Time) {
	r := &req.Read
	if r.Flag == wire.ReadFlagEntryPiggyback && r.EntryID != wire.LastAddConfirmed {
		b.answerStatus(req, respond, KindLongPollRead, wire.StatusBadRequest, start)
		return
	}
	if n := b.longPolls.Add(1); n > int64(b.cfg.MaxLongPolls) {
		b.longPolls.Add(-1)
		b.answerStatus(req, respond, KindLongPollRead, wire.StatusTooManyRequests, start)
		return
	}
	b.spawn(func() {
		resp := &wire.Response{}
		b.longPoll(req, resp)
		b.metrics.RequestCompleted(KindLongPollRead, resp.Status, b.clock.Now().Sub(start))
		respond.Respond(resp)
		b.longPolls.Add(-1)
	})
}

func (b *Bookie) longPoll(req *wire.Request, resp *wire.Response) {
	r := &req.Read
	lac, err := b.waitLAC(r)
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "long poll", r.LedgerID, r.EntryID))
		return
	}
	if r.Flag != wire.ReadFlagEntryPiggyback {
		// A plain read of entryId once the wait is over, with maxLAC.
		body, err := b.readStored(r.LedgerID, r.EntryID)
		if err != nil {
			b.fillStatus(req, resp, b.statusLogged(err, "long poll read", r.LedgerID, r.EntryID))
			return
		}
		b.fillStatus(req, resp, wire.StatusOK)
		resp.Read.Body, resp.Read.HasBody = body, true
		resp.Read.MaxLAC, resp.Read.HasMaxLAC = lac, true
		return
	}
	// ENTRY_PIGGYBACK: maxLAC always; entry previousLAC+1 if the LAC moved
	// past previousLAC and the entry is here; entryId -1 means "none".
	b.fillStatus(req, resp, wire.StatusOK)
	resp.Read.MaxLAC, resp.Read.HasMaxLAC = lac, true
	resp.Read.EntryID = wire.LastAddConfirmed
	if lac <= r.PreviousLAC {
		return
	}
	next := r.PreviousLAC + 1
	body, err := b.readStored(r.LedgerID, next)
	switch {
	case err == nil:
		resp.Read.EntryID = next
		resp.Read.Body, resp.Read.HasBody = body, true
	case isNegative(err):
		// The LAC moved on but this bookie lacks the entry (not in its
		// write set): the client reads it elsewhere.
	default:
		b.fillStatus(req, resp, b.statusLogged(err, "long poll piggyback read", r.LedgerID, next))
	}
}

// waitLAC returns the known LAC once it passes r.PreviousLAC, or when
// r.TimeoutMs (capped) has passed on the bookie's clock, or at once without
// a timeOut. ErrNoLedger for an unknown ledger. Close ends the wait early.
func (b *Bookie) waitLAC(r *wire.ReadRequest) (int64, error) {
	lac, notify, cancel, err := b.store.WatchLAC(r.LedgerID, r.PreviousLAC)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if lac > r.PreviousLAC || !r.HasTimeout || r.TimeoutMs <= 0 {
		return lac, nil
	}
	wait := time.Duration(r.TimeoutMs) * time.Millisecond
	if wait > b.cfg.MaxLongPollTimeout || wait <= 0 {
		wait = b.cfg.MaxLongPollTimeout
	}
	// clock.Clock timers cannot be stopped; an early return leaves the
	// timer to fire unobserved (its channel is buffered).
	select {
	case <-notify:
	case <-b.clock.After(wait):
	case <-b.ctx.Done():
	}
	return b.store.LastAddConfirmed(r.LedgerID)
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
