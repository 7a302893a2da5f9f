package ledger

import (
	"fmt"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// Explicit entry ids (Java's LedgerHandleAdv): the caller names each
// entry's id, in any order. The pipeline then keeps pending sorted by
// entry id with gaps where ids have not been submitted yet (Java's
// PriorityBlockingQueue of PendingAddOps ordered by entry id), and
// popAcknowledged stops at the first gap, so acknowledgements stay in
// entry order and contiguous from 0 (DESIGN.md §6 invariant 5).
//
// Each entry carries, as Java's does, the LAC when it is sent and the
// cumulative length of the payloads submitted so far (submission order,
// Java's addToLength at doAsyncAddEntry), so the lengths entries carry need
// not grow with the entry id. The LAC length is the sum of the
// acknowledged payloads, which is what a close writes (Java: the handle's
// length after the pending adds are drained).

// pushAt adds entry entryID, which must be above the LAC and not pending
// (the caller checks: Writer.WriteAt), and returns the request that sends
// it to its write set in the current ensemble.
func (p *pipeline) pushAt(entryID int64, payload []byte) (*pendingAdd, SendAdd) {
	i, found := p.searchExplicit(entryID)
	if found || entryID <= p.lac {
		panic(fmt.Sprintf("ledger: pushAt e%d: pending already or at most LAC %d", entryID, p.lac))
	}
	p.lastAddPushed = max(p.lastAddPushed, entryID)
	p.length += int64(len(payload))
	lac, _ := p.visibleLAC()
	lac = min(lac, p.lacCap)
	p.carried = max(p.carried, lac)
	op := &pendingAdd{
		entryID:  entryID,
		lac:      lac,
		length:   p.length,
		payload:  payload,
		deferred: p.deferred,
		acked:    make([]bool, p.q.WriteQuorum),
	}
	// Usually entries come nearly in order, so i is at or near the end and
	// the insert moves little.
	p.pending = slices.Insert(p.pending, i, op)
	to := make([]metadata.BookieID, 0, p.q.WriteQuorum)
	for pos := range p.q.WriteQuorum {
		to = append(to, p.ensemble[p.q.WriteSetIndex(entryID, pos)])
	}
	return op, op.send(to)
}

// searchExplicit returns the index where entryID is or would be in pending.
func (p *pipeline) searchExplicit(entryID int64) (int, bool) {
	return slices.BinarySearchFunc(p.pending, entryID, func(op *pendingAdd, id int64) int {
		switch {
		case op.entryID < id:
			return -1
		case op.entryID > id:
			return 1
		}
		return 0
	})
}

// findExplicit is find with explicit ids.
func (p *pipeline) findExplicit(entryID int64) *pendingAdd {
	if i, ok := p.searchExplicit(entryID); ok {
		return p.pending[i]
	}
	return nil
}

// checkExplicit is check (invariants build) with explicit ids: pending
// ascending, above the LAC, at most lastAddPushed; the pipeline length is
// the LAC length plus the pending payloads; each entry carried a length of
// at least its own payload and at most the pipeline length.
func (p *pipeline) checkExplicit() error {
	if p.lac > p.lastAddPushed || int64(len(p.pending)) > p.lastAddPushed-p.lac {
		return fmt.Errorf("%d adds pending between LAC %d and last pushed %d", len(p.pending), p.lac, p.lastAddPushed)
	}
	length := p.lacLength
	prev := p.lac
	for i, op := range p.pending {
		if op.entryID <= prev || op.entryID > p.lastAddPushed {
			return fmt.Errorf("pending slot %d holds e%d after e%d (LAC %d, last pushed %d)", i, op.entryID, prev, p.lac, p.lastAddPushed)
		}
		prev = op.entryID
		if err := op.checkAcks(p.q.WriteQuorum); err != nil {
			return err
		}
		length += int64(len(op.payload))
		if op.length < int64(len(op.payload)) || op.length > p.length {
			return fmt.Errorf("e%d carries length %d with a %d-byte payload, pipeline length %d", op.entryID, op.length, len(op.payload), p.length)
		}
	}
	if p.length != length {
		return fmt.Errorf("length %d, want %d (LAC length %d plus pending payloads)", p.length, length, p.lacLength)
	}
	return nil
}

// checkAcks: the add has Qw ack slots and acks counts the true ones.
func (op *pendingAdd) checkAcks(qw int) error {
	if len(op.acked) != qw {
		return fmt.Errorf("e%d has %d ack slots, Qw=%d", op.entryID, len(op.acked), qw)
	}
	n := 0
	for _, a := range op.acked {
		if a {
			n++
		}
	}
	if n != op.acks {
		return fmt.Errorf("e%d counts %d acks, its ack flags %d", op.entryID, op.acks, n)
	}
	return nil
}
