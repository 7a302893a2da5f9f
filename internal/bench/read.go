package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/client"
)

// ReadOptions configure Read.
type ReadOptions struct {
	// Ledgers are read at once, one reader each, from entry 0 to the LAC
	// found at open (the last entry of a closed ledger).
	Ledgers []int64
	// Password of the ledgers (as given at their creation).
	Password []byte
	// Batch is how many entries one read request asks for (at least 1);
	// the latency recorded is per request.
	Batch int
	// Duration bounds the run; 0 reads every entry.
	Duration time.Duration
	// Progress, when set, is called every ProgressInterval (default
	// DefaultProgressInterval) from another goroutine.
	Progress         func(Progress)
	ProgressInterval time.Duration
}

// Validate reports the first bad option.
func (o ReadOptions) Validate() error {
	switch {
	case len(o.Ledgers) == 0:
		return errors.New("no ledger to read")
	case o.Batch < 1:
		return fmt.Errorf("batch %d: want at least 1 entry", o.Batch)
	case o.Duration < 0:
		return fmt.Errorf("duration %v: want a positive duration, or 0 to read every entry", o.Duration)
	}
	for _, id := range o.Ledgers {
		if id < 0 {
			return fmt.Errorf("ledger id %d: want a non-negative id", id)
		}
	}
	return nil
}

// Read opens the ledgers without recovery (an open ledger is neither
// fenced nor closed) and reads each from entry 0 to its LAC, Batch
// entries per request, until done, o.Duration passed or ctx ended
// (Result.Interrupted). A ledger that cannot be opened, or whose read
// fails, stops; its unread entries (all of them when the open failed: 1)
// count in Result.Failed.
func Read(ctx context.Context, c *client.Client, o ReadOptions) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if o.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.Duration)
	}
	defer cancel()
	counts := newCounters()
	start := time.Now()
	stopProgress := reportProgress(o.Progress, o.ProgressInterval, func() Progress { return counts.progress(start) })
	var wg sync.WaitGroup
	for _, id := range o.Ledgers {
		wg.Go(func() { readLedger(runCtx, c, id, o, counts) })
	}
	wg.Wait()
	stop := time.Now()
	stopProgress()
	res := counts.result(start, stop)
	res.Ledgers = o.Ledgers
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

func readLedger(ctx context.Context, c *client.Client, id int64, o ReadOptions, counts *counters) {
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: o.Password})
	if err != nil {
		if ctx.Err() == nil {
			counts.fail(1, fmt.Errorf("open ledger %d: %w", id, err))
		}
		return
	}
	defer r.Close()
	lac, err := r.ReadLastAddConfirmed(ctx)
	if err != nil {
		if ctx.Err() == nil {
			counts.fail(1, fmt.Errorf("ledger %d: read LAC: %w", id, err))
		}
		return
	}
	for first := int64(0); first <= lac; first += int64(o.Batch) {
		last := min(first+int64(o.Batch)-1, lac)
		t0 := time.Now()
		entries, err := r.Read(ctx, first, last)
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return // duration over or interrupted: not a failure
			}
			counts.fail(lac-first+1-int64(len(entries)), fmt.Errorf("ledger %d: read %d-%d: %w", id, first, last, err))
			return
		}
		var bytes int64
		for _, e := range entries {
			bytes += int64(len(e.Payload))
		}
		counts.hist.Record(at.Sub(t0))
		counts.succeed(int64(len(entries)), bytes, at)
	}
}

// tailDrainTimeout bounds how long Tail waits, after the writer stopped,
// for its readers to deliver the entries visible to them.
const tailDrainTimeout = 30 * time.Second

// TailResult is what Tail measured: the writer's adds and the readers'
// deliveries, whose Latency is the tailing lag.
type TailResult struct {
	Write, Tail Result
}

