package transport

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/wire"
	v2 "github.com/foliodb/folio/internal/wire/v2"
)

// v2Bookie is a bookie over real TCP that speaks only v2 frames
// (internal/wire/v2) and answers nothing by itself: every request it
// receives is handed to the test on reqs, and the test answers it (or not)
// in whatever order it likes. It also checks the transport's v2 contract on
// every connection: no two outstanding requests share a (ledger, entry, op)
// key with different flags.
type v2Bookie struct {
	t    *testing.T
	ln   net.Listener
	reqs chan *v2Req

	mu         sync.Mutex
	conns      []*v2Conn
	violations []string
}

// v2Conn is one accepted connection.
type v2Conn struct {
	b  *v2Bookie
	id int
	nc net.Conn

	wmu sync.Mutex // serialises writes
	// outstanding holds the flags of the requests not answered yet, by
	// key; guarded by b.mu.
	outstanding map[reqKey][]uint16
}

// v2Req is one request as the bookie received it.
type v2Req struct {
	c   *v2Conn
	req *wire.Request
	// flags is what the answer cannot show: DO_FENCING or RECOVERY_ADD.
	flags uint16
}

const (
	flagFence    = 1
	flagRecovery = 2
)

func newV2Bookie(t *testing.T) *v2Bookie {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &v2Bookie{t: t, ln: ln, reqs: make(chan *v2Req, 64)}
	go b.accept()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.nc.Close()
		}
		v := b.violations
		b.mu.Unlock()
		if len(v) > 0 {
			t.Errorf("the transport broke the v2 matching contract: %v", v)
		}
	})
	return b
}

func (b *v2Bookie) addr() string { return b.ln.Addr().String() }

func (b *v2Bookie) accept() {
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		c := &v2Conn{b: b, id: len(b.conns), nc: nc, outstanding: map[reqKey][]uint16{}}
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		go c.serve()
	}
}

func (c *v2Conn) serve() {
	fr := wire.NewFrameReader(bufio.NewReader(c.nc))
	for {
		payload, err := fr.Next()
		if err != nil {
			return
		}
		req := new(wire.Request)
		if err := v2.DecodeRequest(payload, req); err != nil {
			c.nc.Close()
			return
		}
		fr.Detach() // req aliases the payload and is answered later
		r := &v2Req{c: c, req: req}
		switch {
		case req.Header.Op == wire.OpReadEntry && req.Read.Flag == wire.ReadFlagFenceLedger,
			req.Header.Op == wire.OpBatchReadEntry && req.BatchRead.Fence:
			r.flags = flagFence
		case req.Header.Op == wire.OpAddEntry && req.Add.Flag == wire.AddFlagRecoveryAdd:
			r.flags = flagRecovery
		}
		k := requestKey(wire.ProtocolV2, req)
		c.b.mu.Lock()
		for _, f := range c.outstanding[k] {
			if f != r.flags {
				c.b.violations = append(c.b.violations, fmt.Sprintf("connection %d: %v of ledger %d entry %d with flags %d while one with flags %d is outstanding", c.id, k.op, k.a, k.b, r.flags, f))
			}
		}
		c.outstanding[k] = append(c.outstanding[k], r.flags)
		c.b.mu.Unlock()
		c.b.reqs <- r
	}
}

// next returns the next request the bookie received.
func (b *v2Bookie) next(t *testing.T) *v2Req {
	t.Helper()
	select {
	case r := <-b.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the bookie received no request within 10 s")
		return nil
	}
}

