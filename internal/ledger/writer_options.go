package ledger

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// The writer options of BookKeeper's ClientConfiguration that change how a
// Writer reacts to slow and failed bookies: the add quorum timeout
// (addEntryQuorumTimeoutSec), delayed ensemble change (delayEnsembleChange)
// and the bound on ensemble changes (maxNumEnsembleChanges). They live in
// this file, apart from the writer's core, and hook into it at a few
// places (handleAddResponse, startEnsembleChange, ensembleChangeWritten,
// finishEnsembleChange, Step(Tick), TickInterval).

var (
	// ErrAddQuorumTimeout: an add was not acknowledged by an ack quorum
	// within WriterConfig.AddQuorumTimeout (Java's
	// AddEntryQuorumTimeoutException, code -21). The writer fails every
	// pending add with it and closes the ledger at its LAC, as Java does;
	// it matches ErrTimeout: the outcome of the adds is unknown to the
	// caller (the close cuts them off, but the caller cannot tell whether
	// the close succeeded).
	ErrAddQuorumTimeout = fmt.Errorf("add not acknowledged by an ack quorum in time: %w", ErrTimeout)

	// ErrTooManyEnsembleChanges: a bookie failure needed an ensemble change
	// after WriterConfig.MaxEnsembleChanges of them (Java closes the handle
	// with WriteException, code -12). The writer fails its pending adds and
	// closes the ledger at its LAC.
	ErrTooManyEnsembleChanges = errors.New("too many ensemble changes")
)

// NoEnsembleChanges as WriterConfig.MaxEnsembleChanges allows none: the
// first bookie failure that needs one fails the writer.
const NoEnsembleChanges = -1

// quorumTimeoutTicks is how many Ticks an AddQuorumTimeout is cut into
// when the writer has no shorter tick: an add fails between the timeout
// and a quarter of it later.
const quorumTimeoutTicks = 4

// writerOptions is the Writer's state for the options of this file.
type writerOptions struct {
	// tick is the TickInterval; lacEvery is how many Ticks make one
	// ExplicitLACInterval (1 without a quorum timeout).
	tick     time.Duration
	lacEvery int64
	// ticks counts the Ticks stepped.
	ticks int64

	// quorumTimeout is WriterConfig.AddQuorumTimeout, quorumTicks the same
	// in Ticks (rounded up); 0: off.
	quorumTimeout time.Duration
	quorumTicks   int64
	// pushed are (entry, tick count at Append) of the adds that may still
	// be pending, in push order; entries no longer pending are dropped from
	// the front lazily.
	pushed []pushedAdd

	// delay is WriterConfig.DelayEnsembleChange; failures are the ensemble
	// indexes that failed for each pending add (delay only), pruned of
	// adds no longer pending once it doubles.
	delay     bool
	failures  map[int64][]int
	pruneSize int

	// maxChanges is WriterConfig.MaxEnsembleChanges (0: no limit), changes
	// the ensemble changes begun.
	maxChanges int
	changes    int
}

type pushedAdd struct {
	entryID int64
	tick    int64
}

// initOptions sets up the options from cfg; NewWriter calls it.
func (w *Writer) initOptions(cfg WriterConfig) error {
	o := &w.opts
	if cfg.AddQuorumTimeout < 0 {
		return fmt.Errorf("ledger %d: negative AddQuorumTimeout %v", cfg.LedgerID, cfg.AddQuorumTimeout)
	}
	if cfg.MaxEnsembleChanges < NoEnsembleChanges {
		return fmt.Errorf("ledger %d: MaxEnsembleChanges %d: want ≥ 0, or NoEnsembleChanges", cfg.LedgerID, cfg.MaxEnsembleChanges)
	}
	o.tick, o.lacEvery = cfg.ExplicitLACInterval, 1
	if qt := cfg.AddQuorumTimeout; qt > 0 {
		o.quorumTimeout = qt
		o.tick = max(qt/quorumTimeoutTicks, 1)
		if lac := cfg.ExplicitLACInterval; lac > 0 {
			o.tick = min(o.tick, lac)
			o.lacEvery = int64(lac / o.tick)
		}
		o.quorumTicks = int64((qt + o.tick - 1) / o.tick)
	}
	o.delay = cfg.DelayEnsembleChange && !cfg.DeferredSync
	if o.delay {
		o.failures = map[int64][]int{}
	}
	o.maxChanges = cfg.MaxEnsembleChanges
	return nil
}

