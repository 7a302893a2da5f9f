package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// AutoRecovery operations, as passed to a Hook.
const (
	OpUnderReplication Op = "UnderReplication" // records, locks, switch, delay, check times
	OpAuditorElection  Op = "AuditorElection"
)

var _ metadata.AutoRecoveryDriver = (*Driver)(nil)

// arState is the AutoRecovery part of a Store, guarded by Store.mu. The
// zero value is empty (replication enabled, no delay set).
type arState struct {
	records       map[int64]*urRecord
	locks         map[int64]*memLock
	disabled      bool
	delaySet      bool
	delay         time.Duration
	delayWatchers []*watcher[metadata.DelayEvent]
	// candidates is the election queue; candidates[0] is the auditor.
	candidates []*candidate
	// checkTimes are the stored values of the periodic checks' last
	// completion times (metadata.EncodeCheckTime's bytes, or planted raw
	// by PutCheckTimeRaw); absent: never.
	checkTimes map[metadata.PeriodicCheck][]byte
}

type urRecord struct {
	missing []metadata.BookieID
	ctime   time.Time
	ver     metadata.Version
}

// memLock is a held lock or an election candidacy: done closes when it ends.
type memLock struct {
	s     *Store
	ss    *session
	owner metadata.BookieID // the under-replication lock's value
	done  chan struct{}
	once  sync.Once
	// release removes the lock from the store; called under Store.mu.
	release func()
}

type candidate struct {
	lock    *memLock
	id      metadata.BookieID
	elected chan struct{}
}

func (l *memLock) endLocked() {
	l.once.Do(func() {
		l.release()
		close(l.done)
	})
}

func (l *memLock) Done() <-chan struct{} { return l.done }

func (l *memLock) Unlock(context.Context) error {
	l.s.mu.Lock()
	l.endLocked()
	l.s.mu.Unlock()
	return nil
}

func (s *Store) urKey(id int64) string {
	return fmt.Sprintf("%s/underreplication/ledgers/00000000-0000-0000-%04x-%012x", s.scope, uint64(id)>>48, uint64(id)&(1<<48-1))
}

// arExpireLocked ends what the session held: locks and candidacies.
func (s *Store) arExpireLocked(ss *session) {
	for _, l := range s.mu.ar.locks {
		if l.ss == ss {
			l.endLocked()
		}
	}
	for _, c := range slices.Clone(s.mu.ar.candidates) {
		if c.lock.ss == ss {
			c.lock.endLocked()
		}
	}
}

// arFormatLocked wipes AutoRecovery state (Format). Sessions stay; their
// locks and candidacies end.
func (s *Store) arFormatLocked() {
	for _, l := range s.mu.ar.locks {
		l.endLocked()
	}
	for _, c := range slices.Clone(s.mu.ar.candidates) {
		c.lock.endLocked()
	}
	watchers := s.mu.ar.delayWatchers
	s.mu.ar = arState{delayWatchers: watchers}
	s.notifyDelayLocked()
}

func (s *Store) notifyDelayLocked() {
	ev := metadata.DelayEvent{Delay: s.mu.ar.delay, Set: s.mu.ar.delaySet}
	live := s.mu.ar.delayWatchers[:0]
	for _, w := range s.mu.ar.delayWatchers {
		if w.push(ev) {
			live = append(live, w)
		}
	}
	s.mu.ar.delayWatchers = live
}

func sortedUnion(a, b []metadata.BookieID) []metadata.BookieID {
	m := append(slices.Clone(a), b...)
	slices.Sort(m)
	return slices.Compact(m)
}

