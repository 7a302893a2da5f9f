package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// BenchmarkEntriesRead measures a sequential scan with ReadHandle.Entries
// of a closed ledger of 1 KiB entries on 3 bookie processes (E3 Qw3 Qa2,
// so BATCH_READ_ENTRY applies), over the v2 protocol, reading each chunk
// with batch reads and with single reads (DisableBatchRead). Reported:
// entries/s and the test process's (client's) CPU time per entry. The
// entries are written before the timer starts; the bookies serve them
// from their caches or a warm page cache (the cold storage path is
// internal/storage/ledgerstore's BenchmarkCatchUpRead).
//
//	go test -run '^$' -bench BenchmarkEntriesRead -benchtime 200000x ./client/
func BenchmarkEntriesRead(b *testing.B) {
	cl := testcluster.Start(b, 3)
	ctx := context.Background()
	wc, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		b.Fatal(err)
	}
	defer wc.Close()
	w, err := wc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2})
	if err != nil {
		b.Fatal(err)
	}
	n := max(b.N, 10000)
	payload := make([]byte, 1024)
	futures := make([]*client.AppendFuture, 0, 1000)
	for i := range n {
		futures = append(futures, w.AppendAsync(payload))
		if len(futures) == cap(futures) || i == n-1 {
			for _, f := range futures {
				if _, err := f.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			futures = futures[:0]
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		noBatch bool
	}{{"batch", false}, {"single", true}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, UseV2WireProtocol: true, DisableBatchRead: bc.noBatch})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{})
			if err != nil {
				b.Fatal(err)
			}
			last := int64(min(b.N, n)) - 1
			cpu0 := cpuTime()
			b.ResetTimer()
			start := time.Now()
			got := int64(0)
			for e, err := range r.Entries(ctx, 0, last) {
				if err != nil {
					b.Fatal(err)
				}
				if e.ID != got || len(e.Payload) != len(payload) {
					b.Fatalf("entry %d: got id %d, %d bytes", got, e.ID, len(e.Payload))
				}
				got++
			}
			el := time.Since(start)
			b.StopTimer()
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(got)/el.Seconds(), "entries/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(got), "client-cpu-µs/entry")
		})
	}
}
