package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

func recvWithin[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	panic("unreachable")
}

// TestWatchesResyncAfterCompaction: a watch whose next revision has been
// compacted away re-reads the current state and goes on watching, instead
// of failing or missing the change.
func TestWatchesResyncAfterCompaction(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := metadata.ParseURI(etcdtest.URI(srv, "/ledgers"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, u, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	id, v1, err := d.CreateLedger(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	first := metadata.LedgerEvent{Metadata: md, Version: v1}
	closed := md.Clone()
	closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 0, 1
	v2, err := d.WriteLedger(ctx, id, closed, v1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	now, err := d.cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.Compact(ctx, now.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}

	// The ledger watch pretends to have read at v1: its watch from v1+1
	// hits the compaction and must resync to v2.
	out := make(chan metadata.LedgerEvent)
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		d.runLedgerWatch(wctx, d.k.ledger(id), int64(v1), first, out)
	}()
	if ev := recvWithin(t, out); ev.Version != v1 {
		t.Fatalf("first event %+v", ev)
	}
	if ev := recvWithin(t, out); ev.Err != nil || ev.Version != v2 || !ev.Metadata.Equal(closed) {
		t.Fatalf("event after compaction %+v, want version %d closed", ev, v2)
	}
	if err := d.DeleteLedger(ctx, id, v2); err != nil {
		t.Fatal(err)
	}
	if ev := recvWithin(t, out); !ev.Deleted {
		t.Fatalf("event %+v, want Deleted", ev)
	}
	wcancel()
	<-done

	// The bookie watch pretends to have read an empty membership at v1.
	bout := make(chan metadata.BookiesEvent)
	bctx, bcancel := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() {
		defer close(bdone)
		defer close(bout)
		m := &membership{writable: map[metadata.BookieID]bool{}, readonly: map[metadata.BookieID]bool{}}
		d.runBookieWatch(bctx, m, int64(v1), bout)
	}()
	if ev := recvWithin(t, bout); len(ev.Writable) != 0 {
		t.Fatalf("first membership %+v", ev)
	}
	if ev := recvWithin(t, bout); ev.Err != nil || len(ev.Writable) != 1 || ev.Writable[0] != "127.0.0.1:3181" {
		t.Fatalf("membership after compaction %+v", ev)
	}
	bcancel()
	<-bdone
}
