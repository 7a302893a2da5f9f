package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// queue is the inbox of one ordered executor: transport callbacks, metadata
// results and application commands are pushed from any goroutine without
// blocking, and the executor drains them in order. Its length is bounded by
// the requests and commands in flight, which Config.MaxOutstandingAdds and
// the read chunk size bound.
type queue struct {
	mu     sync.Mutex
	items  []any
	spare  []any
	closed bool
	// signal (capacity 1) is ready when items is non-empty.
	signal chan struct{}
}

func newQueue() *queue { return &queue{signal: make(chan struct{}, 1)} }

// push appends an item; after close it is dropped (late answers).
func (q *queue) push(it any) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

// drain returns the queued items; the slice is valid until the next drain.
func (q *queue) drain() []any {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	clear(q.spare)
	q.items, q.spare = q.spare[:0], out
	return out
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.items = nil
	q.mu.Unlock()
}

// ledgerIO carries out the I/O effects of one ledger's machines: it builds
// and sends bookie requests (digesting entry bodies, adding the master
// key) and runs metadata operations, and pushes every answer as an event
// into q. It is used by one goroutine at a time (the executor).
type ledgerIO struct {
	c   *Client
	id  int64
	dig *digest.Digester
	mk  [digest.MasterKeySize]byte
	q   *queue

	// speculate, when positive, steps a Tick into the
	// machine after each such delay (reads).
	speculate time.Duration

	// req and body are scratch space: Send encodes before it returns.
	req  wire.Request
	body []byte
}

func (c *Client) newLedgerIO(id int64, dig *digest.Digester, password []byte, q *queue) *ledgerIO {
	if q == nil {
		q = newQueue()
	}
	return &ledgerIO{c: c, id: id, dig: dig, mk: digest.MasterKey(password), q: q}
}

// do carries out an I/O effect and reports true, or reports false for an
// effect that is the caller's (a completion).
func (l *ledgerIO) do(eff ledger.Effect) bool {
	switch e := eff.(type) {
	case ledger.SendAdd:
		l.sendAdd(e)
	case ledger.SendRead:
		for _, b := range e.Bookies {
			l.sendRead(b, e.EntryID, e.Fence)
		}
	case ledger.SendReadLAC:
		for _, b := range e.Bookies {
			l.sendReadLAC(b)
		}
	case ledger.SendForce:
		for _, b := range e.Bookies {
			l.sendForce(b, e.ID)
		}
	case ledger.SendWriteLAC:
		l.sendWriteLAC(e)
	case ledger.SendLongPoll:
		for _, b := range e.Bookies {
			l.sendLongPoll(b, e.PreviousLAC, e.TimeoutMs)
		}
	case ledger.BookieSlow:
		l.c.health.markSlow(e.Bookie)
	case ledger.WriteMetadata:
		l.writeMetadata(e)
	case ledger.ReadMetadata:
		l.readMetadata()
	default:
		return false
	}
	return true
}

func (l *ledgerIO) sendAdd(e ledger.SendAdd) {
	// One body for all bookies of the write set: the transport copies it
	// into each connection's output buffer, so the payload is copied once
	// here and once per bookie, never more.
	l.body = l.dig.AppendEntry(l.body[:0], l.id, e.EntryID, e.LAC, e.Length, e.Payload)
	for _, b := range e.Bookies {
		l.req = wire.Request{
			Header: wire.Header{Op: wire.OpAddEntry},
			Has:    wire.BodyAdd,
			Add:    wire.AddRequest{LedgerID: l.id, EntryID: e.EntryID, MasterKey: l.mk[:], Body: l.body},
		}
		if e.DeferredSync {
			l.req.Add.WriteFlags, l.req.Add.HasWriteFlags = wire.WriteFlagDeferredSync, true
		}
		if e.Recovery {
			l.req.Add.Flag = wire.AddFlagRecoveryAdd
			l.req.Header.Priority = wire.HighPriority
		}
		bookie, entryID, q := b, e.EntryID, l.q
		l.c.tr.Send(string(b), l.id, &l.req, func(resp *wire.Response, err error) {
			if err == nil {
				err = statusErr(resp.Status, resp.Add.Status)
			}
			q.push(ledger.AddResponse{Bookie: bookie, EntryID: entryID, Err: err})
		})
	}
	if cap(l.body) > 1<<20 {
		l.body = nil // do not keep one huge entry's buffer
	}
}

