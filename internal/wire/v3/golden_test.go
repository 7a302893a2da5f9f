package v3

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// unhex decodes a hex string written with spaces for reading.
func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// masterKey is SHA1("ledger" ‖ "password"), the master key of the spec's
// examples (spec/wire-protocol.md §2.4, §5.6).
var masterKey = unhex("776734ff34b8278465ec6051092ee57a434bb849")

// entryBody is a short stand-in for a digested entry body: the codec does not
// look inside bodies.
var entryBody = []byte("entry-body")

func hdr(op wire.Op, txn uint64) wire.Header {
	return wire.Header{Version: wire.VersionThree, Op: op, TxnID: txn}
}

func hdrPrio(op wire.Op, txn uint64) wire.Header {
	h := hdr(op, txn)
	h.Priority, h.HasPriority = wire.HighPriority, true
	return h
}

type goldenRequest struct {
	name string
	req  wire.Request
	hex  string // the payload, written with spaces between fields
}

type goldenResponse struct {
	name string
	resp wire.Response
	hex  string
}

// goldenRequests holds one or more requests of every v3 request kind. Every
// value is in decoded form (Protocol set, Has flags set for what is present),
// so decoding the bytes gives it back exactly.
var goldenRequests = []goldenRequest{
	{
		name: "read",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 1), Has: wire.BodyRead,
			Read: wire.ReadRequest{LedgerID: 1, EntryID: 0}},
		hex: "0a06 0803 1001 1801  a206 04 0801 1000",
	},
	{
		// spec/wire-protocol.md §2.4, the worked example (payload of the frame).
		name: "fence-read",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 7), Has: wire.BodyRead,
			Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, MasterKey: masterKey, HasMasterKey: true,
				Flag: wire.ReadFlagFenceLedger}},
		hex: "0a06 0803 1001 1807  a206 26 0801 10ffffffffffffffffff01 1a14 776734ff34b8278465ec6051092ee57a434bb849 a006 01",
	},
	{
		name: "long-poll-read",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 300), Has: wire.BodyRead,
			Read: wire.ReadRequest{LedgerID: 5, EntryID: -1, PreviousLAC: 9, HasPreviousLAC: true,
				TimeoutMs: 10000, HasTimeout: true, Flag: wire.ReadFlagEntryPiggyback}},
		hex: "0a07 0803 1001 18ac02  a206 15 0805 10ffffffffffffffffff01 2009 2890 4e a006 02",
	},
	{
		name: "recovery-read-priority",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdrPrio(wire.OpReadEntry, 8), Has: wire.BodyRead,
			Read: wire.ReadRequest{LedgerID: 1, EntryID: 3, MasterKey: masterKey, HasMasterKey: true,
				Flag: wire.ReadFlagFenceLedger}},
		hex: "0a08 0803 1001 1808 2064  a206 1d 0801 1003 1a14 776734ff34b8278465ec6051092ee57a434bb849 a006 01",
	},
	{
		name: "add",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 2), Has: wire.BodyAdd,
			Add: wire.AddRequest{LedgerID: 1, EntryID: 0, MasterKey: masterKey, Body: entryBody}},
		hex: "0a06 0803 1002 1802  aa06 26 0801 1000 1a14 776734ff34b8278465ec6051092ee57a434bb849 220a 656e7472792d626f6479",
	},
	{
		name: "recovery-add",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdrPrio(wire.OpAddEntry, 9), Has: wire.BodyAdd,
			Add: wire.AddRequest{LedgerID: 1, EntryID: 4, MasterKey: masterKey, Body: entryBody,
				Flag: wire.AddFlagRecoveryAdd}},
		hex: "0a08 0803 1002 1809 2064  aa06 29 0801 1004 1a14 776734ff34b8278465ec6051092ee57a434bb849 220a 656e7472792d626f6479 a006 01",
	},
	{
		name: "add-deferred-sync",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 10), Has: wire.BodyAdd,
			Add: wire.AddRequest{LedgerID: 1 << 40, EntryID: 1000, MasterKey: masterKey, Body: entryBody,
				WriteFlags: wire.WriteFlagDeferredSync, HasWriteFlags: true}},
		hex: "0a06 0803 1002 180a  aa06 2e 0880 8080 8080 2010 e807 1a14 776734ff34b8278465ec6051092ee57a434bb849 220a 656e7472792d626f6479 2801",
	},
	{
		name: "add-empty-key-and-body",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 11), Has: wire.BodyAdd,
			Add: wire.AddRequest{LedgerID: 0, EntryID: 0, MasterKey: []byte{}, Body: []byte{}}},
		hex: "0a06 0803 1002 180b  aa06 08 0800 1000 1a00 2200",
	},
	{
		name: "auth",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAuth, 0), Has: wire.BodyAuth,
			Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}},
		hex: "0a06 0803 1005 1800  b206 16 0a12 4175746844697361626c6564506c7567696e 1200",
	},
	{
		name: "write-lac",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpWriteLAC, 12), Has: wire.BodyWriteLAC,
			WriteLAC: wire.WriteLACRequest{LedgerID: 1, LAC: 41, MasterKey: masterKey, Body: []byte("lac-body")}},
		hex: "0a06 0803 1006 180c  ba06 24 0801 1029 1a14 776734ff34b8278465ec6051092ee57a434bb849 2208 6c61632d626f6479",
	},
	{
		name: "read-lac",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadLAC, 13), Has: wire.BodyReadLAC,
			ReadLACLedgerID: 1},
		hex: "0a06 0803 1007 180d  c206 02 0801",
	},
	{
		name: "get-bookie-info",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpGetBookieInfo, 14), Has: wire.BodyGetBookieInfo,
			GetBookieInfo: wire.GetBookieInfoRequest{Requested: 3, HasRequested: true}},
		hex: "0a06 0803 1008 180e  ca06 02 0803",
	},
	{
		name: "get-bookie-info-nothing-requested",
		req:  wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpGetBookieInfo, 15), Has: wire.BodyGetBookieInfo},
		hex:  "0a06 0803 1008 180f  ca06 00",
	},
	{
		name: "start-tls",
		req:  wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpStartTLS, 1), Has: wire.BodyStartTLS},
		hex:  "0a06 0803 1009 1801  d206 00",
	},
	{
		name: "force-ledger",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpForceLedger, 16), Has: wire.BodyForceLedger,
			ForceLedgerID: 1},
		hex: "0a06 0803 100a 1810  da06 02 0801",
	},
	{
		name: "get-list-of-entries",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpGetListOfEntriesOfLedger, 17),
			Has: wire.BodyGetListOfEntries, ListEntriesLedgerID: 1},
		hex: "0a06 0803 100b 1811  e206 02 0801",
	},
	{
		name: "read-with-request-context",
		req: wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 18), Has: wire.BodyRead,
			Read:    wire.ReadRequest{LedgerID: 1, EntryID: 2},
			Context: []wire.ContextPair{{Key: "k", Value: "v"}, {Key: "", Value: ""}}},
		hex: "0a06 0803 1001 1812  a206 04 0801 1002  c20c 06 0a01 6b 1201 76  c20c 04 0a00 1200",
	},
	{
		// An op without a sub-message: what a client sends for an op v3 does
		// not serve (the bookie answers EBADREQ).
		name: "batch-read-header-only",
		req:  wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpBatchReadEntry, 19)},
		hex:  "0a06 0803 100c 1813",
	},
}