// answer writes r's response on r's connection: status, and for an OK
// read the body.
func (r *v2Req) answer(status wire.Status, body []byte) {
	req := r.req
	resp := &wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: req.Header.Version, Op: req.Header.Op, TxnID: req.Header.TxnID}, Status: status}
	switch req.Header.Op {
	case wire.OpAddEntry:
		resp.Has = wire.BodyAdd
		resp.Add = wire.AddResponse{Status: status, LedgerID: req.Add.LedgerID, EntryID: req.Add.EntryID}
	case wire.OpReadEntry:
		resp.Has = wire.BodyRead
		resp.Read = wire.ReadResponse{Status: status, LedgerID: req.Read.LedgerID, EntryID: req.Read.EntryID, Body: body, HasBody: body != nil}
	case wire.OpBatchReadEntry:
		resp.Has = wire.BodyBatchRead
		resp.BatchRead = wire.BatchReadResponse{Status: status, LedgerID: req.BatchRead.LedgerID, StartEntryID: req.BatchRead.StartEntryID}
		if body != nil {
			resp.BatchRead.Entries = [][]byte{body}
		}
	}
	frame, off := wire.BeginFrame(nil)
	frame, err := v2.AppendResponse(frame, resp)
	if err != nil {
		panic(err)
	}
	if frame, err = wire.EndFrame(frame, off); err != nil {
		panic(err)
	}
	k := requestKey(wire.ProtocolV2, req)
	b := r.c.b
	b.mu.Lock()
	if fl := r.c.outstanding[k]; len(fl) > 0 {
		for i, f := range fl {
			if f == r.flags {
				r.c.outstanding[k] = append(fl[:i], fl[i+1:]...)
				break
			}
		}
	}
	b.mu.Unlock()
	r.c.wmu.Lock()
	defer r.c.wmu.Unlock()
	_, _ = r.c.nc.Write(frame)
}

func readRequest(ledgerID, entryID int64, fence bool) *wire.Request {
	req := &wire.Request{
		Header: wire.Header{Op: wire.OpReadEntry},
		Has:    wire.BodyRead,
		Read:   wire.ReadRequest{LedgerID: ledgerID, EntryID: entryID},
	}
	if fence {
		req.Read.Flag = wire.ReadFlagFenceLedger
		req.Read.MasterKey = make([]byte, wire.MasterKeyLength)
		req.Read.HasMasterKey = true
		req.Header.Priority = wire.HighPriority
	}
	return req
}

// answerOf is what one callback received.
type answerOf struct {
	status wire.Status
	body   string
	err    error
}

// await sends req and returns a channel that receives its one answer (a
// second call of the callback fails the test).
func await(t *testing.T, tr *Transport, bookie string, req *wire.Request) <-chan answerOf {
	ch := make(chan answerOf, 1)
	var calls atomic.Int32
	tr.Send(bookie, 1, req, func(resp *wire.Response, err error) {
		if calls.Add(1) > 1 {
			t.Errorf("%v: callback called twice (now with %v, %v)", req.Header.Op, resp, err)
			return
		}
		a := answerOf{err: err}
		if err == nil {
			a.status = resp.Status
			switch resp.Header.Op {
			case wire.OpReadEntry:
				a.body = string(resp.Read.Body)
			case wire.OpBatchReadEntry:
				for _, e := range resp.BatchRead.Entries {
					a.body += string(e)
				}
			}
		}
		ch <- a
	})
	return ch
}

func got(t *testing.T, what string, ch <-chan answerOf) answerOf {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer within 10 s", what)
		return answerOf{}
	}
}

func wantAnswer(t *testing.T, what string, a answerOf, status wire.Status, body string) {
	t.Helper()
	if a.err != nil || a.status != status || a.body != body {
		t.Fatalf("%s got (status %v, body %q, err %v), want (status %v, body %q)", what, a.status, a.body, a.err, status, body)
	}
}

