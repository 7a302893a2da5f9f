package v2

import (
	"errors"
	"reflect"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// FuzzDecodeRequest: DecodeRequest never panics, fails only with errors
// wrapping wire.ErrMalformed, and whatever it decodes re-encodes to a payload
// that decodes to the same value.
func FuzzDecodeRequest(f *testing.F) {
	for _, v := range requestVectors() {
		f.Add(hx(v.frame)[4:])
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var req wire.Request
		if err := DecodeRequest(payload, &req); err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			return
		}
		enc, err := AppendRequest(nil, &req)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", req, err)
		}
		if len(enc) > len(payload) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(payload), len(enc))
		}
		var back wire.Request
		if err := DecodeRequest(enc, &back); err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", enc, err)
		}
		if !reflect.DeepEqual(req, back) {
			t.Fatalf("round trip changed the request:\n got %+v\nwant %+v", back, req)
		}
	})
}

// FuzzDecodeResponse: as FuzzDecodeRequest for responses. The one change a
// round trip makes on purpose: EUNKNOWNLEDGERSTATE (107) goes out as EIO.
func FuzzDecodeResponse(f *testing.F) {
	for _, v := range responseVectors() {
		f.Add(hx(v.frame)[4:])
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var resp wire.Response
		if err := DecodeResponse(payload, &resp); err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			return
		}
		enc, err := AppendResponse(nil, &resp)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", resp, err)
		}
		var back wire.Response
		if err := DecodeResponse(enc, &back); err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", enc, err)
		}
		for _, s := range []*wire.Status{&resp.Status, &resp.Add.Status, &resp.Read.Status, &resp.BatchRead.Status} {
			if *s == wire.StatusUnknownLedgerState {
				*s = wire.StatusIOError
			}
		}
		if !reflect.DeepEqual(resp, back) {
			t.Fatalf("round trip changed the response:\n got %+v\nwant %+v", back, resp)
		}
	})
}
