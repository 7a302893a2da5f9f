package digest

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"slices"
	"strconv"
	"sync"
)

// Type is a ledger's digest type, with the numbers of DataFormats.proto
// LedgerMetadataFormat.DigestType so it converts to and from ledger
// metadata without a table.
type Type int32

// The digest types BookKeeper defines.
const (
	CRC32  Type = 1
	HMAC   Type = 2
	CRC32C Type = 3
	DUMMY  Type = 4
)

// Fixed sizes of the formats, in bytes.
const (
	// EntryHeaderSize is Java's METADATA_LENGTH: ledgerId, entryId, LAC and
	// length ahead of the digest in an entry body.
	EntryHeaderSize = 32
	// LACHeaderSize is Java's LAC_METADATA_LENGTH: ledgerId and lac ahead of
	// the digest in a LAC body.
	LACHeaderSize = 16
	// MasterKeySize is the size of a master key and of a MAC key (SHA-1).
	MasterKeySize = sha1.Size
	// MaxDigestSize is the largest digest of any type (HMAC).
	MaxDigestSize = sha1.Size
)

// String returns the DataFormats.proto name, or Type(n) for unknown values.
func (t Type) String() string {
	switch t {
	case CRC32:
		return "CRC32"
	case HMAC:
		return "HMAC"
	case CRC32C:
		return "CRC32C"
	case DUMMY:
		return "DUMMY"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Size returns the digest size D in bytes: 8, 20, 4 or 0. It returns -1 for
// an unknown type; check Valid first when t comes from outside.
func (t Type) Size() int {
	switch t {
	case CRC32:
		return 8
	case HMAC:
		return sha1.Size
	case CRC32C:
		return 4
	case DUMMY:
		return 0
	}
	return -1
}

// Valid reports whether t is one of the four digest types.
func (t Type) Valid() bool { return t.Size() >= 0 }

// MasterKey returns SHA1("ledger" ‖ password), the ledger key sent with adds,
// fences and WRITE_LAC for every digest type. The password is used as raw
// bytes; nil and empty give the same key.
func MasterKey(password []byte) [MasterKeySize]byte {
	return prefixedSHA1("ledger", password)
}

// MACKey returns SHA1("mac" ‖ password), the HMAC key of HMAC digests.
func MACKey(password []byte) [MasterKeySize]byte {
	return prefixedSHA1("mac", password)
}

func prefixedSHA1(prefix string, password []byte) [sha1.Size]byte {
	h := sha1.New()
	h.Write([]byte(prefix))
	h.Write(password)
	var out [sha1.Size]byte
	h.Sum(out[:0])
	return out
}

// castagnoli is the table crc32.Update recognises to take the hardware
// (SSE4.2 / ARMv8 CRC) path; MakeTable always returns the same pointer.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A Digester computes and checks the digests of one ledger: one digest type
// and, for HMAC, one key. Build it once per ledger handle. It is safe for
// concurrent use. In the steady state Append* and Verify* allocate nothing
// when dst has room and verification succeeds (HMAC states are pooled, so
// one is built again only after the garbage collector empties the pool).
type Digester struct {
	typ  Type
	size int
	// macs pools HMAC states keyed with MACKey(password); nil unless typ is
	// HMAC. A hash.Hash is not safe for concurrent use, and building one
	// allocates, so each call borrows one.
	macs *sync.Pool
}

// macState is a pooled HMAC with a scratch buffer for the computed MAC, so
// Sum writes into heap memory the pool already owns instead of a fresh slice.
type macState struct {
	h   hash.Hash
	sum [sha1.Size]byte
}

// New returns a Digester for type t and the ledger's password (which only
// HMAC uses for digests). It returns an error wrapping ErrUnknownType for an
// unknown t.
func New(t Type, password []byte) (*Digester, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, int32(t))
	}
	d := &Digester{typ: t, size: t.Size()}
	if t == HMAC {
		key := MACKey(password)
		d.macs = &sync.Pool{New: func() any {
			return &macState{h: hmac.New(sha1.New, key[:])}
		}}
	}
	return d, nil
}

// Type returns the digest type.
func (d *Digester) Type() Type { return d.typ }

// Size returns the digest size D in bytes.
func (d *Digester) Size() int { return d.size }

// appendDigest appends the digest of header ‖ payload to dst. header may
// alias dst: it is read before dst is written.
func (d *Digester) appendDigest(dst, header, payload []byte) []byte {
	switch d.typ {
	case CRC32:
		c := crc32.Update(crc32.ChecksumIEEE(header), crc32.IEEETable, payload)
		// Java stores the CRC as a long: the high 4 bytes are zero.
		return binary.BigEndian.AppendUint64(dst, uint64(c))
	case CRC32C:
		c := crc32.Update(crc32.Update(0, castagnoli, header), castagnoli, payload)
		return binary.BigEndian.AppendUint32(dst, c)
	case HMAC:
		s := d.macs.Get().(*macState)
		s.h.Reset()
		s.h.Write(header)
		s.h.Write(payload)
		dst = s.h.Sum(dst)
		d.macs.Put(s)
		return dst
	}
	return dst // DUMMY
}

// digestMatches reports whether stored (len D) is the digest of
// header ‖ payload. It compares all D bytes, so a CRC32 digest with nonzero
// high bytes fails as in Java (ByteBufUtil.equals over 8 bytes).
func (d *Digester) digestMatches(header, payload, stored []byte) bool {
	switch d.typ {
	case CRC32:
		c := crc32.Update(crc32.ChecksumIEEE(header), crc32.IEEETable, payload)
		return binary.BigEndian.Uint64(stored) == uint64(c)
	case CRC32C:
		c := crc32.Update(crc32.Update(0, castagnoli, header), castagnoli, payload)
		return binary.BigEndian.Uint32(stored) == c
	case HMAC:
		s := d.macs.Get().(*macState)
		s.h.Reset()
		s.h.Write(header)
		s.h.Write(payload)
		ok := hmac.Equal(s.h.Sum(s.sum[:0]), stored)
		d.macs.Put(s)
		return ok
	}
	return true // DUMMY
}

// digestMismatch builds the FieldDigest error; failure path only.
func (d *Digester) digestMismatch(header, payload, stored []byte) error {
	return &MismatchError{
		Type:       d.typ,
		Field:      FieldDigest,
		WantDigest: d.appendDigest(nil, header, payload),
		GotDigest:  slices.Clone(stored),
	}
}

// sizeMismatch builds the FieldSize error for a body shorter than minBytes.
func (d *Digester) sizeMismatch(minBytes, gotBytes int) error {
	return &MismatchError{Type: d.typ, Field: FieldSize, Want: int64(minBytes), Got: int64(gotBytes)}
}
