package v2

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// hx decodes hex written with spaces between groups.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// payloadOf checks a golden frame's length prefix and returns its payload.
func payloadOf(t testing.TB, frame []byte) []byte {
	t.Helper()
	n, err := wire.PayloadLen(frame, wire.MaxFrameSize)
	if err != nil {
		t.Fatalf("golden frame: %v", err)
	}
	if n != len(frame)-4 {
		t.Fatalf("golden frame: prefix says %d bytes, %d follow", n, len(frame)-4)
	}
	return frame[4:]
}

// Values shared by the vectors.
const (
	// key is the spec's example master key.
	keyHex = "776734ff34b8278465ec6051092ee57a434bb849"
	// bodyHex is an entry body of ledger 1, entry 0 (LAC -1, length 5, DUMMY
	// digest, payload "hello"): the codec only reads its first 16 bytes.
	bodyHex = "0000000000000001 0000000000000000 ffffffffffffffff 0000000000000005 68656c6c6f"
	// body73Hex: ledger 7, entry 3 (LAC 2), same payload.
	body73Hex = "0000000000000007 0000000000000003 0000000000000002 0000000000000005 68656c6c6f"
)

var key = hx(keyHex)

type requestVector struct {
	name  string
	frame string
	want  wire.Request
}

func requestVectors() []requestVector {
	v2 := func(op wire.Op) wire.Header { return wire.Header{Version: 2, Op: op} }
	withPrio := func(h wire.Header) wire.Header { h.Priority = wire.HighPriority; return h }
	withVersion := func(h wire.Header, v int32) wire.Header { h.Version = v; return h }
	return []requestVector{
		{
			name:  "add",
			frame: "0000003d 02010000 " + keyHex + " " + bodyHex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpAddEntry), Has: wire.BodyAdd,
				Add: wire.AddRequest{LedgerID: 1, EntryID: 0, MasterKey: key, Body: hx(bodyHex)}},
		},
		{
			name:  "recovery add 0x0006",
			frame: "0000003d 02010006 " + keyHex + " " + body73Hex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withPrio(v2(wire.OpAddEntry)), Has: wire.BodyAdd,
				Add: wire.AddRequest{LedgerID: 7, EntryID: 3, MasterKey: key, Body: hx(body73Hex), Flag: wire.AddFlagRecoveryAdd}},
		},
		{
			name:  "add, shortest body",
			frame: "00000028 02010000 " + keyHex + " 0000000000000001 0000000000000000",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpAddEntry), Has: wire.BodyAdd,
				Add: wire.AddRequest{LedgerID: 1, MasterKey: key, Body: hx("0000000000000001 0000000000000000")}},
		},
		{
			name:  "read",
			frame: "00000014 02020000 0000000000000001 0000000000000005",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpReadEntry), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: 5}},
		},
		{
			name:  "read last entry",
			frame: "00000014 02020000 000000000000002a ffffffffffffffff",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpReadEntry), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 42, EntryID: wire.LastAddConfirmed}},
		},
		{
			// spec §3.3, verbatim.
			name:  "fencing LAC read 0x0001",
			frame: "00000028 02020001 0000000000000001 ffffffffffffffff 776734ff34b8278465ec6051092ee57a434bb849",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpReadEntry), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, Flag: wire.ReadFlagFenceLedger, MasterKey: key, HasMasterKey: true}},
		},
		{
			name:  "recovery read 0x0005",
			frame: "00000028 02020005 0000000000000001 0000000000000003 " + keyHex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withPrio(v2(wire.OpReadEntry)), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: 3, Flag: wire.ReadFlagFenceLedger, MasterKey: key, HasMasterKey: true}},
		},
		{
			name:  "high-priority read 0x0004",
			frame: "00000014 02020004 0000000000000001 0000000000000003",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withPrio(v2(wire.OpReadEntry)), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: 3}},
		},
		{
			name:  "batch read",
			frame: "00000028 02070000 0000000000000001 0000000000000000 0000000000000009 0000000a 0000000000100000",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry, TxnID: 9},
				Has: wire.BodyBatchRead, BatchRead: wire.BatchReadRequest{LedgerID: 1, StartEntryID: 0, MaxCount: 10, MaxSize: 1 << 20}},
		},
		{
			name:  "batch read, fencing, high priority",
			frame: "0000003c 02070005 0000000000000001 0000000000000004 ffffffffffffffff ffffffff 0000000000500000 " + keyHex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry, TxnID: 1<<64 - 1, Priority: wire.HighPriority},
				Has: wire.BodyBatchRead, BatchRead: wire.BatchReadRequest{LedgerID: 1, StartEntryID: 4, MaxCount: -1, MaxSize: 5 << 20, MasterKey: key, Fence: true}},
		},
		{
			name:  "auth, AuthDisabledPlugin",
			frame: "0000001a 02030000 0a12 4175746844697361626c6564506c7567696e 1200",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpAuth), Has: wire.BodyAuth,
				Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}},
		},
		{
			name:  "auth, SASL token",
			frame: "0000000f 02030000 0a0453415346 1203010203",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: v2(wire.OpAuth), Has: wire.BodyAuth,
				Auth: wire.AuthMessage{PluginName: "SASF", Payload: []byte{1, 2, 3}}},
		},
		{
			name:  "legacy version 0 add",
			frame: "0000003d 00000001 " + keyHex + " " + bodyHex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withVersion(v2(wire.OpAddEntry), 0), Has: wire.BodyAdd,
				Add: wire.AddRequest{LedgerID: 1, MasterKey: key, Body: hx(bodyHex)}},
		},
		{
			name:  "legacy version 0 read",
			frame: "00000014 00000002 0000000000000001 0000000000000005",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withVersion(v2(wire.OpReadEntry), 0), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: 5}},
		},
		{
			// Version 1 fence reads carry no key; the bookie answers EUA.
			name:  "version 1 fencing read",
			frame: "00000014 01020001 0000000000000001 ffffffffffffffff",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withVersion(v2(wire.OpReadEntry), 1), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, Flag: wire.ReadFlagFenceLedger}},
		},
		{
			// Unsupported versions decode by the version-2 layout.
			name:  "version 3 fencing read",
			frame: "00000028 03020001 0000000000000001 ffffffffffffffff " + keyHex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withVersion(v2(wire.OpReadEntry), 3), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, Flag: wire.ReadFlagFenceLedger, MasterKey: key, HasMasterKey: true}},
		},
		{
			name:  "version 255 add",
			frame: "0000003d ff010000 " + keyHex + " " + bodyHex,
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withVersion(v2(wire.OpAddEntry), 255), Has: wire.BodyAdd,
				Add: wire.AddRequest{LedgerID: 1, MasterKey: key, Body: hx(bodyHex)}},
		},
		{
			// Java reads the version as a signed byte: 0x80 is -128 < 2, no key.
			name:  "version 128 fencing read",
			frame: "00000014 80020001 0000000000000001 ffffffffffffffff",
			want: wire.Request{Protocol: wire.ProtocolV2, Header: withVersion(v2(wire.OpReadEntry), 128), Has: wire.BodyRead,
				Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, Flag: wire.ReadFlagFenceLedger}},
		},
	}
}

