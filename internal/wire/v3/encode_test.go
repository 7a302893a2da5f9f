package v3

import (
	"bytes"
	"errors"
	"flag"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/wire"
)

// TestEncodeRefuses: messages a proto2 peer would reject (or silently
// change) are not encoded, and dst comes back unchanged.
func TestEncodeRefuses(t *testing.T) {
	okReq := func() wire.Request {
		return wire.Request{Header: hdr(wire.OpReadEntry, 1), Has: wire.BodyRead, Read: wire.ReadRequest{LedgerID: 1}}
	}
	reqs := []struct {
		name   string
		mutate func(*wire.Request)
		want   error
	}{
		{"op-zero", func(r *wire.Request) { r.Header.Op = 0 }, wire.ErrMissingField},
		{"op-13", func(r *wire.Request) { r.Header.Op = 13 }, wire.ErrMissingField},
		{"version-zero", func(r *wire.Request) { r.Header.Version = 0 }, wire.ErrMissingField},
		{"version-4", func(r *wire.Request) { r.Header.Version = 4 }, wire.ErrMissingField},
		{"read-flag-3", func(r *wire.Request) { r.Read.Flag = 3 }, wire.ErrBadEncoding},
		{"add-flag-2", func(r *wire.Request) { r.Has, r.Add.Flag = wire.BodyAdd, 2 }, wire.ErrBadEncoding},
		{"batch-read-body", func(r *wire.Request) { r.Has |= wire.BodyBatchRead }, wire.ErrBadEncoding},
		{"unknown-body-bit", func(r *wire.Request) { r.Has |= 1 << 15 }, wire.ErrBadEncoding},
	}
	for _, tc := range reqs {
		r := okReq()
		tc.mutate(&r)
		dst := []byte("keep")
		got, err := AppendRequest(dst, &r)
		if !errors.Is(err, tc.want) || !bytes.Equal(got, []byte("keep")) {
			t.Errorf("request %s: %q, %v; want dst unchanged and %v", tc.name, got, err, tc.want)
		}
	}
	okResp := func() wire.Response {
		return wire.Response{Header: hdr(wire.OpReadEntry, 1), Has: wire.BodyRead}
	}
	resps := []struct {
		name   string
		mutate func(*wire.Response)
		want   error
	}{
		{"op-99", func(r *wire.Response) { r.Header.Op = 99 }, wire.ErrMissingField},
		{"status-1", func(r *wire.Response) { r.Status = 1 }, wire.ErrMissingField},
		{"read-status", func(r *wire.Response) { r.Read.Status = 999 }, wire.ErrMissingField},
		{"add-status", func(r *wire.Response) { r.Has, r.Add.Status = wire.BodyAdd, -1 }, wire.ErrMissingField},
		{"write-lac-status", func(r *wire.Response) { r.Has, r.WriteLAC.Status = wire.BodyWriteLAC, 1 }, wire.ErrMissingField},
		{"read-lac-status", func(r *wire.Response) { r.Has, r.ReadLAC.Status = wire.BodyReadLAC, 1 }, wire.ErrMissingField},
		{"bookie-info-status", func(r *wire.Response) { r.Has, r.GetBookieInfo.Status = wire.BodyGetBookieInfo, 1 }, wire.ErrMissingField},
		{"force-status", func(r *wire.Response) { r.Has, r.ForceLedger.Status = wire.BodyForceLedger, 1 }, wire.ErrMissingField},
		{"list-status", func(r *wire.Response) { r.Has, r.ListEntries.Status = wire.BodyGetListOfEntries, 1 }, wire.ErrMissingField},
		{"batch-read-body", func(r *wire.Response) { r.Has = wire.BodyBatchRead }, wire.ErrBadEncoding},
	}
	for _, tc := range resps {
		r := okResp()
		tc.mutate(&r)
		got, err := AppendResponse(nil, &r)
		if !errors.Is(err, tc.want) || got != nil {
			t.Errorf("response %s: %x, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	// A status outside the sub-message in Has does not matter: it is not sent.
	r := okResp()
	r.Add.Status = 1
	if _, err := AppendResponse(nil, &r); err != nil {
		t.Errorf("status of an absent sub-response: %v", err)
	}
}

// TestEncodePresence: an optional field set without its Has flag is still
// written, and required bytes fields are written even when nil.
func TestEncodePresence(t *testing.T) {
	r := wire.Request{Header: hdr(wire.OpReadEntry, 7), Has: wire.BodyRead,
		Read: wire.ReadRequest{LedgerID: 1, EntryID: -1, MasterKey: masterKey, Flag: wire.ReadFlagFenceLedger}}
	got, err := AppendRequest(nil, &r)
	if err != nil || !bytes.Equal(got, unhex(goldenRequests[1].hex)) {
		t.Errorf("fence read without HasMasterKey: %x, %v", got, err)
	}
	add := wire.Request{Header: hdr(wire.OpAddEntry, 11), Has: wire.BodyAdd}
	got, err = AppendRequest(nil, &add)
	if err != nil || !bytes.Equal(got, unhex("0a06 0803 1002 180b  aa06 08 0800 1000 1a00 2200")) {
		t.Errorf("add with nil key and body: %x, %v", got, err)
	}
}

var seed = flag.Int64("seed", 0, "seed of TestRandomRoundTrip (0: time-based)")

// TestRandomRoundTrip encodes random messages in decoded form: the bytes
// equal deterministic proto.Marshal and decode back to the same value.
func TestRandomRoundTrip(t *testing.T) {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	rng := rand.New(rand.NewSource(s))
	for i := 0; i < 2000; i++ {
		req := randomRequest(rng)
		b, err := AppendRequest(nil, &req)
		if err != nil {
			t.Fatalf("AppendRequest(%+v): %v", req, err)
		}
		if ref := marshalPB(toPBRequest(&req)); !bytes.Equal(b, ref) {
			t.Fatalf("%+v:\nAppendRequest %x\nproto.Marshal %x", req, b, ref)
		}
		var got wire.Request
		if err := DecodeRequest(b, &got); err != nil || !reflect.DeepEqual(got, req) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, req)
		}
		checkRequestAgainstOracle(t, b)

		resp := randomResponse(rng)
		b, err = AppendResponse(nil, &resp)
		if err != nil {
			t.Fatalf("AppendResponse(%+v): %v", resp, err)
		}
		if ref := marshalPB(toPBResponse(&resp)); !bytes.Equal(b, ref) {
			t.Fatalf("%+v:\nAppendResponse %x\nproto.Marshal  %x", resp, b, ref)
		}
		var gotResp wire.Response
		if err := DecodeResponse(b, &gotResp); err != nil || !reflect.DeepEqual(gotResp, resp) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, gotResp, resp)
		}
		checkResponseAgainstOracle(t, b)
	}
}

