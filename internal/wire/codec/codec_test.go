package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/v2"
	"github.com/foliodb/folio/internal/wire/v3"
)

func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

var key = hx("776734ff34b8278465ec6051092ee57a434bb849")

func entryBody(ledgerID, entryID int64, payload string) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(ledgerID))
	b = binary.BigEndian.AppendUint64(b, uint64(entryID))
	b = binary.BigEndian.AppendUint64(b, uint64(entryID-1))
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

func v3Add(txnID uint64, ledgerID, entryID int64) *wire.Request {
	return &wire.Request{
		Header: wire.Header{Version: wire.VersionThree, Op: wire.OpAddEntry, TxnID: txnID},
		Has:    wire.BodyAdd,
		Add:    wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: key, Body: entryBody(ledgerID, entryID, "payload")},
	}
}

func v3Read(txnID uint64) *wire.Request {
	return &wire.Request{
		Header: wire.Header{Version: wire.VersionThree, Op: wire.OpReadEntry, TxnID: txnID},
		Has:    wire.BodyRead,
		Read:   wire.ReadRequest{LedgerID: 1, EntryID: 2},
	}
}

var startTLS = &wire.Request{
	Header: wire.Header{Version: wire.VersionThree, Op: wire.OpStartTLS, TxnID: 1},
	Has:    wire.BodyStartTLS,
}

func v2Add(ledgerID, entryID int64) *wire.Request {
	return &wire.Request{
		Header: wire.Header{Version: v2.CurrentVersion, Op: wire.OpAddEntry},
		Add:    wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: key, Body: entryBody(ledgerID, entryID, "payload")},
	}
}

func v2Read() *wire.Request {
	return &wire.Request{
		Header: wire.Header{Version: v2.CurrentVersion, Op: wire.OpReadEntry},
		Read:   wire.ReadRequest{LedgerID: 1, EntryID: -1, Flag: wire.ReadFlagFenceLedger, MasterKey: key},
	}
}

// enc3 and enc2 encode a test request; the requests are fixed, so an error
// is a bug in the test.
func enc3(_ testing.TB, req *wire.Request) []byte {
	p, err := v3.AppendRequest(nil, req)
	if err != nil {
		panic(err)
	}
	return p
}

func enc2(_ testing.TB, req *wire.Request) []byte {
	p, err := v2.AppendRequest(nil, req)
	if err != nil {
		panic(err)
	}
	return p
}

// step is one frame given to a ServerDecoder and what must come of it.
type step struct {
	payload []byte
	proto   wire.Protocol // of the decoded request; 0: decoding must fail
	op      wire.Op
	mode    wire.Protocol // the decoder's mode afterwards
}

func run(t *testing.T, steps []step) {
	t.Helper()
	var d ServerDecoder
	if d.Protocol() != wire.ProtocolV3 {
		t.Fatalf("fresh decoder in mode %v", d.Protocol())
	}
	for i, s := range steps {
		var req wire.Request
		err := d.DecodeRequest(s.payload, &req)
		switch {
		case s.proto == 0 && err == nil:
			t.Fatalf("frame %d decoded: %+v", i, req)
		case s.proto == 0 && !errors.Is(err, wire.ErrMalformed):
			t.Fatalf("frame %d: %v, want an ErrMalformed", i, err)
		case s.proto != 0 && err != nil:
			t.Fatalf("frame %d: %v", i, err)
		case s.proto != 0 && (req.Protocol != s.proto || req.Header.Op != s.op):
			t.Fatalf("frame %d decoded as %v %v, want %v %v", i, req.Protocol, req.Header.Op, s.proto, s.op)
		}
		if d.Protocol() != s.mode {
			t.Fatalf("after frame %d: mode %v, want %v", i, d.Protocol(), s.mode)
		}
	}
}