type responseVector struct {
	name  string
	frame string
	want  wire.Response
}

func responseVectors() []responseVector {
	h := func(op wire.Op) wire.Header { return wire.Header{Version: 2, Op: op} }
	return []responseVector{
		{
			// spec §3.2, verbatim.
			name:  "add EOK",
			frame: "00000018 02010000 00000000 0000000000000001 0000000000000000",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: h(wire.OpAddEntry), Has: wire.BodyAdd,
				Add: wire.AddResponse{LedgerID: 1, EntryID: 0}},
		},
		{
			name:  "add EFENCED",
			frame: "00000018 02010000 00000068 0000000000000007 0000000000000003",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: h(wire.OpAddEntry), Status: wire.StatusFenced, Has: wire.BodyAdd,
				Add: wire.AddResponse{Status: wire.StatusFenced, LedgerID: 7, EntryID: 3}},
		},
		{
			name:  "read EOK",
			frame: "0000001d 02020000 00000000 0000000000000001 0000000000000000 68656c6c6f",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: h(wire.OpReadEntry), Has: wire.BodyRead,
				Read: wire.ReadResponse{LedgerID: 1, EntryID: 0, Body: []byte("hello"), HasBody: true}},
		},
		{
			// A LAC read's answer echoes entry -1; the body holds the entry.
			name:  "read EOK of entry -1",
			frame: "0000003d 02020000 00000000 0000000000000001 ffffffffffffffff " + bodyHex,
			want: wire.Response{Protocol: wire.ProtocolV2, Header: h(wire.OpReadEntry), Has: wire.BodyRead,
				Read: wire.ReadResponse{LedgerID: 1, EntryID: -1, Body: hx(bodyHex), HasBody: true}},
		},
		{
			name:  "read ENOENTRY",
			frame: "00000018 02020000 00000002 0000000000000001 0000000000000009",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: h(wire.OpReadEntry), Status: wire.StatusNoEntry, Has: wire.BodyRead,
				Read: wire.ReadResponse{Status: wire.StatusNoEntry, LedgerID: 1, EntryID: 9}},
		},
		{
			name:  "read EUA to version 1",
			frame: "00000018 01020000 00000066 0000000000000001 ffffffffffffffff",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 1, Op: wire.OpReadEntry}, Status: wire.StatusUnauthorized, Has: wire.BodyRead,
				Read: wire.ReadResponse{Status: wire.StatusUnauthorized, LedgerID: 1, EntryID: -1}},
		},
		{
			name:  "read EBADVERSION echoing version 3",
			frame: "00000018 03020000 00000067 0000000000000001 0000000000000000",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 3, Op: wire.OpReadEntry}, Status: wire.StatusBadVersion, Has: wire.BodyRead,
				Read: wire.ReadResponse{Status: wire.StatusBadVersion, LedgerID: 1}},
		},
		{
			name:  "legacy version 0 add EOK",
			frame: "00000018 00000001 00000000 0000000000000001 0000000000000000",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Op: wire.OpAddEntry}, Has: wire.BodyAdd,
				Add: wire.AddResponse{LedgerID: 1}},
		},
		{
			// spec §1 and §4, verbatim.
			name:  "auth reply",
			frame: "0000001a 02030000 0a12 4175746844697361626c6564506c7567696e 1200",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: h(wire.OpAuth), Has: wire.BodyAuth,
				Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}},
		},
		{
			name:  "batch read EOK, 2 entries",
			frame: "0000002d 02070000 00000000 0000000000000001 0000000000000004 0000000000000009 00000003 616263 00000002 6465",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry, TxnID: 9}, Has: wire.BodyBatchRead,
				BatchRead: wire.BatchReadResponse{LedgerID: 1, StartEntryID: 4, Entries: [][]byte{[]byte("abc"), []byte("de")}}},
		},
		{
			name:  "batch read EOK, empty entry",
			frame: "00000024 02070000 00000000 0000000000000001 0000000000000004 0000000000000009 00000000",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry, TxnID: 9}, Has: wire.BodyBatchRead,
				BatchRead: wire.BatchReadResponse{LedgerID: 1, StartEntryID: 4, Entries: [][]byte{{}}}},
		},
		{
			name:  "batch read ENOLEDGER",
			frame: "00000020 02070000 00000001 0000000000000001 0000000000000000 0000000000000002",
			want: wire.Response{Protocol: wire.ProtocolV2, Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry, TxnID: 2}, Status: wire.StatusNoLedger, Has: wire.BodyBatchRead,
				BatchRead: wire.BatchReadResponse{Status: wire.StatusNoLedger, LedgerID: 1}},
		},
	}
}

