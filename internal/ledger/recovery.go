package ledger

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// RecoveryConfig configures a Recovery.
type RecoveryConfig struct {
	LedgerID int64
	// Metadata and Version are the ledger's metadata as read, after the
	// caller checked the password (a wrong one must fail before anything
	// changes). The recovery keeps a copy.
	Metadata *metadata.LedgerMetadata
	Version  metadata.Version
	Verifier Verifier
	// Placement picks replacements for bookies that fail a rewrite.
	Placement placement.Policy
	Writable  []metadata.BookieID
	// ReadAhead is how many entries are read at once past the last one
	// decided (Java's recoveryReadBatchSize); 0 means 1.
	ReadAhead int
	// AckedAdhering is WriterConfig.AckedAdhering for the rewrites: with
	// it, a rewrite is acknowledged only when its acking bookies meet the
	// fault-domain rule, as Java's recovery adds (PendingAddOps with
	// isRecoveryAdd) check enforceMinNumFaultDomainsForWrite like any add.
	// A rewrite short of it waits for more acks of its write set, but a
	// rewrite that every bookie of its write set has stored counts as
	// written even when they miss the rule: the placement cannot do
	// better, and the entry has Qw >= Qa copies. This deliberately
	// differs from Java, whose recovery add then never completes (with
	// every bookie in one rack, e.g. a rack-aware policy without
	// locations, recovery would hang forever holding the ledger: the
	// AutoRecovery worker's context has no deadline). A writer keeps
	// Java's behaviour (it can still change its ensemble).
	AckedAdhering func(acked []metadata.BookieID) bool

	// Unsafe switches off the fixes for the two protocol defects the TLA+
	// model found, so the simulator can show the violations. The zero value
	// is the safe protocol; production code never sets these.
	Unsafe UnsafeKnobs
}

// UnsafeKnobs disable known fixes (DESIGN.md §6, §7.3). Simulator only.
type UnsafeKnobs struct {
	// NoFenceOnRecoveryReads sends recovery entry reads without the fence
	// flag (issue #2614): a bookie that answered "no such entry" may then
	// accept the old writer's add, which can reach Qa acks after recovery
	// closed below it.
	NoFenceOnRecoveryReads bool
	// StartAtLACOnly starts reading at the highest LAC seen, without
	// flooring it at the last fragment's first entry − 1 (issue #2615):
	// recovery then re-reads older fragments and can build an ensemble at a
	// key below the last fragment's.
	StartAtLACOnly bool
	// PiggybackRecoveryLAC lets rewrites carry the recovery's own LAC, as
	// Apache BookKeeper 4.17's do, instead of its start point. That LAC
	// may count acks from a recovery-local replacement bookie, which the
	// stored metadata does not name: if this recovery dies before its
	// close, the next one starts above entries stored on fewer than Qa
	// bookies of their write set (issue 16 item 1). It may also pass the
	// end another recovery or the writer closes at, handing readers
	// entries past the end.
	PiggybackRecoveryLAC bool
}

