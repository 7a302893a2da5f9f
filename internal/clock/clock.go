// Package clock is the time source injected into Folio's background loops
// and deadlines. Storage and protocol packages may not read the wall clock
// (DESIGN.md §8, enforced by internal/lint): they take a Clock, the bookie
// process passes Real, and tests and the simulator pass a Manual clock.
//
// Every package may import this one (it imports nothing of Folio's).
package clock

import (
	"sync"
	"time"
)

// Clock is the method set of journal.Clock and entrylog.Clock, so one value
// serves the whole storage engine.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock. The zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Manual is a clock that moves only when Advance is called. Timers whose
// deadline is reached fire during Advance. Safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []manualTimer
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current reading.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel (capacity 1) that receives once the clock has
// been advanced by at least d; at once if d ≤ 0.
func (c *Manual) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, manualTimer{c.now.Add(d), ch})
	return ch
}

// Advance moves the clock forward by d and fires the due timers.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// Waiters returns how many timers have not fired yet.
func (c *Manual) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
