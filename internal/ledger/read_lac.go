package ledger

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// Verifier checks entry and LAC bodies read from bookies. *digest.Digester
// implements it. Implementations must be pure computations.
type Verifier interface {
	VerifyEntry(body []byte, ledgerID, entryID int64) (digest.Entry, error)
	VerifyLAC(body []byte, ledgerID int64) (int64, error)
}

// ReadLACConfig configures a ReadLAC.
type ReadLACConfig struct {
	LedgerID int64
	// Metadata is the ledger's metadata; the LAC is read from the bookies
	// of its last ensemble.
	Metadata *metadata.LedgerMetadata
	Verifier Verifier
	// Fence makes the read a fencing read (recovery, spec §4.1 step 3):
	// READ_ENTRY(-1) with the fence flag, even for a CLOSED ledger.
	Fence bool
	// UseReadLAC asks with the v3 READ_LAC request instead of
	// READ_ENTRY(-1) (Java's PendingReadLacOp). Ignored when Fence.
	UseReadLAC bool
	// Try drops the coverage rule (Java's TryReadLastConfirmedOp): the
	// read finishes early with the first OK answer that verifies and
	// carries a LAC above KnownLAC; otherwise it waits for every answer
	// and finishes with the highest LAC among the valid ones (explicit
	// negatives count as valid answers of LAC -1), which may be at or
	// below KnownLAC, or with an error if there was none. The LAC is one
	// bookie's view, not a covering set's: it may be lower than the
	// ledger's, never higher (a bookie holds only LACs the writer
	// confirmed). Ignored when Fence.
	Try bool
	// KnownLAC is the LAC the caller already knows (the handle's cached
	// one; -1 for none), with Try: only an answer above it ends the read
	// early, as Java's TryReadLastConfirmedOp starts from the handle's
	// LAC. Ignored without Try.
	KnownLAC int64
}

// ReadLAC reads the last add confirmed of a ledger with the coverage rule
// (spec §3.2, §4.3). It sends one request to every bookie of the last
// ensemble and finishes, with the highest LAC among the valid answers, as
// soon as the answer just received is valid and every write set has
// answered with Qw − Qa + 1 known answers. A CLOSED ledger (without Fence)
// answers from the metadata without asking bookies.
//
// Answers: OK with a body that verifies is valid and gives the body's
// piggybacked LAC (never its entry id); ENOENTRY/ENOLEDGER is a valid
// "nothing here" (LAC -1); OK whose body fails verification is known for
// coverage (the bookie did answer, and fenced if asked) but gives no LAC,
// as in Java; any other error or timeout is unknown. EUA fails the read at
// once. If every bookie answered without the rule holding on a valid
// answer, the read fails with the last error.
//
// Inputs: Start, Step(ReadResponse | ReadLACResponse). Output: SendRead or
// SendReadLAC, then one LACComplete.
type ReadLAC struct {
	cfg      ReadLACConfig
	q        quorum.Params
	ensemble []metadata.BookieID

	coverage *quorum.Coverage
	answered []bool // by bookie index
	lac      int64
	length   int64
	entryID  int64 // the entry that gave lac and length
	lastErr  error
	anyValid bool
	done     bool

	effects []Effect
}

// NewReadLAC returns a ReadLAC; Start sends the requests.
func NewReadLAC(cfg ReadLACConfig) *ReadLAC {
	md := cfg.Metadata
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	return &ReadLAC{
		cfg:      cfg,
		q:        q,
		ensemble: slices.Clone(md.LastEnsemble().Ensemble),
		coverage: quorum.NewCoverage(q),
		answered: make([]bool, q.EnsembleSize),
		lac:      -1,
		entryID:  -1,
	}
}

// Start queues the requests, or the result for a CLOSED ledger.
func (r *ReadLAC) Start() {
	if r.cfg.Metadata.IsClosed() && !r.cfg.Fence {
		r.finish(LACComplete{LAC: r.cfg.Metadata.LastEntryID, Length: r.cfg.Metadata.Length, EntryID: r.cfg.Metadata.LastEntryID})
		return
	}
	if r.cfg.UseReadLAC && !r.cfg.Fence {
		r.emit(SendReadLAC{Bookies: slices.Clone(r.ensemble)})
		return
	}
	r.emit(SendRead{Bookies: slices.Clone(r.ensemble), EntryID: -1, Fence: r.cfg.Fence})
}

// Done reports whether the LACComplete has been queued.
func (r *ReadLAC) Done() bool { return r.done }

