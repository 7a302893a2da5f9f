package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

func frame(n uint32, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, n)
	return append(b, payload...)
}

func TestFrameReaderReadsConsecutiveFrames(t *testing.T) {
	var stream []byte
	payloads := [][]byte{{0x0a}, bytes.Repeat([]byte{7}, 1000), {1, 2, 3}}
	for _, p := range payloads {
		var err error
		if stream, err = AppendFrame(stream, p); err != nil {
			t.Fatal(err)
		}
	}
	fr := NewFrameReader(bufio.NewReader(bytes.NewReader(stream)))
	for i, want := range payloads {
		got, err := fr.Next()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %v, %x", i, err, got)
		}
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestFrameLimitCountsThePrefix(t *testing.T) {
	// The largest payload is MaxFrameSize-4: Netty compares N+4 with the limit.
	ok := frame(MaxPayloadSize, make([]byte, MaxPayloadSize))
	got, err := NewFrameReader(bytes.NewReader(ok)).Next()
	if err != nil || len(got) != MaxPayloadSize {
		t.Fatalf("payload of exactly the limit: %v (%d bytes)", err, len(got))
	}
	for _, n := range []uint32{MaxPayloadSize + 1, 1 << 31, 0xffffffff} {
		// Only the prefix is sent: the error must come before any payload is
		// read or allocated.
		_, err := NewFrameReader(bytes.NewReader(frame(n, nil))).Next()
		if !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("length %d: %v, want ErrFrameTooLarge", n, err)
		}
	}
}

func TestFrameReaderBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream []byte
		want   error
	}{
		{"empty frame", frame(0, nil), ErrEmptyFrame},
		{"prefix cut", []byte{0, 0}, ErrTruncated},
		{"payload cut", frame(10, []byte{1, 2, 3}), ErrTruncated},
		{"payload missing", frame(10, nil), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFrameReader(bytes.NewReader(tc.stream)).Next()
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
}

func TestFrameReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("connection reset")
	_, err := NewFrameReader(io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 5, 1}), errReader{boom})).Next()
	if !errors.Is(err, boom) || errors.Is(err, ErrMalformed) {
		t.Fatalf("%v: an I/O error must pass through and not look like bad input", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestFrameReaderDetach(t *testing.T) {
	stream, _ := AppendFrame(nil, []byte("first"))
	stream, _ = AppendFrame(stream, []byte("other"))
	fr := NewFrameReader(bytes.NewReader(stream))
	first, _ := fr.Next()
	fr.Detach()
	if _, err := fr.Next(); err != nil {
		t.Fatal(err)
	}
	if string(first) != "first" {
		t.Fatalf("a detached payload was overwritten: %q", first)
	}
}

func TestEndFrameRefusesOversizedAndEmpty(t *testing.T) {
	dst, off := BeginFrame(nil)
	if _, err := EndFrame(dst, off); !errors.Is(err, ErrEmptyFrame) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := AppendFrame(nil, make([]byte, MaxPayloadSize+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	b, err := AppendFrame([]byte{0xee}, []byte{1, 2})
	if err != nil || !bytes.Equal(b, []byte{0xee, 0, 0, 0, 2, 1, 2}) {
		t.Fatalf("%v %x", err, b)
	}
}

// FuzzFrameReader: any stream yields frames within the limit or a
// specific error, never a panic, and every frame it returns re-encodes to the
// bytes it was read from.
func FuzzFrameReader(f *testing.F) {
	f.Add(frame(1, []byte{0x0a}))
	f.Add(frame(0, nil))
	f.Add(frame(MaxPayloadSize+1, nil))
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 1, 9, 0xff})
	f.Fuzz(func(t *testing.T, stream []byte) {
		fr := NewFrameReader(bytes.NewReader(stream))
		var consumed []byte
		for {
			p, err := fr.Next()
			if err == io.EOF {
				if !bytes.Equal(consumed, stream) {
					t.Fatalf("clean EOF but frames cover %d of %d bytes", len(consumed), len(stream))
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v does not wrap ErrMalformed", err)
				}
				return
			}
			if len(p) == 0 || len(p)+FramePrefixSize > MaxFrameSize {
				t.Fatalf("frame of %d bytes", len(p))
			}
			var err2 error
			if consumed, err2 = AppendFrame(consumed, p); err2 != nil {
				t.Fatal(err2)
			}
		}
	})
}

// TestFrameReaderAllocatesLargeFramesAsBytesArrive: a reader with a raised
// limit (admin and AutoRecovery accept MaxFrameSizeLimit) given a prefix
// announcing a frame near that limit, then only a few bytes, fails with
// ErrTruncated having allocated about MaxFrameSize, not the announced
// length; a large frame that does arrive is read whole.
func TestFrameReaderAllocatesLargeFramesAsBytesArrive(t *testing.T) {
	var announce [4]byte
	binary.BigEndian.PutUint32(announce[:], MaxFrameSizeLimit-8)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fr := NewFrameReaderMax(bytes.NewReader(append(announce[:], make([]byte, 100)...)), MaxFrameSizeLimit)
	if _, err := fr.Next(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a 4-byte promise: %v, want ErrTruncated", err)
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 2*MaxFrameSize {
		t.Fatalf("allocated %d MiB for a frame that sent 100 bytes", grown>>20)
	}

	payload := bytes.Repeat([]byte("0123456789abcdef"), (3*MaxFrameSize)/16)
	framed, err := AppendFrameMax(nil, payload, MaxFrameSizeLimit)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewFrameReaderMax(bytes.NewReader(framed), MaxFrameSizeLimit).Next()
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("a %d-byte frame: %d bytes, %v", len(payload), len(got), err)
	}
}
