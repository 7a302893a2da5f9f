package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
)

// CreateLedger generates ids until CreateLedgerMetadata finds a free key
// (Java's LedgerCreateOp does the same on LedgerExists).
func (d *Driver) CreateLedger(ctx context.Context, md *metadata.LedgerMetadata) (int64, metadata.Version, error) {
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, 0, err
	}
	for attempt := 0; attempt < d.cfg.MaxCreateAttempts; attempt++ {
		id, err := d.GenerateLedgerID(ctx)
		if err != nil {
			return 0, 0, err
		}
		v, err := d.createLedger(ctx, id, value)
		if errors.Is(err, metadata.ErrLedgerExists) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		return id, v, nil
	}
	return 0, 0, fmt.Errorf("etcd: create ledger: %d generated ids were all taken (were bucket keys under %s deleted?)", d.cfg.MaxCreateAttempts, d.k.buckets)
}

// CreateLedgerMetadata: txn `if create_revision(key) == 0 then put else get`
// (§2.4). The version is the txn's header revision, the key's mod_revision.
func (d *Driver) CreateLedgerMetadata(ctx context.Context, id int64, md *metadata.LedgerMetadata) (metadata.Version, error) {
	if err := checkLedgerID(id); err != nil {
		return 0, err
	}
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	return d.createLedger(ctx, id, value)
}

func (d *Driver) createLedger(ctx context.Context, id int64, value []byte) (metadata.Version, error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	key := d.k.ledger(id)
	exists := fmt.Errorf("ledger %d (%s): %w", id, key, metadata.ErrLedgerExists)
	return d.create(ctx, fmt.Sprintf("create ledger %d at %s", id, key), key, value, exists)
}

// create is `if create_revision(key) == 0 then put(value)`, retried; the
// new version, or exists when the key is there. After a failed attempt
// that may have been applied it recognises its own create (createdByUs).
func (d *Driver) create(ctx context.Context, what, key string, value []byte, exists error) (metadata.Version, error) {
	var v metadata.Version
	err := d.do(ctx, what, func(ctx context.Context, retried bool) (err error) {
		v, err = d.createOnce(ctx, what, key, value, exists, retried)
		return err
	})
	return v, err
}

func (d *Driver) createOnce(ctx context.Context, what, key string, value []byte, exists error, retried bool) (metadata.Version, error) {
	elseOp := clientv3.OpGet(key, clientv3.WithCountOnly())
	if retried {
		elseOp = clientv3.OpGet(key)
	}
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Else(elseOp).
		Commit()
	if err != nil {
		return 0, d.storeErr(what, err)
	}
	if resp.Succeeded {
		return metadata.Version(resp.Header.Revision), nil
	}
	if cur := firstKV(resp, 0); retried && createdByUs(value, cur) {
		return metadata.Version(cur.ModRevision), nil
	}
	return 0, exists
}

// ReadLedger is a plain get; the version is the key's mod_revision.
func (d *Driver) ReadLedger(ctx context.Context, id int64) (*metadata.LedgerMetadata, metadata.Version, error) {
	if err := checkLedgerID(id); err != nil {
		return nil, 0, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, 0, err
	}
	key := d.k.ledger(id)
	resp, err := d.get(ctx, fmt.Sprintf("read ledger %d at %s", id, key), key)
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("ledger %d (%s): %w", id, key, metadata.ErrNoSuchLedger)
	}
	md, err := parseLedger(resp.Kvs[0])
	if err != nil {
		return nil, 0, err
	}
	return md, metadata.Version(resp.Kvs[0].ModRevision), nil
}

// parseLedger parses a ledger value; failures name the key.
func parseLedger(kv *mvccpb.KeyValue) (*metadata.LedgerMetadata, error) {
	md, err := metadata.ParseLedgerMetadata(kv.Value)
	if err != nil {
		return nil, metadata.Corrupt(string(kv.Key), err)
	}
	return md, nil
}

// checkExpected refuses VersionNew and VersionAny where a real version is
// needed: `mod_revision == 0` holds for an absent key, so a CAS with 0
// would create the ledger.
func checkExpected(expected metadata.Version) error {
	if expected <= 0 {
		return fmt.Errorf("%w: expected version %d is not a version read from the store", metadata.ErrBadVersion, expected)
	}
	return nil
}

