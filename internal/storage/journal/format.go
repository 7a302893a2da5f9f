package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// Format constants (see the package comment).
const (
	// FormatVersion is written in every new file header. Readers also read
	// formatVersion1 files (written by older builds) and refuse any other
	// version with a clear error.
	FormatVersion = 2

	formatVersion1 = 1

	// GroupHeaderSize is the size of a version 2 group header: CRC,
	// payload length, payload CRC, flags, sequence number, previous file's
	// end.
	GroupHeaderSize = 32

	// GroupAlignment is the alignment of every group start. It bounds the
	// padding per group and gives replay a fixed set of offsets to probe for
	// group starts after damaged bytes.
	GroupAlignment = 512

	// FirstGroupOffset is where the first group of a file starts: the header
	// occupies one alignment block.
	FirstGroupOffset = GroupAlignment

	// RecordHeaderSize is the size of a record header: CRC, length, type,
	// flags.
	RecordHeaderSize = 10

	// MaxPayloadBytes bounds one record's payload. BookKeeper's default
	// maximum frame is 5 MiB, so an entry body fits with room to spare; the
	// bound keeps a corrupt length from making replay read gigabytes.
	MaxPayloadBytes = 64 << 20

	fileHeaderUsed = 44
	fileMagic      = "FOLIOJNL"
	fileSuffix     = ".jnl"
	tmpSuffix      = ".jnl.tmp"

	flagGroupStart = 1 << 0
	knownFlags     = flagGroupStart
)

// RecordType says what a record holds. The zero value is invalid: an
// all-zero header is preallocated space, not a record.
type RecordType uint8

// Record types of format version 1. New types may be added; a reader that
// meets a type it does not know fails with an error naming file and offset.
const (
	TypeAddEntry    RecordType = 1 // ledger id, entry id, entry body
	TypeMasterKey   RecordType = 2 // ledger id, master key
	TypeFence       RecordType = 3 // ledger id
	TypeExplicitLAC RecordType = 4 // ledger id, explicit LAC body
)

