package rereplication_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestReplaceFollowsPlacement: a replacement is chosen by the client's
// rack-aware policy, not at random: of the two writable bookies outside a
// closed ledger's ensemble, the one whose rack the surviving members do not
// use takes the lost member's place, every time, and the fragment is copied
// to it in full. With the only rack-free candidate gone, an enforcing
// policy refuses before anything is copied.
func TestReplaceFollowsPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pw := []byte("pw")
	payload := func(id, e int64) []byte { return fmt.Appendf(nil, "ledger %d entry %d", id, e) }
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	id := w.ID()
	for e := range int64(20) {
		if _, err := w.Append(ctx, payload(id, e)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m, _, err := cl.MD.ReadLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ens := m.Ensembles[0].Ensemble
	var others []metadata.BookieID
	for _, b := range cl.Bookies {
		if !slices.Contains(ens, b.ID) {
			others = append(others, b.ID)
		}
	}
	// The survivors ens[0], ens[1] are in racks 1 and 2; ens[2] is lost.
	// others[0] shares rack 1, others[1] is alone in rack 3.
	racks := map[metadata.BookieID]string{
		ens[0]: "/r/1", ens[1]: "/r/2", ens[2]: "/r/3",
		others[0]: "/r/1", others[1]: "/r/3",
	}
	writable, err := cl.MD.WritableBookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := []metadata.BookieID{ens[2]}
	bks := rereplication.NewBookies(5*time.Second, nil)
	defer bks.Close()

	// Enforcing, without the rack-free candidate: refused, nothing copied.
	enforcing := &rereplication.Replicator{Bookies: bks, Ledgers: cl.MD,
		Placement: placement.New(rand.NewPCG(1, 1), racks, true)}
	without := slices.DeleteFunc(slices.Clone(writable), func(b metadata.BookieID) bool { return b == others[1] })
	if _, found, err := enforcing.ReplaceFirstLost(ctx, id, m, without, lost); !found || !errors.Is(err, placement.ErrNotEnoughBookies) {
		t.Fatalf("enforcing rack placement without a free rack: found %v, err %v; want ErrNotEnoughBookies", found, err)
	}
	if after, v, _ := cl.MD.ReadLedger(ctx, id); !slices.Equal(after.Ensembles[0].Ensemble, ens) {
		t.Fatalf("refused replacement changed the ensemble to %v (version %v)", after.Ensembles[0].Ensemble, v)
	}

	rep := &rereplication.Replicator{Bookies: bks, Ledgers: cl.MD,
		Placement: placement.New(rand.NewPCG(2, 2), racks, false)}
	res, found, err := rep.ReplaceFirstLost(ctx, id, m, writable, lost)
	if !found || err != nil {
		t.Fatalf("ReplaceFirstLost: found %v, err %v", found, err)
	}
	if res.From != ens[2] || res.To != others[1] || res.Entries == 0 || res.Skipped {
		t.Fatalf("replaced %s by %s (%d entries, skipped %v); want %s by %s, the bookie in the rack no survivor uses",
			res.From, res.To, res.Entries, res.Skipped, ens[2], others[1])
	}
	after, _, err := cl.MD.ReadLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := []metadata.BookieID{ens[0], ens[1], others[1]}; !slices.Equal(after.Ensembles[0].Ensemble, want) {
		t.Fatalf("ensemble after the replacement %v, want %v", after.Ensembles[0].Ensemble, want)
	}
	testcluster.CheckStored(ctx, t, cl.MD, id, pw, func(e int64) []byte { return payload(id, e) })
}
