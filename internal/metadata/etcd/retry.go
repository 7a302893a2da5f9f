package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/foliodb/folio/internal/metadata"
)

// Defaults of the retry knobs of Config.
const (
	DefaultRequestTimeout  = 3 * time.Second
	DefaultRetryBackoff    = 50 * time.Millisecond
	DefaultRetryBackoffMax = time.Second
)

// An etcd cluster fails over: when its leader dies the other members elect a
// new one after an election timeout, and without a quorum of members nothing
// is written at all. Meanwhile requests fail with Unavailable ("no leader",
// "leader changed", "request timed out", a connection to a dead member
// reset) or hang until an attempt times out. The etcd client retries only
// reads on its own, and writes only when they were never sent. So every
// request of this driver goes through Driver.do, which retries such failures
// until the request succeeds or the caller's context ends: Folio's clients,
// bookies and AutoRecovery resume once a quorum holds a leader again,
// instead of failing an ensemble change, a close or a registration
// (BookKeeper's ZooKeeper client likewise retries on connection loss within
// the session timeout).
//
// A write whose attempt failed that way may still have been applied. Each
// write is therefore written so that trying it again is safe and tells its
// own earlier success from someone else's change (the retried flag of
// attempt):
//   - a compare-and-set on a version that finds the key changed is ours when
//     the key holds exactly the value we wrote and the put that wrote it was
//     made on the expected version (appliedAfter); otherwise it is reported
//     as ErrBadVersion, which every caller resolves by re-reading;
//   - a create that finds the key is ours when it holds our value and was
//     never changed since its creation (createdByUs);
//   - a delete that finds the key gone succeeded;
//   - a registration held by our own lease is ours; so is a lock held by
//     our own lease and owner that this session has not handed out before;
//   - id generation is harmless to repeat (a repeated generation skips an
//     id, as Java's does on failure).
//
// An attempt the driver gave up on may also be applied *after* a later one.
// An etcd follower forwards a client's proposal to the leader only after
// writing it to its own disk; when the attempt times out (RequestTimeout)
// the retry may go through another member, be applied first and answered,
// and the stale proposal lands later, possibly after the request has
// returned and its caller has moved on. A compare-and-set on a version is
// immune: its late copy fails its comparison. A write that compares nothing
// is not, and neither is one that compares only "absent" where the key can
// be absent again. None of these is left unguarded: each compares state
// read before its first attempt, which any later change moves on:
//   - a delete of whatever is there deletes only the incarnation read first
//     (`create_revision == read`, deleteIfCreated): UnregisterBookie,
//     DeleteLedger and DeleteCookie with VersionAny, MarkLedgerReplicated's
//     release of the lock;
//   - a put of a key that is never deleted is a compare-and-set on the mod
//     revision read first, re-read and retried on a conflict (replace):
//     the lost-bookie recovery delay and the periodic check times;
//   - the replication switch compares and bumps a companion key
//     (`underreplication/replicationswitch`), since "absent" recurs;
//   - a registration also compares the other mode's key with the one read
//     first, so that a late one cannot undo a later change of mode.
// Creates guarded by `create_revision == 0` alone stay exposed to a key
// deleted within a late proposal's window (seconds) after its creation: a
// ledger or a cookie would be created again, an under-replication record
// marked again (then repaired and cleared again), a lock taken again under
// its session (refused, even to that session, until the session ends).
// Guarding those would take a key that survives the deletion.

// attempt is one try of a request. retried is true when an earlier try
// failed with a transient error, so that a write may have been applied
// without the driver learning it.
type attempt func(ctx context.Context, retried bool) error

// do runs f until it succeeds, fails with an error that is not transient, or
// ctx ends (then the last error is returned with ctx's). Each try runs under
// Config.RequestTimeout and with etcd's "require leader" option, so that a
// member without a leader refuses at once rather than queue the request.
func (d *Driver) do(ctx context.Context, what string, f attempt) error {
	backoff := d.cfg.RetryBackoff
	start := time.Now()
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), d.cfg.RequestTimeout)
		err := f(actx, n > 1)
		attemptTimedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			if n > 1 {
				d.cfg.Log.Info("etcd request succeeded after retries", "request", what, "attempts", n, "after", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			if n > 1 {
				return fmt.Errorf("%w (gave up after %d attempts in %v: %w)", err, n, time.Since(start).Round(time.Millisecond), ctx.Err())
			}
			return err
		}
		if !attemptTimedOut && !transient(err) {
			return err
		}
		if n == 1 {
			d.cfg.Log.Warn("etcd unavailable; retrying until it answers", "request", what, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %d attempts in %v: %w)", err, n, time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-d.closeCtx.Done():
			t.Stop()
			return fmt.Errorf("etcd: %s: %w", what, metadata.ErrClosed)
		}
		backoff = min(2*backoff, d.cfg.RetryBackoffMax)
	}
}

// transient reports whether err is a failure of the etcd cluster or of the
// connection to one member that ends by itself once a quorum of members holds
// a leader (and the client has found a live member): every gRPC Unavailable
// (etcd's "no leader", "leader changed", "request timed out…", "server
// stopped", and connection errors) and a dropped raft proposal. A context
// error, a failed comparison or any other server answer is not.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable:
			return true
		case codes.Unknown:
			// raft.ErrProposalDropped: the proposal was never
			// appended (a member without a leader, or one stepping down).
			return strings.Contains(st.Message(), "raft proposal dropped")
		}
	}
	return false
}

