package v3

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/foliodb/folio/internal/wire"
)

// checkRequestAgainstOracle decodes b with DecodeRequest and with the oracle
// and fails t unless they agree on success and, on success, on every field.
// It returns DecodeRequest's error.
func checkRequestAgainstOracle(t *testing.T, b []byte) error {
	t.Helper()
	var got wire.Request
	err := DecodeRequest(b, &got)
	want, perr := oracleRequest(b)
	if (err == nil) != (perr == nil) {
		t.Fatalf("input %x: DecodeRequest error %v, proto.Unmarshal error %v", b, err, perr)
	}
	if err != nil {
		if !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("input %x: error %v does not wrap ErrMalformed", b, err)
		}
		return err
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input %x:\nDecodeRequest %+v\nproto         %+v", b, got, want)
	}
	return nil
}

func checkResponseAgainstOracle(t *testing.T, b []byte) error {
	t.Helper()
	var got wire.Response
	err := DecodeResponse(b, &got)
	want, perr := oracleResponse(b)
	if (err == nil) != (perr == nil) {
		t.Fatalf("input %x: DecodeResponse error %v, proto.Unmarshal error %v", b, err, perr)
	}
	if err != nil {
		if !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("input %x: error %v does not wrap ErrMalformed", b, err)
		}
		return err
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input %x:\nDecodeResponse %+v\nproto          %+v", b, got, want)
	}
	return nil
}

// fieldEnds returns the offsets at which the top-level fields of b end.
func fieldEnds(b []byte) map[int]bool {
	ends := map[int]bool{0: true}
	off := 0
	for off < len(b) {
		_, typ, n := protowire.ConsumeTag(b[off:])
		m := protowire.ConsumeFieldValue(0, typ, b[off+n:])
		off += n + m
		ends[off] = true
	}
	return ends
}

// TestTruncatedEveryLength cuts every golden payload at every length. A cut
// inside a field is ErrTruncated; a cut between fields leaves a message that
// parses and may lack required fields. Both decoders agree on each cut.
func TestTruncatedEveryLength(t *testing.T) {
	check := func(t *testing.T, payload []byte, decode func([]byte) error) {
		ends := fieldEnds(payload)
		for n := 0; n < len(payload); n++ {
			err := decode(payload[:n])
			switch {
			case !ends[n] && !errors.Is(err, wire.ErrTruncated):
				t.Errorf("cut at %d inside a field: error %v, want ErrTruncated", n, err)
			case ends[n] && err != nil && !errors.Is(err, wire.ErrMissingField):
				t.Errorf("cut at %d between fields: error %v, want nil or ErrMissingField", n, err)
			}
		}
	}
	for _, g := range goldenRequests {
		t.Run("request/"+g.name, func(t *testing.T) {
			check(t, unhex(g.hex), func(b []byte) error { return checkRequestAgainstOracle(t, b) })
		})
	}
	for _, g := range goldenResponses {
		t.Run("response/"+g.name, func(t *testing.T) {
			check(t, unhex(g.hex), func(b []byte) error { return checkResponseAgainstOracle(t, b) })
		})
	}
}

// TestTruncatedFrames cuts a framed request at every length: the frame reader
// reports ErrTruncated (io.EOF before the first byte) and never hands a
// partial payload to the decoder.
func TestTruncatedFrames(t *testing.T) {
	for _, g := range goldenRequests {
		frame, err := wire.AppendFrame(nil, unhex(g.hex))
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(frame); n++ {
			_, err := wire.NewFrameReader(bytes.NewReader(frame[:n])).Next()
			if n == 0 && err != io.EOF || n > 0 && !errors.Is(err, wire.ErrTruncated) {
				t.Errorf("%s cut at %d: %v", g.name, n, err)
			}
		}
	}
}

// dropField removes every occurrence of the field at path (a field number,
// then field numbers inside that message field) from b.
func dropField(b []byte, path []protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		raw, val := b[:n+m], b[n:n+m]
		b = b[n+m:]
		if num != path[0] {
			out = append(out, raw...)
			continue
		}
		if len(path) == 1 {
			continue
		}
		v, _ := protowire.ConsumeBytes(val)
		out = protowire.AppendTag(out, num, typ)
		out = protowire.AppendBytes(out, dropField(v, path[1:]))
	}
	return out
}

