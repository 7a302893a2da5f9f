package bookie

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/wire"
)

// A long-poll read (spec §2.5.4) waits, up to the request's timeOut, for
// the bookie's known LAC of the ledger to pass previousLAC, then answers.
// It waits without a goroutine: the store's LAC watch (Store.WatchLAC), the
// clock's timer (Clock.AfterFunc) or Close, whichever comes first, hands
// the answer to new work (Config.Go). So the simulator, which schedules
// Config.Go and drives the clock, runs this code as production does.
//
//	startLongPoll ──Go──▶ arm: WatchLAC, AfterFunc(timeOut)
//	                        │ LAC already past previousLAC, no timeOut,
//	                        │ or an error: answer at once
//	                        ▼
//	            wake | timer | Close ──▶ fire (once) ──Go──▶ answer
//
// Lock order: the store's ledger lock (held while it calls wake), then
// longPoll.mu, then the clock's. cancel (the watch's) takes the store's
// lock, so it is never called with mu held.

// longPoll is one waiting long-poll read.
type longPoll struct {
	b       *Bookie
	req     *wire.Request
	respond Responder
	start   time.Time
	seq     uint64 // arrival order, for Close to answer in order

	mu struct {
		sync.Mutex
		fired    bool        // fire ran: the answer is spawned
		timer    clock.Timer // the timeOut's, once armed
		cancel   func()      // the store watch's, until released
		released bool        // the answer released the watch
	}
}

// pollSet is the bookie's waiting long polls, for Close to answer them.
type pollSet struct {
	mu   sync.Mutex
	seq  uint64
	wait map[*longPoll]struct{}
}

// startLongPoll serves a long-poll read. It holds a long-poll slot rather
// than an in-flight one.
func (b *Bookie) startLongPoll(req *wire.Request, respond Responder, start time.Time) {
	r := &req.Read
	if r.Flag == wire.ReadFlagEntryPiggyback && r.EntryID != wire.LastAddConfirmed {
		b.answerStatus(req, respond, KindLongPollRead, wire.StatusBadRequest, start)
		return
	}
	if n := b.longPolls.Add(1); n > int64(b.cfg.MaxLongPolls) {
		b.longPolls.Add(-1)
		b.answerStatus(req, respond, KindLongPollRead, wire.StatusTooManyRequests, start)
		return
	}
	p := &longPoll{b: b, req: req, respond: respond, start: start}
	// WatchLAC may read the index: off the caller's goroutine.
	b.spawn(p.arm)
}

// arm registers the watch and the timer, or answers at once: the LAC is
// past previousLAC already, the request has no timeOut, or the watch
// failed.
func (p *longPoll) arm() {
	b, r := p.b, &p.req.Read
	b.trackPoll(p)
	lac, cancel, err := b.store.WatchLAC(r.LedgerID, r.PreviousLAC, p.fire)
	if cancel == nil {
		cancel = func() {}
	}
	now := err != nil || lac > r.PreviousLAC || !r.HasTimeout || r.TimeoutMs <= 0
	p.mu.Lock()
	switch {
	case p.mu.released:
		// Fired (by Close) and answered while the watch was being set up.
		p.mu.Unlock()
		cancel()
		return
	case p.mu.fired:
		// Fired, the answer not yet run: it releases the watch.
		p.mu.cancel = cancel
		p.mu.Unlock()
		return
	case now:
		p.mu.fired, p.mu.released = true, true
		p.mu.Unlock()
		cancel()
		b.untrackPoll(p)
		p.finish(err)
		return
	}
	wait := time.Duration(r.TimeoutMs) * time.Millisecond
	if wait > b.cfg.MaxLongPollTimeout || wait <= 0 {
		wait = b.cfg.MaxLongPollTimeout
	}
	p.mu.cancel = cancel
	p.mu.timer = b.clock.AfterFunc(wait, p.fire)
	p.mu.Unlock()
}

