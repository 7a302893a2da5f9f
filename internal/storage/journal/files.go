package journal

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// zeroBlock is the source of preallocation writes. It is never written to.
var zeroBlock [256 << 10]byte

// writeZeros writes zeros over [from, to) of f. WriteAt, not Write: the
// in-memory FS may scribble on buffers passed to Write in invariant builds.
func writeZeros(f vfs.File, from, to int64) error {
	for off := from; off < to; {
		n := min(to-off, int64(len(zeroBlock)))
		if _, err := f.WriteAt(zeroBlock[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// listFiles returns the ids of the journal files in dir, ascending. With
// removeTmp (only at Open, when no writer can be creating one), leftover
// temporary files (a crash while creating a file) are removed: they never
// hold records.
func listFiles(fs vfs.FS, dir string, removeTmp bool) ([]uint64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: listing %s: %w", dir, err)
	}
	var ids []uint64
	for _, name := range names {
		id, tmp, ok := parseFileName(name)
		switch {
		case !ok:
		case tmp:
			if !removeTmp {
				continue
			}
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return nil, fmt.Errorf("journal: removing leftover %s: %w", name, err)
			}
		default:
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// syncPath fsyncs an existing file.
func syncPath(fs vfs.FS, path string) error {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("journal: opening %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: syncing %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs a directory, making its entries durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("journal: opening directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal: syncing directory %s: %w", dir, err)
	}
	return nil
}

// Files returns the ids of the journal files in dir, ascending (leftover
// temporary files excluded; a missing dir holds none). It must not race
// with a Journal creating files in dir.
func Files(fs vfs.FS, dir string) ([]uint64, error) {
	if _, err := fs.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	return listFiles(fs, dir, false)
}
