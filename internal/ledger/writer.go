package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// LedgerID is the ledger's id.
	LedgerID int64
	// Metadata is the ledger's metadata as created (OPEN, one ensemble);
	// Version is its version in the store. The writer keeps a copy.
	Metadata *metadata.LedgerMetadata
	Version  metadata.Version
	// Placement picks replacement bookies for ensemble changes.
	Placement placement.Policy
	// Writable is the initial set of writable bookies; WritableBookies
	// events replace it.
	Writable []metadata.BookieID
	// DeferredSync writes with WriteFlagDeferredSync (spec §1.8): bookies
	// may acknowledge before fsync, so acknowledged adds do not move the
	// LAC; Force does, once every bookie of the ensemble has synced. Any
	// bookie failure stops the writer (no ensemble change).
	DeferredSync bool
	// ExplicitLACInterval is the writer's TickInterval: each Tick sends
	// the LAC explicitly if it moved (FlushLAC). Zero: no explicit LAC.
	ExplicitLACInterval time.Duration

	// AddQuorumTimeout, when positive, fails an add not acknowledged by an
	// ack quorum within it (Java's addEntryQuorumTimeoutSec): every pending
	// add fails with ErrAddQuorumTimeout and the ledger is closed at the LAC.
	// The writer then ticks at most AddQuorumTimeout/4 apart.
	AddQuorumTimeout time.Duration
	// DelayEnsembleChange keeps a failed bookie in the ensemble while every
	// add can still reach its ack quorum without it (Java's
	// delayEnsembleChange); writer_options.go says how. Ignored with
	// DeferredSync.
	DelayEnsembleChange bool
	// MaxEnsembleChanges bounds the ensemble changes of the writer (Java's
	// maxNumEnsembleChanges): a failure needing one more fails the pending
	// adds with ErrTooManyEnsembleChanges and closes the ledger. 0: no
	// limit; NoEnsembleChanges: none allowed.
	MaxEnsembleChanges int
	// ExplicitIDs makes the caller choose entry ids: entries are added
	// with WriteAt, in any order, and Append fails (Java's
	// LedgerHandleAdv; writer_adv.go).
	ExplicitIDs bool
	// AckedAdhering, when not nil, is the fault-domain rule of the
	// ledger's placement policy (placement.AckedAdherence; Java's
	// enforceMinNumFaultDomainsForWrite with
	// areAckedBookiesAdheringToPlacementPolicy): an add has its ack quorum
	// only when it has Qa acks and the bookies that acked it, in the
	// current ensemble, satisfy AckedAdhering. An add short of it waits for
	// more acks of its write set; it counts as without quorum for
	// AddQuorumTimeout, for DelayEnsembleChange and for bookie errors that
	// stop the writer. The predicate must be pure and monotone (more acked
	// bookies never turn true into false) and must not keep its argument:
	// the writer asks it only when an ack arrives, so an answer that changed
	// between acks could leave an add waiting with nothing to wake it.
	AckedAdhering func(acked []metadata.BookieID) bool
	// AddRecords, when set, recycles the records of acknowledged adds
	// (see AddRecords); nil: each add's record is garbage once done.
	AddRecords *AddRecords
}

