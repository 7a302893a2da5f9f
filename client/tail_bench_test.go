package client_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// BenchmarkTailingLag measures how long an entry takes from the writer's
// Append call until a reader following the ledger with Tail (long-poll LAC
// reads) yields it: a writer at a fixed rate of 1 KiB entries, 3 bookie
// processes on loopback, E=3 Qw=2 Qa=2. An entry becomes visible when the
// LAC covers it: piggybacked on the next entry, or sent by the explicit LAC
// flush. b.N is the number of entries.
//
//	go test -run '^$' -bench BenchmarkTailingLag -benchtime 2000x ./client/
func BenchmarkTailingLag(b *testing.B) {
	cl := testcluster.Start(b, 3)
	for _, bc := range []struct {
		name     string
		interval time.Duration // between appends
		lac      time.Duration // ExplicitLACInterval (0: piggyback only)
	}{
		{"rate200-piggyback", 5 * time.Millisecond, 0},
		{"rate200-explicitLAC20ms", 5 * time.Millisecond, 20 * time.Millisecond},
		{"rate1000-piggyback", time.Millisecond, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, ExplicitLACInterval: bc.lac})
			if err != nil {
				b.Fatal(err)
			}
			r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: nil})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			got := make(chan error, 1)
			go func() {
				n := 0
				for e, err := range r.Tail(ctx, 0) {
					if err != nil {
						got <- err
						return
					}
					sent := time.Unix(0, int64(binary.BigEndian.Uint64(e.Payload)))
					_ = hist.RecordValue(time.Since(sent).Microseconds())
					if n++; n == b.N {
						got <- nil
						return
					}
				}
				got <- ctx.Err()
			}()
			payload := make([]byte, 1024)
			b.ResetTimer()
			tick := time.NewTicker(bc.interval)
			defer tick.Stop()
			for range b.N {
				<-tick.C
				binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
				// AppendAsync does not copy: give each entry its own buffer.
				p := append([]byte(nil), payload...)
				w.AppendAsync(p)
			}
			// The last entries become visible with the close.
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			if err := <-got; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(hist.ValueAtQuantile(50)), "lag-p50-µs")
			b.ReportMetric(float64(hist.ValueAtQuantile(99)), "lag-p99-µs")
		})
	}
}
