package sim

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashBlockBytes is the unit in which unsynced data survives a crash
// (Pebble's MemFS uses the same).
const crashBlockBytes = 4096

// crashImage returns the file system as a power loss could leave it: all
// synced data and directory entries, and each unsynced 4 KiB block or
// directory entry with probability keepPct/100, drawn from rng in sorted
// path order. Pebble's directories (the index) keep their synced state
// exactly: Pebble writes them from its own goroutines too, so only their
// synced state is a function of the seed; losing all their unsynced data is
// one of the states a crash may leave.
//
// MemFS.CrashClone is used only for its deterministic views (0%: synced
// only; 100%: everything), since its random mode ranges over Go maps.
func crashImage(fs *vfs.MemFS, rng *rand.Rand, keepPct int) *vfs.MemFS {
	synced := fs.CrashClone(vfs.CrashCloneCfg{})
	current := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(0, 0))})
	out := vfs.NewCrashableMem()
	c := &crasher{synced: synced, current: current, out: out, rng: rng, keepPct: keepPct}
	c.dir("/", false)
	return out
}

type crasher struct {
	synced, current, out *vfs.MemFS
	rng                  *rand.Rand
	keepPct              int
}

func (c *crasher) keep() bool { return c.keepPct > 0 && c.rng.IntN(100) < c.keepPct }

// dir copies directory path (which exists in out) and its children.
// unsyncedOnly: the directory itself survived only as an unsynced entry,
// so nothing in it is in the synced view.
func (c *crasher) dir(path string, unsyncedOnly bool) {
	inSynced := listing(c.synced, path)
	if unsyncedOnly {
		inSynced = nil
	}
	names := slices.Clone(inSynced)
	for _, n := range listing(c.current, path) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		p := c.out.PathJoin(path, name)
		pebbleOwned := isPebblePath(p)
		synced := slices.Contains(inSynced, name)
		if !synced && (pebbleOwned || !c.keep()) {
			continue
		}
		src := c.synced
		if !synced {
			src = c.current
		}
		st, err := src.Stat(p)
		if err != nil {
			continue // removed since (a view may lag the other)
		}
		if st.IsDir() {
			if err := c.out.MkdirAll(p, 0o755); err != nil {
				panic(err)
			}
			c.dir(p, !synced)
			continue
		}
		c.file(p, synced && !pebbleOwned, !synced)
	}
	if d, err := c.out.OpenDir(path); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// file writes path into out: the synced data (or nothing, for a file that
// only exists unsynced) with randomly surviving blocks of the current data
// when mayKeep.
func (c *crasher) file(path string, mayKeep, unsyncedOnly bool) {
	var data []byte
	if !unsyncedOnly {
		data = readAll(c.synced, path)
	}
	if mayKeep || unsyncedOnly {
		cur := readAll(c.current, path)
		if unsyncedOnly {
			// The entry survived; its data did as it stood (a valid outcome:
			// every unsynced write may survive).
			data = cur
		} else {
			for i := 0; i < len(cur); i += crashBlockBytes {
				block := cur[i:min(i+crashBlockBytes, len(cur))]
				if i+len(block) <= len(data) && bytes.Equal(data[i:i+len(block)], block) {
					continue
				}
				if !c.keep() {
					continue
				}
				if grow := i + len(block) - len(data); grow > 0 {
					data = append(data, make([]byte, grow)...)
				}
				copy(data[i:], block)
			}
		}
	}
	f, err := c.out.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		panic(err)
	}
	if _, err := f.Write(data); err != nil {
		panic(err)
	}
	if err := f.Sync(); err != nil {
		panic(err)
	}
	_ = f.Close()
}

func isPebblePath(p string) bool {
	return strings.Contains(p+"/", "/index/")
}

func listing(fs *vfs.MemFS, dir string) []string {
	names, err := fs.List(dir)
	if err != nil {
		return nil
	}
	slices.Sort(names)
	return names
}

func readAll(fs *vfs.MemFS, path string) []byte {
	f, err := fs.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	return b
}