// hasField reports whether the field at path is present in b.
func hasField(b []byte, path []protowire.Number) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		val := b[n : n+m]
		b = b[n+m:]
		if num != path[0] {
			continue
		}
		if len(path) == 1 {
			return true
		}
		v, _ := protowire.ConsumeBytes(val)
		if hasField(v, path[1:]) {
			return true
		}
	}
	return false
}

type requiredField struct {
	path []protowire.Number
	name string // as the error names it
}

var requestRequiredFields = []requiredField{
	{[]protowire.Number{1}, "Request.header"},
	{[]protowire.Number{1, 1}, "Request.header.version"},
	{[]protowire.Number{1, 2}, "Request.header.operation"},
	{[]protowire.Number{1, 3}, "Request.header.txnId"},
	{[]protowire.Number{100, 1}, "Request.readRequest.ledgerId"},
	{[]protowire.Number{100, 2}, "Request.readRequest.entryId"},
	{[]protowire.Number{101, 1}, "Request.addRequest.ledgerId"},
	{[]protowire.Number{101, 2}, "Request.addRequest.entryId"},
	{[]protowire.Number{101, 3}, "Request.addRequest.masterKey"},
	{[]protowire.Number{101, 4}, "Request.addRequest.body"},
	{[]protowire.Number{102, 1}, "Request.authRequest.authPluginName"},
	{[]protowire.Number{102, 2}, "Request.authRequest.payload"},
	{[]protowire.Number{103, 1}, "Request.writeLacRequest.ledgerId"},
	{[]protowire.Number{103, 2}, "Request.writeLacRequest.lac"},
	{[]protowire.Number{103, 3}, "Request.writeLacRequest.masterKey"},
	{[]protowire.Number{103, 4}, "Request.writeLacRequest.body"},
	{[]protowire.Number{104, 1}, "Request.readLacRequest.ledgerId"},
	{[]protowire.Number{107, 1}, "Request.forceLedgerRequest.ledgerId"},
	{[]protowire.Number{108, 1}, "Request.getListOfEntriesOfLedgerRequest.ledgerId"},
	{[]protowire.Number{200, 1}, "Request.requestContext.key"},
	{[]protowire.Number{200, 2}, "Request.requestContext.value"},
}

var responseRequiredFields = []requiredField{
	{[]protowire.Number{1}, "Response.header"},
	{[]protowire.Number{2}, "Response.status"},
	{[]protowire.Number{1, 1}, "Response.header.version"},
	{[]protowire.Number{1, 2}, "Response.header.operation"},
	{[]protowire.Number{1, 3}, "Response.header.txnId"},
	{[]protowire.Number{100, 1}, "Response.readResponse.status"},
	{[]protowire.Number{100, 2}, "Response.readResponse.ledgerId"},
	{[]protowire.Number{100, 3}, "Response.readResponse.entryId"},
	{[]protowire.Number{101, 1}, "Response.addResponse.status"},
	{[]protowire.Number{101, 2}, "Response.addResponse.ledgerId"},
	{[]protowire.Number{101, 3}, "Response.addResponse.entryId"},
	{[]protowire.Number{102, 1}, "Response.authResponse.authPluginName"},
	{[]protowire.Number{102, 2}, "Response.authResponse.payload"},
	{[]protowire.Number{103, 1}, "Response.writeLacResponse.status"},
	{[]protowire.Number{103, 2}, "Response.writeLacResponse.ledgerId"},
	{[]protowire.Number{104, 1}, "Response.readLacResponse.status"},
	{[]protowire.Number{104, 2}, "Response.readLacResponse.ledgerId"},
	{[]protowire.Number{105, 1}, "Response.getBookieInfoResponse.status"},
	{[]protowire.Number{107, 1}, "Response.forceLedgerResponse.status"},
	{[]protowire.Number{107, 2}, "Response.forceLedgerResponse.ledgerId"},
	{[]protowire.Number{108, 1}, "Response.getListOfEntriesOfLedgerResponse.status"},
	{[]protowire.Number{108, 2}, "Response.getListOfEntriesOfLedgerResponse.ledgerId"},
}

