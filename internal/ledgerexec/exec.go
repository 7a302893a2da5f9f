package ledgerexec

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// Bookies is the bookie transport: internal/transport in production, the
// simulated network in internal/sim.
type Bookies interface {
	// Send sends req to bookie about ledger ledgerID and calls cb exactly
	// once, with the response or with the error that stood for it (a
	// timeout, a lost or refused connection). Send must encode or copy req,
	// and the bodies it points to, before it returns: the executor reuses
	// them. resp is valid only during cb; cb must not block.
	//
	// cb may run on Send's own stack, before Send returns (internal/transport
	// does for ErrClosed and a peer in connect backoff). cb hands its event
	// to Config.Emit, which may step the machine there and then and carry
	// out its new effects with Do: Do is re-entrant for this (it builds each
	// request in scratch space it holds alone for the send).
	Send(bookie string, ledgerID int64, req *wire.Request, cb func(resp *wire.Response, err error))
}

// ResponseHandler receives the answers of TaggedBookies.SendTagged: the
// bookie the request went to, the tag it was sent with, and the response or
// error, under Bookies.Send's contract for cb (exactly one call per
// request; resp valid only during the call; it must not block; it may run
// on SendTagged's own stack).
type ResponseHandler interface {
	HandleResponse(bookie string, tag int64, resp *wire.Response, err error)
}

// TaggedBookies is a Bookies that can also send with a long-lived handler
// and a tag instead of a callback per request. The executor sends adds
// through it when its Bookies has it: an add then costs no closure per
// bookie (issue #22). Its contract is Send's, with h.HandleResponse(bookie,
// tag, …) in place of cb.
type TaggedBookies interface {
	Bookies
	SendTagged(bookie string, ledgerID int64, req *wire.Request, h ResponseHandler, tag int64)
}

// Store is the metadata store as a ledger's machines use it: one
// compare-and-set and one read, both answered through a callback, once.
type Store interface {
	// WriteLedger stores md as ledger id's metadata if the stored version
	// is still expected (metadata.ErrBadVersion otherwise) and calls done
	// with the new version or the error. md must not be modified.
	WriteLedger(id int64, md *metadata.LedgerMetadata, expected metadata.Version, done func(metadata.Version, error))
	// ReadLedger reads ledger id's metadata and calls done with it; the
	// executor hands it to the machine, which takes ownership.
	ReadLedger(id int64, done func(*metadata.LedgerMetadata, metadata.Version, error))
}

// Config configures an Executor for one ledger.
type Config struct {
	LedgerID int64
	// Digester digests the entry and LAC bodies the executor sends.
	Digester *digest.Digester
	// MasterKey is digest.MasterKey of the ledger's password, sent with
	// adds, fencing reads and WRITE_LAC.
	MasterKey []byte
	Bookies   Bookies
	Store     Store
	// Emit receives every answer as the machine's Event, on the goroutine
	// the Bookies or Store implementation calls back on; it must not block.
	// It may step the machine and call Do for the effects that follow, on
	// the same stack, also from inside a Do whose Send or Store called
	// back synchronously (the simulator does): Do is re-entrant on its
	// caller's goroutine. It must not call Do from another goroutine while
	// the loop's goroutine may be in Do.
	// Nil: the executor's own Queue (see Run).
	Emit func(ledger.Event)
	// EmitAdd, when set, receives the AddResponses instead of Emit, under
	// the same rules: a typed path that does not box the event into an
	// interface (an allocation per bookie per add). Ignored when Emit is
	// nil.
	EmitAdd func(ledger.AddResponse)
	// Slow, when set, is told of a bookie that failed a read or that a
	// machine reported slow (BookieSlow): the client orders reads away from
	// it for a while.
	Slow func(metadata.BookieID)
	// Log gets the failures of WRITE_LAC, whose answers no machine steps.
	// Nil: slog.Default().
	Log *slog.Logger
}

