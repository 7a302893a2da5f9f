package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/foliodb/folio/internal/metadata"
)

// AutoRecovery keys, all under `<scope>/underreplication/` (doc.go).
const (
	urLedgersNode  = "ledgers"
	urLocksNode    = "locks"
	urElectionNode = "auditorelection"
	urDisableNode  = "disable"
	urSwitchNode   = "replicationswitch"
	urDelayNode    = "lostBookieRecoveryDelay"
)

var _ metadata.AutoRecoveryDriver = (*Driver)(nil)

func (k keys) urRecords() string        { return k.underReplication + "/" + urLedgersNode }
func (k keys) urLocks() string          { return k.underReplication + "/" + urLocksNode }
func (k keys) urElection() string       { return k.underReplication + "/" + urElectionNode }
func (k keys) urDisable() string        { return k.underReplication + "/" + urDisableNode }
func (k keys) urSwitch() string         { return k.underReplication + "/" + urSwitchNode }
func (k keys) urDelay() string          { return k.underReplication + "/" + urDelayNode }
func (k keys) urRecord(id int64) string { return k.urRecords() + "/" + LedgerUUID(id) }
func (k keys) urLock(id int64) string   { return k.urLocks() + "/" + LedgerUUID(id) }

// urCheckTime is the key of a periodic check's last completion time
// (check.Node(), Java's ZooKeeper node names); "" for an unknown check.
func (k keys) urCheckTime(check metadata.PeriodicCheck) string {
	if check.Validate() != nil {
		return ""
	}
	return k.underReplication + "/" + check.Node()
}

func (d *Driver) parseRecord(id int64, kv *mvccpb.KeyValue) (metadata.UnderReplicatedLedger, error) {
	missing, ctime, err := metadata.DecodeUnderReplicated(kv.Value)
	if err != nil {
		return metadata.UnderReplicatedLedger{}, metadata.Corrupt(string(kv.Key), err)
	}
	return metadata.UnderReplicatedLedger{LedgerID: id, MissingReplicas: missing, Ctime: ctime, Version: metadata.Version(kv.ModRevision)}, nil
}