// TestMissingRequired removes each required field from every golden message
// that has it: the decoders refuse it, naming the field.
func TestMissingRequired(t *testing.T) {
	covered := map[string]bool{}
	for _, g := range goldenRequests {
		for _, f := range requestRequiredFields {
			b := unhex(g.hex)
			if !hasField(b, f.path) {
				continue
			}
			covered[f.name] = true
			err := checkRequestAgainstOracle(t, dropField(b, f.path))
			if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), f.name) {
				t.Errorf("%s without %s: error %v, want ErrMissingField naming it", g.name, f.name, err)
			}
		}
	}
	for _, g := range goldenResponses {
		for _, f := range responseRequiredFields {
			b := unhex(g.hex)
			if !hasField(b, f.path) {
				continue
			}
			covered[f.name] = true
			err := checkResponseAgainstOracle(t, dropField(b, f.path))
			if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), f.name) {
				t.Errorf("%s without %s: error %v, want ErrMissingField naming it", g.name, f.name, err)
			}
		}
	}
	for _, f := range append(requestRequiredFields, responseRequiredFields...) {
		if !covered[f.name] {
			t.Errorf("no golden message has %s", f.name)
		}
	}
	// The exported AuthMessage decoder checks the same two fields.
	var m wire.AuthMessage
	if err := DecodeAuthMessage(unhex("0a0141"), &m); !errors.Is(err, wire.ErrMissingField) ||
		!strings.Contains(err.Error(), "AuthMessage.payload") {
		t.Errorf("AuthMessage without payload: %v", err)
	}
	if err := DecodeAuthMessage(unhex("1200"), &m); !errors.Is(err, wire.ErrMissingField) {
		t.Errorf("AuthMessage without plugin name: %v", err)
	}
}

// Builders for hand-made payloads.

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func bytesField(num protowire.Number, parts ...[]byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), bytes.Join(parts, nil))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func signed(v int64) uint64 { return uint64(v) }

// header builds a BKPacketHeader field from its raw parts.
func header(version, op uint64, txn uint64) []byte {
	return bytesField(1, varintField(1, version), varintField(2, op), varintField(3, txn))
}

// TestClosedEnums: a value outside an enum is an unknown field (Java proto2),
// even where Go's proto.Unmarshal would keep it.
func TestClosedEnums(t *testing.T) {
	readBody := bytesField(100, varintField(1, 1), varintField(2, 0))
	tests := []struct {
		name    string
		payload []byte
		missing string // the field the error names; "" for success
		check   func(*wire.Request) bool
	}{
		{name: "unknown-op", payload: cat(header(3, 99, 1), readBody), missing: "Request.header.operation"},
		{name: "op-zero", payload: cat(header(3, 0, 1), readBody), missing: "Request.header.operation"},
		{name: "op-negative", payload: cat(header(3, signed(-1), 1), readBody), missing: "Request.header.operation"},
		{name: "unknown-version", payload: cat(header(4, 1, 1), readBody), missing: "Request.header.version"},
		{
			name: "unknown-op-after-valid-keeps-valid",
			payload: cat(bytesField(1, varintField(1, 3), varintField(2, 2), varintField(2, 99), varintField(3, 1)),
				readBody),
			check: func(r *wire.Request) bool { return r.Header.Op == wire.OpAddEntry },
		},
		{
			// Enums are int32 on the wire: the upper 32 bits are dropped.
			name:    "op-truncated-to-int32",
			payload: cat(header(3, 1<<32|uint64(wire.OpReadLAC), 1), readBody),
			check:   func(r *wire.Request) bool { return r.Header.Op == wire.OpReadLAC },
		},
		{
			name:    "unknown-read-flag-unset",
			payload: cat(header(3, 1, 1), bytesField(100, varintField(1, 1), varintField(2, 0), varintField(100, 3))),
			check:   func(r *wire.Request) bool { return r.Read.Flag == wire.ReadFlagNone },
		},
		{
			name:    "read-flag-zero-unset",
			payload: cat(header(3, 1, 1), bytesField(100, varintField(1, 1), varintField(2, 0), varintField(100, 0))),
			check:   func(r *wire.Request) bool { return r.Read.Flag == wire.ReadFlagNone },
		},
		{
			name: "unknown-read-flag-keeps-earlier",
			payload: cat(header(3, 1, 1), bytesField(100, varintField(1, 1), varintField(2, 0),
				varintField(100, 1), varintField(100, 7))),
			check: func(r *wire.Request) bool { return r.Read.Flag == wire.ReadFlagFenceLedger },
		},
		{
			name: "unknown-add-flag-unset",
			payload: cat(header(3, 2, 1), bytesField(101, varintField(1, 1), varintField(2, 0),
				bytesField(3), bytesField(4), varintField(100, 2))),
			check: func(r *wire.Request) bool { return r.Add.Flag == wire.AddFlagNone },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRequestAgainstOracle(t, tc.payload)
			if tc.missing != "" {
				if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), tc.missing) {
					t.Fatalf("error %v, want ErrMissingField naming %s", err, tc.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var r wire.Request
			_ = DecodeRequest(tc.payload, &r)
			if !tc.check(&r) {
				t.Fatalf("decoded %+v", r)
			}
		})
	}

	respHeader := header(3, 1, 1)
	for _, tc := range []struct {
		name    string
		payload []byte
		missing string
	}{
		{"unknown-status", cat(respHeader, varintField(2, 1)), "Response.status"},
		{"unknown-sub-status", cat(respHeader, varintField(2, 0),
			bytesField(100, varintField(1, 999), varintField(2, 1), varintField(3, 1))), "Response.readResponse.status"},
		{"unknown-status-after-valid", cat(respHeader, varintField(2, 403), varintField(2, 1)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResponseAgainstOracle(t, tc.payload)
			if tc.missing == "" {
				var r wire.Response
				if err := DecodeResponse(tc.payload, &r); err != nil || r.Status != wire.StatusNoEntry {
					t.Fatalf("decoded %+v, %v", r, err)
				}
				return
			}
			if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), tc.missing) {
				t.Fatalf("error %v, want ErrMissingField naming %s", err, tc.missing)
			}
		})
	}
}

