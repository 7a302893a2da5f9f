package ledger

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// LongPollConfig configures a LongPollLAC.
type LongPollConfig struct {
	LedgerID int64
	// Metadata is the ledger's metadata; the poll goes to the bookies of
	// its last ensemble.
	Metadata *metadata.LedgerMetadata
	Verifier Verifier
	// PreviousLAC is the LAC the reader knows: bookies answer once theirs
	// passes it, with entry PreviousLAC+1 piggybacked if they store it.
	PreviousLAC int64
	// TimeoutMs is how long a bookie waits for its LAC to pass PreviousLAC.
	TimeoutMs int64
}

// LongPollLAC is BookKeeper's ReadLastConfirmedAndEntryOp in parallel mode
// (spec §3.4, wire §2.5.4): it asks every bookie of the last ensemble to
// answer once its LAC passes PreviousLAC, or after TimeoutMs.
//
// It finishes:
//   - at the first answer whose LAC (maxLAC) is above PreviousLAC, with that
//     LAC and the piggybacked entry PreviousLAC+1 if the answer carried one
//     that verifies (a bookie outside the entry's write set has none);
//   - with LAC = PreviousLAC and no entry ("no new entry") after E − Qa + 1
//     empty answers (OK, LAC not past PreviousLAC): at least one bookie of
//     every ack quorum saw nothing new, so nothing new was acknowledged
//     before the bookies looked;
//   - with an error when every bookie answered without either.
//
// A bookie's maxLAC is only ever a LAC some writer piggybacked or sent
// explicitly, so it is safe to read up to it. An answer without a maxLAC
// (an old bookie) counts as an error.
//
// Inputs: Start, Step(LongPollResponse). Outputs: SendLongPoll, then one
// LongPollComplete.
type LongPollLAC struct {
	cfg      LongPollConfig
	q        quorum.Params
	ensemble []metadata.BookieID
	answered []bool
	empties  int
	lastErr  error
	done     bool
	effects  []Effect
}

// NewLongPollLAC returns a LongPollLAC; Start sends the requests.
func NewLongPollLAC(cfg LongPollConfig) *LongPollLAC {
	md := cfg.Metadata
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	return &LongPollLAC{
		cfg:      cfg,
		q:        q,
		ensemble: slices.Clone(md.LastEnsemble().Ensemble),
		answered: make([]bool, len(md.LastEnsemble().Ensemble)),
	}
}

// Start queues the requests, or the result for a CLOSED ledger.
func (l *LongPollLAC) Start() {
	if md := l.cfg.Metadata; md.IsClosed() {
		l.finish(LongPollComplete{LAC: max(md.LastEntryID, l.cfg.PreviousLAC)})
		return
	}
	l.effects = append(l.effects, SendLongPoll{Bookies: slices.Clone(l.ensemble), PreviousLAC: l.cfg.PreviousLAC, TimeoutMs: l.cfg.TimeoutMs})
}

// Ready returns the queued effects and forgets them.
func (l *LongPollLAC) Ready() []Effect {
	out := l.effects
	l.effects = nil
	return out
}

// Done reports whether the LongPollComplete has been queued.
func (l *LongPollLAC) Done() bool { return l.done }

// TickInterval is zero: the bookies time the poll (Ticks are ignored).
func (l *LongPollLAC) TickInterval() time.Duration { return 0 }

// EmptyThreshold is how many empty answers mean "no new entry": E − Qa + 1.
func (l *LongPollLAC) EmptyThreshold() int { return l.q.EnsembleSize - l.q.AckQuorum + 1 }

// Step feeds one answer.
func (l *LongPollLAC) Step(ev Event) {
	if _, ok := ev.(Tick); ok {
		return
	}
	resp, ok := ev.(LongPollResponse)
	if !ok {
		panic(fmt.Sprintf("ledger: LongPollLAC cannot step %T", ev))
	}
	idx := slices.Index(l.ensemble, resp.Bookie)
	if l.done || idx < 0 || l.answered[idx] {
		return
	}
	l.answered[idx] = true
	err := resp.Err
	switch {
	case err == nil && !resp.HasMaxLAC:
		err = fmt.Errorf("%w: long poll answer without maxLAC", ErrNotAnswered)
	case err == nil && resp.MaxLAC > l.cfg.PreviousLAC:
		res := LongPollComplete{LAC: resp.MaxLAC}
		if resp.Body != nil && resp.EntryID == l.cfg.PreviousLAC+1 {
			// A body that fails verification is dropped: the LAC stands
			// (it is the bookie's, not the body's) and the caller reads the
			// entry from a replica.
			if e, verr := l.cfg.Verifier.VerifyEntry(resp.Body, l.cfg.LedgerID, resp.EntryID); verr == nil {
				res.Entry = &e
				res.LAC = max(res.LAC, e.LAC)
			}
		}
		l.finish(res)
		return
	case err == nil:
		l.empties++
		if l.empties >= l.EmptyThreshold() {
			l.finish(LongPollComplete{LAC: l.cfg.PreviousLAC})
			return
		}
	case errors.Is(err, ErrUnauthorized):
		l.finish(LongPollComplete{LAC: l.cfg.PreviousLAC, Err: fmt.Errorf("ledger %d: bookie %s: %w", l.cfg.LedgerID, resp.Bookie, err)})
		return
	case isNegative(err):
		// The bookie knows nothing of the ledger yet: an empty answer.
		l.empties++
		if l.empties >= l.EmptyThreshold() {
			l.finish(LongPollComplete{LAC: l.cfg.PreviousLAC})
			return
		}
		err = nil
	}
	if err != nil {
		l.lastErr = fmt.Errorf("bookie %s: %w", resp.Bookie, err)
	}
	if !slices.Contains(l.answered, false) {
		e := l.lastErr
		if e == nil {
			e = ErrNotAnswered
		}
		l.finish(LongPollComplete{LAC: l.cfg.PreviousLAC, Err: fmt.Errorf("ledger %d: long poll: %w", l.cfg.LedgerID, e)})
	}
}

func (l *LongPollLAC) finish(res LongPollComplete) {
	l.done = true
	l.effects = append(l.effects, res)
}
