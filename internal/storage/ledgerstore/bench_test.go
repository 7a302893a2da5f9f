package ledgerstore

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/foliodb/folio/internal/benchbase"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// BenchmarkLedgerStore measures, in one run and one directory on the real
// disk: the raw fdatasync rate and latency of 1 KiB writes into already
// written blocks, then storage.Store adds (journal + write cache, with the
// background flush and checkpoint loops running) of 1 KiB entries with
// fdatasync at 1, 64 and 256 concurrent writers (one ledger each, closed
// loop), each also reported as a ratio to the raw figures. Reported, not
// asserted (DESIGN.md §7).
//
//	go test -run '^$' -bench BenchmarkLedgerStore -benchtime 3s ./internal/storage/ledgerstore/
func BenchmarkLedgerStore(b *testing.B) {
	dir := b.TempDir()
	var raw benchbase.Disk
	b.Run("raw-fdatasync", func(b *testing.B) { raw = benchbase.Fdatasync(b, dir, benchEntryBytes) })
	for _, writers := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchAdd(b, dir, writers, raw) })
	}
}

const benchEntryBytes = 1024

// benchDone is a writer's reusable completion: no allocation per add.
type benchDone struct{ ch chan error }

func (d *benchDone) AddComplete(err error) { d.ch <- err }

func benchAdd(b *testing.B, dir string, writers int, raw benchbase.Disk) {
	var syncs atomic.Int64
	counting := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSyncData && filepath.Base(filepath.Dir(op.Path)) == "journal" {
			syncs.Add(1)
		}
		return nil
	})
	sdir := filepath.Join(dir, fmt.Sprintf("store-%d-%d", writers, b.N))
	s, err := Open(errorfs.Wrap(vfs.Default, counting), Config{
		JournalDirs: []string{filepath.Join(sdir, "journal")},
		LedgerDirs:  []string{filepath.Join(sdir, "ledgers")},
		Clock:       clock.Real{},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := make([]byte, benchEntryBytes)
	key := []byte("bench-master-key")
	per := max(b.N/writers, 1)
	hists := make([]*hdrhistogram.Histogram, writers)
	for i := range hists {
		hists[i] = benchbase.NewLatencyHist()
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	syncs.Store(0)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &benchDone{ch: make(chan error, 1)}
			h := hists[w]
			l := int64(w + 1)
			for e := range per {
				t0 := time.Now()
				s.AddEntry(l, int64(e), key, body, storage.AddOptions{}, d)
				if err := <-d.ch; err != nil {
					b.Error(err)
					return
				}
				_ = h.RecordValue(time.Since(t0).Microseconds())
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	total := per * writers
	for _, h := range hists[1:] {
		hists[0].Merge(h)
	}
	h := hists[0]
	rate := float64(total) / elapsed.Seconds()
	p50 := time.Duration(h.ValueAtQuantile(50)) * time.Microsecond
	p99 := time.Duration(h.ValueAtQuantile(99)) * time.Microsecond
	allocs := float64(ms1.Mallocs-ms0.Mallocs) / float64(total)
	nsyncs := syncs.Load()
	b.ReportMetric(rate, "entries/s")
	b.ReportMetric(rate*benchEntryBytes/1e6, "MB/s")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(allocs, "allocs/entry")
	b.ReportMetric(float64(total)/float64(max(nsyncs, 1)), "entries/fsync")
	if raw.OpsPerSec > 0 {
		b.ReportMetric(rate/raw.OpsPerSec, "x-raw-rate")
		b.ReportMetric(float64(p99)/float64(raw.P99), "p99/raw-p99")
	}
	b.Logf("writers=%d: %.0f entries/s, %.1f MB/s, p50 %v, p99 %v, %.3f allocs/entry, %d journal fdatasyncs (%.1f entries each); raw fdatasync %.0f/s p50 %v p99 %v; ratios: rate %.2fx raw, p99 %.2fx raw",
		writers, rate, rate*benchEntryBytes/1e6, p50, p99, allocs, nsyncs, float64(total)/float64(max(nsyncs, 1)),
		raw.OpsPerSec, raw.P50, raw.P99, rate/max(raw.OpsPerSec, 1), float64(p99)/float64(max(raw.P99, 1)))
}

// TestAllocsPerAdd checks the add path's allocation budget (issue 4: ≤ 1
// per entry), on MemFS, closed loop, steady state. Under -race it skips.
func TestAllocsPerAdd(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	cfg := testConfig()
	cfg.WriteCacheBytes = 64 << 20
	cfg.JournalMaxFileBytes = 64 << 20
	cfg.JournalPreallocBytes = 16 << 20
	s := mustOpen(t, vfs.NewMem(), cfg)
	defer s.Close()
	body := make([]byte, benchEntryBytes)
	key := masterKey(1)
	d := &benchDone{ch: make(chan error, 1)}
	e := int64(0)
	add := func() {
		s.AddEntry(1, e, key, body, storage.AddOptions{}, d)
		if err := <-d.ch; err != nil {
			t.Fatal(err)
		}
		e++
	}
	for range 1000 { // warm up pools, group buffers, cache arena
		add()
	}
	allocs := testing.AllocsPerRun(5000, add)
	t.Logf("%.3f allocations per add", allocs)
	if allocs > 1 {
		t.Fatalf("%.3f allocations per add, budget 1", allocs)
	}
}