// unknownFields is one field of every wire type, with field numbers the
// schema does not use, and a group holding nested fields.
var unknownFields = cat(
	varintField(50, 12345),
	protowire.AppendFixed32(protowire.AppendTag(nil, 51, protowire.Fixed32Type), 7),
	protowire.AppendFixed64(protowire.AppendTag(nil, 52, protowire.Fixed64Type), 8),
	bytesField(53, []byte("unknown")),
	protowire.AppendTag(nil, 54, protowire.StartGroupType),
	varintField(1, 1),
	protowire.AppendTag(nil, 55, protowire.StartGroupType),
	protowire.AppendTag(nil, 55, protowire.EndGroupType),
	protowire.AppendTag(nil, 54, protowire.EndGroupType),
	varintField(protowire.MaxValidNumber, 1),
)

// insertInto appends extra to the content of every top-level message field
// of b (and to b itself).
func insertInto(b, extra []byte) []byte {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		raw, val := b[:n+m], b[n:n+m]
		b = b[n+m:]
		if typ != protowire.BytesType {
			out = append(out, raw...)
			continue
		}
		v, _ := protowire.ConsumeBytes(val)
		out = protowire.AppendTag(out, num, typ)
		out = protowire.AppendBytes(out, cat(extra, v, extra))
	}
	return cat(extra, out, extra)
}

// TestUnknownFieldsSkipped: unknown fields of every wire type, and known
// field numbers with another wire type, change nothing.
func TestUnknownFieldsSkipped(t *testing.T) {
	// Known numbers with a wire type no field of the schema has (every
	// field is varint or length-delimited), at every level: 1 as fixed64,
	// 2 as fixed32, 3 and 4 as groups, 100 as fixed32, 200 as fixed64.
	wrongTypes := cat(
		protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 99),
		protowire.AppendFixed32(protowire.AppendTag(nil, 2, protowire.Fixed32Type), 99),
		protowire.AppendTag(nil, 3, protowire.StartGroupType), varintField(1, 5), protowire.AppendTag(nil, 3, protowire.EndGroupType),
		protowire.AppendTag(nil, 4, protowire.StartGroupType), protowire.AppendTag(nil, 4, protowire.EndGroupType),
		protowire.AppendFixed32(protowire.AppendTag(nil, 100, protowire.Fixed32Type), 1),
		protowire.AppendFixed64(protowire.AppendTag(nil, 200, protowire.Fixed64Type), 1),
	)
	for _, extra := range [][]byte{unknownFields, wrongTypes} {
		for _, g := range goldenRequests {
			b := insertInto(unhex(g.hex), extra)
			if err := checkRequestAgainstOracle(t, b); err != nil {
				t.Fatalf("%s with unknown fields %x: %v", g.name, b, err)
			}
			var r wire.Request
			_ = DecodeRequest(b, &r)
			if !reflect.DeepEqual(r, g.req) {
				t.Errorf("%s with unknown fields:\n got %+v\nwant %+v", g.name, r, g.req)
			}
		}
		for _, g := range goldenResponses {
			b := insertInto(unhex(g.hex), extra)
			if err := checkResponseAgainstOracle(t, b); err != nil {
				t.Fatalf("%s with unknown fields %x: %v", g.name, b, err)
			}
			var r wire.Response
			_ = DecodeResponse(b, &r)
			if !reflect.DeepEqual(r, g.resp) {
				t.Errorf("%s with unknown fields:\n got %+v\nwant %+v", g.name, r, g.resp)
			}
		}
	}
	// The extra GetBookieInfoResponse fields 4-7 are skipped too.
	b := cat(header(3, 8, 1), varintField(2, 0), bytesField(105, varintField(1, 0), varintField(2, 10),
		varintField(4, 1), varintField(5, 2), varintField(6, 3), varintField(7, 4)))
	if err := checkResponseAgainstOracle(t, b); err != nil {
		t.Fatal(err)
	}
}

