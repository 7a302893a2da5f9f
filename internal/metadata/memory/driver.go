package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
)

// Driver is a handle on a Store; it implements metadata.Driver.
type Driver struct {
	s    *Store
	stop chan struct{} // closed by Close: ends watches

	mu struct {
		sync.Mutex
		closed     bool
		nextBucket int
		sessions   map[*session]struct{}
	}
}

var _ metadata.Driver = (*Driver)(nil)

// Open returns a new handle on s.
func (s *Store) Open() *Driver {
	d := &Driver{s: s, stop: make(chan struct{})}
	d.mu.sessions = map[*session]struct{}{}
	return d
}

// Store returns the handle's store (for faults and raw writes).
func (d *Driver) Store() *Store { return d.s }

// Close ends the handle's sessions (revoking their leases) and watches.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil
	}
	d.mu.closed = true
	sessions := d.mu.sessions
	d.mu.sessions = nil
	d.mu.Unlock()
	close(d.stop)
	d.s.mu.Lock()
	for ss := range sessions {
		d.s.expireLocked(ss)
	}
	d.s.mu.Unlock()
	return nil
}

// begin checks that the handle is open, expires due leases, and runs the
// Before hook.
func (d *Driver) begin(ctx context.Context, op Op, key string) error {
	d.mu.Lock()
	closed := d.mu.closed
	d.mu.Unlock()
	if closed {
		return metadata.ErrClosed
	}
	d.s.ExpireLeases()
	return d.s.begin(ctx, op, key)
}

func checkID(id int64) error {
	if id < 0 || id > metadata.MaxLedgerID {
		return fmt.Errorf("%w: %d", metadata.ErrInvalidLedgerID, id)
	}
	return nil
}

// GenerateLedgerID allocates as the etcd driver does: bucket << 56 | a
// per-bucket counter starting at 1, the handle going round-robin over the
// 128 buckets.
func (d *Driver) GenerateLedgerID(ctx context.Context) (int64, error) {
	if err := d.begin(ctx, OpGenerateLedgerID, ""); err != nil {
		return 0, err
	}
	d.mu.Lock()
	b := d.mu.nextBucket
	d.mu.nextBucket = (b + 1) % numBuckets
	d.mu.Unlock()
	d.s.mu.Lock()
	d.s.mu.buckets[b]++
	id := int64(b)<<56 | d.s.mu.buckets[b]
	d.s.mu.Unlock()
	key := fmt.Sprintf("%s/buckets/%03d", d.s.scope, b)
	return id, d.s.end(ctx, OpGenerateLedgerID, key, nil)
}

// CreateLedger implements metadata.LedgerManager.
func (d *Driver) CreateLedger(ctx context.Context, md *metadata.LedgerMetadata) (int64, metadata.Version, error) {
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, 0, err
	}
	for {
		id, err := d.GenerateLedgerID(ctx)
		if err != nil {
			return 0, 0, err
		}
		v, err := d.createLedger(ctx, id, value)
		if errors.Is(err, metadata.ErrLedgerExists) {
			continue // as Java's LedgerCreateOp: take another id
		}
		return id, v, err
	}
}

// CreateLedgerMetadata implements metadata.LedgerManager.
func (d *Driver) CreateLedgerMetadata(ctx context.Context, id int64, md *metadata.LedgerMetadata) (metadata.Version, error) {
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	return d.createLedger(ctx, id, value)
}

func (d *Driver) createLedger(ctx context.Context, id int64, value []byte) (metadata.Version, error) {
	if err := checkID(id); err != nil {
		return 0, err
	}
	key := d.s.ledgerKey(id)
	if err := d.begin(ctx, OpCreateLedger, key); err != nil {
		return 0, err
	}
	d.s.mu.Lock()
	if _, ok := d.s.mu.ledgers[id]; ok {
		d.s.mu.Unlock()
		return 0, metadata.ErrLedgerExists
	}
	v := d.s.putLedgerLocked(id, value)
	d.s.mu.Unlock()
	return v, d.s.end(ctx, OpCreateLedger, key, nil)
}