// tick handles a Tick: the explicit LAC every lacEvery Ticks, and the add
// quorum timeout.
func (w *Writer) tick() {
	o := &w.opts
	o.ticks++
	if w.lacInterval > 0 && o.ticks%o.lacEvery == 0 {
		w.FlushLAC()
	}
	if o.quorumTimeout > 0 {
		w.checkQuorumTimeout()
	}
}

// notePush remembers when entryID was appended, for the quorum timeout.
// Completed adds are dropped from the front here as well as at each Tick,
// so the list holds about the pending adds, not every add of a tick
// interval (100k appends/s with a 60 s timeout would otherwise keep
// 1.5M records between two Ticks). In explicit-id mode the front may be an
// id above a gap; it completes only after every lower id, so the list
// stays bounded by the pending window.
func (w *Writer) notePush(entryID int64) {
	o := &w.opts
	if o.quorumTimeout <= 0 {
		return
	}
	for len(o.pushed) > 0 && w.p.find(o.pushed[0].entryID) == nil {
		o.pushed = o.pushed[1:]
	}
	o.pushed = append(o.pushed, pushedAdd{entryID: entryID, tick: o.ticks})
}

// checkQuorumTimeout fails the writer if a pending add has waited more
// than quorumTicks full Ticks (so at least AddQuorumTimeout) without an
// ack quorum, as Java's PendingAddOp.timeoutQuorumWait: every pending add
// fails with ErrAddQuorumTimeout and the ledger is closed at the LAC
// (handleUnrecoverable), so nothing after the timed-out entry is ever
// acknowledged. An add that has its quorum but waits behind an ensemble
// change or a lower entry does not time out (Java's "completed").
func (w *Writer) checkQuorumTimeout() {
	o := &w.opts
	for len(o.pushed) > 0 && w.p.find(o.pushed[0].entryID) == nil {
		o.pushed = o.pushed[1:]
	}
	if w.appendErr != nil {
		o.pushed = nil
		return
	}
	for _, pa := range o.pushed {
		if o.ticks-pa.tick <= o.quorumTicks {
			return // pushed later: the rest are younger still
		}
		op := w.p.find(pa.entryID)
		if op == nil || w.p.quorate(op) {
			continue
		}
		o.pushed = nil
		short := ""
		if op.acks >= w.q.AckQuorum {
			short = " from bookies in too few fault domains (EnforceMinNumFaultDomainsForWrite)"
		}
		w.handleUnrecoverable(fmt.Errorf("ledger %d: entry %d has %d of %d acks%s after %v (AddEntryQuorumTimeout): %w",
			w.ledgerID, op.entryID, op.acks, w.q.AckQuorum, short, o.quorumTimeout, ErrAddQuorumTimeout))
		return
	}
}