// MarkLedgerUnderReplicated implements metadata.UnderReplication.
func (d *Driver) MarkLedgerUnderReplicated(ctx context.Context, ledgerID int64, missing []metadata.BookieID) error {
	if err := checkID(ledgerID); err != nil {
		return err
	}
	for _, m := range missing {
		if err := metadata.ValidateBookieID(m); err != nil {
			return err
		}
	}
	key := d.s.urKey(ledgerID)
	if err := d.begin(ctx, OpUnderReplication, key); err != nil {
		return err
	}
	s := d.s
	s.mu.Lock()
	if s.mu.ar.records == nil {
		s.mu.ar.records = map[int64]*urRecord{}
	}
	r := s.mu.ar.records[ledgerID]
	switch {
	case r == nil:
		s.mu.ar.records[ledgerID] = &urRecord{missing: sortedUnion(nil, missing), ctime: s.clock.Now(), ver: s.nextRevLocked()}
	default:
		merged := sortedUnion(r.missing, missing)
		if !slices.Equal(merged, r.missing) {
			s.mu.ar.records[ledgerID] = &urRecord{missing: merged, ctime: r.ctime, ver: s.nextRevLocked()}
		}
	}
	s.mu.Unlock()
	return s.end(ctx, OpUnderReplication, key, nil)
}

func (r *urRecord) export(id int64) metadata.UnderReplicatedLedger {
	return metadata.UnderReplicatedLedger{LedgerID: id, MissingReplicas: slices.Clone(r.missing), Ctime: r.ctime, Version: r.ver}
}