func randInt64(rng *rand.Rand) int64 {
	switch rng.Intn(4) {
	case 0:
		return 0
	case 1:
		return -1
	case 2:
		return int64(rng.Intn(1000))
	}
	return int64(rng.Uint64())
}

// randOpt returns a value and its presence flag, consistent as decoded
// messages are (absent means zero).
func randOpt(rng *rand.Rand) (int64, bool) {
	if rng.Intn(2) == 0 {
		return 0, false
	}
	return randInt64(rng), true
}

func randBytes(rng *rand.Rand) []byte {
	b := make([]byte, rng.Intn(3)*rng.Intn(200))
	rng.Read(b)
	return b
}

func randOptBytes(rng *rand.Rand) ([]byte, bool) {
	if rng.Intn(2) == 0 {
		return nil, false
	}
	return randBytes(rng), true
}

var allOps = []wire.Op{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

var allStatuses = []wire.Status{0, 402, 403, 404, 501, 502, 503, 504, 505, 506, 507}

func randHeader(rng *rand.Rand) wire.Header {
	h := wire.Header{Version: int32(1 + rng.Intn(3)), Op: allOps[rng.Intn(len(allOps))], TxnID: uint64(randInt64(rng))}
	if rng.Intn(2) == 0 {
		h.Priority, h.HasPriority = uint32(rng.Uint32()>>uint(rng.Intn(32))), true
	}
	return h
}

func randStatus(rng *rand.Rand) wire.Status { return allStatuses[rng.Intn(len(allStatuses))] }

func randomRequest(rng *rand.Rand) wire.Request {
	r := wire.Request{Protocol: wire.ProtocolV3, Header: randHeader(rng)}
	for _, b := range []wire.Body{wire.BodyRead, wire.BodyAdd, wire.BodyAuth, wire.BodyWriteLAC, wire.BodyReadLAC,
		wire.BodyGetBookieInfo, wire.BodyStartTLS, wire.BodyForceLedger, wire.BodyGetListOfEntries} {
		if rng.Intn(4) == 0 {
			r.Has |= b
		}
	}
	if r.Has&wire.BodyRead != 0 {
		x := &r.Read
		x.LedgerID, x.EntryID = randInt64(rng), randInt64(rng)
		x.MasterKey, x.HasMasterKey = randOptBytes(rng)
		x.PreviousLAC, x.HasPreviousLAC = randOpt(rng)
		x.TimeoutMs, x.HasTimeout = randOpt(rng)
		x.Flag = wire.ReadFlag(rng.Intn(3))
	}
	if r.Has&wire.BodyAdd != 0 {
		x := &r.Add
		x.LedgerID, x.EntryID = randInt64(rng), randInt64(rng)
		x.MasterKey, x.Body = randBytes(rng), randBytes(rng)
		var w int64
		w, x.HasWriteFlags = randOpt(rng)
		x.WriteFlags = int32(w)
		x.Flag = wire.AddFlag(rng.Intn(2))
	}
	if r.Has&wire.BodyAuth != 0 {
		r.Auth = wire.AuthMessage{PluginName: string(randBytes(rng)), Payload: randBytes(rng)}
	}
	if r.Has&wire.BodyWriteLAC != 0 {
		r.WriteLAC = wire.WriteLACRequest{LedgerID: randInt64(rng), LAC: randInt64(rng),
			MasterKey: randBytes(rng), Body: randBytes(rng)}
	}
	if r.Has&wire.BodyReadLAC != 0 {
		r.ReadLACLedgerID = randInt64(rng)
	}
	if r.Has&wire.BodyGetBookieInfo != 0 {
		r.GetBookieInfo.Requested, r.GetBookieInfo.HasRequested = randOpt(rng)
	}
	if r.Has&wire.BodyForceLedger != 0 {
		r.ForceLedgerID = randInt64(rng)
	}
	if r.Has&wire.BodyGetListOfEntries != 0 {
		r.ListEntriesLedgerID = randInt64(rng)
	}
	for n := rng.Intn(3) * rng.Intn(3); n > 0; n-- {
		r.Context = append(r.Context, wire.ContextPair{Key: string(randBytes(rng)), Value: string(randBytes(rng))})
	}
	return r
}

func randomResponse(rng *rand.Rand) wire.Response {
	r := wire.Response{Protocol: wire.ProtocolV3, Header: randHeader(rng), Status: randStatus(rng)}
	for _, b := range []wire.Body{wire.BodyRead, wire.BodyAdd, wire.BodyAuth, wire.BodyWriteLAC, wire.BodyReadLAC,
		wire.BodyGetBookieInfo, wire.BodyStartTLS, wire.BodyForceLedger, wire.BodyGetListOfEntries} {
		if rng.Intn(4) == 0 {
			r.Has |= b
		}
	}
	if r.Has&wire.BodyRead != 0 {
		x := &r.Read
		x.Status, x.LedgerID, x.EntryID = randStatus(rng), randInt64(rng), randInt64(rng)
		x.Body, x.HasBody = randOptBytes(rng)
		x.MaxLAC, x.HasMaxLAC = randOpt(rng)
		x.LACUpdateTimestampMs, x.HasLACUpdateTimestamp = randOpt(rng)
	}
	if r.Has&wire.BodyAdd != 0 {
		r.Add = wire.AddResponse{Status: randStatus(rng), LedgerID: randInt64(rng), EntryID: randInt64(rng)}
	}
	if r.Has&wire.BodyAuth != 0 {
		r.Auth = wire.AuthMessage{PluginName: string(randBytes(rng)), Payload: randBytes(rng)}
	}
	if r.Has&wire.BodyWriteLAC != 0 {
		r.WriteLAC = wire.LedgerStatusResponse{Status: randStatus(rng), LedgerID: randInt64(rng)}
	}
	if r.Has&wire.BodyReadLAC != 0 {
		x := &r.ReadLAC
		x.Status, x.LedgerID = randStatus(rng), randInt64(rng)
		x.LACBody, x.HasLACBody = randOptBytes(rng)
		x.LastEntryBody, x.HasLastEntryBody = randOptBytes(rng)
	}
	if r.Has&wire.BodyGetBookieInfo != 0 {
		x := &r.GetBookieInfo
		x.Status = randStatus(rng)
		x.TotalDiskCapacity, x.HasTotalDiskCapacity = randOpt(rng)
		x.FreeDiskSpace, x.HasFreeDiskSpace = randOpt(rng)
	}
	if r.Has&wire.BodyForceLedger != 0 {
		r.ForceLedger = wire.LedgerStatusResponse{Status: randStatus(rng), LedgerID: randInt64(rng)}
	}
	if r.Has&wire.BodyGetListOfEntries != 0 {
		x := &r.ListEntries
		x.Status, x.LedgerID = randStatus(rng), randInt64(rng)
		x.Availability, x.HasAvail = randOptBytes(rng)
	}
	return r
}