// WriteLedger: txn `if mod_revision(key) == expected then put else get`; an
// else branch that finds the key means BadVersion, nothing means
// NoSuchLedger (§2.5).
func (d *Driver) WriteLedger(ctx context.Context, id int64, md *metadata.LedgerMetadata, expected metadata.Version) (metadata.Version, error) {
	if err := checkLedgerID(id); err != nil {
		return 0, err
	}
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	if err := checkExpected(expected); err != nil {
		return 0, err
	}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	key := d.k.ledger(id)
	return d.casPut(ctx, fmt.Sprintf("ledger %d (%s)", id, key), key, value, expected, metadata.ErrNoSuchLedger)
}

// casPut is `if mod_revision(key) == expected then put(value) else get`; it
// returns the new version, or ErrBadVersion / absent from the else branch.
// After a failed attempt that may have been applied it recognises its own
// write (appliedAfter).
func (d *Driver) casPut(ctx context.Context, what, key string, value []byte, expected metadata.Version, absent error) (metadata.Version, error) {
	var v metadata.Version
	err := d.do(ctx, "write "+what, func(ctx context.Context, retried bool) (err error) {
		v, err = d.casPutOnce(ctx, what, key, value, expected, absent, retried)
		return err
	})
	return v, err
}

func (d *Driver) casPutOnce(ctx context.Context, what, key string, value []byte, expected metadata.Version, absent error, retried bool) (metadata.Version, error) {
	elseOp := clientv3.OpGet(key, clientv3.WithCountOnly())
	if retried {
		elseOp = clientv3.OpGet(key)
	}
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(expected))).
		Then(clientv3.OpPut(key, string(value))).
		Else(elseOp).
		Commit()
	if err != nil {
		return 0, d.storeErr("write "+what, err)
	}
	if resp.Succeeded {
		return metadata.Version(resp.Header.Revision), nil
	}
	if retried {
		cur := firstKV(resp, 0)
		ours, err := d.appliedAfter(ctx, key, value, expected, cur)
		if err != nil {
			return 0, err
		}
		if ours {
			return metadata.Version(cur.ModRevision), nil
		}
	}
	return 0, d.casFailure(what, resp, expected, absent)
}

// casFailure interprets the else branch (a get) of a failed CAS.
func (d *Driver) casFailure(what string, resp *clientv3.TxnResponse, expected metadata.Version, absent error) error {
	if len(resp.Responses) == 1 && resp.Responses[0].GetResponseRange().GetCount() > 0 {
		return fmt.Errorf("%s: expected version %d: %w", what, expected, metadata.ErrBadVersion)
	}
	return fmt.Errorf("%s: %w", what, absent)
}

// DeleteLedger: with a version, `if mod_revision == v then delete else get`;
// with VersionAny, `if create_revision > 0 then delete` (§2.5).
func (d *Driver) DeleteLedger(ctx context.Context, id int64, expected metadata.Version) error {
	if err := checkLedgerID(id); err != nil {
		return err
	}
	if expected != metadata.VersionAny {
		if err := checkExpected(expected); err != nil {
			return err
		}
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	key := d.k.ledger(id)
	return d.casDelete(ctx, fmt.Sprintf("ledger %d (%s)", id, key), key, expected, metadata.ErrNoSuchLedger)
}

func (d *Driver) casDelete(ctx context.Context, what, key string, expected metadata.Version, absent error) error {
	return d.do(ctx, "delete "+what, func(ctx context.Context, retried bool) error {
		return d.casDeleteOnce(ctx, what, key, expected, absent, retried)
	})
}

func (d *Driver) casDeleteOnce(ctx context.Context, what, key string, expected metadata.Version, absent error, retried bool) error {
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", int64(expected))
	if expected == metadata.VersionAny {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	}
	resp, err := d.cli.Txn(ctx).
		If(cmp).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return d.storeErr("delete "+what, err)
	}
	if resp.Succeeded {
		return nil
	}
	if retried && resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return nil // gone: by our earlier attempt, or by someone else
	}
	return d.casFailure(what, resp, expected, absent)
}

