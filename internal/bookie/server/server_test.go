package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// Pipelined requests are answered in any order and each answer matches its
// request: v3 by txnId, v2 by (ledger, entry, op).
func TestPipelinedOutOfOrder(t *testing.T) {
	for _, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
		t.Run(proto.String(), func(t *testing.T) {
			h := newSrvHarness(t, Options{})
			c := h.dial(proto)
			const ledger, n = 7, 50
			// Entries 0..n-1 stored and acknowledged first.
			for i := int64(0); i < n; i++ {
				c.queue(rawAdd(ledger, i, []byte(fmt.Sprint("entry ", i)), false))
			}
			c.flush()
			for range n {
				if st := rawStatus(c.recv()); st != wire.StatusOK {
					t.Fatalf("add: %v", st)
				}
			}
			// Now hold acknowledgements: adds n..2n-1 wait while reads of
			// 0..n-1 sent after them are answered first.
			h.store.close()
			want := map[string]string{}
			for i := int64(n); i < 2*n; i++ {
				txn := c.queue(rawAdd(ledger, i, []byte(fmt.Sprint("entry ", i)), false))
				want[key(proto, txn, wire.OpAddEntry, ledger, i)] = "add"
			}
			for i := int64(n - 1); i >= 0; i-- {
				txn := c.queue(rawRead(ledger, i))
				want[key(proto, txn, wire.OpReadEntry, ledger, i)] = string(rawEntry(ledger, i, []byte(fmt.Sprint("entry ", i))))
			}
			c.flush()
			srvWaitFor(t, "the adds to reach the store", func() bool { return h.store.heldCount() == n })
			var order []wire.Op
			for range n {
				resp := c.recv()
				order = append(order, resp.Header.Op)
				checkAnswer(t, proto, resp, want)
			}
			h.store.open()
			for range n {
				resp := c.recv()
				order = append(order, resp.Header.Op)
				checkAnswer(t, proto, resp, want)
			}
			if len(want) != 0 {
				t.Fatalf("%d requests unanswered", len(want))
			}
			if order[0] != wire.OpReadEntry {
				t.Fatalf("the held adds were answered first: %v", order[:3])
			}
		})
	}
}

func key(proto wire.Protocol, txn uint64, op wire.Op, ledger, entry int64) string {
	if proto == wire.ProtocolV3 {
		return fmt.Sprint(txn, "/", op)
	}
	return fmt.Sprint(op, "/", ledger, "/", entry)
}

func checkAnswer(t *testing.T, proto wire.Protocol, resp wire.Response, want map[string]string) {
	t.Helper()
	if st := rawStatus(resp); st != wire.StatusOK {
		t.Fatalf("%v: %v", resp.Header.Op, st)
	}
	var k string
	switch resp.Header.Op {
	case wire.OpAddEntry:
		k = key(proto, resp.Header.TxnID, resp.Header.Op, resp.Add.LedgerID, resp.Add.EntryID)
	case wire.OpReadEntry:
		k = key(proto, resp.Header.TxnID, resp.Header.Op, resp.Read.LedgerID, resp.Read.EntryID)
	}
	body, ok := want[k]
	if !ok {
		t.Fatalf("answer %s matches no outstanding request", k)
	}
	delete(want, k)
	if resp.Header.Op == wire.OpReadEntry && !bytes.Equal(resp.Read.Body, []byte(body)) {
		t.Fatalf("answer %s carries another entry's body", k)
	}
}

// Bad input closes only the connection it came on.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	h := newSrvHarness(t, Options{})
	good := h.dial(wire.ProtocolV3)
	goodV2 := h.dial(wire.ProtocolV2)
	check := func(entry int64) {
		t.Helper()
		if st := rawStatus(func() wire.Response { good.send(rawAdd(1, entry, []byte("x"), false)); return good.recv() }()); st != wire.StatusOK {
			t.Fatalf("good v3 client: %v", st)
		}
		goodV2.send(rawRead(1, entry))
		if resp := goodV2.recv(); rawStatus(resp) != wire.StatusOK || resp.Read.EntryID != entry {
			t.Fatalf("good v2 client: %+v", resp)
		}
	}
	check(0)
	v3Add := func() []byte {
		c := &rawClient{t: t}
		c.cc, _ = codec.NewClientCodec(wire.ProtocolV3, false)
		c.queue(rawAdd(2, 0, []byte("y"), false))
		return c.out
	}()
	cases := []struct {
		name  string
		bytes []byte
		half  bool // close the client's write side after sending
	}{
		{"garbage", []byte("\x00\x00\x00\x0bhello world"), false},
		{"oversized length", []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}, false},
		{"length over 2^31", []byte{0xff, 0xff, 0xff, 0xf0}, false},
		{"empty frame", []byte{0, 0, 0, 0}, false},
		{"truncated frame", append([]byte{0, 0, 1, 0}, bytes.Repeat([]byte{0x0a}, 50)...), true},
		{"truncated prefix", []byte{0, 0}, true},
		{"unknown v2 op", []byte{0, 0, 0, 20, 0x02, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, false},
		{"v3 then garbage", append(append([]byte(nil), v3Add...), 0, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef), false},
		{"short v2 add", []byte{0, 0, 0, 8, 0x02, 0x01, 0, 0, 1, 2, 3, 4}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			if _, err := bad.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.half {
				bad.(*net.TCPConn).CloseWrite()
			}
			c := &rawClient{t: t, nc: bad}
			c.expectClosed()
			check(int64(i + 1))
		})
	}
}

