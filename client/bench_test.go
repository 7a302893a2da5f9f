package client_test

import (
	"context"
	"crypto/tls"
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