// ReadLedger implements metadata.LedgerManager.
func (d *Driver) ReadLedger(ctx context.Context, id int64) (*metadata.LedgerMetadata, metadata.Version, error) {
	if err := checkID(id); err != nil {
		return nil, 0, err
	}
	key := d.s.ledgerKey(id)
	if err := d.begin(ctx, OpReadLedger, key); err != nil {
		return nil, 0, err
	}
	d.s.mu.Lock()
	e, ok := d.s.mu.ledgers[id]
	d.s.mu.Unlock()
	if !ok {
		return nil, 0, fmt.Errorf("%w: ledger %d", metadata.ErrNoSuchLedger, id)
	}
	md, err := metadata.ParseLedgerMetadata(e.value) // values are never mutated in place
	if err != nil {
		return nil, 0, metadata.Corrupt(key, err)
	}
	return md, e.ver, nil
}

// WriteLedger implements metadata.LedgerManager.
func (d *Driver) WriteLedger(ctx context.Context, id int64, md *metadata.LedgerMetadata, expected metadata.Version) (metadata.Version, error) {
	if err := checkID(id); err != nil {
		return 0, err
	}
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	key := d.s.ledgerKey(id)
	if err := d.begin(ctx, OpWriteLedger, key); err != nil {
		return 0, err
	}
	d.s.mu.Lock()
	e, ok := d.s.mu.ledgers[id]
	switch {
	case !ok:
		d.s.mu.Unlock()
		return 0, fmt.Errorf("%w: ledger %d", metadata.ErrNoSuchLedger, id)
	case e.ver != expected:
		d.s.mu.Unlock()
		return 0, fmt.Errorf("%w: ledger %d: expected %d, stored %d", metadata.ErrBadVersion, id, expected, e.ver)
	}
	v := d.s.putLedgerLocked(id, value)
	d.s.mu.Unlock()
	return v, d.s.end(ctx, OpWriteLedger, key, nil)
}

// DeleteLedger implements metadata.LedgerManager.
func (d *Driver) DeleteLedger(ctx context.Context, id int64, expected metadata.Version) error {
	if err := checkID(id); err != nil {
		return err
	}
	key := d.s.ledgerKey(id)
	if err := d.begin(ctx, OpDeleteLedger, key); err != nil {
		return err
	}
	d.s.mu.Lock()
	e, ok := d.s.mu.ledgers[id]
	switch {
	case !ok:
		d.s.mu.Unlock()
		return fmt.Errorf("%w: ledger %d", metadata.ErrNoSuchLedger, id)
	case expected != metadata.VersionAny && e.ver != expected:
		d.s.mu.Unlock()
		return fmt.Errorf("%w: ledger %d: expected %d, stored %d", metadata.ErrBadVersion, id, expected, e.ver)
	}
	delete(d.s.mu.ledgers, id)
	d.s.nextRevLocked()
	d.s.notifyLedgerLocked(id)
	d.s.mu.Unlock()
	return d.s.end(ctx, OpDeleteLedger, key, nil)
}

// ListLedgers implements metadata.LedgerManager.
func (d *Driver) ListLedgers(ctx context.Context, startID int64, limit int) ([]int64, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("ListLedgers: limit %d must be > 0", limit)
	}
	if err := d.begin(ctx, OpListLedgers, ""); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	var ids []int64
	for id := range d.s.mu.ledgers {
		if id >= startID {
			ids = append(ids, id)
		}
	}
	d.s.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, nil
}

// WatchLedger implements metadata.LedgerManager.
func (d *Driver) WatchLedger(ctx context.Context, id int64) (<-chan metadata.LedgerEvent, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := d.begin(ctx, OpWatchLedger, d.s.ledgerKey(id)); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if _, ok := d.s.mu.ledgers[id]; !ok {
		return nil, fmt.Errorf("%w: ledger %d", metadata.ErrNoSuchLedger, id)
	}
	w := newWatcher(ctx, d.stop, func(ev metadata.LedgerEvent) bool { return ev.Deleted || ev.Err != nil })
	ev := d.s.ledgerEventLocked(id)
	w.push(ev)
	if ev.Err == nil {
		d.s.mu.ledgerWatchers[id] = append(d.s.mu.ledgerWatchers[id], w)
	}
	return w.out, nil
}

// ---- sessions and registration ----

type session struct {
	s    *Store
	d    *Driver
	ttl  time.Duration
	info *metadata.BookieServiceInfo // published by registrations; nil: derived from the id
	done chan struct{}

	// Guarded by Store.mu.
	expired     bool
	suspended   bool
	suspendedAt time.Time
	expiry      clock.Timer // while suspended: fires ExpireLeases a TTL on
}