func TestRequestGolden(t *testing.T) {
	for _, v := range requestVectors() {
		t.Run(v.name, func(t *testing.T) {
			frame := hx(v.frame)
			var got wire.Request
			if err := DecodeRequest(payloadOf(t, frame), &got); err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !reflect.DeepEqual(got, v.want) {
				t.Fatalf("DecodeRequest:\n got %+v\nwant %+v", got, v.want)
			}
			enc, off := wire.BeginFrame(nil)
			enc, err := AppendRequest(enc, &v.want)
			if err != nil {
				t.Fatalf("AppendRequest: %v", err)
			}
			if enc, err = wire.EndFrame(enc, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, frame) {
				t.Fatalf("AppendRequest:\n got %x\nwant %x", enc, frame)
			}
		})
	}
}

func TestResponseGolden(t *testing.T) {
	for _, v := range responseVectors() {
		t.Run(v.name, func(t *testing.T) {
			frame := hx(v.frame)
			var got wire.Response
			if err := DecodeResponse(payloadOf(t, frame), &got); err != nil {
				t.Fatalf("DecodeResponse: %v", err)
			}
			if !reflect.DeepEqual(got, v.want) {
				t.Fatalf("DecodeResponse:\n got %+v\nwant %+v", got, v.want)
			}
			enc, off := wire.BeginFrame(nil)
			enc, err := AppendResponse(enc, &v.want)
			if err != nil {
				t.Fatalf("AppendResponse: %v", err)
			}
			if enc, err = wire.EndFrame(enc, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, frame) {
				t.Fatalf("AppendResponse:\n got %x\nwant %x", enc, frame)
			}
		})
	}
}