// Executor carries out the I/O effects of one ledger's machines. Do is
// called by one goroutine at a time (the machine's ordered loop), and may
// be re-entered on that goroutine through a synchronous callback (see
// Bookies.Send and Config.Emit).
type Executor struct {
	cfg Config
	// ownQueue: Config.Emit was nil, so each Run makes a queue of its own
	// and points cfg.Emit at it for the Run's duration (nil outside Run).
	ownQueue bool
	running  bool

	// req and body are scratch space that Send copies before it returns. A
	// send takes them out (leaving nil) and puts them back when its loop
	// over the bookies is over, so that a nested Do, run from a callback
	// in the middle of that loop, builds in space of its own instead of
	// overwriting the outer request or body.
	req  *wire.Request
	body []byte

	// tagged is cfg.Bookies as a TaggedBookies, nil if it is not one;
	// adds is the handler its add answers go to (tag: the entry id).
	tagged TaggedBookies
	adds   *addHandler
}

// addHandler turns the answers to an executor's adds into AddResponses.
// One per executor, for the executor's life: the tag of each request is
// its entry id, and the bookie comes from the transport. Only executors
// with a fixed Config.Emit use it (New).
type addHandler struct{ x *Executor }

func (a *addHandler) HandleResponse(bookie string, entryID int64, resp *wire.Response, err error) {
	if err == nil {
		err = statusErr(resp.Status, resp.Add.Status)
	}
	ev := ledger.AddResponse{Bookie: metadata.BookieID(bookie), EntryID: entryID, Err: err}
	if a.x.cfg.EmitAdd != nil {
		a.x.cfg.EmitAdd(ev)
		return
	}
	a.x.cfg.Emit(ev)
}

// maxKeptBody is the largest add body buffer kept for the next add: one
// huge entry's buffer is not kept.
const maxKeptBody = 1 << 20

// takeReq returns the scratch request, zeroed, and leaves the executor
// without one until putReq; a nested send allocates its own.
func (x *Executor) takeReq() *wire.Request {
	r := x.req
	if r == nil {
		return new(wire.Request)
	}
	x.req = nil
	*r = wire.Request{}
	return r
}

// putReq gives r back as the scratch request once no Send can read it.
func (x *Executor) putReq(r *wire.Request) {
	*r = wire.Request{} // drop the references to the bodies and key
	x.req = r
}

// New returns an Executor.
func New(cfg Config) *Executor {
	x := &Executor{cfg: cfg, ownQueue: cfg.Emit == nil}
	// The tagged path reads cfg.Emit when an answer comes; an executor
	// with its own queue must route each answer to the queue of the Run
	// that sent it (Run says why), so it keeps a closure per send.
	if tb, ok := cfg.Bookies.(TaggedBookies); ok && !x.ownQueue {
		x.tagged = tb
		x.adds = &addHandler{x}
	}
	if x.ownQueue {
		x.cfg.EmitAdd = nil
	}
	if x.cfg.Log == nil {
		x.cfg.Log = slog.Default()
	}
	return x
}

