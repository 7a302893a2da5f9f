// Package zookeeper_test runs Folio's bookie processes on a real ZooKeeper
// (internal/metadata/zk/zktest): the Go client writes and reads a ledger,
// a recovery fences and closes it, and a bookie whose ZooKeeper session
// expires under it registers again.
package zookeeper_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/zk"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
	"github.com/foliodb/folio/internal/testcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	zktest.StopShared()
	os.Exit(code)
}

const waitTimeout = 60 * time.Second

func newClient(t *testing.T, uri string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri, AddEntryTimeout: 2 * time.Second,
		ReadEntryTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func rawConn(t *testing.T, addr string) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect([]string{addr}, 10*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// TestBookiesOnZooKeeper: three `folio bookie` processes on ZooKeeper; the
// Go client writes a ledger, a reader follows it, a second client recovers
// it (fencing the writer) and every entry reads back; the znodes are where
// and what Java expects. Then one bookie is paused past its session
// timeout: ZooKeeper expires its session and deletes its registration, and
// once resumed the bookie registers again under a new session.
func TestBookiesOnZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (starts ZooKeeper and bookie processes); not with -short")
	}
	srv := zktest.Shared(t)
	root := zktest.Scope(t)
	uri := zktest.URI(srv, root)
	cl := testcluster.Start(t, 3, testcluster.WithMetadataURI(uri))
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	raw := rawConn(t, srv.Addr())

	// Registrations: ephemeral, with the bookie's BookieServiceInfo.
	for _, b := range cl.Bookies {
		p := root + "/available/" + string(b.ID)
		v, st, err := raw.Get(p)
		if err != nil || st.EphemeralOwner == 0 {
			t.Fatalf("registration %s: %v (owner %#x)", p, err, st.EphemeralOwner)
		}
		info, err := metadata.DecodeBookieServiceInfo(v)
		if err != nil || len(info.Endpoints) == 0 || info.Endpoints[0].Protocol != "bookie-rpc" || info.Endpoints[0].Port != b.Port {
			t.Fatalf("registration %s: info %+v, %v", p, info, err)
		}
	}

	// Write; a reader follows; recovery by another client fences the writer.
	writer := newClient(t, uri)
	w, err := writer.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		DigestType: client.DigestCRC32C, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i := range 20 {
		payload := []byte(fmt.Sprintf("entry %d on zookeeper", i))
		if _, err := w.Append(ctx, payload); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		want = append(want, payload)
	}
	reader := newClient(t, uri)
	r, err := reader.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	recoverer := newClient(t, uri)
	rr, err := recoverer.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw"), Recovery: true})
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if !rr.IsClosed() {
		t.Fatal("recovered ledger not closed")
	}
	if _, err := w.Append(ctx, []byte("after the fence")); err == nil {
		t.Fatal("the writer appended after recovery fenced the ledger")
	}
	// The reader, opened before the recovery, sees the close.
	if lac, err := r.ReadLastAddConfirmed(ctx); err != nil || lac != 19 || !r.IsClosed() {
		t.Fatalf("reader after recovery: LAC %d, closed %v, %v", lac, r.IsClosed(), err)
	}
	for _, h := range []*client.ReadHandle{rr, r} {
		got, err := h.Read(ctx, 0, 19)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range got {
			if e.ID != int64(i) || !bytes.Equal(e.Payload, want[i]) {
				t.Fatalf("entry %d: %d %q", i, e.ID, e.Payload)
			}
		}
		if _, err := h.Read(ctx, 20, 20); err == nil {
			t.Fatalf("read past the end: %v", err)
		}
	}
	// The ledger's znode: the hierarchical path, CLOSED at entry 19.
	p, err := zk.Hierarchical.LedgerPath(root, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := raw.Get(p)
	if err != nil {
		t.Fatalf("ledger znode %s: %v", p, err)
	}
	md, err := metadata.ParseLedgerMetadata(v)
	if err != nil || md.State != metadata.LedgerClosed || md.LastEntryID != 19 || md.FormatVersion != 3 {
		t.Fatalf("ledger znode %s: %+v, %v", p, md, err)
	}

	// Session expiry under a bookie: pause it past zkTimeout (2 s here).
	b := cl.Bookies[0]
	regPath := root + "/available/" + string(b.ID)
	_, before, err := raw.Get(regPath)
	if err != nil {
		t.Fatal(err)
	}
	b.Pause()
	b.WaitUnregistered() // ZooKeeper expired the session and deleted the znode
	b.Resume()
	b.WaitRegistered(false)
	_, after, err := raw.Get(regPath)
	if err != nil {
		t.Fatal(err)
	}
	if after.EphemeralOwner == before.EphemeralOwner {
		t.Fatalf("registration still owned by the expired session %#x", before.EphemeralOwner)
	}
	// Exactly one registration of each bookie, and the cluster still works.
	ids, err := cl.MD.WritableBookies(ctx)
	if err != nil || len(ids) != 3 || !slices.Contains(ids, b.ID) {
		t.Fatalf("writable bookies %v, %v", ids, err)
	}
	// The writer learns of the new registration through its watch, a
	// moment after the store has it: retry while it still counts two.
	var w2 *client.WriteHandle
	for {
		w2, err = writer.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3,
			DigestType: client.DigestCRC32C, Password: []byte("pw")})
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrNotEnoughBookies) || ctx.Err() != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := w2.Append(ctx, []byte("after the expiry")); err != nil {
		t.Fatalf("append on every bookie after the expiry: %v", err)
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAutoRecoveryOnZooKeeper: bookies configured with zkServers and
// zkLedgersRootPath, and `folio autorecovery` daemons on ZooKeeper
// elect one auditor through auditorelection/V_ votes; the auditor's daemon
// and a bookie are SIGKILLed; the other daemon is elected, marks the dead
// bookie's ledgers under underreplication/ledgers/, and its workers
// re-replicate them (locks under underreplication/locks/): every entry is
// back on its write set, byte-exact, and no record is left.
func TestAutoRecoveryOnZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (starts ZooKeeper and bookie processes); not with -short")
	}
	srv := zktest.Shared(t)
	root := zktest.Scope(t)
	uri := zktest.URI(srv, root)
	// These bookies find ZooKeeper through the legacy keys, as Pulsar's
	// bookkeeper.conf names it (no metadataServiceUri).
	cl := testcluster.Start(t, 4, testcluster.WithMetadataURI(uri),
		testcluster.WithSettings("metadataServiceUri=", "zkServers="+srv.Addr(), "zkLedgersRootPath="+root))
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	raw := rawConn(t, srv.Addr())
	c := newClient(t, uri)
	payload := func(id, e int64) []byte { return []byte(fmt.Sprintf("ledger %d entry %d", id, e)) }
	var ids []int64
	for range 6 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
			DigestType: client.DigestCRC32C, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(10) {
			if _, err := w.Append(ctx, payload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID())
	}
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	auditorIs := func(id metadata.BookieID) bool {
		a, err := ar.Auditor(ctx)
		return err == nil && a == id
	}
	first := cl.StartAutoRecovery("127.0.0.1:1", "--workers", "0")
	waitFor(t, "daemon 1 elected", func() bool { return auditorIs("127.0.0.1:1") })
	cl.StartAutoRecovery("127.0.0.1:2", "--workers", "2")
	waitFor(t, "two votes", func() bool {
		votes, _, err := raw.Children(root + "/underreplication/auditorelection")
		return err == nil && len(votes) == 2
	})
	first.Kill()
	victim := cl.Bookies[1]
	victim.Kill()
	waitFor(t, "daemon 2 elected", func() bool { return auditorIs("127.0.0.1:2") })
	onVictim := func() int {
		n := 0
		for _, id := range ids {
			md, _, err := cl.MD.ReadLedger(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range md.Ensembles {
				if slices.Contains(s.Ensemble, victim.ID) {
					n++
				}
			}
		}
		return n
	}
	waitFor(t, "re-replication", func() bool {
		recs, err := ar.ListUnderReplicatedLedgers(ctx, 0, 100)
		return err == nil && len(recs) == 0 && onVictim() == 0
	})
	for _, id := range ids {
		testcluster.CheckStored(ctx, t, cl.MD, id, []byte("pw"), func(e int64) []byte { return payload(id, e) })
	}
	if locks, _, err := raw.Children(root + "/underreplication/locks"); err != nil || len(locks) != 0 {
		t.Fatalf("locks left: %v, %v", locks, err)
	}
}

