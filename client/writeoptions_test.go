package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// bookieByID returns the cluster's bookie with id.
func bookieByID(t *testing.T, cl *testcluster.Cluster, id metadata.BookieID) *testcluster.Bookie {
	t.Helper()
	for _, b := range cl.Bookies {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no bookie %s in the cluster", id)
	return nil
}

func readMetadata(t *testing.T, ctx context.Context, cl *testcluster.Cluster, id int64) *metadata.LedgerMetadata {
	t.Helper()
	md, _, err := cl.MD.ReadLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// TestDelayEnsembleChange: E=3 Qw=3 Qa=2 with DelayEnsembleChange on 5
// bookies. One ensemble bookie is SIGKILLed: every append still succeeds
// (acknowledged by the two others) and the stored ensembles do not change.
// A second ensemble bookie is killed: appends can no longer reach Qa, so
// the ensemble change runs and replaces both. Every entry reads back.
func TestDelayEnsembleChange(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 5)
	ctx := testCtx(t)
	c := newClient(t, cl, func(cfg *client.Config) { cfg.DelayEnsembleChange = true })
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	first := readMetadata(t, ctx, cl, w.ID()).Ensembles[0].Ensemble
	appendAll(t, ctx, w, 0, 100)

	bookieByID(t, cl, first[1]).Kill()
	appendAll(t, ctx, w, 100, 300)
	if md := readMetadata(t, ctx, cl, w.ID()); len(md.Ensembles) != 1 || !slices.Equal(md.Ensembles[0].Ensemble, first) {
		t.Fatalf("with one bookie of Qw=3 down and Qa=2 still met, the ensemble changed: %s", ledgerState(md))
	}
	if got := w.Metadata().Ensembles(); len(got) != 1 {
		t.Fatalf("handle's metadata has %d ensembles, want 1", len(got))
	}

	bookieByID(t, cl, first[2]).Kill()
	appendAll(t, ctx, w, 400, 100)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md := readMetadata(t, ctx, cl, w.ID())
	last := md.LastEnsemble()
	if len(md.Ensembles) != 2 || last.FirstEntryID < 400 || slices.Contains(last.Ensemble, first[1]) || slices.Contains(last.Ensemble, first[2]) ||
		last.Ensemble[0] != first[0] || md.LastEntryID != 499 {
		t.Fatalf("want one ensemble change at or after entry 400 replacing %s and %s, closed at 499: %s", first[1], first[2], ledgerState(md))
	}
	readBack(t, ctx, newClient(t, cl, nil), w.ID(), 499)
}

// TestAddEntryQuorumTimeout: E=Qw=Qa=3 on 3 bookies, one bookie SIGSTOPped
// (it answers nothing; AddEntryTimeout is far away). The pending appends
// fail with ErrAddQuorumTimeout (also ErrTimeout, code -21), all of them,
// in entry order; the handle closes the ledger at its last acknowledged
// entry and later appends fail with ErrLedgerClosed.
func TestAddEntryQuorumTimeout(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, func(cfg *client.Config) {
		cfg.AddEntryTimeout = time.Hour
		cfg.AddEntryQuorumTimeout = 300 * time.Millisecond
	})
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, w, 0, 20)
	b := cl.Bookies[0]
	b.Pause()
	defer b.Resume()
	futures := make([]*client.AppendFuture, 5)
	for i := range futures {
		futures[i] = w.AppendAsync(payloadOf(w.ID(), int64(20+i)))
	}
	for i, f := range futures {
		_, err := f.Wait(ctx)
		if !errors.Is(err, client.ErrAddQuorumTimeout) || !errors.Is(err, client.ErrTimeout) || client.Code(err) != -21 {
			t.Fatalf("pending append %d: %v (code %d), want ErrAddQuorumTimeout, ErrTimeout, -21", 20+i, err, client.Code(err))
		}
		if i > 0 {
			select {
			case <-futures[i-1].Done():
			default:
				t.Fatalf("append %d failed before append %d", 20+i, 19+i)
			}
		}
	}
	if _, err := w.Append(ctx, []byte("later")); !errors.Is(err, client.ErrLedgerClosed) {
		t.Fatalf("append after the timeout: %v, want ErrLedgerClosed", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close after the handle closed itself: %v", err)
	}
	if md := readMetadata(t, ctx, cl, w.ID()); !md.IsClosed() || md.LastEntryID != 19 {
		t.Fatalf("want the ledger closed at 19: %s", ledgerState(md))
	}
	b.Resume()
	readBack(t, ctx, c, w.ID(), 19)
}