// Shutdown answers what was read, then closes; new connections are refused.
func TestShutdownGraceful(t *testing.T) {
	h := newSrvHarness(t, Options{})
	c := h.dial(wire.ProtocolV3)
	c.send(rawAdd(3, 0, []byte("a"), false))
	if st := rawStatus(c.recv()); st != wire.StatusOK {
		t.Fatal(st)
	}
	h.store.close()
	for i := int64(1); i <= 5; i++ {
		c.queue(rawAdd(3, i, []byte("a"), false))
	}
	c.flush()
	srvWaitFor(t, "the adds to reach the store", func() bool { return h.store.heldCount() == 5 })

	// Shutdown must wait for the held adds: it may return only after the
	// test has released them. released is set just before the release, and
	// read when Shutdown returns, so an early return is caught whenever it
	// happens, with no window to watch.
	type shutResult struct {
		err      error
		released bool
	}
	var released atomic.Bool
	shut := make(chan shutResult, 1)
	go func() {
		err := h.srv.Shutdown(context.Background())
		shut <- shutResult{err, released.Load()}
	}()
	srvWaitFor(t, "the listener to close", func() bool {
		select {
		case err := <-h.done:
			if !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
			return true
		default:
			return false
		}
	})
	if nc, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("a new connection was accepted after Shutdown")
	}
	released.Store(true)
	h.store.open()
	for range 5 {
		if st := rawStatus(c.recv()); st != wire.StatusOK {
			t.Fatalf("in-flight add after shutdown began: %v", st)
		}
	}
	c.expectClosed()
	r := <-shut
	if !r.released {
		t.Fatalf("Shutdown returned (%v) with requests in flight", r.err)
	}
	if r.err != nil {
		t.Fatalf("Shutdown: %v", r.err)
	}
}

// A Shutdown whose context ends first closes the connections at once.
func TestShutdownDeadline(t *testing.T) {
	h := newSrvHarness(t, Options{})
	c := h.dial(wire.ProtocolV3)
	h.store.close()
	c.send(rawAdd(4, 0, []byte("a"), false))
	srvWaitFor(t, "the add to reach the store", func() bool { return h.store.heldCount() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
	}
	c.expectClosed()
	h.store.open() // the late completion finds the connection gone
}

// At MaxInFlightPerConn the connection stops reading: the bookie sees no
// more requests until answers have gone out.
func TestPerConnectionBackPressure(t *testing.T) {
	m := &pauseCounter{}
	h := newSrvHarness(t, Options{MaxInFlightPerConn: 4, Metrics: m})
	c := h.dial(wire.ProtocolV3)
	h.store.close()
	for i := int64(0); i < 20; i++ {
		c.queue(rawAdd(5, i, []byte("a"), false))
	}
	c.flush()
	// Once the connection has paused, it reads nothing until an answer goes
	// out, and none can while the store holds the adds: the count is final.
	srvWaitFor(t, "the connection to stop reading", func() bool { return m.paused.Load() > 0 })
	if n := h.store.adds.Load(); n != 4 {
		t.Fatalf("%d adds reached the store with 4 allowed in flight", n)
	}
	// Another connection is not held up.
	other := h.dial(wire.ProtocolV3)
	other.send(rawRead(5, 0))
	if st := rawStatus(other.recv()); st != wire.StatusOK {
		t.Fatalf("read on another connection: %v", st)
	}
	h.store.open()
	seen := map[int64]bool{}
	for range 20 {
		resp := c.recv()
		if rawStatus(resp) != wire.StatusOK {
			t.Fatalf("add %d: %v", resp.Add.EntryID, rawStatus(resp))
		}
		seen[resp.Add.EntryID] = true
	}
	if len(seen) != 20 {
		t.Fatalf("answers for %d distinct entries", len(seen))
	}
}

// pauseCounter counts Metrics.ReadPaused.
type pauseCounter struct {
	NopMetrics
	paused atomic.Int64
}

func (m *pauseCounter) ReadPaused() { m.paused.Add(1) }

// An entry the bookie accepted is readable even when its answer is larger
// than the request limit: the ADD frame (header, key, body) fits the
// bookie's limit, the v2 batch answer (32 bytes, a length, the body) is 4
// bytes over it, and it is sent whole (answers are held to
// maxResponseFrame, not to the request limit), not replaced by EIO.
func TestAnswerOverRequestLimitIsSent(t *testing.T) {
	h := newSrvHarness(t, Options{})
	c := h.dial(wire.ProtocolV2)
	c.fr = wire.NewFrameReaderMax(bufio.NewReader(c.nc), wire.MaxFrameSizeLimit)
	big := bytes.Repeat([]byte("z"), wire.MaxPayloadSize-24-36-4)
	c.send(rawAdd(6, 0, big, false))
	if st := rawStatus(c.recv()); st != wire.StatusOK {
		t.Fatalf("big add: %v", st)
	}
	req := wire.Request{Header: wire.Header{Op: wire.OpBatchReadEntry, TxnID: 3}, Has: wire.BodyBatchRead,
		BatchRead: wire.BatchReadRequest{LedgerID: 6, StartEntryID: 0, MaxCount: 1, MaxSize: 10 << 20}}
	c.send(req)
	resp := c.recv()
	if resp.Status != wire.StatusOK || resp.Header.TxnID != 3 || len(resp.BatchRead.Entries) != 1 || !bytes.HasSuffix(resp.BatchRead.Entries[0], big) {
		t.Fatalf("batch answer over the request limit: %v txn %d, %d entries", resp.Status, resp.Header.TxnID, len(resp.BatchRead.Entries))
	}
}
