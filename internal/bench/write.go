package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/client"
)

// cleanupTimeout bounds closing the ledgers after a run, also after an
// interrupt (the run's context is over by then).
const cleanupTimeout = 30 * time.Second

// WriteOptions configure Write (and the writer of Tail).
type WriteOptions struct {
	// Ledgers is how many ledgers are written at once (at least 1); adds
	// go to them in turn.
	Ledgers int
	// Ledger holds the quorums, digest and password of each new ledger.
	Ledger client.LedgerOptions
	// EntrySize is the payload of each add in bytes (at least 1).
	EntrySize int
	// MaxOutstanding bounds the adds started and not yet completed, over
	// all ledgers (at least 1). The client's own MaxOutstandingAdds must
	// not be lower, or appends wait inside the client instead.
	MaxOutstanding int
	// Rate is the target adds per second over all ledgers; 0 is as fast as
	// MaxOutstanding allows. Adds are paced on a schedule from the start,
	// so a slow moment is followed by a catch-up burst.
	Rate float64
	// Duration is how long adds are started (positive); the run then
	// waits for the outstanding ones.
	Duration time.Duration
	// Progress, when set, is called every ProgressInterval (default
	// DefaultProgressInterval) from another goroutine.
	Progress         func(Progress)
	ProgressInterval time.Duration
}

// Validate reports the first bad option.
func (o WriteOptions) Validate() error {
	e, w, a := o.Ledger.EnsembleSize, o.Ledger.WriteQuorumSize, o.Ledger.AckQuorumSize
	switch {
	case o.Ledgers < 1:
		return fmt.Errorf("ledgers %d: want at least 1", o.Ledgers)
	case e < 1 || w < 1 || a < 1:
		return fmt.Errorf("ensemble %d, write quorum %d, ack quorum %d: each must be at least 1", e, w, a)
	case w > e:
		return fmt.Errorf("write quorum %d is larger than the ensemble %d: want ensemble ≥ write quorum ≥ ack quorum", w, e)
	case a > w:
		return fmt.Errorf("ack quorum %d is larger than the write quorum %d: want ensemble ≥ write quorum ≥ ack quorum", a, w)
	case o.EntrySize < 1:
		return fmt.Errorf("entry size %d: want at least 1 byte", o.EntrySize)
	case o.MaxOutstanding < 1:
		return fmt.Errorf("max outstanding %d: want at least 1", o.MaxOutstanding)
	case o.Rate < 0:
		return fmt.Errorf("rate %g: want 0 (unlimited) or a positive number of entries per second", o.Rate)
	case o.Duration <= 0:
		return fmt.Errorf("duration %v: want a positive duration", o.Duration)
	}
	return nil
}

// Write creates o.Ledgers ledgers, appends o.EntrySize-byte entries to them
// for o.Duration (or until ctx ends: Result.Interrupted), waits for the
// outstanding adds and closes the ledgers. It does not delete them:
// Result.Ledgers lists them for the caller, also when the error is not nil
// (a create failed, or a close did). A failed add is counted in
// Result.Failed and stops its ledger (its handle cannot append again);
// the run ends early when every ledger has stopped.
func Write(ctx context.Context, c *client.Client, o WriteOptions) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	r, err := newWriteRun(ctx, c, o)
	if err != nil {
		return Result{Ledgers: r.ids()}, err
	}
	res := r.run(ctx)
	res.Ledgers = r.ids()
	return res, r.closeAll(ctx)
}

// writeRun is one run of the writer.
type writeRun struct {
	o       WriteOptions
	ledgers []*ledgerWriter
	counts  *counters
}

// ledgerWriter is one ledger's handle and the queue of its outstanding
// adds, completed in order by one goroutine (appends of a handle complete
// in entry order).
type ledgerWriter struct {
	w       *client.WriteHandle
	pending chan pendingAdd // capacity MaxOutstanding: never full
	broken  atomic.Bool     // an add failed: no more appends
	// lacAtLastSend is the handle's LAC read just before its last
	// append was started: every entry up to it is visible to readers once
	// that append is stored (its request carries a LAC at least as high).
	lacAtLastSend atomic.Int64
	// acked, when set, is told each acknowledged entry (Tail).
	acked func(entryID int64, at time.Time)
}

type pendingAdd struct {
	f     *client.AppendFuture
	start time.Time
}

