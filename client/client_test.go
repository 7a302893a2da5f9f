package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

func newClient(t *testing.T, cl *testcluster.Cluster, mod func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{MetadataServiceURI: cl.URI}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// payloadOf is entry i's payload: distinct, variable-size bytes.
func payloadOf(ledgerID, i int64) []byte {
	n := 16 + int(i%97)*11
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(int64(j)*31 + i*7 + ledgerID)
	}
	copy(b, fmt.Sprintf("l%d-e%d|", ledgerID, i))
	return b
}

// appendAll pipelines n appends and checks acknowledgements: every future
// gets its own index as entry id (contiguous from 0), and when future i
// completes every lower one has already completed (strictly increasing).
func appendAll(t *testing.T, ctx context.Context, w *client.WriteHandle, first, n int64) {
	t.Helper()
	futures := make([]*client.AppendFuture, n)
	for i := range n {
		futures[i] = w.AppendAsync(payloadOf(w.ID(), first+i))
	}
	checkAcks(t, ctx, futures, first)
}

func checkAcks(t *testing.T, ctx context.Context, futures []*client.AppendFuture, first int64) {
	t.Helper()
	for i, f := range futures {
		id, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", first+int64(i), err)
		}
		if id != first+int64(i) {
			t.Fatalf("append %d acknowledged as entry %d", first+int64(i), id)
		}
		if i > 0 {
			select {
			case <-futures[i-1].Done():
			default:
				t.Fatalf("entry %d acknowledged before entry %d", id, id-1)
			}
		}
	}
}

func readBack(t *testing.T, ctx context.Context, c *client.Client, id, last int64) {
	t.Helper()
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != last {
		t.Fatalf("ReadLastAddConfirmed = %d, %v; want %d", lac, err, last)
	}
	entries, err := r.Read(ctx, 0, last)
	if err != nil {
		t.Fatalf("read 0..%d: %v (got %d entries)", last, err, len(entries))
	}
	if int64(len(entries)) != last+1 {
		t.Fatalf("read %d entries, want %d", len(entries), last+1)
	}
	for i, e := range entries {
		if e.ID != int64(i) || !bytes.Equal(e.Payload, payloadOf(id, int64(i))) {
			t.Fatalf("entry %d (id %d) differs from what was written", i, e.ID)
		}
	}
}

