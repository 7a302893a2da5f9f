package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestPerBookieStatePrunedWhenBookiesLeave (issue #22 §4): a client that
// wrote to six bookie processes, three of which then leave the cluster,
// keeps their connections while an open write handle's ensemble holds
// them, and once that handle is closed holds no per-bookie state for them
// (transport connections, remembered addresses, health), so its memory
// stays bounded where bookies come and go; the old ledger still reads,
// and a bookie that left and comes back under its id is written to again.
func TestPerBookieStatePrunedWhenBookiesLeave(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := testcluster.Start(t, 3)
	var leaving []*testcluster.Bookie
	for range 3 {
		b := cl.NewBookie()
		b.Start()
		b.WaitRegistered(false)
		leaving = append(leaving, b)
	}
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, EnableBookieHealthCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, ctx, "the client sees six writable bookies", func() bool { return client.WritableCount(c) == 6 })
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 6, WriteQuorumSize: 6, AckQuorumSize: 6})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := w.Append(ctx, []byte("entry")); err != nil {
			t.Fatal(err)
		}
	}
	all := func() []string {
		var ids []string
		for _, b := range cl.Bookies {
			ids = append(ids, string(b.ID))
		}
		slices.Sort(ids)
		return ids
	}()
	if got := client.ConnectedBookies(c); !slices.Equal(got, all) {
		t.Fatalf("connections to %v after writing to all six, want %v", got, all)
	}

	gone := map[metadata.BookieID]bool{}
	for _, b := range leaving {
		b.Terminate()
		b.WaitUnregistered()
		gone[b.ID] = true
	}
	waitFor(t, ctx, "the client sees the three left", func() bool { return client.WritableCount(c) == 3 })
	// The membership change pruned already; prune again now that it
	// surely ran: the open handle's ensemble still holds the three.
	client.PruneNow(c)
	if got := client.ConnectedBookies(c); !slices.Equal(got, all) {
		t.Fatalf("connections to %v while an open handle's ensemble holds all six, want %v", got, all)
	}

	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The handle's loop prunes as it exits, after Close has returned.
	left := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if gone[metadata.BookieID(id)] {
				out = append(out, id)
			}
		}
		return out
	}
	waitFor(t, ctx, "connections to the bookies that left are pruned", func() bool { return len(left(client.ConnectedBookies(c))) == 0 })
	if got := client.ConnectedBookies(c); len(got) != 3 {
		t.Errorf("connections to %v, want the three registered bookies", got)
	}
	if n := client.RememberedAddresses(c); n > 3 {
		t.Errorf("the resolver remembers %d bookie addresses, want at most the three registered", n)
	}
	for b := range gone {
		if client.HasHealthState(c, string(b)) {
			t.Errorf("health state of %s kept", b)
		}
	}

	// The old ledger (E6 Qw6: every entry is on each bookie) reads from
	// the three that stayed: their connections were kept, and the reads
	// of the three that left fail over to them.
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readEntries(t, ctx, r, 10)

	// A bookie that left comes back under the same id (same directory
	// and port): the client, which forgot its connection, connects
	// afresh. A ledger on all four registered bookies includes it.
	back := leaving[0]
	back.Start()
	back.WaitRegistered(false)
	waitFor(t, ctx, "the client sees the returning bookie", func() bool { return client.WritableCount(c) == 4 })
	w2, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 4, WriteQuorumSize: 4, AckQuorumSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := w2.Append(ctx, []byte("entry")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(client.ConnectedBookies(c), string(back.ID)) {
		t.Errorf("no connection to the returning bookie %s after writing a ledger on it: %v", back.ID, client.ConnectedBookies(c))
	}
	r2, err := c.OpenLedger(ctx, w2.ID(), client.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readEntries(t, ctx, r2, 5)
	// And the old ledger still reads, the returning bookie among its
	// replicas again.
	readEntries(t, ctx, r, 10)
}

// readEntries reads entries 0 … n-1 of r and checks each is "entry".
func readEntries(t *testing.T, ctx context.Context, r *client.ReadHandle, n int64) {
	t.Helper()
	entries, err := r.Read(ctx, 0, n-1)
	if err != nil {
		t.Fatalf("read ledger %d: %v", r.ID(), err)
	}
	if int64(len(entries)) != n {
		t.Fatalf("read ledger %d: %d entries, want %d", r.ID(), len(entries), n)
	}
	for i, e := range entries {
		if e.ID != int64(i) || string(e.Payload) != "entry" {
			t.Fatalf("read ledger %d: entry %d is %d %q", r.ID(), i, e.ID, e.Payload)
		}
	}
}

// waitFor waits until cond holds, or fails the test at ctx's end.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond): // poll interval, not a synchronisation
		}
	}
}
