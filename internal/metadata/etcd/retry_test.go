package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

// Tests of how the driver's writes behave when an attempt failed but was
// applied (retried attempts recognise it) and when an abandoned attempt is
// applied late, after the state it was made on has changed (guards on state
// read before the first attempt). See retry.go.

// revisions returns key's create and mod revisions (0, 0 if absent).
func revisions(ctx context.Context, t *testing.T, c *clientv3.Client, key string) (created, modified int64) {
	t.Helper()
	resp, err := c.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, 0
	}
	return resp.Kvs[0].CreateRevision, resp.Kvs[0].ModRevision
}

// TestRetriedWriteRecognisedAfterCompaction: a retried compare-and-set
// whose earlier attempt was applied recognises it although etcd compacted
// its history past the expected version (the usual case: a ledger's version
// is the revision of its last write, often older than the retention of
// etcd's periodic compaction). Only a compaction past the write itself
// hides it; then the answer is ErrBadVersion, never a success it cannot
// vouch for.
func TestRetriedWriteRecognisedAfterCompaction(t *testing.T) {
	// A server of its own: compacting the shared one would cut the history
	// other tests' watches need. Its own compaction is off: the test
	// compacts.
	srv := etcdtest.Start(t, etcdtest.WithConfig(func(c *embedetcd.Config) { c.AutoCompactionRetention = -1 }))
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(srv, scope))
	c := raw(t, srv)
	md1 := metadatatest.NewLedgerMetadata(3, 2, 2)
	const id = 7
	v1, err := d.CreateLedgerMetadata(ctx, id, md1)
	if err != nil {
		t.Fatal(err)
	}
	// Other traffic after the ledger's last write; the compactor then
	// compacts at a revision after it.
	unrelated, err := c.Put(ctx, scope+"/unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	md2 := md1.Clone()
	md2.Ensembles[0].Ensemble[1] = "10.0.0.9:3181"
	// The first attempt: applied, its answer lost.
	v2, err := d.WriteLedger(ctx, id, md2, v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, unrelated.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, scope+"/ledgers/"+etcd.LedgerUUID(id), clientv3.WithRev(int64(v1))); err == nil {
		t.Fatalf("revision %d readable after compacting at %d", v1, unrelated.Header.Revision)
	}
	v, err := etcd.WriteLedgerAttempt(ctx, d, id, md2, v1, true)
	if err != nil || v != v2 {
		t.Fatalf("retried write after an applied one, expected version %d compacted: %v, %v; want version %d", v1, v, err, v2)
	}
	// Someone else's write of the same bytes on top of another version is
	// still not ours.
	if _, err := etcd.WriteLedgerAttempt(ctx, d, id, md2, v1-1, true); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("retried write on another expected version: %v, want ErrBadVersion", err)
	}

	// Compacted past our write itself: it cannot tell, and says so.
	if _, err := c.Compact(ctx, int64(v2)); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.WriteLedgerAttempt(ctx, d, id, md2, v1, true); !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("retried write with its own write compacted: %v, want ErrBadVersion", err)
	}
	// Its caller re-reads and finds the change made.
	got, v, err := d.ReadLedger(ctx, id)
	if err != nil || v != v2 || !got.Equal(md2) {
		t.Fatalf("read back %+v at %d, %v; want the write at %d", got, v, err, v2)
	}
}