// delayedFailure handles a bookie error for a pending add with
// DelayEnsembleChange, as Java's PendingAddOp.writeComplete with
// delayEnsembleChange: the failed index is recorded for the add, and an
// ensemble change starts only when the add can no longer reach its ack
// quorum (more than Qw − Qa of its write set failed), replacing the bookies
// that failed for it; a read-only bookie is replaced at once. Otherwise the
// add waits for Qa acks from the rest of its write set and the failed
// bookie stays in the ensemble, receiving (and failing) later adds.
//
// Unlike Java, a failure is recorded also for an add that already has its
// quorum: an ensemble change replacing one of its acking bookies takes the
// ack away again, and the add must then still see that its quorum is out
// of reach.
func (w *Writer) delayedFailure(op *pendingAdd, pos int, ev AddResponse) {
	o := &w.opts
	if op.acked[pos] {
		return // a second answer from a bookie that stored it
	}
	idx := w.q.WriteSetIndex(op.entryID, pos)
	fs := o.failures[op.entryID]
	if !slices.Contains(fs, idx) {
		fs = append(fs, idx)
		o.failures[op.entryID] = fs
		w.pruneFailures()
	}
	readOnly := errors.Is(ev.Err, wire.ErrBookieReadOnly)
	if !readOnly && (w.p.quorate(op) || w.quorumReachable(op, fs)) {
		return // the ack quorum is still in reach: delay the change
	}
	for _, i := range fs {
		w.failed[i] = w.p.ensemble[i]
	}
	w.lastFailure = ev.Err
	if !w.changing {
		w.startEnsembleChange()
	}
}

// quorumReachable reports whether op can still reach its ack quorum from
// the members of its write set that have not failed for it (fs: ensemble
// indexes): at most Qw − Qa failed and, with the fault-domain rule
// (WriterConfig.AckedAdhering, monotone), those members together meeting
// it. Java checks the count only, so an add whose remaining bookies share
// one fault domain waits there until AddEntryQuorumTimeout (or forever);
// Folio replaces the failed bookies instead, as it would for a count short
// of Qa.
func (w *Writer) quorumReachable(op *pendingAdd, fs []int) bool {
	if len(fs) > w.q.WriteQuorum-w.q.AckQuorum {
		return false
	}
	if w.p.adhere == nil {
		return true
	}
	live := make([]metadata.BookieID, 0, w.q.WriteQuorum)
	for pos := range w.q.WriteQuorum {
		if idx := w.q.WriteSetIndex(op.entryID, pos); !slices.Contains(fs, idx) {
			live = append(live, w.p.ensemble[idx])
		}
	}
	return w.p.adhere(live)
}

// pruneFailures forgets the failures of adds no longer pending, each time
// the map has doubled (amortized constant per failure).
func (w *Writer) pruneFailures() {
	o := &w.opts
	if len(o.failures) < 2*o.pruneSize+64 {
		return
	}
	for id := range o.failures {
		if w.p.find(id) == nil {
			delete(o.failures, id)
		}
	}
	o.pruneSize = len(o.failures)
}

// clearReplacedFailures forgets the recorded failures at the indexes that
// ensemble (the new last ensemble) replaces: those adds are resent to the
// new bookies. finishEnsembleChange calls it before switching the pipeline.
func (w *Writer) clearReplacedFailures(ensemble []metadata.BookieID) {
	o := &w.opts
	if !o.delay || len(o.failures) == 0 {
		return
	}
	for id, fs := range o.failures {
		fs = slices.DeleteFunc(fs, func(idx int) bool { return w.p.ensemble[idx] != ensemble[idx] })
		if len(fs) == 0 {
			delete(o.failures, id)
		} else {
			o.failures[id] = fs
		}
	}
}

// countEnsembleChange counts an ensemble change about to begin (a first
// round, or another round for failures that came during one, as Java's
// ensembleChangeLoop counts) and, past MaxEnsembleChanges, fails the writer
// instead and returns false.
func (w *Writer) countEnsembleChange() bool {
	o := &w.opts
	o.changes++
	limit := o.maxChanges
	if limit == NoEnsembleChanges {
		limit = 0
	} else if limit == 0 {
		return true
	}
	if o.changes <= limit {
		return true
	}
	w.failEnsembleChange(fmt.Errorf("ledger %d: ensemble change %d needed, MaxNumEnsembleChanges is %d; last bookie failure: %v: %w",
		w.ledgerID, o.changes, limit, w.lastFailure, ErrTooManyEnsembleChanges))
	return false
}

// EnsembleChanges returns the number of ensemble changes the writer began
// (including one refused by MaxEnsembleChanges).
func (w *Writer) EnsembleChanges() int { return w.opts.changes }
