package ledger

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// ReadConfig configures a Read.
type ReadConfig struct {
	LedgerID int64
	// Metadata maps each entry to its fragment's ensemble.
	Metadata *metadata.LedgerMetadata
	Verifier Verifier
	// First and Last bound the range, inclusive. Whether Last may pass the
	// LAC is the caller's decision (Read vs ReadUnconfirmed).
	First, Last int64
	// Avoid reports bookies to ask last (recently slow or failing, as the
	// shell remembers them; Java's reorderReadSequence). nil: write-set
	// order. It must be a pure function during the read.
	Avoid func(metadata.BookieID) bool
	// SpeculativeTimeout is the read's first TickInterval: at each Tick,
	// entries still waiting are asked of their next replica unless a
	// bookie they were asked of has answered this read successfully (see
	// Read). Zero: no speculative reads.
	SpeculativeTimeout time.Duration
	// SpeculativeMax and SpeculativeMultiplier make the later intervals
	// back off (Speculation): each is the previous one times the
	// multiplier, capped at SpeculativeMax. Zero: every interval is
	// SpeculativeTimeout.
	SpeculativeMax        time.Duration
	SpeculativeMultiplier float64
	// Sticky, when the ledger has E == Qw, asks every entry of the
	// bookie at ensemble index StickyIndex first (Java's
	// stickyReadsEnabled; see readOrder). False: write-set order.
	Sticky      bool
	StickyIndex int
}

// Read reads the entries First … Last in sequential mode (spec §3.3): each
// entry is asked of one replica at a time, in write-set order, moving to the
// next replica on an error, a timeout or a body that fails verification.
// Every entry of the range is in flight at once; the shell bounds the range
// it asks for.
//
// An entry fails when every replica of its write set has failed. The error
// is ErrNoSuchEntry only if at least Qw − Qa + 1 of them answered with an
// explicit negative (then the entry was never acknowledged); otherwise it is
// the first other error, since an unknown answer may hide the entry.
//
// Speculative reads (spec §3.3, Java's maybeSendSpeculativeRead): on a
// Tick (the shell steps one each TickInterval) every entry still without a
// result that has a replica left to ask is asked of its next replica,
// unless one of the replicas it was asked of has answered successfully
// (with a body that verified) for any entry of this read: that bookie is
// up, and the entry's answer is only behind the others. An error is no
// success: a speculative replica failing fast leaves the next Tick to ask
// the one after it (unless it answered another entry successfully). The
// replicas asked and still silent are reported with BookieSlow effects.
// Any asked replica's answer is then accepted.
//
// Inputs: Start, Step(ReadResponse | Tick). Outputs: SendRead,
// BookieSlow, then EntryComplete for each entry in ascending order, then one
// ReadComplete. Delivery stops at the first entry that fails.
type Read struct {
	cfg    ReadConfig
	q      quorum.Params
	spec   Speculation
	tick   time.Duration // the current TickInterval
	failed []metadata.BookieID
	// heard holds the bookies that answered an entry of this read with a
	// body that verified (Java's heardFromHosts; a late answer for an
	// entry already done is not verified, so not counted): speculate
	// skips the entries asked of one of them.
	heard   map[metadata.BookieID]bool
	entries []entryRead // entries[i] is entry First+i
	// next is the lowest entry not yet delivered, as an index into entries.
	next    int
	done    bool
	effects []Effect
}

// entryRead is the state of one entry: which replica is being asked and what
// the earlier ones said.
type entryRead struct {
	replicas  []metadata.BookieID // the write set, in order
	asked     int                 // replicas[0..asked] were asked
	answered  []bool              // by replica index
	negatives int
	firstErr  error
	result    *digest.Entry
	err       error // set once every replica failed
}

// NewRead returns a Read; Start sends the requests.
func NewRead(cfg ReadConfig) (*Read, error) {
	md := cfg.Metadata
	if cfg.First < 0 || cfg.Last < cfg.First {
		return nil, fmt.Errorf("ledger %d: bad read range [%d, %d]", cfg.LedgerID, cfg.First, cfg.Last)
	}
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	spec := Speculation{First: cfg.SpeculativeTimeout, Max: cfg.SpeculativeMax, Multiplier: cfg.SpeculativeMultiplier}
	r := &Read{cfg: cfg, q: q, spec: spec, tick: max(0, cfg.SpeculativeTimeout), heard: map[metadata.BookieID]bool{}, entries: make([]entryRead, cfg.Last-cfg.First+1)}
	for i := range r.entries {
		id := cfg.First + int64(i)
		e := &r.entries[i]
		e.replicas = readOrder(q, md.EnsembleAt(id), id, stickyIndex(cfg.Sticky, cfg.StickyIndex), cfg.Avoid)
		e.answered = make([]bool, len(e.replicas))
	}
	return r, nil
}