// TestUnreleasedLockRefusedToItsOwnSession: a lock whose Unlock failed
// stays with its session; the same session asking again is refused with
// ErrLocked (a session's locks are not re-entrant) naming this session, not
// another one, even on a retried attempt (the lock was handed out before:
// it is not that attempt's own). Once the session ends, another takes it.
// The replication worker ends its session when an Unlock fails
// (autorecovery.ErrLockNotReleased).
func TestUnreleasedLockRefusedToItsOwnSession(t *testing.T) {
	ctx := ctxOf(t)
	d := open(t, etcdtest.URI(shared, etcdtest.Scope(t)))
	ar := metadata.AutoRecoveryDriver(d)
	if err := ar.MarkLedgerUnderReplicated(ctx, 9, []metadata.BookieID{"10.0.0.1:3181"}); err != nil {
		t.Fatal(err)
	}
	s1, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	s2, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	const w1, w2 = "10.0.0.7:3181", "10.0.0.8:3181"
	lock, err := ar.LockUnderReplicatedLedger(ctx, s1, 9, w1)
	if err != nil {
		t.Fatal(err)
	}
	// The Unlock's context ends before etcd answers.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := lock.Unlock(ended); err == nil {
		t.Fatal("Unlock with an ended context succeeded")
	}
	_, err = ar.LockUnderReplicatedLedger(ctx, s1, 9, w1)
	if !errors.Is(err, metadata.ErrLocked) || !strings.Contains(err.Error(), "this session") || strings.Contains(err.Error(), "another") {
		t.Fatalf("lock by the session holding the unreleased lock: %v; want ErrLocked naming this session", err)
	}
	if _, err := etcd.LockAttempt(ctx, d, s1, 9, w1, true); !errors.Is(err, metadata.ErrLocked) {
		t.Fatalf("retried lock attempt on a lock its session handed out before: %v, want ErrLocked", err)
	}
	_, err = ar.LockUnderReplicatedLedger(ctx, s2, 9, w2)
	if !errors.Is(err, metadata.ErrLocked) || !strings.Contains(err.Error(), "another session") || !strings.Contains(err.Error(), w1) {
		t.Fatalf("lock by another session: %v; want ErrLocked naming the holder and another session", err)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := ar.LockUnderReplicatedLedger(ctx, s2, 9, w2)
	if err != nil {
		t.Fatalf("lock after the holder's session ended: %v", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLateUnregisterSparesNewerRegistration: an UnregisterBookie attempt
// applied after the registration it read was replaced by a new one (the
// bookie's stale key removed, the bookie registered again: `folio
// standalone`'s RemoveStale) leaves the new registration in place.
func TestLateUnregisterSparesNewerRegistration(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	const b = "127.0.0.1:3181"
	key := scope + "/bookies/writable/" + b
	stale, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.RegisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	read, _ := revisions(ctx, t, c, key)
	fresh, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(ctx)
	// The unregister is applied (by an attempt the late one is a copy of),
	// the bookie registers again.
	if err := fresh.UnregisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	if err := fresh.RegisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	now, _ := revisions(ctx, t, c, key)
	if now == 0 || now == read {
		t.Fatalf("registration at create revision %d after re-registering (was %d)", now, read)
	}
	// The late copy.
	if err := etcd.UnregisterBookieAttempt(ctx, fresh, b, false, read); err != nil {
		t.Fatal(err)
	}
	if got, _ := revisions(ctx, t, c, key); got != now {
		t.Fatalf("late unregister: registration at create revision %d, want %d kept", got, now)
	}
	if w, err := d.WritableBookies(ctx); err != nil || len(w) != 1 || w[0] != b {
		t.Fatalf("writable bookies after a late unregister: %v, %v", w, err)
	}
	_ = stale.Close(ctx)
	// A current unregister removes it.
	if err := fresh.UnregisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := revisions(ctx, t, c, key); got != 0 {
		t.Fatalf("registration at create revision %d after UnregisterBookie", got)
	}
}

// TestLateRegistrationSparesLaterModeChange: a RegisterBookie attempt
// applied after the bookie registered (by a retry) and then moved to the
// other mode neither registers it in the old mode again nor removes the
// newer registration.
func TestLateRegistrationSparesLaterModeChange(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	const b = "127.0.0.1:3181"
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	// Writable registration, read with both keys absent; then read-only.
	if err := s.RegisterBookie(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, b, true); err != nil {
		t.Fatal(err)
	}
	ro, _ := revisions(ctx, t, c, scope+"/bookies/readonly/"+b)
	// The late copy of the writable registration's first attempt.
	if done, err := etcd.RegisterBookieAttempt(ctx, s, b, false, 0); err != nil || done {
		t.Fatalf("late writable registration: registered %v, %v; want refused", done, err)
	}
	if got, _ := revisions(ctx, t, c, scope+"/bookies/readonly/"+b); got != ro {
		t.Fatalf("read-only registration at create revision %d after a late writable one, want %d kept", got, ro)
	}
	if got, _ := revisions(ctx, t, c, scope+"/bookies/writable/"+b); got != 0 {
		t.Fatal("writable key put back by a late registration")
	}
}

// TestLateDeleteAnySparesRecreatedKey: a delete of any version (VersionAny)
// applied after the key was deleted and created again leaves the new key:
// a first attempt reports the key it read gone, a retried one success.
func TestLateDeleteAnySparesRecreatedKey(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	const id = 11
	key := scope + "/ledgers/" + etcd.LedgerUUID(id)
	md := metadatatest.NewLedgerMetadata(3, 2, 2)
	if _, err := d.CreateLedgerMetadata(ctx, id, md); err != nil {
		t.Fatal(err)
	}
	read, _ := revisions(ctx, t, c, key)
	if err := d.DeleteLedger(ctx, id, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	v, err := d.CreateLedgerMetadata(ctx, id, md)
	if err != nil {
		t.Fatal(err)
	}
	if err := etcd.DeleteAnyLedgerAttempt(ctx, d, id, read, false); !errors.Is(err, metadata.ErrNoSuchLedger) {
		t.Fatalf("first delete attempt of a key re-created since its read: %v, want ErrNoSuchLedger", err)
	}
	if err := etcd.DeleteAnyLedgerAttempt(ctx, d, id, read, true); err != nil {
		t.Fatalf("retried delete attempt of a key re-created since its read: %v", err)
	}
	if _, got, err := d.ReadLedger(ctx, id); err != nil || got != v {
		t.Fatalf("re-created ledger after a late delete: version %d, %v; want %d", got, err, v)
	}
	// A current delete of any version deletes it, and reports a missing
	// key.
	if err := d.DeleteLedger(ctx, id, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteLedger(ctx, id, metadata.VersionAny); !errors.Is(err, metadata.ErrNoSuchLedger) {
		t.Fatalf("delete of an absent ledger: %v, want ErrNoSuchLedger", err)
	}
	if err := d.DeleteCookie(ctx, "127.0.0.1:3181", metadata.VersionAny); !errors.Is(err, metadata.ErrNoSuchCookie) {
		t.Fatalf("delete of an absent cookie: %v, want ErrNoSuchCookie", err)
	}
}

// TestLateClearSparesLaterLock: a MarkLedgerReplicated attempt applied
// after the lock it read was released and another worker locked the
// ledger leaves that worker's lock in place, whether it clears the record
// or finds it changed.
func TestLateClearSparesLaterLock(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	ar := metadata.AutoRecoveryDriver(d)
	const id = 12
	lockKey := scope + "/underreplication/locks/" + etcd.LedgerUUID(id)
	if err := ar.MarkLedgerUnderReplicated(ctx, id, []metadata.BookieID{"10.0.0.1:3181"}); err != nil {
		t.Fatal(err)
	}
	rec, err := ar.ReadUnderReplicatedLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	s2, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	l1, err := ar.LockUnderReplicatedLedger(ctx, s1, id, "10.0.0.7:3181")
	if err != nil {
		t.Fatal(err)
	}
	read, _ := revisions(ctx, t, c, lockKey)
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := ar.LockUnderReplicatedLedger(ctx, s2, id, "10.0.0.8:3181")
	if err != nil {
		t.Fatal(err)
	}
	held, _ := revisions(ctx, t, c, lockKey)

	// A late copy that finds the record changed (else branch).
	err = etcd.MarkLedgerReplicatedAttempt(ctx, d, id, rec.Version+1000, read, false)
	if !errors.Is(err, metadata.ErrBadVersion) {
		t.Fatalf("late clear with another version: %v, want ErrBadVersion", err)
	}
	if got, _ := revisions(ctx, t, c, lockKey); got != held {
		t.Fatalf("lock at create revision %d after a late clear, want %d kept", got, held)
	}
	// One that clears the record (then branch).
	if err := etcd.MarkLedgerReplicatedAttempt(ctx, d, id, rec.Version, read, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.ReadUnderReplicatedLedger(ctx, id); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("record after the clear: %v, want ErrNotFound", err)
	}
	if got, _ := revisions(ctx, t, c, lockKey); got != held {
		t.Fatalf("lock at create revision %d after a late clear of the record, want %d kept", got, held)
	}
	select {
	case <-l2.Done():
		t.Fatal("the later lock ended by a late clear")
	default:
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLateSwitchSparesLaterSwitch: a SetReplicationEnabled attempt applied
// after a later switch does not undo it: neither a late disable after an
// enable (the disable key is absent again, as when it was read) nor a late
// enable after a disable.
func TestLateSwitchSparesLaterSwitch(t *testing.T) {
	ctx := ctxOf(t)
	d := open(t, etcdtest.URI(shared, etcdtest.Scope(t)))
	enabled := func() bool {
		t.Helper()
		on, err := d.ReplicationEnabled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	sw, err := etcd.ReplicationSwitchRevision(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetReplicationEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := d.SetReplicationEnabled(ctx, true); err != nil {
		t.Fatal(err)
	}
	if done, err := etcd.SetReplicationEnabledAttempt(ctx, d, false, sw); err != nil || done || !enabled() {
		t.Fatalf("late disable after an enable: switched %v, %v, enabled %v; want refused, enabled", done, err, enabled())
	}

	sw, err = etcd.ReplicationSwitchRevision(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetReplicationEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	if done, err := etcd.SetReplicationEnabledAttempt(ctx, d, true, sw); err != nil || done || enabled() {
		t.Fatalf("late enable after a disable: switched %v, %v, enabled %v; want refused, disabled", done, err, enabled())
	}
	// Switching to the current state writes nothing.
	before, err := etcd.ReplicationSwitchRevision(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetReplicationEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	if after, err := etcd.ReplicationSwitchRevision(ctx, d); err != nil || after != before {
		t.Fatalf("disabling a disabled switch moved it: %d -> %d, %v", before, after, err)
	}
}

// TestLateDelaySetSparesLaterSet: a SetLostBookieRecoveryDelay attempt
// applied after a later set does not put its older value back.
func TestLateDelaySetSparesLaterSet(t *testing.T) {
	ctx := ctxOf(t)
	scope := etcdtest.Scope(t)
	d := open(t, etcdtest.URI(shared, scope))
	c := raw(t, shared)
	key := scope + "/underreplication/lostBookieRecoveryDelay"
	_, read := revisions(ctx, t, c, key) // absent: 0
	if err := d.SetLostBookieRecoveryDelay(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.SetLostBookieRecoveryDelay(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if done, err := etcd.SetLostBookieRecoveryDelayAttempt(ctx, d, time.Minute, read); err != nil || done {
		t.Fatalf("late set of the delay: wrote %v, %v; want refused", done, err)
	}
	if got, err := d.LostBookieRecoveryDelay(ctx); err != nil || got != 0 {
		t.Fatalf("delay %v, %v after a late set; want the later 0", got, err)
	}
}