// OpenSession implements metadata.Driver.
func (d *Driver) OpenSession(ctx context.Context, opts metadata.SessionOptions) (metadata.Session, error) {
	if err := d.begin(ctx, OpOpenSession, ""); err != nil {
		return nil, err
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = metadata.DefaultSessionTTL
	}
	ss := &session{s: d.s, d: d, ttl: ttl, info: opts.ServiceInfo, done: make(chan struct{})}
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil, metadata.ErrClosed
	}
	d.mu.sessions[ss] = struct{}{}
	d.mu.Unlock()
	d.s.mu.Lock()
	d.s.mu.sessions[ss] = struct{}{}
	d.s.mu.Unlock()
	return ss, nil
}

// SuspendKeepAlive stops renewing sess's lease, as if its process had
// frozen or been cut off: it expires TTL later on the store's clock (a
// timer of the clock calls ExpireLeases; with a manual clock, during the
// Advance that passes the TTL). sess must come from this store.
func (s *Store) SuspendKeepAlive(sess metadata.Session) {
	ss := sess.(*session)
	s.mu.Lock()
	if !ss.suspended && !ss.expired {
		ss.suspended, ss.suspendedAt = true, s.clock.Now()
		ss.expiry = s.clock.AfterFunc(ss.ttl, s.ExpireLeases)
	}
	s.mu.Unlock()
}

// ResumeKeepAlive renews sess's lease again, if it has not yet expired.
func (s *Store) ResumeKeepAlive(sess metadata.Session) {
	ss := sess.(*session)
	s.mu.Lock()
	ss.suspended = false
	ss.stopExpiryLocked()
	s.mu.Unlock()
}

// stopExpiryLocked stops the suspended lease's timer.
// REQUIRES: Store.mu held.
func (ss *session) stopExpiryLocked() {
	if ss.expiry != nil {
		ss.expiry.Stop()
		ss.expiry = nil
	}
}

// ExpireSession expires sess's lease now, removing what is under it.
func (s *Store) ExpireSession(sess metadata.Session) {
	s.mu.Lock()
	s.expireLocked(sess.(*session))
	s.mu.Unlock()
}

// ExpireLeases expires every suspended lease whose TTL has passed on the
// clock. Every operation calls it, and so does a suspended lease's timer.
func (s *Store) ExpireLeases() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for ss := range s.mu.sessions {
		if ss.suspended && !now.Before(ss.suspendedAt.Add(ss.ttl)) {
			s.expireLocked(ss)
		}
	}
}

func (s *Store) expireLocked(ss *session) {
	if ss.expired {
		return
	}
	ss.expired = true
	ss.stopExpiryLocked()
	delete(s.mu.sessions, ss)
	changed := false
	for _, m := range []map[metadata.BookieID]*session{s.mu.writable, s.mu.readOnly} {
		for id, owner := range m {
			if owner == ss {
				delete(m, id)
				changed = true
			}
		}
	}
	if changed {
		s.nextRevLocked()
		s.notifyBookiesLocked()
	}
	s.arExpireLocked(ss)
	close(ss.done)
}

func (ss *session) Done() <-chan struct{} { return ss.done }

func (ss *session) Close(context.Context) error {
	ss.s.mu.Lock()
	ss.s.expireLocked(ss)
	ss.s.mu.Unlock()
	ss.d.mu.Lock()
	delete(ss.d.mu.sessions, ss)
	ss.d.mu.Unlock()
	return nil
}

func (ss *session) RegisterBookie(ctx context.Context, id metadata.BookieID, readOnly bool) error {
	if err := metadata.ValidateBookieID(id); err != nil {
		return err
	}
	key := ss.s.bookieKey(id, readOnly)
	if err := ss.d.begin(ctx, OpRegisterBookie, key); err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	if ss.expired {
		s.mu.Unlock()
		return metadata.ErrSessionExpired
	}
	target, other := s.mu.writable, s.mu.readOnly
	if readOnly {
		target, other = other, target
	}
	if owner, ok := target[id]; ok && owner != ss {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", metadata.ErrBookieRegistered, key)
	}
	_, had := target[id]
	_, hadOther := other[id]
	target[id] = ss
	delete(other, id)
	if !had || hadOther {
		s.nextRevLocked()
		s.notifyBookiesLocked()
	}
	s.mu.Unlock()
	return s.end(ctx, OpRegisterBookie, key, nil)
}