// TestResponseStatusCodes pins the rc of every status in ADD, READ and
// BATCH_READ responses, and EUNKNOWNLEDGERSTATE going out as EIO.
func TestResponseStatusCodes(t *testing.T) {
	cases := []struct {
		status wire.Status
		rc     string
	}{
		{wire.StatusOK, "00000000"},
		{wire.StatusNoLedger, "00000001"},
		{wire.StatusNoEntry, "00000002"},
		{wire.StatusBadRequest, "00000064"},
		{wire.StatusIOError, "00000065"},
		{wire.StatusUnauthorized, "00000066"},
		{wire.StatusBadVersion, "00000067"},
		{wire.StatusFenced, "00000068"},
		{wire.StatusReadOnly, "00000069"},
		{wire.StatusTooManyRequests, "0000006a"},
		{wire.StatusUnknownLedgerState, "00000065"}, // 107 → 101: Java v2 clients do not know 107
	}
	ids := "0000000000000001 0000000000000002"
	for _, c := range cases {
		t.Run(c.status.String(), func(t *testing.T) {
			for _, r := range []struct {
				name string
				resp wire.Response
				want string
			}{
				{"add", wire.Response{Header: wire.Header{Version: 2, Op: wire.OpAddEntry}, Status: c.status,
					Add: wire.AddResponse{Status: c.status, LedgerID: 1, EntryID: 2}}, "02010000 " + c.rc + ids},
				// The sub-response alone may carry the status.
				{"add, sub-status only", wire.Response{Header: wire.Header{Version: 2, Op: wire.OpAddEntry},
					Add: wire.AddResponse{Status: c.status, LedgerID: 1, EntryID: 2}}, "02010000 " + c.rc + ids},
				{"read", wire.Response{Header: wire.Header{Version: 2, Op: wire.OpReadEntry}, Status: c.status,
					Read: wire.ReadResponse{Status: c.status, LedgerID: 1, EntryID: 2, Body: []byte("x"), HasBody: true}},
					"02020000 " + c.rc + ids + map[bool]string{true: "78", false: ""}[c.status == wire.StatusOK]},
				{"batch read", wire.Response{Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry, TxnID: 3}, Status: c.status,
					BatchRead: wire.BatchReadResponse{Status: c.status, LedgerID: 1, StartEntryID: 2}}, "02070000 " + c.rc + ids + "0000000000000003"},
			} {
				got, err := AppendResponse(nil, &r.resp)
				if err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				if want := hx(r.want); !bytes.Equal(got, want) {
					t.Fatalf("%s:\n got %x\nwant %x", r.name, got, want)
				}
				var back wire.Response
				if err := DecodeResponse(got, &back); err != nil {
					t.Fatalf("%s: decode: %v", r.name, err)
				}
				want := c.status
				if want == wire.StatusUnknownLedgerState {
					want = wire.StatusIOError
				}
				if back.Status != want {
					t.Fatalf("%s: decoded status %v, want %v", r.name, back.Status, want)
				}
			}
		})
	}
	// 107 itself decodes (a Folio client understands it; Java's would not).
	var resp wire.Response
	if err := DecodeResponse(hx("02010000 0000006b"+ids), &resp); err != nil || resp.Status != wire.StatusUnknownLedgerState {
		t.Fatalf("rc 107: %v, %v", resp.Status, err)
	}
}

