package entrylog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Format constants (see the package comment for the layout).
const (
	// FormatVersion is the entry log format this package writes and reads.
	FormatVersion = 1
	// HeaderSize is the size of the file header in bytes.
	HeaderSize = 32
	// RecordHeaderSize is the size of the header in front of every entry body.
	RecordHeaderSize = 24
	// MaxEntryBytes bounds one entry body. A record header claiming more is
	// corrupt. BookKeeper's default frame limit is 5 MB; this leaves room.
	MaxEntryBytes = 64 << 20

	logMagic        = "FOLIOLOG"
	logSuffix       = ".log"
	compactingSufix = ".log.compacting"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Location is where one entry's record lives. It is the value the index
// stores for (ledger, entry).
type Location struct {
	// LogID names the entry log file ("%016x.log").
	LogID uint64
	// Offset is the byte offset of the record header in that file.
	Offset int64
	// Size is the length of the entry body in bytes (without the record header).
	Size uint32
}

func (l Location) String() string {
	return fmt.Sprintf("log %d offset %d size %d", l.LogID, l.Offset, l.Size)
}

// Placement is one flushed entry and where it now lives.
type Placement struct {
	LedgerID, EntryID int64
	Loc               Location
}

// Relocation is one entry moved by compaction from Old to New.
type Relocation struct {
	LedgerID, EntryID int64
	Old, New          Location
}

// LogFileName is the file name (not path) of entry log id.
func LogFileName(id uint64) string { return fmt.Sprintf("%016x%s", id, logSuffix) }

func compactingFileName(id uint64) string { return fmt.Sprintf("%016x%s", id, compactingSufix) }

// parseLogFileName returns the id of a "%016x.log" name.
func parseLogFileName(name string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(stem) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(stem, 16, 64)
	return id, err == nil
}

func encodeHeader(dst []byte, id uint64) {
	_ = dst[HeaderSize-1]
	copy(dst[0:8], logMagic)
	binary.BigEndian.PutUint32(dst[8:12], FormatVersion)
	binary.BigEndian.PutUint64(dst[12:20], id)
	clear(dst[20:28])
	binary.BigEndian.PutUint32(dst[28:32], crc32.Checksum(dst[0:28], castagnoli))
}

// checkHeader verifies a file header for log id; it returns a reason on failure.
func checkHeader(h []byte, id uint64) string {
	if len(h) < HeaderSize {
		return "short header"
	}
	if string(h[0:8]) != logMagic {
		return "bad magic"
	}
	if crc32.Checksum(h[0:28], castagnoli) != binary.BigEndian.Uint32(h[28:32]) {
		return "header checksum mismatch"
	}
	if v := binary.BigEndian.Uint32(h[8:12]); v != FormatVersion {
		return fmt.Sprintf("unsupported format version %d", v)
	}
	if got := binary.BigEndian.Uint64(h[12:20]); got != id {
		return fmt.Sprintf("header names log %d", got)
	}
	if binary.BigEndian.Uint64(h[20:28]) != 0 {
		return "reserved header bytes are not zero"
	}
	return ""
}

func recordCRC(hdr, body []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdr[0:4])
	c = crc32.Update(c, castagnoli, hdr[8:24])
	return crc32.Update(c, castagnoli, body)
}

// appendRecord appends one framed record to dst.
func appendRecord(dst []byte, ledgerID, entryID int64, body []byte) []byte {
	var hdr [RecordHeaderSize]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(len(body)))
	binary.BigEndian.PutUint64(hdr[8:16], uint64(ledgerID))
	binary.BigEndian.PutUint64(hdr[16:24], uint64(entryID))
	binary.BigEndian.PutUint32(hdr[4:8], recordCRC(hdr[:], body))
	dst = append(dst, hdr[:]...)
	return append(dst, body...)
}

// record is a decoded record; body aliases the buffer it was parsed from.
type record struct {
	ledgerID, entryID int64
	body              []byte
}

// parseRecord decodes the record at the start of b. It returns the record,
// its total size, and a failure reason; need > 0 means b is too short and
// need bytes are required.
func parseRecord(b []byte) (r record, total int, need int, reason string) {
	if len(b) < RecordHeaderSize {
		return r, 0, RecordHeaderSize, ""
	}
	n := binary.BigEndian.Uint32(b[0:4])
	if n > MaxEntryBytes {
		return r, 0, 0, fmt.Sprintf("record length %d exceeds the maximum %d", n, MaxEntryBytes)
	}
	total = RecordHeaderSize + int(n)
	if len(b) < total {
		return r, 0, total, ""
	}
	body := b[RecordHeaderSize:total]
	if recordCRC(b, body) != binary.BigEndian.Uint32(b[4:8]) {
		return r, 0, 0, "record checksum mismatch"
	}
	r.ledgerID = int64(binary.BigEndian.Uint64(b[8:16]))
	r.entryID = int64(binary.BigEndian.Uint64(b[16:24]))
	r.body = body
	return r, total, 0, ""
}

// HasLogs reports whether dir holds any entry log (a missing dir holds
// none). The ledger store uses it as evidence that the directory's index
// existed: entry logs are written only after the index is created.
func HasLogs(fs vfs.FS, dir string) (bool, error) {
	names, err := fs.List(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("entrylog: list %s: %w", dir, err)
	}
	for _, name := range names {
		if _, ok := parseLogFileName(name); ok || strings.HasSuffix(name, compactingSufix) {
			return true, nil
		}
	}
	return false, nil
}
