package client_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// BenchmarkAppend measures pipelined 1 KiB appends end to end: this client
// and 3 bookie processes (real journals with fsync) on loopback. Reported:
// entries/s, latency percentiles from AppendAsync to acknowledgement, and
// allocations per entry in the test process (the client plus the benchmark
// loop; the bookies are other processes), and the test process's CPU time
// per entry.
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 100000x ./client/
func BenchmarkAppend(b *testing.B) {
	cl := testcluster.Start(b, 3)
	for _, bc := range []struct {
		name      string
		e, qw, qa int
		window    int // MaxOutstandingAdds
	}{
		{"E3Qw3Qa2", 3, 3, 2, 10000},
		{"E3Qw2Qa2", 3, 2, 2, 10000},
		{"E3Qw2Qa2-window1000", 3, 2, 2, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, MaxOutstandingAdds: bc.window})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: bc.e, WriteQuorumSize: bc.qw, AckQuorumSize: bc.qa})
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 1024)
			// Warm up connections and the bookies' ledger state.
			for range 100 {
				if _, err := w.Append(ctx, payload); err != nil {
					b.Fatal(err)
				}
			}
			hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			futures := make(chan *client.AppendFuture, 4096)
			starts := make(chan time.Time, 4096)
			done := make(chan error, 1)
			go func() {
				for f := range futures {
					start := <-starts
					if _, err := f.Wait(ctx); err != nil {
						done <- err
						return
					}
					_ = hist.RecordValue(time.Since(start).Microseconds())
				}
				done <- nil
			}()
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			cpuBefore := cpuTime()
			begin := time.Now()
			for range b.N {
				starts <- time.Now()
				futures <- w.AppendAsync(payload)
			}
			close(futures)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(begin)
			cpu := cpuTime() - cpuBefore
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-cpu-µs/entry")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-µs")
			b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-µs")
			b.ReportMetric(float64(hist.ValueAtQuantile(99.9)), "p99.9-µs")
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used: the
// client's cost, since the bookies are other processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