func TestServerV3StaysV3(t *testing.T) {
	run(t, []step{
		{enc3(t, v3Add(1, 5, 0)), wire.ProtocolV3, wire.OpAddEntry, wire.ProtocolV3},
		{enc3(t, v3Read(2)), wire.ProtocolV3, wire.OpReadEntry, wire.ProtocolV3},
		{enc3(t, v3Add(3, 5, 1)), wire.ProtocolV3, wire.OpAddEntry, wire.ProtocolV3},
	})
}

func TestServerFirstV2FrameSwitchesForGood(t *testing.T) {
	run(t, []step{
		{enc2(t, v2Add(5, 0)), wire.ProtocolV2, wire.OpAddEntry, wire.ProtocolV2},
		{enc2(t, v2Read()), wire.ProtocolV2, wire.OpReadEntry, wire.ProtocolV2},
		// A v3 frame on a v2 connection is read as v2 and fails.
		{enc3(t, v3Read(2)), 0, 0, wire.ProtocolV2},
	})
	run(t, []step{
		{enc3(t, v3Read(1)), wire.ProtocolV3, wire.OpReadEntry, wire.ProtocolV3},
		{enc2(t, v2Add(5, 0)), wire.ProtocolV2, wire.OpAddEntry, wire.ProtocolV2},
		{enc3(t, v3Read(2)), 0, 0, wire.ProtocolV2},
	})
}

func TestServerStartTLSThenV2(t *testing.T) {
	run(t, []step{
		{enc3(t, startTLS), wire.ProtocolV3, wire.OpStartTLS, wire.ProtocolV3},
		{enc2(t, v2Add(5, 0)), wire.ProtocolV2, wire.OpAddEntry, wire.ProtocolV2},
		{enc2(t, v2Read()), wire.ProtocolV2, wire.OpReadEntry, wire.ProtocolV2},
	})
}

// TestServerV3LookingFrameOnV2 sends a frame that is a valid v3 ADD and, read
// as v2, a valid BATCH_READ: on a v2 connection it must be the BATCH_READ.
func TestServerV3LookingFrameOnV2(t *testing.T) {
	// Header {version 3, ADD_ENTRY, txnId 129} is 7 bytes, so the frame
	// starts 0a 07 08 03 10 02 18 81 01: to v2, version 10 (read with the
	// version-2 layout), opcode 7, flags 0x0803 (DO_FENCING), and the
	// add's fields fill the 40 + 20 bytes a fencing BATCH_READ needs.
	both := enc3(t, v3Add(129, 5, 0))
	if !bytes.HasPrefix(both, hx("0a07 0803 1002 188101")) || len(both) < 60 {
		t.Fatalf("test frame %x is not what the test needs", both)
	}
	var probe wire.Request
	if err := v2.DecodeRequest(both, &probe); err != nil || probe.Header.Op != wire.OpBatchReadEntry {
		t.Fatalf("test frame does not decode as a v2 BATCH_READ: %v", err)
	}
	run(t, []step{
		{both, wire.ProtocolV3, wire.OpAddEntry, wire.ProtocolV3},
		{enc2(t, v2Read()), wire.ProtocolV2, wire.OpReadEntry, wire.ProtocolV2},
		{both, wire.ProtocolV2, wire.OpBatchReadEntry, wire.ProtocolV2},
	})
}

func TestServerGarbage(t *testing.T) {
	for _, g := range []string{
		"",
		"00",
		"ffffffff",
		"ffffffffffffffffffffffffffffffffffffffff",
		"0a",                           // v3 tag, no length; as v2 too short
		"0a0208031001",                 // v3 header missing txnId; as v2: version 10, opcode 2, short READ
		"08",                           // v3 varint without value
		"02010000" + "00",              // v2 ADD, far too short
		"02040000 0000000000000001",    // v2 READ_LAC: never implemented
		"02020001 0000000000000001 ff", // v2 fencing READ with a short key
	} {
		var d ServerDecoder
		var req wire.Request
		err := d.DecodeRequest(hx(g), &req)
		if !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%q: %v, want an ErrMalformed", g, err)
		}
		if d.Protocol() != wire.ProtocolV2 {
			t.Errorf("%q: a frame that fails v3 must switch to v2", g)
		}
	}
}

