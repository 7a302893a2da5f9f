package client

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// WriteHandle appends to a ledger this client created. It is safe for
// concurrent use; appends from one goroutine get increasing entry ids in
// call order.
//
// Each handle runs its ledger's protocol machine (internal/ledger.Writer)
// on one goroutine, its ordered executor, as BookKeeper runs a ledger
// handle on one ordered thread: appends, bookie answers, metadata results
// and membership changes are queued to it and handled in order.
type WriteHandle struct {
	c  *Client
	id int64
	io *ledgerexec.Executor
	q  *ledgerexec.Queue

	lac atomic.Int64
	// exited is closed when the executor goroutine has returned.
	exited chan struct{}
	// stopped asks the executor to stop (client closing).
	stopped  chan struct{}
	stopOnce atomic.Bool

	forceIDs atomic.Int64
	// meta is the writer's metadata as Metadata returns it, replaced by the
	// executor goroutine whenever the writer's metadata changes.
	meta     atomic.Pointer[LedgerMetadata]
	metaFrom *metadata.LedgerMetadata // executor-owned: what meta was made from

	// Owned by the executor goroutine:
	w *ledger.Writer
	// effs is drive's buffer for the writer's effects.
	effs []ledger.Effect
	// forceWaiters are the Force calls waiting, by force id.
	forceWaiters map[int64]chan error
	// futures are the accepted appends, in entry order.
	futures      []*AppendFuture
	futuresHead  int
	closeWaiters []chan error
	closeResult  *ledger.CloseComplete
	// closeDelivered: a Close call got its answer; the handle is finished.
	closeDelivered bool
	// advFutures are the accepted WriteAts of a WriteAdvHandle by entry id
	// (nil for an Append handle: futures is used); writeadv.go.
	advFutures map[int64]*AppendFuture
}

// AppendFuture is the pending result of AppendAsync, AppendAsyncContext
// or WriteAdvHandle.WriteAtAsync.
//
// A future is not pooled: the caller holds it for as long as it likes.
// Its completion channel is made only when someone waits before the append
// completes (Done or Wait on a pending future): a future completed before
// anyone looks at it costs no channel (issue #22).
type AppendFuture struct {
	w       *WriteHandle
	payload []byte
	start   time.Time
	entryID int64
	err     error
	slot    bool
	// ctx, from AppendAsyncContext, cancels the append until the handle
	// sends it; nil: AppendAsync.
	ctx context.Context

	// mu guards completed and done. complete sets entryID and err, then
	// completed under mu, then closes done if a waiter made it: a reader
	// that sees completed under mu, or receives from done, reads entryID
	// and err after they were written.
	mu        sync.Mutex
	completed bool
	done      chan struct{}
}

// closedChan is the Done channel of every completed future nobody waited
// on before it completed.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// doneChan returns a channel closed once f completes, making it if f is
// still pending.
func (f *AppendFuture) doneChan() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completed {
		return closedChan
	}
	if f.done == nil {
		f.done = make(chan struct{})
	}
	return f.done
}