// Recovery recovers and closes a ledger whose writer may be gone (spec §4):
//
//  1. CAS the metadata to IN_RECOVERY (or join a recovery in progress; a
//     CLOSED ledger needs nothing).
//  2. Fence: a fencing LAC read of -1 to every bookie of the last ensemble,
//     until the coverage rule holds.
//  3. Start at max(LAC, first entry of the last fragment − 1).
//  4. Read forward with fencing reads, each entry from its write set in the
//     metadata as it was at the fence: one valid copy means the entry exists
//     and is rewritten with RECOVERY_ADD to its write set in the recovery's
//     current ensemble (Qa acks, in order); Qw − Qa + 1 explicit negatives
//     mean it does not exist, and the end is the entry before; anything else
//     fails the recovery.
//  5. Close by CAS while the state is IN_RECOVERY, adding the ensembles
//     that rewrites moved to (kept in memory until then); if someone closed
//     first, adopt their end.
//
// Inputs: Start, Step(ReadResponse | AddResponse | MetadataWritten |
// MetadataRead | WritableBookies). Outputs: WriteMetadata, ReadMetadata,
// SendRead, SendAdd, then one RecoveryComplete. On failure the ledger stays
// IN_RECOVERY, and recovery may be run again by anyone.
type Recovery struct {
	cfg RecoveryConfig
	q   quorum.Params

	md       *metadata.LedgerMetadata
	version  metadata.Version
	writable []metadata.BookieID
	phase    recoveryPhase
	// meta is the outstanding metadata operation (one at a time).
	meta     recoveryMeta
	proposed *metadata.LedgerMetadata

	fence *ReadLAC
	// snapshot is the metadata at the fence; recovery reads always use its
	// ensembles, whatever the rewrites do (spec §4.1 step 4).
	snapshot *metadata.LedgerMetadata

	// p holds the rewrites; p.lac is the recovery LAC.
	p pipeline
	// failed are the bookies that failed a rewrite; never chosen again.
	failed []metadata.BookieID
	// localEnsembles are the ensembles rewrites moved to, by first entry,
	// written to the metadata only at close (spec §4.6).
	localEnsembles []metadata.Segment

	// reads are the entries being read, by entry id; nextRead is the lowest
	// entry not yet decided, readDone is set when the end is found.
	reads    map[int64]*recoveryRead
	nextRead int64
	readDone bool

	// lengthProbe reads the start entry when the LAC answer's length is not
	// the length through it (the answer came from a later entry), so that a
	// recovery that finds nothing to rewrite still closes with the exact
	// length. Java closes with the LAC answer's length in that case. nil
	// when not needed or done.
	lengthProbe *recoveryRead
	probeID     int64

	effects []Effect

	// inv is what the invariants build's checks remember (invariants.go).
	inv recoveryChecks
}

type recoveryPhase uint8

const (
	phaseMark recoveryPhase = iota
	phaseFence
	phaseRead
	phaseClose
	phaseDone
)

type recoveryMeta uint8

const (
	recoveryMetaNone recoveryMeta = iota
	recoveryMetaWrite
	recoveryMetaRead
)

// recoveryRead is one entry's fenced read, sent to its whole write set.
type recoveryRead struct {
	replicas  []metadata.BookieID
	answered  []bool
	negatives int
	entry     *digest.Entry
	absent    bool
	lastErr   error
}

func (rr *recoveryRead) decided() bool { return rr.entry != nil || rr.absent }

// NewRecovery returns a Recovery; Start begins it.
func NewRecovery(cfg RecoveryConfig) *Recovery {
	md := cfg.Metadata
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = 1
	}
	return &Recovery{
		cfg:      cfg,
		q:        quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum},
		md:       md.Clone(),
		version:  cfg.Version,
		writable: slices.Clone(cfg.Writable),
		reads:    map[int64]*recoveryRead{},
	}
}

// Ready returns the queued effects and forgets them.
func (r *Recovery) Ready() []Effect {
	out := r.effects
	r.effects = nil
	if invariants {
		r.checkInvariants(out)
	}
	return out
}

func (r *Recovery) emit(e ...Effect) { r.effects = append(r.effects, e...) }

// Done reports whether the RecoveryComplete has been queued.
func (r *Recovery) Done() bool { return r.phase == phaseDone }

// TickInterval is zero: recovery has no timers of its own (Ticks are
// ignored); its requests time out in the transport.
func (r *Recovery) TickInterval() time.Duration { return 0 }

// LastAddConfirmed returns the recovery LAC: the start point once fenced,
// then the highest entry rewritten with all lower ones.
func (r *Recovery) LastAddConfirmed() int64 { return r.p.lac }

// Start begins with step 1.
func (r *Recovery) Start() { r.markInRecovery() }

// markInRecovery applies "recovery start" to the current copy of the
// metadata (spec/metadata.md §1.6).
func (r *Recovery) markInRecovery() {
	switch r.md.State {
	case metadata.LedgerClosed:
		r.complete(RecoveryComplete{Metadata: r.md, Version: r.version})
	case metadata.LedgerInRecovery:
		r.startFence()
	default:
		md := r.md.Clone()
		md.State = metadata.LedgerInRecovery
		r.propose(md)
	}
}

func (r *Recovery) propose(md *metadata.LedgerMetadata) {
	r.proposed = md
	r.meta = recoveryMetaWrite
	r.emit(WriteMetadata{Metadata: md, Expected: r.version})
}

func (r *Recovery) startFence() {
	r.phase = phaseFence
	r.snapshot = r.md.Clone()
	r.fence = NewReadLAC(ReadLACConfig{LedgerID: r.cfg.LedgerID, Metadata: r.snapshot, Verifier: r.cfg.Verifier, Fence: true})
	r.fence.Start()
	r.drainFence()
}