// TestCluster3 runs the scenarios that share one 3-bookie cluster.
func TestCluster3(t *testing.T) {
	cl := testcluster.Start(t, 3)

	t.Run("Pipelined10000", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, nil)
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		const n = 10000
		appendAll(t, ctx, w, 0, n)
		if lac := w.LastAddConfirmed(); lac != n-1 {
			t.Fatalf("LastAddConfirmed = %d", lac)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, []byte("x")); !errors.Is(err, client.ErrLedgerClosed) {
			t.Fatalf("append after close: %v, want ErrLedgerClosed", err)
		}
		md, _, err := cl.MD.ReadLedger(ctx, w.ID())
		if err != nil || !md.IsClosed() || md.LastEntryID != n-1 {
			t.Fatalf("metadata after close: %v %v", ledgerState(md), err)
		}
		readBack(t, ctx, c, w.ID(), n-1)

		// Entries iterates the same bytes.
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		next := int64(0)
		for e, err := range r.Entries(ctx, 0, n-1) {
			if err != nil || e.ID != next || !bytes.Equal(e.Payload, payloadOf(w.ID(), next)) {
				t.Fatalf("Entries at %d: id %d, %v", next, e.ID, err)
			}
			next++
		}
		if next != n {
			t.Fatalf("Entries yielded %d", next)
		}
		if _, err := r.Read(ctx, 0, n); !errors.Is(err, client.ErrReadBeyondLAC) {
			t.Fatalf("read beyond LAC: %v", err)
		}
	})

	t.Run("TailingReader", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, nil)
		w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		// Pipelined entries carry the LAC of when they were sent (-1 for a
		// burst), so one more append, sent after the burst was
		// acknowledged, carries LAC 19 to the bookies.
		appendAll(t, ctx, w, 0, 20)
		if id, err := w.Append(ctx, payloadOf(w.ID(), 20)); err != nil || id != 20 {
			t.Fatalf("append 20: %d, %v", id, err)
		}
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		if r.IsClosed() {
			t.Fatal("open ledger reported closed")
		}
		lac, err := r.ReadLastAddConfirmed(ctx)
		if err != nil || lac != 19 {
			t.Fatalf("ReadLastAddConfirmed = %d, %v; want 19", lac, err)
		}
		if _, err := r.Read(ctx, 0, lac); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(ctx, 0, 20); !errors.Is(err, client.ErrReadBeyondLAC) {
			t.Fatalf("read beyond LAC: %v", err)
		}
		got, err := r.ReadUnconfirmed(ctx, 20, 20)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0].Payload, payloadOf(w.ID(), 20)) {
			t.Fatalf("ReadUnconfirmed(20): %v, %v", got, err)
		}
		if _, err := r.ReadUnconfirmed(ctx, 21, 21); !errors.Is(err, client.ErrNoSuchEntry) {
			t.Fatalf("ReadUnconfirmed(21) = %v, want ErrNoSuchEntry", err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 20 || !r.IsClosed() {
			t.Fatalf("after close: LAC %d, %v, closed %v", lac, err, r.IsClosed())
		}
	})

	t.Run("V2Protocol", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, func(cfg *client.Config) { cfg.UseV2WireProtocol = true })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte("pw"), DigestType: client.DigestCRC32})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, ctx, w, 0, 500)
		if _, err := w.Append(ctx, payloadOf(w.ID(), 500)); err != nil {
			t.Fatal(err)
		}
		// LAC read of the open ledger over v2 (READ_ENTRY -1).
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 499 {
			t.Fatalf("v2 LAC read: %d, %v", lac, err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		readBack(t, ctx, c, w.ID(), 500)
	})

	t.Run("Fencing", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		writer := newClient(t, cl, nil)
		recoverer := newClient(t, cl, nil)
		w, err := writer.CreateLedger(ctx, client.LedgerOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, ctx, w, 0, 10)
		if _, err := recoverer.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("wrong")}); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("open with the wrong password: %v", err)
		}
		r, err := recoverer.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw"), Recovery: true})
		if err != nil {
			t.Fatal(err)
		}
		if !r.IsClosed() {
			t.Fatal("recovered ledger not closed")
		}
		if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 9 {
			t.Fatalf("recovered LAC %d, %v; want 9", lac, err)
		}
		if _, err := w.Append(ctx, []byte("after fence")); !errors.Is(err, client.ErrLedgerFenced) {
			t.Fatalf("append after recovery: %v, want ErrLedgerFenced", err)
		}
		if got := client.Code(client.ErrLedgerFenced); got != -101 {
			t.Fatalf("Code(ErrLedgerFenced) = %d", got)
		}
		if _, err := w.Append(ctx, []byte("again")); !errors.Is(err, client.ErrLedgerFenced) {
			t.Fatalf("second append after fence: %v", err)
		}
		// The writer closes at its LAC, which is the recovered end.
		if err := w.Close(ctx); err != nil {
			t.Fatalf("writer close after recovery: %v", err)
		}
		readBack(t, ctx, recoverer, w.ID(), 9)
		if err := recoverer.DeleteLedger(ctx, w.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := recoverer.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")}); !errors.Is(err, client.ErrNoSuchLedger) {
			t.Fatalf("open deleted ledger: %v", err)
		}
	})

	t.Run("FailFastWhenBusy", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		// A dial held until the second append has been refused keeps the
		// first append outstanding meanwhile.
		gate := make(chan struct{})
		slowDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		c := newClient(t, cl, func(cfg *client.Config) {
			cfg.MaxOutstandingAdds, cfg.FailFastWhenBusy, cfg.Dialer = 1, true, slowDial
		})
		w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		first := w.AppendAsync(payloadOf(w.ID(), 0))
		if _, err := w.AppendAsync([]byte("x")).Wait(ctx); !errors.Is(err, client.ErrTooManyRequests) {
			t.Fatalf("second append with one slot: %v, want ErrTooManyRequests", err)
		}
		close(gate)
		if id, err := first.Wait(ctx); err != nil || id != 0 {
			t.Fatalf("first append: %d, %v", id, err)
		}
		if id, err := w.Append(ctx, payloadOf(w.ID(), 1)); err != nil || id != 1 {
			t.Fatalf("append once the slot is free: %d, %v", id, err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		readBack(t, ctx, c, w.ID(), 1)
	})

	t.Run("DialerCutsOffBookie", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		var mu sync.Mutex
		cut := map[string]bool{}
		dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			blocked := cut[addr]
			mu.Unlock()
			if blocked {
				return nil, fmt.Errorf("test cut this client off from %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		c := newClient(t, cl, func(cfg *client.Config) { cfg.Dialer = dialer })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		md, _, err := cl.MD.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		victim := md.Ensembles[0].Ensemble[0]
		mu.Lock()
		cut[string(victim)] = true
		mu.Unlock()
		appendAll(t, ctx, w, 0, 50)
		md, _, err = cl.MD.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(md.LastEnsemble().Ensemble, victim) {
			t.Fatalf("cut-off bookie %s still in the last ensemble: %s", victim, ledgerState(md))
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		readBack(t, ctx, newClient(t, cl, nil), w.ID(), 49)
	})
}

func ledgerState(md *metadata.LedgerMetadata) string {
	if md == nil {
		return "<nil>"
	}
	return fmt.Sprintf("state=%v last=%d ensembles=%v", md.State, md.LastEntryID, md.Ensembles)
}

// TestEnsembleChangeOnBookieKill: with 4 bookies and E=3, Qw=2, Qa=2, an
// ensemble bookie is SIGKILLed mid-stream. Every append succeeds, the
// metadata gains a fragment without the dead bookie, and every entry reads
// back (spec/protocol.md §8.2 #10).
func TestEnsembleChangeOnBookieKill(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 4)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	md, _, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	victim := md.Ensembles[0].Ensemble[1]
	const n = 4000
	futures := make([]*client.AppendFuture, 0, n)
	for i := range int64(n) {
		futures = append(futures, w.AppendAsync(payloadOf(w.ID(), i)))
		if i == 1500 {
			if _, err := futures[1000].Wait(ctx); err != nil {
				t.Fatal(err)
			}
			for _, b := range cl.Bookies {
				if b.ID == victim {
					b.Kill()
				}
			}
		}
	}
	checkAcks(t, ctx, futures, 0)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md, _, err = cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Ensembles) < 2 || slices.Contains(md.LastEnsemble().Ensemble, victim) || md.LastEntryID != n-1 {
		t.Fatalf("want a new fragment without %s and last entry %d: %s", victim, n-1, ledgerState(md))
	}
	readBack(t, ctx, newClient(t, cl, nil), w.ID(), n-1)
}

