package sim

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// The invariants, named after the TLA+ model of the BookKeeper protocol
// (Vanlightly/bookkeeper-tlaplus, STYLE.md §7) and DESIGN.md §6. Cheap ones
// are checked at the event that could break them (which is "after every
// step"); expensive ones at the end of the run.
const (
	// NoDivergenceBetweenClientAndMetaData: no writer acknowledged an entry
	// past the closed ledger's last entry, no reader was handed one, and
	// every client that reports a close reports the stored end (DESIGN
	// §6.1, §6.2).
	NoDivergenceBetweenClientAndMetaData = "NoDivergenceBetweenClientAndMetaData"
	// AllAckedEntriesAreReadable: at the end, every acknowledged entry reads
	// back byte-exact from a bookie of its write set, and every copy a
	// bookie confirmed durable is still there (DESIGN §6.1, §6.6).
	AllAckedEntriesAreReadable = "AllAckedEntriesAreReadable"
	// AllCommittedEntriesReachAckQuorum: an entry is acknowledged only when
	// Qa bookies of its write set (in the stored metadata) confirmed it
	// durable and all lower entries were acknowledged; once closed, every
	// entry up to the end is on Qa bookies of its write set (DESIGN §6.5).
	AllCommittedEntriesReachAckQuorum = "AllCommittedEntriesReachAckQuorum"
	// NoOutOfOrderEntries: acknowledgements come in entry order from 0, and
	// a reader gets entry e with the payload the writer appended as e.
	NoOutOfOrderEntries = "NoOutOfOrderEntries"
	// NoDirtyReads: a LAC (piggybacked on a stored entry, or returned to a
	// reader) never passes the entries that reached ack quorum.
	NoDirtyReads = "NoDirtyReads"
	// FencedMeansFenced: a bookie that confirmed a fence never again accepts
	// a normal add for the ledger, across restarts (DESIGN §6.3).
	FencedMeansFenced = "FencedMeansFenced"
	// MetadataOnlyMovesForward: metadata changes by CAS only OPEN →
	// IN_RECOVERY → CLOSED, a closed end never changes, and fragments
	// other than the last never change (DESIGN §6.4).
	MetadataOnlyMovesForward = "MetadataOnlyMovesForward"
	// NoInvalidFragments: recovery writes only into the last fragment of
	// the metadata it fenced with (TLA+ defect 2, issue #2615: older
	// fragments are immutable; rewriting into them is how recovery came to
	// build a fragment below the last one).
	NoInvalidFragments = "NoInvalidFragments"
	// LedgerIsClosed (liveness): once faults heal, every ledger is closed.
	LedgerIsClosed = "LedgerIsClosed"
	// AppendsComplete (liveness): once faults heal, every append a live
	// writer accepted completes (acknowledged, or failed by the writer)
	// before the writer is closed: none hangs for ever. Explicit-id
	// writers are left out (an id above a gap completes only once the
	// gap is written, and the tail writes nothing new).
	AppendsComplete = "AppendsComplete"
	// LACNeverAhead: a LAC handed to a reader never passes the ledger's
	// true LAC: the highest entry its writer acknowledged, or the end it
	// was closed at. TryReadLastAddConfirmed, which takes one bookie's
	// answer without the coverage rule, may be behind, never ahead; the
	// covering LAC read and the long poll are held to the same bound.
	// Stricter than NoDirtyReads, whose bound counts entries on Qa bookies
	// that no client acknowledged yet.
	LACNeverAhead = "LACNeverAhead"
	// ExplicitIDsRefuseOnlyDuplicates: an explicit-id writer's WriteAt
	// refuses an id it was given before (pending or acknowledged) with
	// ErrDuplicateEntryID, queueing nothing and keeping the first payload,
	// and takes every id never given (while the writer is healthy).
	// Acknowledgements stay in entry order from 0 whatever the submission
	// order (NoOutOfOrderEntries).
	ExplicitIDsRefuseOnlyDuplicates = "ExplicitIDsRefuseOnlyDuplicates"
)

