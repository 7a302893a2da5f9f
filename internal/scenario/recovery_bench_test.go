package scenario_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// plant adds entries 0..n-1 of ledger id to every bookie of ensemble with
// raw protocol adds whose piggybacked LAC stays -1: the bookies then report
// LAC -1, and recovery has to read and rewrite all n entries.
func plant(b *testing.B, tr *transport.Transport, id int64, ensemble []metadata.BookieID, n int) {
	dig, err := digest.New(digest.Type(metadata.DigestCRC32C), writerPassword)
	if err != nil {
		b.Fatal(err)
	}
	mk := digest.MasterKey(writerPassword)
	payload := make([]byte, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for e := range int64(n) {
		body := dig.AppendEntry(nil, id, e, -1, (e+1)*int64(len(payload)), payload)
		for _, bk := range ensemble {
			req := wire.Request{
				Header: wire.Header{Op: wire.OpAddEntry},
				Has:    wire.BodyAdd,
				Add:    wire.AddRequest{LedgerID: id, EntryID: e, MasterKey: mk[:], Body: body},
			}
			wg.Add(1)
			tr.Send(string(bk), id, &req, func(resp *wire.Response, err error) {
				defer wg.Done()
				if err == nil && (resp.Status != wire.StatusOK || resp.Add.Status != wire.StatusOK) {
					err = fmt.Errorf("status %v/%v", resp.Status, resp.Add.Status)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			})
		}
		if e%1000 == 999 {
			wg.Wait() // keep the outstanding requests bounded
		}
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("plant: %v", firstErr)
	}
}

// BenchmarkRecovery: time to recover a ledger (E=3 Qw=3 Qa=2, 100-byte
// entries) with N entries past the LAC the bookies report, reading entry by
// entry (batch=1, Java's default) or 16 at a time (Folio's default). Not
// run in CI (it needs bookie processes); see docs/performance.md.
func BenchmarkRecovery(b *testing.B) {
	cl := testcluster.Start(b, 3)
	tr := mustTransport(b, transport.Config{Protocol: wire.ProtocolV3})
	defer tr.Close()
	ctx := context.Background()
	creator, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		b.Fatal(err)
	}
	defer creator.Close()
	for _, n := range []int{0, 100, 1000, 10000} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("N=%d/batch=%d", n, batch), func(b *testing.B) {
				rec, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, RecoveryReadBatchSize: batch, Logger: quietLogger})
				if err != nil {
					b.Fatal(err)
				}
				defer rec.Close()
				var total time.Duration
				for range b.N {
					w, err := creator.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: writerPassword})
					if err != nil {
						b.Fatal(err)
					}
					md, _, err := cl.MD.ReadLedger(ctx, w.ID())
					if err != nil {
						b.Fatal(err)
					}
					plant(b, tr, w.ID(), md.Ensembles[0].Ensemble, n)
					start := time.Now()
					end, err := recoverLedger(ctx, rec, w.ID())
					total += time.Since(start)
					if err != nil || end != int64(n)-1 {
						b.Fatalf("recovered at %d (%v), want %d", end, err, n-1)
					}
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/recovery")
				if n > 0 {
					b.ReportMetric(float64(n)/total.Seconds()*float64(b.N), "entries/s")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))
