package client

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
)

// recordingLister counts the pages a listing asks the driver for.
type recordingLister struct {
	d metadata.LedgerManager
	t *testing.T

	mu     sync.Mutex
	limits []int
	sizes  []int
}

func (r *recordingLister) ListLedgers(ctx context.Context, start int64, limit int) ([]int64, error) {
	ids, err := r.d.ListLedgers(ctx, start, limit)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, limit)
	r.sizes = append(r.sizes, len(ids))
	return ids, err
}

func (r *recordingLister) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.limits)
}

// listingIDs are the ids the listing tests store: a few thousand, dense
// and sparse, with some past 2^31 so that ZooKeeper's hierarchical layout
// uses both of its trees.
func listingIDs() []int64 {
	var ids []int64
	for i := range int64(2000) {
		ids = append(ids, 1+i)
	}
	for i := range int64(800) {
		ids = append(ids, 10_000+i*997)
	}
	for i := range int64(200) {
		ids = append(ids, 1<<31+i*1_000_003)
	}
	return ids
}

// storeLedgers writes a metadata value for each id, a few at a time.
func storeLedgers(t *testing.T, ctx context.Context, d metadata.Driver, ids []int64) {
	t.Helper()
	md := &metadata.LedgerMetadata{
		EnsembleSize: 1, WriteQuorum: 1, AckQuorum: 1, State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"127.0.0.1:3181"}}},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte{}, Ctime: -1,
	}
	work := make(chan int64)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range work {
				if _, err := d.CreateLedgerMetadata(ctx, id, md); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(work)
		for _, id := range ids {
			select {
			case work <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("store ledger metadata: %v", err)
	}
}

// TestListLedgersPaged lists a few thousand ledgers from real metadata
// stores through the client's pager and checks that it asks for pages of
// the page size, one page at a time and only when the consumer needs it
// (memory is bounded by a page), yielding every id once in ascending order.
func TestListLedgersPaged(t *testing.T) {
	stores := map[string]func(t *testing.T) string{
		"etcd": func(t *testing.T) string { return etcdtest.URI(etcdtest.Start(t), etcdtest.Scope(t)) },
		"zk":   func(t *testing.T) string { return zktest.URI(zktest.Start(t), zktest.Scope(t)) },
	}
	for _, name := range []string{"etcd", "zk"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			d, err := metadata.Open(ctx, stores[name](t), metadata.Options{DialTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			want := listingIDs()
			storeLedgers(t, ctx, d, want)
			slices.Sort(want)

			const page = 128
			r := &recordingLister{d: d, t: t}
			var got []int64
			for id, err := range listLedgers(ctx, r, page) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
				// Lazy: the pages asked for so far cover at most what was
				// consumed, plus the page being consumed.
				if n, most := r.calls(), (len(got)+page-1)/page; n > most {
					t.Fatalf("after %d ids the driver was asked for %d pages, want at most %d", len(got), n, most)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %d ids (first %v), want %d ascending (first %v)", len(got), got[:min(5, len(got))], len(want), want[:5])
			}
			for i, l := range r.limits {
				if l != page || r.sizes[i] > page {
					t.Fatalf("page %d: asked for %d ids, got %d; want pages of at most %d", i, l, r.sizes[i], page)
				}
			}
			if wantCalls := (len(want)+page-1)/page + 1; len(r.limits) > wantCalls {
				t.Errorf("%d pages for %d ids, want at most %d", len(r.limits), len(want), wantCalls)
			}

			// Stopping early asks for no further page.
			r2 := &recordingLister{d: d, t: t}
			n := 0
			for _, err := range listLedgers(ctx, r2, page) {
				if err != nil {
					t.Fatal(err)
				}
				if n++; n == page+1 {
					break
				}
			}
			if r2.calls() != 2 {
				t.Errorf("stopping after %d ids: %d pages asked for, want 2", n, r2.calls())
			}
		})
	}
}

// TestListLedgersCanceled: a cancelled context ends the listing with its
// error, before asking the driver.
func TestListLedgersCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := &recordingLister{t: t}
	var errs []error
	for _, err := range listLedgers(ctx, r, 10) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || errs[0] != context.Canceled || r.calls() != 0 {
		t.Fatalf("got %v after %d pages, want one context.Canceled and no page", errs, r.calls())
	}
}
