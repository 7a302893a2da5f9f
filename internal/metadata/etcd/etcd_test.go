package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

// shared is one embedded etcd for the package; every test works in its own
// scope (etcdtest.Scope). Tests that stop a server start their own.
var shared *embedetcd.Server

func TestMain(m *testing.M) {
	srv, stop, err := etcdtest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = srv
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "close etcd:", err)
		code = 1
	}
	os.Exit(code)
}

// sessionTTL is the lease TTL of the contract suite's sessions. etcd raises
// TTLs below its minimum (1.5 × election timeout, 2 s with the embedded
// defaults) to that minimum.
const sessionTTL = time.Second

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open opens a driver through the metadata URI, as the rest of Folio does.
func open(t *testing.T, uri string) *etcd.Driver {
	t.Helper()
	d, err := metadata.Open(ctxOf(t), uri, metadata.Options{DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("metadata.Open(%s): %v", uri, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d.(*etcd.Driver)
}

// raw is a plain etcd client on srv, for planting and inspecting keys.
func raw(t *testing.T, srv *embedetcd.Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type rawWriter struct {
	c     *clientv3.Client
	scope string
}

func (w rawWriter) PutLedgerRaw(ctx context.Context, id int64, value []byte) (string, error) {
	key := w.scope + "/ledgers/" + etcd.LedgerUUID(id)
	_, err := w.c.Put(ctx, key, string(value))
	return key, err
}

func (w rawWriter) PutCheckTimeRaw(ctx context.Context, check metadata.PeriodicCheck, value []byte) (string, error) {
	key := w.scope + "/underreplication/" + check.Node()
	_, err := w.c.Put(ctx, key, string(value))
	return key, err
}

func TestContract(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) *metadatatest.Harness {
		scope := etcdtest.Scope(t)
		uri := etcdtest.URI(shared, scope)
		c := raw(t, shared)
		return &metadatatest.Harness{
			Driver:     open(t, uri),
			Open:       func(t *testing.T) metadata.Driver { return open(t, uri) },
			Raw:        rawWriter{c: c, scope: scope},
			SessionTTL: sessionTTL,
			// Revoke the lease behind the session's back, from another
			// client: etcd deletes its keys and the session's keepalive
			// learns the lease is gone.
			ExpireSession: func(t *testing.T, s metadata.Session) {
				id := s.(interface{ LeaseID() clientv3.LeaseID }).LeaseID()
				if _, err := c.Revoke(ctxOf(t), id); err != nil {
					t.Fatalf("revoke lease %x: %v", int64(id), err)
				}
			},
		}
	})
}

// listScope returns the scope key and every key under scope + "/".
func listScope(t *testing.T, c *clientv3.Client, scope string) map[string]string {
	t.Helper()
	resp, err := c.Get(ctxOf(t), scope, clientv3.WithRange(scope+"0"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); k == scope || strings.HasPrefix(k, scope+"/") {
			m[k] = string(kv.Value)
		}
	}
	return m
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestInitKeysGolden: InitNewCluster writes exactly Java's keys and values
// (spec/metadata.md §2.2), read back from a real etcd.
func TestInitKeysGolden(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	instanceID, err := d.InitNewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !uuidV4.MatchString(instanceID) {
		t.Fatalf("instance id %q is not a lowercase UUID v4", instanceID)
	}
	want := map[string]string{
		scope:                       "",
		scope + "/layout":           "2\norg.apache.bookkeeper.metadata.etcd.EtcdLedgerManagerFactory:0",
		scope + "/instanceid":       instanceID,
		scope + "/cookies":          "",
		scope + "/bookies":          "",
		scope + "/bookies/writable": "",
		scope + "/bookies/readonly": "",
		scope + "/ledgers":          "",
		scope + "/buckets":          "",
		scope + "/underreplication": "",
	}
	got := listScope(t, c, scope)
	if len(got) != len(want) {
		t.Errorf("init wrote %d keys, want %d: %q", len(got), len(want), slices.Sorted(mapsKeys(got)))
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			t.Errorf("key %q = %q (present %v), want %q", k, gv, ok, v)
		}
	}
	// All in one revision: one txn.
	resp, err := c.Get(ctx, scope, clientv3.WithRange(scope+"0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if kv.CreateRevision != resp.Kvs[0].CreateRevision {
			t.Errorf("key %s created at revision %d, %s at %d: init is not one txn", kv.Key, kv.CreateRevision, resp.Kvs[0].Key, resp.Kvs[0].CreateRevision)
		}
	}
	if l, err := d.ReadLayout(ctx); err != nil || l != etcd.LayoutValue {
		t.Errorf("ReadLayout = %q, %v", l, err)
	}
	if _, err := d.InitNewCluster(ctx); !errors.Is(err, metadata.ErrClusterExists) {
		t.Errorf("second InitNewCluster: %v, want ErrClusterExists", err)
	}
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// specExample is the v3 value of spec/metadata.md §1.2: E=W=A=1, OPEN, one
// segment {127.0.0.1:3181} at entry 0, CRC32C, empty password, cToken 0.
var specExample = func() []byte {
	b := []byte("BookieMetadataFormatVersion\t3\n")
	b = append(b, 0x2f,
		0x08, 0x01, 0x10, 0x01, 0x18, 0x00,
		0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x28, 0x01, 0x32, 0x12, 0x0a, 0x0e)
	b = append(b, "127.0.0.1:3181"...)
	return append(b, 0x10, 0x00, 0x38, 0x03, 0x42, 0x00, 0x48, 0x01, 0x60, 0x00)
}()

// TestSpecValueBytesAtUUIDKey: the §1.2 example written through the driver
// lands at the UUID key of 5<<56|1 with exactly the spec's bytes, and reads
// back.
func TestSpecValueBytesAtUUIDKey(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	md := &metadata.LedgerMetadata{
		EnsembleSize: 1, WriteQuorum: 1, AckQuorum: 1,
		State: metadata.LedgerOpen, LastEntryID: -1, Ctime: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"127.0.0.1:3181"}}},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte{},
	}
	for _, tc := range []struct {
		id  int64
		key string
	}{
		{1, scope + "/ledgers/00000000-0000-0000-0000-000000000001"},
		{5<<56 | 1, scope + "/ledgers/00000000-0000-0000-0500-000000000001"},
	} {
		v, err := d.CreateLedgerMetadata(ctx, tc.id, md)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(ctx, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("ledger %d: no key %s", tc.id, tc.key)
		}
		if got := resp.Kvs[0].Value; !bytes.Equal(got, specExample) {
			t.Errorf("ledger %d: value\n% x\nwant\n% x", tc.id, got, specExample)
		}
		if resp.Kvs[0].ModRevision != int64(v) || resp.Kvs[0].Lease != 0 {
			t.Errorf("ledger %d: mod_revision %d lease %d, create returned version %d", tc.id, resp.Kvs[0].ModRevision, resp.Kvs[0].Lease, v)
		}
		got, gv, err := d.ReadLedger(ctx, tc.id)
		if err != nil || gv != v || !got.Equal(md) {
			t.Errorf("ReadLedger(%d) = %+v, %d, %v", tc.id, got, gv, err)
		}
	}
	ids, err := d.ListLedgers(ctx, 0, 10)
	if err != nil || !slices.Equal(ids, []int64{1, 5<<56 | 1}) {
		t.Errorf("ListLedgers = %v, %v", ids, err)
	}
}

