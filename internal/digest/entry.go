package digest

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Entry is a verified entry body, decoded.
type Entry struct {
	LedgerID int64
	EntryID  int64
	// LAC is the writer's last add confirmed when it sent the entry.
	LAC int64
	// Length is the cumulative ledger length including this entry's payload.
	Length int64
	// Payload aliases the verified body (capacity clipped to its length, so
	// appending to it never writes into the caller's buffer).
	Payload []byte
}

// AppendEntryHeader appends the first EntryHeaderSize+D bytes of the entry
// body (header and digest of header ‖ payload) to dst and returns the
// extended slice. The payload itself is not appended, so a sender can write
// the result and the payload as two buffers without copying the payload.
func (d *Digester) AppendEntryHeader(dst []byte, ledgerID, entryID, lac, length int64, payload []byte) []byte {
	dst = slices.Grow(dst, EntryHeaderSize+d.size)
	return d.appendEntryHeader(dst, ledgerID, entryID, lac, length, payload)
}

// AppendEntry appends the whole entry body (header, digest, payload) to dst
// and returns the extended slice.
func (d *Digester) AppendEntry(dst []byte, ledgerID, entryID, lac, length int64, payload []byte) []byte {
	dst = slices.Grow(dst, EntryHeaderSize+d.size+len(payload))
	dst = d.appendEntryHeader(dst, ledgerID, entryID, lac, length, payload)
	return append(dst, payload...)
}

func (d *Digester) appendEntryHeader(dst []byte, ledgerID, entryID, lac, length int64, payload []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ledgerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(entryID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(lac))
	dst = binary.BigEndian.AppendUint64(dst, uint64(length))
	return d.appendDigest(dst, dst[start:start+EntryHeaderSize], payload)
}

// VerifyEntry checks an entry body read from a bookie for entry entryID of
// ledger ledgerID and decodes it. The checks, in Java's order
// (DigestManager.verifyDigest): the body holds at least EntryHeaderSize+D
// bytes, the digest matches, body[0:8] is ledgerID, and body[8:16] is
// entryID unless entryID is -1 (a LAC read, which asks for the last entry
// without knowing its id). Bytes after the digest are the payload, whatever
// their number. A failure is a *MismatchError naming the first failed check
// (see ErrDigestMismatch). The returned Payload aliases body.
func (d *Digester) VerifyEntry(body []byte, ledgerID, entryID int64) (Entry, error) {
	n := EntryHeaderSize + d.size
	if len(body) < n {
		return Entry{}, d.sizeMismatch(n, len(body))
	}
	header, stored, payload := body[:EntryHeaderSize], body[EntryHeaderSize:n], body[n:len(body):len(body)]
	if !d.digestMatches(header, payload, stored) {
		return Entry{}, d.digestMismatch(header, payload, stored)
	}
	e := Entry{
		LedgerID: int64(binary.BigEndian.Uint64(body[0:8])),
		EntryID:  int64(binary.BigEndian.Uint64(body[8:16])),
		LAC:      int64(binary.BigEndian.Uint64(body[16:24])),
		Length:   int64(binary.BigEndian.Uint64(body[24:32])),
		Payload:  payload,
	}
	if e.LedgerID != ledgerID {
		return Entry{}, &MismatchError{Type: d.typ, Field: FieldLedgerID, Want: ledgerID, Got: e.LedgerID}
	}
	if entryID != -1 && e.EntryID != entryID {
		return Entry{}, &MismatchError{Type: d.typ, Field: FieldEntryID, Want: entryID, Got: e.EntryID}
	}
	return e, nil
}

// AppendLAC appends a LAC body (ledgerId, lac, digest of those 16 bytes) to
// dst and returns the extended slice.
func (d *Digester) AppendLAC(dst []byte, ledgerID, lac int64) []byte {
	dst = slices.Grow(dst, LACHeaderSize+d.size)
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ledgerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(lac))
	return d.appendDigest(dst, dst[start:start+LACHeaderSize], nil)
}

// VerifyLAC checks a LAC body of ledger ledgerID and returns its lac. The
// checks, in Java's order (DigestManager.verifyDigestAndReturnLac): the body
// holds at least LACHeaderSize+D bytes, the digest over bytes 0..15 matches,
// and body[0:8] is ledgerID. Bytes after the digest are ignored, as in Java.
// A failure is a *MismatchError (see ErrDigestMismatch).
func (d *Digester) VerifyLAC(body []byte, ledgerID int64) (lac int64, err error) {
	n := LACHeaderSize + d.size
	if len(body) < n {
		return 0, d.sizeMismatch(n, len(body))
	}
	header, stored := body[:LACHeaderSize], body[LACHeaderSize:n]
	if !d.digestMatches(header, nil, stored) {
		return 0, d.digestMismatch(header, nil, stored)
	}
	if got := int64(binary.BigEndian.Uint64(body[0:8])); got != ledgerID {
		return 0, &MismatchError{Type: d.typ, Field: FieldLedgerID, Want: ledgerID, Got: got}
	}
	return int64(binary.BigEndian.Uint64(body[8:16])), nil
}

// ParseEntryHeader decodes the first EntryHeaderSize bytes of an entry body
// without checking any digest: the bookie never knows the digest type or
// password and uses only these fields. A shorter body gives an error
// matching ErrShortBody (not ErrDigestMismatch: nothing was verified).
func ParseEntryHeader(body []byte) (ledgerID, entryID, lac, length int64, err error) {
	if len(body) < EntryHeaderSize {
		return 0, 0, 0, 0, fmt.Errorf("%w: entry body is %d bytes, need at least %d", ErrShortBody, len(body), EntryHeaderSize)
	}
	return int64(binary.BigEndian.Uint64(body[0:8])),
		int64(binary.BigEndian.Uint64(body[8:16])),
		int64(binary.BigEndian.Uint64(body[16:24])),
		int64(binary.BigEndian.Uint64(body[24:32])),
		nil
}
