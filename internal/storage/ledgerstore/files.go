package ledgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage/journal"
)

// File names the store adds to its directories.
const (
	checkpointFile = "CHECKPOINT" // in each journal directory
	layoutFile     = "LAYOUT"     // in each ledger directory
	tmpSuffix      = ".tmp"

	checkpointMagic = "FOLIOCKP"
	layoutMagic     = "FOLIOLDR"
	fileVersion     = 1

	checkpointSize = 8 + 4 + 4 + 4 + 4 + 8 + 8 + 4 // 44
	layoutSize     = 8 + 4 + 4 + 4 + 4             // 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a checkpoint or layout file that does not verify.
var ErrCorrupt = errors.New("ledgerstore: corrupt store file")

// ErrLayout: the directories given to Open do not match the layout
// recorded on disk (a directory moved, added or removed).
var ErrLayout = errors.New("ledgerstore: directory layout changed")

// checkpoint is the durable content of a journal directory's CHECKPOINT
// file: the layout it belongs to and the journal position up to which
// every record is durable in the entry logs and indexes.
type checkpoint struct {
	journalIndex, journalCount, ledgerDirCount uint32
	pos                                        journal.Position
}

func encodeCheckpoint(c checkpoint) []byte {
	b := make([]byte, 0, checkpointSize)
	b = append(b, checkpointMagic...)
	b = binary.BigEndian.AppendUint32(b, fileVersion)
	b = binary.BigEndian.AppendUint32(b, c.journalIndex)
	b = binary.BigEndian.AppendUint32(b, c.journalCount)
	b = binary.BigEndian.AppendUint32(b, c.ledgerDirCount)
	b = binary.BigEndian.AppendUint64(b, c.pos.File)
	b = binary.BigEndian.AppendUint64(b, uint64(c.pos.Offset))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(path string, b []byte) (checkpoint, error) {
	if reason := checkFile(b, checkpointSize, checkpointMagic); reason != "" {
		return checkpoint{}, fmt.Errorf("%w: %s: %s", ErrCorrupt, path, reason)
	}
	c := checkpoint{
		journalIndex:   binary.BigEndian.Uint32(b[12:]),
		journalCount:   binary.BigEndian.Uint32(b[16:]),
		ledgerDirCount: binary.BigEndian.Uint32(b[20:]),
		pos:            journal.Position{File: binary.BigEndian.Uint64(b[24:]), Offset: int64(binary.BigEndian.Uint64(b[32:]))},
	}
	if c.pos.Offset < 0 || (c.pos.File == 0) != (c.pos.Offset == 0) {
		return checkpoint{}, fmt.Errorf("%w: %s: bad position %v", ErrCorrupt, path, c.pos)
	}
	return c, nil
}

func encodeLayout(index, count uint32) []byte {
	b := make([]byte, 0, layoutSize)
	b = append(b, layoutMagic...)
	b = binary.BigEndian.AppendUint32(b, fileVersion)
	b = binary.BigEndian.AppendUint32(b, index)
	b = binary.BigEndian.AppendUint32(b, count)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// checkFile verifies size, magic, version and the trailing CRC32C.
func checkFile(b []byte, size int, magic string) string {
	switch {
	case len(b) != size:
		return fmt.Sprintf("%d bytes, want %d", len(b), size)
	case string(b[:8]) != magic:
		return fmt.Sprintf("bad magic %q", b[:8])
	case crc32.Checksum(b[:size-4], castagnoli) != binary.BigEndian.Uint32(b[size-4:]):
		return "checksum mismatch"
	case binary.BigEndian.Uint32(b[8:]) != fileVersion:
		return fmt.Sprintf("unsupported version %d", binary.BigEndian.Uint32(b[8:]))
	}
	return ""
}

// readSmallFile returns the file's contents, or ok=false if it does not
// exist.
func readSmallFile(fs vfs.FS, path string) (b []byte, ok bool, err error) {
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ledgerstore: open %s: %w", path, err)
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, false, fmt.Errorf("ledgerstore: read %s: %w", path, err)
	}
	return b, true, nil
}

// writeFileAtomic replaces dir/name with data durably: write a temporary
// file, fsync it, rename it over name, fsync the directory. A crash leaves
// the old or the new content, never a mix (a leftover .tmp is overwritten
// next time and never read).
func writeFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	path := fs.PathJoin(dir, name)
	tmp := path + tmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("ledgerstore: create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("ledgerstore: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("ledgerstore: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ledgerstore: close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("ledgerstore: rename %s: %w", tmp, err)
	}
	return syncDir(fs, dir)
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("ledgerstore: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ledgerstore: sync directory %s: %w", dir, err)
	}
	return nil
}

// readCheckpoint returns the journal directory's checkpoint, checking the
// layout; a directory without one gets one at the zero position (so the
// layout is recorded before the first record is written).
func readCheckpoint(fs vfs.FS, dir string, want checkpoint) (journal.Position, error) {
	path := fs.PathJoin(dir, checkpointFile)
	b, ok, err := readSmallFile(fs, path)
	if err != nil {
		return journal.Position{}, err
	}
	if !ok {
		want.pos = journal.Position{}
		return journal.Position{}, writeFileAtomic(fs, dir, checkpointFile, encodeCheckpoint(want))
	}
	c, err := decodeCheckpoint(path, b)
	if err != nil {
		return journal.Position{}, err
	}
	if c.journalIndex != want.journalIndex || c.journalCount != want.journalCount || c.ledgerDirCount != want.ledgerDirCount {
		return journal.Position{}, fmt.Errorf("%w: %s belongs to journal %d of %d with %d ledger directories, now configured as journal %d of %d with %d",
			ErrLayout, dir, c.journalIndex, c.journalCount, c.ledgerDirCount, want.journalIndex, want.journalCount, want.ledgerDirCount)
	}
	return c.pos, nil
}

// checkLayout verifies (or, in a directory without one, writes) the ledger
// directory's LAYOUT file.
func checkLayout(fs vfs.FS, dir string, index, count uint32) error {
	path := fs.PathJoin(dir, layoutFile)
	b, ok, err := readSmallFile(fs, path)
	if err != nil {
		return err
	}
	if !ok {
		return writeFileAtomic(fs, dir, layoutFile, encodeLayout(index, count))
	}
	if reason := checkFile(b, layoutSize, layoutMagic); reason != "" {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, path, reason)
	}
	gotIndex, gotCount := binary.BigEndian.Uint32(b[12:]), binary.BigEndian.Uint32(b[16:])
	if gotIndex != index || gotCount != count {
		return fmt.Errorf("%w: %s is ledger directory %d of %d, now configured as %d of %d",
			ErrLayout, dir, gotIndex, gotCount, index, count)
	}
	return nil
}
