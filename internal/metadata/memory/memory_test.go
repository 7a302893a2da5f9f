package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newHarness(t *testing.T) (*metadatatest.Harness, *Store, *clock.Manual) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	st := NewStore(Options{Clock: clk})
	open := func(t *testing.T) metadata.Driver {
		d := st.Open()
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	h := &metadatatest.Harness{
		Driver:     open(t),
		Open:       open,
		Raw:        st,
		SessionTTL: 10 * time.Second,
		ExpireSession: func(t *testing.T, s metadata.Session) {
			st.SuspendKeepAlive(s)
			clk.Advance(10 * time.Second) // the lease's timer expires it
		},
	}
	return h, st, clk
}

func TestContract(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) *metadatatest.Harness {
		h, _, _ := newHarness(t)
		return h
	})
}

func TestSuspendedLeaseExpiresOnlyAfterTTL(t *testing.T) {
	h, st, clock := newHarness(t)
	ctx := t.Context()
	s, err := h.Driver.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	st.SuspendKeepAlive(s)
	clock.Advance(4 * time.Second)
	st.ExpireLeases()
	if ids, _ := h.Driver.WritableBookies(ctx); len(ids) != 1 {
		t.Fatalf("expired early: %v", ids)
	}
	if clock.Waiters() != 1 {
		t.Fatalf("%d timers while suspended, want the lease's", clock.Waiters())
	}
	st.ResumeKeepAlive(s)
	if clock.Waiters() != 0 {
		t.Fatal("the lease's timer outlives ResumeKeepAlive")
	}
	clock.Advance(time.Hour) // kept alive: no expiry however long
	if ids, _ := h.Driver.WritableBookies(ctx); len(ids) != 1 {
		t.Fatalf("a kept-alive lease expired: %v", ids)
	}
	st.SuspendKeepAlive(s)
	clock.Advance(5 * time.Second)
	// Any operation checks leases.
	if ids, _ := h.Driver.WritableBookies(ctx); len(ids) != 0 {
		t.Fatalf("not expired after TTL: %v", ids)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed")
	}
}

func TestHookForcesCASConflict(t *testing.T) {
	h, st, _ := newHarness(t)
	ctx := t.Context()
	d, rival := h.Driver, h.Open(t)
	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	id, v, err := d.CreateLedger(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	fired := false
	st.SetHook(func(ctx context.Context, op Op, key string, phase Phase) error {
		if op == OpWriteLedger && phase == Before && !fired {
			fired = true
			// A competing writer gets in first.
			_, err := rival.WriteLedger(ctx, id, md, v)
			return err
		}
		return nil
	})
	_, err = d.WriteLedger(ctx, id, md, v)
	if !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("got %v, want ErrBadVersion", err)
	}
}

func TestHookFailsAndAmbiguousCommit(t *testing.T) {
	h, st, _ := newHarness(t)
	ctx := t.Context()
	boom := errors.New("injected: connection lost")
	st.SetHook(FailOps(map[Op]error{OpReadLedger: boom}))
	if _, _, err := h.Driver.ReadLedger(ctx, 1); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	// An error after the create: the ledger exists although the caller
	// was told it failed.
	st.SetHook(func(_ context.Context, op Op, _ string, phase Phase) error {
		if op == OpCreateLedger && phase == After {
			return boom
		}
		return nil
	})
	if _, err := h.Driver.CreateLedgerMetadata(ctx, 9, metadatatest.NewLedgerMetadata(1, 1, 1)); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	st.SetHook(nil)
	if _, _, err := h.Driver.ReadLedger(ctx, 9); err != nil {
		t.Fatalf("ledger not created: %v", err)
	}
}

func TestCreateLedgerRetriesOnExists(t *testing.T) {
	h, _, _ := newHarness(t)
	ctx := t.Context()
	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	// The handle's first ids are bucket 0..2, counter 1: take them.
	for _, id := range []int64{0<<56 | 1, 1<<56 | 1} {
		if _, err := h.Driver.CreateLedgerMetadata(ctx, id, md); err != nil {
			t.Fatal(err)
		}
	}
	id, _, err := h.Driver.CreateLedger(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	if id != 2<<56|1 {
		t.Fatalf("CreateLedger took id %#x, want the third generated (%#x)", id, int64(2<<56|1))
	}
}

func TestClosedDriver(t *testing.T) {
	st := NewStore(Options{})
	d := st.Open()
	ctx := t.Context()
	ch, err := d.WatchBookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	s, err := d.OpenSession(ctx, metadata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch { // closed by Close
	}
	<-s.Done()
	if _, _, err := d.ReadLedger(ctx, 1); !errors.Is(err, metadata.ErrClosed) {
		t.Fatalf("got %v", err)
	}
	other := st.Open()
	defer other.Close()
	if ids, _ := other.WritableBookies(ctx); len(ids) != 0 {
		t.Fatalf("registration outlived its driver: %v", ids)
	}
}

func TestOpenURI(t *testing.T) {
	ctx := t.Context()
	Register()
	Register() // idempotent
	t.Cleanup(func() { ForgetNamed("uri-test") })
	d1, err := metadata.Open(ctx, "memory://uri-test/ledgers", metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	d2, err := metadata.Open(ctx, "memory://uri-test/ledgers", metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if _, err := d1.CreateLedgerMetadata(ctx, 3, metadatatest.NewLedgerMetadata(1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d2.ReadLedger(ctx, 3); err != nil {
		t.Fatalf("second handle does not share the store: %v", err)
	}
}

// A suspended lease expires when the clock passes its TTL, with no
// operation or ExpireLeases call: a bookie watch sees the registration go.
func TestSuspendedLeaseExpiresOnTheClock(t *testing.T) {
	h, st, clock := newHarness(t)
	ctx := t.Context()
	s, err := h.Driver.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	events, err := h.Driver.WatchBookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; len(ev.Writable) != 1 {
		t.Fatalf("first event %+v", ev)
	}
	st.SuspendKeepAlive(s)
	clock.Advance(5 * time.Second)
	select {
	case <-s.Done():
	default:
		t.Fatal("the session did not expire when the clock passed its TTL")
	}
	if ev := <-events; len(ev.Writable) != 0 || ev.Err != nil {
		t.Fatalf("after expiry: %+v", ev)
	}
	if clock.Waiters() != 0 {
		t.Fatal("a timer outlives the expired lease")
	}
}