// TestV2FenceAndPlainReadNeverShareAnAnswer: a recovery's fencing READ and
// a plain READ of the same (ledger, entry) are both outstanding and the
// bookie answers them in either order: each gets its own answer (the plain
// one "no such entry", as from a bookie that has not fenced; the fencing
// one the entry). Entry -1 is the LAC read, plain and fencing.
func TestV2FenceAndPlainReadNeverShareAnAnswer(t *testing.T) {
	for _, entry := range []int64{5, -1} {
		for _, fenceFirst := range []bool{true, false} {
			for _, reverse := range []bool{true, false} {
				name := fmt.Sprintf("entry=%d/fenceFirst=%v/answerNewestFirst=%v", entry, fenceFirst, reverse)
				t.Run(name, func(t *testing.T) {
					b := newV2Bookie(t)
					tr := newTransport(t, Config{Protocol: wire.ProtocolV2})
					defer tr.Close()
					var fenceCh, plainCh <-chan answerOf
					if fenceFirst {
						fenceCh = await(t, tr, b.addr(), readRequest(1, entry, true))
						plainCh = await(t, tr, b.addr(), readRequest(1, entry, false))
					} else {
						plainCh = await(t, tr, b.addr(), readRequest(1, entry, false))
						fenceCh = await(t, tr, b.addr(), readRequest(1, entry, true))
					}
					first, second := b.next(t), b.next(t)
					if first.c == second.c {
						t.Errorf("fencing and plain READ of entry %d sent on one v2 connection", entry)
					}
					if reverse {
						first, second = second, first
					}
					for _, r := range []*v2Req{first, second} {
						if r.flags == flagFence {
							r.answer(wire.StatusOK, []byte("entry, after the fence"))
						} else {
							r.answer(wire.StatusNoEntry, nil)
						}
					}
					wantAnswer(t, "fencing READ", got(t, "fencing READ", fenceCh), wire.StatusOK, "entry, after the fence")
					wantAnswer(t, "plain READ", got(t, "plain READ", plainCh), wire.StatusNoEntry, "")
				})
			}
		}
	}
}

// TestV2RecoveryAddAndPlainAddNeverShareAnAnswer: a writer's plain ADD
// (answered EFENCED: the ledger is fenced) and a recovery's RECOVERY_ADD
// (stored) of the same entry, answered newest first.
func TestV2RecoveryAddAndPlainAddNeverShareAnAnswer(t *testing.T) {
	b := newV2Bookie(t)
	tr := newTransport(t, Config{Protocol: wire.ProtocolV2})
	defer tr.Close()
	plainCh := await(t, tr, b.addr(), addRequest(1, 7))
	rec := addRequest(1, 7)
	rec.Add.Flag = wire.AddFlagRecoveryAdd
	rec.Header.Priority = wire.HighPriority
	recCh := await(t, tr, b.addr(), rec)
	plain, recovery := b.next(t), b.next(t)
	if plain.c == recovery.c {
		t.Error("plain ADD and RECOVERY_ADD of one entry sent on one v2 connection")
	}
	if plain.flags != 0 || recovery.flags != flagRecovery {
		plain, recovery = recovery, plain
	}
	recovery.answer(wire.StatusOK, nil)
	plain.answer(wire.StatusFenced, nil)
	wantAnswer(t, "RECOVERY_ADD", got(t, "RECOVERY_ADD", recCh), wire.StatusOK, "")
	wantAnswer(t, "plain ADD", got(t, "plain ADD", plainCh), wire.StatusFenced, "")
}

// TestV2LateAnswerAfterTimeout: a plain READ times out, then a fencing READ
// of the same entry is sent, and only then does the late plain answer come
// (then the fencing one). The late answer must not complete the fencing
// READ: this is the case a "hold the second request until the first is
// answered" design gets wrong when the timeout frees the key.
func TestV2LateAnswerAfterTimeout(t *testing.T) {
	b := newV2Bookie(t)
	clk := clock.NewManual(time.Unix(1000, 0))
	tr := newTransport(t, Config{Protocol: wire.ProtocolV2, ReadTimeout: time.Second, TimeoutTick: time.Hour, Clock: clk})
	defer tr.Close()
	plainCh := await(t, tr, b.addr(), readRequest(1, 5, false))
	plain := b.next(t)
	clk.Advance(time.Second)
	tr.sweep(clk.Now())
	if a := got(t, "plain READ", plainCh); !errors.Is(a.err, ErrTimeout) {
		t.Fatalf("plain READ got %+v, want ErrTimeout", a)
	}
	fenceCh := await(t, tr, b.addr(), readRequest(1, 5, true))
	fence := b.next(t)
	plain.answer(wire.StatusNoEntry, nil) // late
	fence.answer(wire.StatusOK, []byte("entry"))
	wantAnswer(t, "fencing READ", got(t, "fencing READ", fenceCh), wire.StatusOK, "entry")

	// Barrier: the answer to a later plain READ of another entry comes
	// after the late one on the plain connection, so once it is here the
	// late answer has been read and dropped (a second callback of the
	// timed-out READ would have failed the test).
	barrier := await(t, tr, b.addr(), readRequest(1, 6, false))
	b.next(t).answer(wire.StatusOK, []byte("six"))
	wantAnswer(t, "plain READ of entry 6", got(t, "plain READ of entry 6", barrier), wire.StatusOK, "six")
}

