package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

func lengthOf(id, first, last int64) int64 {
	var n int64
	for e := first; e <= last; e++ {
		n += int64(len(payloadOf(id, e)))
	}
	return n
}

// TestReadHandleOptions: cached LastAddConfirmed and Length,
// TryReadLastAddConfirmed, read-ahead of Entries and sticky reads, against
// real bookies.
func TestReadHandleOptions(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)

	t.Run("ReadAhead", func(t *testing.T) {
		w := writeLedger(t, ctx, c, 3, 2, 2, 1500, true) // three chunks of 512
		for _, ahead := range []int{-1, 1, 3} {
			rc := newClient(t, cl, func(cfg *client.Config) { cfg.ReadAheadChunks = ahead })
			r := openReader(t, ctx, rc, w.ID())
			var got []client.Entry
			for e, err := range r.Entries(ctx, 0, 1499) {
				if err != nil {
					t.Fatalf("ahead %d: %v", ahead, err)
				}
				got = append(got, e)
			}
			checkEntries(t, w.ID(), got, 0, 1500)
			// Stopping early releases the read-ahead (goleak checks
			// that its goroutine ended).
			n := 0
			for _, err := range r.Entries(ctx, 0, 1499) {
				if err != nil {
					t.Fatal(err)
				}
				if n++; n == 600 {
					break
				}
			}
		}
		// While the caller holds the first chunk, the next one is read.
		r := openReader(t, ctx, c, w.ID())
		base := bookieRequests(ctx, t, "READ_ENTRY_REQUEST", cl.Bookies...)
		for _, err := range r.Entries(ctx, 0, 1499) {
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			for bookieRequests(wctx, t, "READ_ENTRY_REQUEST", cl.Bookies...) < base+1024 {
				if wctx.Err() != nil {
					t.Fatal("the second chunk was not read while the first was consumed")
				}
				time.Sleep(10 * time.Millisecond) // polling interval
			}
			cancel()
			break
		}
		// Bad ranges: one error, nothing read.
		for _, rng := range [][2]int64{{5, 2}, {-1, 3}, {0, 1500}} {
			var errs []error
			for e, err := range r.Entries(ctx, rng[0], rng[1]) {
				if err == nil {
					t.Fatalf("Entries(%d, %d) yielded entry %d", rng[0], rng[1], e.ID)
				}
				errs = append(errs, err)
			}
			if len(errs) != 1 || errors.Is(errs[0], client.ErrNoSuchEntry) || (rng[1] == 1500) != errors.Is(errs[0], client.ErrReadBeyondLAC) {
				t.Fatalf("Entries(%d, %d): %v; want one invalid-range error (ErrReadBeyondLAC past the LAC)", rng[0], rng[1], errs)
			}
		}
		// ctx's end reaches the read-ahead and comes back as the error.
		cctx, cancel := context.WithCancel(ctx)
		var last error
		n := 0
		for _, err := range r.Entries(cctx, 0, 1499) {
			if err != nil {
				last = err
				break
			}
			if n++; n == 10 {
				cancel()
			}
		}
		cancel()
		if !errors.Is(last, context.Canceled) {
			t.Fatalf("after ctx's end: %d entries, error %v; want context.Canceled", n, last)
		}
	})

	t.Run("Sticky", func(t *testing.T) {
		w := writeLedger(t, ctx, c, 3, 3, 2, 20, true)
		sc := newClient(t, cl, func(cfg *client.Config) { cfg.StickyReadsEnabled = true })
		r := openReader(t, ctx, sc, w.ID())
		counts := func(bs []*testcluster.Bookie) []int {
			var out []int
			for _, b := range bs {
				out = append(out, bookieRequests(ctx, t, "READ_ENTRY_REQUEST", b))
			}
			return out
		}
		before := counts(cl.Bookies)
		for range 2 {
			es, err := r.Read(ctx, 0, 19)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, w.ID(), es, 0, 20)
		}
		after := counts(cl.Bookies)
		sticky := -1
		for i := range after {
			switch d := after[i] - before[i]; d {
			case 40:
				sticky = i
			case 0:
			default:
				t.Fatalf("bookie %d served %d reads; want all 40 on one bookie (%v -> %v)", i, d, before, after)
			}
		}
		if sticky < 0 {
			t.Fatalf("no sticky bookie: %v -> %v", before, after)
		}
		// The sticky bookie fails: reads move to one other bookie and stay.
		cl.Bookies[sticky].Kill()
		var live []*testcluster.Bookie
		for i, b := range cl.Bookies {
			if i != sticky {
				live = append(live, b)
			}
		}
		before = counts(live)
		for range 2 {
			es, err := r.Read(ctx, 0, 19)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, w.ID(), es, 0, 20)
		}
		after = counts(live)
		if d0, d1 := after[0]-before[0], after[1]-before[1]; !(d0 == 40 && d1 == 0 || d0 == 0 && d1 == 40) {
			t.Fatalf("after the sticky bookie failed: %d and %d reads, want 40 on one", d0, d1)
		}
		cl.Bookies[sticky].WaitUnregistered()
		cl.Bookies[sticky].Start()
		cl.Bookies[sticky].WaitRegistered(false)
	})

	t.Run("CachedLACAndTry", func(t *testing.T) {
		c := newClient(t, cl, nil) // after Sticky's restart: no reconnect backoff
		w := writeLedger(t, ctx, c, 3, 3, 2, 9, false)
		if _, err := w.Append(ctx, payloadOf(w.ID(), 9)); err != nil {
			t.Fatal(err)
		}
		r := openReader(t, ctx, c, w.ID())
		if lac, n := r.LastAddConfirmed(), r.Length(); lac != 8 || n != lengthOf(w.ID(), 0, 9) {
			t.Fatalf("after open: LAC %d length %d; want 8 and %d (through entry 9, which carried the LAC)", lac, n, lengthOf(w.ID(), 0, 9))
		}
		if _, err := w.Append(ctx, payloadOf(w.ID(), 10)); err != nil {
			t.Fatal(err)
		}
		if lac := r.LastAddConfirmed(); lac != 8 {
			t.Fatalf("the cached LAC moved to %d without a read", lac)
		}
		// Entry 10 (carrying LAC 9) is on at least Qa bookies; a bookie
		// without it answers 8, the cached LAC, which does not end the try
		// read (Java's TryReadLastConfirmedOp): the result is 9.
		lac, err := r.TryReadLastAddConfirmed(ctx)
		if err != nil || lac != 9 {
			t.Fatalf("TryReadLastAddConfirmed = %d, %v; want 9", lac, err)
		}
		if got := r.LastAddConfirmed(); got != lac {
			t.Fatalf("cached LAC %d after TryReadLastAddConfirmed returned %d", got, lac)
		}
		if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 9 {
			t.Fatalf("ReadLastAddConfirmed = %d, %v; want 9", lac, err)
		}
		// Reads move the cache too (the LAC entries carry): never back.
		if _, err := r.ReadUnconfirmed(ctx, 10, 10); err != nil {
			t.Fatal(err)
		}
		if lac, n := r.LastAddConfirmed(), r.Length(); lac != 9 || n != lengthOf(w.ID(), 0, 10) {
			t.Fatalf("after reading entry 10: LAC %d length %d; want 9 and %d", lac, n, lengthOf(w.ID(), 0, 10))
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// The metadata says CLOSED: the last entry, without the bookies.
		if lac, err := r.TryReadLastAddConfirmed(ctx); err != nil || lac != 10 {
			t.Fatalf("TryReadLastAddConfirmed after the close = %d, %v; want 10", lac, err)
		}
		if lac, n := r.LastAddConfirmed(), r.Length(); lac != 10 || n != lengthOf(w.ID(), 0, 10) || !r.IsClosed() {
			t.Fatalf("after the close: LAC %d length %d closed %v; want 10 and %d", lac, n, r.IsClosed(), lengthOf(w.ID(), 0, 10))
		}
	})

	t.Run("TryWithOneBookie", func(t *testing.T) {
		// Two of three bookies down: no covering set of LAC answers, but
		// one bookie's answer is enough for TryReadLastAddConfirmed.
		c := newClient(t, cl, nil)
		w := writeLedger(t, ctx, c, 3, 3, 2, 4, false)
		if _, err := w.Append(ctx, payloadOf(w.ID(), 4)); err != nil {
			t.Fatal(err)
		}
		r := openReader(t, ctx, c, w.ID())
		cl.Bookies[0].Kill()
		cl.Bookies[1].Kill()
		if _, err := r.ReadLastAddConfirmed(ctx); err == nil {
			t.Fatal("ReadLastAddConfirmed succeeded with one bookie of three")
		}
		if lac, err := r.TryReadLastAddConfirmed(ctx); err != nil || lac != 3 {
			t.Fatalf("TryReadLastAddConfirmed = %d, %v; want 3", lac, err)
		}
	})
}

func TestReadConfigValidation(t *testing.T) {
	base := client.Config{MetadataServiceURI: "etcd://127.0.0.1:1/ledgers"}
	for _, mod := range []func(*client.Config){
		func(c *client.Config) { c.SpeculativeReadTimeoutBackoffMultiplier = -1 },
		func(c *client.Config) { c.MaxSpeculativeReadTimeout = -time.Second },
		func(c *client.Config) {
			c.FirstSpeculativeReadTimeout, c.MaxSpeculativeReadTimeout = 3*time.Second, time.Second
		},
	} {
		cfg := base
		mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, client.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
	for _, mod := range []func(*client.Config){
		func(*client.Config) {},
		func(c *client.Config) { c.FirstSpeculativeReadTimeout = -1 }, // off
		func(c *client.Config) {
			c.FirstSpeculativeReadTimeout, c.MaxSpeculativeReadTimeout, c.SpeculativeReadTimeoutBackoffMultiplier = 100*time.Millisecond, time.Second, 1.5
		},
		func(c *client.Config) { c.FirstSpeculativeReadTimeout = 5 * time.Second }, // max follows
		func(c *client.Config) { c.StickyReadsEnabled, c.ReadAheadChunks = true, -1 },
	} {
		cfg := base
		mod(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