// Writer is the write handle of one ledger as a state machine: it numbers
// appended entries, sends them to their write sets, acknowledges them in
// order, replaces failed bookies by ensemble change, stops when the ledger
// is fenced, and closes the ledger (spec §1, §2).
//
// Inputs: Append, Close, Force, Step(AddResponse | ForceResponse |
// MetadataWritten | MetadataRead | WritableBookies | Tick). Outputs (Ready):
// SendAdd, SendForce, SendWriteLAC, WriteMetadata, ReadMetadata,
// AddComplete, ForceComplete, CloseComplete.
//
// Guarantees:
//   - AddCompletes come in entry order; the successful ones are contiguous
//     from entry 0 and each acknowledged entry had Qa acks from its write
//     set in the current ensemble, which the metadata store holds (DESIGN.md
//     §6 invariant 5), from bookies meeting WriterConfig.AckedAdhering
//     when it is set.
//   - Nothing is acknowledged while an ensemble change is running: the new
//     fragment starts at LAC+1, so the LAC must not move until the store
//     holds the new ensemble (issues #1591, #4651, #4097).
//   - After the writer learns the ledger is fenced or closed, every pending
//     add completes with the error and every later Append fails at once.
type Writer struct {
	ledgerID  int64
	q         quorum.Params
	placement placement.Policy
	writable  []metadata.BookieID

	// md and version are the writer's copy of the metadata and its version
	// in the store.
	md      *metadata.LedgerMetadata
	version metadata.Version

	p pipeline

	// appendErr, once set, is the error every later Append fails with
	// (ErrLedgerFenced or ErrLedgerClosed). Set exactly when the writer stops.
	appendErr error

	// failed holds bookie failures (ensemble index → bookie) not yet
	// handled by an ensemble change: those that arrived during a change, and
	// errors for entries already acknowledged (handled at the next Append,
	// as Java's "delayed write failure").
	failed map[int]metadata.BookieID
	// lastFailure is the error of the latest bookie failure, told with a
	// failed ensemble change (a refused TLS certificate, say).
	lastFailure error
	// changing is true while an ensemble change runs. No add may be
	// acknowledged while it is true.
	changing bool

	close closeProgress
	// closeResult is the CloseComplete once close is done.
	closeResult CloseComplete

	// lacInterval is the TickInterval (WriterConfig.ExplicitLACInterval).
	lacInterval time.Duration

	// deferred: DEFERRED_SYNC (WriterConfig.DeferredSync).
	deferred bool
	// forces are the outstanding forces by id.
	forces map[int64]*forceOp
	// explicitSent is the highest LAC sent by WRITE_LAC.
	explicitSent int64

	// meta is the outstanding metadata operation, if any.
	meta metaOp
	// proposed is the value of the outstanding WriteMetadata.
	proposed *metadata.LedgerMetadata

	effects []Effect
	// acked is maybeAcknowledge's scratch space.
	acked []*pendingAdd

	// inv is what the invariants build's checks remember (invariants.go).
	inv writerChecks

	// opts is the state of the options in writer_options.go.
	opts writerOptions
}

type closeProgress uint8

const (
	closeNone    closeProgress = iota
	closeWanted                // to run once no metadata operation is outstanding
	closeRunning               // CAS loop in progress
	closeDone
)

// metaOp names the outstanding metadata operation and what it is for.
type metaOp uint8

const (
	metaNone metaOp = iota
	metaWriteChange
	metaReadChange
	metaWriteClose
	metaReadClose
)

// NewWriter returns a Writer for an OPEN ledger with no entries.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	md := cfg.Metadata
	if md == nil || md.State != metadata.LedgerOpen {
		return nil, fmt.Errorf("ledger %d: a writer needs OPEN metadata", cfg.LedgerID)
	}
	if err := md.Validate(); err != nil {
		return nil, fmt.Errorf("ledger %d: %w", cfg.LedgerID, err)
	}
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	w := &Writer{
		ledgerID:  cfg.LedgerID,
		q:         q,
		placement: cfg.Placement,
		writable:  slices.Clone(cfg.Writable),
		md:        md.Clone(),
		version:   cfg.Version,
		p:         newPipeline(q, md.LastEnsemble().Ensemble, -1, 0),
		failed:    map[int]metadata.BookieID{},
		deferred:  cfg.DeferredSync,
		forces:    map[int64]*forceOp{},

		lacInterval: cfg.ExplicitLACInterval,
	}
	w.p.deferred = cfg.DeferredSync
	w.p.explicit = cfg.ExplicitIDs
	w.p.adhere = cfg.AckedAdhering
	w.p.records = cfg.AddRecords
	w.explicitSent = -1
	if err := w.initOptions(cfg); err != nil {
		return nil, err
	}
	return w, nil
}

