package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// The client carries out its machines' effects with internal/ledgerexec,
// the executor the simulator runs too; what is the client's own is the two
// interfaces it plugs in: the transport, and the metadata driver run off
// the ledger's loop.

// bookies is ledgerexec.TaggedBookies over internal/transport, one per
// executor (its Sends come from the executor's loop goroutine only).
type bookies struct {
	tr     *transport.Transport
	health *bookieHealth
	// counted is the health-counting wrapper of the handler last given to
	// SendTagged (the executor's one add handler), made once, not per send.
	counted *countedHandler
}

// Send sends req and counts a failed answer towards the bookie's
// quarantine (Config.EnableBookieHealthCheck).
func (b *bookies) Send(bookie string, ledgerID int64, req *wire.Request, cb func(*wire.Response, error)) {
	if !b.health.enabled {
		b.tr.Send(bookie, ledgerID, req, cb)
		return
	}
	b.tr.Send(bookie, ledgerID, req, func(resp *wire.Response, err error) {
		if countsAsError(resp, err) {
			b.health.recordError(metadata.BookieID(bookie))
		}
		cb(resp, err)
	})
}

// SendTagged is Send with a handler and a tag (ledgerexec.TaggedBookies):
// no closure per request.
func (b *bookies) SendTagged(bookie string, ledgerID int64, req *wire.Request, h ledgerexec.ResponseHandler, tag int64) {
	if !b.health.enabled {
		b.tr.SendTagged(bookie, ledgerID, req, h, tag)
		return
	}
	if b.counted == nil || b.counted.h != h {
		b.counted = &countedHandler{h: h, health: b.health}
	}
	b.tr.SendTagged(bookie, ledgerID, req, b.counted, tag)
}

// countedHandler counts failed answers towards the bookie's quarantine,
// then hands them on to h.
type countedHandler struct {
	h      ledgerexec.ResponseHandler
	health *bookieHealth
}

func (c *countedHandler) HandleResponse(bookie string, tag int64, resp *wire.Response, err error) {
	if countsAsError(resp, err) {
		c.health.recordError(metadata.BookieID(bookie))
	}
	c.h.HandleResponse(bookie, tag, resp, err)
}

// store is ledgerexec.Store over the client's metadata driver: each
// operation runs on its own goroutine (it is I/O) under
// Config.MetadataTimeout and the client's life, and reports back through
// the executor. The machines ask for one metadata operation at a time.
//
// An operation asked for once the client is closing fails with
// ErrClientClosed and never reaches the driver: a ledger loop (a recovery
// in OpenLedger) may still drain and step after Close, and Close releases
// the driver once the goroutines it waits for are done.
type store struct{ c *Client }

func (s store) WriteLedger(id int64, md *metadata.LedgerMetadata, expected metadata.Version, done func(metadata.Version, error)) {
	c := s.c
	if !c.goMetadata(func(ctx context.Context) { done(c.md.WriteLedger(ctx, id, md, expected)) }) {
		done(0, ErrClientClosed)
	}
}

func (s store) ReadLedger(id int64, done func(*metadata.LedgerMetadata, metadata.Version, error)) {
	c := s.c
	if !c.goMetadata(func(ctx context.Context) { done(c.md.ReadLedger(ctx, id)) }) {
		done(nil, 0, ErrClientClosed)
	}
}

// goMetadata runs op on a goroutine of its own, under
// Config.MetadataTimeout and the client's life, and reports true; once the
// client is closed it runs nothing and reports false. The check and
// wg.Add are made under c.mu, so Close (which sets closed under c.mu
// before it waits on wg and closes the driver) either waits for op or
// op never starts.
func (c *Client) goMetadata(op func(ctx context.Context)) bool {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return false
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.MetadataTimeout)
		defer cancel()
		op(ctx)
	}()
	return true
}

// newExecutor returns the executor of ledger id; emit nil gives it its own
// queue (for run). emitAdd, if not nil, takes the AddResponses unboxed
// (ledgerexec.Config.EmitAdd).
func (c *Client) newExecutor(id int64, dig *digest.Digester, password []byte, emit func(ledger.Event), emitAdd func(ledger.AddResponse)) *ledgerexec.Executor {
	mk := digest.MasterKey(password)
	return ledgerexec.New(ledgerexec.Config{
		LedgerID:  id,
		Digester:  dig,
		MasterKey: mk[:],
		Bookies:   &bookies{tr: c.tr, health: c.health},
		Store:     store{c},
		Emit:      emit,
		EmitAdd:   emitAdd,
		Slow:      c.health.markSlow,
		Log:       c.log,
	})
}

// run drives machine m of ledger id to completion on the calling goroutine
// (ledgerexec.Executor.Run): it returns ctx's error if ctx ends first, or
// ErrClientClosed if the client closes.
func (c *Client) run(ctx context.Context, x *ledgerexec.Executor, m ledger.Machine, start func(), deliver func(ledger.Effect)) error {
	err := x.Run(ctx, c.clock, c.ctx.Done(), m, start, deliver)
	if errors.Is(err, ledgerexec.ErrStopped) {
		return ErrClientClosed
	}
	return err
}

// closedError gives err, an operation's failure, the meaning
// ErrClientClosed too when the client is closed: an operation started
// after Close, or running when it came, fails on the released metadata
// driver or connections with their own errors, which say nothing of why.
// An error that already has a meaning of its own (a code other than
// Java's catch-all ReadException or BookieHandleNotAvailable, such as
// ErrNoSuchLedger answered before the close) is the operation's real
// outcome and is left as it is, so Code still reports it.
func (c *Client) closedError(err error) error {
	if err == nil || errors.Is(err, ErrClientClosed) {
		return err
	}
	if code := Code(err); code != -1 && code != -8 {
		return err
	}
	c.mu.Lock()
	closed := c.mu.closed
	c.mu.Unlock()
	if !closed {
		return err
	}
	return fmt.Errorf("%w: %w", ErrClientClosed, err)
}
