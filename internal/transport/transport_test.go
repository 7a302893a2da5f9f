package transport

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// fakeBookie is a minimal bookie over real TCP built from the wire codecs:
// each request is handed to handle, which answers by calling reply (now or
// later, in any order) or not at all.
type fakeBookie struct {
	t      *testing.T
	ln     net.Listener
	handle func(c *fakeConn, req *wire.Request)

	mu    sync.Mutex
	conns []*fakeConn
}

type fakeConn struct {
	conn net.Conn
	mu   sync.Mutex
}

func newFakeBookie(t *testing.T, handle func(c *fakeConn, req *wire.Request)) *fakeBookie {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBookie{t: t, ln: ln, handle: handle}
	go b.accept()
	t.Cleanup(func() { b.close() })
	return b
}

func (b *fakeBookie) addr() string { return b.ln.Addr().String() }

func (b *fakeBookie) close() {
	b.ln.Close()
	b.dropConns()
}

// dropConns closes every accepted connection (a bookie crash, as the
// client sees it).
func (b *fakeBookie) dropConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.conn.Close()
	}
	b.conns = nil
}

func (b *fakeBookie) accept() {
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		c := &fakeConn{conn: conn}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		go b.serve(c)
	}
}

func (b *fakeBookie) serve(c *fakeConn) {
	fr := wire.NewFrameReader(bufio.NewReader(c.conn))
	var dec codec.ServerDecoder
	for {
		payload, err := fr.Next()
		if err != nil {
			return
		}
		req := new(wire.Request)
		if err := dec.DecodeRequest(payload, req); err != nil {
			c.conn.Close()
			return
		}
		fr.Detach() // req aliases the payload and may be answered later
		b.handle(c, req)
	}
}

// reply answers req with status (and, for reads, body).
func (c *fakeConn) reply(req *wire.Request, status wire.Status, body []byte) {
	resp := &wire.Response{Protocol: req.Protocol, Header: req.Header, Status: status}
	switch req.Header.Op {
	case wire.OpAddEntry:
		resp.Has = wire.BodyAdd
		resp.Add = wire.AddResponse{Status: status, LedgerID: req.Add.LedgerID, EntryID: req.Add.EntryID}
	case wire.OpReadEntry:
		resp.Has = wire.BodyRead
		resp.Read = wire.ReadResponse{Status: status, LedgerID: req.Read.LedgerID, EntryID: req.Read.EntryID, Body: body, HasBody: body != nil}
	}
	frame, err := codec.EncodeResponse(nil, resp)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.conn.Write(frame)
}

func addRequest(ledgerID, entryID int64) *wire.Request {
	body := make([]byte, 32)
	for i := range 8 {
		body[i] = byte(uint64(ledgerID) >> (56 - 8*i))
		body[8+i] = byte(uint64(entryID) >> (56 - 8*i))
	}
	return &wire.Request{
		Header: wire.Header{Op: wire.OpAddEntry},
		Has:    wire.BodyAdd,
		Add:    wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: make([]byte, 20), Body: body},
	}
}

type result struct {
	entryID int64
	status  wire.Status
	err     error
}

func collect(ch chan<- result) ResponseFunc {
	return func(resp *wire.Response, err error) {
		if err != nil {
			ch <- result{entryID: -100, err: err}
			return
		}
		ch <- result{entryID: resp.Add.EntryID, status: resp.Status}
	}
}

func recv(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no callback within 10 s")
		return result{}
	}
}

// TestOutOfOrderResponses: responses answered in reverse order reach the
// callbacks of their own requests, for v3 (txnId) and v2 (ledger, entry).
func TestOutOfOrderResponses(t *testing.T) {
	for _, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
		t.Run(proto.String(), func(t *testing.T) {
			const n = 50
			var mu sync.Mutex
			var held []*wire.Request
			var fc *fakeConn
			b := newFakeBookie(t, func(c *fakeConn, req *wire.Request) {
				mu.Lock()
				defer mu.Unlock()
				fc = c
				held = append(held, req)
				if len(held) == n {
					for i := n - 1; i >= 0; i-- {
						st := wire.StatusOK
						if held[i].Add.EntryID%7 == 3 {
							st = wire.StatusFenced
						}
						fc.reply(held[i], st, nil)
					}
				}
			})
			tr := newTransport(t, Config{Protocol: proto})
			defer tr.Close()
			chans := make([]chan result, n)
			for i := range n {
				chans[i] = make(chan result, 1)
				tr.Send(b.addr(), 1, addRequest(1, int64(i)), collect(chans[i]))
			}
			for i := range n {
				r := recv(t, chans[i])
				if r.err != nil || r.entryID != int64(i) {
					t.Fatalf("request %d got %+v", i, r)
				}
				want := wire.StatusOK
				if i%7 == 3 {
					want = wire.StatusFenced
				}
				if r.status != want {
					t.Fatalf("request %d: status %v, want %v", i, r.status, want)
				}
			}
		})
	}
}

