package ledger

import (
	"fmt"

	"github.com/foliodb/folio/internal/metadata"
)

// Expensive cross-checks, compiled in with the invariants build tag (`make
// test` and CI set it; production builds do not), as pebble's invariants
// tag. With the tag, the Writer and the Recovery check their bookkeeping
// each time the shell collects effects (Ready), which costs time linear in
// the pending adds, and panic with a description at the first
// inconsistency: carrying on could acknowledge data that is not durable.
// Without the tag the calls compile to nothing (invariants is a constant).
//
// What is checked:
//   - the pipeline: pending adds are exactly LAC+1 … lastAddPushed in order;
//     each add's ack count matches its ack flags and its write quorum; the
//     synced LAC is at most the LAC; no entry carried a LAC above the one
//     readers may see; the ensemble has E bookies; lengths agree;
//   - the LAC (and the LAC readers see) never moves backward;
//   - the Writer: successful AddCompletes are contiguous from entry 0 and
//     at most the LAC, every AddComplete is for a later entry than the one
//     before; while it takes appends, with no ensemble change or metadata
//     operation outstanding on an OPEN ledger, the pipeline writes to the
//     last ensemble of its copy of the metadata; a
//     successful close (without DEFERRED_SYNC) is at or above every entry
//     acknowledged;
//   - outstanding forces cover acknowledged entries only; failed bookies are
//     ensemble indexes;
//   - the Recovery: its entry reads are consistent (the next entry to
//     decide follows the last rewrite, negatives are counted answers, no
//     entry both found and absent, absent only past the negative
//     threshold); its LAC never moves backward, and it never proposes to
//     close below a LAC it has seen (the fenced LAC, or one carried by an
//     entry it read): an entry some writer acknowledged must survive. The
//     close check is off when an UnsafeKnobs switch is on (those exist to
//     break it in the simulator).

// invariantViolated panics: a broken invariant is a programmer error.
func invariantViolated(format string, args ...any) {
	panic(fmt.Sprintf("ledger: invariant violated: "+format, args...))
}