// goldenResponses holds every v3 response kind, in decoded form.
var goldenResponses = []goldenResponse{
	{
		name: "read",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 1), Status: wire.StatusOK,
			Has: wire.BodyRead, Read: wire.ReadResponse{Status: wire.StatusOK, LedgerID: 1, EntryID: 0,
				Body: entryBody, HasBody: true, MaxLAC: -1, HasMaxLAC: true}},
		hex: "0a06 0803 1001 1801 1000  a206 1d 0800 1001 1800 220a 656e7472792d626f6479 28ffffffffffffffffff01",
	},
	{
		name: "read-no-entry",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 2), Status: wire.StatusNoEntry,
			Has: wire.BodyRead, Read: wire.ReadResponse{Status: wire.StatusNoEntry, LedgerID: 1, EntryID: 5}},
		hex: "0a06 0803 1001 1802 1093 03  a206 07 0893 03 1001 1805",
	},
	{
		name: "long-poll-read",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 300), Status: wire.StatusOK,
			Has: wire.BodyRead, Read: wire.ReadResponse{Status: wire.StatusOK, LedgerID: 5, EntryID: 10,
				Body: entryBody, HasBody: true, MaxLAC: 10, HasMaxLAC: true,
				LACUpdateTimestampMs: 1700000000000, HasLACUpdateTimestamp: true}},
		hex: "0a07 0803 1001 18ac02 1000  a206 1b 0800 1005 180a 220a 656e7472792d626f6479 280a 3080 d095 ffbc 31",
	},
	{
		name: "add",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 2), Status: wire.StatusOK,
			Has: wire.BodyAdd, Add: wire.AddResponse{Status: wire.StatusOK, LedgerID: 1, EntryID: 0}},
		hex: "0a06 0803 1002 1802 1000  aa06 06 0800 1001 1800",
	},
	{
		name: "add-fenced",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 3), Status: wire.StatusFenced,
			Has: wire.BodyAdd, Add: wire.AddResponse{Status: wire.StatusFenced, LedgerID: 1, EntryID: 7}},
		hex: "0a06 0803 1002 1803 10f8 03  aa06 07 08f8 03 1001 1807",
	},
	{
		// spec/wire-protocol.md §2.5 and §4: the AUTH reply with auth disabled.
		name: "auth",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAuth, 0), Status: wire.StatusOK,
			Has: wire.BodyAuth, Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}},
		hex: "0a06 0803 1005 1800 1000  b206 16 0a12 4175746844697361626c6564506c7567696e 1200",
	},
	{
		name: "write-lac",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpWriteLAC, 12), Status: wire.StatusOK,
			Has: wire.BodyWriteLAC, WriteLAC: wire.LedgerStatusResponse{Status: wire.StatusOK, LedgerID: 1}},
		hex: "0a06 0803 1006 180c 1000  ba06 04 0800 1001",
	},
	{
		name: "read-lac",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadLAC, 13), Status: wire.StatusOK,
			Has: wire.BodyReadLAC, ReadLAC: wire.ReadLACResponse{Status: wire.StatusOK, LedgerID: 1,
				LACBody: []byte("lac-body"), HasLACBody: true, LastEntryBody: entryBody, HasLastEntryBody: true}},
		hex: "0a06 0803 1007 180d 1000  c206 1a 0800 1001 1a08 6c61632d626f6479 220a 656e7472792d626f6479",
	},
	{
		name: "read-lac-empty-ledger",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadLAC, 14), Status: wire.StatusNoEntry,
			Has: wire.BodyReadLAC, ReadLAC: wire.ReadLACResponse{Status: wire.StatusNoEntry, LedgerID: 1}},
		hex: "0a06 0803 1007 180e 1093 03  c206 05 0893 03 1001",
	},
	{
		name: "get-bookie-info",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpGetBookieInfo, 14), Status: wire.StatusOK,
			Has: wire.BodyGetBookieInfo, GetBookieInfo: wire.GetBookieInfoResponse{Status: wire.StatusOK,
				TotalDiskCapacity: 1 << 40, HasTotalDiskCapacity: true, FreeDiskSpace: 1 << 39, HasFreeDiskSpace: true}},
		hex: "0a06 0803 1008 180e 1000  ca06 10 0800 1080 8080 8080 20 1880 8080 8080 10",
	},
	{
		name: "start-tls",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpStartTLS, 1), Status: wire.StatusOK,
			Has: wire.BodyStartTLS},
		hex: "0a06 0803 1009 1801 1000  d206 00",
	},
	{
		name: "force-ledger",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpForceLedger, 16), Status: wire.StatusOK,
			Has: wire.BodyForceLedger, ForceLedger: wire.LedgerStatusResponse{Status: wire.StatusOK, LedgerID: 1}},
		hex: "0a06 0803 100a 1810 1000  da06 04 0800 1001",
	},
	{
		name: "get-list-of-entries",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpGetListOfEntriesOfLedger, 17),
			Status: wire.StatusOK, Has: wire.BodyGetListOfEntries, ListEntries: wire.ListEntriesResponse{
				Status: wire.StatusOK, LedgerID: 1, Availability: []byte{0, 0, 0, 0}, HasAvail: true}},
		hex: "0a06 0803 100b 1811 1000  e206 0a 0800 1001 1a04 00000000",
	},
	{
		name: "get-list-of-entries-no-ledger",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpGetListOfEntriesOfLedger, 18),
			Status: wire.StatusNoLedger, Has: wire.BodyGetListOfEntries, ListEntries: wire.ListEntriesResponse{
				Status: wire.StatusNoLedger, LedgerID: 1}},
		hex: "0a06 0803 100b 1812 1092 03  e206 05 0892 03 1001",
	},
	{
		// Header-only error replies (§2.5): an op v3 does not serve, ...
		name: "ebadreq-batch-read",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpBatchReadEntry, 19), Status: wire.StatusBadRequest},
		hex:  "0a06 0803 100c 1813 1094 03",
	},
	{
		// ... START_TLS on a bookie without TLS ...
		name: "ebadreq-start-tls",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpStartTLS, 1), Status: wire.StatusBadRequest},
		hex:  "0a06 0803 1009 1801 1094 03",
	},
	{
		// ... an auth rejection, echoing the request header with its priority ...
		name: "eua-header-echo",
		resp: wire.Response{Protocol: wire.ProtocolV3, Header: hdrPrio(wire.OpAddEntry, 20), Status: wire.StatusUnauthorized},
		hex:  "0a08 0803 1002 1814 2064 10f6 03",
	},
	{
		// ... and a wrong protocol version, echoed.
		name: "ebadversion",
		resp: wire.Response{Protocol: wire.ProtocolV3,
			Header: wire.Header{Version: wire.VersionTwo, Op: wire.OpReadEntry, TxnID: 21}, Status: wire.StatusBadVersion},
		hex: "0a06 0802 1001 1815 10f7 03",
	},
}

