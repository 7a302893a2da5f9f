package entrylog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"

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
		return &CorruptionError{File: path, Offset: 0, Torn: true, Reason: fmt.Sprintf("file of %d bytes is shorter than the %d-byte header (a log created at a crash before anything was written)", size, HeaderSize)}
	}
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("entrylog: read header of %s: %w", path, err)
	}
	if hdr == ([HeaderSize]byte{}) {
		return &CorruptionError{File: path, Offset: 0, Torn: true, Reason: "header is all zero (a log created at a crash before anything was written)"}
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
		reason, torn := refusal(f, end, size)
		return &CorruptionError{File: path, Offset: end, Reason: reason, Torn: torn}
	}
	return nil
}

// refusal says why the record at off does not verify (scanLog stops there
// without a reason), and whether it is a torn tail: a record cut short by
// the end of the file.
func refusal(f vfs.File, off, size int64) (reason string, torn bool) {
	rest := size - off
	n := min(rest, int64(RecordHeaderSize))
	var h [RecordHeaderSize]byte
	if _, err := f.ReadAt(h[:n], off); err != nil {
		return fmt.Sprintf("%d bytes up to the end of the file do not form a record (read: %v)", rest, err), false
	}
	if n < RecordHeaderSize {
		return fmt.Sprintf("torn record header: %d bytes up to the end of the file", rest), true
	}
	length := binary.BigEndian.Uint32(h[0:4])
	switch {
	case length > MaxEntryBytes:
		return fmt.Sprintf("record length %d exceeds the maximum %d; %d bytes up to the end of the file", length, MaxEntryBytes, rest), false
	case int64(RecordHeaderSize)+int64(length) > rest:
		return fmt.Sprintf("torn record: header claims %d body bytes, %d bytes up to the end of the file", length, rest), true
	default:
		return fmt.Sprintf("record checksum mismatch; %d bytes up to the end of the file", rest), false
	}
}

// FileReader reads records at index locations from the entry logs of a
// directory offline, without a Store and without changing anything (a
// Store's Open removes leftovers; support tools must not). It keeps the
// files it opened until Close. It is not safe for concurrent use.
type FileReader struct {
	fs    vfs.FS
	dir   string
	files map[uint64]vfs.File
}

// NewFileReader returns a reader of the entry logs in dir.
func NewFileReader(fs vfs.FS, dir string) *FileReader {
	return &FileReader{fs: fs, dir: dir, files: make(map[uint64]vfs.File)}
}

// Read returns the body of entry (ledgerID, entryID) at loc, verified as
// Store.Read verifies it: a missing log is ErrNoLog, a record that is torn,
// fails its checksum, or holds another entry or size is a
// *CorruptionError naming the file and offset.
func (r *FileReader) Read(ledgerID, entryID int64, loc Location) ([]byte, error) {
	f, ok := r.files[loc.LogID]
	path := r.fs.PathJoin(r.dir, LogFileName(loc.LogID))
	if !ok {
		var err error
		f, err = r.fs.Open(path)
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return nil, fmt.Errorf("%w: %s (ledger %d entry %d): %s is missing", ErrNoLog, loc, ledgerID, entryID, path)
			}
			return nil, fmt.Errorf("entrylog: open %s: %w", path, err)
		}
		r.files[loc.LogID] = f
	}
	if loc.Offset < HeaderSize {
		return nil, &CorruptionError{File: path, Offset: loc.Offset, Reason: fmt.Sprintf("location of ledger %d entry %d points into the file header", ledgerID, entryID)}
	}
	want := RecordHeaderSize + int(loc.Size)
	buf := make([]byte, want)
	n, err := f.ReadAt(buf, loc.Offset)
	if n < want {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, &CorruptionError{File: path, Offset: loc.Offset,
				Reason: fmt.Sprintf("record of ledger %d entry %d runs past the end of the file", ledgerID, entryID)}
		}
		return nil, fmt.Errorf("entrylog: read %s at offset %d: %w", path, loc.Offset, err)
	}
	rec, total, _, reason := parseRecord(buf)
	switch {
	case reason != "":
	case total == 0:
		reason = "truncated record"
	case rec.ledgerID != ledgerID || rec.entryID != entryID:
		reason = fmt.Sprintf("record holds ledger %d entry %d, want ledger %d entry %d", rec.ledgerID, rec.entryID, ledgerID, entryID)
	case len(rec.body) != int(loc.Size):
		reason = fmt.Sprintf("record body is %d bytes, index says %d", len(rec.body), loc.Size)
	}
	if reason != "" {
		return nil, &CorruptionError{File: path, Offset: loc.Offset, Reason: reason}
	}
	return rec.body, nil
}

// Close closes the files the reader opened.
func (r *FileReader) Close() error {
	var errs []error
	for id, f := range r.files {
		errs = append(errs, f.Close())
		delete(r.files, id)
	}
	return errors.Join(errs...)
}

// LogIDs returns the ids of the entry log files in dir, ascending (a
// missing dir holds none). Compaction outputs that were never published
// (".compacting") are not logs.
func LogIDs(fs vfs.FS, dir string) ([]uint64, error) {
	names, err := fs.List(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("entrylog: list %s: %w", dir, err)
	}
	var ids []uint64
	for _, name := range names {
		if id, ok := parseLogFileName(name); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
