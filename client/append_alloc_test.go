package client_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// maxAppendAllocs is the client's allocation budget per pipelined append
// (issue #22): the AppendFuture (returned to the caller, never pooled),
// and the writer's SendAdd and AddComplete effects boxed into
// ledger.Effect. Everything else on the add path — transport request
// records, answers, write sets, pending adds, effect and queue buffers —
// is pooled or reused. The measured figure also holds what the test
// process does meanwhile besides the appends (the embedded etcd serving
// the bookies' sessions), hence the fraction of slack.
const maxAppendAllocs = 3.5

// TestAppendAllocs pins the allocations per entry of pipelined appends:
// one client in this process and three bookie processes on loopback
// (real TCP, v3, E3 Qw2 Qa2 and E3 Qw3 Qa2), 1 KiB entries, at most 1000
// outstanding; counted over every goroutine of the process (the client's
// loop, its connections' readers and writers). Run by make allocs (the
// race detector changes allocation, so it is skipped there).
func TestAppendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	cl := testcluster.Start(t, 3)
	ctx := context.Background()
	for _, q := range []struct{ qw, qa int }{{2, 2}, {3, 2}} {
		c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, MaxOutstandingAdds: 1000})
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: q.qw, AckQuorumSize: q.qa})
		if err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 1024)
		futures := make([]*client.AppendFuture, 0, 1000)
		// run appends n entries, 1000 at a time, each batch waited for
		// from the oldest.
		run := func(n int) {
			for done := 0; done < n; done += cap(futures) {
				futures = futures[:0]
				for range min(cap(futures), n-done) {
					futures = append(futures, w.AppendAsync(payload))
				}
				for _, f := range futures {
					if _, err := f.Wait(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		run(5000) // warm up: connections, pools, buffers at their steady size
		const n = 20000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		run(n)
		runtime.ReadMemStats(&after)
		perEntry := float64(after.Mallocs-before.Mallocs) / n
		t.Logf("E3 Qw%d Qa%d: %.2f allocations, %.0f bytes per append", q.qw, q.qa, perEntry, float64(after.TotalAlloc-before.TotalAlloc)/n)
		if perEntry > maxAppendAllocs {
			t.Errorf("E3 Qw%d Qa%d: %.2f allocations per append, want at most %.1f", q.qw, q.qa, perEntry, maxAppendAllocs)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}
