package entrylog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strings"

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
// in file order. It is the reader of support tools (folio shell readlog) and
// of the offline index rebuild; the bookie itself never calls it.
//
// The header must verify, and, when the file has its usual name
// ("%016x.log"), name the same log id; otherwise ScanFile returns a
// *CorruptionError at offset 0. A file shorter than the header, or whose
// bytes are all zero, is a log created at a crash before its header reached
// the disk (createLog syncs the header before any record is written) and is
// reported Torn. A zero header followed by anything else is damage.
//
// If the records that verify end before the end of the file, ScanFile calls
// fn for every one of them and then returns a *CorruptionError whose Offset
// is where verified data ends, whose Reason says why the next record was
// refused and how many bytes remain, and whose Next is the offset of the
// first verifiable record after that point (0: none). It is Torn only when
// the refused record is cut short by the end of the file and nothing
// verifiable follows it: the way a log being written at a crash ends.
// Anything else is damage, whatever the refused record's length field
// claims. An error returned by fn stops the scan and is returned as is.
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
		return zeroHeaderError(f, path, size)
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
		return tailError(f, path, end, size)
	}
	return nil
}

// zeroHeaderError classifies a log whose header reads all zero: Torn when
// the whole file is zero (created at a crash before its header was synced),
// damage otherwise (the header was synced before any record, so bytes after
// a zero header mean the header itself was destroyed).
func zeroHeaderError(f vfs.File, path string, size int64) error {
	zero, err := allZero(f, HeaderSize, size)
	if err != nil {
		return fmt.Errorf("entrylog: read %s: %w", path, err)
	}
	if zero {
		return &CorruptionError{File: path, Offset: 0, Torn: true, Reason: fmt.Sprintf("file of %d bytes is all zero (a log created at a crash before its header was written)", size)}
	}
	next, found, err := findRecord(f, HeaderSize, size)
	if err != nil {
		return fmt.Errorf("entrylog: read %s: %w", path, err)
	}
	reason := "header is all zero but the file holds data after it (the header is written and synced before any record: this is damage)"
	if found {
		reason += fmt.Sprintf("; a verifiable record starts at offset %d", next)
	}
	ce := &CorruptionError{File: path, Offset: 0, Reason: reason}
	if found {
		ce.Next = next
	}
	return ce
}

// tailError classifies the bytes [end, size) of a log whose verified
// records end at end (see ScanFile).
func tailError(f vfs.File, path string, end, size int64) error {
	reason, cut := refusal(f, end, size)
	next, found, err := findRecord(f, end+1, size)
	if err != nil {
		return fmt.Errorf("entrylog: read %s: %w", path, err)
	}
	ce := &CorruptionError{File: path, Offset: end, Reason: reason, Torn: cut && !found}
	if found {
		ce.Next = next
		ce.Reason += fmt.Sprintf("; a verifiable record follows at offset %d", next)
	}
	return ce
}

// allZero reports whether the bytes [from, size) of f are all zero.
func allZero(f vfs.File, from, size int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for off := from; off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		for _, b := range buf[:n] {
			if b != 0 {
				return false, nil
			}
		}
		off += n
	}
	return true, nil
}

// findRecord returns the offset of the first record at or after from that
// verifies (its length fits the file and the record checksum matches), as
// the journal's findGroupStart resynchronises after damage. It reads the
// file in windows; a candidate whose record runs past the window is read on
// its own. It is used only on damaged logs.
func findRecord(f vfs.File, from, size int64) (off int64, found bool, err error) {
	const window = 1 << 20
	buf := make([]byte, window+RecordHeaderSize)
	var rec []byte
	for base := from; base+RecordHeaderSize <= size; base += window {
		n := min(int64(len(buf)), size-base)
		if _, err := f.ReadAt(buf[:n], base); err != nil && !errors.Is(err, io.EOF) {
			return 0, false, err
		}
		for i := int64(0); i < min(window, n-RecordHeaderSize+1); i++ {
			h := buf[i : i+RecordHeaderSize]
			length := int64(binary.BigEndian.Uint32(h[0:4]))
			if length > MaxEntryBytes || base+i+RecordHeaderSize+length > size ||
				int64(binary.BigEndian.Uint64(h[8:16])) < 0 || int64(binary.BigEndian.Uint64(h[16:24])) < 0 {
				continue
			}
			total := RecordHeaderSize + length
			var b []byte
			if i+total <= n {
				b = buf[i : i+total]
			} else {
				if int64(cap(rec)) < total {
					rec = make([]byte, total)
				}
				b = rec[:total]
				if _, err := f.ReadAt(b, base+i); err != nil && !errors.Is(err, io.EOF) {
					return 0, false, err
				}
			}
			if _, t, _, reason := parseRecord(b); reason == "" && t == int(total) {
				return base + i, true, nil
			}
		}
	}
	return 0, false, nil
}

// ScanSalvage calls fn, in file order, for every record of the entry log at
// path that verifies at or after offset from, resynchronising (as ScanFile's
// Next) past any bytes that do not verify. It reads past damage that
// ScanFile stops at, to learn what the damaged log still holds; the header
// is not checked. An error returned by fn stops the scan and is returned.
func ScanSalvage(fs vfs.FS, path string, from int64, fn func(rec Record) error) error {
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
	off := max(from, HeaderSize)
	for off < size {
		next, found, err := findRecord(f, off, size)
		if err != nil {
			return fmt.Errorf("entrylog: read %s: %w", path, err)
		}
		if !found {
			return nil
		}
		end, err := scanFrom(f, path, next, size, unlimited{}, func(r record, o int64, _ int) error {
			return fn(Record{Offset: o, LedgerID: r.ledgerID, EntryID: r.entryID, Body: r.body})
		})
		if err != nil {
			return err
		}
		off = end + 1
	}
	return nil
}