// checker holds the ground truth the invariants are checked against.
type checker struct {
	w *world
	// copies[ledger][entry] are the bookies that confirmed the entry
	// durable (an OK add answer), with the payload they stored.
	copies map[int64]map[int64]map[metadata.BookieID][]byte
	// fenced[bookie] are the ledgers the bookie confirmed fenced.
	fenced map[metadata.BookieID]map[int64]bool
}

func newChecker(w *world) *checker {
	return &checker{w: w, copies: map[int64]map[int64]map[metadata.BookieID][]byte{}, fenced: map[metadata.BookieID]map[int64]bool{}}
}

func (c *checker) ledger(id int64) *ledgerRec {
	for _, l := range c.w.ledgers {
		if l.id == id {
			return l
		}
	}
	return nil
}

// bookieAnswered sees every answer a bookie sends, before it goes on the
// wire.
func (c *checker) bookieAnswered(b metadata.BookieID, p *pendingReq, resp *wire.Response) {
	st := statusOfResponse(resp)
	switch {
	case p.op == wire.OpAddEntry && st == wire.StatusOK:
		c.durableCopy(b, p)
	case p.op == wire.OpReadEntry && p.fence && (st == wire.StatusOK || st == wire.StatusNoEntry || st == wire.StatusNoLedger):
		l := c.ledgerOf(p)
		if c.fenced[b] == nil {
			c.fenced[b] = map[int64]bool{}
		}
		c.fenced[b][l] = true
	}
}

func (c *checker) ledgerOf(p *pendingReq) int64 { return p.ledgerID }

// durableCopy records an add the bookie confirmed durable and checks
// FencedMeansFenced and NoDirtyReads on it.
func (c *checker) durableCopy(b metadata.BookieID, p *pendingReq) {
	w := c.w
	id := c.ledgerOf(p)
	l := c.ledger(id)
	if !p.recovery && c.fenced[b][id] {
		w.violate(FencedMeansFenced, id, "bookie %s accepted normal add of ledger %d entry %d after it confirmed a fence", b, id, p.entryID)
	}
	if q := c.quorumLAC(l); p.lac > q {
		w.violate(NoDirtyReads, id, "bookie %s stored ledger %d entry %d carrying LAC %d, but only entries up to %d reached ack quorum on their write sets (Qa=%d)", b, id, p.entryID, p.lac, q, l.q.qa)
	}
	if c.copies[id] == nil {
		c.copies[id] = map[int64]map[metadata.BookieID][]byte{}
	}
	if c.copies[id][p.entryID] == nil {
		c.copies[id][p.entryID] = map[metadata.BookieID][]byte{}
	}
	c.copies[id][p.entryID][b] = p.payload
}

// quorumLAC is the highest e such that every entry up to e was confirmed
// durable, with the writer's payload, by at least Qa bookies of its write
// set in the stored metadata (for a deleted ledger, the metadata it was
// deleted with). Copies on bookies the metadata does not name do not count:
// nobody reads them through the ledger, and no repair finds them (the TLA+
// invariants' meaning; issue 16 item 1 hid behind counting them). A closed
// ledger's entries end at its last entry, whatever bookies hold beyond it:
// a LAC past the end is dirty too.
func (c *checker) quorumLAC(l *ledgerRec) int64 {
	md := l.deletedMD
	if md == nil {
		md, _ = c.w.meta.read(l.id)
	}
	if md == nil {
		return -1
	}
	e := int64(-1)
	for {
		if md.State == metadata.LedgerClosed && e >= md.LastEntryID {
			return md.LastEntryID
		}
		if n, _ := c.copiesInWriteSet(l, md, e+1); n < l.q.qa {
			return e
		}
		e++
	}
}