// drainFence moves the fencing read's effects out, acting on its result.
func (r *Recovery) drainFence() {
	for _, eff := range r.fence.Ready() {
		res, ok := eff.(LACComplete)
		if !ok {
			r.emit(eff)
			continue
		}
		if res.Err != nil {
			r.fail(fmt.Errorf("fence: %w", res.Err))
			return
		}
		r.startReading(res)
	}
}

// startReading sets the recovery LAC to the start point (step 3) and reads
// ahead.
func (r *Recovery) startReading(res LACComplete) {
	start := res.LAC
	if !r.cfg.Unsafe.StartAtLACOnly {
		// Older fragments are immutable and their entries acknowledged: the
		// fix for issue #2615.
		start = max(start, r.snapshot.LastEnsemble().FirstEntryID-1)
	}
	r.phase = phaseRead
	r.p = newPipeline(r.q, r.md.LastEnsemble().Ensemble, start, res.Length)
	r.p.adhere = r.cfg.AckedAdhering
	r.p.wholeSetSuffices = true
	if !r.cfg.Unsafe.PiggybackRecoveryLAC {
		// Rewrites carry the start point as their LAC, never the
		// recovery's own: acks from a bookie that replaced a failed one in
		// this recovery's memory only are not acks from the stored
		// metadata's ensemble, and another recovery (or the writer) may
		// close below what this one rewrites. Every entry up to the start
		// is acknowledged on the stored metadata (the fenced LAC is, by
		// induction, at most what the writer acknowledged; entries below
		// the last fragment are immutable), so no stored LAC ever passes
		// the entries on Qa bookies of their stored write sets, or an end.
		r.p.lacCap = start
	}
	r.nextRead = start + 1
	if invariants {
		r.inv.startReading(res.LAC, start)
	}
	if start >= 0 && res.EntryID != start {
		r.lengthProbe, r.probeID = r.newRead(start), start
		r.emit(SendRead{Bookies: slices.Clone(r.lengthProbe.replicas), EntryID: start, Fence: !r.cfg.Unsafe.NoFenceOnRecoveryReads})
	}
	r.readAhead()
}

func (r *Recovery) newRead(id int64) *recoveryRead {
	ensemble := r.snapshot.EnsembleAt(id)
	rr := &recoveryRead{answered: make([]bool, r.q.WriteQuorum)}
	for _, idx := range r.q.WriteSet(id) {
		rr.replicas = append(rr.replicas, ensemble[idx])
	}
	return rr
}

// handleLengthProbe takes the start entry's length from the first valid
// copy. If none comes, the LAC answer's length stays (Java's behaviour).
func (r *Recovery) handleLengthProbe(ev ReadResponse) {
	rr := r.lengthProbe
	pos := slices.Index(rr.replicas, ev.Bookie)
	if pos < 0 || rr.answered[pos] {
		return
	}
	rr.answered[pos] = true
	if ev.Err == nil {
		if e, err := r.cfg.Verifier.VerifyEntry(ev.Body, r.cfg.LedgerID, ev.EntryID); err == nil {
			if r.p.lastAddPushed == ev.EntryID {
				r.p.length = e.Length // nothing rewritten yet: fix the base
			}
			r.lengthProbe = nil
		}
	}
	if r.lengthProbe != nil && !slices.Contains(rr.answered, false) {
		r.lengthProbe = nil
	}
	r.maybeClose()
}

// readAhead keeps ReadAhead entries in flight beyond the last decided one.
func (r *Recovery) readAhead() {
	for id := r.nextRead; id < r.nextRead+int64(r.cfg.ReadAhead) && !r.readDone; id++ {
		if _, ok := r.reads[id]; ok {
			continue
		}
		rr := r.newRead(id)
		r.reads[id] = rr
		// Every recovery read fences (issue #2614): a bookie that answers
		// "no such entry" is fenced before it answers, so it can never
		// accept that entry from the old writer afterwards.
		r.emit(SendRead{Bookies: slices.Clone(rr.replicas), EntryID: id, Fence: !r.cfg.Unsafe.NoFenceOnRecoveryReads})
	}
}

