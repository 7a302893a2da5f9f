package ledger

import (
	"errors"
	"fmt"
)

// errAppendExplicit: Append on a writer with explicit ids (Java answers
// LedgerHandleAdv.asyncAddEntry without an id with IllegalOpException).
var errAppendExplicit = errors.New("ledger: Append on a writer with explicit entry ids; use WriteAt")

// WriteAt adds payload as entry entryID of a writer made with
// WriterConfig.ExplicitIDs (Java's LedgerHandleAdv.asyncAddEntry(entryId,
// …)) and queues the SendAdd for its write set at once, whatever entries
// below it are still missing. Entries may come in any order; AddCompletes
// still come in entry order, each only after every lower entry was
// acknowledged, so an entry above a gap waits (it is stored, and counts
// its acks) until the gap is written.
//
// WriteAt returns, without queueing anything or changing the writer:
// ErrInvalidEntryID for a negative id; the writer's error
// (ErrLedgerFenced or ErrLedgerClosed) once it has stopped;
// ErrDuplicateEntryID for an id that is pending or at most the LAC (Java
// checks the same two). There is no bound on how far ahead of the LAC an
// id may be, as in Java; the caller bounds its window.
//
// The writer keeps payload until the add completes; the caller must not
// modify it.
func (w *Writer) WriteAt(entryID int64, payload []byte) error {
	if !w.p.explicit {
		return fmt.Errorf("ledger %d: WriteAt on a writer without explicit entry ids", w.ledgerID)
	}
	if entryID < 0 {
		return fmt.Errorf("%w: ledger %d: entry id %d is negative", ErrInvalidEntryID, w.ledgerID, entryID)
	}
	if w.appendErr != nil {
		return w.appendErr
	}
	if entryID <= w.p.lac {
		return fmt.Errorf("%w: ledger %d: entry %d is acknowledged already (LAC %d)", ErrDuplicateEntryID, w.ledgerID, entryID, w.p.lac)
	}
	if w.p.find(entryID) != nil {
		return fmt.Errorf("%w: ledger %d: entry %d is pending", ErrDuplicateEntryID, w.ledgerID, entryID)
	}
	_, send := w.p.pushAt(entryID, payload)
	w.emit(send)
	w.notePush(entryID) // AddQuorumTimeout counts from submission, as for Append
	if len(w.failed) > 0 && !w.changing {
		// As Append: a bookie failed after its adds were acknowledged;
		// replace it now so that this entry does not wait on it.
		w.startEnsembleChange()
	}
	return nil
}
