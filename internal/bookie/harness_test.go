package bookie

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// storeFactory makes a fresh store for one test and returns it with its
// cleanup. The semantic tests run against every factory (the in-memory fake
// and, when it builds, the real ledgerstore).
type storeFactory struct {
	name string
	new  func(t *testing.T) storage.Store
}

var storeFactories = []storeFactory{
	{"memstore", func(t *testing.T) storage.Store { return newMemStore() }},
}

// forEachStoreInBubble is forEachStore with each run in a synctest bubble
// (the harness, its store and the bookie's goroutines inside it).
func forEachStoreInBubble(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, f := range storeFactories {
		t.Run(f.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fn(t, newHarness(t, f.new(t), Config{})) })
		})
	}
}

// forEachStore runs fn once per store implementation.
func forEachStore(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, f := range storeFactories {
		t.Run(f.name, func(t *testing.T) {
			fn(t, newHarness(t, f.new(t), Config{}))
		})
	}
}

var (
	testPassword = []byte("password")
	testKey      = func() []byte { k := digest.MasterKey(testPassword); return k[:] }()
	wrongKey     = func() []byte { k := digest.MasterKey([]byte("wrong")); return k[:] }()
)

type harness struct {
	t     *testing.T
	store storage.Store
	b     *Bookie
	clock *clock.Manual
	dig   *digest.Digester
	txn   uint64
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t *testing.T, store storage.Store, cfg Config) *harness {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	cfg.Clock = clk
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	b, err := New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	dig, err := digest.New(digest.CRC32C, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, store: store, b: b, clock: clk, dig: dig}
}

// frameResponder encodes the response as the server would and hands the
// frame over.
type frameResponder struct {
	t  testing.TB
	ch chan []byte
	n  int
}

func (r *frameResponder) Respond(resp *wire.Response) {
	r.n++
	frame, err := codec.EncodeResponse(nil, resp)
	if err != nil {
		r.t.Errorf("response does not encode: %v (%+v)", err, resp)
	}
	r.ch <- frame
}

// pending is a request handed to the bookie whose answer may come later.
type pending struct {
	h     *harness
	proto wire.Protocol
	ch    chan []byte
}

// encodeDecode sends req through the client encoder and the server decoder,
// as it would travel, and returns the decoded request (owning its frame).
func encodeDecode(t testing.TB, proto wire.Protocol, req *wire.Request) *wire.Request {
	t.Helper()
	cc, err := codec.NewClientCodec(proto, false)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := cc.EncodeRequest(nil, req)
	if err != nil {
		t.Fatalf("encode %v request: %v", proto, err)
	}
	var dec codec.ServerDecoder
	if proto == wire.ProtocolV2 {
		// Put the decoder in v2 mode the way a connection gets there.
		var scratch wire.Request
		_ = dec.DecodeRequest([]byte{0, 0, 0, 0}, &scratch)
	}
	out := new(wire.Request)
	if err := dec.DecodeRequest(frame[4:], out); err != nil {
		t.Fatalf("decode %v request: %v", proto, err)
	}
	return out
}

// start hands req (encoded as proto) to the bookie.
func (h *harness) start(proto wire.Protocol, req wire.Request) *pending {
	h.t.Helper()
	if req.Header.Version == 0 && proto == wire.ProtocolV3 {
		req.Header.Version = wire.VersionThree
	}
	if req.Header.Version == 0 && proto == wire.ProtocolV2 {
		req.Header.Version = 2
	}
	if proto == wire.ProtocolV3 && req.Header.TxnID == 0 {
		h.txn++
		req.Header.TxnID = h.txn
	}
	dec := encodeDecode(h.t, proto, &req)
	return h.startDecoded(dec)
}

func (h *harness) startDecoded(req *wire.Request) *pending {
	p := &pending{h: h, proto: req.Protocol, ch: make(chan []byte, 2)}
	h.b.Handle(req, &frameResponder{t: h.t, ch: p.ch})
	return p
}

// wait returns the answer; it fails the test after 10 s.
func (p *pending) wait() wire.Response {
	p.h.t.Helper()
	select {
	case frame := <-p.ch:
		return decodeResponse(p.h.t, p.proto, frame)
	case <-time.After(10 * time.Second):
		p.h.t.Fatal("no response within 10 s")
	}
	return wire.Response{}
}