func (ss *session) UnregisterBookie(ctx context.Context, id metadata.BookieID, readOnly bool) error {
	key := ss.s.bookieKey(id, readOnly)
	if err := ss.d.begin(ctx, OpUnregisterBookie, key); err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	m := s.mu.writable
	if readOnly {
		m = s.mu.readOnly
	}
	if _, ok := m[id]; ok {
		delete(m, id)
		s.nextRevLocked()
		s.notifyBookiesLocked()
	}
	s.mu.Unlock()
	return s.end(ctx, OpUnregisterBookie, key, nil)
}

// WritableBookies implements metadata.Registration.
func (d *Driver) WritableBookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.begin(ctx, OpListBookies, d.s.scope+"/bookies/writable/"); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	return sortedIDs(d.s.mu.writable), nil
}

// ReadBookieServiceInfo implements metadata.ServiceInfoReader: the info of
// the session holding the bookie's registration (writable first).
func (d *Driver) ReadBookieServiceInfo(ctx context.Context, id metadata.BookieID) (metadata.BookieServiceInfo, error) {
	if err := d.begin(ctx, OpListBookies, d.s.bookieKey(id, false)); err != nil {
		return metadata.BookieServiceInfo{}, err
	}
	d.s.mu.Lock()
	owner, ok := d.s.mu.writable[id]
	if !ok {
		owner, ok = d.s.mu.readOnly[id]
	}
	d.s.mu.Unlock()
	switch {
	case !ok:
		return metadata.BookieServiceInfo{}, fmt.Errorf("bookie %s: %w: not registered", id, metadata.ErrNotFound)
	case owner.info == nil:
		return metadata.DecodeRegistrationValue(d.s.bookieKey(id, false), id, nil)
	}
	// A copy through the codec, so the caller owns what it gets.
	b, err := metadata.EncodeBookieServiceInfo(*owner.info)
	if err != nil {
		return metadata.BookieServiceInfo{}, err
	}
	return metadata.DecodeBookieServiceInfo(b)
}

// ReadOnlyBookies implements metadata.Registration.
func (d *Driver) ReadOnlyBookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.begin(ctx, OpListBookies, d.s.scope+"/bookies/readonly/"); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	return sortedIDs(d.s.mu.readOnly), nil
}

// WatchBookies implements metadata.Registration.
func (d *Driver) WatchBookies(ctx context.Context) (<-chan metadata.BookiesEvent, error) {
	if err := d.begin(ctx, OpWatchBookies, d.s.scope+"/bookies/"); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	w := newWatcher(ctx, d.stop, func(ev metadata.BookiesEvent) bool { return ev.Err != nil })
	w.push(d.s.bookiesEventLocked())
	d.s.mu.bookieWatchers = append(d.s.mu.bookieWatchers, w)
	return w.out, nil
}

// ---- cookies ----

// ReadCookie implements metadata.Cookies.
func (d *Driver) ReadCookie(ctx context.Context, id metadata.BookieID) ([]byte, metadata.Version, error) {
	key := d.s.cookieKey(id)
	if err := d.begin(ctx, OpReadCookie, key); err != nil {
		return nil, 0, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	e, ok := d.s.mu.cookies[id]
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s", metadata.ErrNoSuchCookie, key)
	}
	return append([]byte{}, e.value...), e.ver, nil
}

// WriteCookie implements metadata.Cookies.
func (d *Driver) WriteCookie(ctx context.Context, id metadata.BookieID, data []byte, expected metadata.Version) (metadata.Version, error) {
	if err := metadata.ValidateBookieID(id); err != nil {
		return 0, err
	}
	key := d.s.cookieKey(id)
	if err := d.begin(ctx, OpWriteCookie, key); err != nil {
		return 0, err
	}
	d.s.mu.Lock()
	e, ok := d.s.mu.cookies[id]
	var err error
	switch {
	case expected == metadata.VersionNew && ok:
		err = fmt.Errorf("%w: %s", metadata.ErrCookieExists, key)
	case expected != metadata.VersionNew && !ok:
		err = fmt.Errorf("%w: %s", metadata.ErrNoSuchCookie, key)
	case ok && e.ver != expected:
		err = fmt.Errorf("%w: %s: expected %d, stored %d", metadata.ErrBadVersion, key, expected, e.ver)
	}
	if err != nil {
		d.s.mu.Unlock()
		return 0, err
	}
	v := d.s.nextRevLocked()
	d.s.mu.cookies[id] = &kv{value: append([]byte{}, data...), ver: v}
	d.s.mu.Unlock()
	return v, d.s.end(ctx, OpWriteCookie, key, nil)
}

