package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
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

// Entries over batch reads whose answers end before the chunk does: each
// short answer is continued from the entry after it, and every entry is
// yielded once, in order. Answers are cut by the frame limit (a 64 KiB
// frame holds ~100 of these entries, a chunk is 512), by a fragment
// boundary inside a chunk (an ensemble change), and by a bookie that lacks
// the later entries (it was paused while they were written, then
// restarted without them).
func TestEntriesShortBatches(t *testing.T) {
	cl := testcluster.Start(t, 4)
	ctx := testCtx(t)
	batches := func(t *testing.T, bs ...*testcluster.Bookie) int {
		return bookieRequests(ctx, t, "BATCH_READ_ENTRY_REQUEST", bs...)
	}
	singles := func(t *testing.T) int {
		return bookieRequests(ctx, t, "READ_ENTRY_REQUEST", cl.Bookies...)
	}
	bookie := func(t *testing.T, id string) *testcluster.Bookie {
		for _, b := range cl.Bookies {
			if string(b.ID) == id {
				return b
			}
		}
		t.Fatalf("no bookie %s", id)
		return nil
	}

	t.Run("FrameLimit", func(t *testing.T) {
		c := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol, c.MaxFrameSize = true, 64<<10 })
		w := writeLedger(t, ctx, c, 3, 3, 2, 1200, true)
		r := openReader(t, ctx, c, w.ID())
		b0, s0 := batches(t, cl.Bookies...), singles(t)
		checkEntries(t, w.ID(), collect(t, r, 0, 1199), 0, 1200)
		// At least one answer per 64 KiB of frames; no single reads.
		if b, s := batches(t, cl.Bookies...)-b0, singles(t)-s0; b < frameOf(w.ID(), 0, 1199)/(64<<10) || s != 0 {
			t.Fatalf("%d batch and %d single reads, want ≥ %d batches and no single reads", b, s, frameOf(w.ID(), 0, 1199)/(64<<10))
		}
	})

	t.Run("FragmentBoundary", func(t *testing.T) {
		c := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, ctx, w, 0, 100)
		victim := bookie(t, w.Metadata().Ensembles()[0].Bookies[1])
		victim.Kill()
		defer func() {
			victim.WaitUnregistered() // the killed process's lease
			victim.Start()
			victim.WaitRegistered(false)
		}()
		n := int64(100)
		for ; len(w.Metadata().Ensembles()) < 2; n++ {
			if n > 1100 {
				t.Fatal("no ensemble change after 1000 appends")
			}
			if _, err := w.Append(ctx, payloadOf(w.ID(), n)); err != nil {
				t.Fatal(err)
			}
		}
		appendAll(t, ctx, w, n, 100)
		n += 100
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if split := w.Metadata().Ensembles()[1].FirstEntryID; split <= 0 || split >= n-1 {
			t.Fatalf("fragment boundary at %d of %d entries", split, n)
		}
		var up []*testcluster.Bookie
		for _, b := range cl.Bookies {
			if b != victim {
				up = append(up, b)
			}
		}
		r := openReader(t, ctx, c, w.ID())
		b0 := batches(t, up...)
		checkEntries(t, w.ID(), collect(t, r, 0, n-1), 0, int(n)) // one chunk, two fragments
		if b := batches(t, up...) - b0; b < 2 {
			t.Fatalf("%d batch reads over two fragments", b)
		}
	})

	t.Run("BookieLacksLaterEntries", func(t *testing.T) {
		c := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol, c.AddEntryTimeout = true, time.Hour })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, ctx, w, 0, 100)
		// Entry 0's write set starts with the ensemble's first bookie: the
		// first batch goes to it.
		lagging := bookie(t, w.Metadata().Ensembles()[0].Bookies[0])
		lagging.Pause()
		appendAll(t, ctx, w, 100, 100) // acknowledged by the other two
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		lagging.Restart() // killed: the writes it never read are lost
		if n := len(w.Metadata().Ensembles()); n != 1 {
			t.Fatalf("%d fragments, want 1 (no ensemble change)", n)
		}
		r := openReader(t, ctx, newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true }), w.ID())
		b0, l0 := batches(t, cl.Bookies...), batches(t, lagging)
		checkEntries(t, w.ID(), collect(t, r, 0, 199), 0, 200)
		if b, l := batches(t, cl.Bookies...)-b0, batches(t, lagging)-l0; l == 0 || b < 2 {
			t.Fatalf("%d batch reads, %d of them to the bookie lacking entries 100…199; want it asked and the rest read on", b, l)
		}
	})
}

// A reader that saw a LAC above the end the ledger is then closed at (the
// close written straight to the metadata store, as in
// TestClosedLedgerLACIsItsEnd): Entries over batch reads, which learns the
// close when it refreshes the metadata, fails with ErrReadBeyondLAC and
// never yields an entry past the end, though the bookies hold them.
func TestEntriesBatchedStopsAtLearntClose(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true })
	w := writeLedger(t, ctx, c, 3, 3, 2, 0, false)
	for i := range int64(16) { // one at a time: the bookies' LAC is 14
		if id, err := w.Append(ctx, payloadOf(w.ID(), i)); err != nil || id != i {
			t.Fatalf("append %d: %d, %v", i, id, err)
		}
	}
	r := openReader(t, ctx, c, w.ID())
	if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 14 {
		t.Fatalf("LAC = %d, %v; want 14", lac, err)
	}
	const end = 9
	md, v, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	md.State, md.LastEntryID, md.Length = metadata.LedgerClosed, end, 0
	for i := int64(0); i <= end; i++ {
		md.Length += int64(len(payloadOf(w.ID(), i)))
	}
	if _, err := cl.MD.WriteLedger(ctx, w.ID(), md, v); err != nil {
		t.Fatal(err)
	}
	var failed error
	for e, err := range r.Entries(ctx, 0, 14) {
		if err != nil {
			failed = err
			break
		}
		if e.ID > end {
			t.Fatalf("Entries yielded entry %d past the closed end %d", e.ID, end)
		}
	}
	if !errors.Is(failed, client.ErrReadBeyondLAC) {
		t.Fatalf("Entries(0, 14) over a ledger closed at %d: %v, want ErrReadBeyondLAC", end, failed)
	}
}