func TestGoldenRequests(t *testing.T) {
	for _, g := range goldenRequests {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(g.hex)
			got, err := AppendRequest(nil, &g.req)
			if err != nil {
				t.Fatalf("AppendRequest: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("AppendRequest:\n got %x\nwant %x", got, want)
			}
			if ref := marshalPB(toPBRequest(&g.req)); !bytes.Equal(ref, want) {
				t.Errorf("proto.Marshal:\n got %x\nwant %x", ref, want)
			}
			var dec wire.Request
			if err := DecodeRequest(want, &dec); err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !reflect.DeepEqual(dec, g.req) {
				t.Errorf("DecodeRequest:\n got %+v\nwant %+v", dec, g.req)
			}
			if ref, err := oracleRequest(want); err != nil || !reflect.DeepEqual(ref, g.req) {
				t.Errorf("proto.Unmarshal: %v\n got %+v\nwant %+v", err, ref, g.req)
			}
			// Appending to a non-empty buffer leaves its prefix alone.
			pre := []byte("prefix")
			got2, _ := AppendRequest(pre, &g.req)
			if !bytes.Equal(got2, append([]byte("prefix"), want...)) {
				t.Errorf("AppendRequest after a prefix: %x", got2)
			}
		})
	}
}

func TestGoldenResponses(t *testing.T) {
	for _, g := range goldenResponses {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(g.hex)
			got, err := AppendResponse(nil, &g.resp)
			if err != nil {
				t.Fatalf("AppendResponse: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("AppendResponse:\n got %x\nwant %x", got, want)
			}
			if ref := marshalPB(toPBResponse(&g.resp)); !bytes.Equal(ref, want) {
				t.Errorf("proto.Marshal:\n got %x\nwant %x", ref, want)
			}
			var dec wire.Response
			if err := DecodeResponse(want, &dec); err != nil {
				t.Fatalf("DecodeResponse: %v", err)
			}
			if !reflect.DeepEqual(dec, g.resp) {
				t.Errorf("DecodeResponse:\n got %+v\nwant %+v", dec, g.resp)
			}
			if ref, err := oracleResponse(want); err != nil || !reflect.DeepEqual(ref, g.resp) {
				t.Errorf("proto.Unmarshal: %v\n got %+v\nwant %+v", err, ref, g.resp)
			}
		})
	}
}