// check reports the first inconsistency of the pipeline's bookkeeping.
// writer adds the length rule that holds for a writer's own adds (a
// recovery's rewrites carry the lengths the entries were written with).
func (p *pipeline) check(writer bool) error {
	if len(p.ensemble) != p.q.EnsembleSize {
		return fmt.Errorf("ensemble of %d bookies, E=%d", len(p.ensemble), p.q.EnsembleSize)
	}
	if p.explicit {
		if err := p.checkExplicit(); err != nil {
			return err
		}
		return p.checkLACs()
	}
	if p.lac > p.lastAddPushed || int64(len(p.pending)) != p.lastAddPushed-p.lac {
		return fmt.Errorf("%d adds pending between LAC %d and last pushed %d", len(p.pending), p.lac, p.lastAddPushed)
	}
	length := p.lacLength
	for i, op := range p.pending {
		if want := p.lac + 1 + int64(i); op.entryID != want {
			return fmt.Errorf("pending slot %d holds e%d, want e%d", i, op.entryID, want)
		}
		if len(op.acked) != p.q.WriteQuorum {
			return fmt.Errorf("e%d has %d ack slots, Qw=%d", op.entryID, len(op.acked), p.q.WriteQuorum)
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
		length += int64(len(op.payload))
		if writer && op.length != length {
			return fmt.Errorf("e%d carries length %d, want %d", op.entryID, op.length, length)
		}
	}
	if writer && p.length != length {
		return fmt.Errorf("length %d, want %d (LAC length %d plus pending payloads)", p.length, length, p.lacLength)
	}
	if n := len(p.pending); n > 0 && p.pending[n-1].length != p.length {
		return fmt.Errorf("last pending e%d carries length %d, pipeline length %d", p.pending[n-1].entryID, p.pending[n-1].length, p.length)
	}
	return p.checkLACs()
}

// checkLACs: the synced LAC is at most the LAC, and no entry carried a LAC
// above the one readers may see.
func (p *pipeline) checkLACs() error {
	if p.deferred && p.synced > p.lac {
		return fmt.Errorf("synced LAC %d above LAC %d", p.synced, p.lac)
	}
	if visible, _ := p.visibleLAC(); p.carried > visible {
		return fmt.Errorf("an entry carried LAC %d above the visible LAC %d", p.carried, visible)
	}
	return nil
}

// writerChecks is what the Writer's checks remember between calls.
type writerChecks struct {
	started   bool
	lac       int64 // pipeline LAC at the last check
	visible   int64 // LAC readers may see at the last check
	acked     int64 // the last successful AddComplete
	completed int64 // the last AddComplete
}

// checkInvariants runs the Writer's checks over its state and the effects
// out that Ready is about to return.
func (w *Writer) checkInvariants(out []Effect) {
	c := &w.inv
	if !c.started {
		*c = writerChecks{started: true, lac: -1, visible: -1, acked: -1, completed: -1}
	}
	if err := w.p.check(true); err != nil {
		invariantViolated("writer of ledger %d: %v", w.ledgerID, err)
	}
	visible, _ := w.p.visibleLAC()
	if w.p.lac < c.lac || visible < c.visible {
		invariantViolated("writer of ledger %d: LAC moved backward: %d (visible %d) after %d (visible %d)", w.ledgerID, w.p.lac, visible, c.lac, c.visible)
	}
	c.lac, c.visible = w.p.lac, visible
	if w.appendErr == nil && !w.changing && w.meta == metaNone && w.md.State == metadata.LedgerOpen {
		if last := w.md.LastEnsemble().Ensemble; !sameBookies(last, w.p.ensemble) {
			invariantViolated("writer of ledger %d: adds go to %s, the stored last ensemble is %s", w.ledgerID, bookieList(w.p.ensemble), bookieList(last))
		}
	}
	for id, f := range w.forces {
		if f.head > w.p.lac || f.oks > len(f.ensemble) {
			invariantViolated("writer of ledger %d: force #%d makes e%d durable with LAC %d, %d of %d bookies", w.ledgerID, id, f.head, w.p.lac, f.oks, len(f.ensemble))
		}
	}
	for idx := range w.failed {
		if idx < 0 || idx >= w.q.EnsembleSize {
			invariantViolated("writer of ledger %d: failed bookie at ensemble index %d, E=%d", w.ledgerID, idx, w.q.EnsembleSize)
		}
	}
	for _, eff := range out {
		switch e := eff.(type) {
		case AddComplete:
			if e.EntryID <= c.completed {
				invariantViolated("writer of ledger %d: AddComplete e%d after e%d", w.ledgerID, e.EntryID, c.completed)
			}
			c.completed = e.EntryID
			if e.Err != nil {
				continue
			}
			if e.EntryID != c.acked+1 || e.EntryID > w.p.lac {
				invariantViolated("writer of ledger %d: e%d acknowledged after e%d, with LAC %d", w.ledgerID, e.EntryID, c.acked, w.p.lac)
			}
			c.acked = e.EntryID
		case CloseComplete:
			if e.Err == nil && !w.deferred && e.LastEntryID < c.acked {
				invariantViolated("writer of ledger %d: closed at e%d below acknowledged e%d", w.ledgerID, e.LastEntryID, c.acked)
			}
		}
	}
}

func sameBookies(a, b []metadata.BookieID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// recoveryChecks is what the Recovery's checks remember between calls.
type recoveryChecks struct {
	reading bool  // the pipeline exists (the fence is done)
	lac     int64 // recovery LAC at the last check
	seen    int64 // the highest LAC seen: fenced, or carried by an entry read
}

// saw records a LAC the recovery learned from a bookie: every entry up to
// it was acknowledged to some writer.
func (c *recoveryChecks) saw(lac int64) { c.seen = max(c.seen, lac) }

// startReading records the fenced LAC, where the pipeline starts.
func (c *recoveryChecks) startReading(fenced, start int64) {
	c.reading, c.lac, c.seen = true, start, fenced
}

// checkInvariants runs the Recovery's checks over its state and the
// effects out that Ready is about to return.
func (r *Recovery) checkInvariants(out []Effect) {
	c := &r.inv
	if !c.reading {
		return
	}
	if err := r.p.check(false); err != nil {
		invariantViolated("recovery of ledger %d: %v", r.cfg.LedgerID, err)
	}
	if r.p.lac < c.lac {
		invariantViolated("recovery of ledger %d: LAC moved backward: %d after %d", r.cfg.LedgerID, r.p.lac, c.lac)
	}
	c.lac = r.p.lac
	if err := r.checkReads(); err != nil {
		invariantViolated("recovery of ledger %d: %v", r.cfg.LedgerID, err)
	}
	if r.cfg.Unsafe != (UnsafeKnobs{}) {
		return
	}
	for _, eff := range out {
		if e, ok := eff.(WriteMetadata); ok && e.Metadata.State == metadata.LedgerClosed && e.Metadata.LastEntryID < c.seen {
			invariantViolated("recovery of ledger %d: closing at e%d below LAC %d it saw", r.cfg.LedgerID, e.Metadata.LastEntryID, c.seen)
		}
	}
}

// checkReads reports the first inconsistency of the recovery's entry
// reads: until the end is found, the next entry to decide is the one after
// the last rewrite, and no read is below it; a read's negatives are answers
// it counted, and it is decided one way at most.
func (r *Recovery) checkReads() error {
	if r.phase == phaseRead && !r.readDone && r.nextRead != r.p.lastAddPushed+1 {
		return fmt.Errorf("next read e%d after rewriting up to e%d", r.nextRead, r.p.lastAddPushed)
	}
	for id, rr := range r.reads {
		if id < r.nextRead {
			return fmt.Errorf("read of e%d kept below the next entry to decide, e%d", id, r.nextRead)
		}
		answered := 0
		for _, a := range rr.answered {
			if a {
				answered++
			}
		}
		if rr.negatives > answered {
			return fmt.Errorf("e%d counts %d negatives from %d answers", id, rr.negatives, answered)
		}
		if rr.entry != nil && rr.absent {
			return fmt.Errorf("e%d both found and absent", id)
		}
		if rr.absent && rr.negatives < r.q.NegativeThreshold() {
			return fmt.Errorf("e%d absent on %d negatives, the threshold is %d", id, rr.negatives, r.q.NegativeThreshold())
		}
	}
	return nil
}