func (l *ledgerIO) sendRead(b metadata.BookieID, entryID int64, fence bool) {
	l.req = wire.Request{
		Header: wire.Header{Op: wire.OpReadEntry},
		Has:    wire.BodyRead,
		Read:   wire.ReadRequest{LedgerID: l.id, EntryID: entryID},
	}
	if fence {
		l.req.Read.Flag = wire.ReadFlagFenceLedger
		l.req.Read.MasterKey = l.mk[:]
		l.req.Read.HasMasterKey = true
		l.req.Header.Priority = wire.HighPriority
	}
	q, h := l.q, l.c.health
	l.c.tr.Send(string(b), l.id, &l.req, func(resp *wire.Response, err error) {
		ev := ledger.ReadResponse{Bookie: b, EntryID: entryID, Err: err}
		if err != nil {
			h.markSlow(b) // no answer: timeout or lost connection
		}
		if err == nil {
			ev.Err = statusErr(resp.Status, resp.Read.Status)
			switch {
			case ev.Err != nil:
			case !resp.Read.HasBody:
				ev.Err = fmt.Errorf("bookie %s: read of entry %d answered OK without a body", b, entryID)
			default:
				// The response aliases the connection's frame buffer.
				ev.Body = append([]byte(nil), resp.Read.Body...)
			}
		}
		q.push(ev)
	})
}

func (l *ledgerIO) sendReadLAC(b metadata.BookieID) {
	l.req = wire.Request{
		Header:          wire.Header{Op: wire.OpReadLAC},
		Has:             wire.BodyReadLAC,
		ReadLACLedgerID: l.id,
	}
	q := l.q
	l.c.tr.Send(string(b), l.id, &l.req, func(resp *wire.Response, err error) {
		ev := ledger.ReadLACResponse{Bookie: b, Err: err}
		if err == nil {
			ev.Err = statusErr(resp.Status, resp.ReadLAC.Status)
			if ev.Err == nil {
				if resp.ReadLAC.HasLACBody {
					ev.LACBody = append([]byte(nil), resp.ReadLAC.LACBody...)
				}
				if resp.ReadLAC.HasLastEntryBody {
					ev.LastEntryBody = append([]byte(nil), resp.ReadLAC.LastEntryBody...)
				}
			}
		}
		q.push(ev)
	})
}

// writeMetadata and readMetadata run the store operation on their own
// goroutine (it is I/O) and push the result. The machines ask for one
// metadata operation at a time.
func (l *ledgerIO) writeMetadata(e ledger.WriteMetadata) {
	c, id, q := l.c, l.id, l.q
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.MetadataTimeout)
		defer cancel()
		v, err := c.md.WriteLedger(ctx, id, e.Metadata, e.Expected)
		q.push(ledger.MetadataWritten{Version: v, Err: err})
	}()
}

func (l *ledgerIO) readMetadata() {
	c, id, q := l.c, l.id, l.q
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.MetadataTimeout)
		defer cancel()
		md, v, err := c.md.ReadLedger(ctx, id)
		q.push(ledger.MetadataRead{Metadata: md, Version: v, Err: err})
	}()
}

// statusErr returns the error of the first non-OK status: a v3 response
// has a top-level status and the operation's own.
func statusErr(top, op wire.Status) error {
	if top != wire.StatusOK {
		return top.Err()
	}
	return op.Err()
}

