package wire

import (
	"errors"
	"fmt"
)

// Errors of decoding. Every one wraps ErrMalformed, so a connection can tell
// bad input (close this one connection) from other failures; the specific
// error says what was wrong.
var (
	// ErrMalformed is the root of all decoding errors.
	ErrMalformed = errors.New("malformed message")
	// ErrFrameTooLarge: the length prefix announces more than MaxFrameSize.
	ErrFrameTooLarge = fmt.Errorf("%w: frame too large", ErrMalformed)
	// ErrEmptyFrame: a frame with length 0.
	ErrEmptyFrame = fmt.Errorf("%w: empty frame", ErrMalformed)
	// ErrUnknownOp: an opcode this protocol version does not define.
	ErrUnknownOp = fmt.Errorf("%w: unknown operation", ErrMalformed)
	// ErrMissingField: a proto2 required field, or a fixed v2 field, is absent.
	ErrMissingField = fmt.Errorf("%w: missing required field", ErrMalformed)
	// ErrTruncated: the message ends inside a field or a fixed layout.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrMalformed)
	// ErrBadEncoding: bytes that are not a valid encoding (bad varint, bad
	// wire type, invalid UTF-8 in a string, field number 0, ...).
	ErrBadEncoding = fmt.Errorf("%w: invalid encoding", ErrMalformed)
)
