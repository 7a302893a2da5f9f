// Package clock is Folio's one time source: the current time, stoppable
// timers, tickers and timer callbacks. Storage, bookie and protocol packages
// may not read the wall clock (DESIGN.md §8, enforced by internal/lint): they
// take a Clock; processes pass Real, tests and the simulator pass a Manual
// clock, which moves only when told to.
//
// Every package may import this one (it imports nothing of Folio's). Other
// packages do not declare clock interfaces of their own; an alias
// (type Clock = clock.Clock) is fine.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and arms timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer whose channel receives the time once d has
	// passed on this clock (at once if d ≤ 0). Stop it when it is no longer
	// wanted: a Manual clock keeps unstopped timers until they fire.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker whose channel receives the time every d
	// (d > 0; NewTicker panics otherwise, as time.NewTicker does). The
	// channel holds one tick: a slow reader misses ticks rather than
	// queueing them. Stop it when done.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f once d has passed on this clock, unless the
	// returned timer is stopped first; its C is nil. Real runs f on a
	// goroutine of its own; Manual runs it on the goroutine that advances
	// the clock. So f must not block, and must not wait for the goroutine
	// that moves the clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer (the shape of *time.Timer).
type Timer interface {
	// C is the channel the time is sent on; nil for an AfterFunc timer.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It returns false if the timer
	// had already fired or been stopped. After Stop, C receives nothing
	// stale (Go 1.23 timer semantics, kept by both implementations).
	Stop() bool
	// Reset rearms the timer to fire after d, as if new; it returns
	// whether the timer was pending. Nothing stale is received after it.
	Reset(d time.Duration) bool
}

// Ticker delivers ticks at intervals (the shape of *time.Ticker).
type Ticker interface {
	C() <-chan time.Time
	// Stop turns the ticker off; no tick is received after it returns.
	Stop()
	// Reset changes the period to d (> 0) and restarts the interval from
	// now.
	Reset(d time.Duration)
}

// Real is the wall clock. The zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker wraps time.NewTicker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }

// Sleep waits until d has passed on c or ctx ends, whichever comes first,
// and returns ctx.Err() in the second case. Its timer is stopped either way.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
