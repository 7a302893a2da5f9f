package ledgerexec

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger"
)

// Queue is the inbox of one ordered loop: transport callbacks, metadata
// results and application commands are pushed from any goroutine without
// blocking, and the loop drains them in order. Its length is bounded by the
// requests and commands in flight, which the client bounds
// (Config.MaxOutstandingAdds, the read chunk size).
type Queue struct {
	mu     sync.Mutex
	items  []Item
	spare  []Item
	closed bool
	// signal (capacity 1) is ready when items is non-empty.
	signal chan struct{}
}

// Item is one queued item: an AddResponse pushed with PushAdd (IsAdd),
// or a value pushed with Push (Value). AddResponses, one per bookie per
// add, are held by value: boxed into an interface each would cost an
// allocation.
type Item struct {
	Value any
	Add   ledger.AddResponse
	IsAdd bool
}

// NewQueue returns an empty, open Queue.
func NewQueue() *Queue { return &Queue{signal: make(chan struct{}, 1)} }

// Push appends an item and reports true; after Close it drops the item (a
// late answer) and reports false.
func (q *Queue) Push(it any) bool { return q.push(Item{Value: it}) }

// PushAdd is Push for an AddResponse, kept unboxed (Item.Add).
func (q *Queue) PushAdd(ev ledger.AddResponse) bool { return q.push(Item{Add: ev, IsAdd: true}) }

func (q *Queue) push(it Item) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

// Signal is ready (at least) once after items were pushed.
func (q *Queue) Signal() <-chan struct{} { return q.signal }

// Drain returns the queued items in push order; the slice is valid until
// the next Drain (the two buffers alternate, so a steady loop allocates
// nothing here).
func (q *Queue) Drain() []Item {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	clear(q.spare)
	if cap(q.spare) > maxKeptItems {
		q.spare = nil // a burst's buffer is not kept for an idle handle
	}
	q.items, q.spare = q.spare[:0], out
	return out
}

// maxKeptItems bounds the capacity of a buffer Drain keeps for reuse.
const maxKeptItems = 4096

// Close drops what is queued and every later Push.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.items = nil
	q.mu.Unlock()
}

// ErrStopped is Run's error when its stop channel closed first.
var ErrStopped = errors.New("ledgerexec: stopped")

// Ticker steps a machine's Ticks: one each m.TickInterval() on a clock,
// counted from the previous tick's handling (a slow loop delays ticks, it
// never queues them). The zero value (or a zero interval) never fires.
// Stop it when done.
type Ticker struct {
	interval time.Duration
	t        clock.Timer
}

// NewTicker returns the Ticker of interval on clk (nil clk: clock.Real).
func NewTicker(clk clock.Clock, interval time.Duration) *Ticker {
	if clk == nil {
		clk = clock.Real{}
	}
	t := &Ticker{interval: interval}
	if interval > 0 {
		t.t = clk.NewTimer(interval)
	}
	return t
}

// C is ready when a Tick is due; call Fired after receiving from it.
func (t *Ticker) C() <-chan time.Time {
	if t.t == nil {
		return nil
	}
	return t.t.C()
}

// Fired arms the next tick.
func (t *Ticker) Fired() {
	if t.t != nil {
		t.t.Reset(t.interval)
	}
}

// FiredNext arms the next tick after interval (a machine's TickInterval
// read again after its Tick: speculative reads back off); zero or
// negative: no more ticks.
func (t *Ticker) FiredNext(interval time.Duration) {
	if t.t == nil {
		return
	}
	t.interval = interval
	if interval <= 0 {
		t.t.Stop()
		return
	}
	t.t.Reset(interval)
}

// Stop disarms the ticker; nothing fires after it.
func (t *Ticker) Stop() {
	if t.t != nil {
		t.t.Stop()
	}
}

// Run drives m to completion on the calling goroutine with the executor's
// own Queue (Config.Emit nil): it calls start, carries out m's effects in
// order (handing completions to deliver), steps the answers as they come
// and a Tick after m.TickInterval() on clk (nil: clock.Real), the interval
// read again after each Tick (a machine may back off). It returns nil
// once m is Done, ctx's error if ctx ends first, or ErrStopped if stop
// closes first; the machine is then abandoned and answers still in flight
// are dropped.
//
// Each Run has a queue of its own, closed when it returns: an executor may
// run one machine after another, and the late answers of an earlier Run
// are dropped, never stepped into a later Run's machine. Runs of one
// executor do not overlap (Run panics if called while one is running).
func (x *Executor) Run(ctx context.Context, clk clock.Clock, stop <-chan struct{}, m ledger.Machine, start func(), deliver func(ledger.Effect)) error {
	if !x.ownQueue {
		panic("ledgerexec: Run needs the executor's own queue (Config.Emit nil)")
	}
	if x.running {
		panic("ledgerexec: Run called while the executor is already running a machine")
	}
	q := NewQueue()
	// Each send captures cfg.Emit when it is made, so an answer goes to the
	// queue of the Run that sent its request.
	x.running, x.cfg.Emit = true, func(ev ledger.Event) { q.Push(ev) }
	defer func() {
		q.Close()
		x.running, x.cfg.Emit = false, nil
	}()
	tick := NewTicker(clk, m.TickInterval())
	defer tick.Stop()
	start()
	for {
		for _, eff := range m.Ready() {
			if !x.Do(eff) {
				deliver(eff)
			}
		}
		if m.Done() {
			return nil
		}
		select {
		case <-tick.C():
			m.Step(ledger.Tick{})
			tick.FiredNext(m.TickInterval())
		case <-q.Signal():
			for _, it := range q.Drain() {
				if it.IsAdd {
					m.Step(it.Add)
					continue
				}
				m.Step(it.Value.(ledger.Event))
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrStopped
		}
	}
}

// TickFunc steps a machine's Ticks for a shell without a loop of its own
// to select on a Ticker's channel: one whose every machine runs on one
// goroutine driven by its clock's callbacks (the simulator, whose clock's
// AfterFunc callbacks are events of its loop). The schedule is Run's:
// the first Tick m.TickInterval() after NewTickFunc, each later one the
// interval read again after the previous Tick (a machine may back off),
// none once it is zero or m is Done.
type TickFunc struct {
	clk  clock.Clock
	m    ledger.Machine
	step func()
	t    clock.Timer
	// stopped: Stop was called (or m is done); nothing fires after it.
	stopped bool
}

// NewTickFunc arms m's first Tick on clk. step must step ledger.Tick{}
// into m and carry out its effects, on the machine's goroutine (clk's
// AfterFunc callbacks must run there). A zero TickInterval arms nothing.
func NewTickFunc(clk clock.Clock, m ledger.Machine, step func()) *TickFunc {
	t := &TickFunc{clk: clk, m: m, step: step}
	t.arm()
	return t
}

func (t *TickFunc) arm() {
	d := t.m.TickInterval()
	if t.stopped || d <= 0 || t.m.Done() {
		t.t = nil
		return
	}
	t.t = t.clk.AfterFunc(d, t.fire)
}

func (t *TickFunc) fire() {
	if t.stopped {
		return
	}
	t.step()
	t.arm()
}

// Stop disarms the ticks; step is not called after it returns.
func (t *TickFunc) Stop() {
	t.stopped = true
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
}