// MarkLedgerUnderReplicated implements metadata.UnderReplication: a CAS
// loop that creates the record or merges missing into it. A record that
// already lists every missing bookie is not rewritten (its version stays,
// so a worker repairing it can still clear it).
func (d *Driver) MarkLedgerUnderReplicated(ctx context.Context, ledgerID int64, missing []metadata.BookieID) error {
	if err := checkLedgerID(ledgerID); err != nil {
		return err
	}
	for _, m := range missing {
		if err := checkBookieID(m); err != nil {
			return err
		}
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	key := d.k.urRecord(ledgerID)
	for {
		resp, err := d.get(ctx, "read "+key, key)
		if err != nil {
			return err
		}
		var cmp clientv3.Cmp
		var value string
		if len(resp.Kvs) == 0 {
			m := slices.Clone(missing)
			slices.Sort(m)
			value = metadata.EncodeUnderReplicated(slices.Compact(m), time.Now())
			cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		} else {
			rec, err := d.parseRecord(ledgerID, resp.Kvs[0])
			if err != nil {
				return err
			}
			merged := append(slices.Clone(rec.MissingReplicas), missing...)
			slices.Sort(merged)
			merged = slices.Compact(merged)
			if slices.Equal(merged, rec.MissingReplicas) {
				return nil
			}
			value = metadata.EncodeUnderReplicated(merged, rec.Ctime)
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
		}
		// A retried txn after one that was applied fails its comparison,
		// and the loop then finds the bookies listed.
		var done bool
		err = d.do(ctx, "mark "+key, func(ctx context.Context, _ bool) error {
			tr, err := d.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, value)).Commit()
			if err != nil {
				return d.storeErr("mark "+key, err)
			}
			done = tr.Succeeded
			return nil
		})
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// ReadUnderReplicatedLedger implements metadata.UnderReplication.
func (d *Driver) ReadUnderReplicatedLedger(ctx context.Context, ledgerID int64) (metadata.UnderReplicatedLedger, error) {
	if err := checkLedgerID(ledgerID); err != nil {
		return metadata.UnderReplicatedLedger{}, err
	}
	if err := d.checkOpen(); err != nil {
		return metadata.UnderReplicatedLedger{}, err
	}
	key := d.k.urRecord(ledgerID)
	resp, err := d.get(ctx, "read "+key, key)
	if err != nil {
		return metadata.UnderReplicatedLedger{}, err
	}
	if len(resp.Kvs) == 0 {
		return metadata.UnderReplicatedLedger{}, fmt.Errorf("under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	return d.parseRecord(ledgerID, resp.Kvs[0])
}

// ListUnderReplicatedLedgers implements metadata.UnderReplication.
func (d *Driver) ListUnderReplicatedLedgers(ctx context.Context, startID int64, limit int) ([]metadata.UnderReplicatedLedger, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("ListUnderReplicatedLedgers: limit %d must be > 0", limit)
	}
	if startID < 0 {
		startID = 0
	}
	if startID > metadata.MaxLedgerID {
		return nil, nil
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	dir := d.k.urRecords()
	resp, err := d.get(ctx, "list "+dir, d.k.urRecord(startID), clientv3.WithRange(prefixEnd(dir)),
		clientv3.WithLimit(int64(limit)), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := make([]metadata.UnderReplicatedLedger, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, err := ParseLedgerUUID(strings.TrimPrefix(string(kv.Key), dir+"/"))
		if err != nil {
			return nil, metadata.Corrupt(string(kv.Key), err)
		}
		rec, err := d.parseRecord(id, kv)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// MarkLedgerReplicated implements metadata.UnderReplication: `if
// mod_revision(record) == expected then delete record, release lock else
// get record, release lock`, where releasing the lock deletes it only if it
// is the lock read before the first attempt (`create_revision(lock) ==
// read`, a nested txn). Releasing "whatever lock is there" could, applied
// late (retry.go), delete a lock another worker took after this call: two
// workers would then repair the ledger at once. A lock taken after the read
// is not the one the caller meant to release.
func (d *Driver) MarkLedgerReplicated(ctx context.Context, ledgerID int64, expected metadata.Version) error {
	if err := checkLedgerID(ledgerID); err != nil {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	key, lock := d.k.urRecord(ledgerID), d.k.urLock(ledgerID)
	resp, err := d.get(ctx, "read "+lock, lock, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	var held int64 // the lock's create revision; 0: none
	if len(resp.Kvs) == 1 {
		held = resp.Kvs[0].CreateRevision
	}
	return d.do(ctx, "clear "+key, func(ctx context.Context, retried bool) error {
		return d.clearOnce(ctx, ledgerID, expected, held, retried)
	})
}

// clearOnce is one attempt of MarkLedgerReplicated; held is the create
// revision of the lock to release (0: none).
func (d *Driver) clearOnce(ctx context.Context, ledgerID int64, expected metadata.Version, held int64, retried bool) error {
	key, lock := d.k.urRecord(ledgerID), d.k.urLock(ledgerID)
	var release []clientv3.Op
	if held != 0 {
		release = append(release, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lock), "=", held)},
			[]clientv3.Op{clientv3.OpDelete(lock)}, nil))
	}
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(expected))).
		Then(append([]clientv3.Op{clientv3.OpDelete(key)}, release...)...).
		Else(append([]clientv3.Op{clientv3.OpGet(key, clientv3.WithCountOnly())}, release...)...).
		Commit()
	if err != nil {
		return d.storeErr("clear "+key, err)
	}
	if resp.Succeeded {
		return nil
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 {
		if retried {
			return nil // cleared: by our earlier attempt, or by someone else
		}
		return fmt.Errorf("under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	return fmt.Errorf("clear under-replicated ledger %d at version %d: %w", ledgerID, expected, metadata.ErrBadVersion)
}

func (d *Driver) etcdSession(s metadata.Session) (*session, error) {
	ss, ok := s.(*session)
	if !ok || ss.d != d {
		return nil, fmt.Errorf("etcd: session %T is not one of this driver's", s)
	}
	if ss.expired() {
		return nil, fmt.Errorf("lease %x: %w", int64(ss.lease), metadata.ErrSessionExpired)
	}
	return ss, nil
}

// LockUnderReplicatedLedger implements metadata.UnderReplication: `if
// create_revision(record) > 0 and create_revision(lock) == 0 then put(lock,
// owner, lease)`.
func (d *Driver) LockUnderReplicatedLedger(ctx context.Context, s metadata.Session, ledgerID int64, owner metadata.BookieID) (metadata.Lock, error) {
	if err := checkLedgerID(ledgerID); err != nil {
		return nil, err
	}
	ss, err := d.etcdSession(s)
	if err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	lock := d.k.urLock(ledgerID)
	var rev int64
	err = d.do(ctx, "lock "+lock, func(ctx context.Context, retried bool) (err error) {
		rev, err = d.lockOnce(ctx, ss, ledgerID, owner, retried)
		return err
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		ss.stopKA()
		ss.markDone()
		return nil, fmt.Errorf("lock %s: %w", lock, metadata.ErrSessionExpired)
	}
	if errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrLocked) {
		return nil, err
	}
	if err != nil {
		return nil, d.storeErr("lock "+lock, err)
	}
	ss.noteLock(lock, rev)
	l, err := d.newKeyLock(ss, lock, rev, nil, nil, func() { ss.forgetLock(lock, rev) })
	if err != nil {
		ss.forgetLock(lock, rev)
		return nil, err
	}
	return l, nil
}

// lockOnce is one attempt of LockUnderReplicatedLedger; it returns the
// lock key's create revision. Etcd errors are returned unwrapped.
//
// A lock held by this session's lease is this call's own (an earlier
// attempt applied although it failed) only on a retried attempt, with our
// owner, and if the session has not handed that lock out before: a lock
// this session took and has not released (its Unlock failed) is refused
// like any held lock (metadata's contract: a session's locks are not
// re-entrant). Its holder should end the session, which releases it.
func (d *Driver) lockOnce(ctx context.Context, ss *session, ledgerID int64, owner metadata.BookieID, retried bool) (int64, error) {
	key, lock := d.k.urRecord(ledgerID), d.k.urLock(ledgerID)
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0), clientv3.Compare(clientv3.CreateRevision(lock), "=", 0)).
		Then(clientv3.OpPut(lock, string(owner), clientv3.WithLease(ss.lease))).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly()), clientv3.OpGet(lock)).
		Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	cur := firstKV(resp, 1)
	ours := cur != nil && cur.Lease == int64(ss.lease)
	if ours && retried && string(cur.Value) == string(owner) && !ss.handedOut(lock, cur.CreateRevision) {
		return cur.CreateRevision, nil // our earlier attempt took it
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return 0, fmt.Errorf("lock under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	switch {
	case ours:
		return 0, fmt.Errorf("lock under-replicated ledger %d: %w: by this session (lease %x) for %q since revision %d, not released",
			ledgerID, metadata.ErrLocked, int64(ss.lease), cur.Value, cur.CreateRevision)
	case cur != nil:
		return 0, fmt.Errorf("lock under-replicated ledger %d: %w: by %q under another session (lease %x)",
			ledgerID, metadata.ErrLocked, cur.Value, cur.Lease)
	}
	return 0, fmt.Errorf("lock under-replicated ledger %d: %w", ledgerID, metadata.ErrLocked)
}

// keyLock is a held key under a session: Done closes when the session ends,
// the key is deleted (by anyone) or Unlock is called.
type keyLock struct {
	d        *Driver
	key      string
	rev      int64 // the key's create revision
	done     chan struct{}
	once     sync.Once
	stop     context.CancelFunc
	onUnlock func(ctx context.Context) error
	release  func() // once, when the lock ends (nil: nothing)
	gone     func() // when the key is known deleted (nil: nothing)
}

func (d *Driver) newKeyLock(ss *session, key string, rev int64, onUnlock func(ctx context.Context) error, release, gone func()) (*keyLock, error) {
	if gone == nil {
		gone = func() {}
	}
	l := &keyLock{d: d, key: key, rev: rev, done: make(chan struct{}), onUnlock: onUnlock, release: release, gone: gone}
	wctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	err := d.goWatch(wctx, func(ctx context.Context) {
		defer l.close()
		// The lock ends with the session: a check below must not outlive it.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-ss.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		wch := d.cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
		for {
			select {
			case <-ctx.Done():
				return
			case <-ss.Done():
				return
			case wr, ok := <-wch:
				if !ok || wr.Err() != nil {
					// Lost the watch (compaction, leader loss): check the
					// key, waiting for a leader if need be. The key cannot
					// vanish while there is none (only a leader expires a
					// lease), so the lock holds meanwhile.
					g, err := d.get(ctx, "check lock "+key, key)
					if err != nil {
						return
					}
					if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != rev {
						l.gone()
						return
					}
					wch = d.cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(g.Header.Revision+1), clientv3.WithFilterPut())
					continue
				}
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						l.gone()
						return
					}
				}
			}
		}
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return l, nil
}

func (l *keyLock) close() {
	l.once.Do(func() {
		close(l.done)
		if l.release != nil {
			l.release()
		}
	})
}

func (l *keyLock) Done() <-chan struct{} { return l.done }

// Unlock deletes the key if it is still ours (same create revision).
func (l *keyLock) Unlock(ctx context.Context) error {
	defer l.stop()
	defer l.close()
	if l.onUnlock != nil {
		return l.onUnlock(ctx)
	}
	if err := l.d.deleteIfCreated(ctx, "unlock "+l.key, l.key, l.rev); err != nil {
		return err
	}
	l.gone()
	return nil
}

// SetReplicationEnabled implements metadata.UnderReplication: disabled is
// the presence of `underreplication/disable`, as in Java's ZooKeeper layout.
//
// A switch is a compare-and-set, re-read and retried on a conflict: it
// reads the state first and, unless it already holds, deletes or puts
// `disable` only if the companion key `underreplication/replicationswitch`
// (empty, Folio's) still has the mod revision read, and bumps it in the
// same txn. A plain put or delete applied late (retry.go) would undo a
// later switch; a comparison on `disable` alone cannot prevent that, since
// its "absent" comes back with every enable. Every switch moves the
// companion, so a late attempt fails its comparison.
func (d *Driver) SetReplicationEnabled(ctx context.Context, enabled bool) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	key := d.k.urDisable()
	what := "write " + key
	for {
		disabled, sw, err := d.readSwitch(ctx)
		if err != nil {
			return err
		}
		if disabled != enabled {
			return nil // already so (our earlier attempt's, or someone's)
		}
		var done bool
		err = d.do(ctx, what, func(ctx context.Context, _ bool) error {
			ok, err := d.switchOnce(ctx, enabled, sw)
			if err != nil {
				return d.storeErr(what, err)
			}
			done = ok
			return nil
		})
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// readSwitch reads, at one revision, whether `disable` is present and the
// mod revision of the replication switch's companion key (0: absent).
func (d *Driver) readSwitch(ctx context.Context) (disabled bool, sw int64, err error) {
	key, swKey := d.k.urDisable(), d.k.urSwitch()
	var resp *clientv3.TxnResponse
	err = d.do(ctx, "read "+key, func(ctx context.Context, _ bool) error {
		r, err := d.cli.Txn(ctx).Then(clientv3.OpGet(key, clientv3.WithCountOnly()), clientv3.OpGet(swKey, clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return d.storeErr("read "+key, err)
		}
		resp = r
		return nil
	})
	if err != nil {
		return false, 0, err
	}
	if kv := firstKV(resp, 1); kv != nil {
		sw = kv.ModRevision
	}
	return resp.Responses[0].GetResponseRange().GetCount() > 0, sw, nil
}

// switchOnce is one attempt of SetReplicationEnabled: `if
// mod_revision(replicationswitch) == sw then delete or put disable, put
// replicationswitch`. It reports whether it switched.
func (d *Driver) switchOnce(ctx context.Context, enabled bool, sw int64) (bool, error) {
	key, swKey := d.k.urDisable(), d.k.urSwitch()
	op := clientv3.OpPut(key, "")
	if enabled {
		op = clientv3.OpDelete(key)
	}
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(swKey), "=", sw)).
		Then(op, clientv3.OpPut(swKey, "")).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// ReplicationEnabled implements metadata.UnderReplication.
func (d *Driver) ReplicationEnabled(ctx context.Context) (bool, error) {
	if err := d.checkOpen(); err != nil {
		return false, err
	}
	key := d.k.urDisable()
	resp, err := d.get(ctx, "read "+key, key, clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count == 0, nil
}

// EncodeDelay is the stored text of a lost-bookie recovery delay: decimal
// seconds ("0", "60", "0.25"); Java stores whole seconds the same way.
func EncodeDelay(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// DecodeDelay parses EncodeDelay's text.
func DecodeDelay(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("lost bookie recovery delay %q is not a non-negative number of seconds", s)
	}
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond), nil
}

// SetLostBookieRecoveryDelay implements metadata.UnderReplication.
func (d *Driver) SetLostBookieRecoveryDelay(ctx context.Context, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("lost bookie recovery delay %v must not be negative", delay)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	key := d.k.urDelay()
	// A repeated put of the value is one more request to audit now:
	// harmless. A late one must not undo a later value (replace).
	return d.replace(ctx, "write "+key, key, EncodeDelay(delay))
}

// LostBookieRecoveryDelay implements metadata.UnderReplication.
func (d *Driver) LostBookieRecoveryDelay(ctx context.Context) (time.Duration, error) {
	ev, _, err := d.readDelay(ctx)
	if err != nil {
		return 0, err
	}
	if !ev.Set {
		return 0, fmt.Errorf("lost bookie recovery delay: %w", metadata.ErrNotFound)
	}
	return ev.Delay, nil
}

func (d *Driver) readDelay(ctx context.Context) (metadata.DelayEvent, int64, error) {
	if err := d.checkOpen(); err != nil {
		return metadata.DelayEvent{}, 0, err
	}
	key := d.k.urDelay()
	resp, err := d.get(ctx, "read "+key, key)
	if err != nil {
		return metadata.DelayEvent{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return metadata.DelayEvent{}, resp.Header.Revision, nil
	}
	v, err := DecodeDelay(string(resp.Kvs[0].Value))
	if err != nil {
		return metadata.DelayEvent{}, 0, metadata.Corrupt(key, err)
	}
	return metadata.DelayEvent{Delay: v, Set: true}, resp.Header.Revision, nil
}

// WatchLostBookieRecoveryDelay implements metadata.UnderReplication. Every
// PUT is delivered (none coalesced: a put of the same value is a request
// to audit now).
func (d *Driver) WatchLostBookieRecoveryDelay(ctx context.Context) (<-chan metadata.DelayEvent, error) {
	first, rev, err := d.readDelay(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan metadata.DelayEvent, 1)
	key := d.k.urDelay()
	err = d.goWatch(ctx, func(ctx context.Context) {
		defer close(out)
		send := func(ev metadata.DelayEvent) bool {
			select {
			case out <- ev:
				return ev.Err == nil
			case <-ctx.Done():
				return false
			}
		}
		if !send(first) {
			return
		}
		for {
			wch := d.cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(rev+1))
			for wr := range wch {
				if err := wr.Err(); err != nil {
					break
				}
				for _, ev := range wr.Events {
					var de metadata.DelayEvent
					if ev.Type == mvccpb.PUT {
						v, err := DecodeDelay(string(ev.Kv.Value))
						if err != nil {
							de.Err = metadata.Corrupt(key, err)
						} else {
							de = metadata.DelayEvent{Delay: v, Set: true}
						}
					}
					if !send(de) {
						return
					}
					rev = ev.Kv.ModRevision
				}
			}
			if ctx.Err() != nil {
				return
			}
			// The watch broke (compaction, no leader): re-read, deliver
			// the current value, and watch again.
			cur, r, err := d.readDelay(ctx)
			if err != nil {
				if ctx.Err() == nil {
					send(metadata.DelayEvent{Err: err})
				}
				return
			}
			if !send(cur) {
				return
			}
			rev = r
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetLastCheckTime implements metadata.UnderReplication: a put of
// metadata.EncodeCheckTime's bytes at `underreplication/<check.Node()>`
// (replace: a late attempt cannot put an older time back).
func (d *Driver) SetLastCheckTime(ctx context.Context, check metadata.PeriodicCheck, completed time.Time) error {
	value, err := metadata.EncodeCheckTime(check, completed)
	if err != nil {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	key := d.k.urCheckTime(check)
	return d.replace(ctx, "write "+key, key, string(value))
}

// LastCheckTime implements metadata.UnderReplication.
func (d *Driver) LastCheckTime(ctx context.Context, check metadata.PeriodicCheck) (time.Time, error) {
	if err := check.Validate(); err != nil {
		return time.Time{}, err
	}
	if err := d.checkOpen(); err != nil {
		return time.Time{}, err
	}
	key := d.k.urCheckTime(check)
	resp, err := d.get(ctx, "read "+key, key)
	if err != nil {
		return time.Time{}, err
	}
	if len(resp.Kvs) == 0 {
		return time.Time{}, nil
	}
	t, err := metadata.DecodeCheckTime(check, resp.Kvs[0].Value)
	if err != nil {
		return time.Time{}, metadata.Corrupt(key, err)
	}
	return t, nil
}

// CampaignAuditor implements metadata.AuditorElection with etcd's
// concurrency.Election under `underreplication/auditorelection/` (keys
// `<prefix>/<lease hex>`, lowest create revision leads, value = candidate).
func (d *Driver) CampaignAuditor(ctx context.Context, s metadata.Session, candidate metadata.BookieID) (metadata.Lock, error) {
	ss, err := d.etcdSession(s)
	if err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	// The concurrency session shares our lease; it is orphaned (never
	// closed: Close would revoke the lease) when leadership ends.
	cs, err := concurrency.NewSession(d.cli, concurrency.WithLease(ss.lease), concurrency.WithContext(d.closeCtx))
	if err != nil {
		return nil, d.storeErr("auditor election session", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.closeCtx, cancel)
	go func() {
		select {
		case <-ss.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	e := concurrency.NewElection(cs, d.k.urElection())
	err = e.Campaign(cctx, string(candidate))
	stop()
	cancel()
	if err != nil {
		cs.Orphan()
		if ss.expired() {
			return nil, fmt.Errorf("campaign for auditor: %w", metadata.ErrSessionExpired)
		}
		if d.closeCtx.Err() != nil {
			return nil, metadata.ErrClosed
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, d.storeErr("campaign for auditor", err)
	}
	l, err := d.newKeyLock(ss, e.Key(), e.Rev(), func(ctx context.Context) error {
		if err := e.Resign(ctx); err != nil {
			return d.storeErr("resign auditor", err)
		}
		return nil
	}, cs.Orphan, nil)
	if err != nil {
		cs.Orphan()
		return nil, err
	}
	return l, nil
}

// ReplicationWorker implements metadata.ReplicationWorkerReader: the value
// of the ledger's lock key.
func (d *Driver) ReplicationWorker(ctx context.Context, ledgerID int64) (metadata.BookieID, error) {
	if err := checkLedgerID(ledgerID); err != nil {
		return "", err
	}
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	lock := d.k.urLock(ledgerID)
	resp, err := d.get(ctx, "read "+lock, lock)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("lock of under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	id := metadata.BookieID(resp.Kvs[0].Value)
	if err := metadata.ValidateBookieID(id); err != nil {
		return "", metadata.Corrupt(lock, err)
	}
	return id, nil
}

// Auditor implements metadata.AuditorElection: the value of the election
// key with the lowest create revision.
func (d *Driver) Auditor(ctx context.Context) (metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	prefix := d.k.urElection() + "/"
	resp, err := d.get(ctx, "read "+prefix, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("auditor: %w", metadata.ErrNotFound)
	}
	return metadata.BookieID(resp.Kvs[0].Value), nil
}