func (t RecordType) String() string {
	switch t {
	case TypeAddEntry:
		return "add-entry"
	case TypeMasterKey:
		return "master-key"
	case TypeFence:
		return "fence"
	case TypeExplicitLAC:
		return "explicit-lac"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// fixedPayload is the size of the fixed part of each type's payload (the
// ids before the variable-length body), or -1 for unknown types.
func fixedPayload(t RecordType) int {
	switch t {
	case TypeAddEntry:
		return 16
	case TypeMasterKey, TypeExplicitLAC:
		return 8
	case TypeFence:
		return 8
	}
	return -1
}

// hasBody reports whether a type carries a variable-length body.
func hasBody(t RecordType) bool { return t != TypeFence }

// Record is one journal record. On append, Body is copied before Append
// returns; the caller may reuse it at once. On replay, Body aliases the
// reader's buffer and is valid only until the callback returns.
type Record struct {
	Type     RecordType
	LedgerID int64
	EntryID  int64  // TypeAddEntry only
	Body     []byte // entry body, master key or explicit LAC; nil for TypeFence
}

// encodedSize returns the bytes r takes on disk, header included.
func (r *Record) encodedSize() int {
	n := RecordHeaderSize + fixedPayload(r.Type)
	if hasBody(r.Type) {
		n += len(r.Body)
	}
	return n
}

// validate checks a record before it is written (the first half of the
// write/read assertion pair; decodePayload is the second).
func (r *Record) validate() error {
	if fixedPayload(r.Type) < 0 {
		return fmt.Errorf("journal: cannot append record of unknown %v", r.Type)
	}
	if !hasBody(r.Type) && len(r.Body) != 0 {
		return fmt.Errorf("journal: %v record carries no body, got %d bytes", r.Type, len(r.Body))
	}
	if r.encodedSize()-RecordHeaderSize > MaxPayloadBytes {
		return fmt.Errorf("%w: %d-byte body", ErrRecordTooLarge, len(r.Body))
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC computes the checksum of the record whose header starts
// buf[0:] at (fileID, offset); buf holds the whole encoded record.
func recordCRC(fileID uint64, offset int64, buf []byte) uint32 {
	crc := positionCRC(fileID, uint64(offset))
	return crc32.Update(crc, castagnoli, buf[4:])
}

// positionCRC is crc32.Update(0, castagnoli, fileID LE | offset LE),
// computed bytewise: handing crc32 a 16-byte stack array makes it escape,
// one allocation per record on the add path.
func positionCRC(fileID, offset uint64) uint32 {
	crc := ^uint32(0)
	for _, v := range [2]uint64{fileID, offset} {
		for range 8 {
			crc = castagnoli[byte(crc)^byte(v)] ^ (crc >> 8)
			v >>= 8
		}
	}
	return ^crc
}

// appendRecord encodes r at the end of dst, as written at (fileID, offset),
// and returns the extended slice.
func appendRecord(dst []byte, fileID uint64, offset int64, r *Record, groupStart bool) []byte {
	size := r.encodedSize()
	start := len(dst)
	dst = growLen(dst, size)
	b := dst[start:]
	binary.LittleEndian.PutUint32(b[4:], uint32(size-RecordHeaderSize))
	b[8] = byte(r.Type)
	b[9] = 0
	if groupStart {
		b[9] = flagGroupStart
	}
	binary.LittleEndian.PutUint64(b[10:], uint64(r.LedgerID))
	p := b[18:]
	if r.Type == TypeAddEntry {
		binary.LittleEndian.PutUint64(p, uint64(r.EntryID))
		p = p[8:]
	}
	if hasBody(r.Type) {
		copy(p, r.Body)
	}
	binary.LittleEndian.PutUint32(b[0:], recordCRC(fileID, offset, b))
	return dst
}

// growLen extends b by n bytes, reallocating with doubling if needed.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// decodePayload fills r from a record of type t whose checksum is valid.
// A well-checksummed record that does not parse was written by a format
// this reader does not know; the caller turns the error into a
// *CorruptionError with file and offset.
func decodePayload(t RecordType, flags byte, payload []byte, r *Record) error {
	if flags&^knownFlags != 0 {
		return fmt.Errorf("unknown record flags %#x (written by a newer format?)", flags)
	}
	fixed := fixedPayload(t)
	if fixed < 0 {
		return fmt.Errorf("unknown record %v (written by a newer format than version %d?)", t, FormatVersion)
	}
	if len(payload) < fixed || (!hasBody(t) && len(payload) != fixed) {
		return fmt.Errorf("malformed %v record: %d-byte payload", t, len(payload))
	}
	*r = Record{Type: t, LedgerID: int64(binary.LittleEndian.Uint64(payload))}
	p := payload[8:]
	if t == TypeAddEntry {
		r.EntryID = int64(binary.LittleEndian.Uint64(p))
		p = p[8:]
	}
	if hasBody(t) {
		r.Body = p
	}
	return nil
}

// fileHeader is the decoded header block of a journal file.
type fileHeader struct {
	fileID   uint64
	prevID   uint64 // 0: no previous file known
	prevEnd  int64
	flags    uint32
	version  uint32
	magicOK  bool
	crcValid bool
}

func encodeFileHeader(version uint32, fileID, prevID uint64, prevEnd int64) []byte {
	b := make([]byte, FirstGroupOffset)
	copy(b, fileMagic)
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint32(b[12:], 0)
	binary.LittleEndian.PutUint64(b[16:], fileID)
	binary.LittleEndian.PutUint64(b[24:], prevID)
	binary.LittleEndian.PutUint64(b[32:], uint64(prevEnd))
	binary.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], castagnoli))
	return b
}

// decodeFileHeader parses b (at least fileHeaderUsed bytes) and checks it
// belongs to file id want.
func decodeFileHeader(b []byte, want uint64) (fileHeader, error) {
	if len(b) < fileHeaderUsed {
		return fileHeader{}, fmt.Errorf("file header truncated: %d bytes", len(b))
	}
	h := fileHeader{
		magicOK:  string(b[:8]) == fileMagic,
		version:  binary.LittleEndian.Uint32(b[8:]),
		flags:    binary.LittleEndian.Uint32(b[12:]),
		fileID:   binary.LittleEndian.Uint64(b[16:]),
		prevID:   binary.LittleEndian.Uint64(b[24:]),
		prevEnd:  int64(binary.LittleEndian.Uint64(b[32:])),
		crcValid: binary.LittleEndian.Uint32(b[40:]) == crc32.Checksum(b[:40], castagnoli),
	}
	switch {
	case !h.magicOK:
		return h, fmt.Errorf("bad magic %q: not a Folio journal file", b[:8])
	case !h.crcValid:
		return h, fmt.Errorf("file header checksum mismatch")
	case h.version != formatVersion1 && h.version != FormatVersion:
		return h, fmt.Errorf("format version %d, this build reads versions %d and %d", h.version, formatVersion1, FormatVersion)
	case h.flags != 0:
		return h, fmt.Errorf("unknown header flags %#x", h.flags)
	case h.fileID != want:
		return h, fmt.Errorf("header names file id %d, file name says %d", h.fileID, want)
	case h.prevID >= h.fileID:
		return h, fmt.Errorf("header names previous file id %d, not below its own id %d", h.prevID, h.fileID)
	case h.prevID == 0 && h.prevEnd != 0,
		h.prevID != 0 && h.prevEnd < FirstGroupOffset && !(h.version == FormatVersion && h.prevEnd == 0):
		// Version 2 allows prev end 0 with a previous file: "recorded in
		// this file's group headers" (a file created ahead of rotation).
		return h, fmt.Errorf("header says the previous file %d ended at offset %d", h.prevID, h.prevEnd)
	}
	return h, nil
}

// fileName returns the name of journal file id.
func fileName(id uint64) string { return fmt.Sprintf("%016x%s", id, fileSuffix) }

// parseFileName returns the id of a journal file name, and whether it is a
// leftover temporary file.
func parseFileName(name string) (id uint64, tmp bool, ok bool) {
	base := name
	switch {
	case strings.HasSuffix(name, tmpSuffix):
		base, tmp = strings.TrimSuffix(name, tmpSuffix), true
	case strings.HasSuffix(name, fileSuffix):
		base = strings.TrimSuffix(name, fileSuffix)
	default:
		return 0, false, false
	}
	if len(base) != 16 {
		return 0, false, false
	}
	id, err := strconv.ParseUint(base, 16, 64)
	if err != nil || id == 0 {
		return 0, false, false
	}
	return id, tmp, true
}

func alignUp(off int64) int64 {
	return (off + GroupAlignment - 1) &^ (GroupAlignment - 1)
}

// groupHeader is a decoded version 2 group header.
type groupHeader struct {
	length     int64  // payload bytes after the header
	payloadCRC uint32 // CRC32C of the payload
	seq        uint64 // 1 for the first group of a file, then +1
	prevEnd    int64  // where the previous file's log ended; 0: no previous file
}

// groupCRC is the checksum of the group header b[:GroupHeaderSize] at
// (fileID, offset): seeded with the position, like records.
func groupCRC(fileID uint64, offset int64, b []byte) uint32 {
	return crc32.Update(positionCRC(fileID, uint64(offset)), castagnoli, b[4:GroupHeaderSize])
}

// putGroupHeader fills b[:GroupHeaderSize] with the header of the group
// whose payload is b[GroupHeaderSize:], written at (fileID, offset).
func putGroupHeader(b []byte, fileID uint64, offset int64, seq uint64, prevEnd int64) {
	payload := b[GroupHeaderSize:]
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(payload, castagnoli))
	binary.LittleEndian.PutUint32(b[12:], 0)
	binary.LittleEndian.PutUint64(b[16:], seq)
	binary.LittleEndian.PutUint64(b[24:], uint64(prevEnd))
	binary.LittleEndian.PutUint32(b, groupCRC(fileID, offset, b))
}