// TestNotEnoughBookiesClosesLedger: exactly 3 bookies, E=Qw=Qa=3, one is
// SIGKILLed. No replacement exists, so the pending add fails and the ledger
// is closed at the last acknowledged entry (spec/protocol.md §8.2 #11).
func TestNotEnoughBookiesClosesLedger(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, w, 0, 100)
	cl.Bookies[0].Kill()
	_, err = w.Append(ctx, payloadOf(w.ID(), 100))
	if !errors.Is(err, client.ErrNotEnoughBookies) {
		t.Fatalf("append with a bookie down and no spare: %v, want ErrNotEnoughBookies", err)
	}
	if _, err := w.Append(ctx, []byte("x")); !errors.Is(err, client.ErrLedgerClosed) {
		t.Fatalf("later append: %v, want ErrLedgerClosed", err)
	}
	if lac := w.LastAddConfirmed(); lac != 99 {
		t.Fatalf("LastAddConfirmed = %d, want 99", lac)
	}
	// The writer closes the ledger itself, at its LAC.
	for {
		md, _, err := cl.MD.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if md.IsClosed() {
			if md.LastEntryID != 99 {
				t.Fatalf("closed at %d, want 99", md.LastEntryID)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("ledger not closed: %s", ledgerState(md))
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close after the writer closed itself: %v", err)
	}
	// Two bookies of three still hold every entry (Qa = 3).
	readBack(t, ctx, c, w.ID(), 99)
}
