package sim

import (
	"container/heap"
	"time"

	"github.com/foliodb/folio/internal/clock"
)

// worldClock is the components' clock.Clock in the simulator: it reads the
// loop's virtual time, and its timers are events of the loop, so a bookie's
// long-poll timeOut fires at its exact virtual time, between the other
// events, in a seeded order. Used only from the loop goroutine.
type worldClock struct{ w *world }

var _ clock.Clock = worldClock{}

func (c worldClock) Now() time.Time { return simEpoch.Add(c.w.now) }

func (c worldClock) NewTimer(d time.Duration) clock.Timer {
	t := &simTimer{w: c.w, ch: make(chan time.Time, 1)}
	t.arm(d)
	return t
}

func (c worldClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &simTimer{w: c.w, fn: f}
	t.arm(d)
	return t
}

func (c worldClock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("sim: non-positive interval for NewTicker")
	}
	t := &simTimer{w: c.w, ch: make(chan time.Time, 1), period: d}
	t.arm(d)
	return simTicker{t}
}

// simTimer is a timer, AfterFunc callback (fn set) or ticker (period set)
// on the world's clock; ev is its pending event, nil when not armed.
type simTimer struct {
	w      *world
	ch     chan time.Time
	fn     func()
	period time.Duration
	ev     *event
}

func (t *simTimer) arm(d time.Duration) { t.ev = t.w.after(d, t.fire) }

func (t *simTimer) fire() {
	t.ev = nil
	switch {
	case t.period > 0:
		t.arm(t.period)
		t.deliver()
	case t.fn != nil:
		t.fn()
	default:
		t.deliver()
	}
}

// deliver sends the time unless a value is waiting (a slow reader misses
// ticks).
func (t *simTimer) deliver() {
	select {
	case t.ch <- simEpoch.Add(t.w.now):
	default:
	}
}

func (t *simTimer) C() <-chan time.Time { return t.ch }

func (t *simTimer) Stop() bool {
	armed := t.ev != nil
	if armed {
		heap.Remove(&t.w.q, t.ev.idx)
		t.ev = nil
	}
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	return armed
}

func (t *simTimer) Reset(d time.Duration) bool {
	armed := t.Stop()
	t.arm(d)
	return armed
}

type simTicker struct{ t *simTimer }

func (k simTicker) C() <-chan time.Time { return k.t.ch }
func (k simTicker) Stop()               { k.t.Stop() }
func (k simTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("sim: non-positive interval for Ticker.Reset")
	}
	k.t.Stop()
	k.t.period = d
	k.t.arm(d)
}