// TestMaxNumEnsembleChanges: E=3 Qw=2 Qa=2 on 5 bookies with
// MaxNumEnsembleChanges=1. The first bookie killed is replaced; after the
// second, the appends that need a second change fail with
// ErrTooManyEnsembleChanges (code -12, Java's WriteException), the ledger
// is closed at the last acknowledged entry with the two ensembles, and
// later appends fail with ErrLedgerClosed.
func TestMaxNumEnsembleChanges(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 5)
	ctx := testCtx(t)
	c := newClient(t, cl, func(cfg *client.Config) { cfg.MaxNumEnsembleChanges = 1 })
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, w, 0, 50)
	bookieByID(t, cl, readMetadata(t, ctx, cl, w.ID()).Ensembles[0].Ensemble[0]).Kill()
	appendAll(t, ctx, w, 50, 50)
	md := readMetadata(t, ctx, cl, w.ID())
	if len(md.Ensembles) != 2 {
		t.Fatalf("want one ensemble change: %s", ledgerState(md))
	}
	// The replacement: the entries it holds have their other copy on a
	// live bookie, so everything acknowledged reads back. It is paused
	// while the ten appends are queued and killed after: the adds that
	// need it wait until all ten are in the handle's queue, ahead of the
	// failure, so each append is pending when the change is refused
	// (killed first, its refused connect could stop the handle before
	// the last AppendAsync calls, which would then fail with
	// ErrLedgerClosed instead).
	second := bookieByID(t, cl, md.LastEnsemble().Ensemble[0])
	second.Pause()
	futures := make([]*client.AppendFuture, 10)
	for i := range futures {
		futures[i] = w.AppendAsync(payloadOf(w.ID(), int64(100+i)))
	}
	second.Kill()
	last, failed := int64(99), 0
	for i, f := range futures {
		id, err := f.Wait(ctx)
		switch {
		case err == nil && failed == 0 && id == last+1:
			last = id
		case errors.Is(err, client.ErrTooManyEnsembleChanges) && client.Code(err) == -12:
			failed++
		default:
			t.Fatalf("append %d: id %d, %v (code %d); want success before any failure, then ErrTooManyEnsembleChanges", 100+i, id, err, client.Code(err))
		}
	}
	if failed == 0 {
		t.Fatal("no append failed with a bookie of every second write set down")
	}
	if _, err := w.Append(ctx, []byte("later")); !errors.Is(err, client.ErrLedgerClosed) {
		t.Fatalf("append after the refused change: %v, want ErrLedgerClosed", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if md := readMetadata(t, ctx, cl, w.ID()); !md.IsClosed() || md.LastEntryID != last || len(md.Ensembles) != 2 {
		t.Fatalf("want the ledger closed at %d with 2 ensembles: %s", last, ledgerState(md))
	}
	readBack(t, ctx, c, w.ID(), last)
}

// TestAppendAsyncContext: an append whose context ends before it is sent
// fails with the context's error and takes no entry id: with room for one
// outstanding append, held by an append a paused bookie stalls, a second
// append waits for room and its context is cancelled; once the bookie
// resumes, the next append gets entry 1.
func TestAppendAsyncContext(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	c := newClient(t, cl, func(cfg *client.Config) { cfg.MaxOutstandingAdds = 1 })
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := w.AppendAsyncContext(done, []byte("never")).Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with an ended context: %v, want context.Canceled", err)
	}

	b := cl.Bookies[0]
	b.Pause()
	f0 := w.AppendAsync(payloadOf(w.ID(), 0))
	actx, acancel := context.WithCancel(ctx)
	got := make(chan *client.AppendFuture, 1)
	go func() { got <- w.AppendAsyncContext(actx, []byte("never")) }()
	acancel()
	if _, err := (<-got).Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("append cancelled while waiting for room: %v, want context.Canceled", err)
	}
	b.Resume()
	if id, err := f0.Wait(ctx); err != nil || id != 0 {
		t.Fatalf("first append: %d, %v", id, err)
	}
	if id, err := w.AppendAsyncContext(ctx, payloadOf(w.ID(), 1)).Wait(ctx); err != nil || id != 1 {
		t.Fatalf("append after the cancelled ones: entry %d, %v; want entry 1", id, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	readBack(t, ctx, c, w.ID(), 1)
}

// TestWriterOptionsValidate: the writer options refuse values Java would
// not mean.
func TestWriterOptionsValidate(t *testing.T) {
	for _, cfg := range []client.Config{
		{AddEntryQuorumTimeout: -time.Second},
		{AddEntryQuorumTimeout: time.Microsecond},
		{MaxNumEnsembleChanges: -2},
	} {
		cfg.MetadataServiceURI = "etcd://127.0.0.1:2379/ledgers"
		if err := cfg.Validate(); !errors.Is(err, client.ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	for _, cfg := range []client.Config{
		{AddEntryQuorumTimeout: time.Millisecond, MaxNumEnsembleChanges: client.NoEnsembleChanges, DelayEnsembleChange: true},
		{AddEntryQuorumTimeout: time.Minute, MaxNumEnsembleChanges: 3},
	} {
		cfg.MetadataServiceURI = "etcd://127.0.0.1:2379/ledgers"
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", cfg, err)
		}
	}
}
