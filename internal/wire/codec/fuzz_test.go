package codec

import (
	"errors"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// FuzzServerDecoder feeds two frames to one ServerDecoder: it never panics,
// fails only with wire.ErrMalformed, and once in v2 mode stays there.
func FuzzServerDecoder(f *testing.F) {
	f.Add(enc3(nil, startTLS), enc2(nil, v2Read()))
	f.Add(enc3(nil, v3Add(1, 5, 0)), enc3(nil, v3Read(2)))
	f.Add(enc2(nil, v2Add(5, 0)), enc3(nil, v3Add(129, 5, 0)))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var d ServerDecoder
		for _, p := range [][]byte{first, second} {
			was := d.Protocol()
			var req wire.Request
			err := d.DecodeRequest(p, &req)
			if err != nil && !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			if err == nil && req.Protocol != d.Protocol() {
				t.Fatalf("request decoded as %v in mode %v", req.Protocol, d.Protocol())
			}
			if was == wire.ProtocolV2 && d.Protocol() != wire.ProtocolV2 {
				t.Fatal("left v2 mode")
			}
			if err == nil {
				// Answering in kind must not panic (it may refuse).
				_, _ = EncodeResponse(nil, &wire.Response{Protocol: req.Protocol, Header: req.Header})
			}
		}
	})
}
