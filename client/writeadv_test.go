package client_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// writeAtOrder checks DESIGN.md §6 invariant 5 for explicit ids: futures
// (indexed by entry id) complete with their own id, and when entry i's
// future is done, every lower entry's future is done too.
func writeAtOrder(t *testing.T, ctx context.Context, futures []*client.AppendFuture) {
	t.Helper()
	for i, f := range futures {
		id, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if id != int64(i) {
			t.Fatalf("entry %d acknowledged as %d", i, id)
		}
		for j := range i {
			select {
			case <-futures[j].Done():
			default:
				t.Fatalf("entry %d acknowledged before entry %d", i, j)
			}
		}
	}
}

// readBackAdv reads entries 0..last of ledger id and compares them with
// payloadOf; the closed metadata must end at last with the sum of their
// lengths.
func readBackAdv(t *testing.T, ctx context.Context, c *client.Client, id, last int64) {
	t.Helper()
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	md := r.Metadata()
	var length int64
	for i := range last + 1 {
		length += int64(len(payloadOf(id, i)))
	}
	if md.LastEntryID() != last || md.Length() != length {
		t.Fatalf("closed at entry %d length %d, want %d length %d", md.LastEntryID(), md.Length(), last, length)
	}
	if last < 0 {
		return
	}
	entries, err := r.Read(ctx, 0, last)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if e.ID != int64(i) || !bytes.Equal(e.Payload, payloadOf(id, int64(i))) {
			t.Fatalf("entry %d (id %d) differs from what was written", i, e.ID)
		}
	}
}

// TestWriteAdv runs the explicit-id scenarios that share one 3-bookie
// cluster of real bookie processes.
func TestWriteAdv(t *testing.T) {
	cl := testcluster.Start(t, 3)
	opts := func(id int64) client.LedgerOptions {
		return client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw"), LedgerID: id}
	}

	// Entries written in a shuffled order within a sliding window, many in
	// flight: acknowledged in id order, read back byte-exact, closed at the
	// last id with the sum of the lengths.
	t.Run("OutOfOrder", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, nil)
		const ledgerID = 1<<40 + 1
		w, err := c.CreateLedgerAdv(ctx, opts(ledgerID))
		if err != nil {
			t.Fatal(err)
		}
		if w.ID() != ledgerID {
			t.Fatalf("ID() = %d, want %d", w.ID(), ledgerID)
		}
		const n, window = 3000, 64
		rng := rand.New(rand.NewPCG(1, 2))
		futures := make([]*client.AppendFuture, n)
		for lo := 0; lo < n; lo += window {
			ids := rng.Perm(min(window, n-lo))
			for _, k := range ids {
				id := int64(lo + k)
				futures[id] = w.WriteAtAsync(id, payloadOf(ledgerID, id))
			}
		}
		writeAtOrder(t, ctx, futures)
		if lac := w.LastAddConfirmed(); lac != n-1 {
			t.Fatalf("LastAddConfirmed = %d", lac)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if md := w.Metadata(); md.State() != client.LedgerStateClosed || md.LastEntryID() != n-1 {
			t.Fatalf("Metadata() after Close: state %v last %d", md.State(), md.LastEntryID())
		}
		readBackAdv(t, ctx, newClient(t, cl, nil), ledgerID, n-1)
	})

	// Refused ids fail at once with their sentinel and disturb nothing: a
	// pending id, an acknowledged id, a negative id; then the gap is filled
	// and every entry completes.
	t.Run("BadIDs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, nil)
		w, err := c.CreateLedgerAdv(ctx, opts(0))
		if err != nil {
			t.Fatal(err)
		}
		id := w.ID()
		f0 := w.WriteAtAsync(0, payloadOf(id, 0))
		if _, err := f0.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		// e3 is stored but waits behind the gap at 1 and 2.
		f3 := w.WriteAtAsync(3, payloadOf(id, 3))
		for _, tc := range []struct {
			id   int64
			want error
			code int
		}{{3, client.ErrDuplicateEntryID, -22}, {0, client.ErrDuplicateEntryID, -22}, {-1, client.ErrInvalidEntryID, -14}} {
			err := w.WriteAt(ctx, tc.id, []byte("other"))
			if !errors.Is(err, tc.want) || client.Code(err) != tc.code {
				t.Fatalf("WriteAt(%d): %v (code %d), want %v (code %d)", tc.id, err, client.Code(err), tc.want, tc.code)
			}
		}
		select {
		case <-f3.Done():
			t.Fatal("entry 3 completed with entries 1 and 2 missing")
		default:
		}
		if lac := w.LastAddConfirmed(); lac != 0 {
			t.Fatalf("LastAddConfirmed = %d with entries 1 and 2 missing", lac)
		}
		f2 := w.WriteAtAsync(2, payloadOf(id, 2))
		f1 := w.WriteAtAsync(1, payloadOf(id, 1))
		writeAtOrder(t, ctx, []*client.AppendFuture{f0, f1, f2, f3})
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// After close every id fails with ErrLedgerClosed, a new one too.
		if err := w.WriteAt(ctx, 4, []byte("x")); !errors.Is(err, client.ErrLedgerClosed) {
			t.Fatalf("WriteAt after Close: %v, want ErrLedgerClosed", err)
		}
		readBackAdv(t, ctx, c, id, 3)
	})

	// Close with a gap pending (Java's LedgerHandleAdv does the same): the
	// entry above the gap fails with ErrLedgerClosed and the ledger ends at
	// the LAC; the entry, though stored on bookies, is not in the ledger.
	t.Run("CloseWithGap", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, nil)
		w, err := c.CreateLedgerAdv(ctx, opts(0))
		if err != nil {
			t.Fatal(err)
		}
		id := w.ID()
		for i := range int64(2) {
			if err := w.WriteAt(ctx, i, payloadOf(id, i)); err != nil {
				t.Fatal(err)
			}
		}
		f3 := w.WriteAtAsync(3, payloadOf(id, 3))
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := f3.Wait(ctx); !errors.Is(err, client.ErrLedgerClosed) {
			t.Fatalf("entry 3 above the gap: %v, want ErrLedgerClosed", err)
		}
		readBackAdv(t, ctx, c, id, 1)
	})

	// Chosen ledger ids: CreateLedger honours LedgerID too; a taken id
	// fails with ErrLedgerExists (code -20) for both and leaves the
	// existing ledger as it was; a negative id is ErrInvalidConfig.
	t.Run("ChosenLedgerID", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		c := newClient(t, cl, nil)
		const ledgerID = 1<<40 + 2
		w, err := c.CreateLedger(ctx, opts(ledgerID))
		if err != nil {
			t.Fatal(err)
		}
		if w.ID() != ledgerID {
			t.Fatalf("ID() = %d, want %d", w.ID(), ledgerID)
		}
		appendAll(t, ctx, w, 0, 10)
		before, err := c.LedgerMetadata(ctx, ledgerID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateLedger(ctx, opts(ledgerID)); !errors.Is(err, client.ErrLedgerExists) || client.Code(err) != -20 {
			t.Fatalf("CreateLedger of a taken id: %v (code %d), want ErrLedgerExists (-20)", err, client.Code(err))
		}
		if _, err := c.CreateLedgerAdv(ctx, opts(ledgerID)); !errors.Is(err, client.ErrLedgerExists) {
			t.Fatalf("CreateLedgerAdv of a taken id: %v, want ErrLedgerExists", err)
		}
		after, err := c.LedgerMetadata(ctx, ledgerID)
		if err != nil {
			t.Fatal(err)
		}
		if !after.Equal(before) {
			t.Fatalf("a refused create changed the ledger: %+v, was %+v", after, before)
		}
		appendAll(t, ctx, w, 10, 10)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		readBack(t, ctx, c, ledgerID, 19)
		for _, bad := range []int64{-1, metadata.MaxLedgerID + 1} {
			if _, err := c.CreateLedgerAdv(ctx, opts(bad)); !errors.Is(err, client.ErrInvalidConfig) {
				t.Fatalf("LedgerID %d: %v, want ErrInvalidConfig", bad, err)
			}
		}
	})
}

