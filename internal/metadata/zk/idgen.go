package zk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// GenerateLedgerID generates ids as Java's ZooKeeper id generators do, so
// Java and Folio clients share one id space (doc.go, Ledger ids):
//
//   - flat: the sequence number of an ephemeral-sequential <root>/ID-;
//   - legacy hierarchical: of <root>/idgen/ID-;
//   - hierarchical and long hierarchical: of <root>/idgen/ID- until that
//     passes 2^31-2, then (and for good once <root>/idgen-long exists)
//     HOB<<32 | the sequence number of <root>/idgen-long/HOB-%010d/ID-,
//     HOB being the highest HOB- node (a new one when its sequence
//     overflows).
//
// The znode is deleted at once. Id 0, which a fresh idgen hands out first,
// is skipped (Folio's ids start at 1).
func (d *Driver) GenerateLedgerID(ctx context.Context) (int64, error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	m, err := d.manager(ctx)
	if err != nil {
		return 0, err
	}
	for {
		id, err := d.generate(ctx, m)
		if err != nil {
			return 0, err
		}
		if id != 0 {
			return id, nil
		}
	}
}

func (d *Driver) generate(ctx context.Context, m Manager) (int64, error) {
	switch m {
	case Flat, LegacyHierarchical:
		dir := d.p.idgen
		if m == Flat {
			dir = d.p.root
		}
		id, overflow, err := d.sequenceID(ctx, dir)
		if err != nil {
			return 0, err
		}
		if overflow {
			return 0, fmt.Errorf("zookeeper: generate ledger id under %s: the %s ledger manager's ids are exhausted (2^31-1)", dir, m)
		}
		return id, nil
	}
	d.mu.Lock()
	long := d.mu.longIDs
	d.mu.Unlock()
	if !long {
		st, err := d.conn.exists(ctx, d.p.idgenLong)
		if err != nil {
			return 0, d.storeErr("read "+d.p.idgenLong, err)
		}
		if st == nil {
			id, overflow, err := d.sequenceID(ctx, d.p.idgen)
			if err != nil || !overflow {
				return id, err
			}
			// 31-bit ids are used up: switch to 63-bit ids for good.
			if err := d.conn.ensurePath(ctx, d.p.idgenLong); err != nil {
				return 0, d.storeErr("create "+d.p.idgenLong, err)
			}
		}
		d.mu.Lock()
		d.mu.longIDs = true
		d.mu.Unlock()
	}
	return d.longID(ctx)
}

// sequenceID creates and deletes an ephemeral-sequential dir/ID- znode and
// returns its sequence number; overflow when the number is not in [0,
// 2^31-2] (ZkLedgerIdGenerator's LedgerIdOverflowException).
func (d *Driver) sequenceID(ctx context.Context, dir string) (id int64, overflow bool, err error) {
	prefix := dir + "/" + idPrefix
	created, err := d.conn.createFull(ctx, prefix, nil, gozk.FlagEphemeralSequential)
	if err != nil {
		return 0, false, d.storeErr("generate ledger id at "+prefix, err)
	}
	// The znode only carries the number; deleting it is best effort (it is
	// ephemeral: it goes with the session anyway).
	_ = d.conn.delete(ctx, created, -1)
	n, err := parseSequence(created, prefix)
	if err != nil {
		return 0, false, err
	}
	return n, n < 0 || n >= math.MaxInt32, nil
}

// parseSequence reads the sequence number ZooKeeper appended to prefix
// (%010d of a signed 32-bit counter).
func parseSequence(created, prefix string) (int64, error) {
	if !strings.HasPrefix(created, prefix) {
		return 0, fmt.Errorf("zookeeper: sequential znode %q does not start with %q", created, prefix)
	}
	s := created[len(prefix):]
	neg := strings.HasPrefix(s, "-")
	n, ok := parseDigits(strings.TrimPrefix(s, "-"))
	if !ok {
		return 0, fmt.Errorf("zookeeper: sequential znode %q has no sequence number", created)
	}
	if neg {
		n = -n
	}
	return n, nil
}

// longID is LongZkLedgerIdGenerator: the highest HOB- node's number in the
// high 32 bits, an idgen sequence under it in the low ones; a new HOB- node
// when that sequence overflows. It keeps the three highest HOB- nodes and
// deletes older empty ones, as Java does.
func (d *Driver) longID(ctx context.Context) (int64, error) {
	for attempt := 0; attempt < 100; attempt++ {
		names, err := d.conn.children(ctx, d.p.idgenLong)
		if err != nil {
			return 0, d.storeErr("list "+d.p.idgenLong, err)
		}
		var hobs []int64
		for _, n := range names {
			if h, ok := parseDigits(strings.TrimPrefix(n, hobPrefix)); ok && strings.HasPrefix(n, hobPrefix) {
				hobs = append(hobs, h)
			}
		}
		if len(hobs) == 0 {
			if err := d.createHOB(ctx, 1); err != nil {
				return 0, err
			}
			continue
		}
		slices.Sort(hobs)
		high := hobs[len(hobs)-1]
		low, overflow, err := d.sequenceID(ctx, d.hobPath(high))
		if err != nil {
			return 0, err
		}
		if overflow {
			if err := d.createHOB(ctx, high+1); err != nil {
				return 0, err
			}
			continue
		}
		for _, old := range hobs[:max(0, len(hobs)-3)] {
			_ = d.conn.delete(ctx, d.hobPath(old), 0) // fails while in use: fine
		}
		if high >= 1<<31 {
			return 0, fmt.Errorf("zookeeper: generate ledger id: %s reached HOB %d: 63-bit ids are exhausted", d.p.idgenLong, high)
		}
		id := high<<32 | low
		if id > metadata.MaxLedgerID {
			return 0, fmt.Errorf("zookeeper: generate ledger id: %d is above %d", id, int64(metadata.MaxLedgerID))
		}
		return id, nil
	}
	return 0, fmt.Errorf("zookeeper: generate ledger id: %s keeps changing", d.p.idgenLong)
}

func (d *Driver) hobPath(h int64) string {
	return fmt.Sprintf("%s/%s%010d", d.p.idgenLong, hobPrefix, h)
}

func (d *Driver) createHOB(ctx context.Context, h int64) error {
	_, err := d.conn.create(ctx, d.hobPath(h), nil, gozk.FlagPersistent)
	if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
		return d.storeErr("create "+d.hobPath(h), err)
	}
	return nil
}
