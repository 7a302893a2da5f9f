package testcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
)

// LedgerVersion is one value that a ledger's metadata key held.
type LedgerVersion struct {
	// Version is the etcd mod revision that wrote the value: the
	// metadata.Version a reader of this value got.
	Version  metadata.Version
	Metadata *metadata.LedgerMetadata
}

// ErrHistoryCompacted reports that etcd compacted away revisions of the
// history LedgerHistory was asked for, so that the history cannot be given
// whole.
var ErrHistoryCompacted = errors.New("history compacted")

// LedgerHistory returns every value ledger id's metadata key has held since
// the key was created, oldest first, each decoded as the driver decodes it.
// The last one is the value stored when LedgerHistory began; writes after
// that are not included.
//
// It reads etcd's MVCC history (a watch from the key's create revision), so
// it needs every revision since then: if etcd compacted past the create
// revision it fails with ErrHistoryCompacted rather than return part of the
// history. The cluster's etcd compacts periodically with a retention of
// embedetcd.DefaultAutoCompactionRetention (one hour), and a compaction only
// removes revisions older than that: the history of a ledger created by a
// test less than an hour ago is complete.
func (c *Cluster) LedgerHistory(ctx context.Context, id int64) ([]LedgerVersion, error) {
	d, ok := c.MD.(*etcd.Driver)
	if !ok {
		return nil, fmt.Errorf("testcluster: ledger history needs the etcd driver, the cluster has %T", c.MD)
	}
	return ledgerHistory(ctx, d, id)
}

func ledgerHistory(ctx context.Context, d *etcd.Driver, id int64) ([]LedgerVersion, error) {
	key := d.LedgerKey(id)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("testcluster: history of ledger %d (%s): "+format, append([]any{id, key}, args...)...)
	}
	cli := d.Client()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, fail("get: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fail("%w", metadata.ErrNoSuchLedger)
	}
	// cur.Version counts the puts since the key's creation (1 for the
	// create), so it is the length of the history; cur.ModRevision is its
	// last element.
	cur := resp.Kvs[0]
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := cli.Watch(wctx, key, clientv3.WithRev(cur.CreateRevision))
	var out []LedgerVersion
	for int64(len(out)) < cur.Version {
		var wr clientv3.WatchResponse
		select {
		case r, ok := <-ch:
			if !ok {
				return nil, fail("watch ended after %d of %d versions: %v", len(out), cur.Version, ctx.Err())
			}
			wr = r
		case <-ctx.Done():
			return nil, fail("after %d of %d versions: %w", len(out), cur.Version, ctx.Err())
		}
		if wr.CompactRevision != 0 {
			return nil, fail("%w: etcd compacted up to revision %d, the key was created at revision %d",
				ErrHistoryCompacted, wr.CompactRevision, cur.CreateRevision)
		}
		if err := wr.Err(); err != nil {
			return nil, fail("watch: %w", err)
		}
		for _, ev := range wr.Events {
			if int64(len(out)) == cur.Version {
				break // written after the Get
			}
			kv := ev.Kv
			if ev.Type != clientv3.EventTypePut || kv.Version != int64(len(out))+1 {
				return nil, fail("unexpected %v of version %d at revision %d after %d versions", ev.Type, kv.Version, kv.ModRevision, len(out))
			}
			md, err := metadata.ParseLedgerMetadata(kv.Value)
			if err != nil {
				return nil, fail("value at revision %d: %w", kv.ModRevision, err)
			}
			out = append(out, LedgerVersion{Version: metadata.Version(kv.ModRevision), Metadata: md})
		}
	}
	if last := out[len(out)-1].Version; last != metadata.Version(cur.ModRevision) {
		return nil, fail("the history ends at revision %d, the key's value is from revision %d", last, cur.ModRevision)
	}
	return out, nil
}

// FormatHistory renders a history on one line for test messages, e.g.
// "OPEN@12 OPEN@30[2 segments] IN_RECOVERY@40[2 segments] CLOSED@41[2 segments](end 99)":
// each version's state and revision, its number of segments when more than
// one, and a CLOSED one's last entry.
func FormatHistory(h []LedgerVersion) string {
	var b strings.Builder
	for i, v := range h {
		if i > 0 {
			b.WriteByte(' ')
		}
		md := v.Metadata
		fmt.Fprintf(&b, "%v@%d", md.State, v.Version)
		if n := len(md.Ensembles); n > 1 {
			fmt.Fprintf(&b, "[%d segments]", n)
		}
		if md.State == metadata.LedgerClosed {
			fmt.Fprintf(&b, "(end %d)", md.LastEntryID)
		}
	}
	return b.String()
}