// TestLastOneWinsAndMerge: repeated scalars keep the last value; repeated
// sub-messages merge, and required fields may come from any occurrence.
func TestLastOneWinsAndMerge(t *testing.T) {
	b := cat(
		bytesField(1, varintField(1, 3), varintField(3, 1)), // header split in two
		bytesField(101, varintField(1, 1), varintField(2, 5), bytesField(3, masterKey)),
		bytesField(1, varintField(2, 2), varintField(3, 77)),
		bytesField(101, varintField(2, 6), bytesField(4, entryBody), varintField(1, 9), varintField(1, 4)),
	)
	if err := checkRequestAgainstOracle(t, b); err != nil {
		t.Fatal(err)
	}
	var r wire.Request
	_ = DecodeRequest(b, &r)
	want := wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 77), Has: wire.BodyAdd,
		Add: wire.AddRequest{LedgerID: 4, EntryID: 6, MasterKey: masterKey, Body: entryBody}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
}

// TestBadEncoding: inputs no protobuf parser accepts, each with its error.
func TestBadEncoding(t *testing.T) {
	valid := unhex(goldenRequests[0].hex)
	nest := func(depth int) []byte {
		var b []byte
		for i := 0; i < depth; i++ {
			b = protowire.AppendTag(b, 9, protowire.StartGroupType)
		}
		for i := 0; i < depth; i++ {
			b = protowire.AppendTag(b, 9, protowire.EndGroupType)
		}
		return b
	}
	tests := []struct {
		name    string
		payload []byte
		want    error // nil: decodes
	}{
		{"empty", nil, wire.ErrMissingField},
		{"field-number-0", cat(valid, []byte{0x00}), wire.ErrBadEncoding},
		{"v2-packet", unhex("0203 0000 0a12 4175746844697361626c6564506c7567696e 1200"), wire.ErrBadEncoding},
		{"field-number-2^29", cat(valid, varintField(protowire.MaxValidNumber+1, 0)), wire.ErrBadEncoding},
		{"field-number-over-int32", cat(valid, protowire.AppendVarint(nil, 1<<40)), wire.ErrBadEncoding},
		{"stray-end-group", cat(valid, protowire.AppendTag(nil, 5, protowire.EndGroupType)), wire.ErrBadEncoding},
		{"wire-type-6", cat(valid, []byte{0x0e, 0x00}), wire.ErrBadEncoding},
		{"wire-type-7", cat(valid, []byte{0x0f, 0x00}), wire.ErrBadEncoding},
		{"wire-type-6-known-field", cat(valid, []byte{0x0e}), wire.ErrBadEncoding},
		{"group-unterminated", cat(valid, protowire.AppendTag(nil, 5, protowire.StartGroupType)), wire.ErrTruncated},
		{"group-mismatched-end", cat(valid, protowire.AppendTag(nil, 5, protowire.StartGroupType),
			protowire.AppendTag(nil, 6, protowire.EndGroupType)), wire.ErrBadEncoding},
		{"group-nested-100", cat(valid, nest(100)), nil},
		{"group-nested-10001", cat(valid, nest(10001)), nil},
		{"group-nested-10002", cat(valid, nest(10002)), wire.ErrBadEncoding},
		{"group-in-sub-message", cat(header(3, 1, 1), bytesField(100, varintField(1, 1), varintField(2, 2), nest(3))), nil},
		{"tag-varint-11-bytes", cat(valid, unhex("8080808080808080808001")), wire.ErrBadEncoding},
		{"value-varint-11-bytes", cat(bytesField(1, varintField(1, 3), varintField(2, 1), unhex("18 8080808080808080808001"))), wire.ErrBadEncoding},
		{"value-varint-10th-byte-2", cat(bytesField(1, varintField(1, 3), varintField(2, 1), unhex("18 ffffffffffffffffff02"))), wire.ErrBadEncoding},
		{"value-varint-10th-byte-1", cat(bytesField(1, varintField(1, 3), varintField(2, 1), unhex("18 ffffffffffffffffff01"))), nil},
		{"value-varint-non-minimal", cat(bytesField(1, varintField(1, 3), varintField(2, 1), unhex("18 8180808000"))), nil},
		{"varint-truncated", unhex("0a06 0803 1001 18ff"), wire.ErrTruncated},
		{"length-past-end", unhex("0a06 0803 1001"), wire.ErrTruncated},
		{"length-2^62", cat(valid, protowire.AppendVarint([]byte{0xaa, 0x06}, 1<<62)), wire.ErrTruncated},
		{"length-max-uint64", cat(valid, unhex("aa06 ffffffffffffffffff01")), wire.ErrTruncated},
		{"length-4GiB-in-sub", cat(header(3, 2, 1), unhex("aa06 06 22 8080808010")), wire.ErrTruncated},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: bookie\r\n\r\n"), wire.ErrBadEncoding},
		{"all-ff", bytes.Repeat([]byte{0xff}, 64), wire.ErrBadEncoding},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRequestAgainstOracle(t, tc.payload)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			rerr := checkResponseAgainstOracle(t, tc.payload)
			if tc.want != nil && tc.want != wire.ErrMissingField && !errors.Is(rerr, tc.want) {
				t.Fatalf("response: error %v, want %v", rerr, tc.want)
			}
		})
	}
}