// TestV2LaneConnectionLoss: losing the connection that carries one kind of
// request fails only the requests on it, with ErrBookieUnavailable; the
// other kind is still answered on its own connection, and the next request
// of the lost kind connects again.
func TestV2LaneConnectionLoss(t *testing.T) {
	for _, lost := range []string{"fencing", "plain"} {
		t.Run("lose "+lost, func(t *testing.T) {
			b := newV2Bookie(t)
			tr := newTransport(t, Config{Protocol: wire.ProtocolV2})
			defer tr.Close()
			fenceCh := await(t, tr, b.addr(), readRequest(1, 3, true))
			plainCh := await(t, tr, b.addr(), readRequest(1, 3, false))
			byFlag := map[uint16]*v2Req{}
			for range 2 {
				r := b.next(t)
				byFlag[r.flags] = r
			}
			fence, plain := byFlag[flagFence], byFlag[0]
			lostCh, keptCh, kept := fenceCh, plainCh, plain
			if lost == "plain" {
				lostCh, keptCh, kept = plainCh, fenceCh, fence
				plain.c.nc.Close()
			} else {
				fence.c.nc.Close()
			}
			if a := got(t, lost+" READ", lostCh); !errors.Is(a.err, ErrBookieUnavailable) {
				t.Fatalf("%s READ on the lost connection got %+v, want ErrBookieUnavailable", lost, a)
			}
			kept.answer(wire.StatusOK, []byte("kept"))
			wantAnswer(t, "READ on the other connection", got(t, "READ on the other connection", keptCh), wire.StatusOK, "kept")

			againCh := await(t, tr, b.addr(), readRequest(1, 3, lost == "fencing"))
			again := b.next(t)
			if again.c == fence.c || again.c == plain.c {
				t.Fatalf("the %s READ after the loss did not open a new connection", lost)
			}
			again.answer(wire.StatusOK, []byte("again"))
			wantAnswer(t, lost+" READ after reconnecting", got(t, lost+" READ after reconnecting", againCh), wire.StatusOK, "again")
		})
	}
}

// TestV2BatchReadIDs: the transport gives each v2 BATCH_READ its own
// requestId (the answer's only key), whatever the caller put in TxnID, so
// two batch reads from one start entry, answered newest first, each get
// their own answer.
func TestV2BatchReadIDs(t *testing.T) {
	b := newV2Bookie(t)
	tr := newTransport(t, Config{Protocol: wire.ProtocolV2})
	defer tr.Close()
	batch := func() *wire.Request {
		return &wire.Request{
			Header:    wire.Header{Op: wire.OpBatchReadEntry, TxnID: 42},
			Has:       wire.BodyBatchRead,
			BatchRead: wire.BatchReadRequest{LedgerID: 1, StartEntryID: 0, MaxCount: 10, MaxSize: 1 << 20},
		}
	}
	firstCh := await(t, tr, b.addr(), batch())
	secondCh := await(t, tr, b.addr(), batch())
	first, second := b.next(t), b.next(t)
	if first.req.Header.TxnID == second.req.Header.TxnID {
		t.Fatalf("two batch reads sent with requestId %d", first.req.Header.TxnID)
	}
	second.answer(wire.StatusOK, []byte("second"))
	first.answer(wire.StatusOK, []byte("first"))
	wantAnswer(t, "first BATCH_READ", got(t, "first BATCH_READ", firstCh), wire.StatusOK, "first")
	wantAnswer(t, "second BATCH_READ", got(t, "second BATCH_READ", secondCh), wire.StatusOK, "second")
}
