package ledger

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// BatchReadConfig configures a BatchRead.
type BatchReadConfig struct {
	LedgerID int64
	Metadata *metadata.LedgerMetadata
	Verifier Verifier
	// First is the first entry; MaxCount (≥ 1) bounds the entries asked
	// for. The shell caps MaxCount so that the range stays within First's
	// fragment and at or below the LAC it may read to: a bookie answers
	// with what it stores, and only the shell knows what may be returned.
	First    int64
	MaxCount int
	// MaxSize (> 0) bounds the answer frame, as the bookie counts it.
	MaxSize int64
	// Avoid, Sticky and StickyIndex order the replicas as for a Read.
	Avoid       func(metadata.BookieID) bool
	Sticky      bool
	StickyIndex int
	// Speculation schedules the Ticks that ask the next replica while no
	// replica has answered with a batch that verified.
	Speculation Speculation
}

// BatchRead reads up to MaxCount consecutive entries from First with one
// BATCH_READ_ENTRY to one replica of First's write set at a time (Java's
// BatchedReadOp). It is meant for ledgers with E == Qw, where every bookie
// of the ensemble stores every entry of the fragment; with E > Qw a bookie
// stores no run longer than Qw, and the shell reads entry by entry instead
// (as Java does).
//
// An answer is verified entry by entry, in order: if the first entry fails
// verification the answer counts as that replica's error; a later entry
// that fails ends the batch before it (the verified prefix is the result,
// as Java's). Bodies past MaxCount are ignored. An error moves to the next
// replica; a Tick asks the next one too while no replica has answered with
// a batch that verified and one is left to ask (Java's
// maybeSendSpeculativeRead; a good answer ends the read, so every Tick
// before the end asks), reporting the replicas asked and still silent with
// BookieSlow. A speculative replica failing fast thus leaves the next Tick
// to ask the one after it. The first good answer wins.
//
// When every replica failed: ErrNoSuchEntry if at least Qw − Qa + 1 of
// them answered with an explicit negative for First; otherwise the first
// other error, with Fallback set, so that the shell reads the range with
// single reads, whose rules decide each entry (spec §3.3). That covers a
// bookie without batch reads, whether it answers EBADREQ
// (ErrBatchReadUnsupported) or drops the connection as a 4.16 bookie does.
//
// Inputs: Start, Step(BatchReadResponse | Tick). Outputs: SendBatchRead,
// BookieSlow, then one BatchReadComplete.
type BatchRead struct {
	cfg      BatchReadConfig
	q        quorum.Params
	replicas []metadata.BookieID
	asked    int // replicas[0..asked] were asked
	answered []bool
	tick     time.Duration

	negatives int
	firstErr  error
	failed    []metadata.BookieID
	done      bool
	effects   []Effect
}

// NewBatchRead returns a BatchRead; Start sends the first request.
func NewBatchRead(cfg BatchReadConfig) (*BatchRead, error) {
	md := cfg.Metadata
	switch {
	case cfg.First < 0:
		return nil, fmt.Errorf("ledger %d: batch read from negative entry %d", cfg.LedgerID, cfg.First)
	case cfg.MaxCount < 1 || cfg.MaxCount > math.MaxInt32:
		return nil, fmt.Errorf("ledger %d: batch read of %d entries: need 1 … %d", cfg.LedgerID, cfg.MaxCount, math.MaxInt32)
	case cfg.MaxSize < 1:
		return nil, fmt.Errorf("ledger %d: batch read with a size bound of %d bytes", cfg.LedgerID, cfg.MaxSize)
	}
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	b := &BatchRead{cfg: cfg, q: q, tick: max(0, cfg.Speculation.First)}
	b.replicas = readOrder(q, md.EnsembleAt(cfg.First), cfg.First, stickyIndex(cfg.Sticky, cfg.StickyIndex), cfg.Avoid)
	b.answered = make([]bool, len(b.replicas))
	return b, nil
}

// Start sends the request to the first replica.
func (b *BatchRead) Start() { b.ask() }

// Ready returns the queued effects and forgets them.
func (b *BatchRead) Ready() []Effect {
	out := b.effects
	b.effects = nil
	return out
}

// Done reports whether the BatchReadComplete has been queued.
func (b *BatchRead) Done() bool { return b.done }

// TickInterval is the interval to the next speculative Tick (see
// BatchReadConfig.Speculation); a shell reads it again after every Tick.
func (b *BatchRead) TickInterval() time.Duration { return b.tick }

