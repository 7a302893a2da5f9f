package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrTimeoutDueToLeaderFail, true},
		{rpctypes.ErrGRPCStopped, true},
		{fmt.Errorf("etcd: write: %w", status.Error(codes.Unavailable, "connection reset")), true},
		{status.Error(codes.Unknown, "raft proposal dropped"), true},
		{status.Error(codes.Unknown, "something else"), false},
		{rpctypes.ErrCompacted, false},
		{rpctypes.ErrLeaseNotFound, false},
		{rpctypes.ErrNoSpace, false},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{metadata.ErrBadVersion, false},
	} {
		if got := etcd.Transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRetriedWritesRecogniseTheirEffect: an attempt that follows one which
// failed but was in fact applied (its answer lost in a fail-over) reports
// that earlier success, and never someone else's change as its own.
func TestRetriedWritesRecogniseTheirEffect(t *testing.T) {
	ctx := ctxOf(t)
	d := open(t, etcdtest.URI(shared, etcdtest.Scope(t)))
	md1 := metadatatest.NewLedgerMetadata(3, 2, 2)
	const id = 7

	// Create: applied once, then retried.
	v1, err := d.CreateLedgerMetadata(ctx, id, md1)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := etcd.CreateLedgerAttempt(ctx, d, id, md1, true); err != nil || v != v1 {
		t.Fatalf("retried create after an applied one: %v, %v; want version %d", v, err, v1)
	}
	if _, err := etcd.CreateLedgerAttempt(ctx, d, id, md1, false); !errors.Is(err, metadata.ErrLedgerExists) {
		t.Fatalf("first create attempt on an existing key: %v, want ErrLedgerExists", err)
	}
	other := md1.Clone()
	other.CustomMetadata = map[string][]byte{"application": []byte("someone else")}
	if _, err := etcd.CreateLedgerAttempt(ctx, d, id, other, true); !errors.Is(err, metadata.ErrLedgerExists) {
		t.Fatalf("retried create of other bytes: %v, want ErrLedgerExists", err)
	}

	// Compare-and-set: applied once, then retried.
	md2 := md1.Clone()
	md2.Ensembles[0].Ensemble[1] = "10.0.0.9:3181"
	v2, err := d.WriteLedger(ctx, id, md2, v1)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := etcd.WriteLedgerAttempt(ctx, d, id, md2, v1, true); err != nil || v != v2 {
		t.Fatalf("retried write after an applied one: %v, %v; want version %d", v, err, v2)
	}
	if _, err := etcd.WriteLedgerAttempt(ctx, d, id, md2, v1, false); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("first write attempt on a changed key: %v, want ErrBadVersion", err)
	}
	if _, err := etcd.WriteLedgerAttempt(ctx, d, id, md1, v1, true); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("retried write of bytes other than the stored ones: %v, want ErrBadVersion", err)
	}
	// Someone writes on top: our earlier write is no longer the only put
	// since v1, even if the value comes back to ours.
	md3 := md2.Clone()
	md3.State = metadata.LedgerInRecovery
	v3, err := d.WriteLedger(ctx, id, md3, v2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteLedger(ctx, id, md2, v3); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.WriteLedgerAttempt(ctx, d, id, md2, v1, true); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("retried write when the key changed twice since: %v, want ErrBadVersion", err)
	}

	// Delete: applied once, then retried.
	cur, v, err := d.ReadLedger(ctx, id)
	if err != nil || !cur.Equal(md2) {
		t.Fatal(cur, err)
	}
	if err := d.DeleteLedger(ctx, id, v); err != nil {
		t.Fatal(err)
	}
	if err := etcd.DeleteLedgerAttempt(ctx, d, id, v, true); err != nil {
		t.Fatalf("retried delete after an applied one: %v", err)
	}
	if err := etcd.DeleteLedgerAttempt(ctx, d, id, v, false); !errors.Is(err, metadata.ErrNoSuchLedger) {
		t.Fatalf("first delete attempt of an absent key: %v, want ErrNoSuchLedger", err)
	}

	// Lock: taken once, then retried by the same session; another session
	// is refused.
	ar := metadata.AutoRecoveryDriver(d)
	if err := ar.MarkLedgerUnderReplicated(ctx, 9, []metadata.BookieID{"10.0.0.1:3181"}); err != nil {
		t.Fatal(err)
	}
	s1, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	s2, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	lock, err := ar.LockUnderReplicatedLedger(ctx, s1, 9, "10.0.0.7:3181")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(ctx)
	if _, err := etcd.LockAttempt(ctx, d, s1, 9, "10.0.0.7:3181", true); err != nil {
		t.Fatalf("retried lock after an applied one: %v", err)
	}
	if _, err := etcd.LockAttempt(ctx, d, s1, 9, "10.0.0.7:3181", false); !errors.Is(err, metadata.ErrLocked) {
		t.Fatalf("first lock attempt on a held lock: %v, want ErrLocked", err)
	}
	if _, err := etcd.LockAttempt(ctx, d, s2, 9, "10.0.0.7:3181", true); !errors.Is(err, metadata.ErrLocked) {
		t.Fatalf("retried lock by another session: %v, want ErrLocked", err)
	}
}