func TestDecodeResponseUnknownRC(t *testing.T) {
	for _, rc := range []uint32{3, 99, 108, 200, 402, 0x7fffffff, 0xffffffff} {
		for _, op := range []string{"02010000", "02020000", "02070000"} {
			p := hx(fmt.Sprintf("%s %08x 0000000000000001 0000000000000002 0000000000000003", op, rc))
			var resp wire.Response
			err := DecodeResponse(p, &resp)
			if !errors.Is(err, wire.ErrMalformed) {
				t.Errorf("op %s rc %d: err %v, want ErrMalformed", op, rc, err)
			}
		}
	}
}

func TestUnknownOpcodes(t *testing.T) {
	long := strings.Repeat("00", 80)
	for _, opcode := range []int{0, 4, 5, 6, 8, 9, 127, 128, 255} {
		for _, version := range []int{0, 1, 2, 3} {
			var h uint32
			if version == 0 {
				h = uint32(opcode)
			} else {
				h = uint32(version)<<24 | uint32(opcode)<<16
			}
			p := hx(fmt.Sprintf("%08x", h) + long)
			var req wire.Request
			if err := DecodeRequest(p, &req); !errors.Is(err, wire.ErrUnknownOp) {
				t.Errorf("request version %d opcode %d: err %v, want ErrUnknownOp", version, opcode, err)
			}
			var resp wire.Response
			if err := DecodeResponse(p, &resp); !errors.Is(err, wire.ErrUnknownOp) {
				t.Errorf("response version %d opcode %d: err %v, want ErrUnknownOp", version, opcode, err)
			}
		}
	}
}

