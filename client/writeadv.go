package client

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
)

// WriteAdvHandle writes a ledger whose entry ids the application chooses
// (Java's WriteAdvHandle, from createLedgerAdv / CreateAdvBuilder). It is
// safe for concurrent use.
//
// Entries may be submitted in any order, and each is sent to its write
// set as soon as it is submitted; but, as in Java's LedgerHandleAdv, they
// are acknowledged in entry-id order: an entry completes only once it is
// stored on an ack quorum of its write set and every lower id has
// completed, and LastAddConfirmed moves only over contiguous ids from 0.
// An entry above a gap stays pending until the gap is written.
//
// Ids are not bounded ahead of the LAC (Java bounds them neither), and
// WriteAt does not count against Config.MaxOutstandingAdds: an entry above
// a gap holds its place until the gap fills, so counting it could leave
// the write that fills the gap waiting for room forever. The application
// bounds how far ahead it writes.
type WriteAdvHandle struct {
	h *WriteHandle
}

// writeAtCmd is a WriteAt queued to the handle's executor; f.entryID is
// the id asked for.
type writeAtCmd struct{ f *AppendFuture }

// CreateLedgerAdv creates a ledger, as CreateLedger does, whose entry ids
// the application chooses: its handle takes WriteAt instead of Append.
// With o.LedgerID it creates that ledger (Java's
// CreateAdvBuilder.withLedgerId), or fails with ErrLedgerExists if it
// exists; zero means a generated id.
func (c *Client) CreateLedgerAdv(ctx context.Context, o LedgerOptions) (_ *WriteAdvHandle, err error) {
	defer func(start time.Time) { err = c.closedError(err); observe(c.metrics.create, start, err) }(time.Now())
	h, err := c.createLedger(ctx, o, true)
	if err != nil {
		return nil, err
	}
	return &WriteAdvHandle{h: h}, nil
}

// storeNewLedger stores md under a generated id (id 0) or under id, which
// must not exist yet (ErrLedgerExists).
func (c *Client) storeNewLedger(ctx context.Context, id int64, md *metadata.LedgerMetadata) (int64, metadata.Version, error) {
	if id == 0 {
		id, v, err := c.md.CreateLedger(ctx, md)
		if err != nil {
			return 0, 0, publicError(fmt.Errorf("client: create ledger: %w", err))
		}
		return id, v, nil
	}
	// A creator token of our own (Java's cToken) makes this creator's
	// value unlike any other's: a store that retries a create whose first
	// attempt may have been applied recognises its own write by comparing
	// values, and without the token two creators racing for one chosen id
	// with the same options (same ensemble, same millisecond) could both
	// conclude they created it.
	if md.CToken == 0 {
		md.CToken = rand.Int64N(math.MaxInt64) + 1
	}
	v, err := c.md.CreateLedgerMetadata(ctx, id, md)
	if err != nil {
		return 0, 0, publicError(fmt.Errorf("client: create ledger %d: %w", id, err))
	}
	return id, v, nil
}

// ID returns the ledger id.
func (a *WriteAdvHandle) ID() int64 { return a.h.ID() }

// LastAddConfirmed returns the highest entry id acknowledged with every
// lower one (-1 if none); for a DeferredSync ledger, the highest made
// durable by Force.
func (a *WriteAdvHandle) LastAddConfirmed() int64 { return a.h.LastAddConfirmed() }

// Metadata returns the ledger's metadata as this writer knows it, as
// WriteHandle.Metadata does.
func (a *WriteAdvHandle) Metadata() LedgerMetadata { return a.h.Metadata() }

// Force makes every entry acknowledged before the call durable on all
// bookies of the ensemble (DeferredSync ledgers), as WriteHandle.Force.
func (a *WriteAdvHandle) Force(ctx context.Context) error { return a.h.Force(ctx) }