// appliedAfter reports whether cur, the value a compare-and-set on
// `mod_revision == expected` found instead, is the write we attempted
// earlier: it holds exactly value, and the put that produced it (at
// cur.ModRevision) was made on top of the expected version: just before it
// the key was the same incarnation (same create revision, one put fewer)
// at mod revision expected.
//
// It reads the key at cur.ModRevision-1, not at expected: only history
// since our own write is needed. A ledger's version is the revision of its
// last write, often hours old, and etcd answers "compacted" for revisions
// below its compaction point (Folio's standalone etcd compacts hourly), so
// a read at expected would fail exactly for the long-lived keys. Our own
// write was made during this request, whose attempts are bounded by the
// caller's context; only a compaction past that write itself hides it.
// Then the answer is false, never a guess: the caller reports ErrBadVersion
// and its caller re-reads (and finds its change made, or not).
func (d *Driver) appliedAfter(ctx context.Context, key string, value []byte, expected metadata.Version, cur *mvccpb.KeyValue) (bool, error) {
	if cur == nil || !bytes.Equal(cur.Value, value) || cur.ModRevision <= int64(expected) {
		return false, nil
	}
	// A key changes at most once per revision (a txn may not name a key
	// twice), so the key at cur.ModRevision-1 is its value just before
	// the put that produced cur.
	before := cur.ModRevision - 1
	resp, err := d.cli.Get(ctx, key, clientv3.WithRev(before))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return false, nil
	}
	if err != nil {
		return false, d.storeErr(fmt.Sprintf("read %s at revision %d", key, before), err)
	}
	if len(resp.Kvs) != 1 {
		return false, nil // the put created the key: not a write on expected
	}
	at := resp.Kvs[0]
	// The expected version, of the same incarnation of the key (not
	// deleted and created again since), one put earlier.
	return at.ModRevision == int64(expected) && at.CreateRevision == cur.CreateRevision && cur.Version == at.Version+1, nil
}

// createdByUs reports whether cur, the value a create found in place, is
// the create we attempted earlier: it holds exactly value and was never
// written since its creation. Two creators of the same key with the same
// bytes cannot be told apart; ids from GenerateLedgerID are never handed to
// two creators, and a caller-chosen id must be unique by contract.
func createdByUs(value []byte, cur *mvccpb.KeyValue) bool {
	return cur != nil && cur.Version == 1 && bytes.Equal(cur.Value, value)
}

// firstKV is the single key-value of a txn's range response i, or nil.
func firstKV(resp *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if i >= len(resp.Responses) {
		return nil
	}
	kvs := resp.Responses[i].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return nil
	}
	return kvs[0]
}

// get is a retried Get; errors are wrapped with what.
func (d *Driver) get(ctx context.Context, what, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	var resp *clientv3.GetResponse
	err := d.do(ctx, what, func(ctx context.Context, _ bool) error {
		r, err := d.cli.Get(ctx, key, opts...)
		if err != nil {
			return d.storeErr(what, err)
		}
		resp = r
		return nil
	})
	return resp, err
}

// deleteIfCreated deletes key if it is still the incarnation read before
// (create revision created): `if create_revision(key) == created then
// delete`. A key gone, or created again since, was deleted meanwhile (by an
// attempt of ours or by someone else): the delete is done either way, and
// a newer key, created after the read, is not this call's to delete.
// Guarding on what was read before the first attempt is what keeps an
// attempt applied late from deleting a newer key.
func (d *Driver) deleteIfCreated(ctx context.Context, what, key string, created int64) error {
	return d.do(ctx, what, func(ctx context.Context, _ bool) error {
		_, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", created)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return d.storeErr(what, err)
		}
		return nil
	})
}

// replace puts value at key as a compare-and-set on the key's mod revision
// read just before, reading again and retrying on a conflict, for values
// that a later put replaces (the last one wins). A plain put's late attempt
// would land on top of a later put and undo it; this one's fails its
// comparison. key must never be deleted (only Format deletes it): "absent"
// (mod revision 0) is then a state that cannot come back.
func (d *Driver) replace(ctx context.Context, what, key, value string) error {
	for {
		resp, err := d.get(ctx, "read "+key, key, clientv3.WithKeysOnly())
		if err != nil {
			return err
		}
		var mod int64
		if len(resp.Kvs) == 1 {
			mod = resp.Kvs[0].ModRevision
		}
		var done bool
		err = d.do(ctx, what, func(ctx context.Context, _ bool) error {
			ok, err := d.replaceOnce(ctx, key, value, mod)
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
		// Written since the read, by someone else or by an attempt of
		// ours that was applied: write again on top (repeating our own
		// value is harmless for these keys).
	}
}

// replaceOnce is one attempt of replace; it reports whether it wrote.
func (d *Driver) replaceOnce(ctx context.Context, key, value string, mod int64) (bool, error) {
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", mod)).
		Then(clientv3.OpPut(key, value)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