func (b *BatchRead) ask() {
	b.effects = append(b.effects, SendBatchRead{Bookie: b.replicas[b.asked], StartEntryID: b.cfg.First,
		MaxCount: int32(b.cfg.MaxCount), MaxSize: b.cfg.MaxSize})
}

// Step feeds one answer or a Tick; answers for another start entry, from
// replicas not asked or already answered, and after the end, are ignored.
func (b *BatchRead) Step(ev Event) {
	switch ev := ev.(type) {
	case Tick:
		b.speculate()
		b.tick = b.cfg.Speculation.next(b.tick)
	case BatchReadResponse:
		b.answer(ev)
	default:
		panic(fmt.Sprintf("ledger: BatchRead cannot step %T", ev))
	}
}

func (b *BatchRead) answer(resp BatchReadResponse) {
	if b.done || resp.StartEntryID != b.cfg.First {
		return
	}
	ri := slices.Index(b.replicas[:b.asked+1], resp.Bookie)
	if ri < 0 || b.answered[ri] {
		return
	}
	b.answered[ri] = true
	err := resp.Err
	if err == nil {
		entries, verr := b.verify(resp.Bodies)
		if verr == nil {
			b.finish(BatchReadComplete{Entries: entries, Failed: b.failed})
			return
		}
		err = verr
	}
	b.failed = append(b.failed, resp.Bookie)
	if errors.Is(err, ErrUnauthorized) {
		b.finish(BatchReadComplete{Err: fmt.Errorf("ledger %d entry %d: bookie %s: %w", b.cfg.LedgerID, b.cfg.First, resp.Bookie, err), Failed: b.failed})
		return
	}
	if isNegative(err) {
		b.negatives++
	} else if b.firstErr == nil {
		b.firstErr = fmt.Errorf("bookie %s: %w", resp.Bookie, err)
	}
	if slices.Contains(b.answered[:b.asked+1], false) {
		return // a speculative request is still out
	}
	if b.asked+1 < len(b.replicas) {
		b.asked++
		b.ask()
		return
	}
	switch {
	case b.negatives >= b.q.NegativeThreshold():
		b.finish(BatchReadComplete{Err: fmt.Errorf("ledger %d entry %d: %w", b.cfg.LedgerID, b.cfg.First, ErrNoSuchEntry), Failed: b.failed})
	case b.firstErr != nil:
		b.finish(BatchReadComplete{Err: fmt.Errorf("ledger %d batch read from entry %d: %w", b.cfg.LedgerID, b.cfg.First, b.firstErr), Fallback: true, Failed: b.failed})
	default:
		// Negatives below the threshold: single reads decide.
		b.finish(BatchReadComplete{Err: fmt.Errorf("ledger %d batch read from entry %d: %w", b.cfg.LedgerID, b.cfg.First, ErrNotAnswered), Fallback: true, Failed: b.failed})
	}
}

// verify checks the bodies in order and returns the verified prefix (at
// most MaxCount); an error if there is no body or the first fails.
func (b *BatchRead) verify(bodies [][]byte) ([]digest.Entry, error) {
	if len(bodies) == 0 {
		return nil, fmt.Errorf("%w: batch read answered OK without an entry", ErrNotAnswered)
	}
	out := make([]digest.Entry, 0, min(len(bodies), b.cfg.MaxCount))
	for i, body := range bodies[:min(len(bodies), b.cfg.MaxCount)] {
		e, err := b.cfg.Verifier.VerifyEntry(body, b.cfg.LedgerID, b.cfg.First+int64(i))
		if err != nil {
			if i == 0 {
				return nil, err
			}
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// speculate asks the next replica if one is left (no replica has answered
// with a verified batch: that would have ended the read) and reports the
// replicas asked and still silent as slow.
func (b *BatchRead) speculate() {
	if b.done || b.asked+1 >= len(b.replicas) {
		return
	}
	var slow []metadata.BookieID
	for i, r := range b.replicas[:b.asked+1] {
		if !b.answered[i] {
			slow = append(slow, r)
		}
	}
	b.asked++
	b.ask()
	for _, r := range slow {
		b.effects = append(b.effects, BookieSlow{Bookie: r})
	}
}

func (b *BatchRead) finish(res BatchReadComplete) {
	b.done = true
	b.effects = append(b.effects, res)
}
