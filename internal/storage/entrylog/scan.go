package entrylog

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Record is one entry record of an entry log file, as ScanFile reports it.
type Record struct {
	// Offset is the byte offset of the record header in the file.
	Offset int64
	// LedgerID and EntryID are the ids stored in the record header.
	LedgerID, EntryID int64
	// Body is the entry body as the bookie stored it. It aliases a buffer
	// that is reused once the callback returns: copy it to keep it.
	Body []byte
}

// ScanFile reads the entry log file at path offline, without a Store and
// without changing anything, and calls fn for every record that verifies,
// in file order. It is the reader of support tools (folio shell readlog);
// the bookie itself never calls it.
//
// The header must verify, and, when the file has its usual name
// ("%016x.log"), name the same log id; otherwise ScanFile returns a
// *CorruptionError at offset 0 (a file shorter than the header, or whose
// header is all zero, is a log created at a crash before anything was
// written to it, and is reported as such). If the records that verify end
// before the end of the file, ScanFile calls fn for every one of them and
// then returns a *CorruptionError whose Offset is where verified data ends
// and whose Reason says why the next record was refused and how many bytes
// remain. A bookie treats that point as the end of the log's data: a log
// that was being written when its bookie stopped ends this way (a torn
// tail); anywhere else it is damage. An error returned by fn stops the scan
// and is returned as is.
func ScanFile(fs vfs.FS, path string, fn func(rec Record) error) error {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("entrylog: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("entrylog: stat %s: %w", path, err)
	}
	size := fi.Size()
	var hdr [HeaderSize]byte
	if size < HeaderSize {
		return &CorruptionError{File: path, Offset: 0, Reason: fmt.Sprintf("file of %d bytes is shorter than the %d-byte header (a log created at a crash before anything was written)", size, HeaderSize)}
	}
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("entrylog: read header of %s: %w", path, err)
	}
	if hdr == ([HeaderSize]byte{}) {
		return &CorruptionError{File: path, Offset: 0, Reason: "header is all zero (a log created at a crash before anything was written)"}
	}
	id, named := parseLogFileName(fs.PathBase(path))
	if !named {
		// A renamed copy (a support case attachment): trust the header's id.
		id = binary.BigEndian.Uint64(hdr[12:20])
	}
	if reason := checkHeader(hdr[:], id); reason != "" {
		return &CorruptionError{File: path, Offset: 0, Reason: reason}
	}
	end, err := scanLog(f, path, size, unlimited{}, func(r record, off int64, _ int) error {
		return fn(Record{Offset: off, LedgerID: r.ledgerID, EntryID: r.entryID, Body: r.body})
	})
	if err != nil {
		return err
	}
	if end < size {
		return &CorruptionError{File: path, Offset: end, Reason: refusal(f, end, size)}
	}
	return nil
}

// refusal says why the record at off does not verify (scanLog stops there
// without a reason).
func refusal(f vfs.File, off, size int64) string {
	rest := size - off
	n := min(rest, int64(RecordHeaderSize))
	var h [RecordHeaderSize]byte
	if _, err := f.ReadAt(h[:n], off); err != nil {
		return fmt.Sprintf("%d bytes up to the end of the file do not form a record (read: %v)", rest, err)
	}
	if n < RecordHeaderSize {
		return fmt.Sprintf("torn record header: %d bytes up to the end of the file", rest)
	}
	length := binary.BigEndian.Uint32(h[0:4])
	switch {
	case length > MaxEntryBytes:
		return fmt.Sprintf("record length %d exceeds the maximum %d; %d bytes up to the end of the file", length, MaxEntryBytes, rest)
	case int64(RecordHeaderSize)+int64(length) > rest:
		return fmt.Sprintf("torn record: header claims %d body bytes, %d bytes up to the end of the file", length, rest)
	default:
		return fmt.Sprintf("record checksum mismatch; %d bytes up to the end of the file", rest)
	}
}