// TestWriteAdvEnsembleChangeWithGap: 4 bookies, E=3 Qw=2 Qa=2. Entries
// 0..999 are written except a gap at 500; entries above the gap are stored
// but wait. A bookie of the ensemble is SIGKILLed: the ensemble change
// starts the new fragment at LAC+1 (at most 500, covering the gap), and
// the pending entries are resent to the replacement. Then more entries
// come, the gap is filled, and every entry is acknowledged in order and
// reads back byte-exact from the new ensemble.
func TestWriteAdvEnsembleChangeWithGap(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 4)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	w, err := c.CreateLedgerAdv(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	id := w.ID()
	victim := w.Metadata().Ensembles()[0].Bookies[1]
	const n, gap = 1500, 500
	futures := make([]*client.AppendFuture, n)
	for i := range int64(1000) {
		if i != gap {
			futures[i] = w.WriteAtAsync(i, payloadOf(id, i))
		}
	}
	writeAtOrder(t, ctx, futures[:gap])
	for _, b := range cl.Bookies {
		if string(b.ID) == victim {
			b.Kill()
		}
	}
	for i := int64(1000); i < n; i++ {
		futures[i] = w.WriteAtAsync(i, payloadOf(id, i))
	}
	// Wait for the change to be stored before filling the gap, so that the
	// gap entry is written to the new ensemble.
	for md, err := range c.WatchLedgerMetadata(ctx, id) {
		if err != nil {
			t.Fatalf("waiting for the ensemble change: %v", err)
		}
		if len(md.Ensembles()) > 1 {
			if first := md.Ensembles()[len(md.Ensembles())-1].FirstEntryID; first > gap {
				t.Fatalf("new fragment starts at %d, above the gap at %d", first, gap)
			}
			break
		}
	}
	if lac := w.LastAddConfirmed(); lac != gap-1 {
		t.Fatalf("LastAddConfirmed = %d before the gap is filled, want %d", lac, gap-1)
	}
	futures[gap] = w.WriteAtAsync(gap, payloadOf(id, gap))
	writeAtOrder(t, ctx, futures)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md := w.Metadata()
	if last := md.Ensembles()[len(md.Ensembles())-1]; slices.Contains(last.Bookies, victim) {
		t.Fatalf("last fragment still holds the killed bookie %s: %+v", victim, md.Ensembles())
	}
	readBackAdv(t, ctx, newClient(t, cl, nil), id, n-1)
}
