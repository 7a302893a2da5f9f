package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/wire"
)

// taggedResult is one HandleResponse call.
type taggedResult struct {
	bookie string
	tag    int64
	status wire.Status
	err    error
}

// chanHandler sends every answer to its channel.
type chanHandler chan taggedResult

func (h chanHandler) HandleResponse(bookie string, tag int64, resp *wire.Response, err error) {
	r := taggedResult{bookie: bookie, tag: tag, err: err}
	if err == nil {
		r.status = resp.Status
	}
	h <- r
}

func recvTagged(t *testing.T, h chanHandler) taggedResult {
	t.Helper()
	select {
	case r := <-h:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
		return taggedResult{}
	}
}

// TestPrune: Prune forgets the idle connections of the bookies it is not
// told to keep, keeps those with requests outstanding (their answers still
// arrive), and a pruned bookie asked again is connected afresh.
func TestPrune(t *testing.T) {
	answering := newFakeBookie(t, func(c *fakeConn, req *wire.Request) { c.reply(req, wire.StatusOK, nil) })
	held := make(chan *wire.Request, 1)
	var heldConn *fakeConn
	holding := newFakeBookie(t, func(c *fakeConn, req *wire.Request) {
		heldConn = c // read by the test after receiving req
		held <- req
	})
	tr := newTransport(t, Config{})
	defer tr.Close()
	h := make(chanHandler, 4)
	tr.SendTagged(answering.addr(), 1, addRequest(1, 0), h, 10)
	if r := recvTagged(t, h); r.err != nil || r.bookie != answering.addr() || r.tag != 10 || r.status != wire.StatusOK {
		t.Fatalf("answer: %+v", r)
	}
	tr.SendTagged(holding.addr(), 1, addRequest(1, 0), h, 20)
	req := <-held
	want := []string{answering.addr(), holding.addr()}
	slices.Sort(want)
	if got := tr.Bookies(); !slices.Equal(got, want) {
		t.Fatalf("bookies %v, want %v", got, want)
	}

	if n := tr.Prune(func(string) bool { return false }); n != 1 {
		t.Fatalf("Prune forgot %d slots, want 1 (the idle one)", n)
	}
	if got := tr.Bookies(); !slices.Equal(got, []string{holding.addr()}) {
		t.Fatalf("after Prune: bookies %v, want only the one with a request outstanding", got)
	}
	// The outstanding request is answered as if nothing happened.
	heldConn.reply(req, wire.StatusOK, nil)
	if r := recvTagged(t, h); r.err != nil || r.bookie != holding.addr() || r.tag != 20 {
		t.Fatalf("held answer: %+v", r)
	}
	// The pruned bookie is connected again on demand.
	tr.SendTagged(answering.addr(), 1, addRequest(1, 1), h, 11)
	if r := recvTagged(t, h); r.err != nil || r.tag != 11 {
		t.Fatalf("after Prune: %+v", r)
	}
	// Kept bookies are never pruned; the rest, now idle, are.
	if n := tr.Prune(func(b string) bool { return b == answering.addr() }); n != 1 {
		t.Fatalf("second Prune forgot %d slots, want 1", n)
	}
	if got := tr.Bookies(); !slices.Equal(got, []string{answering.addr()}) {
		t.Fatalf("after the second Prune: bookies %v", got)
	}
}

