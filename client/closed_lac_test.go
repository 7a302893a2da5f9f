package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestClosedLedgerLACIsItsEnd (issue 16 item 2): a reader that saw a LAC
// above the end the ledger is finally closed at (two recoveries that picked
// different ends, a writer closing over a recovery: here the close is
// written straight to the metadata store) treats the end as its LAC: Read
// past it fails with ErrReadBeyondLAC, ReadLastAddConfirmed returns it, a
// long poll past it returns at once with no entry, and Tail ends at it —
// although the bookies hold entries past it.
func TestClosedLedgerLACIsItsEnd(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	pw := []byte("pw")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(16) { // e0..e15, one at a time: the bookies' LAC is 14
		if id, err := w.Append(ctx, payloadOf(w.ID(), i)); err != nil || id != i {
			t.Fatalf("append %d: %d, %v", i, id, err)
		}
	}
	const end = 9

	open := func() *client.ReadHandle {
		t.Helper()
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 14 {
			t.Fatalf("LAC before the close = %d, %v; want 14", lac, err)
		}
		return r
	}
	rRead, rPoll, rTail := open(), open(), open()

	md, v, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	md.State, md.LastEntryID = metadata.LedgerClosed, end
	md.Length = 0
	for i := int64(0); i <= end; i++ {
		md.Length += int64(len(payloadOf(w.ID(), i)))
	}
	if _, err := cl.MD.WriteLedger(ctx, w.ID(), md, v); err != nil {
		t.Fatal(err)
	}

	// Read past the end, with the LAC seen before the close: refused
	// before anything is read, also when the range straddles the end.
	for _, rng := range [][2]int64{{end + 1, end + 1}, {end - 2, end + 3}} {
		if es, err := rRead.Read(ctx, rng[0], rng[1]); !errors.Is(err, client.ErrReadBeyondLAC) || len(es) != 0 {
			t.Fatalf("Read(%d, %d) after the close = %d entries, %v; want ErrReadBeyondLAC", rng[0], rng[1], len(es), err)
		}
	}
	if lac, err := rRead.ReadLastAddConfirmed(ctx); err != nil || lac != end {
		t.Fatalf("ReadLastAddConfirmed after the close = %d, %v; want %d", lac, err, end)
	}
	if es, err := rRead.Read(ctx, 0, end); err != nil || len(es) != end+1 {
		t.Fatalf("Read(0, %d) = %d entries, %v", end, len(es), err)
	}

	// A long poll for the entry after the end: no entry, LAC = end.
	res, err := rPoll.ReadLastAddConfirmedAndEntry(ctx, end+1, time.Minute)
	if err != nil || res.Entry != nil || res.LAC != end {
		t.Fatalf("ReadLastAddConfirmedAndEntry(%d) = %+v, %v; want no entry, LAC %d", end+1, res, err, end)
	}

	// Tail from 0 yields exactly e0..e9 and ends by itself (the context
	// only guards against a hang: Tail used to poll forever).
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got []int64
	for e, err := range rTail.Tail(tctx, 0) {
		if err != nil {
			t.Fatalf("tail: %v", err)
		}
		if !bytes.Equal(e.Payload, payloadOf(w.ID(), e.ID)) {
			t.Fatalf("tail: entry %d differs", e.ID)
		}
		got = append(got, e.ID)
	}
	if tctx.Err() != nil {
		t.Fatalf("tail did not end at the closed end (read %v)", got)
	}
	if len(got) != end+1 || got[0] != 0 || got[end] != end {
		t.Fatalf("tail read %v, want 0..%d", got, end)
	}
}

// TestLongPollPastKnownEnd (issue 16 review): a long poll for an entry past
// the end, outstanding while another caller of the same handle learns that
// the ledger was closed, never returns that entry, even when the bookies'
// LAC then passes it (here the old writer's next add; in production it
// could be a racing recovery's rewrite).
func TestLongPollPastKnownEnd(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	pw := []byte("pw")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(16) {
		if id, err := w.Append(ctx, payloadOf(w.ID(), i)); err != nil || id != i {
			t.Fatalf("append %d: %d, %v", i, id, err)
		}
	}
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 14 {
		t.Fatalf("LAC = %d, %v; want 14", lac, err)
	}
	type result struct {
		res client.LACAndEntry
		err error
	}
	got := make(chan result, 1)
	go func() {
		res, err := r.ReadLastAddConfirmedAndEntry(ctx, 15, time.Minute)
		got <- result{res, err}
	}()
	for _, b := range cl.Bookies {
		waitLongPolls(ctx, t, b, 1)
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
	if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != end || !r.IsClosed() {
		t.Fatalf("after the close: LAC %d, %v, closed %v; want %d, closed", lac, err, r.IsClosed(), end)
	}
	// The bookies' LAC passes 15: e16 carries LAC 15 and answers the poll.
	if _, err := w.Append(ctx, payloadOf(w.ID(), 16)); err != nil {
		t.Fatal(err)
	}
	g := <-got
	if g.err != nil || g.res.Entry != nil || g.res.LAC != end {
		t.Fatalf("long poll for 15 on a handle that knows the end %d = %+v, %v; want no entry, LAC %d", end, g.res, g.err, end)
	}
}