// ReadUnderReplicatedLedger implements metadata.UnderReplication.
func (d *Driver) ReadUnderReplicatedLedger(ctx context.Context, ledgerID int64) (metadata.UnderReplicatedLedger, error) {
	if err := checkID(ledgerID); err != nil {
		return metadata.UnderReplicatedLedger{}, err
	}
	if err := d.begin(ctx, OpUnderReplication, d.s.urKey(ledgerID)); err != nil {
		return metadata.UnderReplicatedLedger{}, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	r := d.s.mu.ar.records[ledgerID]
	if r == nil {
		return metadata.UnderReplicatedLedger{}, fmt.Errorf("under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	return r.export(ledgerID), nil
}

// ListUnderReplicatedLedgers implements metadata.UnderReplication.
func (d *Driver) ListUnderReplicatedLedgers(ctx context.Context, startID int64, limit int) ([]metadata.UnderReplicatedLedger, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("ListUnderReplicatedLedgers: limit %d must be > 0", limit)
	}
	if err := d.begin(ctx, OpUnderReplication, ""); err != nil {
		return nil, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	var ids []int64
	for id := range d.s.mu.ar.records {
		if id >= startID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]metadata.UnderReplicatedLedger, 0, len(ids))
	for _, id := range ids {
		out = append(out, d.s.mu.ar.records[id].export(id))
	}
	return out, nil
}

// MarkLedgerReplicated implements metadata.UnderReplication.
func (d *Driver) MarkLedgerReplicated(ctx context.Context, ledgerID int64, expected metadata.Version) error {
	if err := checkID(ledgerID); err != nil {
		return err
	}
	key := d.s.urKey(ledgerID)
	if err := d.begin(ctx, OpUnderReplication, key); err != nil {
		return err
	}
	s := d.s
	s.mu.Lock()
	if l := s.mu.ar.locks[ledgerID]; l != nil {
		l.endLocked()
	}
	r := s.mu.ar.records[ledgerID]
	var err error
	switch {
	case r == nil:
		err = fmt.Errorf("under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	case r.ver != expected:
		err = fmt.Errorf("clear under-replicated ledger %d at version %d (stored %d): %w", ledgerID, expected, r.ver, metadata.ErrBadVersion)
	default:
		delete(s.mu.ar.records, ledgerID)
		s.nextRevLocked()
	}
	s.mu.Unlock()
	return s.end(ctx, OpUnderReplication, key, err)
}

func (d *Driver) memSession(s metadata.Session) (*session, error) {
	ss, ok := s.(*session)
	if !ok || ss.s != d.s {
		return nil, fmt.Errorf("memory: session %T is not one of this store's", s)
	}
	return ss, nil
}

// LockUnderReplicatedLedger implements metadata.UnderReplication.
func (d *Driver) LockUnderReplicatedLedger(ctx context.Context, sess metadata.Session, ledgerID int64, owner metadata.BookieID) (metadata.Lock, error) {
	if err := checkID(ledgerID); err != nil {
		return nil, err
	}
	ss, err := d.memSession(sess)
	if err != nil {
		return nil, err
	}
	key := d.s.urKey(ledgerID)
	if err := d.begin(ctx, OpUnderReplication, key); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ss.expired:
		return nil, metadata.ErrSessionExpired
	case s.mu.ar.records[ledgerID] == nil:
		return nil, fmt.Errorf("lock under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	case s.mu.ar.locks[ledgerID] != nil:
		return nil, fmt.Errorf("lock under-replicated ledger %d: %w", ledgerID, metadata.ErrLocked)
	}
	if s.mu.ar.locks == nil {
		s.mu.ar.locks = map[int64]*memLock{}
	}
	l := &memLock{s: s, ss: ss, owner: owner, done: make(chan struct{})}
	l.release = func() {
		if s.mu.ar.locks[ledgerID] == l {
			delete(s.mu.ar.locks, ledgerID)
		}
	}
	s.mu.ar.locks[ledgerID] = l
	s.nextRevLocked()
	return l, nil
}

// ReplicationWorker implements metadata.ReplicationWorkerReader.
func (d *Driver) ReplicationWorker(ctx context.Context, ledgerID int64) (metadata.BookieID, error) {
	if err := d.begin(ctx, OpUnderReplication, fmt.Sprintf("%s/underreplication/locks/%d", d.s.scope, ledgerID)); err != nil {
		return "", err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.mu.ar.locks[ledgerID]; l != nil {
		return l.owner, nil
	}
	return "", fmt.Errorf("lock of under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
}

// SetReplicationEnabled implements metadata.UnderReplication.
func (d *Driver) SetReplicationEnabled(ctx context.Context, enabled bool) error {
	if err := d.begin(ctx, OpUnderReplication, d.s.scope+"/underreplication/disable"); err != nil {
		return err
	}
	d.s.mu.Lock()
	d.s.mu.ar.disabled = !enabled
	d.s.nextRevLocked()
	d.s.mu.Unlock()
	return nil
}

// ReplicationEnabled implements metadata.UnderReplication.
func (d *Driver) ReplicationEnabled(ctx context.Context) (bool, error) {
	if err := d.begin(ctx, OpUnderReplication, d.s.scope+"/underreplication/disable"); err != nil {
		return false, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	return !d.s.mu.ar.disabled, nil
}

const delayKey = "/underreplication/lostBookieRecoveryDelay"

// SetLostBookieRecoveryDelay implements metadata.UnderReplication.
func (d *Driver) SetLostBookieRecoveryDelay(ctx context.Context, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("lost bookie recovery delay %v must not be negative", delay)
	}
	if err := d.begin(ctx, OpUnderReplication, d.s.scope+delayKey); err != nil {
		return err
	}
	s := d.s
	s.mu.Lock()
	s.mu.ar.delay, s.mu.ar.delaySet = delay, true
	s.nextRevLocked()
	s.notifyDelayLocked()
	s.mu.Unlock()
	return s.end(ctx, OpUnderReplication, s.scope+delayKey, nil)
}

// LostBookieRecoveryDelay implements metadata.UnderReplication.
func (d *Driver) LostBookieRecoveryDelay(ctx context.Context) (time.Duration, error) {
	if err := d.begin(ctx, OpUnderReplication, d.s.scope+delayKey); err != nil {
		return 0, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if !d.s.mu.ar.delaySet {
		return 0, fmt.Errorf("lost bookie recovery delay: %w", metadata.ErrNotFound)
	}
	return d.s.mu.ar.delay, nil
}

// WatchLostBookieRecoveryDelay implements metadata.UnderReplication.
func (d *Driver) WatchLostBookieRecoveryDelay(ctx context.Context) (<-chan metadata.DelayEvent, error) {
	if err := d.begin(ctx, OpUnderReplication, d.s.scope+delayKey); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w := newWatcher(ctx, d.stop, func(ev metadata.DelayEvent) bool { return ev.Err != nil })
	w.push(metadata.DelayEvent{Delay: s.mu.ar.delay, Set: s.mu.ar.delaySet})
	s.mu.ar.delayWatchers = append(s.mu.ar.delayWatchers, w)
	return w.out, nil
}

func (s *Store) checkTimeKey(check metadata.PeriodicCheck) string {
	return s.scope + "/underreplication/" + check.Node()
}

// SetLastCheckTime implements metadata.UnderReplication. The value is
// kept encoded, as the etcd driver stores it.
func (d *Driver) SetLastCheckTime(ctx context.Context, check metadata.PeriodicCheck, completed time.Time) error {
	value, err := metadata.EncodeCheckTime(check, completed)
	if err != nil {
		return err
	}
	s := d.s
	key := s.checkTimeKey(check)
	if err := d.begin(ctx, OpUnderReplication, key); err != nil {
		return err
	}
	s.mu.Lock()
	s.putCheckTimeLocked(check, value)
	s.mu.Unlock()
	return s.end(ctx, OpUnderReplication, key, nil)
}

func (s *Store) putCheckTimeLocked(check metadata.PeriodicCheck, value []byte) {
	if s.mu.ar.checkTimes == nil {
		s.mu.ar.checkTimes = map[metadata.PeriodicCheck][]byte{}
	}
	s.mu.ar.checkTimes[check] = value
	s.nextRevLocked()
}

// LastCheckTime implements metadata.UnderReplication.
func (d *Driver) LastCheckTime(ctx context.Context, check metadata.PeriodicCheck) (time.Time, error) {
	if err := check.Validate(); err != nil {
		return time.Time{}, err
	}
	key := d.s.checkTimeKey(check)
	if err := d.begin(ctx, OpUnderReplication, key); err != nil {
		return time.Time{}, err
	}
	d.s.mu.Lock()
	value, ok := d.s.mu.ar.checkTimes[check]
	d.s.mu.Unlock()
	if !ok {
		return time.Time{}, nil
	}
	t, err := metadata.DecodeCheckTime(check, value)
	if err != nil {
		return time.Time{}, metadata.Corrupt(key, err)
	}
	return t, nil
}

// PutCheckTimeRaw stores value as check's last completion time without
// validation (metadatatest.CheckTimeRawWriter): for planting corrupt
// values. It returns the key.
func (s *Store) PutCheckTimeRaw(_ context.Context, check metadata.PeriodicCheck, value []byte) (string, error) {
	if err := check.Validate(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putCheckTimeLocked(check, append([]byte{}, value...))
	return s.checkTimeKey(check), nil
}

// CampaignAuditor implements metadata.AuditorElection: candidates queue in
// arrival order; the first is the auditor until its session ends or it
// resigns.
func (d *Driver) CampaignAuditor(ctx context.Context, sess metadata.Session, candidateID metadata.BookieID) (metadata.Lock, error) {
	ss, err := d.memSession(sess)
	if err != nil {
		return nil, err
	}
	if err := d.begin(ctx, OpAuditorElection, d.s.scope+"/underreplication/auditorelection"); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	if ss.expired {
		s.mu.Unlock()
		return nil, metadata.ErrSessionExpired
	}
	c := &candidate{id: candidateID, elected: make(chan struct{})}
	c.lock = &memLock{s: s, ss: ss, done: make(chan struct{})}
	c.lock.release = func() {
		i := slices.Index(s.mu.ar.candidates, c)
		if i < 0 {
			return
		}
		s.mu.ar.candidates = slices.Delete(s.mu.ar.candidates, i, i+1)
		if i == 0 && len(s.mu.ar.candidates) > 0 {
			close(s.mu.ar.candidates[0].elected)
		}
	}
	s.mu.ar.candidates = append(s.mu.ar.candidates, c)
	if len(s.mu.ar.candidates) == 1 {
		close(c.elected)
	}
	s.mu.Unlock()

	select {
	case <-c.elected:
		return c.lock, nil
	case <-c.lock.done: // session ended
		return nil, metadata.ErrSessionExpired
	case <-ctx.Done():
	case <-d.stop:
	}
	s.mu.Lock()
	c.lock.endLocked()
	s.mu.Unlock()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, metadata.ErrClosed
}

// Auditor implements metadata.AuditorElection.
func (d *Driver) Auditor(ctx context.Context) (metadata.BookieID, error) {
	if err := d.begin(ctx, OpAuditorElection, d.s.scope+"/underreplication/auditorelection"); err != nil {
		return "", err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if len(d.s.mu.ar.candidates) == 0 {
		return "", fmt.Errorf("auditor: %w", metadata.ErrNotFound)
	}
	return d.s.mu.ar.candidates[0].id, nil
}