// ListLedgers scans keys only, sorted, from the key of max(startID, 0) to
// the key of MaxInt64 (exclusive), the range Java's bookie GC lists (§2.3).
// Every key in that range must be a canonical ledger UUID: one that is not
// fails the listing with the key named, since skipping it would hide a
// ledger (or garbage) from the caller.
func (d *Driver) ListLedgers(ctx context.Context, startID int64, limit int) ([]int64, error) {
	if startID < 0 {
		return nil, fmt.Errorf("%w: list from %d", metadata.ErrInvalidLedgerID, startID)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("etcd: ListLedgers: limit %d must be > 0", limit)
	}
	if startID > metadata.MaxLedgerID {
		return nil, nil
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	from, end := d.k.ledger(startID), d.k.ledger(math.MaxInt64)
	resp, err := d.get(ctx, fmt.Sprintf("list ledgers from %s", from), from,
		clientv3.WithRange(end), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend),
		clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	prefix := d.k.ledgers + "/"
	ids := make([]int64, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		id, err := ParseLedgerUUID(key[len(prefix):])
		if err != nil {
			return nil, metadata.Corrupt(key, fmt.Errorf("key in the ledger range is not a ledger id: %v", err))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// WatchLedger reads the key, then watches it from the next revision. Events
// are coalesced while the reader is slow (the newest version wins); a
// DELETE or an unparsable value is delivered last.
func (d *Driver) WatchLedger(ctx context.Context, id int64) (<-chan metadata.LedgerEvent, error) {
	if err := checkLedgerID(id); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	key := d.k.ledger(id)
	resp, err := d.get(ctx, fmt.Sprintf("watch ledger %d at %s", id, key), key)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("watch ledger %d (%s): %w", id, key, metadata.ErrNoSuchLedger)
	}
	first := ledgerEvent(resp.Kvs[0])
	out := make(chan metadata.LedgerEvent)
	err = d.goWatch(ctx, func(ctx context.Context) {
		defer close(out)
		d.runLedgerWatch(ctx, key, resp.Header.Revision, first, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func ledgerEvent(kv *mvccpb.KeyValue) metadata.LedgerEvent {
	md, err := parseLedger(kv)
	if err != nil {
		return metadata.LedgerEvent{Err: err}
	}
	return metadata.LedgerEvent{Metadata: md, Version: metadata.Version(kv.ModRevision)}
}

func isFinal(ev metadata.LedgerEvent) bool { return ev.Deleted || ev.Err != nil }

func (d *Driver) runLedgerWatch(ctx context.Context, key string, rev int64, first metadata.LedgerEvent, out chan<- metadata.LedgerEvent) {
	pending, final := &first, isFinal(first)
	lastVersion := first.Version
	var wch clientv3.WatchChan
	var stopWatch context.CancelFunc = func() {}
	defer func() { stopWatch() }()
	watchFrom := func(rev int64) {
		stopWatch()
		var wctx context.Context
		wctx, stopWatch = context.WithCancel(ctx)
		wch = d.cli.Watch(wctx, key, clientv3.WithRev(rev+1))
	}
	if !final {
		watchFrom(rev)
	}
	setPending := func(ev metadata.LedgerEvent) {
		if isFinal(ev) {
			pending, final = &ev, true
			return
		}
		if ev.Version > lastVersion {
			pending, lastVersion = &ev, ev.Version
		}
	}
	for {
		if pending == nil && final {
			return
		}
		var send chan<- metadata.LedgerEvent
		var ev metadata.LedgerEvent
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
				setPending(metadata.LedgerEvent{Err: d.storeErr("watch "+key, errors.New("watch closed"))})
			case wr.CompactRevision != 0:
				// The revisions we wanted are compacted away: read the
				// current value and watch on from there.
				resp, err := d.get(ctx, "watch "+key, key)
				switch {
				case err != nil:
					setPending(metadata.LedgerEvent{Err: err})
				case len(resp.Kvs) == 0:
					setPending(metadata.LedgerEvent{Deleted: true})
				default:
					setPending(ledgerEvent(resp.Kvs[0]))
					if !final {
						watchFrom(resp.Header.Revision)
					}
				}
			case wr.Err() != nil:
				setPending(metadata.LedgerEvent{Err: d.storeErr("watch "+key, wr.Err())})
			default:
				for _, e := range wr.Events {
					if e.Type == mvccpb.DELETE {
						setPending(metadata.LedgerEvent{Deleted: true})
					} else {
						setPending(ledgerEvent(e.Kv))
					}
					if final {
						break
					}
				}
			}
		}
	}
}