// TestLegacyHeader: a version-0 header's opcode is its low byte; the bits
// between are ignored, as Java's PacketHeader does.
func TestLegacyHeader(t *testing.T) {
	var req wire.Request
	if err := DecodeRequest(hx("00ff0f02 0000000000000001 0000000000000002"), &req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Version != 0 || req.Header.Op != wire.OpReadEntry || req.Read.Flag != wire.ReadFlagNone || req.Header.Priority != 0 {
		t.Fatalf("got %+v", req)
	}
	// And the encoder refuses flags it cannot write.
	req.Read.Flag = wire.ReadFlagFenceLedger
	req.Read.MasterKey = key
	if _, err := AppendRequest(nil, &req); !errors.Is(err, ErrUnencodable) {
		t.Fatalf("version-0 fencing read encoded: %v", err)
	}
}

func TestSupportedVersion(t *testing.T) {
	for v, want := range map[int32]bool{-1: false, 0: true, 1: true, 2: true, 3: false, 128: false, 255: false} {
		if SupportedVersion(v) != want {
			t.Errorf("SupportedVersion(%d) = %v", v, !want)
		}
	}
}

// TestTruncated cuts every golden frame at every length: each prefix either
// fails with a specific error or is a valid message in its own right (a
// READ's key-less prefix is not, since its flags demand a key; ADD and
// trailing-body messages may be).
func TestTruncated(t *testing.T) {
	for _, v := range requestVectors() {
		p := payloadOf(t, hx(v.frame))
		for n := 0; n < len(p); n++ {
			var req wire.Request
			err := DecodeRequest(p[:n], &req)
			if err == nil {
				// Only an ADD with a longer-than-minimal body, or the read
				// prefix of nothing, may still decode.
				if v.want.Header.Op != wire.OpAddEntry || n < addMinSize {
					t.Errorf("%s cut at %d decoded: %+v", v.name, n, req)
				}
				continue
			}
			if !errors.Is(err, wire.ErrTruncated) && !errors.Is(err, wire.ErrMissingField) {
				t.Errorf("%s cut at %d: %v, want ErrTruncated or ErrMissingField", v.name, n, err)
			}
		}
	}
	for _, v := range responseVectors() {
		p := payloadOf(t, hx(v.frame))
		for n := 0; n < len(p); n++ {
			var resp wire.Response
			err := DecodeResponse(p[:n], &resp)
			if err == nil {
				// READ bodies and whole BATCH_READ entries may end anywhere.
				op := v.want.Header.Op
				if !(op == wire.OpReadEntry && n >= readResponseSize) && !(op == wire.OpBatchReadEntry && n >= batchReadResponseMin) {
					t.Errorf("%s cut at %d decoded: %+v", v.name, n, resp)
				}
				continue
			}
			if !errors.Is(err, wire.ErrTruncated) && !errors.Is(err, wire.ErrMissingField) {
				t.Errorf("%s cut at %d: %v, want ErrTruncated or ErrMissingField", v.name, n, err)
			}
		}
	}
}

func TestShortAdd(t *testing.T) {
	// Java throws on an ADD whose body lacks ledgerId and entryId: any
	// payload under 40 bytes (frame under 44), e.g. every "ADD under 36".
	for n := 0; n < addMinSize; n++ {
		p := make([]byte, n)
		if n >= 4 {
			copy(p, hx("02010000"))
		}
		var req wire.Request
		if err := DecodeRequest(p, &req); !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("ADD of %d bytes: %v", n, err)
		}
	}
}

func TestShortKeys(t *testing.T) {
	for _, c := range []struct {
		name, payload string
	}{
		{"fencing read, no key", "02020001 0000000000000001 ffffffffffffffff"},
		{"fencing read, 19 key bytes", "02020001 0000000000000001 ffffffffffffffff " + keyHex[:38]},
		{"recovery read, 1 key byte", "02020005 0000000000000001 0000000000000000 77"},
		{"fencing batch read, no key", "02070001 0000000000000001 0000000000000000 0000000000000001 00000001 0000000000000400"},
		{"fencing batch read, 10 key bytes", "02070001 0000000000000001 0000000000000000 0000000000000001 00000001 0000000000000400 " + keyHex[:20]},
	} {
		var req wire.Request
		if err := DecodeRequest(hx(c.payload), &req); !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("%s: %v, want ErrTruncated", c.name, err)
		}
	}
}