// TestV2DuplicateRequests: identical outstanding v2 requests (same ledger,
// entry, op) are each answered once.
func TestV2DuplicateRequests(t *testing.T) {
	b := newFakeBookie(t, func(c *fakeConn, req *wire.Request) { c.reply(req, wire.StatusOK, nil) })
	tr := newTransport(t, Config{Protocol: wire.ProtocolV2})
	defer tr.Close()
	ch := make(chan result, 3)
	for range 3 {
		tr.Send(b.addr(), 1, addRequest(5, 9), collect(ch))
	}
	for range 3 {
		if r := recv(t, ch); r.err != nil || r.entryID != 9 {
			t.Fatalf("got %+v", r)
		}
	}
}

// TestTimeout: a request without an answer fails with ErrTimeout once the
// add timeout has passed on the transport's clock, not before; a late answer
// is dropped, and the connection stays usable. The sweeper's own ticker is
// parked (an hour): the test sweeps itself, so each check is exact.
func TestTimeout(t *testing.T) {
	received := make(chan *wire.Request, 1)
	var lateConn *fakeConn
	b := newFakeBookie(t, func(c *fakeConn, req *wire.Request) {
		if req.Add.EntryID == 0 {
			lateConn = c // read by the test after receiving req
			received <- req
			return
		}
		c.reply(req, wire.StatusOK, nil)
	})
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{AddTimeout: 200 * time.Millisecond, TimeoutTick: time.Hour, Clock: clk})
	defer tr.Close()
	ch := make(chan result, 1)
	tr.Send(b.addr(), 1, addRequest(1, 0), collect(ch))
	late := <-received
	clk.Advance(200*time.Millisecond - time.Nanosecond)
	tr.sweep(clk.Now()) // runs the callbacks of what expires, before returning
	select {
	case r := <-ch:
		t.Fatalf("answered before the timeout: %+v", r)
	default:
	}
	clk.Advance(time.Nanosecond)
	tr.sweep(clk.Now())
	if r := recv(t, ch); !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("got %+v, want ErrTimeout", r)
	}
	// The late answer goes out before the answer to entry 1 on the same
	// connection, and the transport reads in order: had it reached a
	// callback, ch would hold it before entry 1's answer.
	lateConn.reply(late, wire.StatusOK, nil)
	tr.Send(b.addr(), 1, addRequest(1, 1), collect(ch))
	if r := recv(t, ch); r.err != nil || r.entryID != 1 {
		t.Fatalf("after the timeout: %+v", r)
	}
}

// TestSweeperOnClock: the timeout sweeper ticks on Config.Clock, not on the
// wall clock: with a tick of an hour, a request the bookie never answers
// times out when a manual clock is advanced by the hour, and not before.
func TestSweeperOnClock(t *testing.T) {
	received := make(chan struct{}, 1)
	b := newFakeBookie(t, func(*fakeConn, *wire.Request) { received <- struct{}{} }) // never answers
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{AddTimeout: 200 * time.Millisecond, TimeoutTick: time.Hour, Clock: clk})
	defer tr.Close()
	waitForClock(t, "the sweeper to arm its ticker", func() bool { return clk.Waiters() == 1 })
	ch := make(chan result, 1)
	tr.Send(b.addr(), 1, addRequest(1, 0), collect(ch))
	<-received
	clk.Advance(time.Hour - time.Nanosecond) // past the deadline, before the tick
	select {
	case r := <-ch:
		t.Fatalf("answered before the sweeper ticked: %+v", r)
	default:
	}
	clk.Advance(time.Nanosecond)
	if r := recv(t, ch); !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("got %+v, want ErrTimeout", r)
	}
}

