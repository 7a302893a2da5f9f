package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// This file holds the listener tests' harness: a bookie on a real
// ledgerstore (in-memory file system) behind a Server on 127.0.0.1:0, and a
// raw-protocol client written on the wire codecs.

var (
	rawPassword = []byte("password")
	rawKey      = func() []byte { k := digest.MasterKey(rawPassword); return k[:] }()
	rawDigester = func() *digest.Digester { d, _ := digest.New(digest.CRC32C, rawPassword); return d }()
)

func rawEntry(ledgerID, entryID int64, payload []byte) []byte {
	return rawDigester.AppendEntry(nil, ledgerID, entryID, entryID-1, int64(len(payload))*(entryID+1), payload)
}

// gateStore wraps a store and, while closed, holds add completions back
// (the entry is stored; only the acknowledgement waits), so tests can make
// adds slow and answers come out of order.
type gateStore struct {
	storage.Store
	mu     sync.Mutex
	closed bool
	held   []heldCompletion
	adds   atomic.Int64 // AddEntry calls seen
}

type heldCompletion struct {
	done storage.AddCompletion
	err  error
}

type gateCompletion struct {
	g    *gateStore
	done storage.AddCompletion
}

func (c gateCompletion) AddComplete(err error) {
	g := c.g
	g.mu.Lock()
	if g.closed {
		g.held = append(g.held, heldCompletion{c.done, err})
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	c.done.AddComplete(err)
}

func (g *gateStore) AddEntry(ledgerID, entryID int64, key, body []byte, opts storage.AddOptions, done storage.AddCompletion) {
	g.adds.Add(1)
	g.Store.AddEntry(ledgerID, entryID, key, body, opts, gateCompletion{g, done})
}

func (g *gateStore) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gateStore) open() {
	g.mu.Lock()
	held := g.held
	g.held, g.closed = nil, false
	g.mu.Unlock()
	for _, h := range held {
		h.done.AddComplete(h.err)
	}
}

func (g *gateStore) heldCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

type srvHarness struct {
	t     *testing.T
	store *gateStore
	b     *bookie.Bookie
	srv   *Server
	addr  string
	done  chan error
}

func srvQuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newSrvStore(t testing.TB) storage.Store {
	s, err := ledgerstore.Open(vfs.NewMem(), ledgerstore.Config{
		JournalDirs: []string{"/journal"}, LedgerDirs: []string{"/ledgers"}, Clock: clock.Real{},
		WriteCacheBytes: 8 << 20, ReadCacheBytes: 1 << 20, IndexCacheBytes: 1 << 20,
		MaxEntryLogBytes: 4 << 20, JournalPreallocBytes: 64 << 10, JournalMaxFileBytes: 4 << 20,
		Manual: true,
	})
	if err != nil {
		t.Fatalf("ledgerstore.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newSrvHarness(t *testing.T, opts Options) *srvHarness {
	t.Helper()
	store := &gateStore{Store: newSrvStore(t)}
	b, err := bookie.New(store, bookie.Config{Clock: clock.Real{}, Logger: srvQuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if opts.Logger == nil {
		opts.Logger = srvQuietLogger()
	}
	srv := New(b, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &srvHarness{t: t, store: store, b: b, srv: srv, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { h.done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		store.open()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return h
}

// rawClient speaks the protocol with the wire codecs, nothing more: it
// sends frames and reads them back, one goroutine at a time.
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	cc  *codec.ClientCodec
	fr  *wire.FrameReader
	out []byte
	txn uint64
}

func (h *srvHarness) dial(proto wire.Protocol) *rawClient {
	h.t.Helper()
	return rawDial(h.t, h.addr, proto)
}

func rawDial(t testing.TB, addr string, proto wire.Protocol) *rawClient {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	cc, _ := codec.NewClientCodec(proto, false)
	return &rawClient{t: t, nc: nc, cc: cc, fr: wire.NewFrameReader(bufio.NewReader(nc))}
}

// queue encodes req into the output buffer (a v3 request gets the next
// txnId unless it has one); flush sends the buffer.
func (c *rawClient) queue(req wire.Request) uint64 {
	c.t.Helper()
	if c.cc.Protocol() == wire.ProtocolV3 {
		req.Header.Version = wire.VersionThree
		if req.Header.TxnID == 0 {
			c.txn++
			req.Header.TxnID = c.txn
		}
	} else if req.Header.Version == 0 {
		req.Header.Version = 2
	}
	var err error
	if c.out, err = c.cc.EncodeRequest(c.out, &req); err != nil {
		c.t.Fatalf("encode: %v", err)
	}
	return req.Header.TxnID
}

func (c *rawClient) flush() {
	c.t.Helper()
	if _, err := c.nc.Write(c.out); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	c.out = c.out[:0]
}

func (c *rawClient) send(req wire.Request) uint64 {
	c.t.Helper()
	txn := c.queue(req)
	c.flush()
	return txn
}

// recv reads one response (10 s deadline). The response's byte fields are
// copied.
func (c *rawClient) recv() wire.Response {
	c.t.Helper()
	resp, err := c.tryRecv(10 * time.Second)
	if err != nil {
		c.t.Fatalf("receive: %v", err)
	}
	return resp
}

func (c *rawClient) tryRecv(d time.Duration) (wire.Response, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	payload, err := c.fr.Next()
	if err != nil {
		return wire.Response{}, err
	}
	var resp wire.Response
	if err := c.cc.DecodeResponse(append([]byte(nil), payload...), &resp); err != nil {
		return wire.Response{}, err
	}
	return resp, nil
}

// expectClosed checks that the server closes the connection (EOF or a
// reset) within 10 s, reading and dropping any responses before it.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.nc.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			c.t.Fatal("connection not closed by the server within 10 s")
		}
		return
	}
}

func rawAdd(ledgerID, entryID int64, payload []byte, recovery bool) wire.Request {
	req := wire.Request{Header: wire.Header{Op: wire.OpAddEntry}, Has: wire.BodyAdd}
	req.Add = wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: rawKey, Body: rawEntry(ledgerID, entryID, payload)}
	if recovery {
		req.Add.Flag = wire.AddFlagRecoveryAdd
	}
	return req
}

func rawRead(ledgerID, entryID int64) wire.Request {
	req := wire.Request{Header: wire.Header{Op: wire.OpReadEntry}, Has: wire.BodyRead}
	req.Read = wire.ReadRequest{LedgerID: ledgerID, EntryID: entryID}
	return req
}

func rawStatus(resp wire.Response) wire.Status {
	if resp.Status != wire.StatusOK {
		return resp.Status
	}
	switch {
	case resp.Has&wire.BodyRead != 0:
		return resp.Read.Status
	case resp.Has&wire.BodyAdd != 0:
		return resp.Add.Status
	}
	return resp.Status
}

func srvWaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
