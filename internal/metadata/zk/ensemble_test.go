package zk_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/metadata/zk"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
)

// retry runs f until it succeeds (a client that lost its server sees
// connection errors until it has reconnected, as Java's does) or a minute
// passes.
func retry[T any](t *testing.T, what string, f func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := f()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEnsembleFailover: on a 3-server ensemble, each server in turn is
// killed and restarted. The driver's clients move to another server within
// their session timeouts: the bookie's session (and so its ephemeral
// registration) survives, compare-and-set writes go on, a ledger watch
// keeps delivering. With two servers down (no quorum) metadata operations
// fail with an error, and succeed again once a quorum is back.
func TestEnsembleFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server ZooKeeper ensemble; not with -short")
	}
	e := zktest.StartEnsemble(t, 3)
	root := zktest.Scope(t)
	u, err := metadata.ParseURI(zktest.EnsembleURI(e, root))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxOf(t)
	d, err := zk.Open(ctx, u, zk.Config{SessionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	const b = metadata.BookieID("10.0.0.1:3181")
	if err := s.RegisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	id, v, err := d.CreateLedger(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	wch, err := d.WatchLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-wch; ev.Err != nil || ev.Version != v {
		t.Fatalf("first watch event %+v", ev)
	}

	for i, srv := range e.Servers {
		srv.Kill()
		// A CAS write through whichever server the client reaches.
		next := md.Clone()
		next.CustomMetadata = map[string][]byte{"round": {byte(i)}}
		nv := retry(t, "write with a server down", func() (metadata.Version, error) {
			nv, err := d.WriteLedger(ctx, id, next, v)
			if errors.Is(err, metadata.ErrBadVersion) {
				// An earlier attempt landed but its answer was lost.
				got, gv, rerr := d.ReadLedger(ctx, id)
				if rerr == nil && got.Equal(next) {
					return gv, nil
				}
			}
			return nv, err
		})
		if nv <= v {
			t.Fatalf("version %d after %d", nv, v)
		}
		v = nv
		for {
			ev := <-wch
			if ev.Err != nil || ev.Deleted {
				t.Fatalf("watch event %+v with server %s down", ev, srv.Addr())
			}
			if ev.Version == v {
				break
			}
		}
		ids := retry(t, "list bookies", func() ([]metadata.BookieID, error) { return d.WritableBookies(ctx) })
		if !slices.Equal(ids, []metadata.BookieID{b}) {
			t.Fatalf("with %s down: writable bookies %v", srv.Addr(), ids)
		}
		select {
		case <-s.Done():
			t.Fatalf("the session expired when %s went down", srv.Addr())
		default:
		}
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// No quorum: operations fail (with an error, not a hang past their
	// context), then work again.
	e.Servers[0].Kill()
	e.Servers[1].Kill()
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, _, err = d.ReadLedger(qctx, id)
	cancel()
	if err == nil {
		t.Fatal("read with no quorum succeeded")
	}
	for _, srv := range e.Servers[:2] {
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := retry(t, "read after the quorum is back", func() (*metadata.LedgerMetadata, error) {
		got, _, err := d.ReadLedger(ctx, id)
		return got, err
	})
	if got.CustomMetadata["round"][0] != 2 {
		t.Fatalf("after the outage: %+v", got.CustomMetadata)
	}
}

// TestUnreachable: Open on a server that is not there fails within the
// dial timeout, naming the servers.
func TestUnreachable(t *testing.T) {
	u, err := metadata.ParseURI("zk://127.0.0.1:1/ledgers")
	if err != nil {
		t.Fatal(err)
	}
	_, err = zk.Open(ctxOf(t), u, zk.Config{DialTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Open of nothing: %v", err)
	}
}

// TestDriverSessionExpiry: when the session of the driver's own connection
// expires, ZooKeeper drops its watches; the driver's watches read again
// and go on (a change made meanwhile is delivered), and its operations
// keep working under the new session.
func TestDriverSessionExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	d := e.open(t, e.uri)
	other := e.open(t, e.uri)
	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	id, v, err := d.CreateLedger(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	lch, err := d.WatchLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	<-lch
	bch, err := d.WatchBookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-bch
	if err := e.sessions.Expire(ctx, e.srv.Addr(), d.SessionID()); err != nil {
		t.Fatal(err)
	}
	closed := md.Clone()
	closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 0, 1
	v2, err := other.WriteLedger(ctx, id, closed, v)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range lch {
		if ev.Err != nil || ev.Deleted {
			t.Fatalf("ledger watch after the driver's session expired: %+v", ev)
		}
		if ev.Version == v2 {
			break
		}
	}
	s, err := other.OpenSession(ctx, metadata.SessionOptions{TTL: sessionTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.RegisterBookie(ctx, "10.0.0.9:3181", false); err != nil {
		t.Fatal(err)
	}
	for ev := range bch {
		if ev.Err != nil {
			t.Fatalf("bookie watch after the driver's session expired: %+v", ev)
		}
		if slices.Equal(ev.Writable, []metadata.BookieID{"10.0.0.9:3181"}) {
			break
		}
	}
	got := retry(t, "read under the new session", func() (*metadata.LedgerMetadata, error) {
		got, _, err := d.ReadLedger(ctx, id)
		return got, err
	})
	if !got.IsClosed() {
		t.Fatalf("read %+v", got)
	}
}
