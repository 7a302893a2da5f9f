package client_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestLedgerMetadata follows one ledger's metadata through create, an
// ensemble change and close, as the writer, a reader, a point read and a
// watch see it, on real bookies and etcd.
func TestLedgerMetadata(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 4)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)

	custom := map[string][]byte{"application": []byte("wal"), "segment": {0, 1, 2}}
	before := time.Now().UnixMilli()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{
		EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw"), CustomMetadata: custom,
	})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	custom["application"][0] = 'X' // the caller's map is not the ledger's
	custom["added"] = nil

	m := w.Metadata()
	if m.LedgerID() != w.ID() || m.State() != client.LedgerStateOpen || m.IsClosed() ||
		m.EnsembleSize() != 3 || m.WriteQuorumSize() != 3 || m.AckQuorumSize() != 3 ||
		m.LastEntryID() != -1 || m.Length() != 0 || !m.HasPassword() || m.DigestType() != client.DigestCRC32C ||
		m.FormatVersion() != 3 {
		t.Fatalf("new ledger's metadata: %v", m)
	}
	if ct := m.CtimeMillis(); ct < before || ct > after || m.Ctime().UnixMilli() != ct {
		t.Fatalf("ctime %d (%v), want in [%d, %d]", ct, m.Ctime(), before, after)
	}
	if got := m.CustomMetadata(); len(got) != 2 || string(got["application"]) != "wal" || !slices.Equal(got["segment"], []byte{0, 1, 2}) {
		t.Fatalf("custom metadata %q", got)
	}
	m.CustomMetadata()["application"][0] = 'Y' // a copy each time
	ens := m.Ensembles()
	if len(ens) != 1 || ens[0].FirstEntryID != 0 || len(ens[0].Bookies) != 3 || !slices.Equal(m.EnsembleAt(5), ens[0].Bookies) {
		t.Fatalf("ensembles %v", ens)
	}
	ens[0].Bookies[0] = "mutated"
	if m.Ensembles()[0].Bookies[0] == "mutated" {
		t.Fatal("Ensembles shares its slices with the value")
	}
	stored, err := c.LedgerMetadata(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !stored.Equal(w.Metadata()) {
		t.Fatalf("stored %v, writer's %v", stored, w.Metadata())
	}

	watch, stop := iter.Pull2(c.WatchLedgerMetadata(ctx, w.ID()))
	defer stop()
	first, err, ok := watch()
	if !ok || err != nil || !first.Equal(stored) {
		t.Fatalf("first watched value %v, %v, %v; want %v", first, err, ok, stored)
	}

	var length int64
	for i := range int64(5) {
		p := payloadOf(w.ID(), i)
		length += int64(len(p))
		if _, err := w.Append(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Kill a bookie of the ensemble: with Qw = Qa = 3 the next append
	// needs the ensemble change to be written.
	victim := stored.Ensembles()[0].Bookies[1]
	for _, b := range cl.Bookies {
		if b.Addr() == victim {
			b.Kill()
		}
	}
	for i := range int64(5) {
		p := payloadOf(w.ID(), 5+i)
		length += int64(len(p))
		if _, err := w.Append(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	changed := w.Metadata()
	if e := changed.Ensembles(); len(e) != 2 || e[1].FirstEntryID < 5 || slices.Contains(e[1].Bookies, victim) {
		t.Fatalf("after the ensemble change: %v", e)
	}
	if slices.Contains(changed.EnsembleAt(9), victim) || !slices.Contains(changed.EnsembleAt(0), victim) {
		t.Fatalf("EnsembleAt: entry 0 on %v, entry 9 on %v (victim %s)", changed.EnsembleAt(0), changed.EnsembleAt(9), victim)
	}
	for {
		v, err, ok := watch()
		if !ok || err != nil {
			t.Fatalf("watch ended before the ensemble change: %v", err)
		}
		if len(v.Ensembles()) == 2 {
			if !v.Equal(changed) {
				t.Fatalf("watched %v, writer has %v", v, changed)
			}
			break
		}
	}

	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed := w.Metadata()
	if !closed.IsClosed() || closed.State() != client.LedgerStateClosed || closed.LastEntryID() != 9 || closed.Length() != length {
		t.Fatalf("closed: %v, want last entry 9, length %d", closed, length)
	}
	if closed.CtimeMillis() != m.CtimeMillis() || len(closed.CustomMetadata()) != 2 || string(closed.CustomMetadata()["application"]) != "wal" {
		t.Fatalf("close lost ctime or custom metadata: %v %q", closed.Ctime(), closed.CustomMetadata())
	}
	v, err, ok := watch()
	if !ok || err != nil || !v.Equal(closed) {
		t.Fatalf("watched at close: %v, %v, %v; want %v", v, err, ok, closed)
	}
	if _, _, ok := watch(); ok {
		t.Fatal("the watch went on after the CLOSED value")
	}

	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Metadata().Equal(closed) {
		t.Fatalf("reader's metadata %v, want %v", r.Metadata(), closed)
	}
}

// TestLedgerMetadataErrors: an unknown ledger, a watch ended by its
// context, and a ledger deleted under a watch.
func TestLedgerMetadataErrors(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 1)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)

	const unknown = 1 << 40
	if _, err := c.LedgerMetadata(ctx, unknown); !errors.Is(err, client.ErrNoSuchLedger) || client.Code(err) != -7 {
		t.Fatalf("unknown ledger: %v (code %d), want ErrNoSuchLedger", err, client.Code(err))
	}
	if _, err := c.LedgerMetadata(ctx, -1); !errors.Is(err, client.ErrNoSuchLedger) {
		t.Fatalf("negative id: %v, want ErrNoSuchLedger", err)
	}
	var errs []error
	for _, err := range c.WatchLedgerMetadata(ctx, unknown) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], client.ErrNoSuchLedger) {
		t.Fatalf("watch of an unknown ledger: %v, want one ErrNoSuchLedger", errs)
	}

	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The context ends the watch: one value, then ctx's error.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got []error
	for m, err := range c.WatchLedgerMetadata(wctx, w.ID()) {
		got = append(got, err)
		if err == nil && m.LedgerID() == w.ID() {
			cancel()
		}
	}
	if len(got) != 2 || got[0] != nil || !errors.Is(got[1], context.Canceled) {
		t.Fatalf("watch ended by its context: %v, want nil then context.Canceled", got)
	}

	// A deleted ledger ends the watch with ErrNoSuchLedger.
	watch, stop := iter.Pull2(c.WatchLedgerMetadata(ctx, w.ID()))
	defer stop()
	if _, err, ok := watch(); !ok || err != nil {
		t.Fatalf("first value: %v %v", err, ok)
	}
	if err := c.DeleteLedger(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err, ok := watch(); !ok || !errors.Is(err, client.ErrNoSuchLedger) {
		t.Fatalf("after delete: %v %v, want ErrNoSuchLedger", err, ok)
	}
	if _, _, ok := watch(); ok {
		t.Fatal("the watch went on after the delete")
	}
	if _, err := c.LedgerMetadata(ctx, w.ID()); !errors.Is(err, client.ErrNoSuchLedger) {
		t.Fatalf("deleted ledger: %v, want ErrNoSuchLedger", err)
	}

	// A closed client ends a watch and refuses new ones.
	w2, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	watch2, stop2 := iter.Pull2(c.WatchLedgerMetadata(ctx, w2.ID()))
	defer stop2()
	if _, err, ok := watch2(); !ok || err != nil {
		t.Fatalf("first value: %v %v", err, ok)
	}
	c.Close()
	if _, err, ok := watch2(); !ok || err == nil {
		t.Fatalf("watch after Close: %v %v, want an error", err, ok)
	}
	if _, err := c.LedgerMetadata(ctx, w2.ID()); err == nil {
		t.Fatal("LedgerMetadata on a closed client succeeded")
	}
}

// TestListLedgersClient lists through the public API: every ledger
// created is listed once, in ascending order, and a deleted one is not.
func TestListLedgersClient(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 1)
	ctx := testCtx(t)
	c := newClient(t, cl, nil)
	var want []int64
	for range 5 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w.ID())
	}
	if err := c.DeleteLedger(ctx, want[2]); err != nil {
		t.Fatal(err)
	}
	want = slices.Delete(want, 2, 3)
	slices.Sort(want)
	var got []int64
	for id, err := range c.ListLedgers(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// TestWatchLedgerMetadataDrivers watches a ledger through each metadata
// driver's own watch (etcd and ZooKeeper, real servers): the value written
// by another party is seen, and the CLOSED value ends the watch.
func TestWatchLedgerMetadataDrivers(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"etcd": func(t *testing.T) string { return etcdtest.URI(etcdtest.Start(t), etcdtest.Scope(t)) },
		"zk":   func(t *testing.T) string { return zktest.URI(zktest.Start(t), zktest.Scope(t)) },
	}
	for _, name := range []string{"etcd", "zk"} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			uri := stores[name](t)
			d, err := metadata.Open(ctx, uri, metadata.Options{DialTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			md := &metadata.LedgerMetadata{
				EnsembleSize: 2, WriteQuorum: 2, AckQuorum: 1, State: metadata.LedgerOpen, LastEntryID: -1,
				Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"127.0.0.1:3181", "127.0.0.1:3182"}}},
				HasPassword: true, DigestType: metadata.DigestCRC32, Password: []byte("pw"),
				CustomMetadata: map[string][]byte{"k": []byte("v")}, Ctime: 1_700_000_000_123, StoreCtime: true,
			}
			id, version, err := d.CreateLedger(ctx, md)
			if err != nil {
				t.Fatal(err)
			}
			watch, stop := iter.Pull2(c.WatchLedgerMetadata(ctx, id))
			defer stop()
			first, err, ok := watch()
			if !ok || err != nil || first.State() != client.LedgerStateOpen || first.WriteQuorumSize() != 2 || first.AckQuorumSize() != 1 ||
				first.DigestType() != client.DigestCRC32 || first.CtimeMillis() != 1_700_000_000_123 ||
				string(first.CustomMetadata()["k"]) != "v" || first.FormatVersion() != 3 {
				t.Fatalf("first value %v, %v, %v", first, err, ok)
			}

			changed := md.Clone()
			changed.Ensembles = append(changed.Ensembles, metadata.Segment{FirstEntryID: 7, Ensemble: []metadata.BookieID{"127.0.0.1:3181", "127.0.0.1:3183"}})
			if version, err = d.WriteLedger(ctx, id, changed, version); err != nil {
				t.Fatal(err)
			}
			v, err, ok := watch()
			if !ok || err != nil || len(v.Ensembles()) != 2 || v.Ensembles()[1].FirstEntryID != 7 ||
				!slices.Equal(v.EnsembleAt(7), []string{"127.0.0.1:3181", "127.0.0.1:3183"}) {
				t.Fatalf("after the ensemble change: %v, %v, %v", v, err, ok)
			}

			closed := changed.Clone()
			closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 11, 1234
			if _, err := d.WriteLedger(ctx, id, closed, version); err != nil {
				t.Fatal(err)
			}
			v, err, ok = watch()
			if !ok || err != nil || !v.IsClosed() || v.LastEntryID() != 11 || v.Length() != 1234 {
				t.Fatalf("closed value: %v, %v, %v", v, err, ok)
			}
			if _, _, ok := watch(); ok {
				t.Fatal("the watch went on after the CLOSED value")
			}
			got, err := c.LedgerMetadata(ctx, id)
			if err != nil || !got.Equal(v) {
				t.Fatalf("LedgerMetadata %v, %v; watched %v", got, err, v)
			}
		})
	}
}