// Step feeds one event.
func (r *Recovery) Step(ev Event) {
	if r.phase == phaseDone {
		return
	}
	switch ev := ev.(type) {
	case ReadResponse:
		if ev.EntryID == -1 {
			if r.phase == phaseFence {
				r.fence.Step(ev)
				r.drainFence()
			}
			return
		}
		if r.phase == phaseRead {
			if r.lengthProbe != nil && ev.EntryID == r.probeID {
				r.handleLengthProbe(ev)
				return
			}
			r.handleRead(ev)
		}
	case AddResponse:
		if r.phase == phaseRead {
			r.handleRewrite(ev)
		}
	case MetadataWritten:
		r.handleMetadataWritten(ev)
	case MetadataRead:
		r.handleMetadataRead(ev)
	case WritableBookies:
		r.writable = slices.Clone(ev.Bookies)
	case Tick:
	default:
		panic(fmt.Sprintf("ledger: Recovery cannot step %T", ev))
	}
}

// handleRead applies the per-entry rule of spec §4.4.
func (r *Recovery) handleRead(ev ReadResponse) {
	rr, ok := r.reads[ev.EntryID]
	if !ok || rr.decided() {
		return
	}
	pos := slices.Index(rr.replicas, ev.Bookie)
	if pos < 0 || rr.answered[pos] {
		return
	}
	rr.answered[pos] = true
	switch err := ev.Err; {
	case err == nil:
		e, verr := r.cfg.Verifier.VerifyEntry(ev.Body, r.cfg.LedgerID, ev.EntryID)
		if verr == nil {
			rr.entry = &e
			if invariants {
				r.inv.saw(e.LAC)
			}
			break
		}
		rr.lastErr = fmt.Errorf("bookie %s: %w", ev.Bookie, verr)
	case isNegative(err):
		rr.negatives++
		rr.absent = rr.negatives >= r.q.NegativeThreshold()
	default:
		rr.lastErr = fmt.Errorf("bookie %s: %w", ev.Bookie, err)
	}
	if !rr.decided() && !slices.Contains(rr.answered, false) {
		err := rr.lastErr
		if err == nil {
			err = ErrNotAnswered
		}
		r.fail(fmt.Errorf("entry %d: neither found nor proven absent: %w", ev.EntryID, err))
		return
	}
	r.processReads()
}

// processReads acts on decided entries in order: rewrite what exists, stop
// at the first absent one. Entries read past the end are ignored (spec
// §4.4: an orphan after a gap is not part of the ledger).
func (r *Recovery) processReads() {
	for !r.readDone {
		rr, ok := r.reads[r.nextRead]
		if !ok || !rr.decided() {
			break
		}
		delete(r.reads, r.nextRead)
		if rr.absent {
			r.readDone = true
			clear(r.reads)
			break
		}
		if rr.entry.EntryID != r.p.lastAddPushed+1 {
			panic(fmt.Sprintf("ledger: recovery read e%d after pushing e%d", rr.entry.EntryID, r.p.lastAddPushed))
		}
		// The rewrite carries the entry's own length (Java subtracts the
		// payload and lets the add put it back).
		r.p.length = rr.entry.Length - int64(len(rr.entry.Payload))
		_, send := r.p.push(rr.entry.Payload, true)
		r.emit(send)
		r.nextRead++
	}
	r.readAhead()
	r.maybeClose()
}

// handleRewrite counts RECOVERY_ADD acks; a failed bookie is replaced in
// memory (spec §4.6).
func (r *Recovery) handleRewrite(ev AddResponse) {
	op := r.p.find(ev.EntryID)
	if op == nil {
		return
	}
	pos := r.p.position(op, ev.Bookie)
	if pos < 0 {
		return
	}
	switch {
	case ev.Err == nil:
		r.p.ack(op, pos)
		r.p.popAcknowledged(nil)
		r.maybeClose()
	case isUnrecoverableAddError(ev.Err):
		r.fail(fmt.Errorf("rewrite of entry %d to bookie %s: %w", ev.EntryID, ev.Bookie, ev.Err))
	default:
		r.replaceBookie(r.q.WriteSetIndex(op.entryID, pos), ev.Bookie)
	}
}

