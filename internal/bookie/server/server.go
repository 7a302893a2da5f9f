// Package server is the bookie's network front: the TCP listener and the
// per-connection handling of BookKeeper's protocol (v3 and v2 on one port,
// decided per connection as the Java bookie does), in front of a
// bookie.Bookie that holds the request semantics.
//
// # Connections
//
// Each connection has two goroutines:
//   - the reader reads frames (a 4-byte big-endian length, then the
//     payload) from a bufio.Reader, decodes them with a codec.ServerDecoder
//     and hands each request to Bookie.Handle, which answers asynchronously;
//   - the writer writes responses in batches: responders encode their
//     response into the connection's pending buffer, and the writer swaps
//     the buffer out and writes it whole, flushing whenever it has caught up
//     (so a burst of answers costs one write, and a lone answer goes out at
//     once).
//
// Requests are processed concurrently and answered in any order; clients
// match answers by txnId (v3) or by ledger, entry and op (v2).
//
// # Bounds (every queue has one)
//
//   - Per connection at most Options.MaxInFlightPerConn requests are read
//     and not yet written back, and at most about
//     Options.MaxInFlightBytesPerConn bytes of request frames and encoded
//     responses are held. At either bound the reader stops reading: TCP
//     flow control pushes back on the client.
//   - Per bookie, Config.MaxInFlight of package bookie: requests over it are
//     answered ETOOMANYREQUESTS at once.
//
// The worst case a connection holds is MaxInFlightPerConn frames of up to
// 5 MiB plus their responses; MaxInFlightBytesPerConn keeps the usual case
// far below that.
//
// # Bad input
//
// A frame that cannot be decoded (garbage, an oversized or empty length, a
// truncated frame, an unknown v2 opcode) closes that connection only, as
// the Java bookie does; it is logged with the peer's address.
//
// # TLS and authorisation
//
// With Options.TLS a connection may open with a v3 START_TLS and continue
// inside TLS (either protocol); with Options.Authorizer (BookKeeper's
// BookieAuthZFactory: RoleAuthorizer) only connections whose TLS client
// certificate it accepts are served, every other request is refused with
// BookKeeper's codes. Both run on the connection's reader before its writer
// starts (tls.go); Config.Security builds them from the tls* keys
// (tlsconfig.go).
//
// # Shutdown
//
// Server.Shutdown stops accepting, stops reading on every connection,
// waits for the requests in flight to be answered and written, and closes
// the connections; when its context ends first it closes them at once (the
// clients fail the outstanding requests and retry elsewhere).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/wire"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("bookie server closed")

// Metrics receives the server's connection-level measurements. Part of the
// bookie process implements it with Prometheus collectors; the default does
// nothing. Methods are called concurrently and must be cheap. Request
// counts and latencies come from bookie.Metrics.
type Metrics interface {
	// ConnectionOpened and ConnectionClosed bracket each accepted
	// connection.
	ConnectionOpened()
	ConnectionClosed()
	// MalformedFrame counts connections closed for bad input.
	MalformedFrame()
	// ResponsesWritten is called after each batch write: how many responses
	// and bytes went out in one write.
	ResponsesWritten(responses int, bytes int)
	// ReadPaused counts each time a connection stops reading because
	// Options.MaxInFlightPerConn of its requests are not answered yet
	// (back-pressure); it reads again once one is.
	ReadPaused()
	// ConnectionSecurity counts TLS and authorisation events (tls.go).
	ConnectionSecurity(SecurityEvent)
}

// NopMetrics is the Metrics that records nothing.
type NopMetrics struct{}

func (NopMetrics) ConnectionOpened()                {}
func (NopMetrics) ConnectionClosed()                {}
func (NopMetrics) MalformedFrame()                  {}
func (NopMetrics) ResponsesWritten(int, int)        {}
func (NopMetrics) ReadPaused()                      {}
func (NopMetrics) ConnectionSecurity(SecurityEvent) {}

// Options configures a Server. Every field has a default.
type Options struct {
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives measurements. Default NopMetrics.
	Metrics Metrics
	// MaxInFlightPerConn bounds the requests of one connection that are
	// read and not yet written back; at the bound the connection stops
	// reading. Default 4096.
	MaxInFlightPerConn int
	// MaxInFlightBytesPerConn bounds (softly: checked before each read) the
	// bytes of request frames being served plus encoded responses waiting
	// to be written on one connection. Default 64 MiB.
	MaxInFlightBytesPerConn int64
	// WriteTimeout: a connection whose peer does not take a batch of
	// responses within this time is closed. Default 30 s.
	WriteTimeout time.Duration
	// ReadBufferSize is the bufio.Reader size per connection. Default 64 KiB.
	ReadBufferSize int
	// MaxFrameSize is the largest request frame accepted, length prefix
	// included (nettyMaxFrameSizeBytes). Default wire.MaxFrameSize. A
	// request frame over it closes its connection. Answers are not held
	// to it (maxResponseFrame).
	MaxFrameSize int

	// TLS, if set, lets a connection upgrade with a START_TLS as its first
	// frame, the bookie being the TLS server (tls.go); nil answers START_TLS
	// EBADREQ. Authorizer, if set, serves only connections whose TLS session
	// it accepts and refuses the requests of every other (EUA).
	// TLSHandshakeTimeout bounds the handshake after START_TLS (default
	// 10 s, Java's SslHandler default).
	TLS                 *tls.Config
	Authorizer          Authorizer
	TLSHandshakeTimeout time.Duration
}

