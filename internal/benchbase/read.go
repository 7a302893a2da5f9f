package benchbase

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Cache says how a cold-read benchmark emptied the page cache.
type Cache string

const (
	// CacheDropped: the whole page cache was dropped
	// (/proc/sys/vm/drop_caches, needs root).
	CacheDropped Cache = "dropped (drop_caches)"
	// CacheFadvised: the named files' pages were dropped with
	// posix_fadvise(POSIX_FADV_DONTNEED) (drop_caches was not permitted).
	CacheFadvised Cache = "dropped (fadvise DONTNEED)"
	// CacheWarm: neither worked; the figures are warm-cache figures.
	CacheWarm Cache = "warm (could not drop)"
)

// DropCache empties the page cache for the files under dirs: sync, then
// drop_caches if permitted, else fadvise DONTNEED on every regular file
// under dirs. It reports which happened; a benchmark must print it.
func DropCache(dirs ...string) Cache {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err == nil {
		return CacheDropped
	}
	ok := true
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		})
		if err != nil {
			ok = false
		}
	}
	if ok {
		return CacheFadvised
	}
	return CacheWarm
}

// ReadRate is the disk's raw read rate measured on one file.
type ReadRate struct {
	SeqMBps      float64 // 1 MiB sequential reads of the whole file
	RandOpsPerS  float64 // 4 KiB reads at random 4 KiB-aligned offsets
	RandMBps     float64
	Cache        Cache
	FileBytes    int64
	RandomReads  int
	SequentialIn time.Duration
}

func (r ReadRate) String() string {
	return fmt.Sprintf("raw disk, file of %d MiB, cache %s: sequential 1 MiB reads %.0f MB/s; random 4 KiB reads %.0f/s (%.1f MB/s)",
		r.FileBytes>>20, r.Cache, r.SeqMBps, r.RandOpsPerS, r.RandMBps)
}

// MeasureRead writes a file of size bytes in dir (synced), empties the page
// cache (DropCache), reads it sequentially in 1 MiB reads, empties the cache
// again and makes randomReads 4 KiB reads at random aligned offsets. It is
// the cold-read limit a catch-up read benchmark is compared with.
func MeasureRead(dir string, size int64, randomReads int) (ReadRate, error) {
	f, err := os.CreateTemp(dir, "read-probe-")
	if err != nil {
		return ReadRate{}, err
	}
	path := f.Name()
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return ReadRate{}, err
		}
	}
	if err := f.Sync(); err != nil {
		return ReadRate{}, err
	}
	r := ReadRate{FileBytes: size, RandomReads: randomReads}
	r.Cache = DropCache(dir)
	start := time.Now()
	var total int64
	for off := int64(0); ; off += int64(len(buf)) {
		n, err := f.ReadAt(buf, off)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return ReadRate{}, err
		}
	}
	r.SequentialIn = time.Since(start)
	r.SeqMBps = float64(total) / 1e6 / r.SequentialIn.Seconds()
	DropCache(dir)
	blocks := size / 4096
	rng := rand.New(rand.NewPCG(1, 2))
	small := buf[:4096]
	start = time.Now()
	for range randomReads {
		if _, err := f.ReadAt(small, rng.Int64N(blocks)*4096); err != nil {
			return ReadRate{}, err
		}
	}
	el := time.Since(start).Seconds()
	r.RandOpsPerS = float64(randomReads) / el
	r.RandMBps = r.RandOpsPerS * 4096 / 1e6
	return r, nil
}
