package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Manual is a clock that moves only when Advance is called, for tests. Timers,
// tickers and AfterFunc callbacks whose deadline is reached fire during
// Advance, in deadline order (ties in the order they were armed), each with
// the clock reading its deadline, so a test sees the same sequence at any
// machine speed. Safe for concurrent use.
//
// A channel timer armed with d ≤ 0 delivers at once; an AfterFunc callback
// armed with d ≤ 0 runs at the next Advance (Advance(0) will do), never on
// the goroutine that armed it.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap // armed timers and tickers, earliest first
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current reading.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements Clock.
func (c *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1), idx: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(t, d)
	return t
}

// AfterFunc implements Clock: f runs on the goroutine calling Advance,
// without the clock's lock held (f may use the clock).
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{c: c, fn: f, idx: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(t, d)
	return t
}

// NewTicker implements Clock.
func (c *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &manualTimer{c: c, ch: make(chan time.Time, 1), period: d, idx: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(t, d)
	return manualTicker{t}
}

// Advance moves the clock forward by d (≥ 0) and fires what falls due, in
// deadline order; callbacks run on the calling goroutine.
func (c *Manual) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Manual.Advance with a negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	target := c.now.Add(d)
	for len(c.timers) > 0 && !c.timers[0].at.After(target) {
		t := c.timers[0]
		if t.at.After(c.now) {
			c.now = t.at
		}
		if t.period > 0 {
			// A ticker: one tick (dropped if the last is unread), rearmed
			// a period after its deadline.
			t.at = t.at.Add(t.period)
			c.seq++
			t.seq = c.seq
			heap.Fix(&c.timers, 0)
			t.deliver(c.now)
			continue
		}
		heap.Pop(&c.timers)
		if t.fn == nil {
			t.deliver(c.now)
			continue
		}
		c.mu.Unlock()
		t.fn()
		c.mu.Lock()
	}
	if target.After(c.now) {
		c.now = target
	}
}

// Waiters returns how many timers and tickers are armed (not fired, not
// stopped): a test waits for it to know that a goroutine has armed its
// timer before advancing the clock.
func (c *Manual) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// armLocked schedules t to fire d from now. A channel timer (not a ticker)
// with d ≤ 0 delivers at once.
func (c *Manual) armLocked(t *manualTimer, d time.Duration) {
	if d <= 0 && t.fn == nil && t.period == 0 {
		t.deliver(c.now)
		return
	}
	t.at = c.now.Add(max(d, 0))
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
}

// disarmLocked removes t from the heap and drops an undelivered value;
// it reports whether t was armed.
func (c *Manual) disarmLocked(t *manualTimer) bool {
	armed := t.idx >= 0
	if armed {
		heap.Remove(&c.timers, t.idx)
	}
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	return armed
}

// manualTimer is a timer, an AfterFunc callback (fn set) or a ticker
// (period set) of a Manual clock. at, seq and idx are guarded by c.mu.
type manualTimer struct {
	c      *Manual
	ch     chan time.Time
	fn     func()
	period time.Duration
	at     time.Time
	seq    uint64
	idx    int // position in c.timers; -1 when not armed
}

// deliver sends now on the channel unless a value is waiting there.
func (t *manualTimer) deliver(now time.Time) {
	select {
	case t.ch <- now:
	default:
	}
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.disarmLocked(t)
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	armed := t.c.disarmLocked(t)
	t.c.armLocked(t, d)
	return armed
}

type manualTicker struct{ t *manualTimer }

func (k manualTicker) C() <-chan time.Time { return k.t.ch }
func (k manualTicker) Stop()               { k.t.Stop() }

func (k manualTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.disarmLocked(k.t)
	k.t.period = d
	c.armLocked(k.t, d)
}

// timerHeap orders armed timers by deadline, then by arming order.
type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.idx = -1
	*h = old[:len(old)-1]
	return t
}