// TestCheckTimeKeys: each periodic check's time is at Java's ZooKeeper node
// name under `<scope>/underreplication/`, as the bytes Java writes there (a
// binary *CheckFormat, field 1 varint epoch ms), with no lease.
func TestCheckTimeKeys(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	want := []byte{0x08, 0x80, 0xd0, 0x95, 0xff, 0xbc, 0x31} // 1700000000000
	for check, node := range map[metadata.PeriodicCheck]string{
		metadata.LedgerCheck:          "checkallledgersctime",
		metadata.PlacementPolicyCheck: "placementpolicycheckctime",
		metadata.ReplicasCheck:        "replicascheckctime",
	} {
		if err := d.SetLastCheckTime(ctx, check, time.UnixMilli(1_700_000_000_000).Add(999*time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		key := scope + "/underreplication/" + node
		resp, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("%s: no key %s", check, key)
		}
		if got := resp.Kvs[0].Value; !bytes.Equal(got, want) || resp.Kvs[0].Lease != 0 {
			t.Errorf("%s: value % x lease %d, want % x and no lease", check, got, resp.Kvs[0].Lease, want)
		}
	}
}

// TestListingRejectsForeignKeys: a key inside the ledger range that is not a
// canonical ledger UUID fails the listing naming the key; keys outside the
// range are not ledgers and are not listed (as in Java).
func TestListingRejectsForeignKeys(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	if _, err := d.CreateLedgerMetadata(ctx, 7, md); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"zzz", "10000000-0000-0000-0000-000000000001", "00000000-0000-0000-8000-000000000000"} {
		if _, err := c.Put(ctx, scope+"/ledgers/"+k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := d.ListLedgers(ctx, 0, 100); err != nil || !slices.Equal(ids, []int64{7}) {
		t.Fatalf("ListLedgers with keys outside the range = %v, %v; want [7]", ids, err)
	}
	for _, bad := range []string{"00000000-0000-0000-0000-00000000000A", "00000000-0000-0000-0000-000000000007/x"} {
		key := scope + "/ledgers/" + bad
		if _, err := c.Put(ctx, key, "x"); err != nil {
			t.Fatal(err)
		}
		_, err := d.ListLedgers(ctx, 0, 100)
		if !errors.Is(err, metadata.ErrCorruptMetadata) || !strings.Contains(err.Error(), key) {
			t.Errorf("ListLedgers with %q in range: %v; want ErrCorruptMetadata naming the key", key, err)
		}
		if _, err := c.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIDGenerationLayout: ids come from `buckets/NNN` versions, round-robin.
func TestIDGenerationLayout(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	var prev int64 = -1
	for i := range 300 {
		id, err := d.GenerateLedgerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bucket, counter := id>>56, id&(1<<56-1)
		key := fmt.Sprintf("%s/buckets/%03d", scope, bucket)
		resp, err := c.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("bucket key %s: %v %v", key, resp, err)
		}
		if kv := resp.Kvs[0]; kv.Version != counter || len(kv.Value) != 0 {
			t.Fatalf("id %d: %s has version %d value %q; want version %d, empty", id, key, kv.Version, kv.Value, counter)
		}
		if prev >= 0 && bucket != (prev+1)%128 {
			t.Fatalf("call %d: bucket %d after %d, want round-robin", i, bucket, prev)
		}
		prev = bucket
	}
}

// TestConcurrentIDGeneration: many drivers (processes) and goroutines draw
// thousands of ids from the same buckets; none repeats.
func TestConcurrentIDGeneration(t *testing.T) {
	ctx := ctxOf(t)
	uri := etcdtest.URI(shared, etcdtest.Scope(t))
	const drivers, workers, perWorker = 4, 8, 125
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range drivers {
		d := open(t, uri)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perWorker {
					id, err := d.GenerateLedgerID(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					dup := seen[id]
					seen[id] = true
					mu.Unlock()
					if dup || id < 1 || id > metadata.MaxLedgerID {
						t.Errorf("id %d duplicate=%v", id, dup)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(seen) != drivers*workers*perWorker {
		t.Fatalf("%d distinct ids, want %d", len(seen), drivers*workers*perWorker)
	}
}

// TestRegistrationKeys: registrations are empty values under the session's
// lease at Java's keys; read-only registration removes the writable key.
func TestRegistrationKeys(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	lease := int64(s.(interface{ LeaseID() clientv3.LeaseID }).LeaseID())
	const b = "127.0.0.1:3181"
	check := func(writable, readonly bool) {
		t.Helper()
		for key, want := range map[string]bool{scope + "/bookies/writable/" + b: writable, scope + "/bookies/readonly/" + b: readonly} {
			resp, err := c.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.Kvs) == 1; got != want {
				t.Fatalf("key %s present=%v, want %v", key, got, want)
			}
			if want && (resp.Kvs[0].Lease != lease || len(resp.Kvs[0].Value) != 0) {
				t.Fatalf("key %s: lease %x value %q; want lease %x, empty", key, resp.Kvs[0].Lease, resp.Kvs[0].Value, lease)
			}
		}
	}
	if err := s.RegisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	check(true, false)
	if err := s.RegisterBookie(ctx, b, true); err != nil {
		t.Fatal(err)
	}
	check(false, true)
	if err := s.RegisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	check(true, false)
	// A key under bookies/writable/ that is not a bookie id hides nothing
	// silently: listing fails naming it.
	bad := scope + "/bookies/writable/not a bookie"
	if _, err := c.Put(ctx, bad, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WritableBookies(ctx); !errors.Is(err, metadata.ErrCorruptMetadata) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("WritableBookies with %q: %v", bad, err)
	}
	if _, err := c.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseExpiresWithoutKeepAlive: when keepalives stop (the process died),
// etcd removes the registration about a TTL later; while they run, the
// registration outlives several TTLs.
//
// Leases run on etcd's wall clock, so "kept alive" cannot be stepped: the
// TTL is 5 s rather than the suite's 2 s, so that a keepalive (every third
// of it) may be held up by more than 3 s on a loaded machine before the
// lease is lost for real.
func TestLeaseExpiresWithoutKeepAlive(t *testing.T) {
	ctx := ctxOf(t)
	d := open(t, etcdtest.URI(shared, etcdtest.Scope(t)))
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	ttl := s.(interface{ TTL() time.Duration }).TTL()
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	// Kept alive: still registered after 2 TTLs.
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); {
		w, err := d.WritableBookies(ctx)
		if err != nil || len(w) != 1 {
			t.Fatalf("registration lost while kept alive: %v %v", w, err)
		}
		select {
		case <-s.Done():
			t.Fatal("session ended while kept alive")
		case <-time.After(ttl / 4):
		}
	}
	etcd.StopKeepAlive(s)
	deadline := time.Now().Add(5*ttl + 10*time.Second)
	for {
		w, err := d.WritableBookies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registration still present %v after keepalives stopped", time.Since(deadline.Add(-5*ttl-10*time.Second)))
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not a correctness wait
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); !errors.Is(err, metadata.ErrSessionExpired) {
		t.Fatalf("RegisterBookie after expiry: %v", err)
	}
}

// TestFormatRefusesAndSparesSiblings: Format refuses while a bookie is
// registered, and the wipe leaves a sibling scope (`<scope>-x`) alone.
func TestFormatRefusesAndSparesSiblings(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	if _, err := d.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	sibling := scope + "-x/ledgers"
	if _, err := c.Put(ctx, sibling, "keep"); err != nil {
		t.Fatal(err)
	}
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Format(ctx, true); !errors.Is(err, metadata.ErrBookiesRegistered) || !strings.Contains(err.Error(), "127.0.0.1:3181") {
		t.Fatalf("Format with a registered bookie: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Format(ctx, false); !errors.Is(err, metadata.ErrClusterExists) {
		t.Fatalf("Format without force: %v", err)
	}
	if _, err := d.Format(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := listScope(t, c, scope+"-x"); got[sibling] != "keep" {
		t.Fatalf("Format deleted the sibling scope's key: %v", got)
	}
	if got := listScope(t, c, scope); len(got) != 10 {
		t.Fatalf("after Format: %d keys, want the 10 of a new cluster: %v", len(got), got)
	}
}

// TestRestartKeepsEverything: ledgers, cookies and the cluster survive a
// stop and restart of the embedded etcd on the same data directory.
func TestRestartKeepsEverything(t *testing.T) {
	ctx := ctxOf(t)
	dir := t.TempDir()
	srv, err := embedetcd.Start(ctx, embedetcd.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	const scope = "/ledgers"
	d, err := etcd.Open(ctx, mustURI(t, etcdtest.URI(srv, scope)), etcd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	instanceID, err := d.InitNewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type ledger struct {
		md *metadata.LedgerMetadata
		v  metadata.Version
	}
	ledgers := map[int64]ledger{}
	for i := range 20 {
		md := metadatatest.NewLedgerMetadata(3, 2, 2)
		if i%2 == 1 {
			md.State, md.LastEntryID, md.Length = metadata.LedgerClosed, int64(i), int64(100*i)
		}
		id, v, err := d.CreateLedger(ctx, md)
		if err != nil {
			t.Fatal(err)
		}
		ledgers[id] = ledger{md, v}
	}
	cookie := []byte("5\nbookieHost: \"127.0.0.1:3181\"\njournalDir: \"/j\"\nledgerDirs: \"1\\t/l\"\ninstanceId: \"" + instanceID + "\"\n")
	cv, err := d.WriteCookie(ctx, "127.0.0.1:3181", cookie, metadata.VersionNew)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	srv2, err := embedetcd.Start(ctx, embedetcd.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	d2, err := etcd.Open(ctx, mustURI(t, etcdtest.URI(srv2, scope)), etcd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got, err := d2.ReadInstanceID(ctx); err != nil || got != instanceID {
		t.Fatalf("instance id after restart %q, %v; want %q", got, err, instanceID)
	}
	ids, err := d2.ListLedgers(ctx, 0, 1000)
	if err != nil || len(ids) != len(ledgers) {
		t.Fatalf("ListLedgers after restart: %d ids (%v), want %d", len(ids), err, len(ledgers))
	}
	for id, l := range ledgers {
		md, v, err := d2.ReadLedger(ctx, id)
		if err != nil || v != l.v || !md.Equal(l.md) {
			t.Fatalf("ledger %d after restart: %v@%d %v; want version %d", id, md, v, err, l.v)
		}
	}
	got, v, err := d2.ReadCookie(ctx, "127.0.0.1:3181")
	if err != nil || v != cv || !bytes.Equal(got, cookie) {
		t.Fatalf("cookie after restart %q@%d %v", got, v, err)
	}
	// Id generation continues without reuse: a new ledger gets a new id.
	id, _, err := d2.CreateLedger(ctx, metadatatest.NewLedgerMetadata(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, dup := ledgers[id]; dup {
		t.Fatalf("id %d reused after restart", id)
	}
}

func mustURI(t *testing.T, s string) *metadata.URI {
	t.Helper()
	u, err := metadata.ParseURI(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUnreachable: a URI naming a port where no etcd listens fails at Open,
// naming the endpoint, within the dial timeout.
func TestUnreachable(t *testing.T) {
	srv := etcdtest.Start(t)
	uri := etcdtest.URI(srv, "/ledgers")
	addr := srv.ClientAddr()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := metadata.Open(ctxOf(t), uri, metadata.Options{DialTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open of a stopped etcd: %v (want an error naming %s)", err, addr)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("Open took %v", el)
	}
}

func TestOpenRejects(t *testing.T) {
	ctx := ctxOf(t)
	if _, err := metadata.Open(ctx, "zk://127.0.0.1:2181/ledgers", metadata.Options{}); !errors.Is(err, metadata.ErrNotBuilt) {
		t.Errorf("zk: %v", err)
	}
	if _, err := etcd.New(ctx, etcd.Config{Endpoints: shared.Endpoints(), Scope: "/ledgers/"}); !errors.Is(err, metadata.ErrBadURI) {
		t.Errorf("trailing slash: %v", err)
	}
}

// TestClosedDriver: operations on a closed driver fail with ErrClosed, and
// its watches end.
func TestClosedDriver(t *testing.T) {
	ctx := ctxOf(t)
	u := mustURI(t, etcdtest.URI(shared, etcdtest.Scope(t)))
	d, err := etcd.Open(ctx, u, etcd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.WatchBookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch { // closed by Close
	}
	if _, _, err := d.ReadLedger(ctx, 1); !errors.Is(err, metadata.ErrClosed) {
		t.Fatalf("ReadLedger after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestNoGoroutineLeak: a driver with sessions and watches leaves no
// goroutine behind after Close (the shared server's own goroutines were
// there before and are ignored).
func TestNoGoroutineLeak(t *testing.T) {
	ctx := ctxOf(t)
	uri := etcdtest.URI(shared, etcdtest.Scope(t))
	c := raw(t, shared) // the helper client lives until cleanup: ignore it too
	_ = c
	ignore := goleak.IgnoreCurrent()
	d, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := d.CreateLedger(ctx, metadatatest.NewLedgerMetadata(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	lw, err := d.WatchLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	<-lw
	bw, err := d.WatchBookies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-bw
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("session not done after driver Close")
	}
	// Server-side goroutines serving this client's streams end a little
	// after the client closes; goleak retries until its deadline.
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/transport.(*http2Server).keepalive"),
		goleak.IgnoreTopFunction("go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc.(*serverWatchStream).recvLoop"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc.(*serverWatchStream).sendLoop"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc.(*LeaseServer).leaseKeepAlive"),
	)
}