// newWriteRun creates the ledgers; on error the run holds those created
// (closed again).
func newWriteRun(ctx context.Context, c *client.Client, o WriteOptions) (*writeRun, error) {
	r := &writeRun{o: o, counts: newCounters()}
	for range o.Ledgers {
		w, err := c.CreateLedger(ctx, o.Ledger)
		if err != nil {
			closeErr := r.closeAll(ctx)
			return r, errors.Join(fmt.Errorf("create ledger %d of %d: %w", len(r.ledgers)+1, o.Ledgers, err), closeErr)
		}
		lw := &ledgerWriter{w: w, pending: make(chan pendingAdd, o.MaxOutstanding)}
		lw.lacAtLastSend.Store(-1)
		r.ledgers = append(r.ledgers, lw)
	}
	return r, nil
}

func (r *writeRun) ids() []int64 {
	ids := make([]int64, len(r.ledgers))
	for i, lw := range r.ledgers {
		ids[i] = lw.w.ID()
	}
	return ids
}

// run appends until the duration passes, ctx ends or every ledger broke,
// then waits for the outstanding adds.
func (r *writeRun) run(ctx context.Context) Result {
	o := r.o
	payload := make([]byte, o.EntrySize)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	sem := make(chan struct{}, o.MaxOutstanding)
	var wg sync.WaitGroup
	for _, lw := range r.ledgers {
		wg.Go(func() { lw.complete(sem, r.counts, int64(len(payload))) })
	}
	start := time.Now()
	stopProgress := reportProgress(o.Progress, o.ProgressInterval, func() Progress { return r.counts.progress(start) })
	deadline := time.NewTimer(o.Duration)
	defer deadline.Stop()
	interrupted := false
	next := 0 // round-robin position
loop:
	for n := int64(0); ; n++ {
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(n) / o.Rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				pace := time.NewTimer(wait)
				select {
				case <-pace.C:
				case <-ctx.Done():
					pace.Stop()
					interrupted = true
					break loop
				case <-deadline.C:
					pace.Stop()
					break loop
				}
			}
		}
		select {
		case <-ctx.Done():
			interrupted = true
			break loop
		case <-deadline.C:
			break loop
		default:
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			interrupted = true
			break loop
		case <-deadline.C:
			break loop
		}
		lw := r.nextLedger(&next)
		if lw == nil {
			<-sem
			break loop // every ledger failed
		}
		lw.lacAtLastSend.Store(lw.w.LastAddConfirmed())
		t0 := time.Now()
		lw.pending <- pendingAdd{f: lw.w.AppendAsync(payload), start: t0}
	}
	stop := time.Now()
	for _, lw := range r.ledgers {
		close(lw.pending)
	}
	wg.Wait()
	stopProgress()
	res := r.counts.result(start, stop)
	res.Interrupted = interrupted
	return res
}

// nextLedger returns the next ledger in turn that has not failed, nil when
// all have.
func (r *writeRun) nextLedger(next *int) *ledgerWriter {
	for range r.ledgers {
		lw := r.ledgers[*next%len(r.ledgers)]
		*next++
		if !lw.broken.Load() {
			return lw
		}
	}
	return nil
}

// complete waits for each outstanding add of the ledger in order and
// records it, freeing its place in sem.
func (lw *ledgerWriter) complete(sem <-chan struct{}, counts *counters, size int64) {
	for p := range lw.pending {
		<-p.f.Done()
		id, err := p.f.Wait(context.Background())
		at := time.Now()
		<-sem
		if err != nil {
			lw.broken.Store(true)
			counts.fail(1, fmt.Errorf("ledger %d: add: %w", lw.w.ID(), err))
			continue
		}
		counts.hist.Record(at.Sub(p.start))
		counts.succeed(1, size, at)
		if lw.acked != nil {
			lw.acked(id, at)
		}
	}
}

// closeAll closes the ledgers (also after ctx ended, within
// cleanupTimeout). A ledger whose add failed may refuse: only the close
// errors of healthy ledgers are returned.
func (r *writeRun) closeAll(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, lw := range r.ledgers {
		if err := lw.w.Close(cctx); err != nil && !lw.broken.Load() {
			errs = append(errs, fmt.Errorf("close ledger %d: %w", lw.w.ID(), err))
		}
	}
	return errors.Join(errs...)
}