// LastAddConfirmed returns the LAC: the highest acknowledged entry, -1 if
// none; with DeferredSync, the highest entry made durable by a Force.
func (w *Writer) LastAddConfirmed() int64 {
	lac, _ := w.p.visibleLAC()
	return lac
}

// LastAddPushed returns the highest entry id handed out by Append.
func (w *Writer) LastAddPushed() int64 { return w.p.lastAddPushed }

// Length returns the cumulative payload length of the entries pushed.
func (w *Writer) Length() int64 { return w.p.length }

// Metadata returns the writer's copy of the metadata and its version. The
// value is shared: do not modify it.
func (w *Writer) Metadata() (*metadata.LedgerMetadata, metadata.Version) { return w.md, w.version }

// Err returns the error Append fails with, nil while the writer is open.
func (w *Writer) Err() error { return w.appendErr }

// Done reports whether the close has finished (its CloseComplete was
// queued); the writer then only answers Close with the same result.
func (w *Writer) Done() bool { return w.close == closeDone }

// TickInterval is WriterConfig.ExplicitLACInterval, or shorter with an
// AddQuorumTimeout (writerOptions.tick).
func (w *Writer) TickInterval() time.Duration { return w.opts.tick }

// Ready returns the effects queued since the last call, in order, and
// forgets them.
func (w *Writer) Ready() []Effect {
	out := w.effects
	w.effects = nil
	if invariants {
		w.checkInvariants(out)
	}
	return out
}

// maxKeptEffects bounds the capacity of the effect buffer ReadyAppend
// keeps.
const maxKeptEffects = 1024

// ReadyAppend is Ready appending the effects to dst: the writer keeps its
// own buffer for the next effects, so a shell that reuses dst allocates no
// slice per call.
func (w *Writer) ReadyAppend(dst []Effect) []Effect {
	start := len(dst)
	dst = append(dst, w.effects...)
	clear(w.effects)
	w.effects = w.effects[:0]
	if cap(w.effects) > maxKeptEffects {
		w.effects = nil // a burst's buffer (a stop failing every add) is not kept
	}
	if invariants {
		w.checkInvariants(dst[start:])
	}
	return dst
}

func (w *Writer) emit(e ...Effect) { w.effects = append(w.effects, e...) }

// Append assigns the next entry id to payload, queues the SendAdd for its
// write set and returns the id. The writer keeps payload until the add
// completes; the caller must not modify it. If the writer has stopped,
// Append returns -1 and ErrLedgerFenced or ErrLedgerClosed at once.
func (w *Writer) Append(payload []byte) (int64, error) {
	if w.p.explicit {
		return -1, errAppendExplicit
	}
	if w.appendErr != nil {
		return -1, w.appendErr
	}
	op, send := w.p.push(payload, false)
	w.emit(send)
	w.notePush(op.entryID)
	if len(w.failed) > 0 && !w.changing {
		// A bookie failed after its adds were acknowledged: replace it now,
		// so this entry does not wait on it (Java's
		// maybeHandleDelayedWriteBookieFailure).
		w.startEnsembleChange()
	}
	return op.entryID, nil
}

// Close fails every pending add with ErrLedgerClosed and closes the ledger
// at the LAC by CAS (spec §1.7). The result is a CloseComplete; if close is
// already done, that CloseComplete is queued again.
func (w *Writer) Close() {
	switch w.close {
	case closeDone:
		w.emit(w.closeResult)
		return
	case closeWanted, closeRunning:
		return
	}
	w.stop(ErrLedgerClosed, ErrLedgerClosed)
	w.close = closeWanted
	w.maybeRunClose()
}

// StepAdd is Step(ev) for an AddResponse, without boxing it into an
// Event (an allocation per bookie per add on the client's path).
func (w *Writer) StepAdd(ev AddResponse) { w.handleAddResponse(ev) }