// copiesInWriteSet counts the confirmed copies of entry e with the writer's
// payload on e's write set in md.
func (c *checker) copiesInWriteSet(l *ledgerRec, md *metadata.LedgerMetadata, e int64) (int, []metadata.BookieID) {
	ws := writeSet(md, e)
	n := 0
	for _, b := range ws {
		if payload, ok := c.copies[l.id][e][b]; ok && bytes.Equal(payload, l.payloads[e]) {
			n++
		}
	}
	return n, ws
}

func writeSet(md *metadata.LedgerMetadata, e int64) []metadata.BookieID {
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	ens := md.EnsembleAt(e)
	var out []metadata.BookieID
	for _, idx := range q.WriteSet(e) {
		out = append(out, ens[idx])
	}
	return out
}

// acked checks a writer's acknowledgement of entry e.
func (c *checker) acked(a *actor, e int64) {
	w, l := c.w, a.led
	if want := int64(len(l.acked)); e != want {
		w.violate(NoOutOfOrderEntries, l.id, "%s acknowledged ledger %d entry %d, expected entry %d next", a.name, l.id, e, want)
	}
	l.acked = append(l.acked, e)
	md, _ := w.meta.read(l.id)
	if md == nil {
		if l.deleted && e > l.deletedEnd {
			w.violate(NoDivergenceBetweenClientAndMetaData, l.id, "%s acknowledged ledger %d entry %d, but the ledger was closed at %d and deleted", a.name, l.id, e, l.deletedEnd)
		}
		return
	}
	if n, ws := c.copiesInWriteSet(l, md, e); n < l.q.qa {
		w.violate(AllCommittedEntriesReachAckQuorum, l.id, "%s acknowledged ledger %d entry %d with %d confirmed copies on its write set %v of the stored metadata %s (Qa=%d)",
			a.name, l.id, e, n, ws, ledger.FormatMetadata(md), l.q.qa)
	}
	if md.State == metadata.LedgerClosed && e > md.LastEntryID {
		w.violate(NoDivergenceBetweenClientAndMetaData, l.id, "%s acknowledged ledger %d entry %d, but the ledger is closed at %d", a.name, l.id, e, md.LastEntryID)
	}
}

// metadataWritten checks a change of the stored metadata (prev → cur).
func (c *checker) metadataWritten(l *ledgerRec, prev, cur *metadata.LedgerMetadata, who string) {
	w := c.w
	if prev != nil && cur != nil {
		if why := movesForward(prev, cur); why != "" {
			w.violate(MetadataOnlyMovesForward, l.id, "%s changed ledger %d from %s to %s: %s", who, l.id, ledger.FormatMetadata(prev), ledger.FormatMetadata(cur), why)
		}
	}
	if cur == nil || cur.State != metadata.LedgerClosed || (prev != nil && prev.State == metadata.LedgerClosed) {
		return
	}
	if n := len(l.acked); n > 0 && l.acked[n-1] > cur.LastEntryID {
		w.violate(NoDivergenceBetweenClientAndMetaData, l.id, "%s closed ledger %d at %d, but %s had acknowledged entry %d", who, l.id, cur.LastEntryID, l.writer.name, l.acked[n-1])
	}
	if l.readMax > cur.LastEntryID {
		w.violate(NoDivergenceBetweenClientAndMetaData, l.id, "%s closed ledger %d at %d, but a reader had been handed entry %d", who, l.id, cur.LastEntryID, l.readMax)
	}
	for e := int64(0); e <= cur.LastEntryID; e++ {
		if _, ok := l.payloads[e]; !ok {
			w.violate(AllCommittedEntriesReachAckQuorum, l.id, "%s closed ledger %d at %d, but entry %d was never written", who, l.id, cur.LastEntryID, e)
			return
		}
		if n, ws := c.copiesInWriteSet(l, cur, e); n < l.q.qa {
			w.violate(AllCommittedEntriesReachAckQuorum, l.id, "%s closed ledger %d at %d, but entry %d has %d confirmed copies on its write set %v (Qa=%d)", who, l.id, cur.LastEntryID, e, n, ws, l.q.qa)
			return
		}
	}
}

