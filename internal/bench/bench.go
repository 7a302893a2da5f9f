// Package bench measures a cluster through the public client, for `folio
// bench`: appends to new ledgers (Write), catch-up reads of existing ones
// (Read) and a tailing reader following a writer in the same process
// (Tail). It imports only package client (internal/lint keeps it so), so
// what it measures is what an application using the client sees.
//
// Latencies go into an HdrHistogram of microseconds (1 µs to 1 h, three
// significant digits); throughput is counted over the measured span: from
// the first operation started to the last one completed. The package
// prints nothing: progress goes to a caller's callback, and results are
// values the caller renders.
package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// maxLatency is the largest latency a histogram records; longer ones are
// recorded as this value (an add waits at most its timeouts, far less).
const maxLatency = time.Hour

// DefaultProgressInterval is how often Progress is called when the options
// give no interval.
const DefaultProgressInterval = time.Second

// Histogram is a concurrency-safe latency histogram (microseconds).
type Histogram struct {
	mu struct {
		sync.Mutex
		h *hdrhistogram.Histogram
	}
}

func newHistogram() *Histogram {
	h := &Histogram{}
	h.mu.h = hdrhistogram.New(1, int64(maxLatency/time.Microsecond), 3)
	return h
}

// Record adds one latency; below 1 µs counts as 1 µs, above an hour as an
// hour.
func (h *Histogram) Record(d time.Duration) {
	us := min(max(d.Microseconds(), 1), int64(maxLatency/time.Microsecond))
	h.mu.Lock()
	_ = h.mu.h.RecordValue(us) // in range by construction
	h.mu.Unlock()
}

// Quantile returns the latency at quantile q (0-100); 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.mu.h.ValueAtQuantile(q)) * time.Microsecond
}

// Summary returns the histogram's count and usual percentiles.
func (h *Histogram) Summary() Latency {
	h.mu.Lock()
	defer h.mu.Unlock()
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	l := Latency{Count: h.mu.h.TotalCount()}
	if l.Count == 0 {
		return l
	}
	l.P50 = us(h.mu.h.ValueAtQuantile(50))
	l.P95 = us(h.mu.h.ValueAtQuantile(95))
	l.P99 = us(h.mu.h.ValueAtQuantile(99))
	l.P999 = us(h.mu.h.ValueAtQuantile(99.9))
	l.Max = us(h.mu.h.Max())
	return l
}

// Latency summarises a histogram. HdrHistogram values are exact to three
// significant digits (a reported 1.23 ms is within 1.23–1.24 ms).
type Latency struct {
	Count                    int64
	P50, P95, P99, P999, Max time.Duration
}

// Progress is a snapshot of a run in progress, for a status line.
type Progress struct {
	Elapsed time.Duration
	// Entries completed (appended, read or delivered) and failed so far.
	Entries, Failed int64
	// P99 of the latencies recorded so far.
	P99 time.Duration
}

// Result is what a run measured.
type Result struct {
	// Entries and Bytes completed successfully (payload bytes).
	Entries, Bytes int64
	// Failed counts the operations that failed: adds (Write), entries not
	// read (Read), adds and entries not delivered (Tail).
	Failed int64
	// FirstError is the first failure, nil when Failed is 0.
	FirstError error
	// Elapsed is the measured span: first operation started to last
	// completed (or to the stop, when nothing completed).
	Elapsed time.Duration
	// Latency: per add (Write), per read request (Read), or the tailing
	// lag (Tail).
	Latency Latency
	// Ledgers are the ledgers used, in creation (or given) order.
	Ledgers []int64
	// Interrupted is set when the context ended before the run did.
	Interrupted bool
	// Measured is set once the run started measuring; false when it
	// failed setting up (a ledger could not be created or opened).
	Measured bool
}

// EntriesPerSecond is Entries over Elapsed (0 for an empty span).
func (r Result) EntriesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Entries) / r.Elapsed.Seconds()
}

// MBPerSecond is Bytes over Elapsed in megabytes (10^6 bytes) per second.
func (r Result) MBPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

// counters are a run's shared tallies.
type counters struct {
	mu struct {
		sync.Mutex
		entries, bytes, failed int64
		firstErr               error
		last                   time.Time // last completion
	}
	hist *Histogram
}

func newCounters() *counters { return &counters{hist: newHistogram()} }

func (c *counters) succeed(n, bytes int64, at time.Time) {
	c.mu.Lock()
	c.mu.entries += n
	c.mu.bytes += bytes
	if at.After(c.mu.last) {
		c.mu.last = at
	}
	c.mu.Unlock()
}

func (c *counters) fail(n int64, err error) {
	c.mu.Lock()
	c.mu.failed += n
	if c.mu.firstErr == nil {
		c.mu.firstErr = err
	}
	c.mu.Unlock()
}

func (c *counters) progress(start time.Time) Progress {
	c.mu.Lock()
	p := Progress{Elapsed: time.Since(start), Entries: c.mu.entries, Failed: c.mu.failed}
	c.mu.Unlock()
	p.P99 = c.hist.Quantile(99)
	return p
}

// result fills r from the tallies; the span runs from start to the last
// completion, or to stop when nothing completed.
func (c *counters) result(start, stop time.Time) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.mu.last
	if end.IsZero() {
		end = stop
	}
	return Result{
		Entries: c.mu.entries, Bytes: c.mu.bytes, Failed: c.mu.failed, FirstError: c.mu.firstErr,
		Elapsed: end.Sub(start), Latency: c.hist.Summary(), Measured: true,
	}
}

// reportProgress calls fn every interval until done is closed; the
// returned function stops it and waits.
func reportProgress(fn func(Progress), interval time.Duration, snap func() Progress) (stop func()) {
	if fn == nil {
		return func() {}
	}
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn(snap())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