// TestRecycledRecordNotExpiredByStaleDeadline: a request record answered
// and recycled leaves its entry in the deadline queue; a later request
// that reuses the record (sync.Pool hands the last one back on the same
// P, outside -race) must time out at its own deadline, never at the
// stale entry's.
func TestRecycledRecordNotExpiredByStaleDeadline(t *testing.T) {
	answering := newFakeBookie(t, func(c *fakeConn, req *wire.Request) { c.reply(req, wire.StatusOK, nil) })
	received := make(chan struct{}, 1)
	silent := newFakeBookie(t, func(*fakeConn, *wire.Request) { received <- struct{}{} })
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{AddTimeout: time.Second, TimeoutTick: time.Hour, Clock: clk})
	defer tr.Close()
	h := make(chanHandler, 4)
	for i := range 3 { // stale entries on the answering bookie's queue
		tr.SendTagged(answering.addr(), 1, addRequest(1, int64(i)), h, int64(i))
		if r := recvTagged(t, h); r.err != nil {
			t.Fatal(r.err)
		}
	}
	clk.Advance(500 * time.Millisecond)
	tr.SendTagged(silent.addr(), 1, addRequest(1, 9), h, 9) // deadline: 1.5 s from the start
	<-received
	clk.Advance(600 * time.Millisecond) // past the stale entries' deadlines only
	tr.sweep(clk.Now())
	select {
	case r := <-h:
		t.Fatalf("expired by a stale deadline: %+v", r)
	default:
	}
	clk.Advance(400 * time.Millisecond)
	tr.sweep(clk.Now())
	if r := recvTagged(t, h); !errors.Is(r.err, ErrTimeout) || r.tag != 9 {
		t.Fatalf("got %+v, want entry 9's timeout", r)
	}
	tr.sweep(clk.Now())
	select {
	case r := <-h:
		t.Fatalf("a second answer: %+v", r)
	default:
	}
}

// TestSendOnRetiredPeerRefused: a Send that took a peer from the map just
// before Prune retired it must not queue its request there. The retired
// peer is out of the map, so neither the sweeper nor Close would ever see
// a session it opened: the request would never be answered. peer.send
// refuses (reports false, having touched nothing) and Send/SendTagged go
// to a fresh peer. The interleaving is forced by calling peer and send
// around the Prune.
func TestSendOnRetiredPeerRefused(t *testing.T) {
	b := newFakeBookie(t, func(c *fakeConn, req *wire.Request) { c.reply(req, wire.StatusOK, nil) })
	tr := newTransport(t, Config{})
	defer tr.Close()
	p, err := tr.peer(b.addr(), 1, lanePlain)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.Prune(func(string) bool { return false }); n != 1 {
		t.Fatalf("Prune forgot %d slots, want 1", n)
	}
	h := make(chanHandler, 4)
	queued := p.send(addRequest(1, 0), nil, h, 5)
	p.mu.Lock()
	orphan := p.sess != nil
	p.mu.Unlock()
	if queued || orphan {
		// End the orphan session ourselves: tr.Close cannot see it and
		// would wait for its goroutines for ever.
		p.close()
		t.Fatalf("send on a retired peer: queued %v, opened a session outside the transport's map %v", queued, orphan)
	}
	select {
	case r := <-h:
		t.Fatalf("a refused send answered: %+v", r)
	default:
	}
	// The public path gets a fresh peer and its answer.
	tr.SendTagged(b.addr(), 1, addRequest(1, 0), h, 6)
	if r := recvTagged(t, h); r.err != nil || r.tag != 6 || r.status != wire.StatusOK {
		t.Fatalf("SendTagged after Prune: %+v", r)
	}
	if got := tr.Bookies(); !slices.Equal(got, []string{b.addr()}) {
		t.Fatalf("bookies %v, want the fresh peer's", got)
	}
}