// movesForward explains why cur may not follow prev ("" if it may).
func movesForward(prev, cur *metadata.LedgerMetadata) string {
	switch {
	case cur.State < prev.State:
		return fmt.Sprintf("state went back from %s to %s", prev.State, cur.State)
	case prev.State == metadata.LedgerClosed && (cur.LastEntryID != prev.LastEntryID || cur.Length != prev.Length):
		return "a closed ledger's end changed"
	case cur.EnsembleSize != prev.EnsembleSize || cur.WriteQuorum != prev.WriteQuorum || cur.AckQuorum != prev.AckQuorum:
		return "quorum sizes changed"
	case len(cur.Ensembles) < len(prev.Ensembles):
		return "fragments were removed"
	}
	last := len(prev.Ensembles) - 1
	for i, seg := range prev.Ensembles {
		got := cur.Ensembles[i]
		if got.FirstEntryID != seg.FirstEntryID {
			return fmt.Sprintf("fragment %d moved from entry %d to %d", i, seg.FirstEntryID, got.FirstEntryID)
		}
		if i < last && !slices.Equal(got.Ensemble, seg.Ensemble) {
			return fmt.Sprintf("fragment at entry %d (not the last) changed its ensemble", seg.FirstEntryID)
		}
	}
	return ""
}

// writerClosed checks a writer's successful close against the store.
func (c *checker) writerClosed(a *actor, eff ledger.CloseComplete) {
	if eff.Err != nil {
		return
	}
	c.agreeOnEnd(a, eff.LastEntryID)
}

// recovered checks a recovery's result against the store.
func (c *checker) recovered(a *actor, eff ledger.RecoveryComplete) {
	c.agreeOnEnd(a, eff.Metadata.LastEntryID)
}

func (c *checker) agreeOnEnd(a *actor, last int64) {
	w := c.w
	md, _ := w.meta.read(a.led.id)
	if md == nil {
		return
	}
	if md.State != metadata.LedgerClosed || md.LastEntryID != last {
		w.violate(NoDivergenceBetweenClientAndMetaData, a.led.id, "%s reports ledger %d closed at %d, the store says %s", a.name, a.led.id, last, ledger.FormatMetadata(md))
	}
}

// recoveryAdd checks that a recovery rewrites only entries of the last
// fragment of the metadata it fenced with.
func (c *checker) recoveryAdd(a *actor, e int64) {
	if a.snapshotKey >= 0 && e < a.snapshotKey {
		c.w.violate(NoInvalidFragments, a.led.id, "%s rewrites ledger %d entry %d, below the last fragment (first entry %d) of the metadata it fenced", a.name, a.led.id, e, a.snapshotKey)
	}
}

// observedLAC checks a LAC a reader got (how names the read: "LAC",
// "try LAC", "long-poll LAC").
func (c *checker) observedLAC(a *actor, lac int64, how string) {
	if q := c.quorumLAC(a.led); lac > q {
		c.w.violate(NoDirtyReads, a.led.id, "%s read %s %d of ledger %d, but only entries up to %d reached ack quorum on their write sets", a.name, how, lac, a.led.id, q)
		return
	}
	if t := c.trueLAC(a.led); lac > t {
		c.w.violate(LACNeverAhead, a.led.id, "%s read %s %d of ledger %d, but its writer acknowledged entries up to %d only and the ledger is not closed past it", a.name, how, lac, a.led.id, t)
	}
}

// trueLAC is the ledger's LAC as its clients made it: the highest entry
// its writer acknowledged (acknowledgements are contiguous from 0), or the
// end it was closed at, if higher.
func (c *checker) trueLAC(l *ledgerRec) int64 {
	t := int64(len(l.acked)) - 1
	if l.deleted {
		return max(t, l.deletedEnd)
	}
	if md, _ := c.w.meta.read(l.id); md != nil && md.State == metadata.LedgerClosed {
		t = max(t, md.LastEntryID)
	}
	return t
}

