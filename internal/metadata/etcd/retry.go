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
//     the key holds exactly the value we wrote and exactly one put happened
//     since the expected version (appliedAfter); otherwise it is reported as
//     ErrBadVersion, which every caller resolves by re-reading;
//   - a create that finds the key is ours when it holds our value and was
//     never changed since its creation (createdByUs);
//   - a delete that finds the key gone succeeded;
//   - a registration or lock held by our own lease is ours;
//   - plain puts, deletes and id generation are idempotent or harmless to
//     repeat (a repeated id generation skips an id, as Java's does on
//     failure).

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
// earlier: it holds exactly value, and exactly one put happened to the key
// since the expected version (the same incarnation of the key, whose
// version, the count of puts since its creation, is one more than at
// expected). If etcd compacted the revision
// expected, it cannot tell and reports false: the caller reports a version
// conflict and its caller re-reads.
func (d *Driver) appliedAfter(ctx context.Context, key string, value []byte, expected metadata.Version, cur *mvccpb.KeyValue) (bool, error) {
	if cur == nil || !bytes.Equal(cur.Value, value) {
		return false, nil
	}
	resp, err := d.cli.Get(ctx, key, clientv3.WithRev(int64(expected)))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return false, nil
	}
	if err != nil {
		return false, d.storeErr(fmt.Sprintf("read %s at revision %d", key, expected), err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != int64(expected) {
		return false, nil
	}
	at := resp.Kvs[0]
	// Same incarnation of the key (not deleted and created again since),
	// one put later.
	return cur.CreateRevision == at.CreateRevision && cur.Version == at.Version+1, nil
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

// deleteKey is a retried plain delete (idempotent).
func (d *Driver) deleteKey(ctx context.Context, what, key string) error {
	return d.do(ctx, what, func(ctx context.Context, _ bool) error {
		if _, err := d.cli.Delete(ctx, key); err != nil {
			return d.storeErr(what, err)
		}
		return nil
	})
}

// put is a retried plain put (repeating it writes the same value again).
func (d *Driver) put(ctx context.Context, what, key, value string) error {
	return d.do(ctx, what, func(ctx context.Context, _ bool) error {
		if _, err := d.cli.Put(ctx, key, value); err != nil {
			return d.storeErr(what, err)
		}
		return nil
	})
}