// TestPruneKeepsReconnectBackoff: a dead bookie's reconnect backoff
// survives Prune while it is in use, so requests to it (a reader of an old
// ledger on a bookie that left) keep failing fast instead of each waiting
// for a connect; a failing slot nobody asks any more is pruned once its
// wait is over, so dead bookies do not accumulate.
func TestPruneKeepsReconnectBackoff(t *testing.T) {
	const dead = "192.0.2.1:3181"
	var dials atomic.Int32
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{
		Clock: clk, TimeoutTick: time.Hour,
		ReconnectBackoff: time.Second, MaxReconnectBackoff: 8 * time.Second,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("connection refused (test dialer)")
		},
	})
	defer tr.Close()
	h := make(chanHandler, 4)
	none := func(string) bool { return false }
	fastFail := func(what string) {
		t.Helper()
		before := dials.Load()
		tr.SendTagged(dead, 1, addRequest(1, 0), h, 2)
		r := recvTagged(t, h)
		if !errors.Is(r.err, ErrBookieUnavailable) || !strings.Contains(r.err.Error(), "next attempt in") || dials.Load() != before {
			t.Fatalf("%s: %v after %d dials (had %d), want a fast failure without a dial", what, r.err, dials.Load(), before)
		}
	}

	tr.SendTagged(dead, 1, addRequest(1, 0), h, 1)
	if r := recvTagged(t, h); !errors.Is(r.err, ErrBookieUnavailable) || dials.Load() != 1 {
		t.Fatalf("first send: %v after %d dials, want a failed connect", r.err, dials.Load())
	}
	// The wait (1 s) is on: Prune keeps the slot, the next send fails fast.
	if n := tr.Prune(none); n != 0 {
		t.Fatalf("Prune forgot %d slots during the reconnect backoff", n)
	}
	fastFail("after a Prune during the backoff")

	// The wait is over, but the slot was asked since the last Prune:
	// kept, and the backoff keeps growing (2 s after the second failure).
	clk.Advance(time.Second)
	if n := tr.Prune(none); n != 0 {
		t.Fatalf("Prune forgot %d slots of a failing bookie still asked", n)
	}
	tr.SendTagged(dead, 1, addRequest(1, 0), h, 3)
	if r := recvTagged(t, h); !errors.Is(r.err, ErrBookieUnavailable) || dials.Load() != 2 {
		t.Fatalf("send after the wait: %v after %d dials, want a second failed connect", r.err, dials.Load())
	}
	clk.Advance(1500 * time.Millisecond) // within the doubled wait
	if n := tr.Prune(none); n != 0 {
		t.Fatalf("Prune forgot %d slots during the doubled backoff", n)
	}
	fastFail("after a Prune during the doubled backoff")

	// Nobody asks any more: the first Prune past the wait clears the
	// mark, the next one forgets the slot.
	clk.Advance(time.Second)
	if n := tr.Prune(none); n != 0 {
		t.Fatalf("Prune forgot %d slots sent to since the previous Prune", n)
	}
	if n := tr.Prune(none); n != 1 {
		t.Fatalf("Prune forgot %d slots of an idle failing bookie, want 1", n)
	}
	if got := tr.Bookies(); len(got) != 0 {
		t.Fatalf("bookies %v after pruning the dead one", got)
	}
}

// TestRegisteredDropsReconnectBackoff: a bookie that registers again is
// dialed at the next send, not failed fast for the rest of the backoff
// its absence earned.
func TestRegisteredDropsReconnectBackoff(t *testing.T) {
	const bookie = "192.0.2.1:3181"
	var dials atomic.Int32
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{
		Clock: clk, TimeoutTick: time.Hour,
		ReconnectBackoff: time.Second, MaxReconnectBackoff: 8 * time.Second,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("connection refused (test dialer)")
		},
	})
	defer tr.Close()
	h := make(chanHandler, 4)
	tr.SendTagged(bookie, 1, addRequest(1, 0), h, 1)
	if r := recvTagged(t, h); !errors.Is(r.err, ErrBookieUnavailable) || dials.Load() != 1 {
		t.Fatalf("first send: %v after %d dials, want a failed connect", r.err, dials.Load())
	}
	tr.SendTagged(bookie, 1, addRequest(1, 0), h, 2)
	if r := recvTagged(t, h); !strings.Contains(fmt.Sprint(r.err), "next attempt in") || dials.Load() != 1 {
		t.Fatalf("send during the backoff: %v after %d dials, want a fast failure", r.err, dials.Load())
	}
	tr.Registered("192.0.2.2:3181") // another bookie: no effect on this one
	tr.SendTagged(bookie, 1, addRequest(1, 0), h, 3)
	if r := recvTagged(t, h); !strings.Contains(fmt.Sprint(r.err), "next attempt in") || dials.Load() != 1 {
		t.Fatalf("send after another bookie registered: %v after %d dials, want a fast failure", r.err, dials.Load())
	}
	tr.Registered(bookie)
	tr.SendTagged(bookie, 1, addRequest(1, 0), h, 4)
	if r := recvTagged(t, h); !errors.Is(r.err, ErrBookieUnavailable) || dials.Load() != 2 {
		t.Fatalf("send after the bookie registered: %v after %d dials, want a fresh connect", r.err, dials.Load())
	}
}