// readEntry checks an entry a reader got: the writer's payload, in order,
// and not past the ledger's end (now, or when it is closed later: see
// metadataWritten).
func (c *checker) readEntry(a *actor, e digest.Entry) {
	l := a.led
	l.readMax = max(l.readMax, e.EntryID)
	md := l.deletedMD
	if md == nil {
		md, _ = c.w.meta.read(l.id)
	}
	if md != nil && md.State == metadata.LedgerClosed && e.EntryID > md.LastEntryID {
		c.w.violate(NoDivergenceBetweenClientAndMetaData, l.id, "%s read ledger %d entry %d, past its end %d", a.name, l.id, e.EntryID, md.LastEntryID)
	}
	want, ok := a.led.payloads[e.EntryID]
	if !ok || !bytes.Equal(want, e.Payload) {
		c.w.violate(NoOutOfOrderEntries, a.led.id, "%s read ledger %d entry %d as %q, the writer appended %q", a.name, a.led.id, e.EntryID, e.Payload, want)
	}
	if e.EntryID < a.next {
		c.w.violate(NoOutOfOrderEntries, a.led.id, "%s read ledger %d entry %d after entry %d", a.name, a.led.id, e.EntryID, a.next-1)
	}
}

// checkEnd runs the expensive checks on the final state, whatever each
// ledger's state (after the liveness phase every bookie is up and, unless
// LedgerIsClosed broke, every ledger closed): the entries of a closed
// ledger up to its end, and every entry its writer acknowledged, read back
// from Qa bookies of their write sets in the stored metadata; every copy a
// bookie confirmed durable is still there.
func (w *world) checkEnd() {
	c := w.check
	for _, l := range w.ledgers {
		md, _ := w.meta.read(l.id)
		if md == nil {
			continue
		}
		end := int64(-1)
		if md.State == metadata.LedgerClosed {
			w.stats.Closed++
			end = md.LastEntryID
		}
		for _, e := range l.acked {
			if md.State == metadata.LedgerClosed && e > end {
				w.violate(NoDivergenceBetweenClientAndMetaData, l.id, "ledger %d closed at %d, entry %d was acknowledged", l.id, end, e)
				return
			}
		}
		if n := len(l.acked); n > 0 {
			end = max(end, l.acked[n-1])
		}
		for e := int64(0); e <= end; e++ {
			ws := writeSet(md, e)
			good := 0
			for _, b := range ws {
				if w.readsBack(l, b, e) {
					good++
				}
			}
			if good < l.q.qa {
				w.violate(AllCommittedEntriesReachAckQuorum, l.id, "ledger %d (%s): entry %d reads back from %d bookies of its write set %v (Qa=%d)", l.id, ledger.FormatMetadata(md), e, good, ws, l.q.qa)
				return
			}
			for _, b := range sortedBookies(c.copies[l.id][e]) {
				if bytes.Equal(c.copies[l.id][e][b], l.payloads[e]) && !w.readsBack(l, b, e) {
					w.violate(AllAckedEntriesAreReadable, l.id, "bookie %s confirmed ledger %d entry %d durable, and lost it", b, l.id, e)
					return
				}
			}
		}
	}
}

// readsBack reads entry e of l straight from bookie b's store and checks
// it against the writer's payload.
func (w *world) readsBack(l *ledgerRec, b metadata.BookieID, e int64) bool {
	n := w.bookie(b)
	if n == nil || n.store == nil {
		return false
	}
	body, err := n.store.ReadEntry(l.id, e)
	if err != nil {
		return false
	}
	ent, err := l.dig.VerifyEntry(body, l.id, e)
	return err == nil && bytes.Equal(ent.Payload, l.payloads[e])
}

func sortedBookies(m map[metadata.BookieID][]byte) []metadata.BookieID {
	out := make([]metadata.BookieID, 0, len(m))
	for b := range m {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}
