package autorecovery_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/testcluster"
)

// A session (etcd lease) that ends while its process lives: revoked from
// outside on a real etcd, or expired by the memory driver's fault. The
// locks and the candidacy under it are gone at once; the auditor and the
// worker open a new session and go on working.

// sessionStore is a metadata store on which a test ends a component's
// session from outside while the component runs.
type sessionStore struct {
	uri string
	md  metadata.Driver // the test's own handle
	// open returns a new handle for the component named owner.
	open func(owner metadata.BookieID) metadata.Driver
	// expire ends owner's sessions from outside and returns them (etcd:
	// the leases of the keys holding owner under underreplication/, i.e.
	// its locks and candidacy; memory: the live sessions of its handle).
	expire func(owner metadata.BookieID) []string
	// held returns owner's live sessions as expire would find them.
	held func(owner metadata.BookieID) []string
}

func openSessionStoreHandle(t *testing.T, uri string) metadata.Driver {
	t.Helper()
	d, err := metadata.Open(context.Background(), uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// etcdSessions expires sessions by revoking their leases through an etcd
// client: the leases are found on the keys the owner holds.
func etcdSessions(t *testing.T, uri string, md metadata.Driver) *sessionStore {
	ed := md.(*etcd.Driver)
	cli, prefix := ed.Client(), ed.Scope()+"/underreplication/"
	held := func(owner metadata.BookieID) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			if string(kv.Value) == string(owner) && kv.Lease != 0 {
				out = append(out, fmt.Sprintf("%x", kv.Lease))
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return &sessionStore{
		uri: uri, md: md,
		open: func(metadata.BookieID) metadata.Driver { return openSessionStoreHandle(t, uri) },
		held: held,
		expire: func(owner metadata.BookieID) []string {
			leases := held(owner)
			for _, l := range leases {
				var id int64
				if _, err := fmt.Sscanf(l, "%x", &id); err != nil {
					t.Fatal(err)
				}
				if _, err := cli.Revoke(context.Background(), clientv3.LeaseID(id)); err != nil {
					t.Fatalf("revoke lease %s: %v", l, err)
				}
			}
			return leases
		},
	}
}

func newEtcdSessionStore(t *testing.T) *sessionStore {
	srv := etcdtest.Start(t)
	uri := etcdtest.URI(srv, etcdtest.Scope(t))
	md := openSessionStoreHandle(t, uri)
	if _, err := md.InitNewCluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	return etcdSessions(t, uri, md)
}

// sessionSpy is a memory driver handle that remembers the sessions it
// opened, so that a test can expire them (memory.Store.ExpireSession).
type sessionSpy struct {
	*memory.Driver
	mu       sync.Mutex
	sessions []metadata.Session
}

func (d *sessionSpy) OpenSession(ctx context.Context, opts metadata.SessionOptions) (metadata.Session, error) {
	s, err := d.Driver.OpenSession(ctx, opts)
	if err == nil {
		d.mu.Lock()
		d.sessions = append(d.sessions, s)
		d.mu.Unlock()
	}
	return s, err
}

// live returns the sessions not yet ended, with their positions.
func (d *sessionSpy) live() (idx []string, ss []metadata.Session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, s := range d.sessions {
		select {
		case <-s.Done():
		default:
			idx, ss = append(idx, fmt.Sprint(i)), append(ss, s)
		}
	}
	return idx, ss
}

var unsafeStoreName = regexp.MustCompile(`[^A-Za-z0-9]+`)

func newMemorySessionStore(t *testing.T) (*sessionStore, *memory.Store) {
	name := unsafeStoreName.ReplaceAllString(t.Name(), "-")
	st := memory.Named(name)
	t.Cleanup(func() { memory.ForgetNamed(name) })
	uri := "memory://" + name + "/ledgers"
	md := openSessionStoreHandle(t, uri)
	if _, err := md.InitNewCluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	spies := map[metadata.BookieID]*sessionSpy{}
	spy := func(owner metadata.BookieID) *sessionSpy {
		mu.Lock()
		defer mu.Unlock()
		return spies[owner]
	}
	return &sessionStore{
		uri: uri, md: md,
		open: func(owner metadata.BookieID) metadata.Driver {
			d := st.Open()
			t.Cleanup(func() { d.Close() })
			s := &sessionSpy{Driver: d}
			mu.Lock()
			spies[owner] = s
			mu.Unlock()
			return s
		},
		held: func(owner metadata.BookieID) []string {
			idx, _ := spy(owner).live()
			return idx
		},
		expire: func(owner metadata.BookieID) []string {
			idx, ss := spy(owner).live()
			for _, s := range ss {
				st.ExpireSession(s)
			}
			return idx
		},
	}, st
}

// registerFakeBookies registers ids 10.0.0.1:3181 ... (the ensemble of
// metadatatest.NewLedgerMetadata) each under its own session, and returns
// the sessions: closing one makes its bookie lost.
func registerFakeBookies(ctx context.Context, t *testing.T, md metadata.Driver, n int) map[metadata.BookieID]metadata.Session {
	t.Helper()
	out := map[metadata.BookieID]metadata.Session{}
	for i := range n {
		id := metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", i+1))
		s, err := md.OpenSession(ctx, metadata.SessionOptions{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		if err := s.RegisterBookie(ctx, id, false); err != nil {
			t.Fatal(err)
		}
		out[id] = s
	}
	return out
}

// createFakeLedgers creates n closed ledgers on 10.0.0.1-3 (metadata only).
func createFakeLedgers(ctx context.Context, t *testing.T, md metadata.Driver, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		m := metadatatest.NewLedgerMetadata(3, 2, 2)
		m.State, m.LastEntryID, m.Length = metadata.LedgerClosed, 10, 100
		id, _, err := md.CreateLedger(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// eventually polls cond every 20 ms until it holds; it fails the test when
// ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runComponent runs f until the test ends; done closes when f returns.
func runComponent(t *testing.T, f func(context.Context) error) (done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	go func() { defer close(ch); _ = f(ctx) }()
	t.Cleanup(func() { cancel(); <-ch })
	return ch
}

// The elected auditor's session ends from outside: its candidacy is gone,
// it campaigns again under a new session, is elected again (the only
// candidate), and still audits: a bookie lost afterwards has its ledgers
// marked under-replicated.
func TestAuditorCampaignsAgainAfterSessionLoss(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) *sessionStore
	}{
		{"etcd-revoke", newEtcdSessionStore},
		{"memory-expire", func(t *testing.T) *sessionStore { s, _ := newMemorySessionStore(t); return s }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := tc.store(t)
			bookies := registerFakeBookies(ctx, t, st.md, 4)
			ledgers := createFakeLedgers(ctx, t, st.md, 3)
			ar := st.md.(metadata.AutoRecoveryDriver)
			const id = metadata.BookieID("127.0.0.1:1")
			a, err := autorecovery.NewAuditor(autorecovery.AuditorConfig{Driver: st.open(id), ID: id,
				SessionTTL: 2 * time.Second, RetryInterval: 100 * time.Millisecond, BookieCheckInterval: -1,
				LedgerCheckInterval: -1}) // the fake bookies cannot be read
			if err != nil {
				t.Fatal(err)
			}
			done := runComponent(t, a.Run)
			isAuditor := func() bool {
				got, err := ar.Auditor(ctx)
				return err == nil && got == id
			}
			eventually(ctx, t, "the auditor elected", func() bool { return isAuditor() && len(st.held(id)) > 0 })

			ended := st.expire(id)
			if len(ended) == 0 {
				t.Fatal("found no session of the auditor to end")
			}
			eventually(ctx, t, "the auditor elected under a new session", func() bool {
				now := st.held(id)
				return isAuditor() && len(now) > 0 && !slices.ContainsFunc(now, func(s string) bool { return slices.Contains(ended, s) })
			})
			if ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 10); err != nil || len(ur) != 0 {
				t.Fatalf("under-replicated before any bookie was lost: %v %v", ur, err)
			}

			lost := metadata.BookieID("10.0.0.2:3181")
			if err := bookies[lost].Close(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "the lost bookie's ledgers marked", func() bool {
				ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 10)
				if err != nil {
					t.Fatal(err)
				}
				var marked []int64
				for _, r := range ur {
					if slices.Equal(r.MissingReplicas, []metadata.BookieID{lost}) {
						marked = append(marked, r.LedgerID)
					}
				}
				return slices.Equal(marked, ledgers)
			})
			select {
			case <-done:
				t.Fatal("Auditor.Run returned")
			default:
			}
		})
	}
}

// A replication worker's session is revoked (etcd) while the worker copies
// a ledger under its lock, the process living on: (a) the lock is gone at
// once, another owner can take the ledger; (b) the same worker opens a new
// session and keeps working: the interrupted ledger and a ledger marked
// under-replicated after the revocation are re-replicated and their
// records cleared, every entry on its write set.
func TestWorkerSurvivesSessionRevoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bookie processes")
	}
	cl := testcluster.Start(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 1000
	big := writeClosedLedgers(ctx, t, c, 1, 16, size) // copied slowly: revoked mid-copy
	small := writeClosedLedgers(ctx, t, c, 1, 16, 0)  // marked after the revocation
	var l1, l2 int64
	for id := range big {
		l1 = id
	}
	for id := range small {
		l2 = id
	}
	m1, _, err := cl.MD.ReadLedger(ctx, l1)
	if err != nil {
		t.Fatal(err)
	}
	m2, _, err := cl.MD.ReadLedger(ctx, l2)
	if err != nil {
		t.Fatal(err)
	}
	// A bookie of both ensembles (E=3 of 4 bookies share at least 2).
	var victim *testcluster.Bookie
	for _, b := range cl.Bookies {
		if slices.Contains(m1.Ensembles[0].Ensemble, b.ID) && slices.Contains(m2.Ensembles[0].Ensemble, b.ID) {
			victim = b
		}
	}
	firsts1, firsts2 := segmentFirsts(ctx, t, cl.MD, big), segmentFirsts(ctx, t, cl.MD, small)
	victim.Kill()
	victim.WaitUnregistered()
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	if err := ar.MarkLedgerUnderReplicated(ctx, l1, []metadata.BookieID{victim.ID}); err != nil {
		t.Fatal(err)
	}

	st := etcdSessions(t, cl.URI, cl.MD)
	const id = metadata.BookieID("127.0.0.1:101")
	wc, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, ReadEntryTimeout: 2 * time.Second, AddEntryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	bks := rereplication.NewBookies(2*time.Second, nil)
	t.Cleanup(func() { bks.Close() })
	// About 4 entries a second: the victim's ~11 KB of the big ledger take
	// seconds.
	w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{Driver: st.open(id), Client: wc, Bookies: bks, ID: id,
		SessionTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, FailureBackoff: 500 * time.Millisecond,
		RateLimitBytesPerSecond: 4 * size})
	if err != nil {
		t.Fatal(err)
	}
	done := runComponent(t, w.Run)
	eventually(ctx, t, "the worker holding the lock of the big ledger", func() bool { return len(st.held(id)) > 0 })
	revoked := st.expire(id)
	if len(revoked) != 1 {
		t.Fatalf("revoked leases %v, want the worker's one", revoked)
	}

	// (a) Its lock went with the lease: another owner takes the ledger.
	s, err := cl.MD.OpenSession(ctx, metadata.SessionOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := ar.LockUnderReplicatedLedger(ctx, s, l1, "127.0.0.1:102")
	if err != nil {
		t.Fatalf("lock of ledger %d after revoking the worker's lease: %v", l1, err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// (b) The same worker repairs both ledgers, under new sessions.
	if err := ar.MarkLedgerUnderReplicated(ctx, l2, []metadata.BookieID{victim.ID}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	all := map[int64]int64{l1: big[l1], l2: small[l2]}
	eventually(ctx, t, "both ledgers re-replicated", func() bool {
		if held := st.held(id); slices.ContainsFunc(held, func(l string) bool { return slices.Contains(revoked, l) }) {
			t.Fatalf("a key of the worker under the revoked lease %v", held)
		}
		return refs(ctx, t, cl.MD, all, victim.ID) == 0 && len(underReplicated(ctx, t, cl.MD)) == 0
	})
	t.Logf("re-replicated %v after the revocation", time.Since(start))
	select {
	case <-done:
		t.Fatal("Worker.Run returned")
	default:
	}
	checkIntact(ctx, t, cl.MD, big, firsts1, size, victim.ID)
	checkIntact(ctx, t, cl.MD, small, firsts2, 0, victim.ID)
}

// The same on the memory driver, whose fault expires a session
// (ExpireSession): the worker is held inside its repair of a ledger (a
// metadata read blocked by a hook) when its session expires. The lock is
// gone at once; the worker then clears that record and one marked after
// the expiry (their bookies are all available: nothing to copy), under a
// new session.
func TestWorkerSurvivesSessionExpiryMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, store := newMemorySessionStore(t)
	registerFakeBookies(ctx, t, st.md, 3)
	ledgers := createFakeLedgers(ctx, t, st.md, 2)
	ar := st.md.(metadata.AutoRecoveryDriver)

	// Hold the worker in its first ledger read until its context ends.
	var mu sync.Mutex
	armed := true
	entered := make(chan struct{})
	store.SetHook(func(ctx context.Context, op memory.Op, _ string, phase memory.Phase) error {
		if op != memory.OpReadLedger || phase != memory.Before {
			return nil
		}
		mu.Lock()
		block := armed
		armed = false
		mu.Unlock()
		if !block {
			return nil
		}
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	t.Cleanup(func() { store.SetHook(nil) })

	if err := ar.MarkLedgerUnderReplicated(ctx, ledgers[0], []metadata.BookieID{"10.0.0.9:3181"}); err != nil {
		t.Fatal(err)
	}
	const id = metadata.BookieID("127.0.0.1:101")
	wc, err := client.New(ctx, client.Config{MetadataServiceURI: st.uri})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	bks := rereplication.NewBookies(time.Second, nil)
	t.Cleanup(func() { bks.Close() })
	w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{Driver: st.open(id), Client: wc, Bookies: bks, ID: id,
		SessionTTL: 2 * time.Second, PollInterval: 20 * time.Millisecond, FailureBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := runComponent(t, w.Run)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the worker never repaired")
	}
	s, err := st.md.OpenSession(ctx, metadata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := ar.LockUnderReplicatedLedger(ctx, s, ledgers[0], "127.0.0.1:102"); !errors.Is(err, metadata.ErrLocked) {
		t.Fatalf("lock while the worker repairs: %v, want ErrLocked", err)
	}
	if ended := st.expire(id); len(ended) != 1 {
		t.Fatalf("expired sessions %v, want the worker's one", ended)
	}

	// (a) The lock went with the session.
	lock, err := ar.LockUnderReplicatedLedger(ctx, s, ledgers[0], "127.0.0.1:102")
	if err != nil {
		t.Fatalf("lock after the worker's session expired: %v", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// (b) The same worker goes on, under a new session.
	if err := ar.MarkLedgerUnderReplicated(ctx, ledgers[1], []metadata.BookieID{"10.0.0.9:3181"}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "both records cleared", func() bool { return len(underReplicated(ctx, t, st.md)) == 0 })
	if held := st.held(id); len(held) != 1 || held[0] == "0" {
		t.Fatalf("live sessions of the worker: %v, want one new one", held)
	}
	select {
	case <-done:
		t.Fatal("Worker.Run returned")
	default:
	}
}
