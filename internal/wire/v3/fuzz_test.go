package v3

import (
	"errors"
	"reflect"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// The fuzz targets compare DecodeRequest and DecodeResponse with the
// reference (proto.Unmarshal into the generated types, with Java's closed
// enums: see javaClosedEnums) on arbitrary bytes, then check that what
// decodes re-encodes, as deterministic proto.Marshal does, to bytes that
// decode to the same value. Regressions live in testdata/fuzz.

func FuzzDecodeRequest(f *testing.F) {
	for _, g := range goldenRequests {
		f.Add(unhex(g.hex))
		f.Add(insertInto(unhex(g.hex), unknownFields))
	}
	for _, g := range goldenResponses {
		f.Add(unhex(g.hex))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got wire.Request
		err := DecodeRequest(b, &got)
		want, perr := oracleRequest(b)
		if (err == nil) != (perr == nil) {
			t.Fatalf("DecodeRequest error %v, proto.Unmarshal error %v", err, perr)
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeRequest %+v\nproto         %+v", got, want)
		}
		enc, err := AppendRequest(nil, &got)
		if err != nil {
			t.Fatalf("AppendRequest of a decoded request: %v", err)
		}
		if ref := marshalPB(toPBRequest(&got)); !reflect.DeepEqual(enc, ref) {
			t.Fatalf("AppendRequest %x\nproto.Marshal %x", enc, ref)
		}
		var again wire.Request
		if err := DecodeRequest(enc, &again); err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, got)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	for _, g := range goldenResponses {
		f.Add(unhex(g.hex))
		f.Add(insertInto(unhex(g.hex), unknownFields))
	}
	for _, g := range goldenRequests {
		f.Add(unhex(g.hex))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got wire.Response
		err := DecodeResponse(b, &got)
		want, perr := oracleResponse(b)
		if (err == nil) != (perr == nil) {
			t.Fatalf("DecodeResponse error %v, proto.Unmarshal error %v", err, perr)
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeResponse %+v\nproto          %+v", got, want)
		}
		enc, err := AppendResponse(nil, &got)
		if err != nil {
			t.Fatalf("AppendResponse of a decoded response: %v", err)
		}
		if ref := marshalPB(toPBResponse(&got)); !reflect.DeepEqual(enc, ref) {
			t.Fatalf("AppendResponse %x\nproto.Marshal  %x", enc, ref)
		}
		var again wire.Response
		if err := DecodeResponse(enc, &again); err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, got)
		}
	})
}

// FuzzDecodeAuthMessage checks the exported AuthMessage decoder the same way.
func FuzzDecodeAuthMessage(f *testing.F) {
	f.Add(unhex("0a12 4175746844697361626c6564506c7567696e 1200"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m wire.AuthMessage
		err := DecodeAuthMessage(b, &m)
		// An AuthMessage is the authRequest of a Request: wrap it in one.
		req := cat(header(3, 5, 1), bytesField(102, b))
		want, perr := oracleRequest(req)
		if (err == nil) != (perr == nil) {
			t.Fatalf("DecodeAuthMessage error %v, proto.Unmarshal error %v", err, perr)
		}
		if err == nil && !reflect.DeepEqual(m, want.Auth) {
			t.Fatalf("DecodeAuthMessage %+v\nproto             %+v", m, want.Auth)
		}
		if err == nil {
			var again wire.AuthMessage
			if err := DecodeAuthMessage(AppendAuthMessage(nil, &m), &again); err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("round trip: %v, %+v", err, again)
			}
		}
	})
}
