package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// bookieRequests sums, over bookies bs, the count of the bookie metric
// bookkeeper_server_<kind> (both outcomes), read from their /metrics.
func bookieRequests(ctx context.Context, t *testing.T, kind string, bs ...*testcluster.Bookie) int {
	t.Helper()
	prefix := "bookkeeper_server_" + kind + "_count{"
	total := 0
	for _, b := range bs {
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
			if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], prefix) {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("metrics of %s: %q: %v", b.ID, line, err)
				}
				total += int(v)
			}
		}
	}
	return total
}

// writeLedger creates a ledger of e/w/a, appends n entries (payloadOf)
// and closes it if close.
func writeLedger(t *testing.T, ctx context.Context, c *client.Client, e, w, a int, n int64, close bool) *client.WriteHandle {
	t.Helper()
	wh, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: e, WriteQuorumSize: w, AckQuorumSize: a, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, wh, 0, n)
	if close {
		if err := wh.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return wh
}

func openReader(t *testing.T, ctx context.Context, c *client.Client, id int64) *client.ReadHandle {
	t.Helper()
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkEntries checks that es are entries first, first+1, … of ledger id
// with their payloads, n of them.
func checkEntries(t *testing.T, id int64, es []client.Entry, first int64, n int) {
	t.Helper()
	if len(es) != n {
		t.Fatalf("%d entries, want %d (from %d)", len(es), n, first)
	}
	for i, e := range es {
		if e.ID != first+int64(i) || !bytes.Equal(e.Payload, payloadOf(id, e.ID)) {
			t.Fatalf("entry %d: id %d, payload %q", i, e.ID, e.Payload)
		}
	}
}

// frameOf is the batch answer frame of entries first … last of ledger id
// as a bookie counts it (CRC32C digest: 4 bytes).
func frameOf(id, first, last int64) int {
	n := 36
	for e := first; e <= last; e++ {
		n += 4 + 32 + 4 + len(payloadOf(id, e))
	}
	return n
}

func TestBatchRead(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	v2 := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true })
	v3 := newClient(t, cl, nil)
	batches := func() int { return bookieRequests(ctx, t, "BATCH_READ_ENTRY_REQUEST", cl.Bookies...) }
	reads := func() int { return bookieRequests(ctx, t, "READ_ENTRY_REQUEST", cl.Bookies...) }

	full := writeLedger(t, ctx, v3, 3, 3, 2, 20, true) // E == Qw: batch reads apply
	r := openReader(t, ctx, v2, full.ID())

	t.Run("OneRequest", func(t *testing.T) {
		b0, r0 := batches(), reads()
		es, err := r.BatchRead(ctx, 0, 5, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 0, 5)
		if b, rd := batches()-b0, reads()-r0; b != 1 || rd != 0 {
			t.Fatalf("%d batch reads and %d single reads reached the bookies, want 1 and 0", b, rd)
		}
	})
	t.Run("FewerThanAsked", func(t *testing.T) {
		es, err := r.BatchRead(ctx, 15, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 15, 5) // the LAC (the last entry) comes first
	})
	t.Run("MaxBytes", func(t *testing.T) {
		es, err := r.BatchRead(ctx, 3, 10, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 3, 1) // the first entry always comes
		es, err = r.BatchRead(ctx, 3, 10, frameOf(full.ID(), 3, 5))
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 3, 3)
		// The single-read path cuts the same way.
		es, err = openReader(t, ctx, v3, full.ID()).BatchRead(ctx, 3, 10, frameOf(full.ID(), 3, 5)+1)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 3, 3)
	})
	t.Run("BadInput", func(t *testing.T) {
		for _, c := range []struct {
			first          int64
			count, maxSize int
		}{{-1, 1, 0}, {0, 0, 0}, {0, -3, 0}, {0, 1, -1}} {
			if es, err := r.BatchRead(ctx, c.first, c.count, c.maxSize); err == nil || errors.Is(err, client.ErrNoSuchEntry) || es != nil {
				t.Errorf("BatchRead(%d, %d, %d) = %d entries, %v; want an invalid-argument error", c.first, c.count, c.maxSize, len(es), err)
			}
		}
		if _, err := r.BatchRead(ctx, 20, 1, 0); !errors.Is(err, client.ErrReadBeyondLAC) {
			t.Errorf("past the LAC: %v, want ErrReadBeyondLAC", err)
		}
	})
	t.Run("Striped", func(t *testing.T) {
		// E > Qw: no bookie stores a long run; single reads, as Java.
		striped := writeLedger(t, ctx, v3, 3, 2, 2, 20, true)
		b0 := batches()
		es, err := openReader(t, ctx, v2, striped.ID()).BatchRead(ctx, 2, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, striped.ID(), es, 2, 10)
		if b := batches() - b0; b != 0 {
			t.Fatalf("%d batch reads on a striped ledger", b)
		}
	})
	t.Run("V3", func(t *testing.T) {
		b0 := batches()
		es, err := openReader(t, ctx, v3, full.ID()).BatchRead(ctx, 0, 7, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 0, 7)
		if b := batches() - b0; b != 0 {
			t.Fatalf("%d batch reads without UseV2WireProtocol", b)
		}
	})
	t.Run("NeverPastTheLAC", func(t *testing.T) {
		// An open ledger: the bookies store entry 9, but the reader's LAC
		// is 8 (entry 9 carries it); the batch stops at the LAC.
		open := writeLedger(t, ctx, v3, 3, 3, 2, 9, false)
		// Appended after 0 … 8 are acknowledged, entry 9 carries LAC 8.
		if _, err := open.Append(ctx, payloadOf(open.ID(), 9)); err != nil {
			t.Fatal(err)
		}
		rd := openReader(t, ctx, v2, open.ID())
		if lac := rd.LastAddConfirmed(); lac != 8 {
			t.Fatalf("reader LAC %d, want 8", lac)
		}
		es, err := rd.BatchRead(ctx, 5, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, open.ID(), es, 5, 4)
		if err := open.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("UnreachableTurnsBatchOff", func(t *testing.T) {
		// Every replica's connection refused (what a 4.16 bookie's drop
		// of the connection looks like): as Java's notSupportBatch, the
		// handle reads single entries from then on; another handle still
		// batches.
		var mu sync.Mutex
		cut := true
		dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			blocked := cut
			mu.Unlock()
			if blocked {
				return nil, fmt.Errorf("test cut this client off from %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		c := newClient(t, cl, func(cfg *client.Config) { cfg.UseV2WireProtocol, cfg.Dialer = true, dialer })
		rd := openReader(t, ctx, c, full.ID()) // CLOSED: the open asks no bookie
		if _, err := rd.BatchRead(ctx, 0, 3, 0); err == nil {
			t.Fatal("BatchRead with every bookie unreachable succeeded")
		}
		mu.Lock()
		cut = false
		mu.Unlock()
		b0 := batches()
		for {
			// The transport waits out its reconnect backoff first.
			es, err := rd.BatchRead(ctx, 0, 3, 0)
			if err == nil {
				checkEntries(t, full.ID(), es, 0, 3)
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("BatchRead after the cut ended: %v", err)
			}
			time.Sleep(10 * time.Millisecond) // retry interval
		}
		if b := batches() - b0; b != 0 {
			t.Fatalf("%d batch reads from the handle that found no bookie reachable", b)
		}
		es, err := openReader(t, ctx, c, full.ID()).BatchRead(ctx, 0, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, full.ID(), es, 0, 3)
		if b := batches() - b0; b != 1 {
			t.Fatalf("%d batch reads from a new handle, want 1", b)
		}
	})
	t.Run("EnsembleChange", func(t *testing.T) {
		// Entries of two fragments: one request covers first's fragment;
		// the rest comes from the next call.
		cl2 := testcluster.Start(t, 4)
		c := newClient(t, cl2, func(c *client.Config) { c.UseV2WireProtocol = true })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, ctx, w, 0, 5)
		ens := w.Metadata().Ensembles()[0].Bookies
		for _, b := range cl2.Bookies {
			if string(b.ID) == ens[0] {
				b.Kill()
			}
		}
		// Append one at a time until the writer has replaced the killed
		// bookie (its failure may be noticed after a few acknowledgements
		// from the other two).
		n := int64(5)
		for ; len(w.Metadata().Ensembles()) < 2; n++ {
			if n > 1000 {
				t.Fatal("no ensemble change after 1000 appends")
			}
			if _, err := w.Append(ctx, payloadOf(w.ID(), n)); err != nil {
				t.Fatal(err)
			}
		}
		for end := n + 3; n < end; n++ {
			if _, err := w.Append(ctx, payloadOf(w.ID(), n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		split := w.Metadata().Ensembles()[1].FirstEntryID
		rd := openReader(t, ctx, c, w.ID())
		// A bookie may still lack the latest entries of its fragment (the
		// answer then stops early): read on from where each call ended.
		for next := int64(0); next < n; {
			es, err := rd.BatchRead(ctx, next, 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, w.ID(), es, next, len(es))
			last := es[len(es)-1].ID
			if next < split && last >= split {
				t.Fatalf("BatchRead(%d) crossed the fragment boundary at %d: up to %d", next, split, last)
			}
			next = last + 1
		}
	})
}

// A cluster whose bookies answer EBADREQ to batch reads (rejectBatchRead):
// BatchRead falls back to single reads, and each connection stops asking.
func TestBatchReadRejected(t *testing.T) {
	cl := testcluster.Start(t, 3, testcluster.WithSettings("rejectBatchRead=true"))
	ctx := testCtx(t)
	c := newClient(t, cl, func(c *client.Config) { c.UseV2WireProtocol = true })
	w := writeLedger(t, ctx, c, 3, 3, 2, 20, true)
	r := openReader(t, ctx, c, w.ID())
	batches := func() int { return bookieRequests(ctx, t, "BATCH_READ_ENTRY_REQUEST", cl.Bookies...) }
	b0 := batches()
	es, err := r.BatchRead(ctx, 0, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, w.ID(), es, 0, 5)
	b1 := batches()
	if b1-b0 != 3 {
		t.Fatalf("%d batch reads reached the bookies, want one per replica (3)", b1-b0)
	}
	es, err = r.BatchRead(ctx, 5, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, w.ID(), es, 5, 5)
	if b := batches(); b != b1 {
		t.Fatalf("%d more batch reads reached the bookies after each connection's EBADREQ", b-b1)
	}
}

// BatchRead on the single-read path (v3 here; also E > Qw,
// DisableBatchRead, or the fallback after a failed batch) asks only for the
// entries that may fit within maxBytes: maxBytes 1 reads one entry, not
// the whole range cut afterwards. An error after a prefix returns the
// prefix.
func TestBatchReadSingleReads(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	v3 := newClient(t, cl, nil)
	reads := func() int { return bookieRequests(ctx, t, "READ_ENTRY_REQUEST", cl.Bookies...) }

	t.Run("MaxBytes", func(t *testing.T) {
		w := writeLedger(t, ctx, v3, 3, 3, 2, 600, true)
		r := openReader(t, ctx, v3, w.ID())
		r0 := reads()
		es, err := r.BatchRead(ctx, 0, 600, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, w.ID(), es, 0, 1)
		if n := reads() - r0; n != 1 {
			t.Fatalf("BatchRead(0, 600, maxBytes=1) sent %d single reads, want 1", n)
		}
		// A bound that fits a few entries: exactly those, in few reads.
		r0 = reads()
		es, err = r.BatchRead(ctx, 10, 600, frameOf(w.ID(), 10, 14))
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, w.ID(), es, 10, 5)
		if n := reads() - r0; n > 6 {
			t.Fatalf("BatchRead of 5 entries' worth sent %d single reads, want at most 6 (the ledger's average entry sizes the chunk, plus one)", n)
		}
	})

	t.Run("PrefixOnError", func(t *testing.T) {
		// E = 3, Qw = Qa = 1: entry i is stored on bookie i % 3 only.
		// With the third bookie down, entry 2 fails: the entries before
		// it are the result, without the error, as a batch answer ending
		// there. (Last subtest: it kills a bookie.)
		w := writeLedger(t, ctx, v3, 3, 1, 1, 10, true)
		r := openReader(t, ctx, v3, w.ID())
		md, err := v3.LedgerMetadata(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		down := md.EnsembleAt(2)[2]
		for _, b := range cl.Bookies {
			if string(b.ID) == down {
				b.Kill()
			}
		}
		es, err := r.BatchRead(ctx, 0, 10, 0)
		if err != nil {
			t.Fatalf("BatchRead with entry 2's only bookie down: %v, want entries 0 and 1", err)
		}
		checkEntries(t, w.ID(), es, 0, 2)
		if _, err := r.BatchRead(ctx, 2, 10, 0); err == nil {
			t.Fatal("BatchRead from entry 2 with its only bookie down succeeded")
		}
	})
}
