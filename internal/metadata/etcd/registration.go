package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
)

// session is one etcd lease, kept alive by the client's keepalive loop
// (a request every TTL/3). When keepalives stop getting answers for a TTL,
// or the lease is revoked or expires, the keepalive channel closes and Done
// closes: the registrations under the lease are gone, and the owner opens a
// new session (a new lease) and registers again, as Java's
// EtcdBookieRegister re-grants on keepalive failure.
type session struct {
	d     *Driver
	lease clientv3.LeaseID
	ttl   time.Duration // as granted (etcd may raise it to its minimum)
	// info is the BookieServiceInfo registrations publish as their value
	// (nil: an empty value, as Java's etcd driver writes).
	info *metadata.BookieServiceInfo

	done     chan struct{}
	doneOnce sync.Once
	stopKA   context.CancelFunc

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		// locks are the create revisions, by key, of the
		// under-replication locks this session handed out and has not
		// seen deleted (lockOnce).
		locks map[string]int64
	}
}

// noteLock records a lock handed out under this session.
func (s *session) noteLock(key string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.locks == nil {
		s.mu.locks = map[string]int64{}
	}
	s.mu.locks[key] = rev
}

// forgetLock forgets a lock handed out, once its key is deleted.
func (s *session) forgetLock(key string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.locks[key] == rev {
		delete(s.mu.locks, key)
	}
}

// handedOut reports whether the lock key at create revision rev was handed
// out by this session (and not seen deleted).
func (s *session) handedOut(key string, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.mu.locks[key]
	return ok && held == rev
}

// OpenSession grants a lease of opts.TTL (whole seconds, rounded up, at
// least 1 s; etcd may raise it to its own minimum) and keeps it alive.
func (d *Driver) OpenSession(ctx context.Context, opts metadata.SessionOptions) (metadata.Session, error) {
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = metadata.DefaultSessionTTL
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	// A retried grant after one that was applied leaves a lease nobody
	// keeps alive: it expires after its TTL, holding nothing.
	var grant *clientv3.LeaseGrantResponse
	what := fmt.Sprintf("grant a %ds lease", secs)
	err := d.do(ctx, what, func(ctx context.Context, _ bool) error {
		g, err := d.cli.Grant(ctx, secs)
		if err != nil {
			return d.storeErr(what, err)
		}
		grant = g
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := &session{d: d, lease: grant.ID, ttl: time.Duration(grant.TTL) * time.Second, info: opts.ServiceInfo, done: make(chan struct{})}
	kctx, cancel := context.WithCancel(context.Background())
	s.stopKA = cancel
	revoke := func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.DialTimeout)
		defer rcancel()
		_, _ = d.cli.Revoke(rctx, grant.ID) // best effort: else it expires after its TTL
	}
	ka, err := d.cli.KeepAlive(kctx, grant.ID)
	if err != nil {
		cancel()
		revoke()
		return nil, d.storeErr("keep lease alive", err)
	}
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		cancel()
		revoke()
		return nil, metadata.ErrClosed
	}
	d.mu.sessions[s] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		for range ka { // drain keepalive answers until the lease is lost or stopped
		}
		s.markDone()
	}()
	return s, nil
}

// LeaseID returns the session's etcd lease id.
func (s *session) LeaseID() clientv3.LeaseID { return s.lease }

// TTL returns the lease TTL etcd granted.
func (s *session) TTL() time.Duration { return s.ttl }

func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) markDone() {
	s.doneOnce.Do(func() { close(s.done) })
	s.d.mu.Lock()
	delete(s.d.mu.sessions, s)
	s.d.mu.Unlock()
}

func (s *session) expired() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Close revokes the lease: etcd deletes every key attached to it at once.
func (s *session) Close(ctx context.Context) error { return s.close(ctx) }

func (s *session) close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.stopKA()
		s.markDone()
		// Revoke even if the keepalive loop already gave up: it may have
		// lost contact with a lease that still exists.
		what := fmt.Sprintf("revoke lease %x", int64(s.lease))
		s.closeErr = s.d.do(ctx, what, func(ctx context.Context, _ bool) error {
			_, err := s.d.cli.Revoke(ctx, s.lease)
			if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return s.d.storeErr(what, err)
			}
			return nil
		})
	})
	return s.closeErr
}

func (s *session) expiredErr(id metadata.BookieID) error {
	return fmt.Errorf("register bookie %s (lease %x): %w", id, int64(s.lease), metadata.ErrSessionExpired)
}