func TestServerDecoderOverV2Bytes(t *testing.T) {
	// The spec's fencing LAC read, through the shortcut for v2 first bytes.
	var d ServerDecoder
	var req wire.Request
	if err := d.DecodeRequest(hx("02020001 0000000000000001 ffffffffffffffff 776734ff34b8278465ec6051092ee57a434bb849"), &req); err != nil {
		t.Fatal(err)
	}
	if req.Protocol != wire.ProtocolV2 || !req.Read.HasMasterKey || req.Read.EntryID != -1 {
		t.Fatalf("got %+v", req)
	}
}

func TestEncodeResponse(t *testing.T) {
	v2Resp := &wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpAddEntry},
		Has: wire.BodyAdd, Add: wire.AddResponse{LedgerID: 1, EntryID: 0}}
	got, err := EncodeResponse([]byte("x"), v2Resp)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]byte("x"), hx("00000018 02010000 00000000 0000000000000001 0000000000000000")...); !bytes.Equal(got, want) {
		t.Fatalf("v2:\n got %x\nwant %x", got, want)
	}

	// The spec's v3 AUTH reply (§4).
	v3Resp := &wire.Response{Protocol: wire.ProtocolV3, Header: wire.Header{Version: 3, Op: wire.OpAuth, TxnID: 1},
		Has: wire.BodyAuth, Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}}
	got, err = EncodeResponse(nil, v3Resp)
	if err != nil {
		t.Fatal(err)
	}
	if want := hx("00000023 0a06080310051801 1000 b20616 0a124175746844697361626c6564506c7567696e 1200"); !bytes.Equal(got, want) {
		t.Fatalf("v3:\n got %x\nwant %x", got, want)
	}

	for _, bad := range []*wire.Response{
		{Header: wire.Header{Version: 2, Op: wire.OpAddEntry}}, // no protocol
		{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpReadLAC}},
		{Protocol: wire.ProtocolV3, Header: wire.Header{Version: 3, Op: wire.OpBatchReadEntry}, Has: wire.BodyBatchRead},
	} {
		got, err := EncodeResponse([]byte("keep"), bad)
		if err == nil || string(got) != "keep" {
			t.Errorf("%+v: %q, %v; want an error and dst unchanged", bad, got, err)
		}
	}
	if _, err := EncodeResponse(nil, &wire.Response{}); !errors.Is(err, ErrProtocol) {
		t.Errorf("unset protocol: %v", err)
	}
}

// TestClientServerExchange drives both ends through frames, for each client
// configuration.
func TestClientServerExchange(t *testing.T) {
	for _, c := range []struct {
		name  string
		proto wire.Protocol
		tls   bool
		reqs  []*wire.Request
	}{
		{"v3", wire.ProtocolV3, false, []*wire.Request{v3Add(1, 5, 0), v3Read(2)}},
		{"v3 with START_TLS", wire.ProtocolV3, true, []*wire.Request{startTLS, v3Add(2, 5, 0)}},
		{"v2", wire.ProtocolV2, false, []*wire.Request{v2Add(5, 0), v2Read(), v2Add(5, 1)}},
		{"v2 with START_TLS", wire.ProtocolV2, true, []*wire.Request{startTLS, v2Add(5, 0), v2Read()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, err := NewClientCodec(c.proto, c.tls)
			if err != nil {
				t.Fatal(err)
			}
			var stream []byte
			for _, r := range c.reqs {
				if stream, err = client.EncodeRequest(stream, r); err != nil {
					t.Fatalf("EncodeRequest %v: %v", r.Header.Op, err)
				}
			}
			// The bookie side: decode each frame, answer in kind.
			var server ServerDecoder
			fr := wire.NewFrameReader(bytes.NewReader(stream))
			var replies []byte
			for i := 0; ; i++ {
				p, err := fr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var req wire.Request
				if err := server.DecodeRequest(p, &req); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				wantProto := c.proto
				if req.Header.Op == wire.OpStartTLS {
					wantProto = wire.ProtocolV3
				}
				if req.Protocol != wantProto {
					t.Fatalf("request %d (%v) decoded as %v", i, req.Header.Op, req.Protocol)
				}
				if replies, err = EncodeResponse(replies, answer(&req)); err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
			}
			fr = wire.NewFrameReader(bytes.NewReader(replies))
			for i, r := range c.reqs {
				p, err := fr.Next()
				if err != nil {
					t.Fatal(err)
				}
				var resp wire.Response
				if err := client.DecodeResponse(p, &resp); err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				if resp.Header.Op != r.Header.Op || resp.Status != wire.StatusOK {
					t.Fatalf("response %d: %+v", i, resp)
				}
			}
		})
	}
}

