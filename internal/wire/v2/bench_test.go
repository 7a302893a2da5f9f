package v2

import (
	"encoding/binary"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// addRequest1KiB returns an ADD with a 1 KiB entry body.
func addRequest1KiB() wire.Request {
	body := make([]byte, 1024)
	binary.BigEndian.PutUint64(body, 12345)
	binary.BigEndian.PutUint64(body[8:], 678)
	return wire.Request{Header: wire.Header{Version: CurrentVersion, Op: wire.OpAddEntry},
		Add: wire.AddRequest{LedgerID: 12345, EntryID: 678, MasterKey: key, Body: body}}
}

func BenchmarkDecodeAddRequest1KiB(b *testing.B) {
	src := addRequest1KiB()
	payload, err := AppendRequest(nil, &src)
	if err != nil {
		b.Fatal(err)
	}
	var req wire.Request
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeRequest(payload, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeAddRequest1KiB(b *testing.B) {
	req := addRequest1KiB()
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(4 + 20 + len(req.Add.Body)))
	b.ReportAllocs()
	for b.Loop() {
		var off int
		buf, off = wire.BeginFrame(buf[:0])
		buf, _ = AppendRequest(buf, &req)
		if _, err := wire.EndFrame(buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

func readResponse1KiB() wire.Response {
	return wire.Response{Header: wire.Header{Version: CurrentVersion, Op: wire.OpReadEntry},
		Read: wire.ReadResponse{LedgerID: 12345, EntryID: 678, Body: make([]byte, 1024), HasBody: true}}
}

func BenchmarkEncodeReadResponse1KiB(b *testing.B) {
	resp := readResponse1KiB()
	buf := make([]byte, 0, 2048)
	b.SetBytes(24 + 1024)
	b.ReportAllocs()
	for b.Loop() {
		var off int
		buf, off = wire.BeginFrame(buf[:0])
		buf, _ = AppendResponse(buf, &resp)
		if _, err := wire.EndFrame(buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeReadResponse1KiB(b *testing.B) {
	src := readResponse1KiB()
	payload, err := AppendResponse(nil, &src)
	if err != nil {
		b.Fatal(err)
	}
	var resp wire.Response
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeResponse(payload, &resp); err != nil {
			b.Fatal(err)
		}
	}
}
