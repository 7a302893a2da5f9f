package client_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestSpeculativeReads: with one bookie of every write set SIGSTOPped,
// reads finish well inside the 5 s read timeout, and later reads ask the
// stopped bookie last.
func TestSpeculativeReads(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	pw := []byte("pw")
	w := newClient(t, cl, nil)
	wh, err := w.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, wh, 0, 30)
	if err := wh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, cl, func(cfg *client.Config) { cfg.SpeculativeReadTimeout = 300 * time.Millisecond })
	r, err := c.OpenLedger(ctx, wh.ID(), client.OpenOptions{Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	b := cl.Bookies[0]
	b.Pause()
	t.Cleanup(b.Resume)
	for round := range 2 {
		start := time.Now()
		es, err := r.Read(ctx, 0, 29)
		took := time.Since(start)
		if err != nil || len(es) != 30 {
			t.Fatalf("round %d: read %d entries, %v", round, len(es), err)
		}
		for i, e := range es {
			if !bytes.Equal(e.Payload, payloadOf(wh.ID(), int64(i))) {
				t.Fatalf("entry %d differs", i)
			}
		}
		t.Logf("round %d: 30 entries in %v with %s stopped", round, took, b.ID)
		limit := 2 * time.Second
		if round == 1 {
			limit = 250 * time.Millisecond // the stopped bookie is asked last
		}
		if took > limit {
			t.Fatalf("round %d took %v, want < %v", round, took, limit)
		}
	}
}