// waitFor polls cond (every 50 ms) until it holds or 2 minutes pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestZooKeeperDown: with the ZooKeeper server killed, bookies keep
// serving: a writer goes on appending to its open ledger and a closed
// ledger reads back; creating a ledger fails with an error naming the
// server. Once ZooKeeper is back (same data), creation works again, the
// writer closes its ledger, and every bookie is registered.
func TestZooKeeperDown(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (starts ZooKeeper and bookie processes); not with -short")
	}
	srv := zktest.Start(t) // its own: this test kills it
	uri := zktest.URI(srv, zktest.Scope(t))
	cl := testcluster.Start(t, 3, testcluster.WithMetadataURI(uri))
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	c := newClient(t, uri)
	opts := client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		DigestType: client.DigestCRC32C, Password: []byte("pw")}
	closed, err := c.CreateLedger(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := closed.Append(ctx, []byte(fmt.Sprint("closed ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := closed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenLedger(ctx, closed.ID(), client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CreateLedger(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	for i := range 10 {
		if _, err := w.Append(ctx, []byte(fmt.Sprint("during ", i))); err != nil {
			t.Fatalf("append %d with ZooKeeper down: %v", i, err)
		}
	}
	got, err := r.Read(ctx, 0, 4)
	if err != nil || len(got) != 5 || string(got[4].Payload) != "closed 4" {
		t.Fatalf("read a closed ledger with ZooKeeper down: %v, %v", got, err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = c.CreateLedger(cctx, opts)
	ccancel()
	if err == nil {
		t.Fatal("created a ledger with ZooKeeper down")
	}
	t.Logf("create with ZooKeeper down: %v", err)

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var w2 *client.WriteHandle
	waitFor(t, "a ledger created once ZooKeeper is back", func() bool {
		w2, err = c.CreateLedger(ctx, opts)
		return err == nil
	})
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close the ledger written through the outage: %v", err)
	}
	rw, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	if all, err := rw.Read(ctx, 0, 10); err != nil || len(all) != 11 || string(all[10].Payload) != "during 9" {
		t.Fatalf("read back the ledger written through the outage: %d entries, %v", len(all), err)
	}
	for _, b := range cl.Bookies {
		b.WaitRegistered(false)
	}
}

// TestAutoRecoverySessionExpiry: the daemon that is both the auditor and
// the worker copying a ledger (throttled) is paused past its session
// timeout. ZooKeeper expires its session: its vote and its lock go, the
// other daemon is elected and its workers finish every ledger, the locked
// one included. Resumed, the first daemon learns its session expired and
// campaigns again under a new one, as a standby: one auditor throughout,
// and every entry is on its write set, byte-exact.
func TestAutoRecoverySessionExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test (starts ZooKeeper and bookie processes); not with -short")
	}
	srv := zktest.Shared(t)
	root := zktest.Scope(t)
	uri := zktest.URI(srv, root)
	cl := testcluster.Start(t, 4, testcluster.WithMetadataURI(uri))
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	raw := rawConn(t, srv.Addr())
	c := newClient(t, uri)
	payload := func(id, e int64) []byte { return bytes.Repeat([]byte{byte(id), byte(e)}, 500) }
	var ids []int64
	for range 6 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
			DigestType: client.DigestCRC32C, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(20) {
			if _, err := w.Append(ctx, payload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID())
	}
	victim := cl.Bookies[1]
	victim.Kill()
	victim.WaitUnregistered()
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	auditor := func() metadata.BookieID {
		a, _ := ar.Auditor(ctx)
		return a
	}
	children := func(p string) []string {
		kids, _, err := raw.Children(p)
		if errors.Is(err, gozk.ErrNoNode) {
			return nil // not created yet
		}
		if err != nil {
			t.Fatalf("children of %s: %v", p, err)
		}
		return kids
	}

	// About 4 entries a second: a worker holds its lock for seconds.
	slow := cl.StartAutoRecovery("127.0.0.1:1", "--workers", "1", "--rate-limit", "4000")
	waitFor(t, "daemon 1 elected", func() bool { return auditor() == "127.0.0.1:1" })
	waitFor(t, "daemon 1's worker holding a lock", func() bool { return len(children(root+"/underreplication/locks")) == 1 })
	cl.StartAutoRecovery("127.0.0.1:2", "--workers", "2")
	waitFor(t, "daemon 2 campaigning", func() bool { return len(children(root+"/underreplication/auditorelection")) == 2 })

	slow.Pause()
	waitFor(t, "daemon 2 elected after daemon 1's session expired", func() bool { return auditor() == "127.0.0.1:2" })
	onVictim := func() int {
		n := 0
		for _, id := range ids {
			md, _, err := cl.MD.ReadLedger(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range md.Ensembles {
				if slices.Contains(s.Ensemble, victim.ID) {
					n++
				}
			}
		}
		return n
	}
	waitFor(t, "re-replication by daemon 2", func() bool {
		recs, err := ar.ListUnderReplicatedLedgers(ctx, 0, 100)
		return err == nil && len(recs) == 0 && onVictim() == 0
	})

	slow.Resume()
	waitFor(t, "daemon 1 campaigning again under a new session", func() bool {
		return len(children(root+"/underreplication/auditorelection")) == 2
	})
	if a := auditor(); a != "127.0.0.1:2" {
		t.Fatalf("auditor %q after daemon 1 came back, want 127.0.0.1:2", a)
	}
	for _, id := range ids {
		testcluster.CheckStored(ctx, t, cl.MD, id, []byte("pw"), func(e int64) []byte { return payload(id, e) })
	}
	if locks := children(root + "/underreplication/locks"); len(locks) != 0 {
		t.Fatalf("locks left: %v", locks)
	}
}