// Start queues the first request of every entry.
func (r *Read) Start() {
	for i := range r.entries {
		r.ask(i)
	}
}

// Ready returns the queued effects and forgets them.
func (r *Read) Ready() []Effect {
	out := r.effects
	r.effects = nil
	return out
}

// Done reports whether the ReadComplete has been queued.
func (r *Read) Done() bool { return r.done }

// TickInterval is the interval to the next speculative Tick:
// ReadConfig.SpeculativeTimeout at first, backed off after each Tick (see
// ReadConfig.SpeculativeMax). A shell reads it again after every Tick.
func (r *Read) TickInterval() time.Duration { return r.tick }

// Failed returns the bookies that answered a request of this read with an
// error (negatives included), in the order they did, each once: the shell
// moves its sticky bookie on when it is one of them (Java's
// recordReadErrorOnBookie).
func (r *Read) Failed() []metadata.BookieID { return r.failed }

func (r *Read) ask(i int) {
	e := &r.entries[i]
	r.effects = append(r.effects, SendRead{Bookies: []metadata.BookieID{e.replicas[e.asked]}, EntryID: r.cfg.First + int64(i)})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Step feeds one answer or a Tick; answers from replicas not asked, or
// already answered, are ignored.
func (r *Read) Step(ev Event) {
	if _, ok := ev.(Tick); ok {
		r.speculate()
		r.tick = r.spec.next(r.tick)
		return
	}
	resp, ok := ev.(ReadResponse)
	if !ok {
		panic(fmt.Sprintf("ledger: Read cannot step %T", ev))
	}
	i := resp.EntryID - r.cfg.First
	if r.done || i < 0 || i >= int64(len(r.entries)) {
		return
	}
	e := &r.entries[i]
	if e.result != nil || e.err != nil {
		return
	}
	ri := slices.Index(e.replicas[:e.asked+1], resp.Bookie)
	if ri < 0 || e.answered[ri] {
		return
	}
	e.answered[ri] = true
	err := resp.Err
	if err == nil {
		var entry digest.Entry
		if entry, err = r.cfg.Verifier.VerifyEntry(resp.Body, r.cfg.LedgerID, resp.EntryID); err == nil {
			e.result = &entry
			r.heard[resp.Bookie] = true
			r.deliver()
			return
		}
	}
	if !slices.Contains(r.failed, resp.Bookie) {
		r.failed = append(r.failed, resp.Bookie)
	}
	if isNegative(err) {
		e.negatives++
	} else if e.firstErr == nil {
		e.firstErr = fmt.Errorf("bookie %s: %w", resp.Bookie, err)
	}
	if slices.Contains(e.answered[:e.asked+1], false) {
		return // a speculative request is still out
	}
	if e.asked+1 < len(e.replicas) {
		e.asked++
		r.ask(int(i))
		return
	}
	switch {
	case e.negatives >= r.q.NegativeThreshold():
		e.err = fmt.Errorf("ledger %d entry %d: %w", r.cfg.LedgerID, resp.EntryID, ErrNoSuchEntry)
	case e.firstErr != nil:
		e.err = fmt.Errorf("ledger %d entry %d: %w", r.cfg.LedgerID, resp.EntryID, e.firstErr)
	default:
		e.err = fmt.Errorf("ledger %d entry %d: %w", r.cfg.LedgerID, resp.EntryID, ErrNotAnswered)
	}
	r.deliver()
}

// deliver emits the entries that are ready, in order, and the end.
func (r *Read) deliver() {
	for r.next < len(r.entries) {
		e := &r.entries[r.next]
		switch {
		case e.result != nil:
			r.effects = append(r.effects, EntryComplete{Entry: *e.result})
			r.next++
		case e.err != nil:
			r.done = true
			r.effects = append(r.effects, ReadComplete{Err: e.err})
			return
		default:
			return
		}
	}
	r.done = true
	r.effects = append(r.effects, ReadComplete{})
}

// speculate asks the next replica of every entry that is still waiting,
// has a replica left, and was asked of no bookie heard from; it reports the
// replicas asked and still silent as slow.
func (r *Read) speculate() {
	if r.done {
		return
	}
	slow := map[metadata.BookieID]bool{}
	for i := r.next; i < len(r.entries); i++ {
		e := &r.entries[i]
		if e.result != nil || e.err != nil || e.asked+1 >= len(e.replicas) {
			continue
		}
		if slices.ContainsFunc(e.replicas[:e.asked+1], func(b metadata.BookieID) bool { return r.heard[b] }) {
			continue
		}
		for j, b := range e.replicas[:e.asked+1] {
			if !e.answered[j] {
				slow[b] = true
			}
		}
		e.asked++
		r.ask(i)
	}
	for _, b := range slices.Sorted(maps.Keys(slow)) {
		r.effects = append(r.effects, BookieSlow{Bookie: b})
	}
}
