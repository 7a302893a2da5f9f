package client_test

import (
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// collect runs Entries over first … last and returns what it yields.
func collect(t *testing.T, r *client.ReadHandle, first, last int64) []client.Entry {
	t.Helper()
	var out []client.Entry
	for e, err := range r.Entries(testCtx(t), first, last) {
		if err != nil {
			t.Fatalf("Entries(%d, %d): %v", first, last, err)
		}
		out = append(out, e)
	}
	return out
}

// Entries over v2 on an E == Qw ledger reads its chunks with
// BATCH_READ_ENTRY (a few requests, not one per entry); over v3, or with
// DisableBatchRead, with single reads; the entries are the same.
func TestEntriesUsesBatchRead(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	v2 := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true })
	w := writeLedger(t, ctx, v2, 3, 3, 2, 1200, true) // three chunks of ≤ 512
	batches := func() int { return bookieRequests(ctx, t, "BATCH_READ_ENTRY_REQUEST", cl.Bookies...) }
	singles := func() int { return bookieRequests(ctx, t, "READ_ENTRY_REQUEST", cl.Bookies...) }

	r := openReader(t, ctx, v2, w.ID())
	b0, s0 := batches(), singles()
	checkEntries(t, w.ID(), collect(t, r, 0, 1199), 0, 1200)
	checkEntries(t, w.ID(), collect(t, r, 700, 1100), 700, 401)
	if b, s := batches()-b0, singles()-s0; b == 0 || b > 10 || s != 0 {
		t.Fatalf("%d batch and %d single reads for 2 scans of 3 and 1 chunks; want a few batches, no single reads", b, s)
	}

	for name, c := range map[string]*client.Client{
		"v3":               newClient(t, cl, nil),
		"DisableBatchRead": newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol, c.DisableBatchRead = true, true }),
	} {
		r := openReader(t, ctx, c, w.ID())
		b0, s0 := batches(), singles()
		checkEntries(t, w.ID(), collect(t, r, 0, 1199), 0, 1200)
		if b, s := batches()-b0, singles()-s0; b != 0 || s < 1200 {
			t.Fatalf("%s: %d batch and %d single reads, want none and ≥ 1200", name, b, s)
		}
	}

	// E > Qw: a bookie holds no long run, so single reads (as Java).
	w2 := writeLedger(t, ctx, v2, 3, 2, 2, 100, true)
	r2 := openReader(t, ctx, v2, w2.ID())
	b0 = batches()
	checkEntries(t, w2.ID(), collect(t, r2, 0, 99), 0, 100)
	if b := batches() - b0; b != 0 {
		t.Fatalf("E > Qw: %d batch reads", b)
	}
}

// Bookies that refuse BATCH_READ_ENTRY (EBADREQ): Entries falls back to
// single reads and yields every entry.
func TestEntriesBatchReadRejected(t *testing.T) {
	cl := testcluster.Start(t, 3, testcluster.WithSettings("rejectBatchRead=true"))
	ctx := testCtx(t)
	c := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true })
	w := writeLedger(t, ctx, c, 3, 3, 2, 600, true)
	r := openReader(t, ctx, c, w.ID())
	checkEntries(t, w.ID(), collect(t, r, 0, 599), 0, 600)
}
