package client_test

import (
	"context"
	"crypto/tls"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
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

// BenchmarkAppendTLS measures TLS's cost end to end: 3 bookie processes
// with TLS (client certificates required of TLS clients, ECDSA P-256 keys;
// TLS is opt-in per connection, so plaintext clients are served too), and
// one client at a time appending 1 KiB entries with 256 outstanding
// (MaxOutstandingAdds), E=3 Qw=2 Qa=2, v3: "plain" without TLS, "tls" with
// client.Config.TLS. Reported as BenchmarkAppend.
//
//	go test -run '^$' -bench BenchmarkAppendTLS -benchtime 50000x -count 3 ./client/
func BenchmarkAppendTLS(b *testing.B) {
	ca := tlstest.NewCA(b, "bench-ca")
	dir := b.TempDir()
	bf := ca.Write(b, dir, "bookie", ca.Issue(b, tlstest.Leaf{CommonName: "bookie"}))
	cl := testcluster.Start(b, 3, testcluster.WithSettings(
		"tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory",
		"tlsKeyStoreType=PEM", "tlsKeyStore="+bf.Key, "tlsCertificatePath="+bf.Cert,
		"tlsTrustStoreType=PEM", "tlsTrustStore="+bf.CA, "tlsClientAuthentication=true"))
	cf := ca.Write(b, b.TempDir(), "client", ca.Issue(b, tlstest.Leaf{CommonName: "client", OU: "0:writer"}))
	tlsCfg, err := client.TLSConfigFromPEM(cf.CA, cf.Cert, cf.Key)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		tls  *tls.Config
	}{{"plain", nil}, {"tls", tlsCfg}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, MaxOutstandingAdds: 256, TLS: bc.tls})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2})
			if err != nil {
				b.Fatal(err)
			}
			benchAppends(b, ctx, w)
		})
	}
}

// benchAppends is BenchmarkAppend's loop: warm-up, then b.N pipelined 1 KiB
// appends with their latency, rate and the client's CPU per entry.
func benchAppends(b *testing.B, ctx context.Context, w *client.WriteHandle) {
	payload := make([]byte, 1024)
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
}

// BenchmarkWriteHandleMemory measures the client's memory per open write
// handle (issue #22 §2): 1,000 ledgers (E3 Qw2 Qa2) created and each
// appended to once, all left open, against 3 bookie processes and an etcd
// process (so the test process holds only the client and this loop).
// Reported, not asserted: the live heap after a collection and the
// process's resident set (VmRSS), each as the growth from before the
// handles were opened divided by their number, and goroutines per handle.
//
//	go test -run '^$' -bench BenchmarkWriteHandleMemory -benchtime 1x ./client/
func BenchmarkWriteHandleMemory(b *testing.B) {
	const handles = 1000
	cl := testcluster.Start(b, 3, testcluster.WithEtcdCluster(testcluster.EtcdOptions{Members: 1}))
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, 1024)
	open := func(n int) []*client.WriteHandle {
		ws := make([]*client.WriteHandle, 0, n)
		for range n {
			w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := w.Append(ctx, payload); err != nil {
				b.Fatal(err)
			}
			ws = append(ws, w)
		}
		return ws
	}
	closeAll := func(ws []*client.WriteHandle) {
		for _, w := range ws {
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Warm up: connections to every bookie, the metadata client, pools.
	closeAll(open(10))
	for range b.N {
		heap0, rss0, g0 := memNow(b)
		ws := open(handles)
		heap1, rss1, g1 := memNow(b)
		b.ReportMetric(float64(int64(heap1)-int64(heap0))/handles, "heap-B/handle")
		b.ReportMetric(float64(int64(rss1)-int64(rss0))/handles, "rss-B/handle")
		b.ReportMetric(float64(g1-g0)/handles, "goroutines/handle")
		b.ReportMetric(float64(heap1)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(rss1)/(1<<20), "rss-MiB")
		closeAll(ws)
	}
}

// memNow returns the live heap after two collections, the resident set
// size from /proc/self/status and the number of goroutines.
func memNow(b *testing.B) (heap, rss uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", rest, err)
			}
			rss = kb << 10
		}
	}
	return ms.HeapAlloc, rss, runtime.NumGoroutine()
}