// TickInterval is zero: a ReadLAC has no timers (Ticks are ignored).
func (r *ReadLAC) TickInterval() time.Duration { return 0 }

// Ready returns the queued effects and forgets them.
func (r *ReadLAC) Ready() []Effect {
	out := r.effects
	r.effects = nil
	return out
}

func (r *ReadLAC) emit(e Effect) { r.effects = append(r.effects, e) }

// Step feeds one answer. Answers after the result, and answers from
// bookies outside the ensemble, are ignored.
func (r *ReadLAC) Step(ev Event) {
	switch ev := ev.(type) {
	case ReadResponse:
		if ev.EntryID != -1 {
			return
		}
		r.answer(ev.Bookie, ev.Err, func() (int64, int64, int64, error) {
			e, err := r.cfg.Verifier.VerifyEntry(ev.Body, r.cfg.LedgerID, -1)
			return e.LAC, e.Length, e.EntryID, err
		})
	case ReadLACResponse:
		r.answer(ev.Bookie, ev.Err, func() (int64, int64, int64, error) { return r.verifyReadLAC(ev) })
	case Tick:
	default:
		panic(fmt.Sprintf("ledger: ReadLAC cannot step %T", ev))
	}
}

// verifyReadLAC takes the larger of the explicit LAC and the last entry's
// piggybacked LAC of a READ_LAC answer; the length comes from the entry.
func (r *ReadLAC) verifyReadLAC(ev ReadLACResponse) (lac, length, entryID int64, err error) {
	lac, entryID = -1, -1
	if ev.LACBody == nil && ev.LastEntryBody == nil {
		return 0, 0, 0, fmt.Errorf("%w: READ_LAC answer without bodies", ErrNotAnswered)
	}
	if ev.LACBody != nil {
		if lac, err = r.cfg.Verifier.VerifyLAC(ev.LACBody, r.cfg.LedgerID); err != nil {
			return 0, 0, 0, err
		}
	}
	if ev.LastEntryBody != nil {
		e, err := r.cfg.Verifier.VerifyEntry(ev.LastEntryBody, r.cfg.LedgerID, -1)
		if err != nil {
			return 0, 0, 0, err
		}
		lac, length, entryID = max(lac, e.LAC), e.Length, e.EntryID
	}
	return lac, length, entryID, nil
}

// answer records one bookie's answer; verify checks an OK answer's bodies.
func (r *ReadLAC) answer(bookie metadata.BookieID, rerr error, verify func() (lac, length, entryID int64, err error)) {
	idx := slices.Index(r.ensemble, bookie)
	if r.done || idx < 0 || r.answered[idx] {
		return
	}
	r.answered[idx] = true
	valid := false
	switch {
	case rerr == nil:
		r.coverage.Know(idx)
		lac, length, entryID, err := verify()
		if err != nil {
			r.lastErr = fmt.Errorf("bookie %s: %w", bookie, err)
			break
		}
		valid = true
		if lac > r.lac {
			r.lac, r.length, r.entryID = lac, length, entryID
		}
	case isNegative(rerr):
		r.coverage.Know(idx)
		valid = true
	case errors.Is(rerr, ErrUnauthorized):
		r.finish(LACComplete{Err: fmt.Errorf("ledger %d: bookie %s: %w", r.cfg.LedgerID, bookie, rerr)})
		return
	default:
		r.lastErr = fmt.Errorf("bookie %s: %w", bookie, rerr)
	}
	r.anyValid = r.anyValid || valid
	try := r.cfg.Try && !r.cfg.Fence
	switch {
	case try && valid && rerr == nil && r.lac > r.cfg.KnownLAC:
		// This answer raised the LAC above the caller's (answers before
		// it did not, or the read would have ended).
		r.finish(LACComplete{LAC: r.lac, Length: r.length, EntryID: r.entryID})
		return
	case !try && valid && r.coverage.Covered():
		r.finish(LACComplete{LAC: r.lac, Length: r.length, EntryID: r.entryID})
		return
	}
	if !slices.Contains(r.answered, false) {
		if try && r.anyValid {
			r.finish(LACComplete{LAC: r.lac, Length: r.length, EntryID: r.entryID})
			return
		}
		err := r.lastErr
		if err == nil {
			err = ErrNotAnswered
		}
		r.finish(LACComplete{Err: fmt.Errorf("ledger %d: no covering set of LAC answers: %w", r.cfg.LedgerID, err)})
	}
}

func (r *ReadLAC) finish(res LACComplete) {
	r.done = true
	r.emit(res)
}