// Step feeds one event to the writer.
func (w *Writer) Step(ev Event) {
	switch ev := ev.(type) {
	case AddResponse:
		w.handleAddResponse(ev)
	case MetadataWritten:
		w.handleMetadataWritten(ev)
	case MetadataRead:
		w.handleMetadataRead(ev)
	case WritableBookies:
		w.writable = slices.Clone(ev.Bookies)
	case ForceResponse:
		w.handleForceResponse(ev)
	case Tick:
		w.tick()
	default:
		panic(fmt.Sprintf("ledger: writer cannot step %T", ev))
	}
}

func (w *Writer) handleAddResponse(ev AddResponse) {
	op := w.p.find(ev.EntryID)
	if op == nil {
		// Acknowledged or failed already. A bookie error for an
		// acknowledged entry changes nothing for it, but the bookie is
		// suspect: replace it at the next Append.
		if ev.Err != nil && w.appendErr == nil && !isUnrecoverableAddError(ev.Err) && ev.EntryID <= w.p.lac && !w.opts.delay {
			if idx := w.p.indexOf(ev.Bookie); idx >= 0 {
				w.failed[idx], w.lastFailure = ev.Bookie, ev.Err
			}
		}
		return
	}
	pos := w.p.position(op, ev.Bookie)
	if pos < 0 {
		return // from a bookie that no longer holds this entry's index
	}
	switch {
	case ev.Err == nil:
		w.p.ack(op, pos)
		w.maybeAcknowledge()
	case isUnrecoverableAddError(ev.Err):
		if w.p.quorate(op) {
			return // the add already has its quorum (spec §4.7)
		}
		w.handleUnrecoverable(ev.Err)
	case w.opts.delay:
		w.delayedFailure(op, pos, ev)
	default:
		w.failed[w.q.WriteSetIndex(op.entryID, pos)], w.lastFailure = ev.Bookie, ev.Err
		if !w.changing {
			w.startEnsembleChange()
		}
	}
}

// maybeAcknowledge completes the adds at the head of the queue that have
// their quorum, unless an ensemble change is running.
func (w *Writer) maybeAcknowledge() {
	if w.changing {
		return
	}
	done := w.p.popAcknowledged(w.acked[:0])
	for _, op := range done {
		w.emit(AddComplete{EntryID: op.entryID})
	}
	// The AddCompletes hold ids, not the pendingAdds: nothing refers to
	// them any more.
	w.p.recycle(done)
	clear(done)
	w.acked = done[:0]
}

// handleUnrecoverable reacts to EFENCED, EUA or EBADREQ from a bookie (spec
// §1.9): pending adds fail; if the writer's metadata says IN_RECOVERY it
// stops without closing (closing could cut off entries the recoverer is
// about to commit), otherwise it closes at its LAC, as Java does. The close
// claims only acknowledged entries, so it is safe over IN_RECOVERY.
func (w *Writer) handleUnrecoverable(err error) {
	if w.appendErr != nil {
		return
	}
	appendErr := ErrLedgerClosed
	if errors.Is(err, ErrLedgerFenced) {
		appendErr, err = ErrLedgerFenced, ErrLedgerFenced
	}
	w.stop(appendErr, err)
	if w.md.State != metadata.LedgerInRecovery && w.close == closeNone {
		w.close = closeWanted
		w.maybeRunClose()
	}
}

// stop makes every later Append fail with appendErr and fails every pending
// add with pendingErr, in entry order.
func (w *Writer) stop(appendErr, pendingErr error) {
	if w.appendErr == nil {
		w.appendErr = appendErr
	}
	for _, op := range w.p.drain() {
		w.emit(AddComplete{EntryID: op.entryID, Err: pendingErr})
	}
	clear(w.failed)
	for _, id := range slices.Sorted(maps.Keys(w.forces)) {
		w.emit(ForceComplete{ID: id, LAC: w.LastAddConfirmed(), Err: appendErr})
	}
	clear(w.forces)
}