// machine is what run drives: a ledger read, LAC read or recovery.
type machine interface {
	Ready() []ledger.Effect
	Step(ledger.Event)
	Done() bool
}

// run drives a machine to completion on the calling goroutine: start it,
// carry out its effects, hand completions to deliver, step answers. It
// returns ctx's error if ctx ends first; the machine is then abandoned
// (answers still in flight are dropped).
func (l *ledgerIO) run(ctx context.Context, m machine, start func(), deliver func(ledger.Effect)) error {
	defer l.q.close()
	var tick <-chan time.Time
	if l.speculate > 0 {
		t := time.NewTicker(l.speculate)
		defer t.Stop()
		tick = t.C
	}
	start()
	for {
		for _, eff := range m.Ready() {
			if !l.do(eff) {
				deliver(eff)
			}
		}
		if m.Done() {
			return nil
		}
		select {
		case <-tick:
			m.Step(ledger.Tick{})
		case <-l.q.signal:
			for _, it := range l.q.drain() {
				m.Step(it.(ledger.Event))
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-l.c.ctx.Done():
			return errClientClosed
		}
	}
}

func (l *ledgerIO) sendLongPoll(b metadata.BookieID, prev, timeoutMs int64) {
	l.req = wire.Request{
		Header: wire.Header{Op: wire.OpReadEntry},
		Has:    wire.BodyRead,
		Read: wire.ReadRequest{LedgerID: l.id, EntryID: -1, Flag: wire.ReadFlagEntryPiggyback,
			PreviousLAC: prev, HasPreviousLAC: true, TimeoutMs: timeoutMs, HasTimeout: true},
	}
	q := l.q
	l.c.tr.Send(string(b), l.id, &l.req, func(resp *wire.Response, err error) {
		ev := ledger.LongPollResponse{Bookie: b, EntryID: -1, Err: err}
		if err == nil {
			ev.Err = statusErr(resp.Status, resp.Read.Status)
			if ev.Err == nil {
				ev.MaxLAC, ev.HasMaxLAC = resp.Read.MaxLAC, resp.Read.HasMaxLAC
				if resp.Read.HasBody && resp.Read.EntryID >= 0 {
					ev.EntryID = resp.Read.EntryID
					ev.Body = append([]byte(nil), resp.Read.Body...)
				}
			}
		}
		q.push(ev)
	})
}

func (l *ledgerIO) sendForce(b metadata.BookieID, id int64) {
	l.req = wire.Request{Header: wire.Header{Op: wire.OpForceLedger}, Has: wire.BodyForceLedger, ForceLedgerID: l.id}
	q := l.q
	l.c.tr.Send(string(b), l.id, &l.req, func(resp *wire.Response, err error) {
		if err == nil {
			err = statusErr(resp.Status, resp.ForceLedger.Status)
		}
		q.push(ledger.ForceResponse{ID: id, Bookie: b, Err: err})
	})
}

// sendWriteLAC sends WRITE_LAC; the answers only go to the log (explicit
// LAC is a hint for readers, spec §1.6).
func (l *ledgerIO) sendWriteLAC(e ledger.SendWriteLAC) {
	body := l.dig.AppendLAC(nil, l.id, e.LAC)
	for _, b := range e.Bookies {
		l.req = wire.Request{
			Header:   wire.Header{Op: wire.OpWriteLAC},
			Has:      wire.BodyWriteLAC,
			WriteLAC: wire.WriteLACRequest{LedgerID: l.id, LAC: e.LAC, MasterKey: l.mk[:], Body: body},
		}
		c, id, lac := l.c, l.id, e.LAC
		c.tr.Send(string(b), l.id, &l.req, func(resp *wire.Response, err error) {
			if err == nil {
				err = statusErr(resp.Status, resp.WriteLAC.Status)
			}
			if err != nil {
				c.log.Debug("write LAC failed", "ledger", id, "bookie", b, "lac", lac, "err", err)
			}
		})
	}
}
