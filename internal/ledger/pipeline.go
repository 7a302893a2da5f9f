package ledger

import (
	"fmt"
	"math"
	"slices"

	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// pipeline is the queue of pending adds of one handle (a writer, or a
// recovery rewriting entries), with their acks, in entry order. It is the
// shared core of PendingAddOp and sendAddSuccessCallbacks (spec §1.4).
//
// All pending adds write to one ensemble, the handle's current one: an
// ensemble change switches every pending add to the new ensemble at once.
//
// Invariants: pending holds entries lac+1 … lastAddPushed, contiguous and
// ascending (with explicit ids: ascending, above lac, at most
// lastAddPushed, gaps allowed; pipeline_adv.go); an add's acks count only
// bookies at its write-set positions in the current ensemble.
type pipeline struct {
	q        quorum.Params
	ensemble []metadata.BookieID

	// lac is the last add confirmed: the highest entry acknowledged, with
	// every lower entry acknowledged too (-1 if none).
	lac int64
	// lastAddPushed is the highest entry id handed out.
	lastAddPushed int64
	// length is the cumulative payload length of entries 0 … lastAddPushed.
	length  int64
	pending []*pendingAdd

	// lacLength is the cumulative length through entry lac.
	lacLength int64
	// deferred (DEFERRED_SYNC): entries carry synced, the LAC made durable
	// by the last force, instead of lac (spec §1.8); syncedLength is the
	// length through entry synced.
	deferred     bool
	synced       int64
	syncedLength int64
	// carried is the highest LAC an entry sent so far carried.
	carried int64
	// lacCap bounds the LAC an entry may carry (math.MaxInt64: no bound).
	// A recovery sets it to its start point (Recovery.startReading says
	// why).
	lacCap int64
	// explicit: entry ids are the caller's (WriterConfig.ExplicitIDs,
	// pushAt), so pending may have gaps; see pipeline_adv.go.
	explicit bool
	// adhere, when not nil, is the fault-domain rule an add's acking
	// bookies must meet besides counting Qa (WriterConfig.AckedAdhering);
	// scratch is the slice quorate hands it.
	adhere func(acked []metadata.BookieID) bool
	// wholeSetSuffices (recovery only) counts an add whose every write-set
	// position acked as quorate even when adhere is not met: see
	// RecoveryConfig.AckedAdhering.
	wholeSetSuffices bool
	scratch          []metadata.BookieID

	// writeSets caches the write set of each entry id modulo the ensemble
	// size in the current ensemble: SendAdd.Bookies of every push shares
	// them. They are never modified: replaceEnsemble drops the cache (nil)
	// and the next push builds new slices, so a SendAdd still held keeps
	// the bookies it was sent to.
	writeSets [][]metadata.BookieID
	// records, when set, recycles pendingAdds (WriterConfig.AddRecords).
	records *AddRecords
}

// AddRecords recycles the writer's per-entry records (issue #22: an
// allocation or two per entry otherwise). Get returns a record Put took
// back, or nil; both are called from the machine's goroutine, but one
// AddRecords may serve machines on many goroutines (the client shares one
// over a sync.Pool), so they must be safe for concurrent use. The machine
// itself stays single-threaded: the records are its own from Get until
// Put, and it never touches a record after Put.
type AddRecords struct {
	Get func() any
	Put func(any)
}

// pendingAdd is one entry sent but not yet acknowledged.
type pendingAdd struct {
	entryID int64
	// lac and length are what the entry's body carries; fixed when the
	// entry is first sent, so a resend builds the same bytes.
	lac, length int64
	payload     []byte
	recovery    bool
	deferred    bool
	// acked is indexed by write-set position (0 … Qw-1); acks counts the
	// true values.
	acked []bool
	acks  int
}

func newPipeline(q quorum.Params, ensemble []metadata.BookieID, lac, length int64) pipeline {
	return pipeline{q: q, ensemble: slices.Clone(ensemble), lac: lac, lastAddPushed: lac, length: length,
		lacLength: length, synced: lac, syncedLength: length, carried: -1, lacCap: math.MaxInt64}
}

// visibleLAC is the LAC readers may see: lac, or synced with DEFERRED_SYNC.
func (p *pipeline) visibleLAC() (lac, length int64) {
	if p.deferred {
		return p.synced, p.syncedLength
	}
	return p.lac, p.lacLength
}

// push appends the next entry and returns the request that sends it to its
// write set. The entry carries the current LAC (piggybacking, spec §1.5),
// at most lacCap.
func (p *pipeline) push(payload []byte, recovery bool) (*pendingAdd, SendAdd) {
	p.lastAddPushed++
	p.length += int64(len(payload))
	lac, _ := p.visibleLAC()
	lac = min(lac, p.lacCap)
	p.carried = max(p.carried, lac)
	op := p.newPendingAdd()
	*op = pendingAdd{
		entryID:  p.lastAddPushed,
		lac:      lac,
		length:   p.length,
		payload:  payload,
		recovery: recovery,
		deferred: p.deferred && !recovery,
		acked:    op.acked,
	}
	p.pending = append(p.pending, op)
	return op, op.send(p.writeSet(op.entryID))
}

// newPendingAdd returns a recycled or new pendingAdd whose acked has
// WriteQuorum cleared flags; the caller sets every other field.
func (p *pipeline) newPendingAdd() *pendingAdd {
	var op *pendingAdd
	if p.records != nil {
		op, _ = p.records.Get().(*pendingAdd)
	}
	if op == nil {
		op = &pendingAdd{}
	}
	if cap(op.acked) < p.q.WriteQuorum {
		op.acked = make([]bool, p.q.WriteQuorum)
	}
	op.acked = op.acked[:p.q.WriteQuorum]
	clear(op.acked)
	return op
}

// recycle takes back pendingAdds that popAcknowledged returned, once the
// caller is done with them. Lifetime: a pendingAdd is referenced by the
// pipeline only while it is in pending (find, position, replaceEnsemble
// and the invariant checks only see pending; the writer's options track
// entries by id); popAcknowledged removed these from pending, and the
// caller (Writer.maybeAcknowledge) kept only their entry ids, so nothing
// refers to them when they go to records. Their payload reference is
// dropped, so a pooled record does not keep the application's buffer
// alive. Without records it does nothing (the garbage collector takes
// them).
func (p *pipeline) recycle(ops []*pendingAdd) {
	if p.records == nil {
		return
	}
	for _, op := range ops {
		*op = pendingAdd{acked: op.acked}
		p.records.Put(op)
	}
}

// writeSet returns the bookies of entryID's write set in the current
// ensemble, from the cache (writeSets): shared, not to be modified.
func (p *pipeline) writeSet(entryID int64) []metadata.BookieID {
	e := p.q.EnsembleSize
	if p.writeSets == nil {
		p.writeSets = make([][]metadata.BookieID, e)
	}
	i := int(uint64(entryID) % uint64(e))
	if p.writeSets[i] == nil {
		to := make([]metadata.BookieID, 0, p.q.WriteQuorum)
		for pos := range p.q.WriteQuorum {
			to = append(to, p.ensemble[p.q.WriteSetIndex(entryID, pos)])
		}
		p.writeSets[i] = to
	}
	return p.writeSets[i]
}

func (op *pendingAdd) send(to []metadata.BookieID) SendAdd {
	return SendAdd{Bookies: to, EntryID: op.entryID, LAC: op.lac, Length: op.length, Payload: op.payload, Recovery: op.recovery, DeferredSync: op.deferred}
}

// find returns the pending add of entryID, or nil if that entry is not
// pending (acknowledged, failed, or never pushed).
func (p *pipeline) find(entryID int64) *pendingAdd {
	if p.explicit {
		return p.findExplicit(entryID)
	}
	i := entryID - (p.lac + 1)
	if i < 0 || i >= int64(len(p.pending)) {
		return nil
	}
	op := p.pending[i]
	if op.entryID != entryID {
		panic(fmt.Sprintf("ledger: pending adds out of order: slot %d holds e%d, want e%d", i, op.entryID, entryID))
	}
	return op
}

// position returns bookie's position in op's write set within the current
// ensemble, or -1 if bookie no longer stores op there (a reply from a
// replaced bookie, which must be ignored).
func (p *pipeline) position(op *pendingAdd, bookie metadata.BookieID) int {
	for pos := range p.q.WriteQuorum {
		if p.ensemble[p.q.WriteSetIndex(op.entryID, pos)] == bookie {
			return pos
		}
	}
	return -1
}

// indexOf returns bookie's index in the current ensemble, or -1.
func (p *pipeline) indexOf(bookie metadata.BookieID) int {
	return slices.Index(p.ensemble, bookie)
}

func (p *pipeline) ack(op *pendingAdd, pos int) {
	if !op.acked[pos] {
		op.acked[pos] = true
		op.acks++
	}
}

// quorate reports whether op has its ack quorum: Qa acks and, with a
// fault-domain rule, acking bookies (in the current ensemble) that meet it
// (Java's PendingAddOp "completed"). Acks are only ever counted for the
// current ensemble, so the bookies judged are those holding op's write-set
// positions now.
func (p *pipeline) quorate(op *pendingAdd) bool {
	if op.acks < p.q.AckQuorum {
		return false
	}
	if p.adhere == nil || (p.wholeSetSuffices && op.acks == len(op.acked)) {
		return true
	}
	return p.adhere(p.ackedBookies(op))
}

// ackedBookies returns the bookies of op's write set in the current
// ensemble that have acked it, in p.scratch: valid until the next call.
func (p *pipeline) ackedBookies(op *pendingAdd) []metadata.BookieID {
	p.scratch = p.scratch[:0]
	for pos, a := range op.acked {
		if a {
			p.scratch = append(p.scratch, p.ensemble[p.q.WriteSetIndex(op.entryID, pos)])
		}
	}
	return p.scratch
}

// replaceEnsemble switches every pending add to ensemble and returns the
// resends: each pending add whose write set holds a replaced index loses
// that index's ack and is sent to the new bookie. Every ack is removed
// before the caller may acknowledge anything (issue #3005: Java completed
// adds in the middle of this pass, acknowledging an entry whose ack had
// come from a bookie the new metadata no longer maps it to).
func (p *pipeline) replaceEnsemble(ensemble []metadata.BookieID) []SendAdd {
	var changed []int
	for i := range p.ensemble {
		if p.ensemble[i] != ensemble[i] {
			changed = append(changed, i)
		}
	}
	p.ensemble = slices.Clone(ensemble)
	p.writeSets = nil // rebuilt for the new ensemble; the old slices stay as they were
	var sends []SendAdd
	for _, op := range p.pending {
		var to []metadata.BookieID
		for _, idx := range changed {
			pos := p.q.WriteSetPosition(op.entryID, idx)
			if pos < 0 {
				continue
			}
			if op.acked[pos] {
				op.acked[pos] = false
				op.acks--
			}
			to = append(to, ensemble[idx])
		}
		if len(to) > 0 {
			sends = append(sends, op.send(to))
		}
	}
	return sends
}

// popAcknowledged removes and appends to dst, in order, the adds at the
// head of the queue that have their ack quorum (quorate: Qa acks, in enough fault
// domains when the rule is on): entry e goes only when every entry below
// it has gone (spec §1.4.4). The caller must not call it while an ensemble
// change is running. The LAC advances to the last one returned.
func (p *pipeline) popAcknowledged(dst []*pendingAdd) []*pendingAdd {
	n := 0
	for n < len(p.pending) && p.quorate(p.pending[n]) {
		if p.pending[n].entryID != p.lac+1 {
			if p.explicit {
				break // a gap: entry lac+1 has not been written yet
			}
			panic(fmt.Sprintf("ledger: acknowledging e%d after LAC %d", p.pending[n].entryID, p.lac))
		}
		p.lac = p.pending[n].entryID
		if p.explicit {
			// Entries carry lengths in submission order, not entry order
			// (pushAt): the acknowledged length is the sum of payloads.
			p.lacLength += int64(len(p.pending[n].payload))
		} else {
			p.lacLength = p.pending[n].length
		}
		n++
	}
	if n == 0 {
		return dst
	}
	done := append(dst, p.pending[:n]...)
	// Re-slice rather than shift the rest down: with thousands of adds in
	// flight, moving the tail on every acknowledgement costs O(pending) per
	// ack. append reallocates (copying only the live tail) once the
	// capacity behind the head is used up.
	clear(p.pending[:n])
	p.pending = p.pending[n:]
	return done
}

// drain removes every pending add, forgets their lengths, and returns them
// in order; lastAddPushed goes back to the LAC, so the length is that of the
// acknowledged entries.
func (p *pipeline) drain() []*pendingAdd {
	out := p.pending
	p.pending = nil
	for _, op := range out {
		p.length -= int64(len(op.payload))
	}
	p.lastAddPushed = p.lac
	return out
}