// startEnsembleChange begins replacing the bookies in w.failed (spec §2.2).
func (w *Writer) startEnsembleChange() {
	if w.deferred {
		// Entries not yet forced may live only on the failed bookie: the
		// writer cannot replace it (spec §1.8, DeferredSyncTest
		// testForbiddenEnsembleChange). Close at the forced LAC.
		bad := slices.Collect(maps.Values(w.failed))
		slices.Sort(bad)
		w.failEnsembleChange(fmt.Errorf("ledger %d: bookie failure %s with DEFERRED_SYNC, which forbids ensemble change: %w",
			w.ledgerID, bookieList(bad), ErrLedgerClosed))
		return
	}
	if !w.countEnsembleChange() {
		return
	}
	w.changing = true
	w.runEnsembleChange()
}

// runEnsembleChange evaluates the change against the writer's current copy
// of the metadata (the "needs update" test and transform of Java's
// ensembleChangeLoop) and proposes the new metadata, or ends the change.
func (w *Writer) runEnsembleChange() {
	switch w.md.State {
	case metadata.LedgerClosed:
		// Someone recovered and closed the ledger.
		w.stop(ErrLedgerClosed, ErrLedgerClosed)
		w.endEnsembleChange()
		return
	case metadata.LedgerInRecovery:
		// Someone is recovering it: stop, and leave the metadata alone.
		w.stop(ErrLedgerFenced, ErrLedgerFenced)
		w.endEnsembleChange()
		return
	}
	last := w.md.LastEnsemble()
	w.pruneFailed(last.Ensemble)
	if len(w.failed) == 0 {
		// Every failed bookie is gone from the stored ensemble already:
		// adopt it and resend.
		w.finishEnsembleChange()
		return
	}
	ensemble := slices.Clone(last.Ensemble)
	exclude := slices.Collect(maps.Values(w.failed))
	for _, idx := range slices.Sorted(maps.Keys(w.failed)) {
		b, err := w.placement.ReplaceBookie(ensemble, idx, w.writable, exclude)
		if err != nil {
			// Folio replaces all failed bookies or none: a partial change
			// would leave pending adds waiting on a dead bookie.
			w.failEnsembleChange(fmt.Errorf("ledger %d: ensemble change: %w; last bookie failure: %v", w.ledgerID, err, w.lastFailure))
			return
		}
		ensemble[idx] = b
	}
	// All entries ≤ LAC are on Qa bookies of the old ensemble, so the new
	// fragment starts at LAC+1; if the last fragment starts there already
	// (nothing acknowledged in it yet), it is replaced.
	first := w.p.lac + 1
	md := w.md.Clone()
	switch lastKey := last.FirstEntryID; {
	case lastKey == first:
		md.Ensembles[len(md.Ensembles)-1].Ensemble = ensemble
	case lastKey < first:
		md.Ensembles = append(md.Ensembles, metadata.Segment{FirstEntryID: first, Ensemble: ensemble})
	default:
		w.failEnsembleChange(fmt.Errorf("%w: ledger %d: last fragment starts at %d, beyond LAC+1 = %d", ErrMetadataVersion, w.ledgerID, lastKey, first))
		return
	}
	w.propose(md, metaWriteChange)
}

// pruneFailed forgets failures whose bookie is no longer at its index of
// ensemble.
func (w *Writer) pruneFailed(ensemble []metadata.BookieID) {
	for idx, b := range w.failed {
		if ensemble[idx] != b {
			delete(w.failed, idx)
		}
	}
}

// finishEnsembleChange switches pending adds to the stored last ensemble,
// resends, and only then acknowledges what has its quorum.
func (w *Writer) finishEnsembleChange() {
	w.clearReplacedFailures(w.md.LastEnsemble().Ensemble)
	sends := w.p.replaceEnsemble(w.md.LastEnsemble().Ensemble)
	for _, s := range sends {
		w.emit(s)
	}
	w.endEnsembleChange()
	w.maybeAcknowledge()
}

