package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestReaderLACSemantics is spec/protocol.md §8.2 #17, plus Tail.
func TestReaderLACSemantics(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	pw := []byte("pw")
	opts := client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw}

	writeSync := func(w *client.WriteHandle, first, last int64) {
		t.Helper()
		for i := first; i <= last; i++ {
			if id, err := w.Append(ctx, payloadOf(w.ID(), i)); err != nil || id != i {
				t.Fatalf("append %d: %d, %v", i, id, err)
			}
		}
	}
	checkEntry := func(ledgerID int64, e *client.Entry, id int64) {
		t.Helper()
		if e == nil || e.ID != id || !bytes.Equal(e.Payload, payloadOf(ledgerID, id)) {
			t.Fatalf("entry %d: got %+v", id, e)
		}
	}

	t.Run("Piggyback", func(t *testing.T) {
		w, err := c.CreateLedger(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		writeSync(w, 0, 9)
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 8 {
			t.Fatalf("ReadLastAddConfirmed = %d, %v; want 8", lac, err)
		}
		if _, err := r.Read(ctx, 0, 9); !errors.Is(err, client.ErrReadBeyondLAC) {
			t.Fatalf("Read(0, 9) = %v, want ErrReadBeyondLAC", err)
		}
		es, err := r.ReadUnconfirmed(ctx, 9, 9)
		if err != nil || len(es) != 1 {
			t.Fatalf("ReadUnconfirmed(9, 9) = %v, %v", es, err)
		}
		checkEntry(w.ID(), &es[0], 9)
		// Entry 9 is confirmed only by the LAC entry 10 carries.
		res, err := r.ReadLastAddConfirmedAndEntry(ctx, 9, 100*time.Millisecond)
		if err != nil || res.Entry != nil || res.LAC != 8 {
			t.Fatalf("long poll for 9 = %+v, %v; want no entry, LAC 8", res, err)
		}
		writeSync(w, 10, 10)
		res, err = r.ReadLastAddConfirmedAndEntry(ctx, 9, 2*time.Second)
		if err != nil || res.LAC != 9 {
			t.Fatalf("long poll for 9 after e10 = %+v, %v; want LAC 9", res, err)
		}
		checkEntry(w.ID(), res.Entry, 9)
	})

	t.Run("ExplicitLACAndLongPoll", func(t *testing.T) {
		o := opts
		o.ExplicitLACInterval = 100 * time.Millisecond
		w, err := c.CreateLedger(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		writeSync(w, 0, 9)
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		// Only the explicit LAC can tell a reader that entry 9 is
		// confirmed: poll until it does (bounded by ctx, not by a guess at
		// how soon).
		for {
			lac, err := r.ReadLastAddConfirmed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if lac == 9 {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}

		// Nothing is written: a long poll for 10 comes back empty after
		// its timeout, never before (the bookies' timers start after the
		// request left; no upper bound: an answer that came late is still
		// the empty answer checked here).
		start := time.Now()
		res, err := r.ReadLastAddConfirmedAndEntry(ctx, 10, 2*time.Second)
		took := time.Since(start)
		if err != nil || res.Entry != nil || res.LAC != 9 {
			t.Fatalf("long poll for 10 = %+v, %v; want no entry, LAC 9", res, err)
		}
		if took < 2*time.Second {
			t.Fatalf("empty long poll returned after %v, before its 2 s timeout", took)
		}

		// e10 is written while a long poll waits on every bookie: the
		// bookies answer it when e10's LAC reaches them (WRITE_LAC), not at
		// the end of their wait. The poll is one request per bookie lasting
		// up to the bookies' cap (30 s; the reader's read timeout is set
		// above it so that the client does not cut it shorter), so an
		// answer within that time came from the write: a bound 300 times
		// the explicit LAC interval, not a guess at a latency.
		const bookieCap = 30 * time.Second
		pc := newClient(t, cl, func(cfg *client.Config) { cfg.ReadEntryTimeout = 2 * bookieCap })
		pr, err := pc.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			res client.LACAndEntry
			err error
			at  time.Time
		}
		got := make(chan result, 1)
		polled := time.Now()
		go func() {
			res, err := pr.ReadLastAddConfirmedAndEntry(ctx, 10, bookieCap)
			got <- result{res, err, time.Now()}
		}()
		for _, b := range cl.Bookies {
			waitLongPolls(ctx, t, b, 1)
		}
		writeSync(w, 10, 10)
		g := <-got
		if g.err != nil || g.res.LAC < 10 {
			t.Fatalf("long poll for 10 = %+v, %v", g.res, g.err)
		}
		checkEntry(w.ID(), g.res.Entry, 10)
		if took := g.at.Sub(polled); took >= bookieCap {
			t.Fatalf("long poll answered after %v: by the bookies' timeout, not by the write", took)
		}

		// Tail follows the ledger until it is closed.
		tailed := make(chan []client.Entry, 1)
		tailErr := make(chan error, 1)
		go func() {
			var out []client.Entry
			for e, err := range r.Tail(ctx, 0) {
				if err != nil {
					tailErr <- err
					return
				}
				out = append(out, e)
			}
			tailed <- out
		}()
		for i := int64(11); i < 20; i++ {
			writeSync(w, i, i)
			time.Sleep(20 * time.Millisecond) // pacing: a writer the tail follows, not a synchronisation
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case out := <-tailed:
			if len(out) != 20 {
				t.Fatalf("tail read %d entries, want 20", len(out))
			}
			for i := range out {
				checkEntry(w.ID(), &out[i], int64(i))
			}
		case err := <-tailErr:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("tail did not end after the ledger was closed")
		}
	})
}

// TestDeferredSync is spec/protocol.md §8.2 #18.
func TestDeferredSync(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	pw := []byte("pw")
	// Qa = Qw = E: the killed bookie is in every write set and every add
	// needs it, so the next add fails whatever the order of the answers.
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3,
		Password: pw, WriteFlags: client.DeferredSync})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Force(ctx); err != nil {
		t.Fatalf("force before any write: %v", err)
	}
	for i := range int64(10) {
		if id, err := w.Append(ctx, payloadOf(w.ID(), i)); err != nil || id != i {
			t.Fatalf("append %d: %d, %v", i, id, err)
		}
		if lac := w.LastAddConfirmed(); lac != -1 {
			t.Fatalf("LAC %d after deferred-sync append %d, want -1", lac, i)
		}
	}
	if err := w.Force(ctx); err != nil {
		t.Fatal(err)
	}
	if lac := w.LastAddConfirmed(); lac != 9 {
		t.Fatalf("LAC after force = %d, want 9", lac)
	}
	cl.Bookies[0].Kill()
	if _, err := w.Append(ctx, payloadOf(w.ID(), 10)); err == nil {
		t.Fatal("append with a killed bookie succeeded (ensemble change with DEFERRED_SYNC?)")
	} else {
		t.Logf("append after kill: %v", err)
	}
	if err := w.Force(ctx); err == nil {
		t.Fatal("force with a killed bookie succeeded")
	}
	// The writer closes the ledger at its forced LAC on its own goroutine;
	// the failed Append and Force may return before that close is stored.
	// Wait for it: a recovery racing it may find entry 10 on the two live
	// bookies and then fail to write it back (Qw = 3 needs a replacement
	// and none is left), which is correct but not what this test checks.
	md, _, err := cl.MD.ReadLedger(ctx, w.ID())
	for err == nil && !md.IsClosed() {
		time.Sleep(10 * time.Millisecond) // polling interval
		md, _, err = cl.MD.ReadLedger(ctx, w.ID())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Ensembles) != 1 || md.LastEntryID != 9 {
		t.Fatalf("writer closed with ensembles %v at %d; want one ensemble, closed at the forced LAC 9", md.Ensembles, md.LastEntryID)
	}
	c2 := newClient(t, cl, nil)
	r, err := c2.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw, Recovery: true})
	if err != nil {
		t.Fatal(err)
	}
	last, err := r.ReadLastAddConfirmed(ctx)
	if err != nil || last < 9 {
		t.Fatalf("recovered last entry %d, %v; want ≥ 9", last, err)
	}
	es, err := r.Read(ctx, 0, last)
	if err != nil || int64(len(es)) != last+1 {
		t.Fatalf("read 0..%d: %d entries, %v", last, len(es), err)
	}
	for i, e := range es {
		if !bytes.Equal(e.Payload, payloadOf(w.ID(), int64(i))) {
			t.Fatalf("entry %d differs", i)
		}
	}
}

// waitLongPolls waits until bookie b has at least n long polls waiting
// (its bookkeeper_server_LONG_POLL_READS_IN_PROGRESS gauge), polling its
// /metrics; ctx bounds the wait.
func waitLongPolls(ctx context.Context, t *testing.T, b *testcluster.Bookie, n int) {
	t.Helper()
	const gauge = "bookkeeper_server_LONG_POLL_READS_IN_PROGRESS"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.HTTPAddr()+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("metrics of %s: %v", b.ID, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("metrics of %s: %v", b.ID, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == gauge {
				if v, err := strconv.ParseFloat(f[1], 64); err == nil && v >= float64(n) {
					return
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: fewer than %d long polls waiting", b.ID, n)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}