// Do carries out eff and returns true if it is an I/O effect (a request to
// bookies or the metadata store, or BookieSlow); a completion (AddComplete,
// ReadComplete, …), which is the application's, is left alone and Do
// returns false. Every Effect type of ledger.Effects is one or the other:
// exec_test.go checks it, so no effect can reach the panic below.
//
// An executor with its own queue (Config.Emit nil) carries out effects
// only inside Run: Do outside it panics, as its answers would reach no
// loop.
func (x *Executor) Do(eff ledger.Effect) bool {
	if x.cfg.Emit == nil {
		panic("ledgerexec: Do outside Run on an executor with its own queue (Config.Emit nil)")
	}
	switch e := eff.(type) {
	case ledger.SendAdd:
		x.sendAdd(e)
	case ledger.SendRead:
		for _, b := range e.Bookies {
			x.sendRead(b, e.EntryID, e.Fence)
		}
	case ledger.SendBatchRead:
		x.sendBatchRead(e)
	case ledger.SendReadLAC:
		for _, b := range e.Bookies {
			x.sendReadLAC(b)
		}
	case ledger.SendForce:
		for _, b := range e.Bookies {
			x.sendForce(b, e.ID)
		}
	case ledger.SendWriteLAC:
		x.sendWriteLAC(e)
	case ledger.SendLongPoll:
		for _, b := range e.Bookies {
			x.sendLongPoll(b, e.PreviousLAC, e.TimeoutMs)
		}
	case ledger.BookieSlow:
		if x.cfg.Slow != nil {
			x.cfg.Slow(e.Bookie)
		}
	case ledger.WriteMetadata:
		emit := x.cfg.Emit
		x.cfg.Store.WriteLedger(x.cfg.LedgerID, e.Metadata, e.Expected, func(v metadata.Version, err error) {
			emit(ledger.MetadataWritten{Version: v, Err: err})
		})
	case ledger.ReadMetadata:
		emit := x.cfg.Emit
		x.cfg.Store.ReadLedger(x.cfg.LedgerID, func(md *metadata.LedgerMetadata, v metadata.Version, err error) {
			emit(ledger.MetadataRead{Metadata: md, Version: v, Err: err})
		})
	case ledger.AddComplete, ledger.CloseComplete, ledger.ForceComplete, ledger.LACComplete,
		ledger.LongPollComplete, ledger.EntryComplete, ledger.ReadComplete, ledger.BatchReadComplete, ledger.RecoveryComplete:
		return false
	default:
		panic(fmt.Sprintf("ledgerexec: effect %T is neither carried out nor a completion", eff))
	}
	return true
}

func (x *Executor) sendAdd(e ledger.SendAdd) {
	id := x.cfg.LedgerID
	// One body for all bookies of the write set: the transport copies it
	// into each connection's output buffer, so the payload is copied once
	// here and once per bookie, never more.
	body := x.cfg.Digester.AppendEntry(x.body[:0], id, e.EntryID, e.LAC, e.Length, e.Payload)
	x.body = nil
	var flags AddFlags
	if e.DeferredSync {
		flags |= AddDeferredSync
	}
	if e.Recovery {
		flags |= AddRecovery | AddHighPriority
	}
	req := x.takeReq()
	for _, b := range e.Bookies {
		*req = AddRequest(id, e.EntryID, x.cfg.MasterKey, body, flags)
		if x.tagged != nil {
			// The answer reaches x.adds with the entry id as tag: no
			// closure per bookie.
			x.tagged.SendTagged(string(b), id, req, x.adds, e.EntryID)
			continue
		}
		bookie, entryID, emit := b, e.EntryID, x.cfg.Emit
		x.cfg.Bookies.Send(string(b), id, req, func(resp *wire.Response, err error) {
			if err == nil {
				err = statusErr(resp.Status, resp.Add.Status)
			}
			emit(ledger.AddResponse{Bookie: bookie, EntryID: entryID, Err: err})
		})
	}
	x.putReq(req)
	if cap(body) <= maxKeptBody {
		x.body = body
	}
}

