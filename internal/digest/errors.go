package digest

import (
	"errors"
	"fmt"
)

// Errors returned by this package.
//
// Every failure of VerifyEntry and VerifyLAC is a *MismatchError and matches
// ErrDigestMismatch with errors.Is: that is the one thing a client needs to
// know (Java throws BKDigestMatchException for all of them), and it maps to
// one BookKeeper status. A body too short to hold the header and digest also
// matches ErrShortBody.
//
// ParseEntryHeader checks no digest, so its only error (a body shorter than
// EntryHeaderSize) matches ErrShortBody but not ErrDigestMismatch.
var (
	// ErrDigestMismatch: an entry or LAC body failed verification (size,
	// digest, ledger id or entry id). The answer of that bookie is bad.
	ErrDigestMismatch = errors.New("digest: body does not verify")
	// ErrShortBody: a body is shorter than its fixed fields.
	ErrShortBody = errors.New("digest: body too short")
	// ErrUnknownType: a digest type outside CRC32, HMAC, CRC32C, DUMMY.
	ErrUnknownType = errors.New("digest: unknown digest type")
)

// Names of the checks in MismatchError.Field; the wire names of the fields
// as Java logs them.
const (
	FieldSize     = "size"
	FieldDigest   = "digest"
	FieldLedgerID = "ledgerId"
	FieldEntryID  = "entryId"
)

// MismatchError reports which verification check failed and the expected and
// actual values. It is only built on the failure path, so its allocations do
// not touch the hot path.
type MismatchError struct {
	// Type is the digest type of the Digester that ran the check.
	Type Type
	// Field is one of FieldSize, FieldDigest, FieldLedgerID, FieldEntryID.
	Field string
	// Want and Got hold, for FieldSize, the minimum and actual body length in
	// bytes; for FieldLedgerID and FieldEntryID, the requested and the stored
	// id. They are zero for FieldDigest.
	Want, Got int64
	// WantDigest (computed) and GotDigest (stored in the body) are set for
	// FieldDigest only. They are copies, not aliases of the body.
	WantDigest, GotDigest []byte
}

func (e *MismatchError) Error() string {
	switch e.Field {
	case FieldSize:
		return fmt.Sprintf("digest: %s body is %d bytes, need at least %d", e.Type, e.Got, e.Want)
	case FieldDigest:
		return fmt.Sprintf("digest: %s digest mismatch: computed %x, body has %x", e.Type, e.WantDigest, e.GotDigest)
	default:
		return fmt.Sprintf("digest: %s mismatch: want %d, got %d", e.Field, e.Want, e.Got)
	}
}

// Is makes every MismatchError match ErrDigestMismatch, and a size failure
// also match ErrShortBody.
func (e *MismatchError) Is(target error) bool {
	return target == ErrDigestMismatch || (target == ErrShortBody && e.Field == FieldSize)
}