// Tail runs a writer as Write does and, in the same process, one tailing
// reader per ledger (ReadHandle.Tail from entry 0, opened before the first
// add). The lag of an entry is the time from its add's completion at the
// writer to its delivery by the reader, both read from this process's
// clock. An entry becomes visible to readers when a later add carries a
// LAC covering it (BookKeeper's piggybacked LAC), so at a steady rate the
// lag includes the gap to the next add. Once the writer stopped, each
// reader is waited for until it delivered every entry the writer's last
// add made visible (bounded by tailDrainTimeout); the ledgers are closed
// then. Tail.Failed counts failed adds and visible entries not delivered.
// Like Write it does not delete the ledgers.
func Tail(ctx context.Context, c *client.Client, o WriteOptions) (TailResult, error) {
	if err := o.Validate(); err != nil {
		return TailResult{}, err
	}
	w, err := newWriteRun(ctx, c, o)
	if err != nil {
		return TailResult{Write: Result{Ledgers: w.ids()}}, err
	}
	tailCounts := newCounters()
	tctx, stopTails := context.WithCancel(ctx)
	defer stopTails()
	var wg sync.WaitGroup
	tails := make([]*tailer, len(w.ledgers))
	var openErr error
	for i, lw := range w.ledgers {
		t := &tailer{id: lw.w.ID(), reached: make(chan struct{}), ended: make(chan struct{})}
		t.delivered.Store(-1)
		t.target.Store(math.MaxInt64)
		tails[i] = t
		lw.acked = t.ack
		rh, err := c.OpenLedger(ctx, t.id, client.OpenOptions{Password: o.Ledger.Password})
		if err != nil {
			openErr = fmt.Errorf("open ledger %d to tail it: %w", t.id, err)
			close(t.ended)
			continue
		}
		wg.Go(func() {
			defer rh.Close()
			t.follow(tctx, rh, tailCounts)
		})
	}
	if openErr != nil {
		stopTails()
		wg.Wait()
		ids := w.ids()
		return TailResult{Write: Result{Ledgers: ids}, Tail: Result{Ledgers: ids}}, errors.Join(openErr, w.closeAll(ctx))
	}
	start := time.Now()
	progress := o.Progress
	o.Progress = nil // the run reports the tail's figures, not the writer's
	w.o = o
	stopProgress := reportProgress(progress, o.ProgressInterval, func() Progress { return tailCounts.progress(start) })
	writeRes := w.run(ctx)
	writeRes.Ledgers = w.ids()

	// Wait for each reader to deliver what the writer's last add made
	// visible; a reader that ended (an error) is not waited for.
	drain := time.NewTimer(tailDrainTimeout)
	defer drain.Stop()
	for i, lw := range w.ledgers {
		tails[i].setTarget(visibleAtEnd(lw))
	}
wait:
	for _, t := range tails {
		select {
		case <-t.reached:
		case <-t.ended:
		case <-ctx.Done():
			break wait
		case <-drain.C:
			break wait
		}
	}
	stopTails()
	wg.Wait()
	stop := time.Now()
	stopProgress()
	tailRes := tailCounts.result(start, stop)
	for i, t := range tails {
		if missing := visibleAtEnd(w.ledgers[i]) - t.delivered.Load(); missing > 0 {
			cause := t.err
			if cause == nil {
				cause = fmt.Errorf("ledger %d: %d visible entries not delivered", t.id, missing)
			}
			tailRes.Failed += missing
			if tailRes.FirstError == nil {
				tailRes.FirstError = cause
			}
		}
	}
	tailRes.Failed += writeRes.Failed
	if tailRes.FirstError == nil {
		tailRes.FirstError = writeRes.FirstError
	}
	tailRes.Ledgers = writeRes.Ledgers
	tailRes.Interrupted = writeRes.Interrupted || ctx.Err() != nil
	return TailResult{Write: writeRes, Tail: tailRes}, w.closeAll(ctx)
}

// visibleAtEnd is the last entry of lw that its readers are sure to see
// once the writer stopped: the LAC its last add carried; -1 (nothing to
// wait for) for a ledger whose add failed, as that add may be the one
// that would have carried it (the failed adds are counted already).
func visibleAtEnd(lw *ledgerWriter) int64 {
	if lw.broken.Load() {
		return -1
	}
	return lw.lacAtLastSend.Load()
}

// tailer is one ledger's tailing reader.
type tailer struct {
	id int64
	// ackedAt[e] is when the writer saw entry e acknowledged.
	mu struct {
		sync.Mutex
		ackedAt []time.Time
	}
	delivered atomic.Int64 // highest entry delivered, -1 before any
	target    atomic.Int64 // entry to reach before the reader may stop
	once      sync.Once
	reached   chan struct{} // closed once delivered ≥ target
	ended     chan struct{} // closed when follow returns
	err       error         // the read error follow stopped on; read after ended
}

// ack records entry id's acknowledgement (the writer's completion
// goroutine; entries arrive in order).
func (t *tailer) ack(id int64, at time.Time) {
	t.mu.Lock()
	for int64(len(t.mu.ackedAt)) <= id {
		t.mu.ackedAt = append(t.mu.ackedAt, time.Time{})
	}
	t.mu.ackedAt[id] = at
	t.mu.Unlock()
}

// lag is the time from id's acknowledgement to at; 0 when the writer's
// completion has not been recorded yet (the reader won the race to it).
func (t *tailer) lag(id int64, at time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id >= int64(len(t.mu.ackedAt)) || t.mu.ackedAt[id].IsZero() {
		return 0
	}
	return max(at.Sub(t.mu.ackedAt[id]), 0)
}

func (t *tailer) setTarget(target int64) {
	t.target.Store(target)
	if t.delivered.Load() >= target {
		t.once.Do(func() { close(t.reached) })
	}
}

// follow delivers entries until ctx ends or a read fails.
func (t *tailer) follow(ctx context.Context, r *client.ReadHandle, counts *counters) {
	defer close(t.ended)
	for e, err := range r.Tail(ctx, 0) {
		if err != nil {
			if ctx.Err() == nil {
				t.err = fmt.Errorf("ledger %d: tail: %w", t.id, err)
			}
			return
		}
		at := time.Now()
		counts.hist.Record(t.lag(e.ID, at))
		counts.succeed(1, int64(len(e.Payload)), at)
		t.delivered.Store(e.ID)
		if e.ID >= t.target.Load() {
			t.once.Do(func() { close(t.reached) })
		}
	}
}
