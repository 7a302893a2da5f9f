package v3

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/foliodb/folio/internal/wire"
	pb "github.com/foliodb/folio/internal/wire/v3/protocolpb"
)

// benchBody is a 1 KiB entry body.
var benchBody = func() []byte {
	b := make([]byte, 1024)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

func benchAddRequest() wire.Request {
	return wire.Request{Protocol: wire.ProtocolV3, Header: hdr(wire.OpAddEntry, 123456), Has: wire.BodyAdd,
		Add: wire.AddRequest{LedgerID: 1 << 33, EntryID: 4242, MasterKey: masterKey, Body: benchBody}}
}

func benchReadResponse() wire.Response {
	return wire.Response{Protocol: wire.ProtocolV3, Header: hdr(wire.OpReadEntry, 123456), Status: wire.StatusOK,
		Has: wire.BodyRead, Read: wire.ReadResponse{Status: wire.StatusOK, LedgerID: 1 << 33, EntryID: 4242,
			Body: benchBody, HasBody: true, MaxLAC: 4241, HasMaxLAC: true}}
}

func benchAddPayload() []byte {
	r := benchAddRequest()
	b, err := AppendRequest(nil, &r)
	if err != nil {
		panic(err)
	}
	return b
}

func benchReadResponsePayload() []byte {
	r := benchReadResponse()
	b, err := AppendResponse(nil, &r)
	if err != nil {
		panic(err)
	}
	return b
}

func BenchmarkDecodeAddRequest1KiB(b *testing.B) {
	payload := benchAddPayload()
	var r wire.Request
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeRequest(payload, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeAddRequest1KiB(b *testing.B) {
	r := benchAddRequest()
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(len(benchAddPayload())))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendRequest(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeReadResponse1KiB(b *testing.B) {
	payload := benchReadResponsePayload()
	var r wire.Response
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeResponse(payload, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeReadResponse1KiB(b *testing.B) {
	r := benchReadResponse()
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(len(benchReadResponsePayload())))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendResponse(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProtoUnmarshalAddRequest1KiB is the generated code's cost for the
// same add, for comparison with BenchmarkDecodeAddRequest1KiB.
func BenchmarkProtoUnmarshalAddRequest1KiB(b *testing.B) {
	payload := benchAddPayload()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		var m pb.Request
		if err := proto.Unmarshal(payload, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProtoMarshalAddRequest1KiB is the generated code's cost of
// encoding the same add.
func BenchmarkProtoMarshalAddRequest1KiB(b *testing.B) {
	r := benchAddRequest()
	m := toPBRequest(&r)
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(len(benchAddPayload())))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}