// retryLog is a slog handler that reports the driver's retry warnings.
type retryLog struct {
	mu      sync.Mutex
	retries chan string
}

func (h *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *retryLog) WithGroup(string) slog.Handler            { return h }
func (h *retryLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "retrying") {
		var req string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "request" {
				req = a.Value.String()
			}
			return true
		})
		select {
		case h.retries <- req:
		default:
		}
	}
	return nil
}

// TestRidesThroughQuorumLoss: on a 3-member cluster addressed by a
// multi-endpoint URI, with two members stopped (no quorum, no leader) a
// compare-and-set, a read and a bookie registration wait and retry, and
// succeed once a second member is back; the session and its registration
// survive; nothing written before is lost.
func TestRidesThroughQuorumLoss(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	uri := cl.URI(etcdtest.Scope(t))
	if !strings.Contains(uri, ";") {
		t.Fatalf("URI %s has one endpoint", uri)
	}
	ctx := ctxOf(t)
	logs := &retryLog{retries: make(chan string, 16)}
	md, err := metadata.Open(ctx, uri, metadata.Options{
		RequestTimeout: 500 * time.Millisecond, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
		Logger: slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	id, v1, err := md.CreateLedger(ctx, metadatatest.NewLedgerMetadata(3, 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	// A TTL well above the outage, so that the session outlives it.
	s, err := md.OpenSession(ctx, metadata.SessionOptions{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.RegisterBookie(ctx, "10.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}

	cl.Stop(0)
	cl.Stop(1)
	type result struct {
		v   metadata.Version
		err error
	}
	closed := metadatatest.NewLedgerMetadata(3, 2, 2)
	closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 41, 4200
	write := make(chan result, 1)
	go func() {
		v, err := md.WriteLedger(ctx, id, closed, v1)
		write <- result{v, err}
	}()
	register := make(chan error, 1)
	go func() { register <- s.RegisterBookie(ctx, "10.0.0.2:3181", true) }()
	// Both requests have failed at least once against the lone member
	// before the quorum comes back.
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case req := <-logs.retries:
			seen[req] = true
		case r := <-write:
			t.Fatalf("write completed without a quorum: %v %v", r.v, r.err)
		case err := <-register:
			t.Fatalf("registration completed without a quorum: %v", err)
		case <-ctx.Done():
			t.Fatalf("no retries logged (saw %v)", seen)
		}
	}
	cl.Restart(1)
	r := <-write
	if r.err != nil {
		t.Fatalf("write after the quorum came back: %v", r.err)
	}
	if err := <-register; err != nil {
		t.Fatalf("registration after the quorum came back: %v", err)
	}
	got, v, err := md.ReadLedger(ctx, id)
	if err != nil || v != r.v || !got.Equal(closed) {
		t.Fatalf("read back: %+v at %d, %v; want the closed metadata at %d", got, v, err, r.v)
	}
	select {
	case <-s.Done():
		t.Fatal("session lost in the outage")
	default:
	}
	w, err := md.WritableBookies(ctx)
	if err != nil || len(w) != 1 || w[0] != "10.0.0.1:3181" {
		t.Fatalf("writable bookies %v, %v", w, err)
	}
	ro, err := md.ReadOnlyBookies(ctx)
	if err != nil || len(ro) != 1 || ro[0] != "10.0.0.2:3181" {
		t.Fatalf("read-only bookies %v, %v", ro, err)
	}
	// The third member rejoins and catches up: a driver on it alone reads
	// the close.
	cl.Restart(0)
	only := open(t, "etcd://"+cl.Hosts()[0]+md.(*etcd.Driver).Scope())
	if got, v, err := only.ReadLedger(ctx, id); err != nil || v != r.v || !got.Equal(closed) {
		t.Fatalf("read through the restarted member: %+v at %d, %v", got, v, err)
	}
}

// TestRequestsGiveUpWithTheContext: without a quorum a request fails when
// its context ends, naming both the store's error and the deadline.
func TestRequestsGiveUpWithTheContext(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	ctx := ctxOf(t)
	md, err := metadata.Open(ctx, cl.URI(etcdtest.Scope(t)), metadata.Options{RequestTimeout: 200 * time.Millisecond, RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	cl.Stop(1)
	cl.Stop(2)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _, err = md.ReadLedger(short, 1)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("read without a quorum: %v; want the deadline and the attempts", err)
	}
}