// TestSpecFrames checks the spec's worked examples verbatim, framed.
func TestSpecFrames(t *testing.T) {
	t.Run("fence-read", func(t *testing.T) {
		const spec = "00000031 0a06 0803 1001 1807 a206 26 0801 10ffffffffffffffffff01 1a14 776734ff34b8278465ec6051092ee57a434bb849 a006 01"
		req := wire.Request{Header: hdr(wire.OpReadEntry, 7), Has: wire.BodyRead,
			Read: wire.ReadRequest{LedgerID: 1, EntryID: wire.LastAddConfirmed, MasterKey: masterKey,
				HasMasterKey: true, Flag: wire.ReadFlagFenceLedger}}
		payload, err := AppendRequest(nil, &req)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := wire.AppendFrame(nil, payload)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhex(spec); !bytes.Equal(frame, want) {
			t.Fatalf("frame\n got %x\nwant %x", frame, want)
		}
		fr := wire.NewFrameReader(bytes.NewReader(frame))
		p, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		var dec wire.Request
		if err := DecodeRequest(p, &dec); err != nil {
			t.Fatal(err)
		}
		req.Protocol = wire.ProtocolV3
		if !reflect.DeepEqual(dec, req) {
			t.Fatalf("decoded %+v, want %+v", dec, req)
		}
	})
	t.Run("auth-reply", func(t *testing.T) {
		const spec = "00000023 0a06080310051801 1000 b20616 0a124175746844697361626c6564506c7567696e 1200"
		// The header is the request's, echoed: txnId 1 here.
		resp := wire.Response{Header: hdr(wire.OpAuth, 1), Status: wire.StatusOK, Has: wire.BodyAuth,
			Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin"}} // nil Payload: still written
		payload, err := AppendResponse(nil, &resp)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := wire.AppendFrame(nil, payload)
		if err != nil {
			t.Fatal(err)
		}
		if want := unhex(spec); !bytes.Equal(frame, want) {
			t.Fatalf("frame\n got %x\nwant %x", frame, want)
		}
		var dec wire.Response
		if err := DecodeResponse(frame[4:], &dec); err != nil {
			t.Fatal(err)
		}
		if dec.Auth.PluginName != "AuthDisabledPlugin" || dec.Auth.Payload == nil || len(dec.Auth.Payload) != 0 {
			t.Fatalf("decoded auth %+v: want the plugin name and an empty, non-nil payload", dec.Auth)
		}
	})
}

// TestAuthMessage pins the exported AuthMessage codec the v2 AUTH packet
// reuses (spec §1: the v2 AUTH reply's payload).
func TestAuthMessage(t *testing.T) {
	want := unhex("0a12 4175746844697361626c6564506c7567696e 1200")
	got := AppendAuthMessage(nil, &wire.AuthMessage{PluginName: "AuthDisabledPlugin"})
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendAuthMessage\n got %x\nwant %x", got, want)
	}
	if ref := marshalPB(toPBAuth(&wire.AuthMessage{PluginName: "AuthDisabledPlugin"})); !bytes.Equal(ref, want) {
		t.Fatalf("proto.Marshal\n got %x\nwant %x", ref, want)
	}
	var m wire.AuthMessage
	if err := DecodeAuthMessage(want, &m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}) {
		t.Fatalf("decoded %+v", m)
	}
	other := AppendAuthMessage(nil, &wire.AuthMessage{PluginName: "SASL", Payload: []byte{1, 2, 3}})
	if err := DecodeAuthMessage(other, &m); err != nil || m.PluginName != "SASL" || !bytes.Equal(m.Payload, []byte{1, 2, 3}) {
		t.Fatalf("decoded %+v, %v", m, err)
	}
}