// Close fails the writes still pending with ErrLedgerClosed, those above
// a gap included (their outcome is unknown, as for any pending write), and
// closes the ledger at its LastAddConfirmed with the length of the
// acknowledged entries, as Java's LedgerHandleAdv does. Entries above the
// close point that reached bookies are not part of the ledger. It returns
// ErrMetadataVersion if another client closed the ledger at a different
// end, or at the same last entry with another length: each entry carries
// the length of the entries submitted before it, so when entries were
// submitted out of id order a recovery closes with the length carried by
// the last entry, which can differ from the sum this writer acknowledged
// (Java computes and compares lengths the same way). An explicit-id
// ledger's Length is the sum of its payloads only if entries were
// submitted in id order or its own writer closed it. Calling Close again
// returns the same result.
func (a *WriteAdvHandle) Close(ctx context.Context) error { return a.h.Close(ctx) }

// WriteAt writes payload as entry entryID and waits until it is
// acknowledged: stored durably on an ack quorum of its write set, with
// every lower entry acknowledged too (so it waits while a lower id is
// missing). ctx bounds the wait only: after ctx ends the write may still
// succeed.
//
// It fails, without sending anything or disturbing the other entries, with
// ErrInvalidEntryID for a negative id, ErrDuplicateEntryID for an id that
// is pending or acknowledged already, ErrEntryTooLarge for a payload over
// the frame limit; and with ErrLedgerClosed or ErrLedgerFenced once the
// handle stopped. ErrLedgerFenced, ErrLedgerClosed and ErrTimeout for an
// accepted write mean the outcome is unknown. payload must not be modified
// until WriteAt returns.
func (a *WriteAdvHandle) WriteAt(ctx context.Context, entryID int64, payload []byte) error {
	_, err := a.WriteAtAsync(entryID, payload).Wait(ctx)
	return err
}

// WriteAtAsync starts writing payload as entry entryID and returns its
// future at once; the future's Wait returns entryID once the entry is
// acknowledged (WriteAt says when, and the errors). Futures complete in
// entry-id order. payload is not copied: it must not be modified until the
// future completes.
func (a *WriteAdvHandle) WriteAtAsync(entryID int64, payload []byte) *AppendFuture {
	w := a.h
	f := &AppendFuture{w: w, payload: payload, start: time.Now(), entryID: entryID}
	if limit := w.c.maxEntrySize(); len(payload) > limit {
		f.complete(-1, fmt.Errorf("%w: ledger %d entry %d: a %d-byte entry does not fit a %d-byte frame (Config.MaxFrameSize; at most %d bytes of payload)",
			ErrEntryTooLarge, w.id, entryID, len(payload), w.c.frameSize(), limit))
		return f
	}
	if !w.q.Push(writeAtCmd{f}) {
		f.complete(-1, w.exitErr())
	}
	return f
}

// writeAt hands a WriteAt to the writer (executor goroutine). A refused id
// completes at once; an accepted one waits for its AddComplete.
func (w *WriteHandle) writeAt(f *AppendFuture) {
	if err := w.w.WriteAt(f.entryID, f.payload); err != nil {
		f.complete(-1, fmt.Errorf("ledger %d entry %d: %w", w.id, f.entryID, err))
		return
	}
	w.advFutures[f.entryID] = f
}

// completeWriteAt delivers an AddComplete to its WriteAt.
func (w *WriteHandle) completeWriteAt(e ledger.AddComplete) {
	f := w.advFutures[e.EntryID]
	if f == nil {
		panic(fmt.Sprintf("client: ledger %d: completion of entry %d with no pending write", w.id, e.EntryID))
	}
	delete(w.advFutures, e.EntryID)
	if e.Err != nil {
		f.complete(-1, fmt.Errorf("ledger %d entry %d: %w", w.id, e.EntryID, e.Err))
		return
	}
	w.lac.Store(w.w.LastAddConfirmed())
	f.complete(e.EntryID, nil)
}

// failWriteAts fails every pending WriteAt, in entry order (the executor is
// stopping).
func (w *WriteHandle) failWriteAts(err error) {
	for _, id := range slices.Sorted(maps.Keys(w.advFutures)) {
		w.advFutures[id].complete(-1, err)
	}
	clear(w.advFutures)
}
