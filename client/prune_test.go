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
// stays bounded where bookies come and go.
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

	// A pruned bookie is connected afresh when asked again: a new ledger
	// on the three remaining bookies works, and so does reading the old
	// one from them (E6 Qw6: every entry is on each).
	w2, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Append(ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
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