// TestHugeLengthNoAllocation: a length prefix announcing far more than the
// payload holds is refused without allocating for it.
func TestHugeLengthNoAllocation(t *testing.T) {
	payload := cat(unhex(goldenRequests[0].hex), protowire.AppendVarint([]byte{0xaa, 0x06}, 1<<62))
	var r wire.Request
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 100; i++ {
		if err := DecodeRequest(payload, &r); !errors.Is(err, wire.ErrTruncated) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 100*1024 {
		t.Fatalf("100 decodes allocated %d bytes", d)
	}
}

// TestRequestContextBounded: requestContext elements missing a field fail at
// once, so a payload of empty elements cannot grow the slice.
func TestRequestContextBounded(t *testing.T) {
	payload := cat(unhex(goldenRequests[0].hex), bytes.Repeat(unhex("c20c00"), 100000))
	var r wire.Request
	allocs := testing.AllocsPerRun(10, func() { _ = DecodeRequest(payload, &r) })
	if allocs > 10 {
		t.Fatalf("%v allocations", allocs)
	}
	if err := checkRequestAgainstOracle(t, payload); !errors.Is(err, wire.ErrMissingField) {
		t.Fatal(err)
	}
}

func TestDecodeResets(t *testing.T) {
	for _, g := range goldenRequests {
		dirty := wire.Request{Protocol: wire.ProtocolV2, Has: 0xffff, Context: []wire.ContextPair{{Key: "a", Value: "b"}},
			Read: wire.ReadRequest{HasMasterKey: true, MasterKey: []byte{1}}, BatchRead: wire.BatchReadRequest{Fence: true}}
		if err := DecodeRequest(unhex(g.hex), &dirty); err != nil || !reflect.DeepEqual(dirty, g.req) {
			t.Errorf("%s into a used Request: %v\n got %+v\nwant %+v", g.name, err, dirty, g.req)
		}
	}
	for _, g := range goldenResponses {
		dirty := wire.Response{Protocol: wire.ProtocolV2, Has: 0xffff, Status: 7,
			BatchRead: wire.BatchReadResponse{Entries: [][]byte{{1}}}, Read: wire.ReadResponse{HasBody: true}}
		if err := DecodeResponse(unhex(g.hex), &dirty); err != nil || !reflect.DeepEqual(dirty, g.resp) {
			t.Errorf("%s into a used Response: %v\n got %+v\nwant %+v", g.name, err, dirty, g.resp)
		}
	}
}

// TestBytesAlias: decoded bytes fields point into the payload.
func TestBytesAlias(t *testing.T) {
	payload := unhex(goldenRequests[4].hex) // add
	var r wire.Request
	if err := DecodeRequest(payload, &r); err != nil {
		t.Fatal(err)
	}
	payload[len(payload)-1] = 'X'
	if r.Add.Body[len(r.Add.Body)-1] != 'X' {
		t.Fatal("AddRequest.Body is a copy, not an alias of the payload")
	}
}

func TestDecodeAllocs(t *testing.T) {
	add := benchAddPayload()
	read := benchReadResponsePayload()
	var r wire.Request
	var resp wire.Response
	if a := testing.AllocsPerRun(100, func() {
		if err := DecodeRequest(add, &r); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("DecodeRequest(add): %v allocations", a)
	}
	if a := testing.AllocsPerRun(100, func() {
		if err := DecodeResponse(read, &resp); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("DecodeResponse(read): %v allocations", a)
	}
	buf := make([]byte, 0, 4096)
	if a := testing.AllocsPerRun(100, func() {
		if _, err := AppendRequest(buf[:0], &r); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("AppendRequest(add): %v allocations", a)
	}
	if a := testing.AllocsPerRun(100, func() {
		if _, err := AppendResponse(buf[:0], &resp); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("AppendResponse(read): %v allocations", a)
	}
	// The auth-disabled plugin name is not copied either.
	auth := unhex(goldenRequests[8].hex)
	if a := testing.AllocsPerRun(100, func() { _ = DecodeRequest(auth, &r) }); a != 0 {
		t.Errorf("DecodeRequest(auth): %v allocations", a)
	}
}

// TestWrongWireTypeIsUnknown: a known field sent with the other wire type
// of the schema is an unknown field, not an error, and does not set the
// field: here the required ledgerId as bytes and the body as a varint.
func TestWrongWireTypeIsUnknown(t *testing.T) {
	b := cat(header(3, 2, 1), bytesField(101, bytesField(1, []byte{1}), varintField(2, 0),
		bytesField(3, masterKey), bytesField(4, entryBody)))
	err := checkRequestAgainstOracle(t, b)
	if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), "addRequest.ledgerId") {
		t.Fatalf("error %v, want ledgerId missing", err)
	}
	b = cat(header(3, 2, 1), bytesField(101, varintField(1, 1), varintField(2, 0),
		bytesField(3, masterKey), varintField(4, 5)))
	err = checkRequestAgainstOracle(t, b)
	if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), "addRequest.body") {
		t.Fatalf("error %v, want body missing", err)
	}
	// Status as bytes in a Response: missing.
	err = checkResponseAgainstOracle(t, cat(header(3, 1, 1), bytesField(2, []byte{0})))
	if !errors.Is(err, wire.ErrMissingField) || !strings.Contains(err.Error(), "Response.status") {
		t.Fatalf("error %v, want status missing", err)
	}
}

// TestStringsNotValidated: proto2 strings are not checked for UTF-8 (neither
// Go's proto.Unmarshal nor Java's parser does), so invalid UTF-8 in a plugin
// name or a requestContext pair decodes as it is.
func TestStringsNotValidated(t *testing.T) {
	bad := []byte{0xff, 0xfe, 'x'}
	b := cat(header(3, 5, 1), bytesField(102, bytesField(1, bad), bytesField(2)),
		bytesField(200, bytesField(1, bad), bytesField(2, bad)))
	if err := checkRequestAgainstOracle(t, b); err != nil {
		t.Fatal(err)
	}
	var r wire.Request
	_ = DecodeRequest(b, &r)
	if r.Auth.PluginName != string(bad) || r.Context[0].Key != string(bad) {
		t.Fatalf("decoded %+v", r)
	}
	enc, err := AppendRequest(nil, &r)
	if err != nil || !bytes.Equal(enc, b) {
		t.Fatalf("re-encoded %x, %v; want %x", enc, err, b)
	}
}