// fire ends the wait (once): the LAC moved, the timeOut passed, or the
// bookie closed. It may run with the store's ledger lock held, so it only
// stops the timer and hands the answer on.
func (p *longPoll) fire() {
	p.mu.Lock()
	if p.mu.fired {
		p.mu.Unlock()
		return
	}
	p.mu.fired = true
	t := p.mu.timer
	p.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	p.b.spawn(p.answer)
}

// answer releases the watch and answers with the LAC known now.
func (p *longPoll) answer() {
	p.mu.Lock()
	p.mu.released = true
	cancel := p.mu.cancel
	p.mu.cancel = nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.b.untrackPoll(p)
	p.finish(nil)
}

// finish builds the answer (from watchErr if the watch failed), records
// and sends it, and frees the slot.
func (p *longPoll) finish(watchErr error) {
	b := p.b
	resp := &wire.Response{}
	b.longPoll(p.req, resp, watchErr)
	b.metrics.RequestCompleted(KindLongPollRead, resp.Status, b.clock.Now().Sub(p.start))
	p.respond.Respond(resp)
	b.longPolls.Add(-1)
}

// longPoll fills the answer of a long poll whose wait is over.
func (b *Bookie) longPoll(req *wire.Request, resp *wire.Response, watchErr error) {
	r := &req.Read
	lac, err := int64(0), watchErr
	if err == nil {
		lac, err = b.store.LastAddConfirmed(r.LedgerID)
	}
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "long poll", r.LedgerID, r.EntryID))
		return
	}
	if r.Flag != wire.ReadFlagEntryPiggyback {
		// A plain read of entryId once the wait is over, with maxLAC.
		body, err := b.readStored(r.LedgerID, r.EntryID)
		if err != nil {
			b.fillStatus(req, resp, b.statusLogged(err, "long poll read", r.LedgerID, r.EntryID))
			return
		}
		b.fillStatus(req, resp, wire.StatusOK)
		resp.Read.Body, resp.Read.HasBody = body, true
		resp.Read.MaxLAC, resp.Read.HasMaxLAC = lac, true
		return
	}
	// ENTRY_PIGGYBACK: maxLAC always; entry previousLAC+1 if the LAC moved
	// past previousLAC and the entry is here; entryId -1 means "none".
	b.fillStatus(req, resp, wire.StatusOK)
	resp.Read.MaxLAC, resp.Read.HasMaxLAC = lac, true
	resp.Read.EntryID = wire.LastAddConfirmed
	if lac <= r.PreviousLAC {
		return
	}
	next := r.PreviousLAC + 1
	body, err := b.readStored(r.LedgerID, next)
	switch {
	case err == nil:
		resp.Read.EntryID = next
		resp.Read.Body, resp.Read.HasBody = body, true
	case isNegative(err):
		// The LAC moved on but this bookie lacks the entry (not in its
		// write set): the client reads it elsewhere.
	default:
		b.fillStatus(req, resp, b.statusLogged(err, "long poll piggyback read", r.LedgerID, next))
	}
}

// trackPoll records p as waiting; after Close it fires p at once.
func (b *Bookie) trackPoll(p *longPoll) {
	b.polls.mu.Lock()
	b.polls.seq++
	p.seq = b.polls.seq
	if b.polls.wait == nil {
		b.polls.wait = map[*longPoll]struct{}{}
	}
	b.polls.wait[p] = struct{}{}
	b.polls.mu.Unlock()
	if b.closed.Load() {
		p.fire()
	}
}

func (b *Bookie) untrackPoll(p *longPoll) {
	b.polls.mu.Lock()
	delete(b.polls.wait, p)
	b.polls.mu.Unlock()
}

// firePolls ends the wait of every long poll (Close), in arrival order.
func (b *Bookie) firePolls() {
	b.polls.mu.Lock()
	ps := make([]*longPoll, 0, len(b.polls.wait))
	for p := range b.polls.wait {
		ps = append(ps, p)
	}
	b.polls.mu.Unlock()
	slices.SortFunc(ps, func(x, y *longPoll) int { return cmp.Compare(x.seq, y.seq) })
	for _, p := range ps {
		p.fire()
	}
}