// RegisterBookie puts `bookies/writable/<id>` (or `bookies/readonly/<id>`)
// with an empty value under the session's lease and deletes the other mode's
// key, in one txn guarded by `create_revision(key) == 0` (§2.6) and by the
// other mode's key being the one read just before (same create revision,
// or still absent). A key already held by this lease is a no-op (the other
// mode's key is still removed). A key held by another lease is waited for
// (its DELETE) up to Config.RegistrationWait (default 2×TTL), then
// ErrBookieRegistered.
func (s *session) RegisterBookie(ctx context.Context, id metadata.BookieID, readOnly bool) error {
	if err := checkBookieID(id); err != nil {
		return err
	}
	if s.expired() {
		return s.expiredErr(id)
	}
	if err := s.d.checkOpen(); err != nil {
		return err
	}
	key, other := s.d.k.registration(id, readOnly), s.d.k.registration(id, !readOnly)
	wait := s.d.cfg.RegistrationWait
	if wait <= 0 {
		wait = 2 * s.ttl
	}
	var deadline time.Time
	what := "register bookie at " + key
	for {
		cur, otherCreated, rev, err := s.readRegistration(ctx, what, key, other)
		if err != nil {
			return err
		}
		if cur != nil && cur.Lease == int64(s.lease) {
			// Registered: by an earlier call, or by an attempt of this one
			// that was applied although it failed. Remove the other mode's
			// key if it is still the one read.
			if otherCreated == 0 {
				return nil
			}
			return s.d.deleteIfCreated(ctx, "unregister bookie at "+other, other, otherCreated)
		}
		if cur == nil {
			done, err := s.registerOnce(ctx, id, key, other, otherCreated)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
			// The keys changed since the read (or an attempt of ours was
			// applied after all): read them again.
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(wait)
		}
		gone, err := s.waitDeleted(ctx, key, rev, time.Until(deadline))
		if err != nil {
			return err
		}
		if !gone {
			return fmt.Errorf("register bookie %s: %w: %s is held by lease %x, not ours (%x), and was not released within %v (another process with this bookie id, or a crashed one whose lease has not expired)",
				id, metadata.ErrBookieRegistered, key, cur.Lease, int64(s.lease), wait)
		}
	}
}