// replaceBookie swaps the bookie at idx of the recovery's current ensemble
// for a writable one, records the ensemble at recovery LAC + 1, and resends
// the pending rewrites that lost it.
func (r *Recovery) replaceBookie(idx int, bookie metadata.BookieID) {
	r.failed = append(r.failed, bookie)
	ensemble := slices.Clone(r.p.ensemble)
	b, err := r.cfg.Placement.ReplaceBookie(ensemble, idx, r.writable, r.failed)
	if err != nil {
		r.fail(fmt.Errorf("rewrite: %w", err))
		return
	}
	ensemble[idx] = b
	first := r.p.lac + 1
	if n := len(r.localEnsembles); n > 0 && r.localEnsembles[n-1].FirstEntryID == first {
		r.localEnsembles[n-1].Ensemble = ensemble
	} else {
		r.localEnsembles = append(r.localEnsembles, metadata.Segment{FirstEntryID: first, Ensemble: ensemble})
	}
	for _, s := range r.p.replaceEnsemble(ensemble) {
		r.emit(s)
	}
	// Removing acks never completes anything; popAcknowledged is not needed.
}

// maybeClose starts the close once the end is known and every rewrite is
// acknowledged.
func (r *Recovery) maybeClose() {
	if r.phase != phaseRead || !r.readDone || len(r.p.pending) > 0 || r.lengthProbe != nil {
		return
	}
	r.phase = phaseClose
	r.runClose()
}

// runClose applies "recovery close" to the current copy of the metadata.
func (r *Recovery) runClose() {
	switch r.md.State {
	case metadata.LedgerClosed:
		// Someone closed first (a racing recovery, or the writer): the
		// stored end wins.
		r.complete(RecoveryComplete{Metadata: r.md, Version: r.version})
		return
	case metadata.LedgerOpen:
		r.fail(fmt.Errorf("%w: metadata went back to OPEN during recovery", ErrMetadataVersion))
		return
	}
	md := r.md.Clone()
	for _, seg := range r.localEnsembles {
		last := &md.Ensembles[len(md.Ensembles)-1]
		switch {
		case seg.FirstEntryID == last.FirstEntryID:
			last.Ensemble = slices.Clone(seg.Ensemble)
		case seg.FirstEntryID > last.FirstEntryID:
			md.Ensembles = append(md.Ensembles, metadata.Segment{FirstEntryID: seg.FirstEntryID, Ensemble: slices.Clone(seg.Ensemble)})
		default:
			r.fail(fmt.Errorf("%w: an ensemble was added at entry %d during recovery, above the recovery's %d",
				ErrMetadataVersion, last.FirstEntryID, seg.FirstEntryID))
			return
		}
	}
	md.State = metadata.LedgerClosed
	md.LastEntryID = r.p.lac
	md.Length = r.p.length
	r.propose(md)
}

func (r *Recovery) handleMetadataWritten(ev MetadataWritten) {
	if r.meta != recoveryMetaWrite {
		panic("ledger: recovery got MetadataWritten with no write outstanding")
	}
	proposed := r.proposed
	r.proposed, r.meta = nil, recoveryMetaNone
	switch {
	case ev.Err == nil:
		r.md, r.version = proposed, ev.Version
		if r.phase == phaseMark {
			r.startFence()
		} else {
			r.complete(RecoveryComplete{Metadata: r.md, Version: r.version})
		}
	case errors.Is(ev.Err, metadata.ErrBadVersion):
		r.meta = recoveryMetaRead
		r.emit(ReadMetadata{})
	default:
		r.fail(fmt.Errorf("metadata store: %w", ev.Err))
	}
}

func (r *Recovery) handleMetadataRead(ev MetadataRead) {
	if r.meta != recoveryMetaRead {
		panic("ledger: recovery got MetadataRead with no read outstanding")
	}
	r.meta = recoveryMetaNone
	if ev.Err != nil {
		r.fail(fmt.Errorf("metadata store: %w", ev.Err))
		return
	}
	r.md, r.version = ev.Metadata, ev.Version
	if r.phase == phaseMark {
		r.markInRecovery()
	} else {
		r.runClose()
	}
}

func (r *Recovery) fail(err error) {
	r.complete(RecoveryComplete{Err: fmt.Errorf("%w: ledger %d: %w", ErrLedgerRecovery, r.cfg.LedgerID, err)})
}

func (r *Recovery) complete(res RecoveryComplete) {
	r.phase = phaseDone
	clear(r.reads)
	r.emit(res)
}