// TestTrailingBytesIgnored: Java ignores bytes after a READ or BATCH_READ
// (and after an ADD response); so does the decoder.
func TestTrailingBytesIgnored(t *testing.T) {
	for _, c := range []struct{ name, payload, extra string }{
		{"read", "02020000 0000000000000001 0000000000000005", "deadbeef"},
		{"fencing read", "02020001 0000000000000001 ffffffffffffffff " + keyHex, "00"},
		{"version 1 fencing read", "01020001 0000000000000001 ffffffffffffffff", keyHex},
		{"batch read", "02070000 0000000000000001 0000000000000000 0000000000000009 0000000a 0000000000100000", "0102"},
	} {
		var a, b wire.Request
		if err := DecodeRequest(hx(c.payload), &a); err != nil {
			t.Fatal(err)
		}
		if err := DecodeRequest(hx(c.payload+c.extra), &b); err != nil {
			t.Fatalf("%s with trailing bytes: %v", c.name, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: trailing bytes changed the request:\n%+v\n%+v", c.name, a, b)
		}
	}
	var resp wire.Response
	if err := DecodeResponse(hx("02010000 00000000 0000000000000001 0000000000000000 ff"), &resp); err != nil {
		t.Fatal(err)
	}
}

func TestBadBatchEntries(t *testing.T) {
	head := "02070000 00000000 0000000000000001 0000000000000004 0000000000000009 "
	for _, tail := range []string{"00", "000000", "00000001", "00000003 6162", "ffffffff 61", "80000000", "00000001 61 0000"} {
		var resp wire.Response
		if err := DecodeResponse(hx(head+tail), &resp); !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("tail %q: %v, want ErrTruncated", tail, err)
		}
	}
}

func TestBadAuth(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		want      error
	}{
		{"empty", "", wire.ErrMissingField},
		{"no payload", "0a0141", wire.ErrMissingField},
		{"no name", "1200", wire.ErrMissingField},
		{"field 0", "0000", wire.ErrBadEncoding},
		{"name runs past end", "0a05414243", wire.ErrTruncated},
		{"bad varint", "0a ffffffffffffffffffff01", wire.ErrBadEncoding},
		{"stray end group", "0a0141 1200 0c", wire.ErrBadEncoding},
	} {
		for _, dir := range []string{"request", "response"} {
			p := hx("02030000 " + c.msg)
			var err error
			if dir == "request" {
				err = DecodeRequest(p, new(wire.Request))
			} else {
				err = DecodeResponse(p, new(wire.Response))
			}
			if !errors.Is(err, c.want) {
				t.Errorf("%s %s: %v, want %v", dir, c.name, err, c.want)
			}
		}
	}
	// Unknown fields are skipped and the last occurrence wins, as in Java.
	var req wire.Request
	if err := DecodeRequest(hx("02030000 0a0141 1801 1200 0a0142 120143 2a00"), &req); err != nil {
		t.Fatal(err)
	}
	if req.Auth.PluginName != "B" || !bytes.Equal(req.Auth.Payload, []byte("C")) {
		t.Fatalf("got %+v", req.Auth)
	}
}

func TestAppendRequestRefuses(t *testing.T) {
	add := func(f func(*wire.Request)) *wire.Request {
		r := &wire.Request{Header: wire.Header{Version: 2, Op: wire.OpAddEntry},
			Add: wire.AddRequest{LedgerID: 1, EntryID: 0, MasterKey: key, Body: hx(bodyHex)}}
		f(r)
		return r
	}
	for _, c := range []struct {
		name string
		req  *wire.Request
	}{
		{"write lac", &wire.Request{Header: wire.Header{Version: 2, Op: wire.OpWriteLAC}}},
		{"start tls", &wire.Request{Header: wire.Header{Version: 2, Op: wire.OpStartTLS}}},
		{"add, short key", add(func(r *wire.Request) { r.Add.MasterKey = key[:19] })},
		{"add, no key", add(func(r *wire.Request) { r.Add.MasterKey = nil })},
		{"add, short body", add(func(r *wire.Request) { r.Add.Body = r.Add.Body[:15] })},
		{"add, ids disagree with body", add(func(r *wire.Request) { r.Add.EntryID = 1 })},
		{"add, deferred sync", add(func(r *wire.Request) { r.Add.WriteFlags = wire.WriteFlagDeferredSync })},
		{"add, version 256", add(func(r *wire.Request) { r.Header.Version = 256 })},
		{"add, version -1", add(func(r *wire.Request) { r.Header.Version = -1 })},
		{"fencing read without key", &wire.Request{Header: wire.Header{Version: 2, Op: wire.OpReadEntry},
			Read: wire.ReadRequest{Flag: wire.ReadFlagFenceLedger}}},
		{"fencing batch read with short key", &wire.Request{Header: wire.Header{Version: 2, Op: wire.OpBatchReadEntry},
			BatchRead: wire.BatchReadRequest{Fence: true, MasterKey: key[:3]}}},
	} {
		if _, err := AppendRequest(nil, c.req); !errors.Is(err, ErrUnencodable) {
			t.Errorf("%s: %v, want ErrUnencodable", c.name, err)
		}
	}
}