// readRegistration reads key and the other mode's key at one revision: key
// (nil if absent), the other key's create revision (0 if absent) and the
// revision read at.
func (s *session) readRegistration(ctx context.Context, what, key, other string) (*mvccpb.KeyValue, int64, int64, error) {
	var resp *clientv3.TxnResponse
	err := s.d.do(ctx, what, func(ctx context.Context, _ bool) error {
		// Not keys-only for key: etcd 3.7 answers a keys-only read from
		// its index, without the lease.
		r, err := s.d.cli.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(other, clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return s.d.storeErr(what, err)
		}
		resp = r
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	var otherCreated int64
	if kv := firstKV(resp, 1); kv != nil {
		otherCreated = kv.CreateRevision
	}
	return firstKV(resp, 0), otherCreated, resp.Header.Revision, nil
}

// registerOnce puts key under the lease and deletes the other mode's key,
// if key is absent and the other key is the one read (otherCreated, 0 for
// absent); it reports whether it did.
//
// The second condition is what makes a late attempt harmless. An attempt
// the driver gave up on may still be applied after a later one (an etcd
// follower forwards a proposal after writing it to its own disk, and the
// retry may go through another member that applies first), possibly after
// this call has returned and the bookie has moved to the other mode: then
// the other key is a newer one, the comparison fails, and the bookie's
// current registration stands.
func (s *session) registerOnce(ctx context.Context, id metadata.BookieID, key, other string, otherCreated int64) (bool, error) {
	what := "register bookie at " + key
	var value []byte
	if s.info != nil {
		v, err := metadata.EncodeBookieServiceInfo(*s.info)
		if err != nil {
			return false, fmt.Errorf("register bookie %s: %w", id, err)
		}
		value = v
	}
	then := []clientv3.Op{clientv3.OpPut(key, string(value), clientv3.WithLease(s.lease))}
	if otherCreated != 0 {
		then = append(then, clientv3.OpDelete(other))
	}
	var done bool
	err := s.d.do(ctx, what, func(ctx context.Context, _ bool) error {
		r, err := s.d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.Compare(clientv3.CreateRevision(other), "=", otherCreated)).
			Then(then...).
			Commit()
		if err != nil {
			return err // unwrapped: ErrLeaseNotFound is told apart below
		}
		done = r.Succeeded
		return nil
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.stopKA()
		s.markDone()
		return false, s.expiredErr(id)
	}
	if err != nil {
		return false, s.d.storeErr(what, err)
	}
	return done, nil
}

// waitDeleted waits up to d for a DELETE of key after revision rev. It
// reports whether one happened; ErrSessionExpired if our own session ends.
func (s *session) waitDeleted(ctx context.Context, key string, rev int64, d time.Duration) (bool, error) {
	if d <= 0 {
		return false, nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	wch := s.d.cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for {
		select {
		case <-s.done:
			return false, fmt.Errorf("register bookie at %s: %w", key, metadata.ErrSessionExpired)
		case wr, ok := <-wch:
			if !ok {
				if ctx.Err() != nil {
					return false, s.d.storeErr("register bookie at "+key, ctx.Err())
				}
				return false, nil // our wait is over
			}
			if wr.CompactRevision != 0 {
				return true, nil // history gone: let the caller look again
			}
			if err := wr.Err(); err != nil {
				return false, s.d.storeErr("watch "+key, err)
			}
			for _, e := range wr.Events {
				if e.Type == mvccpb.DELETE {
					return true, nil
				}
			}
		}
	}
}

// UnregisterBookie deletes the registration key, whoever holds it (as Java
// does: a restarted bookie may remove its crashed predecessor's key), but
// only the registration that exists when it is called: it reads the key's
// create revision first and deletes the key only while it has that create
// revision. An attempt applied late (see registerOnce) then cannot remove a
// registration made after this call: `folio standalone` removes its
// bookies' stale keys and registers them at once, and a late delete of the
// fresh key would hide the bookie, whose ledgers AutoRecovery would then
// re-replicate. A key created after the read was preceded by the deletion
// of the one read, so this call is done either way.
func (s *session) UnregisterBookie(ctx context.Context, id metadata.BookieID, readOnly bool) error {
	if err := checkBookieID(id); err != nil {
		return err
	}
	if err := s.d.checkOpen(); err != nil {
		return err
	}
	key := s.d.k.registration(id, readOnly)
	what := "unregister bookie at " + key
	resp, err := s.d.get(ctx, what, key, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return s.d.deleteIfCreated(ctx, what, key, resp.Kvs[0].CreateRevision)
}

// WritableBookies lists `bookies/writable/` (keys only).
func (d *Driver) WritableBookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.listIDs(ctx, d.k.writable)
}

// ReadOnlyBookies lists `bookies/readonly/` (keys only).
func (d *Driver) ReadOnlyBookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.listIDs(ctx, d.k.readonly)
}

// ReadBookieServiceInfo reads the value of the bookie's writable registration
// key, else of its read-only one: the encoded BookieServiceInfo a Folio
// bookie publishes, or empty (a Java bookie) for the legacy info of a
// host:port id. ErrNotFound if neither key exists.
func (d *Driver) ReadBookieServiceInfo(ctx context.Context, id metadata.BookieID) (metadata.BookieServiceInfo, error) {
	if err := checkBookieID(id); err != nil {
		return metadata.BookieServiceInfo{}, err
	}
	if err := d.checkOpen(); err != nil {
		return metadata.BookieServiceInfo{}, err
	}
	for _, ro := range []bool{false, true} {
		key := d.k.registration(id, ro)
		resp, err := d.get(ctx, "read "+key, key)
		if err != nil {
			return metadata.BookieServiceInfo{}, err
		}
		if len(resp.Kvs) > 0 {
			return metadata.DecodeRegistrationValue(key, id, resp.Kvs[0].Value)
		}
	}
	return metadata.BookieServiceInfo{}, fmt.Errorf("bookie %s: %w: not registered", id, metadata.ErrNotFound)
}

// idsOf turns the keys under prefix into bookie ids; a key that is not a
// valid bookie id is an error naming it (Java's discovery fails likewise).
func idsOf(prefix string, kvs []*mvccpb.KeyValue) ([]metadata.BookieID, error) {
	var ids []metadata.BookieID
	for _, kv := range kvs {
		key := string(kv.Key)
		id := metadata.BookieID(key[len(prefix):])
		if err := metadata.ValidateBookieID(id); err != nil {
			return nil, metadata.Corrupt(key, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// membership is the state a bookie watch maintains.
type membership struct {
	writable, readonly map[metadata.BookieID]bool
}

func (m *membership) event() metadata.BookiesEvent {
	sorted := func(set map[metadata.BookieID]bool) []metadata.BookieID {
		var ids []metadata.BookieID
		for id := range set {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	return metadata.BookiesEvent{Writable: sorted(m.writable), ReadOnly: sorted(m.readonly)}
}

// readMembership reads both sets at one revision.
func (d *Driver) readMembership(ctx context.Context) (*membership, int64, error) {
	const what = "read bookie membership"
	var resp *clientv3.TxnResponse
	err := d.do(ctx, what, func(ctx context.Context, _ bool) error {
		r, err := d.cli.Txn(ctx).Then(
			clientv3.OpGet(d.k.writable+"/", clientv3.WithRange(prefixEnd(d.k.writable)), clientv3.WithKeysOnly()),
			clientv3.OpGet(d.k.readonly+"/", clientv3.WithRange(prefixEnd(d.k.readonly)), clientv3.WithKeysOnly()),
		).Commit()
		if err != nil {
			return d.storeErr(what, err)
		}
		resp = r
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	m := &membership{writable: map[metadata.BookieID]bool{}, readonly: map[metadata.BookieID]bool{}}
	for i, prefix := range []string{d.k.writable + "/", d.k.readonly + "/"} {
		ids, err := idsOf(prefix, resp.Responses[i].GetResponseRange().GetKvs())
		if err != nil {
			return nil, 0, err
		}
		set := m.writable
		if i == 1 {
			set = m.readonly
		}
		for _, id := range ids {
			set[id] = true
		}
	}
	return m, resp.Header.Revision, nil
}

// apply updates m with one watch event; keys outside the two sets (the
// placeholders) are ignored.
func (d *Driver) apply(m *membership, e *clientv3.Event) error {
	key := string(e.Kv.Key)
	var set map[metadata.BookieID]bool
	var id metadata.BookieID
	switch {
	case strings.HasPrefix(key, d.k.writable+"/"):
		set, id = m.writable, metadata.BookieID(key[len(d.k.writable)+1:])
	case strings.HasPrefix(key, d.k.readonly+"/"):
		set, id = m.readonly, metadata.BookieID(key[len(d.k.readonly)+1:])
	default:
		return nil
	}
	if err := metadata.ValidateBookieID(id); err != nil {
		return metadata.Corrupt(key, err)
	}
	if e.Type == mvccpb.DELETE {
		delete(set, id)
	} else {
		set[id] = true
	}
	return nil
}

// WatchBookies reads both sets at one revision, then watches
// [<scope>/bookies/, <scope>/bookies0) from the next one. While the reader
// is slow, snapshots are coalesced (the newest wins).
func (d *Driver) WatchBookies(ctx context.Context) (<-chan metadata.BookiesEvent, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	m, rev, err := d.readMembership(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan metadata.BookiesEvent)
	err = d.goWatch(ctx, func(ctx context.Context) {
		defer close(out)
		d.runBookieWatch(ctx, m, rev, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *Driver) runBookieWatch(ctx context.Context, m *membership, rev int64, out chan<- metadata.BookiesEvent) {
	first := m.event()
	pending, final := &first, false
	var wch clientv3.WatchChan
	var stopWatch context.CancelFunc = func() {}
	defer func() { stopWatch() }()
	watchFrom := func(rev int64) {
		stopWatch()
		var wctx context.Context
		wctx, stopWatch = context.WithCancel(ctx)
		wch = d.cli.Watch(wctx, d.k.bookies+"/", clientv3.WithRange(prefixEnd(d.k.bookies)), clientv3.WithRev(rev+1))
	}
	watchFrom(rev)
	fail := func(err error) {
		pending, final = &metadata.BookiesEvent{Err: err}, true
	}
	for {
		if pending == nil && final {
			return
		}
		var send chan<- metadata.BookiesEvent
		var ev metadata.BookiesEvent
		if pending != nil {
			send, ev = out, *pending
		}
		var recv clientv3.WatchChan
		if !final {
			recv = wch
		}
		select {
		case <-ctx.Done():
			return
		case send <- ev:
			pending = nil
		case wr, ok := <-recv:
			switch {
			case !ok:
				if ctx.Err() != nil {
					return
				}
				fail(d.storeErr("watch bookies", errors.New("watch closed")))
			case wr.CompactRevision != 0:
				nm, nrev, err := d.readMembership(ctx)
				if err != nil {
					fail(err)
					continue
				}
				m = nm
				snap := m.event()
				pending = &snap
				watchFrom(nrev)
			case wr.Err() != nil:
				fail(d.storeErr("watch bookies", wr.Err()))
			default:
				for _, e := range wr.Events {
					if err := d.apply(m, e); err != nil {
						fail(err)
						break
					}
				}
				if !final {
					snap := m.event()
					pending = &snap
				}
			}
		}
	}
}
