package entrylog

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkAddFlush: write-cache adds of 1 KiB entries across 16 ledgers,
// flushed (sorted, written, fsynced) every 4096 adds. One op is one add
// plus its share of the flush.
func BenchmarkAddFlush(b *testing.B) {
	for _, c := range []struct {
		name string
		fs   func(b *testing.B) (vfs.FS, string)
	}{
		{"mem", func(*testing.B) (vfs.FS, string) { return vfs.NewMem(), "ledgers" }},
		{"disk", func(b *testing.B) (vfs.FS, string) { return vfs.Default, b.TempDir() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			fs, dir := c.fs(b)
			s, err := Open(fs, dir, Options{Clock: newManualClock(), WriteCacheBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			payload := make([]byte, 1024)
			apply := func([]Placement) error { return nil }
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Add(int64(i%16), int64(i/16), payload); err != nil {
					b.Fatal(err)
				}
				if i%4096 == 4095 {
					if err := s.Flush(apply); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := s.Flush(apply); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRead: reads of flushed 1 KiB entries in ledger order (catch-up
// reads served by read-ahead) from an in-memory FS.
func BenchmarkRead(b *testing.B) {
	s, err := Open(vfs.NewMem(), "ledgers", Options{Clock: newManualClock()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	x := newFakeIndex()
	payload := make([]byte, 1024)
	const n = 8192
	for e := int64(0); e < n; e++ {
		if err := s.Add(1, e, payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(x.put); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := int64(i % n)
		loc, _ := x.get(1, e)
		if _, err := s.Read(1, e, loc); err != nil {
			b.Fatal(err)
		}
	}
}