// Wait waits until the append completes and returns its entry id, or
// returns ctx's error if ctx ends first (the append goes on: ctx bounds the
// wait, not the add). An error from the append itself matches one of the
// client's errors; ErrLedgerFenced, ErrLedgerClosed, ErrTimeout (and
// ErrAddQuorumTimeout, which matches it), ErrNotEnoughBookies and
// ErrTooManyEnsembleChanges mean the outcome is unknown: the entry may be
// stored on some bookies, and a later recovery of the ledger decides.
func (f *AppendFuture) Wait(ctx context.Context) (int64, error) {
	select {
	case <-f.doneChan():
		return f.entryID, f.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Done is closed when the append has completed.
func (f *AppendFuture) Done() <-chan struct{} { return f.doneChan() }

// complete records the append's result and wakes its waiters; called
// once, by the goroutine that owns the pending append (the handle's loop,
// or appendAsyncCtx for an append refused before it was queued).
func (f *AppendFuture) complete(id int64, err error) {
	f.payload = nil
	if f.slot {
		<-f.w.c.addSlots
	}
	observe(f.w.c.metrics.add, f.start, err)
	f.mu.Lock()
	f.entryID, f.err = id, publicError(err)
	f.completed = true
	ch := f.done
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

type closeCmd struct{ done chan error }

type forceCmd struct {
	id   int64
	done chan error
}

// Force makes every entry acknowledged before the call durable on all
// bookies of the ensemble, and moves the LAC to the last of them (spec
// §1.8). It matters only for DeferredSync ledgers: otherwise, or when
// nothing was acknowledged since the last force, it returns at once. One
// bookie failing fails the force. On a closed or stopped handle it fails
// with ErrLedgerClosed or ErrLedgerFenced.
func (w *WriteHandle) Force(ctx context.Context) error {
	done := make(chan error, 1)
	if !w.q.Push(forceCmd{id: w.forceIDs.Add(1), done: done}) {
		return w.exitErr()
	}
	select {
	case err := <-done:
		return err
	case <-w.exited:
		select {
		case err := <-done:
			return err
		default:
		}
		return w.exitErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) newWriteHandle(id int64, md *metadata.LedgerMetadata, version metadata.Version, dig *digest.Digester, opts LedgerOptions, explicit bool) (*WriteHandle, error) {
	password := opts.Password
	pl := c.newPolicy(md.WriteQuorum, md.AckQuorum)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClientClosed
	}
	m, err := ledger.NewWriter(ledger.WriterConfig{
		LedgerID:      id,
		Metadata:      md,
		Version:       version,
		Placement:     pl,
		AckedAdhering: c.ackRule(pl, md.WriteQuorum, md.AckQuorum),
		Writable:      c.mu.writable,

		ExplicitIDs: explicit,

		DeferredSync:        opts.WriteFlags&DeferredSync != 0,
		ExplicitLACInterval: opts.ExplicitLACInterval,

		AddRecords: &addRecords,

		AddQuorumTimeout:    c.cfg.AddEntryQuorumTimeout,
		DelayEnsembleChange: c.cfg.DelayEnsembleChange,
		MaxEnsembleChanges:  c.cfg.MaxNumEnsembleChanges,
	})
	if err != nil {
		return nil, err
	}
	q := ledgerexec.NewQueue()
	w := &WriteHandle{c: c, id: id, q: q, w: m,
		io:     c.newExecutor(id, dig, password, func(ev ledger.Event) { q.Push(ev) }, func(ev ledger.AddResponse) { q.PushAdd(ev) }),
		exited: make(chan struct{}), stopped: make(chan struct{}),
		forceWaiters: map[int64]chan error{}}
	w.lac.Store(-1)
	if explicit {
		w.advFutures = map[int64]*AppendFuture{}
	}
	w.publishMetadata()
	c.mu.writers[w] = struct{}{}
	c.wg.Add(1)
	go w.loop()
	return w, nil
}

// ID returns the ledger id.
func (w *WriteHandle) ID() int64 { return w.id }

// LastAddConfirmed returns the highest acknowledged entry id (-1 if none);
// for a DeferredSync ledger, the highest entry made durable by Force.
func (w *WriteHandle) LastAddConfirmed() int64 { return w.lac.Load() }

// Append appends payload and waits until it is acknowledged: stored
// durably on an ack quorum of bookies, with every lower entry. It returns
// the entry id. ctx bounds the wait for room (Config.MaxOutstandingAdds)
// and for the acknowledgement; after ctx ends the append may still
// succeed. payload must not be modified until Append returns.
func (w *WriteHandle) Append(ctx context.Context, payload []byte) (int64, error) {
	return w.appendAsync(ctx, payload).Wait(ctx)
}

// AppendAsync starts appending payload and returns its future at once,
// or, when MaxOutstandingAdds appends are outstanding, after one completes
// (or, with FailFastWhenBusy, with ErrTooManyRequests). Appends are
// pipelined and complete in entry order. payload is not copied: it must not
// be modified until the future completes.
func (w *WriteHandle) AppendAsync(payload []byte) *AppendFuture {
	return w.appendAsync(context.Background(), payload)
}

// AppendAsyncContext is AppendAsync with a context that may cancel the
// append until it is sent. If ctx ends while the append waits for room
// (MaxOutstandingAdds) or in the handle's queue, the future fails with an
// error matching ctx.Err() (errors.Is with context.Canceled or
// context.DeadlineExceeded): the append got no entry id and nothing was
// written. Once the handle has sent it to the bookies, ctx no longer
// matters: a sent entry cannot be unsent, and the append completes as any
// other (success, or an error whose outcome is unknown, as ErrTimeout).
// To bound the wait for the result, use Wait's context.
//
// An append that fails before it is sent (ctx ended, ErrEntryTooLarge,
// ErrTooManyRequests) does not affect the appends after it, which may
// succeed: a caller that needs its records contiguous in the ledger must
// stop at the first failed append. payload must not be modified until the
// future completes.
func (w *WriteHandle) AppendAsyncContext(ctx context.Context, payload []byte) *AppendFuture {
	return w.appendAsyncCtx(ctx, payload, true)
}

func (w *WriteHandle) appendAsync(ctx context.Context, payload []byte) *AppendFuture {
	return w.appendAsyncCtx(ctx, payload, false)
}

// appendAsyncCtx starts an append; ctx bounds the wait for room, and with
// cancelQueued also the time in the queue until the append is sent.
func (w *WriteHandle) appendAsyncCtx(ctx context.Context, payload []byte, cancelQueued bool) *AppendFuture {
	c := w.c
	f := &AppendFuture{w: w, payload: payload, start: time.Now()}
	if cancelQueued {
		if err := ctx.Err(); err != nil {
			f.complete(-1, fmt.Errorf("ledger %d: append not sent: %w", w.id, err))
			return f
		}
		f.ctx = ctx
	}
	if limit := c.maxEntrySize(); len(payload) > limit {
		// Refused here: sent, its frame would fail to encode (or close the
		// bookie connection), which the ledger would take for a bookie
		// failure and answer with ensemble changes.
		f.complete(-1, fmt.Errorf("%w: a %d-byte entry does not fit a %d-byte frame (Config.MaxFrameSize; at most %d bytes of payload)",
			ErrEntryTooLarge, len(payload), c.frameSize(), limit))
		return f
	}
	if c.cfg.FailFastWhenBusy {
		select {
		case c.addSlots <- struct{}{}:
		default:
			f.complete(-1, fmt.Errorf("%w: %d appends outstanding", ErrTooManyRequests, c.cfg.MaxOutstandingAdds))
			return f
		}
	} else {
		select {
		case c.addSlots <- struct{}{}:
		case <-ctx.Done():
			f.complete(-1, ctx.Err())
			return f
		case <-w.exited:
			f.complete(-1, w.exitErr())
			return f
		}
	}
	f.slot = true
	if !w.q.Push(f) {
		f.complete(-1, w.exitErr())
	}
	return f
}

// exitErr is the error of an append the executor can no longer take: the
// handle is closed, or the client closed (then it matches ErrClientClosed
// too).
func (w *WriteHandle) exitErr() error {
	if w.stopOnce.Load() {
		return fmt.Errorf("%w: %w: ledger %d", ErrClientClosed, ErrLedgerClosed, w.id)
	}
	return fmt.Errorf("%w: ledger %d: write handle closed", ErrLedgerClosed, w.id)
}

// Close fails the appends still pending with ErrLedgerClosed and closes the
// ledger at its last acknowledged entry. It returns ErrMetadataVersion if
// another client closed the ledger at a different end (recovered it while
// this writer had appends outstanding). Calling it again returns the same
// result.
func (w *WriteHandle) Close(ctx context.Context) error {
	done := make(chan error, 1)
	if !w.q.Push(closeCmd{done}) {
		return w.closedResult()
	}
	select {
	case err := <-done:
		return err
	case <-w.exited:
		select {
		case err := <-done:
			return err
		default:
		}
		return w.closedResult()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closedResult is Close's answer once the executor has exited.
func (w *WriteHandle) closedResult() error {
	<-w.exited
	if w.closeResult != nil {
		return publicError(w.closeResult.Err)
	}
	return fmt.Errorf("%w: ledger %d: client closed before the ledger was closed", ErrClientClosed, w.id)
}

// stop ends the executor without closing the ledger (Client.Close).
func (w *WriteHandle) stop() {
	if w.stopOnce.CompareAndSwap(false, true) {
		close(w.stopped)
	}
	<-w.exited
}

// loop is the ledger's ordered executor.
func (w *WriteHandle) loop() {
	defer w.c.wg.Done()
	defer close(w.exited)
	defer w.unregister()
	// The writer's Ticks send the explicit LAC (WriterConfig.ExplicitLACInterval).
	tick := ledgerexec.NewTicker(w.c.clock, w.w.TickInterval())
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
			tick.Fired()
			w.w.Step(ledger.Tick{})
			w.drive()
			continue
		case <-w.q.Signal():
		case <-w.stopped:
			w.q.Close()
			w.failAll(fmt.Errorf("%w: %w: ledger %d", ErrClientClosed, ErrLedgerClosed, w.id))
			return
		}
		for _, qi := range w.q.Drain() {
			if qi.IsAdd {
				w.w.StepAdd(qi.Add)
				w.drive()
				continue
			}
			switch it := qi.Value.(type) {
			case *AppendFuture:
				if it.ctx != nil && it.ctx.Err() != nil {
					// AppendAsyncContext: cancelled before it was sent.
					it.complete(-1, fmt.Errorf("ledger %d: append not sent: %w", w.id, it.ctx.Err()))
					continue
				}
				id, err := w.w.Append(it.payload)
				if err != nil {
					it.complete(-1, err)
					continue
				}
				it.entryID = id
				w.futures = append(w.futures, it)
			case writeAtCmd:
				w.writeAt(it.f)
			case closeCmd:
				w.closeWaiters = append(w.closeWaiters, it.done)
				w.w.Close()
			case forceCmd:
				w.forceWaiters[it.id] = it.done
				w.w.Force(it.id)
			case ledger.Event:
				w.w.Step(it)
			}
			w.drive()
		}
		if w.closeResult != nil && len(w.closeWaiters) == 0 && w.userClosed() {
			w.q.Close()
			w.failAll(w.exitErr())
			return
		}
	}
}

// publishMetadata refreshes meta when the writer's metadata changed. The
// writer replaces its metadata value on each change, never edits it.
func (w *WriteHandle) publishMetadata() {
	if md, _ := w.w.Metadata(); md != w.metaFrom {
		m := newLedgerMetadata(w.id, md)
		w.meta.Store(&m)
		w.metaFrom = md
	}
}

// userClosed: Close was called and answered; the handle is finished.
func (w *WriteHandle) userClosed() bool { return w.closeDelivered }

// drive carries out the writer's effects in order.
func (w *WriteHandle) drive() {
	// Metadata is published before any completion is delivered, so that a
	// caller whose append or Close returned reads metadata at least as new
	// (the writer's metadata changes in Step, Append, Close and Force,
	// all before drive); and again after, for changes the effects made.
	defer w.publishMetadata()
	// effs is the handle's scratch buffer, taken out while in use (drive
	// is not re-entered today: io.Do's answers go to the queue, never
	// back into drive; taking it keeps a nested call from overwriting it).
	effs := w.w.ReadyAppend(w.effs[:0])
	w.effs = nil
	defer func() {
		clear(effs)
		if cap(effs) <= 1024 { // a burst's buffer is not kept
			w.effs = effs[:0]
		}
	}()
	w.publishMetadata()
	for _, eff := range effs {
		if w.io.Do(eff) {
			continue
		}
		switch e := eff.(type) {
		case ledger.AddComplete:
			w.completeAdd(e)
		case ledger.ForceComplete:
			w.lac.Store(w.w.LastAddConfirmed())
			if ch := w.forceWaiters[e.ID]; ch != nil {
				delete(w.forceWaiters, e.ID)
				ch <- publicError(e.Err)
			}
		case ledger.CloseComplete:
			res := e
			w.closeResult = &res
			err := publicError(e.Err)
			for _, ch := range w.closeWaiters {
				ch <- err
				w.closeDelivered = true
			}
			w.closeWaiters = w.closeWaiters[:0]
			if e.Err != nil {
				w.c.log.Warn("ledger close failed", "ledger", w.id, "err", e.Err)
			} else {
				w.c.log.Debug("ledger closed", "ledger", w.id, "last_entry", e.LastEntryID, "length", e.Length)
			}
		default:
			panic(fmt.Sprintf("client: writer effect %T not handled", eff))
		}
	}
}

func (w *WriteHandle) completeAdd(e ledger.AddComplete) {
	if w.advFutures != nil {
		w.completeWriteAt(e)
		return
	}
	if w.futuresHead >= len(w.futures) {
		panic(fmt.Sprintf("client: ledger %d: completion of entry %d with no pending append", w.id, e.EntryID))
	}
	f := w.futures[w.futuresHead]
	if f.entryID != e.EntryID {
		panic(fmt.Sprintf("client: ledger %d: completion of entry %d, but the oldest pending append is entry %d", w.id, e.EntryID, f.entryID))
	}
	w.futures[w.futuresHead] = nil
	w.futuresHead++
	if w.futuresHead == len(w.futures) {
		w.futures, w.futuresHead = w.futures[:0], 0
	} else if w.futuresHead > 1024 && 2*w.futuresHead > len(w.futures) {
		n := copy(w.futures, w.futures[w.futuresHead:])
		clear(w.futures[n:])
		w.futures, w.futuresHead = w.futures[:n], 0
	}
	if e.Err != nil {
		f.complete(-1, fmt.Errorf("ledger %d entry %d: %w", w.id, e.EntryID, e.Err))
		return
	}
	w.lac.Store(w.w.LastAddConfirmed())
	f.complete(e.EntryID, nil)
}

// failAll fails every pending append (the executor is stopping).
func (w *WriteHandle) failAll(err error) {
	for _, f := range w.futures[w.futuresHead:] {
		f.complete(-1, err)
	}
	w.futures, w.futuresHead = nil, 0
	w.failWriteAts(err)
	for _, ch := range w.closeWaiters {
		ch <- err
	}
	w.closeWaiters = nil
	for id, ch := range w.forceWaiters {
		ch <- err
		delete(w.forceWaiters, id)
	}
}

// unregister removes the handle from the client's writers and, if its
// ensembles hold a bookie that is no longer registered, prunes the
// per-bookie state only it kept (Client.pruneBookies). A handle on
// registered bookies only leaves nothing to prune: the last membership
// change kept all of them anyway, so closing many handles costs no prune
// each.
func (w *WriteHandle) unregister() {
	c := w.c
	c.mu.Lock()
	delete(c.mu.writers, w)
	stale := false
	for b := range w.ensembleBookies() {
		if !c.registeredLocked(b) {
			stale = true
			break
		}
	}
	c.mu.Unlock()
	if stale {
		c.pruneBookies()
	}
}

// ensembleBookies yields the bookies of the handle's ensembles, as last
// published in its metadata (repeats included).
func (w *WriteHandle) ensembleBookies() iter.Seq[metadata.BookieID] {
	return func(yield func(metadata.BookieID) bool) {
		md := w.meta.Load()
		if md == nil {
			return
		}
		for _, e := range md.ensembles {
			for _, b := range e.Bookies {
				if !yield(metadata.BookieID(b)) {
					return
				}
			}
		}
	}
}

// addRecordPool holds the ledger writers' per-entry records between adds,
// shared by every write handle of the process (ledger.AddRecords): a
// handle that had a burst in flight keeps none of it once idle, as a
// sync.Pool empties over garbage collections.
var addRecordPool sync.Pool

var addRecords = ledger.AddRecords{Get: addRecordPool.Get, Put: addRecordPool.Put}

// addFrameOverhead bounds what an add request's frame holds besides the
// payload: the length prefix, the v2 header or v3 protobuf header and
// fields (ledger and entry ids, master key, flags) and the entry's digest
// header (ids, LAC, length) and digest (20 bytes at most, HMAC-SHA1).
const addFrameOverhead = 256

// frameSize is the client's frame limit.
func (c *Client) frameSize() int {
	if c.cfg.MaxFrameSize > 0 {
		return c.cfg.MaxFrameSize
	}
	return wire.MaxFrameSize
}

// maxEntrySize is the largest payload an append takes.
func (c *Client) maxEntrySize() int { return c.frameSize() - addFrameOverhead }
