package server

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// maxPooledFrame: request frame buffers up to this size stay with their
// pooled request for reuse; larger ones are dropped after use so that idle
// memory stays small.
const maxPooledFrame = 64 << 10

// maxSpareOut: the writer keeps an output buffer up to this capacity for
// the next batch.
const maxSpareOut = 1 << 20

// conn is one client connection. The reader goroutine (serve) owns br, dec,
// authenticated and the read side; the writer goroutine owns spare and the
// write side; responders (any goroutine) append to mu.out. stream is set
// (to the TLS session after START_TLS) before the writer starts.
type conn struct {
	s   *Server
	nc  net.Conn // the socket: deadlines and Close
	log *slog.Logger
	br  *bufio.Reader
	dec codec.ServerDecoder
	// stream carries the protocol: nc, or the TLS session over it.
	stream io.ReadWriter
	// authenticated: requests are served (no Authorizer, or it accepted
	// the connection's TLS session); otherwise they are refused.
	authenticated bool

	// slots holds one token per request read and not yet written back (or
	// dropped): the reader takes one before reading a frame, so a full
	// channel stops reading.
	slots chan struct{}
	// heldBytes: request frames being served plus encoded responses not yet
	// written. The reader waits while it is over the byte budget.
	heldBytes atomic.Int64
	// wake (capacity 1) tells the writer there is output; budget (capacity
	// 1) tells the reader bytes were released.
	wake, budget chan struct{}

	stop     chan struct{} // closed by stopReading (shutdown)
	stopOnce sync.Once
	aborted  chan struct{} // closed by abort: give up draining
	abortOne sync.Once
	dead     chan struct{} // closed by close: the writer exits
	writerOK chan struct{} // closed when the writer has exited

	mu struct {
		sync.Mutex
		out    []byte // encoded responses waiting for the writer
		count  int    // responses in out
		closed bool   // the connection is closed: responses are dropped
	}
	spare []byte // writer only
}

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{
		s:      s,
		nc:     nc,
		log:    s.log.With("remote", nc.RemoteAddr().String()),
		br:     bufio.NewReaderSize(nc, s.opts.ReadBufferSize),
		stream: nc,
		// Without an Authorizer every connection is served (Java's
		// AuthDisabledPlugin); with one, only after it accepted.
		authenticated: s.opts.Authorizer == nil,
		slots:         make(chan struct{}, s.opts.MaxInFlightPerConn),
		wake:          make(chan struct{}, 1),
		budget:        make(chan struct{}, 1),
		stop:          make(chan struct{}),
		aborted:       make(chan struct{}),
		dead:          make(chan struct{}),
		writerOK:      make(chan struct{}),
	}
}

// errStopped ends the read loop for shutdown.
var errStopped = errors.New("connection stopped for shutdown")

func (c *conn) serve() {
	c.s.opts.Metrics.ConnectionOpened()
	c.log.Debug("connection opened")
	var err error
	if c.s.opts.TLS != nil {
		err = c.startTLS()
	}
	if err == nil {
		go c.writeLoop()
		err = c.readLoop()
	} else {
		close(c.writerOK) // no writer was started
	}
	switch {
	case c.stopping():
		c.drain()
		c.log.Debug("connection closed for shutdown")
	case errors.Is(err, io.EOF):
		c.log.Debug("connection closed by the client")
	case errors.Is(err, errTLSHandshake):
		c.log.Warn("closing connection: TLS handshake failed", "err", err)
	case errors.Is(err, errRefused):
		c.log.Warn("closing connection: not authenticated", "err", err)
	case errors.Is(err, wire.ErrMalformed):
		c.s.opts.Metrics.MalformedFrame()
		c.log.Warn("closing connection: bad input", "protocol", c.dec.Protocol().String(), "err", err)
	default:
		c.log.Info("closing connection: read failed", "err", err)
	}
	c.close()
	<-c.writerOK
	c.s.opts.Metrics.ConnectionClosed()
	c.s.removeConn(c)
}

// readLoop reads, decodes and dispatches frames until the stream ends, a
// frame is bad, or shutdown stops it.
func (c *conn) readLoop() error {
	var prefix [wire.FramePrefixSize]byte
	budget := c.s.opts.MaxInFlightBytesPerConn
	for {
		select {
		case c.slots <- struct{}{}:
		default:
			c.s.opts.Metrics.ReadPaused()
			select {
			case c.slots <- struct{}{}:
			case <-c.stop:
				return errStopped
			}
		}
		for c.heldBytes.Load() > budget {
			select {
			case <-c.budget:
			case <-c.stop:
				<-c.slots
				return errStopped
			}
		}
		r, err := c.readFrame(prefix[:])
		if err != nil {
			<-c.slots
			return err
		}
		if err := c.dec.DecodeRequest(r.buf, &r.req); err != nil {
			c.heldBytes.Add(-r.bytes)
			r.recycle()
			<-c.slots
			return err
		}
		if !c.authenticated {
			if err := c.refuse(r); err != nil {
				c.heldBytes.Add(-r.bytes)
				r.recycle()
				<-c.slots
				return err
			}
			continue
		}
		c.s.b.Handle(&r.req, r)
	}
}

