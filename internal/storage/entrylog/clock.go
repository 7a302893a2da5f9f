package entrylog

import (
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
)

// Clock is the time source of the store: back-pressure deadlines and the
// compaction rate limiter read it. Production passes a wall clock (built
// outside internal/storage, which may not call time.Now); tests and the
// simulator pass a manual one.
type Clock = clock.Clock

// Limiter throttles background I/O (compaction reads and writes).
type Limiter interface {
	// Wait blocks until n more bytes may be transferred. It must return
	// promptly with an error if the limiter is shut down.
	Wait(n int64) error
}

// RateLimiter is a token-bucket Limiter on a Clock: at most BytesPerSecond
// on average, with bursts up to Burst bytes. A request larger than the
// available tokens takes them on credit and waits for the debt to be paid,
// so a single large request is never refused.
type RateLimiter struct {
	clock          Clock
	bytesPerSecond float64
	burst          float64

	mu struct {
		sync.Mutex
		tokens float64
		last   time.Time
	}
}

// NewRateLimiter returns a limiter allowing bytesPerSecond (> 0) with bursts
// of burst bytes (at least 1).
func NewRateLimiter(clock Clock, bytesPerSecond, burst int64) *RateLimiter {
	r := &RateLimiter{clock: clock, bytesPerSecond: float64(max(bytesPerSecond, 1)), burst: float64(max(burst, 1))}
	r.mu.tokens = r.burst
	r.mu.last = clock.Now()
	return r
}

// Wait implements Limiter.
func (r *RateLimiter) Wait(n int64) error {
	r.mu.Lock()
	now := r.clock.Now()
	if el := now.Sub(r.mu.last); el > 0 {
		r.mu.tokens = min(r.burst, r.mu.tokens+el.Seconds()*r.bytesPerSecond)
	}
	r.mu.last = now
	r.mu.tokens -= float64(n)
	debt := -r.mu.tokens
	r.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	<-r.clock.NewTimer(time.Duration(debt / r.bytesPerSecond * float64(time.Second))).C()
	return nil
}

type unlimited struct{}

func (unlimited) Wait(int64) error { return nil }