func TestAppendResponseRefuses(t *testing.T) {
	for _, op := range []wire.Op{0, wire.OpWriteLAC, wire.OpReadLAC, wire.OpStartTLS, wire.OpGetListOfEntriesOfLedger} {
		if _, err := AppendResponse(nil, &wire.Response{Header: wire.Header{Version: 2, Op: op}}); !errors.Is(err, ErrUnencodable) {
			t.Errorf("op %v: %v, want ErrUnencodable", op, err)
		}
	}
}

// TestLongPollDropped: v2 has no long poll; the encoder sends a plain READ,
// as Java's v2 client does.
func TestLongPollDropped(t *testing.T) {
	req := wire.Request{Header: wire.Header{Version: 2, Op: wire.OpReadEntry},
		Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, PreviousLAC: 4, HasPreviousLAC: true, TimeoutMs: 1000, HasTimeout: true, Flag: wire.ReadFlagEntryPiggyback}}
	got, err := AppendRequest(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	if want := hx("02020000 0000000000000001 ffffffffffffffff"); !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
}

// TestDecodeOverwrites: decoding into a used value leaves nothing of the
// previous message.
func TestDecodeOverwrites(t *testing.T) {
	vs := requestVectors()
	var req wire.Request
	for i := range vs {
		for _, j := range []int{i, (i + 1) % len(vs)} {
			if err := DecodeRequest(payloadOf(t, hx(vs[j].frame)), &req); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(req, vs[j].want) {
				t.Fatalf("%s after %s: got %+v", vs[j].name, vs[i].name, req)
			}
		}
	}
}

// TestAliasing: keys and bodies alias the payload, and Decode allocates
// nothing for ADD and READ.
func TestAliasing(t *testing.T) {
	p := payloadOf(t, hx(requestVectors()[0].frame))
	var req wire.Request
	if err := DecodeRequest(p, &req); err != nil {
		t.Fatal(err)
	}
	if &req.Add.MasterKey[0] != &p[4] || &req.Add.Body[0] != &p[24] {
		t.Fatal("ADD key or body does not alias the payload")
	}
	// A decoded key cannot be appended to in place (its capacity ends with it).
	if cap(req.Add.MasterKey) != wire.MasterKeyLength {
		t.Fatalf("key capacity %d", cap(req.Add.MasterKey))
	}
}

func TestZeroAllocs(t *testing.T) {
	add := payloadOf(t, hx(requestVectors()[0].frame))
	fence := payloadOf(t, hx(requestVectors()[5].frame))
	batch := payloadOf(t, hx(requestVectors()[9].frame))
	readResp := payloadOf(t, hx(responseVectors()[2].frame))
	var req wire.Request
	var resp wire.Response
	buf := make([]byte, 0, 256)
	for name, f := range map[string]func(){
		"decode add":           func() { _ = DecodeRequest(add, &req) },
		"decode fencing read":  func() { _ = DecodeRequest(fence, &req) },
		"decode batch read":    func() { _ = DecodeRequest(batch, &req) },
		"decode read response": func() { _ = DecodeResponse(readResp, &resp) },
		"encode add": func() {
			_ = DecodeRequest(add, &req)
			buf, _ = AppendRequest(buf[:0], &req)
		},
		"encode read response": func() {
			_ = DecodeResponse(readResp, &resp)
			buf, _ = AppendResponse(buf[:0], &resp)
		},
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}
