// Package v3 is the codec of BookKeeper's protocol v3: the protobuf messages
// Request and Response of BookkeeperProtocol.proto (proto2), read and written
// by hand with protowire into and from the types of package wire.
//
// The payload of a frame (wire.AppendFrame, wire.FrameReader) is one encoded
// Request (client to bookie) or Response (bookie to client):
//
//	Request  = header(1) [readRequest(100) | addRequest(101) | authRequest(102) |
//	           writeLacRequest(103) | readLacRequest(104) | getBookieInfoRequest(105) |
//	           startTLSRequest(106) | forceLedgerRequest(107) |
//	           getListOfEntriesOfLedgerRequest(108)]... requestContext(200)*
//	Response = header(1) status(2) [readResponse(100) | ... (as above, *Response)]...
//
// The schema is in protocolpb/bookkeeper_protocol.proto; the generated code
// there serves tests only. Hand-written code keeps the hot path (adds and
// reads) free of allocations: decoded bytes fields alias the payload.
//
// # Decoding rules
//
// The decoders accept and reject what proto.Unmarshal of the generated
// types does (the tests compare the two on golden, mutated and fuzzed
// input), except for enums, which are closed as in BookKeeper's Java parser:
//   - unknown fields, and known fields sent with another wire type, are
//     skipped (groups included, nested up to protowire's recursion limit);
//     field number 0, numbers above 2^29-1, a stray end-group tag, wire types
//     6 and 7, over-long varints and lengths past the end are errors;
//   - a repeated scalar field keeps its last value; repeated occurrences of a
//     sub-message merge into one;
//   - every required field must be present, in the message and in each
//     sub-message present (each ContextPair too);
//   - enums are closed: a value outside the enum is an unknown field, so it
//     does not overwrite an earlier valid value, leaves an optional enum unset
//     and a required enum missing. (Go's proto.Unmarshal treats proto2 enums
//     as open; Folio follows Java, whose parse failure is what breaks a
//     connection, spec/wire-protocol.md §2.4.)
//   - strings are not checked for UTF-8: proto2 does not require it, and
//     neither Go's nor Java's parser checks.
//
// Errors wrap wire.ErrTruncated, wire.ErrBadEncoding or wire.ErrMissingField
// (all wire.ErrMalformed). Decoding never panics and allocates only for
// strings and requestContext entries; its memory is bounded by the payload.
//
// # Encoding rules
//
// The encoders write fields in field-number order, so their output equals
// deterministic proto.Marshal of the same message, byte for byte. Only the
// sub-messages in Has are written. Required fields are always written (an
// empty or nil bytes field as a zero length). An optional field is written
// when its Has flag is set or its value is not zero (non-nil bytes, a
// non-zero flag): a fencing read with MasterKey but no HasMasterKey still
// carries its key. A decoded message satisfies both rules alike, so decode,
// encode, decode is the identity.
//
// The encoders refuse a message that a proto2 parser would reject or change:
// a required enum outside its enum (wrapping wire.ErrMissingField, which is
// what the peer would report), an optional enum outside its enum, or a
// sub-message v3 cannot carry (BATCH_READ; wire.ErrBadEncoding).
package v3

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/foliodb/folio/internal/wire"
)

// Field numbers of BookkeeperProtocol.proto. Never change one.
const (
	// Request and Response.
	fieldHeader        protowire.Number = 1
	fieldStatus        protowire.Number = 2 // Response only
	fieldRead          protowire.Number = 100
	fieldAdd           protowire.Number = 101
	fieldAuth          protowire.Number = 102
	fieldWriteLAC      protowire.Number = 103
	fieldReadLAC       protowire.Number = 104
	fieldGetBookieInfo protowire.Number = 105
	fieldStartTLS      protowire.Number = 106
	fieldForceLedger   protowire.Number = 107
	fieldListEntries   protowire.Number = 108
	fieldContext       protowire.Number = 200 // Request only

	// BKPacketHeader.
	fieldVersion   protowire.Number = 1
	fieldOperation protowire.Number = 2
	fieldTxnID     protowire.Number = 3
	fieldPriority  protowire.Number = 4

	// The flag of ReadRequest and AddRequest.
	fieldFlag protowire.Number = 100
)

// allV3Bodies is the union of v3Bodies.
const allV3Bodies = wire.BodyRead | wire.BodyAdd | wire.BodyAuth | wire.BodyWriteLAC |
	wire.BodyReadLAC | wire.BodyGetBookieInfo | wire.BodyStartTLS | wire.BodyForceLedger |
	wire.BodyGetListOfEntries

// validVersion reports whether v is a ProtocolVersion value.
func validVersion(v int32) bool { return v >= wire.VersionOne && v <= wire.VersionThree }

// validStatus reports whether s is a StatusCode value (the same set as
// wire.Status.Valid, as a switch for the hot path).
func validStatus(s wire.Status) bool {
	switch s {
	case wire.StatusOK, wire.StatusNoLedger, wire.StatusNoEntry, wire.StatusBadRequest,
		wire.StatusIOError, wire.StatusUnauthorized, wire.StatusBadVersion, wire.StatusFenced,
		wire.StatusReadOnly, wire.StatusTooManyRequests, wire.StatusUnknownLedgerState:
		return true
	}
	return false
}

// validReadFlag reports whether f is a ReadRequest.Flag value.
func validReadFlag(f wire.ReadFlag) bool {
	return f == wire.ReadFlagFenceLedger || f == wire.ReadFlagEntryPiggyback
}

// validAddFlag reports whether f is an AddRequest.Flag value.
func validAddFlag(f wire.AddFlag) bool { return f == wire.AddFlagRecoveryAdd }

// parseError turns a negative protowire length into an error: ErrTruncated
// when the input ends inside a field, ErrBadEncoding otherwise.
func parseError(n int) error {
	err := protowire.ParseError(n)
	if err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: field runs past the end of its message", wire.ErrTruncated)
	}
	return fmt.Errorf("%w: %v", wire.ErrBadEncoding, err)
}