func (w *Writer) endEnsembleChange() {
	w.changing = false
	w.maybeRunClose()
}

// failEnsembleChange: no replacement, or metadata the change cannot apply
// to. The adds fail and the ledger is closed at the LAC (spec §1.9).
func (w *Writer) failEnsembleChange(err error) {
	w.changing = false
	w.stop(ErrLedgerClosed, err)
	if w.close == closeNone {
		w.close = closeWanted
	}
	w.maybeRunClose()
}

func (w *Writer) propose(md *metadata.LedgerMetadata, op metaOp) {
	w.proposed = md
	w.meta = op
	w.emit(WriteMetadata{Metadata: md, Expected: w.version})
}

func (w *Writer) handleMetadataWritten(ev MetadataWritten) {
	op := w.meta
	if op != metaWriteChange && op != metaWriteClose {
		panic(fmt.Sprintf("ledger: writer got MetadataWritten with no write outstanding (%d)", op))
	}
	proposed := w.proposed
	w.proposed = nil
	switch {
	case ev.Err == nil:
		w.md, w.version, w.meta = proposed, ev.Version, metaNone
		if op == metaWriteChange {
			w.ensembleChangeWritten()
		} else {
			w.finishClose(CloseComplete{LastEntryID: w.md.LastEntryID, Length: w.md.Length})
		}
	case errors.Is(ev.Err, metadata.ErrBadVersion):
		// Someone else wrote first: re-read and re-apply (spec/metadata.md §1.6).
		w.meta = metaReadChange
		if op == metaWriteClose {
			w.meta = metaReadClose
		}
		w.emit(ReadMetadata{})
	default:
		w.meta = metaNone
		w.metadataFailed(op, ev.Err)
	}
}

func (w *Writer) handleMetadataRead(ev MetadataRead) {
	op := w.meta
	if op != metaReadChange && op != metaReadClose {
		panic(fmt.Sprintf("ledger: writer got MetadataRead with no read outstanding (%d)", op))
	}
	w.meta = metaNone
	if ev.Err != nil {
		w.metadataFailed(op, ev.Err)
		return
	}
	if ev.Version != w.version {
		w.md, w.version = ev.Metadata, ev.Version
	}
	if op == metaReadChange {
		w.runEnsembleChange()
	} else {
		w.runClose()
	}
}

// metadataFailed handles a store error (not a version conflict): the
// outcome of the operation is unknown.
func (w *Writer) metadataFailed(op metaOp, err error) {
	err = fmt.Errorf("ledger %d: metadata store: %w", w.ledgerID, err)
	if op == metaWriteChange || op == metaReadChange {
		w.failEnsembleChange(err)
		return
	}
	w.finishClose(CloseComplete{LastEntryID: w.p.lac, Length: w.p.length, Err: err})
}

// ensembleChangeWritten: the store holds the new ensemble. Failures that
// came in meanwhile and are still in it start another round at once
// (acknowledgements stay blocked); otherwise pending adds are resent.
func (w *Writer) ensembleChangeWritten() {
	w.pruneFailed(w.md.LastEnsemble().Ensemble)
	if len(w.failed) > 0 {
		if w.countEnsembleChange() {
			w.runEnsembleChange()
		}
		return
	}
	w.finishEnsembleChange()
}

// maybeRunClose starts a wanted close once no ensemble change and no
// metadata operation is outstanding (one metadata operation at a time).
func (w *Writer) maybeRunClose() {
	if w.close != closeWanted || w.changing || w.meta != metaNone {
		return
	}
	w.close = closeRunning
	w.runClose()
}