func (x *Executor) sendRead(b metadata.BookieID, entryID int64, fence bool) {
	req := x.takeReq()
	defer x.putReq(req)
	if fence {
		*req = FenceReadRequest(x.cfg.LedgerID, entryID, x.cfg.MasterKey)
	} else {
		*req = ReadRequest(x.cfg.LedgerID, entryID)
	}
	emit, slow := x.cfg.Emit, x.cfg.Slow
	x.cfg.Bookies.Send(string(b), x.cfg.LedgerID, req, func(resp *wire.Response, err error) {
		ev := ledger.ReadResponse{Bookie: b, EntryID: entryID, Err: err}
		if err != nil && slow != nil {
			slow(b) // no answer: timeout or lost connection
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
		emit(ev)
	})
}

// sendBatchRead sends one BATCH_READ_ENTRY. EBADREQ (the bookie, or the
// transport for a connection whose bookie answered it before) becomes
// ledger.ErrBatchReadUnsupported.
func (x *Executor) sendBatchRead(e ledger.SendBatchRead) {
	req := x.takeReq()
	defer x.putReq(req)
	*req = BatchReadRequest(x.cfg.LedgerID, e.StartEntryID, e.MaxCount, e.MaxSize)
	b, first := e.Bookie, e.StartEntryID
	emit, slow := x.cfg.Emit, x.cfg.Slow
	x.cfg.Bookies.Send(string(b), x.cfg.LedgerID, req, func(resp *wire.Response, err error) {
		ev := ledger.BatchReadResponse{Bookie: b, StartEntryID: first, Err: err}
		if err == nil {
			ev.Err = statusErr(resp.Status, resp.BatchRead.Status)
			if ev.Err == nil {
				// The response aliases the connection's frame buffer.
				ev.Bodies = make([][]byte, len(resp.BatchRead.Entries))
				for i, body := range resp.BatchRead.Entries {
					ev.Bodies[i] = append([]byte(nil), body...)
				}
			}
		}
		if errors.Is(ev.Err, wire.ErrBadRequest) {
			ev.Err = fmt.Errorf("bookie %s: %w: %w", b, ledger.ErrBatchReadUnsupported, ev.Err)
		} else if err != nil && slow != nil {
			slow(b) // no answer: timeout or lost connection
		}
		emit(ev)
	})
}

func (x *Executor) sendReadLAC(b metadata.BookieID) {
	req := x.takeReq()
	defer x.putReq(req)
	*req = ReadLACRequest(x.cfg.LedgerID)
	emit := x.cfg.Emit
	x.cfg.Bookies.Send(string(b), x.cfg.LedgerID, req, func(resp *wire.Response, err error) {
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
		emit(ev)
	})
}

func (x *Executor) sendLongPoll(b metadata.BookieID, prev, timeoutMs int64) {
	req := x.takeReq()
	defer x.putReq(req)
	*req = LongPollRequest(x.cfg.LedgerID, prev, timeoutMs)
	emit := x.cfg.Emit
	x.cfg.Bookies.Send(string(b), x.cfg.LedgerID, req, func(resp *wire.Response, err error) {
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
		emit(ev)
	})
}

func (x *Executor) sendForce(b metadata.BookieID, forceID int64) {
	req := x.takeReq()
	defer x.putReq(req)
	*req = forceRequest(x.cfg.LedgerID)
	emit := x.cfg.Emit
	x.cfg.Bookies.Send(string(b), x.cfg.LedgerID, req, func(resp *wire.Response, err error) {
		if err == nil {
			err = statusErr(resp.Status, resp.ForceLedger.Status)
		}
		emit(ledger.ForceResponse{ID: forceID, Bookie: b, Err: err})
	})
}

// sendWriteLAC sends WRITE_LAC; the answers only go to the log (explicit
// LAC is a hint for readers, spec §1.6).
func (x *Executor) sendWriteLAC(e ledger.SendWriteLAC) {
	id := x.cfg.LedgerID
	body := x.cfg.Digester.AppendLAC(nil, id, e.LAC)
	req := x.takeReq()
	defer x.putReq(req)
	for _, b := range e.Bookies {
		*req = writeLACRequest(id, e.LAC, x.cfg.MasterKey, body)
		log, lac := x.cfg.Log, e.LAC
		x.cfg.Bookies.Send(string(b), id, req, func(resp *wire.Response, err error) {
			if err == nil {
				err = statusErr(resp.Status, resp.WriteLAC.Status)
			}
			if err != nil {
				log.Debug("write LAC failed", "ledger", id, "bookie", b, "lac", lac, "err", err)
			}
		})
	}
}

// statusErr returns the error of the first non-OK status: a v3 response
// has a top-level status and the operation's own.
func statusErr(top, op wire.Status) error {
	if top != wire.StatusOK {
		return top.Err()
	}
	return op.Err()
}