// DeleteCookie implements metadata.Cookies.
func (d *Driver) DeleteCookie(ctx context.Context, id metadata.BookieID, expected metadata.Version) error {
	key := d.s.cookieKey(id)
	if err := d.begin(ctx, OpDeleteCookie, key); err != nil {
		return err
	}
	d.s.mu.Lock()
	e, ok := d.s.mu.cookies[id]
	switch {
	case !ok:
		d.s.mu.Unlock()
		return fmt.Errorf("%w: %s", metadata.ErrNoSuchCookie, key)
	case expected != metadata.VersionAny && e.ver != expected:
		d.s.mu.Unlock()
		return fmt.Errorf("%w: %s: expected %d, stored %d", metadata.ErrBadVersion, key, expected, e.ver)
	}
	delete(d.s.mu.cookies, id)
	d.s.nextRevLocked()
	d.s.mu.Unlock()
	return d.s.end(ctx, OpDeleteCookie, key, nil)
}

// ListCookies implements metadata.Cookies.
func (d *Driver) ListCookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.begin(ctx, OpListCookies, d.s.scope+"/cookies/"); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	return sortedIDs(d.s.mu.cookies), nil
}

// ---- cluster ----

// InitNewCluster implements metadata.Cluster.
func (d *Driver) InitNewCluster(ctx context.Context) (string, error) {
	if err := d.begin(ctx, OpInitCluster, d.s.scope); err != nil {
		return "", err
	}
	instanceID, err := d.s.newInstanceID()
	if err != nil {
		return "", err
	}
	d.s.mu.Lock()
	if d.s.mu.cluster != nil {
		d.s.mu.Unlock()
		return "", fmt.Errorf("%w: %s", metadata.ErrClusterExists, d.s.scope)
	}
	d.s.mu.cluster = &clusterInfo{instanceID: instanceID, layout: Layout}
	d.s.nextRevLocked()
	d.s.mu.Unlock()
	return instanceID, d.s.end(ctx, OpInitCluster, d.s.scope, nil)
}

// Format implements metadata.Cluster.
func (d *Driver) Format(ctx context.Context, force bool) (string, error) {
	if err := d.begin(ctx, OpFormat, d.s.scope); err != nil {
		return "", err
	}
	instanceID, err := d.s.newInstanceID()
	if err != nil {
		return "", err
	}
	s := d.s
	s.mu.Lock()
	switch {
	case s.mu.cluster != nil && !force:
		s.mu.Unlock()
		return "", fmt.Errorf("%w: %s (format with force to wipe it)", metadata.ErrClusterExists, s.scope)
	case len(s.mu.writable)+len(s.mu.readOnly) > 0:
		s.mu.Unlock()
		return "", fmt.Errorf("%w: %d writable, %d read-only", metadata.ErrBookiesRegistered, len(s.mu.writable), len(s.mu.readOnly))
	}
	ids := make([]int64, 0, len(s.mu.ledgers))
	for id := range s.mu.ledgers {
		ids = append(ids, id)
	}
	s.mu.ledgers = map[int64]*kv{}
	for _, id := range ids {
		s.notifyLedgerLocked(id) // watchers see the delete
	}
	s.mu.cookies = map[metadata.BookieID]*kv{}
	s.mu.buckets = [numBuckets]int64{}
	s.arFormatLocked()
	s.mu.cluster = &clusterInfo{instanceID: instanceID, layout: Layout}
	s.nextRevLocked()
	s.mu.Unlock()
	return instanceID, s.end(ctx, OpFormat, s.scope, nil)
}

// ReadInstanceID implements metadata.Cluster.
func (d *Driver) ReadInstanceID(ctx context.Context) (string, error) {
	c, err := d.readCluster(ctx, "/instanceid")
	if err != nil {
		return "", err
	}
	return c.instanceID, nil
}

// ReadLayout implements metadata.Cluster.
func (d *Driver) ReadLayout(ctx context.Context) (string, error) {
	c, err := d.readCluster(ctx, "/layout")
	if err != nil {
		return "", err
	}
	return c.layout, nil
}

func (d *Driver) readCluster(ctx context.Context, suffix string) (clusterInfo, error) {
	if err := d.begin(ctx, OpReadCluster, d.s.scope+suffix); err != nil {
		return clusterInfo{}, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if d.s.mu.cluster == nil {
		return clusterInfo{}, fmt.Errorf("%w: %s", metadata.ErrNoCluster, d.s.scope)
	}
	return *d.s.mu.cluster, nil
}