// PeekRecord reads the record header at off of the entry log at path
// without verifying it and returns the ledger and entry ids it names (-1
// when the file ends within the header). It lets a caller judge a record
// that does not verify (is its entry still in a journal?).
func PeekRecord(fs vfs.FS, path string, off int64) (ledgerID, entryID int64, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("entrylog: open %s: %w", path, err)
	}
	defer f.Close()
	var h [RecordHeaderSize]byte
	n, err := f.ReadAt(h[:], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, fmt.Errorf("entrylog: read %s at offset %d: %w", path, off, err)
	}
	if n < RecordHeaderSize {
		return -1, -1, nil
	}
	return int64(binary.BigEndian.Uint64(h[8:16])), int64(binary.BigEndian.Uint64(h[16:24])), nil
}

// SectorSize is the unit in which a disk persists data: a crash can leave
// any sector written after the last sync unwritten (zero) and later ones
// written.
const SectorSize = 512

// HasZeroSector reports whether the entry log at path holds, in [from, to),
// a zero stretch bounded by sector boundaries (SectorSize-aligned) or by
// from and to: for some sector, the part of it that lies in [from, to)
// reads as zero and is at least RecordHeaderSize bytes long (to is clamped
// to the file size). In a log that stops verifying at from, that is the
// mark of a sector that never reached the disk (or of a zeroed block; an
// entry body of zeros looks the same, so callers use it only together with
// other evidence).
func HasZeroSector(fs vfs.FS, path string, from, to int64) (bool, error) {
	f, err := fs.Open(path)
	if err != nil {
		return false, fmt.Errorf("entrylog: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("entrylog: stat %s: %w", path, err)
	}
	to = min(to, fi.Size())
	buf := make([]byte, SectorSize)
	for sec := from / SectorSize * SectorSize; sec < to; sec += SectorSize {
		lo, hi := max(sec, from), min(sec+SectorSize, to)
		if hi-lo < RecordHeaderSize {
			continue
		}
		b := buf[:hi-lo]
		if _, err := f.ReadAt(b, lo); err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("entrylog: read %s at offset %d: %w", path, lo, err)
		}
		zero := true
		for _, c := range b {
			if c != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true, nil
		}
	}
	return false, nil
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
// store's directories offline, without a Store and without changing
// anything (a Store's Open removes leftovers; support tools must not). It
// keeps the files it opened until Close. It is not safe for concurrent use.
type FileReader struct {
	fs    vfs.FS
	dirs  []string
	files map[uint64]vfs.File
	paths map[uint64]string
}

// NewFileReader returns a reader of the entry logs in dirs (a store's
// directories, as OpenDirs takes them; a log is looked for in each).
func NewFileReader(fs vfs.FS, dirs ...string) *FileReader {
	return &FileReader{fs: fs, dirs: dirs, files: make(map[uint64]vfs.File), paths: make(map[uint64]string)}
}

// find returns the path of log id: the one directory holding it, else
// ErrNoLog; a log in two directories is a *CorruptionError.
func (r *FileReader) find(id uint64) (string, error) {
	if p, ok := r.paths[id]; ok {
		return p, nil
	}
	var found []string
	for _, d := range r.dirs {
		p := r.fs.PathJoin(d, LogFileName(id))
		if _, err := r.fs.Stat(p); err == nil {
			found = append(found, p)
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return "", fmt.Errorf("entrylog: stat %s: %w", p, err)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: log %d is in none of %s", ErrNoLog, id, strings.Join(r.dirs, ", "))
	case 1:
		r.paths[id] = found[0]
		return found[0], nil
	}
	return "", duplicateLog(id, found[0], found[1])
}

func duplicateLog(id uint64, a, b string) *CorruptionError {
	return &CorruptionError{File: b, Offset: 0, Reason: fmt.Sprintf(
		"log id %d is also held by %s: one of the two files is misplaced or copied, and neither can be trusted to be the log the index refers to", id, a)}
}

// LogFile is an entry log file found by LogFiles.
type LogFile struct {
	ID   uint64
	Path string
}

// LogFiles returns the entry log files of a store whose logs live in
// dirs (as OpenDirs takes them; missing directories hold none), by
// ascending id. The same id in two directories is a *CorruptionError
// naming both files.
func LogFiles(fs vfs.FS, dirs ...string) ([]LogFile, error) {
	at := map[uint64]string{}
	var out []LogFile
	for _, d := range dirs {
		ids, err := LogIDs(fs, d)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			p := fs.PathJoin(d, LogFileName(id))
			if other, dup := at[id]; dup {
				return nil, duplicateLog(id, other, p)
			}
			at[id] = p
			out = append(out, LogFile{ID: id, Path: p})
		}
	}
	slices.SortFunc(out, func(a, b LogFile) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Read returns the body of entry (ledgerID, entryID) at loc, verified as
// Store.Read verifies it: a missing log is ErrNoLog, a record that is torn,
// fails its checksum, or holds another entry or size is a
// *CorruptionError naming the file and offset.
func (r *FileReader) Read(ledgerID, entryID int64, loc Location) ([]byte, error) {
	f, ok := r.files[loc.LogID]
	path, err := r.find(loc.LogID)
	if err != nil {
		return nil, fmt.Errorf("%w (ledger %d entry %d)", err, ledgerID, entryID)
	}
	if !ok {
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
	return verifyRecord(path, buf, loc, ledgerID, entryID)
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