// readFrame reads one frame into a pooled request's buffer.
func (c *conn) readFrame(prefix []byte) (*request, error) {
	if _, err := io.ReadFull(c.br, prefix); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, errors.Join(wire.ErrTruncated, errors.New("stream ended inside a frame's length prefix"))
		}
		return nil, err
	}
	n, err := wire.PayloadLen(prefix, c.s.opts.MaxFrameSize)
	if err != nil {
		return nil, err
	}
	r := requestPool.Get().(*request)
	r.c = c
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(c.br, r.buf); err != nil {
		r.recycle()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, errors.Join(wire.ErrTruncated, errors.New("stream ended inside a frame"))
		}
		return nil, err
	}
	r.bytes = int64(n)
	c.heldBytes.Add(r.bytes)
	return r, nil
}

// respond encodes resp into the pending output and wakes the writer. It
// gives back the request's frame bytes (reqBytes); the request's slot is
// given back once the response is written, or at once if the connection is
// closed.
func (c *conn) respond(resp *wire.Response, reqBytes int64) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		c.heldBytes.Add(-reqBytes)
		<-c.slots
		return
	}
	before := len(c.mu.out)
	out, err := codec.EncodeResponseMax(c.mu.out, resp, maxResponseFrame)
	if err != nil {
		c.log.Error("cannot encode response; answering EIO", "op", resp.Header.Op.String(),
			"ledger", responseLedger(resp), "err", err)
		fb := fallbackResponse(resp)
		out, err = codec.EncodeResponseMax(c.mu.out, &fb, maxResponseFrame)
	}
	if err != nil {
		c.mu.Unlock()
		c.log.Error("cannot encode even an EIO response; closing connection", "op", resp.Header.Op.String(), "err", err)
		c.heldBytes.Add(-reqBytes)
		<-c.slots
		c.close()
		return
	}
	c.mu.out = out
	c.mu.count++
	c.mu.Unlock()
	c.heldBytes.Add(int64(len(out)-before) - reqBytes)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes the pending output whenever there is some: everything
// encoded since the last write goes out in one write.
func (c *conn) writeLoop() {
	defer close(c.writerOK)
	for {
		select {
		case <-c.wake:
		case <-c.dead:
			return
		}
		c.mu.Lock()
		buf, n := c.mu.out, c.mu.count
		c.mu.out, c.mu.count = c.spare[:0], 0
		c.mu.Unlock()
		if n == 0 {
			c.spare = buf
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
		_, err := c.stream.Write(buf)
		c.heldBytes.Add(-int64(len(buf)))
		for range n {
			<-c.slots
		}
		select {
		case c.budget <- struct{}{}:
		default:
		}
		c.s.opts.Metrics.ResponsesWritten(n, len(buf))
		if cap(buf) > maxSpareOut {
			buf = nil
		}
		c.spare = buf[:0]
		if err != nil {
			c.log.Info("closing connection: write failed", "err", err)
			c.close()
			return
		}
	}
}

// stopReading makes the reader stop at the next frame boundary (or abandon
// a frame it is in the middle of): shutdown.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) stopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// drain waits until every request read has been answered and written: it
// takes every slot. abort ends the wait.
func (c *conn) drain() {
	for range cap(c.slots) {
		select {
		case c.slots <- struct{}{}:
		case <-c.aborted:
			return
		case <-c.dead: // the writer failed: nothing more will be written
			return
		}
	}
}

// abort closes the connection at once, even while draining.
func (c *conn) abort() {
	c.abortOne.Do(func() { close(c.aborted) })
	c.close()
}

// close closes the connection; responses still to come are dropped. Safe
// to call more than once and from any goroutine.
func (c *conn) close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	n, pending := c.mu.count, len(c.mu.out)
	c.mu.out, c.mu.count = nil, 0
	c.mu.Unlock()
	for range n {
		<-c.slots
	}
	c.heldBytes.Add(-int64(pending))
	c.nc.Close()
	close(c.dead)
}

// request is one request read from a connection, with the frame buffer its
// byte fields alias. It is the request's bookie.Responder. Pooled.
type request struct {
	c     *conn
	req   wire.Request
	buf   []byte
	bytes int64
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

// Respond implements bookie.Responder. After it the Bookie no longer uses
// the request, so its frame buffer goes back to the pool.
func (r *request) Respond(resp *wire.Response) {
	r.c.respond(resp, r.bytes)
	r.recycle()
}

func (r *request) recycle() {
	r.c = nil
	r.bytes = 0
	r.req.Context = nil
	if cap(r.buf) > maxPooledFrame {
		r.buf = nil
	}
	requestPool.Put(r)
}

// responseLedger is the ledger id a response is about, for logs.
func responseLedger(resp *wire.Response) int64 {
	switch resp.Header.Op {
	case wire.OpReadEntry:
		return resp.Read.LedgerID
	case wire.OpAddEntry:
		return resp.Add.LedgerID
	case wire.OpBatchReadEntry:
		return resp.BatchRead.LedgerID
	case wire.OpReadLAC:
		return resp.ReadLAC.LedgerID
	case wire.OpGetListOfEntriesOfLedger:
		return resp.ListEntries.LedgerID
	}
	return -1
}
