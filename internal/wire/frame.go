package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// MaxFrameSize is the default largest frame, length prefix included (Java's
// nettyMaxFrameSizeBytes default, on client and bookie alike). Bookies and
// clients may be configured with another limit (Pulsar sets 5253120, 5 MiB
// plus room for its headers), between MinFrameSizeLimit and
// MaxFrameSizeLimit.
const MaxFrameSize = 5 << 20

// The bounds of a configured frame limit. The lower one leaves room for
// every fixed-size request and response; the upper one is the largest
// entry log (no entry can be larger), and bounds what one frame makes a
// peer allocate.
const (
	MinFrameSizeLimit = 64 << 10
	MaxFrameSizeLimit = 1 << 30
)

// CheckFrameLimit validates a configured frame limit.
func CheckFrameLimit(n int) error {
	if n < MinFrameSizeLimit || n > MaxFrameSizeLimit {
		return fmt.Errorf("frame size limit %d out of range [%d, %d]", n, MinFrameSizeLimit, MaxFrameSizeLimit)
	}
	return nil
}

// FramePrefixSize is the size of the length prefix.
const FramePrefixSize = 4

// MaxPayloadSize is the largest payload a frame carries.
const MaxPayloadSize = MaxFrameSize - FramePrefixSize

// FrameReader reads frames from a stream. It reuses one buffer: the payload
// returned by Next is valid until the next call to Next. It never allocates
// more than the announced length, and never more than MaxFrameSize.
type FrameReader struct {
	r      io.Reader
	prefix [FramePrefixSize]byte
	buf    []byte
	max    int
}

// NewFrameReader returns a reader of frames up to MaxFrameSize from r. r is
// read with io.ReadFull, so it should be buffered (bufio.Reader).
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r, max: MaxFrameSize}
}

// NewFrameReaderMax is NewFrameReader with a frame limit of max bytes,
// prefix included (MaxFrameSize when max is 0).
func NewFrameReaderMax(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = MaxFrameSize
	}
	return &FrameReader{r: r, max: max}
}

// Next reads one frame and returns its payload. At a clean end of stream
// (no byte of a new frame read) it returns io.EOF; a stream that ends inside a
// frame gives an error wrapping ErrTruncated. A frame over the limit gives
// ErrFrameTooLarge as soon as its prefix is read, and an empty frame
// ErrEmptyFrame. After an error the stream is out of step: close it.
func (fr *FrameReader) Next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.prefix[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: stream ended inside a frame's length prefix", ErrTruncated)
		}
		return nil, err
	}
	n, err := PayloadLen(fr.prefix[:], fr.max)
	if err != nil {
		return nil, err
	}
	if n > cap(fr.buf) && n > MaxFrameSize {
		// A frame over the default limit (a raised nettyMaxFrameSizeBytes)
		// gets memory as its bytes arrive, not as its prefix announces: a
		// peer that sends 4 bytes must not make this process allocate up
		// to MaxFrameSizeLimit.
		return fr.readGrowing(n)
	}
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	payload := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: stream ended inside a %d-byte frame", ErrTruncated, n)
		}
		return nil, err
	}
	return payload, nil
}

// readGrowing reads an n-byte payload into a buffer that starts at
// MaxFrameSize and doubles, up to n, only as the bytes arrive.
func (fr *FrameReader) readGrowing(n int) ([]byte, error) {
	buf := make([]byte, 0, MaxFrameSize)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), n))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(fr.r, buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("%w: stream ended inside a %d-byte frame", ErrTruncated, n)
			}
			return nil, err
		}
	}
	return buf, nil // not kept for the next frame: large frames are rare
}

// Detach hands the current payload's buffer to the caller, who may keep it:
// the next Next reads into a new buffer. A server that queues a decoded add
// (whose body aliases the frame) detaches before reading on.
func (fr *FrameReader) Detach() { fr.buf = nil }

// PayloadLen validates a 4-byte length prefix against a frame limit
// (max counts the prefix, as Netty does) and returns the payload length.
func PayloadLen(prefix []byte, max int) (int, error) {
	n := binary.BigEndian.Uint32(prefix)
	if n == 0 {
		return 0, ErrEmptyFrame
	}
	// Netty reads the length unsigned: 2^31 and above are over any limit.
	if uint64(n)+FramePrefixSize > uint64(max) {
		return 0, fmt.Errorf("%w: %d bytes announced, limit %d including the 4-byte prefix", ErrFrameTooLarge, n, max)
	}
	return int(n), nil
}

// BeginFrame appends a placeholder length prefix to dst and returns the
// buffer and the prefix's offset; append the payload, then call EndFrame.
func BeginFrame(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// EndFrame fills in the length prefix at off for everything appended after
// it. It fails, leaving dst unusable, if the frame exceeds MaxFrameSize: the
// peer would close the connection on it.
func EndFrame(dst []byte, off int) ([]byte, error) {
	return EndFrameMax(dst, off, MaxFrameSize)
}

// EndFrameMax is EndFrame with a frame limit of max bytes, prefix included
// (MaxFrameSize when max is 0).
func EndFrameMax(dst []byte, off int, max int) ([]byte, error) {
	if max <= 0 {
		max = MaxFrameSize
	}
	n := len(dst) - off - FramePrefixSize
	if n <= 0 {
		return dst, ErrEmptyFrame
	}
	if n > max-FramePrefixSize {
		return dst, fmt.Errorf("%w: %d-byte payload, limit %d", ErrFrameTooLarge, n, max-FramePrefixSize)
	}
	binary.BigEndian.PutUint32(dst[off:], uint32(n))
	return dst, nil
}

// AppendFrame appends payload to dst as one frame.
func AppendFrame(dst, payload []byte) ([]byte, error) {
	return AppendFrameMax(dst, payload, MaxFrameSize)
}

// AppendFrameMax is AppendFrame with a frame limit of max bytes.
func AppendFrameMax(dst, payload []byte, max int) ([]byte, error) {
	dst, off := BeginFrame(dst)
	return EndFrameMax(append(dst, payload...), off, max)
}
