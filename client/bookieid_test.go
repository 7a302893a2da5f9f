package client_test

import (
	"strings"
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestCustomBookieIDs runs a cluster whose bookies have custom ids
// (bookieId=bookie-<port>, not host:port): the client finds each bookie's
// address in the BookieServiceInfo of its registration. It writes through
// an ensemble change (a bookie killed mid-ledger), reads back, and recovers
// a ledger whose writer went away, all by id.
func TestCustomBookieIDs(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 4, testcluster.WithCustomBookieIDs())
	ctx := testCtx(t)

	// The registration says where each bookie is.
	for _, b := range cl.Bookies {
		if strings.Contains(string(b.ID), ":") {
			t.Fatalf("bookie id %s is host:port", b.ID)
		}
		addr, err := metadata.ResolveBookie(ctx, cl.MD, b.ID)
		if err != nil || addr != b.Addr() {
			t.Fatalf("resolve %s = %q, %v; want %s", b.ID, addr, err, b.Addr())
		}
	}

	c := newClient(t, cl, nil)
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	md, _, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	victim := md.Ensembles[0].Ensemble[0]
	appendAll(t, ctx, w, 0, 200)
	for _, b := range cl.Bookies {
		if b.ID == victim {
			b.Kill()
		}
	}
	appendAll(t, ctx, w, 200, 200)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md, _, err = cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Ensembles) < 2 || md.LastEntryID != 399 {
		t.Fatalf("want an ensemble change and last entry 399: %+v", md)
	}
	for _, seg := range md.Ensembles {
		for _, b := range seg.Ensemble {
			if !strings.HasPrefix(string(b), "bookie-") {
				t.Fatalf("ensemble member %s is not a custom id", b)
			}
		}
	}
	readBack(t, ctx, newClient(t, cl, nil), w.ID(), 399)

	// Recovery: the writer's client goes away with the ledger open.
	wc := newClient(t, cl, nil)
	w2, err := wc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, w2, 0, 50)
	wc.Close()
	r, err := newClient(t, cl, nil).OpenLedger(ctx, w2.ID(), client.OpenOptions{Password: []byte("pw"), Recovery: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	md, _, err = cl.MD.ReadLedger(ctx, w2.ID())
	if err != nil {
		t.Fatal(err)
	}
	if md.State != metadata.LedgerClosed || md.LastEntryID != 49 {
		t.Fatalf("after recovery: state %v, last entry %d; want closed at 49", md.State, md.LastEntryID)
	}
	readBack(t, ctx, newClient(t, cl, nil), w2.ID(), 49)
}