// answered reports whether an answer is there now (without consuming it).
// It does not wait: call it where nothing can be answering any more (after
// synctest.Wait, or when the answer depends on a step the test has not
// taken).
func (p *pending) answered() bool {
	select {
	case frame := <-p.ch:
		p.ch <- frame
		return true
	default:
		return false
	}
}

func decodeResponse(t testing.TB, proto wire.Protocol, frame []byte) wire.Response {
	t.Helper()
	cc, _ := codec.NewClientCodec(proto, false)
	var resp wire.Response
	if err := cc.DecodeResponse(frame[4:], &resp); err != nil {
		t.Fatalf("response frame %x does not decode as %v: %v", frame, proto, err)
	}
	return resp
}

func (h *harness) do(proto wire.Protocol, req wire.Request) wire.Response {
	h.t.Helper()
	return h.start(proto, req).wait()
}

// entry builds the digested body of an entry.
func (h *harness) entry(ledgerID, entryID, lac int64, payload string) []byte {
	return h.dig.AppendEntry(nil, ledgerID, entryID, lac, int64(len(payload))*(entryID+1), []byte(payload))
}

func addRequest(ledgerID, entryID int64, key, body []byte, recovery bool) wire.Request {
	req := wire.Request{Header: wire.Header{Op: wire.OpAddEntry}, Has: wire.BodyAdd}
	req.Add = wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: key, Body: body}
	if recovery {
		req.Add.Flag = wire.AddFlagRecoveryAdd
		req.Header.Priority = wire.HighPriority
	}
	return req
}

// add adds entry (ledgerID, entryID) with the writer's lac and returns the
// status.
func (h *harness) add(proto wire.Protocol, ledgerID, entryID, lac int64, key []byte, recovery bool) wire.Status {
	h.t.Helper()
	resp := h.do(proto, addRequest(ledgerID, entryID, key, h.entry(ledgerID, entryID, lac, "payload"), recovery))
	if resp.Header.Op != wire.OpAddEntry || resp.Add.LedgerID != ledgerID || resp.Add.EntryID != entryID {
		h.t.Fatalf("add response does not echo the request: %+v", resp)
	}
	return responseStatus(resp)
}

// mustAdd adds entries first..last of a ledger, each with lac = id-1.
func (h *harness) mustAdd(proto wire.Protocol, ledgerID, first, last int64) {
	h.t.Helper()
	for id := first; id <= last; id++ {
		if st := h.add(proto, ledgerID, id, id-1, testKey, false); st != wire.StatusOK {
			h.t.Fatalf("add %d/%d: %v", ledgerID, id, st)
		}
	}
}

func readRequest(ledgerID, entryID int64) wire.Request {
	req := wire.Request{Header: wire.Header{Op: wire.OpReadEntry}, Has: wire.BodyRead}
	req.Read = wire.ReadRequest{LedgerID: ledgerID, EntryID: entryID}
	return req
}

func fenceRequest(ledgerID, entryID int64, key []byte) wire.Request {
	req := readRequest(ledgerID, entryID)
	req.Read.Flag = wire.ReadFlagFenceLedger
	if key != nil {
		req.Read.MasterKey, req.Read.HasMasterKey = key, true
	}
	return req
}

// responseStatus is the status a Java client derives (spec §2.2): the
// top-level one unless it is EOK, then the sub-response's.
func responseStatus(resp wire.Response) wire.Status {
	if resp.Status != wire.StatusOK {
		return resp.Status
	}
	switch {
	case resp.Has&wire.BodyRead != 0:
		return resp.Read.Status
	case resp.Has&wire.BodyAdd != 0:
		return resp.Add.Status
	case resp.Has&wire.BodyReadLAC != 0:
		return resp.ReadLAC.Status
	case resp.Has&wire.BodyWriteLAC != 0:
		return resp.WriteLAC.Status
	case resp.Has&wire.BodyBatchRead != 0:
		return resp.BatchRead.Status
	case resp.Has&wire.BodyForceLedger != 0:
		return resp.ForceLedger.Status
	case resp.Has&wire.BodyGetBookieInfo != 0:
		return resp.GetBookieInfo.Status
	case resp.Has&wire.BodyGetListOfEntries != 0:
		return resp.ListEntries.Status
	}
	return resp.Status
}

var bothProtocols = []wire.Protocol{wire.ProtocolV2, wire.ProtocolV3}

// waitFor polls cond until it holds (or fails after 10 s): for goroutines
// the test cannot join, such as a long poll arming its timer.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