// runClose applies Java's close merge rules (spec/metadata.md §1.6) to the
// writer's copy of the metadata: CLOSED at the same end is success, CLOSED
// at another end is ErrMetadataVersion, OPEN or IN_RECOVERY is written
// CLOSED at the LAC and the length of the acknowledged entries.
func (w *Writer) runClose() {
	last, length := w.p.visibleLAC()
	if w.md.State == metadata.LedgerClosed {
		res := CloseComplete{LastEntryID: w.md.LastEntryID, Length: w.md.Length}
		if w.md.LastEntryID != last || w.md.Length != length {
			res.Err = fmt.Errorf("%w: ledger %d was closed at entry %d length %d by another client, this writer's end is entry %d length %d",
				ErrMetadataVersion, w.ledgerID, w.md.LastEntryID, w.md.Length, last, length)
		}
		w.finishClose(res)
		return
	}
	md := w.md.Clone()
	md.State = metadata.LedgerClosed
	md.LastEntryID = last
	md.Length = length
	w.propose(md, metaWriteClose)
}

func (w *Writer) finishClose(res CloseComplete) {
	w.close = closeDone
	w.closeResult = res
	w.emit(res)
}

// forceOp is one outstanding Force: the acknowledged head it makes durable
// and the ensemble bookies that answered OK.
type forceOp struct {
	head, length int64
	ensemble     []metadata.BookieID
	ok           []bool
	oks          int
}

// Force makes durable every entry acknowledged so far (spec §1.8): it sends
// FORCE_LEDGER to every bookie of the current ensemble and, when all of
// them answer OK, raises the LAC to the acknowledged head it started with.
// One failure fails the force (the writer goes on; a failed bookie also
// fails the next add, which stops the writer). The result is a
// ForceComplete with id. Without DeferredSync, or when nothing new was
// acknowledged, it completes at once; on a stopped writer it fails with
// the writer's error.
func (w *Writer) Force(id int64) {
	if w.appendErr != nil {
		w.emit(ForceComplete{ID: id, LAC: w.LastAddConfirmed(), Err: w.appendErr})
		return
	}
	if !w.deferred || w.p.lac <= w.p.synced {
		w.emit(ForceComplete{ID: id, LAC: w.LastAddConfirmed()})
		return
	}
	ensemble := slices.Clone(w.p.ensemble)
	w.forces[id] = &forceOp{head: w.p.lac, length: w.p.lacLength, ensemble: ensemble, ok: make([]bool, len(ensemble))}
	w.emit(SendForce{ID: id, Bookies: ensemble})
}

func (w *Writer) handleForceResponse(ev ForceResponse) {
	op := w.forces[ev.ID]
	if op == nil {
		return
	}
	idx := slices.Index(op.ensemble, ev.Bookie)
	if idx < 0 || op.ok[idx] {
		return
	}
	if ev.Err != nil {
		delete(w.forces, ev.ID)
		w.emit(ForceComplete{ID: ev.ID, LAC: w.LastAddConfirmed(), Err: fmt.Errorf("ledger %d: force: bookie %s: %w", w.ledgerID, ev.Bookie, ev.Err)})
		return
	}
	op.ok[idx] = true
	op.oks++
	if op.oks < len(op.ensemble) {
		return
	}
	delete(w.forces, ev.ID)
	if op.head > w.p.synced {
		w.p.synced, w.p.syncedLength = op.head, op.length
	}
	w.emit(ForceComplete{ID: ev.ID, LAC: w.LastAddConfirmed()})
}

// FlushLAC is what a Tick does (spec §1.6): if the LAC moved
// past what entries already carried and what the last WRITE_LAC sent, it
// sends WRITE_LAC to the write set of entry LAC, so that readers see the
// last entries while the writer is idle. Explicit LAC is a hint for
// readers only; the answers do not matter to the writer and are not
// stepped.
func (w *Writer) FlushLAC() {
	if w.appendErr != nil {
		return
	}
	lac := w.LastAddConfirmed()
	if lac < 0 || lac <= max(w.p.carried, w.explicitSent) {
		return
	}
	w.explicitSent = lac
	to := make([]metadata.BookieID, 0, w.q.WriteQuorum)
	for _, idx := range w.q.WriteSet(lac) {
		to = append(to, w.p.ensemble[idx])
	}
	w.emit(SendWriteLAC{Bookies: to, LAC: lac})
}