// decodeGroupHeader parses the group header in b (at least
// GroupHeaderSize bytes) read at (fileID, offset). ok is false if its
// checksum does not match (no header was written there, or it is
// damaged); err is set only for a header with a valid checksum that this
// version cannot accept.
func decodeGroupHeader(fileID uint64, offset int64, b []byte) (h groupHeader, ok bool, err error) {
	if len(b) < GroupHeaderSize || allZero(b[:GroupHeaderSize]) || binary.LittleEndian.Uint32(b) != groupCRC(fileID, offset, b) {
		// All zeros is preallocated space, never a header (the writer's
		// sequence numbers start at 1): at about one (file, offset) in
		// 2^32 the CRC of zeros is zero, and a check that went on would
		// call the zero tail of such a file corrupt at every start.
		return h, false, nil
	}
	h = groupHeader{
		length:     int64(binary.LittleEndian.Uint32(b[4:])),
		payloadCRC: binary.LittleEndian.Uint32(b[8:]),
		seq:        binary.LittleEndian.Uint64(b[16:]),
		prevEnd:    int64(binary.LittleEndian.Uint64(b[24:])),
	}
	switch flags := binary.LittleEndian.Uint32(b[12:]); {
	case flags != 0:
		return h, false, fmt.Errorf("unknown group header flags %#x (written by a newer format?)", flags)
	case h.seq == 0:
		return h, false, fmt.Errorf("group header with sequence number 0")
	case h.length < RecordHeaderSize:
		return h, false, fmt.Errorf("group header with length %d, shorter than a record header", h.length)
	case h.prevEnd != 0 && h.prevEnd < FirstGroupOffset:
		return h, false, fmt.Errorf("group header says the previous file ended at offset %d", h.prevEnd)
	}
	return h, true, nil
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