// waitForClock polls cond (a manual clock's Waiters) until it holds or
// 10 s pass.
func waitForClock(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDisconnectFailsInFlight: when the bookie drops the connection every
// outstanding request fails with ErrBookieUnavailable, and the next Send
// reconnects.
func TestDisconnectFailsInFlight(t *testing.T) {
	var mu sync.Mutex
	got := 0
	answer := false
	var b *fakeBookie
	b = newFakeBookie(t, func(c *fakeConn, req *wire.Request) {
		mu.Lock()
		defer mu.Unlock()
		if answer {
			c.reply(req, wire.StatusOK, nil)
			return
		}
		got++
		if got == 10 {
			go b.dropConns()
		}
	})
	tr := newTransport(t, Config{})
	defer tr.Close()
	ch := make(chan result, 10)
	for i := range 10 {
		tr.Send(b.addr(), 1, addRequest(1, int64(i)), collect(ch))
	}
	for range 10 {
		if r := recv(t, ch); !errors.Is(r.err, ErrBookieUnavailable) {
			t.Fatalf("got %+v, want ErrBookieUnavailable", r)
		}
	}
	mu.Lock()
	answer = true
	mu.Unlock()
	tr.Send(b.addr(), 1, addRequest(1, 10), collect(ch))
	if r := recv(t, ch); r.err != nil || r.entryID != 10 {
		t.Fatalf("after reconnect: %+v", r)
	}
}

// TestConnectBackoff: after a failed connect, Sends fail at once until the
// backoff has passed on the transport's clock; then the transport dials
// again, and the Dialer decides.
func TestConnectBackoff(t *testing.T) {
	b := newFakeBookie(t, func(c *fakeConn, req *wire.Request) { c.reply(req, wire.StatusOK, nil) })
	var mu sync.Mutex
	cut, dials := true, 0
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		blocked := cut
		mu.Unlock()
		if blocked {
			return nil, errors.New("cut off by the test")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{Dialer: dialer, ReconnectBackoff: 300 * time.Millisecond, Clock: clk})
	defer tr.Close()
	ch := make(chan result, 1)
	tr.Send(b.addr(), 1, addRequest(1, 0), collect(ch))
	if r := recv(t, ch); !errors.Is(r.err, ErrBookieUnavailable) {
		t.Fatalf("got %+v", r)
	}
	// The failed connect's callbacks ran after the backoff was set (both
	// under the session's end), so this Send sees it.
	clk.Advance(300*time.Millisecond - time.Nanosecond)
	tr.Send(b.addr(), 1, addRequest(1, 1), collect(ch))
	if r := recv(t, ch); !errors.Is(r.err, ErrBookieUnavailable) {
		t.Fatalf("got %+v", r)
	}
	mu.Lock()
	if dials != 1 {
		t.Fatalf("%d dials within the backoff, want 1", dials)
	}
	cut = false
	mu.Unlock()
	clk.Advance(time.Nanosecond)
	tr.Send(b.addr(), 1, addRequest(1, 2), collect(ch))
	if r := recv(t, ch); r.err != nil || r.entryID != 2 {
		t.Fatalf("after the backoff: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 2 {
		t.Fatalf("%d dials, want 2", dials)
	}
}

// TestCloseFailsOutstanding: Close fails what is in flight with ErrClosed.
func TestCloseFailsOutstanding(t *testing.T) {
	received := make(chan struct{}, 1)
	b := newFakeBookie(t, func(c *fakeConn, req *wire.Request) { received <- struct{}{} })
	tr := newTransport(t, Config{})
	ch := make(chan result, 1)
	tr.Send(b.addr(), 1, addRequest(1, 0), collect(ch))
	<-received // outstanding on a live connection, not still connecting
	tr.Close()
	if r := recv(t, ch); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("got %+v", r)
	}
	tr.Send(b.addr(), 1, addRequest(1, 1), collect(ch))
	if r := recv(t, ch); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("after close: %+v", r)
	}
}

// newTransport is New for a configuration the test knows is valid.
func newTransport(t testing.TB, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A configuration New cannot work with is an error naming the field, not
// a panic on the first connection.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Protocol: 7}, "Config.Protocol"},
		{Config{AddTimeout: -time.Second}, "Config.AddTimeout"},
		{Config{TimeoutTick: -1}, "Config.TimeoutTick"},
		{Config{ConnectionsPerBookie: -2}, "Config.ConnectionsPerBookie"},
		{Config{MaxFrameSize: 100}, "Config.MaxFrameSize"},
	} {
		tr, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			if tr != nil {
				tr.Close()
			}
			t.Fatalf("New(%+v) = %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	for _, cfg := range []Config{{}, {Protocol: wire.ProtocolV2}, {MaxFrameSize: wire.MaxFrameSizeLimit}} {
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate(%+v): %v", cfg, err)
		}
	}
}
