package index

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func benchFS(b *testing.B, name string) (vfs.FS, string) {
	if name == "disk" {
		return vfs.Default, b.TempDir()
	}
	return vfs.NewMem(), "index"
}

// BenchmarkPutLocations: index writes as a flush makes them, batches of
// 1000 placements; one op is one placement.
func BenchmarkPutLocations(b *testing.B) {
	for _, name := range []string{"mem", "disk"} {
		b.Run(name, func(b *testing.B) {
			fs, dir := benchFS(b, name)
			x, err := Open(fs, dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			batch := make([]Placement, 0, 1000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch = append(batch, Placement{LedgerID: int64(i % 64), EntryID: int64(i / 64), Loc: Location{LogID: 1, Offset: int64(i) * 1048, Size: 1024}})
				if len(batch) == cap(batch) {
					if err := x.PutLocations(batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := x.PutLocations(batch); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkLastEntry: one SeekLT per op over 64 ledgers × 4096 entries.
func BenchmarkLastEntry(b *testing.B) {
	x, err := Open(vfs.NewMem(), "index", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	batch := make([]Placement, 0, 4096)
	for l := int64(0); l < 64; l++ {
		batch = batch[:0]
		for e := int64(0); e < 4096; e++ {
			batch = append(batch, Placement{LedgerID: l, EntryID: e, Loc: Location{LogID: 1, Offset: e, Size: 1}})
		}
		if err := x.PutLocations(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if e, _, err := x.LastEntry(int64(i % 64)); err != nil || e != 4095 {
			b.Fatal(e, err)
		}
	}
}

// BenchmarkGet: point lookups of entry locations.
func BenchmarkGet(b *testing.B) {
	x, err := Open(vfs.NewMem(), "index", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	batch := make([]Placement, 0, 4096)
	for e := int64(0); e < 4096; e++ {
		batch = append(batch, Placement{LedgerID: 1, EntryID: e, Loc: Location{LogID: 1, Offset: e, Size: 1}})
	}
	if err := x.PutLocations(batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := x.Get(1, int64(i%4096)); err != nil {
			b.Fatal(err)
		}
	}
}
