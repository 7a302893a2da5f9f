// Package benchbase measures the machine's own limits in the same run as a
// benchmark, so that benchmark figures are reported as ratios to them
// (DESIGN.md §7: nothing asserts a time; the machines are noisy). It is
// imported only by benchmarks.
package benchbase

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Disk is the raw write+fdatasync rate and latency of one directory.
type Disk struct {
	OpsPerSec float64
	P50, P99  time.Duration
}

// NewLatencyHist returns a histogram of microseconds up to 10 s, three
// significant digits: the one the benchmarks record latencies in.
func NewLatencyHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
}

// MeasureFdatasync writes rounds blocks of size bytes into a file in dir,
// each followed by fdatasync, as a journal does. Every block is written and
// synced once beforehand (written, not fallocated, like the journal's
// zero-filled files), so the figure is the sync of data, not block
// allocation or a file-size update.
func MeasureFdatasync(dir string, rounds, size int) (Disk, error) {
	fs := vfs.Default
	f, err := os.CreateTemp(dir, "fdatasync-probe-")
	if err != nil {
		return Disk{}, err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	vf, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return Disk{}, err
	}
	defer vf.Close()
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < int64(rounds+1)*int64(size); off += int64(len(zeros)) {
		if _, err := vf.WriteAt(zeros, off); err != nil {
			return Disk{}, err
		}
	}
	if err := vf.Sync(); err != nil {
		return Disk{}, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	h := NewLatencyHist()
	start := time.Now()
	for i := range rounds {
		t0 := time.Now()
		if _, err := vf.WriteAt(buf, int64(i)*int64(size)); err != nil {
			return Disk{}, err
		}
		if err := vf.SyncData(); err != nil {
			return Disk{}, err
		}
		_ = h.RecordValue(time.Since(t0).Microseconds())
	}
	return Disk{
		OpsPerSec: float64(rounds) / time.Since(start).Seconds(),
		P50:       time.Duration(h.ValueAtQuantile(50)) * time.Microsecond,
		P99:       time.Duration(h.ValueAtQuantile(99)) * time.Microsecond,
	}, nil
}

// Fdatasync is MeasureFdatasync as a benchmark of b.N rounds: it reports
// fdatasync/s, p50-µs and p99-µs and logs them.
func Fdatasync(b *testing.B, dir string, size int) Disk {
	b.Helper()
	b.ResetTimer()
	d, err := MeasureFdatasync(dir, b.N, size)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(d.OpsPerSec, "fdatasync/s")
	b.ReportMetric(float64(d.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(d.P99.Microseconds()), "p99-µs")
	b.Logf("raw %s write+fdatasync into written blocks: %.0f/s, p50 %v, p99 %v (n=%d)",
		byteSize(size), d.OpsPerSec, d.P50, d.P99, b.N)
	return d
}

func byteSize(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}