// maxResponseFrame bounds the bookie's answers. It is not
// Options.MaxFrameSize: an answer carries an entry with a header that can
// be larger than the request's (a v3 read answer of an entry that came in
// a v2 add at the limit is 22 bytes longer), and an entry the bookie
// accepted must be readable. Java's bookie does not bound its answers
// either; the size of what it returns is bounded by what it accepted and
// by the batch read limit.
const maxResponseFrame = wire.MaxFrameSizeLimit

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NopMetrics{}
	}
	if o.MaxInFlightPerConn <= 0 {
		o.MaxInFlightPerConn = 4096
	}
	if o.MaxInFlightBytesPerConn <= 0 {
		o.MaxInFlightBytesPerConn = 64 << 20
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.ReadBufferSize <= 0 {
		o.ReadBufferSize = 64 << 10
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = wire.MaxFrameSize
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = 10 * time.Second
	}
}

// Server serves one Bookie on any number of listeners.
type Server struct {
	b    *bookie.Bookie
	opts Options
	log  *slog.Logger

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		shutdown  bool
	}
	// connsDone is signalled when a connection leaves mu.conns.
	connsDone *sync.Cond
}

// New returns a server for b.
func New(b *bookie.Bookie, opts Options) *Server {
	opts.setDefaults()
	s := &Server{b: b, opts: opts, log: opts.Logger}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	s.connsDone = sync.NewCond(&s.mu)
	return s
}

// Serve creates a Server for b and serves ln until it fails or the server
// is shut down (then ErrServerClosed). A caller that needs Shutdown uses New
// and Server.Serve.
func Serve(ln net.Listener, b *bookie.Bookie, opts Options) error {
	return New(b, opts).Serve(ln)
}

// Serve accepts connections on ln and serves each on its own goroutines. It
// returns ErrServerClosed after Shutdown, or the listener's error. It closes
// ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shuttingDown() {
				return ErrServerClosed
			}
			if isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "retryIn", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.mu.shutdown {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.mu.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

// isTemporary reports whether accept failed for a passing reason (a timeout,
// too many open files and the like): Serve retries after a pause.
func isTemporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	type temporary interface{ Temporary() bool }
	var t temporary
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.shutdown
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	s.connsDone.Broadcast()
}

// Shutdown stops accepting, stops reading on every connection, waits until
// every request already read has been answered and written, then closes the
// connections. If ctx ends first it closes the remaining connections at once
// and returns ctx's error. It does not close the Bookie.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.mu.shutdown = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		for len(s.mu.conns) > 0 {
			s.connsDone.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			c.abort()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// fallbackResponse strips resp down to a status-only EIO answer of the same
// operation, for a response that could not be encoded (an entry over the
// frame limit, say): the client gets an error instead of a timeout.
func fallbackResponse(resp *wire.Response) wire.Response {
	r := wire.Response{Protocol: resp.Protocol, Header: resp.Header, Status: wire.StatusIOError, Has: resp.Has}
	r.Read = wire.ReadResponse{Status: wire.StatusIOError, LedgerID: resp.Read.LedgerID, EntryID: resp.Read.EntryID}
	r.Add = wire.AddResponse{Status: wire.StatusIOError, LedgerID: resp.Add.LedgerID, EntryID: resp.Add.EntryID}
	r.Auth = resp.Auth
	r.WriteLAC = wire.LedgerStatusResponse{Status: wire.StatusIOError, LedgerID: resp.WriteLAC.LedgerID}
	r.ReadLAC = wire.ReadLACResponse{Status: wire.StatusIOError, LedgerID: resp.ReadLAC.LedgerID}
	r.GetBookieInfo = wire.GetBookieInfoResponse{Status: wire.StatusIOError}
	r.ForceLedger = wire.LedgerStatusResponse{Status: wire.StatusIOError, LedgerID: resp.ForceLedger.LedgerID}
	r.ListEntries = wire.ListEntriesResponse{Status: wire.StatusIOError, LedgerID: resp.ListEntries.LedgerID}
	r.BatchRead = wire.BatchReadResponse{Status: wire.StatusIOError, LedgerID: resp.BatchRead.LedgerID, StartEntryID: resp.BatchRead.StartEntryID}
	return r
}