// answer is a bookie that says EOK to everything, in the request's format.
func answer(req *wire.Request) *wire.Response {
	resp := &wire.Response{Protocol: req.Protocol, Header: req.Header}
	resp.Header.Priority, resp.Header.HasPriority = 0, false
	switch req.Header.Op {
	case wire.OpAddEntry:
		resp.Has = wire.BodyAdd
		resp.Add = wire.AddResponse{LedgerID: req.Add.LedgerID, EntryID: req.Add.EntryID}
	case wire.OpReadEntry:
		resp.Has = wire.BodyRead
		resp.Read = wire.ReadResponse{LedgerID: req.Read.LedgerID, EntryID: req.Read.EntryID, Body: []byte("entry"), HasBody: true}
	case wire.OpStartTLS:
		resp.Has = wire.BodyStartTLS
	}
	return resp
}

func TestClientV2WithTLSFallsBackOnV2Reply(t *testing.T) {
	// A v2 TLS client whose first reply is already v2 (no START_TLS answer)
	// reads it as v2 and stays v2.
	client, err := NewClientCodec(wire.ProtocolV2, true)
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.Response
	if err := client.DecodeResponse(hx("02010000 00000000 0000000000000001 0000000000000000"), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Protocol != wire.ProtocolV2 {
		t.Fatalf("decoded as %v", resp.Protocol)
	}
	v3Reply, err := v3.AppendResponse(nil, &wire.Response{Header: wire.Header{Version: 3, Op: wire.OpStartTLS, TxnID: 1}, Has: wire.BodyStartTLS})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.DecodeResponse(v3Reply, &resp); err == nil {
		t.Fatal("a v3 reply after the v3 phase decoded")
	}
}

func TestClientRefuses(t *testing.T) {
	if _, err := NewClientCodec(0, false); !errors.Is(err, ErrProtocol) {
		t.Fatalf("protocol 0: %v", err)
	}
	noTLS, _ := NewClientCodec(wire.ProtocolV2, false)
	if got, err := noTLS.EncodeRequest([]byte("keep"), startTLS); !errors.Is(err, ErrProtocol) || string(got) != "keep" {
		t.Fatalf("START_TLS without TLS: %q, %v", got, err)
	}
	writeLAC := &wire.Request{Header: wire.Header{Version: 2, Op: wire.OpWriteLAC}, Has: wire.BodyWriteLAC}
	if _, err := noTLS.EncodeRequest(nil, writeLAC); !errors.Is(err, v2.ErrUnencodable) {
		t.Fatalf("WRITE_LAC on v2: %v", err)
	}
	// A v3 client never reads v2.
	v3c, _ := NewClientCodec(wire.ProtocolV3, false)
	var resp wire.Response
	if err := v3c.DecodeResponse(hx("02010000 00000000 0000000000000001 0000000000000000"), &resp); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("v2 reply to a v3 client: %v", err)
	}
}
