package ledgerstore

import (
	"encoding/binary"
	"encoding/hex"
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

	// fileVersion is the version of CHECKPOINT this code writes (and of
	// LAYOUT before version 3): version 2 adds the store id. Version 1
	// files (written before store ids existed) are read, and replaced on the
	// first open (see the package comment, "Upgrade").
	fileVersion       = 2
	fileVersionLegacy = 1
	// layoutVersion is the version of LAYOUT this code writes: version 3
	// adds the number of ledger directories (shards and capacity
	// directories, see "Expansion"). Versions 1 and 2 are read, with the
	// directory count equal to the shard count; they are never written.
	layoutVersion = 3

	checkpointSizeV1 = 8 + 4 + 4 + 4 + 4 + 8 + 8 + 4 // 44
	checkpointSize   = checkpointSizeV1 + 16         // 60
	layoutSizeV1     = 8 + 4 + 4 + 4 + 4             // 24
	layoutSizeV2     = layoutSizeV1 + 16             // 40
	layoutSize       = layoutSizeV2 + 4              // 44
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry-log directory names inside a ledger directory (package comment,
// "Spill").
const (
	ownLogsDir = "entrylogs"
	// spillLogsPrefix + shard index names the directory holding the
	// entry logs that shard spilled into another ledger directory.
	spillLogsPrefix = "entrylogs-shard-"
)

// spillLogsDir is the directory of shard's entry logs in ledger directory
// dir (dir is not the shard's own).
func spillLogsDir(fs vfs.FS, dir string, shard int) string {
	return fs.PathJoin(dir, fmt.Sprintf("%s%d", spillLogsPrefix, shard))
}

// shardLogDirs lists the directories of shard's entry logs, as
// entrylog.OpenDirs takes them: its own first, then its spill directory
// in every other ledger directory, in position order (see logDirIndex).
func shardLogDirs(fs vfs.FS, ledgerDirs []string, shard int) []string {
	out := []string{fs.PathJoin(ledgerDirs[shard], ownLogsDir)}
	for p, dir := range ledgerDirs {
		if p != shard {
			out = append(out, spillLogsDir(fs, dir, shard))
		}
	}
	return out
}

// logDirIndex is the index in shardLogDirs(…, shard) of the directory in
// ledger directory position.
func logDirIndex(shard, position int) int {
	switch {
	case position == shard:
		return 0
	case position < shard:
		return position + 1
	}
	return position
}

// ErrCorrupt marks a checkpoint or layout file that does not verify.
var ErrCorrupt = errors.New("ledgerstore: corrupt store file")

// ErrLayout: the directories given to Open do not match the layout
// recorded on disk (a directory moved, added or removed), or they belong
// to different stores.
var ErrLayout = errors.New("ledgerstore: directory layout changed")

// StoreID is a store's random identity, drawn at its first open and
// recorded in every LAYOUT, CHECKPOINT and index stamp of the store. It is
// not the cluster's instance id (which the cookies carry). The zero value
// means "none recorded".
type StoreID [16]byte

func (id StoreID) String() string { return hex.EncodeToString(id[:]) }

// checkpoint is the durable content of a journal directory's CHECKPOINT
// file: the layout it belongs to, the journal position up to which every
// record is durable in the entry logs and indexes, and the store id (zero
// in a version 1 file).
type checkpoint struct {
	journalIndex, journalCount, ledgerDirCount uint32
	pos                                        journal.Position
	storeID                                    StoreID
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
	b = append(b, c.storeID[:]...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeCheckpoint reads a version 1 or 2 CHECKPOINT.
func decodeCheckpoint(path string, b []byte) (checkpoint, error) {
	version, reason := checkFile(b, checkpointMagic, checkpointSizeV1, checkpointSize)
	if reason != "" {
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
	if c.journalCount == 0 || c.journalIndex >= c.journalCount || c.ledgerDirCount == 0 {
		return checkpoint{}, fmt.Errorf("%w: %s: journal %d of %d with %d ledger directories", ErrCorrupt, path, c.journalIndex, c.journalCount, c.ledgerDirCount)
	}
	if version == fileVersion {
		copy(c.storeID[:], b[40:56])
		if c.storeID == (StoreID{}) {
			return checkpoint{}, fmt.Errorf("%w: %s: zero store id", ErrCorrupt, path)
		}
	}
	return c, nil
}

// layout is the durable content of a ledger directory's LAYOUT file: its
// position among the store's ledger directories, the number of shards
// (the ledger directories the store was created with), the number of
// ledger directories (shards plus capacity directories; a position at or
// beyond count is a capacity directory) and the store id (zero in a
// version 1 file).
type layout struct {
	index, count uint32
	dirs         uint32
	storeID      StoreID
}

// capacity reports whether the directory is a capacity directory (no
// shard, no index: it only holds spilled entry logs).
func (l layout) capacity() bool { return l.index >= l.count }

func encodeLayout(l layout) []byte {
	b := make([]byte, 0, layoutSize)
	b = append(b, layoutMagic...)
	b = binary.BigEndian.AppendUint32(b, layoutVersion)
	b = binary.BigEndian.AppendUint32(b, l.index)
	b = binary.BigEndian.AppendUint32(b, l.count)
	b = binary.BigEndian.AppendUint32(b, l.dirs)
	b = append(b, l.storeID[:]...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeLayout reads a version 1, 2 or 3 LAYOUT.
func decodeLayout(path string, b []byte) (layout, error) {
	version, reason := checkLayoutFile(b)
	if reason != "" {
		return layout{}, fmt.Errorf("%w: %s: %s", ErrCorrupt, path, reason)
	}
	l := layout{index: binary.BigEndian.Uint32(b[12:]), count: binary.BigEndian.Uint32(b[16:])}
	l.dirs = l.count
	switch version {
	case fileVersion:
		copy(l.storeID[:], b[20:36])
	case layoutVersion:
		l.dirs = binary.BigEndian.Uint32(b[20:])
		copy(l.storeID[:], b[24:40])
	}
	switch {
	case l.count == 0 || l.dirs < l.count:
		return layout{}, fmt.Errorf("%w: %s: %d shards in %d ledger directories", ErrCorrupt, path, l.count, l.dirs)
	case l.index >= l.dirs:
		return layout{}, fmt.Errorf("%w: %s: ledger directory %d of %d", ErrCorrupt, path, l.index, l.dirs)
	case version != fileVersionLegacy && l.storeID == (StoreID{}):
		return layout{}, fmt.Errorf("%w: %s: zero store id", ErrCorrupt, path)
	}
	return l, nil
}

// checkLayoutFile is checkFile for the three LAYOUT versions.
func checkLayoutFile(b []byte) (version uint32, reason string) {
	if len(b) >= 12 && string(b[:8]) == layoutMagic && binary.BigEndian.Uint32(b[8:]) == layoutVersion {
		switch {
		case len(b) != layoutSize:
			return 0, fmt.Sprintf("%d bytes, want %d for version %d", len(b), layoutSize, layoutVersion)
		case crc32.Checksum(b[:layoutSize-4], castagnoli) != binary.BigEndian.Uint32(b[layoutSize-4:]):
			return 0, "checksum mismatch"
		}
		return layoutVersion, ""
	}
	version, reason = checkFile(b, layoutMagic, layoutSizeV1, layoutSizeV2)
	if reason != "" && len(b) >= 12 && string(b[:8]) == layoutMagic {
		if v := binary.BigEndian.Uint32(b[8:]); v != fileVersion && v != fileVersionLegacy {
			reason = fmt.Sprintf("unsupported version %d (this build reads versions %d to %d)", v, fileVersionLegacy, layoutVersion)
		}
	}
	return version, reason
}

// checkFile verifies magic, version, the size that version has and the
// trailing CRC32C; it returns the version, or why the file is refused.
func checkFile(b []byte, magic string, sizeV1, sizeV2 int) (version uint32, reason string) {
	if len(b) < 12 {
		return 0, fmt.Sprintf("%d bytes, too short for a header", len(b))
	}
	if string(b[:8]) != magic {
		return 0, fmt.Sprintf("bad magic %q", b[:8])
	}
	version = binary.BigEndian.Uint32(b[8:])
	size := sizeV2
	switch version {
	case fileVersion:
	case fileVersionLegacy:
		size = sizeV1
	default:
		return 0, fmt.Sprintf("unsupported version %d (this build reads versions %d and %d)", version, fileVersionLegacy, fileVersion)
	}
	switch {
	case len(b) != size:
		return 0, fmt.Sprintf("%d bytes, want %d for version %d", len(b), size, version)
	case crc32.Checksum(b[:size-4], castagnoli) != binary.BigEndian.Uint32(b[size-4:]):
		return 0, "checksum mismatch"
	}
	return version, ""
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
