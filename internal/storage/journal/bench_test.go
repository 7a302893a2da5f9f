package journal

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

	"github.com/foliodb/folio/internal/benchbase"
)

// BenchmarkJournal measures, in one run and one directory on the real
// disk: the raw fdatasync rate and latency of 1 KiB writes into already
// written (zeroed) blocks, and then journal appends of 1 KiB entries with
// fdatasync at 1, 64 and 256 concurrent writers, each reported also as a
// ratio to the raw figures. Nothing is asserted (DESIGN.md §7).
//
//	go test -run '^$' -bench BenchmarkJournal -benchtime 3s ./internal/storage/journal/
func BenchmarkJournal(b *testing.B) {
	dir := b.TempDir()
	var raw benchbase.Disk
	b.Run("raw-fdatasync", func(b *testing.B) { raw = benchbase.Fdatasync(b, dir, entryBytes) })
	for _, writers := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchAppend(b, dir, writers, raw) })
	}
}

const entryBytes = 1024

// benchWaiter is a writer's reusable callback: no allocation per append.
type benchWaiter struct {
	ch  chan struct{}
	err error
}

func (w *benchWaiter) AppendDone(_ Position, err error) {
	w.err = err
	w.ch <- struct{}{}
}

func benchAppend(b *testing.B, dir string, writers int, raw benchbase.Disk) {
	// fdatasyncs of groups (OnSync), not those of the preallocator's zeros.
	var syncs atomic.Int64
	jdir := filepath.Join(dir, fmt.Sprintf("journal-%d-%d", writers, b.N))
	j, err := Open(vfs.Default, jdir, Options{Clock: wallClock{}, OnSync: func(time.Duration, int) { syncs.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	body := make([]byte, entryBytes)
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
			cb := &benchWaiter{ch: make(chan struct{}, 1)}
			h := hists[w]
			for e := range per {
				t0 := time.Now()
				if err := j.AppendEntry(int64(w), int64(e), body, cb); err != nil {
					b.Error(err)
					return
				}
				<-cb.ch
				if cb.err != nil {
					b.Error(cb.err)
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
	b.ReportMetric(rate*entryBytes/1e6, "MB/s")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(allocs, "allocs/entry")
	b.ReportMetric(float64(total)/float64(max(nsyncs, 1)), "entries/fsync")
	if raw.OpsPerSec > 0 {
		b.ReportMetric(rate/raw.OpsPerSec, "x-raw-rate")
		b.ReportMetric(float64(p99)/float64(raw.P99), "p99/raw-p99")
	}
	b.Logf("writers=%d: %.0f entries/s, %.1f MB/s, p50 %v, p99 %v, %.3f allocs/entry, %d fdatasyncs (%.1f entries each); raw fdatasync %.0f/s p50 %v p99 %v; ratios: rate %.2fx raw, p99 %.2fx raw",
		writers, rate, rate*entryBytes/1e6, p50, p99, allocs, nsyncs, float64(total)/float64(max(nsyncs, 1)),
		raw.OpsPerSec, raw.P50, raw.P99, rate/max(raw.OpsPerSec, 1), float64(p99)/float64(max(raw.P99, 1)))
}
