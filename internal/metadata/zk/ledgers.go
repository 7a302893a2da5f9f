package zk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// ledgerPath resolves the manager and returns ledger id's znode.
func (d *Driver) ledgerPath(ctx context.Context, id int64) (string, Manager, error) {
	if err := checkLedgerID(id); err != nil {
		return "", 0, err
	}
	m, err := d.manager(ctx)
	if err != nil {
		return "", 0, err
	}
	p, err := m.LedgerPath(d.p.root, id)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", metadata.ErrInvalidLedgerID, err)
	}
	return p, m, nil
}

// CreateLedger generates ids until CreateLedgerMetadata finds a free znode
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
	return 0, 0, fmt.Errorf("zookeeper: create ledger: %d generated ids were all taken under %s", d.cfg.MaxCreateAttempts, d.p.root)
}

// CreateLedgerMetadata creates the ledger's znode (and its missing parents,
// as Java's asyncCreateFullPathOptimistic does) if absent.
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
	p, _, err := d.ledgerPath(ctx, id)
	if err != nil {
		return 0, err
	}
	st, err := d.conn.createFullWithStat(ctx, p, value, gozk.FlagPersistent)
	if errors.Is(err, gozk.ErrNodeExists) {
		return 0, fmt.Errorf("ledger %d (%s): %w", id, p, metadata.ErrLedgerExists)
	}
	if err != nil {
		return 0, d.storeErr(fmt.Sprintf("create ledger %d at %s", id, p), err)
	}
	return version(st), nil
}

// ReadLedger reads the ledger's znode; the version is its mzxid. As in
// Java, a value without a stored ctime gets the znode's creation time.
func (d *Driver) ReadLedger(ctx context.Context, id int64) (*metadata.LedgerMetadata, metadata.Version, error) {
	if err := d.checkOpen(); err != nil {
		return nil, 0, err
	}
	p, _, err := d.ledgerPath(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	b, st, err := d.conn.get(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, 0, fmt.Errorf("ledger %d (%s): %w", id, p, metadata.ErrNoSuchLedger)
	}
	if err != nil {
		return nil, 0, d.storeErr(fmt.Sprintf("read ledger %d at %s", id, p), err)
	}
	md, err := parseLedger(p, b, st)
	if err != nil {
		return nil, 0, err
	}
	return md, version(st), nil
}

// parseLedger parses a ledger value; failures name the znode.
func parseLedger(p string, b []byte, st *gozk.Stat) (*metadata.LedgerMetadata, error) {
	md, err := metadata.ParseLedgerMetadata(b)
	if err != nil {
		return nil, metadata.Corrupt(p, err)
	}
	if !md.StoreCtime {
		md.Ctime = st.Ctime
	}
	return md, nil
}

// currentStat returns the znode's stat for a compare-and-set against
// expected (an mzxid). A server may answer from a state older than one the
// caller has seen through another server: when the mzxid read is below
// expected, the read is repeated after a sync with the leader.
func (d *Driver) currentStat(ctx context.Context, p string, expected metadata.Version) (*gozk.Stat, error) {
	st, err := d.conn.exists(ctx, p)
	if err != nil || st == nil || version(st) >= expected {
		return st, err
	}
	if err := d.conn.sync(ctx, p); err != nil && !errors.Is(err, gozk.ErrNoNode) {
		return nil, err
	}
	return d.conn.exists(ctx, p)
}

// WriteLedger is a compare-and-set on the znode: the stored mzxid must be
// expected, and the write is a setData conditional on the znode version
// read with it, so nothing can come in between (doc.go, Versions).
func (d *Driver) WriteLedger(ctx context.Context, id int64, md *metadata.LedgerMetadata, expected metadata.Version) (metadata.Version, error) {
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	if err := checkLedgerID(id); err != nil {
		return 0, err
	}
	if err := checkExpected(expected); err != nil {
		return 0, err
	}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	p, _, err := d.ledgerPath(ctx, id)
	if err != nil {
		return 0, err
	}
	what := fmt.Sprintf("ledger %d (%s)", id, p)
	st, err := d.casSet(ctx, what, p, value, expected, metadata.ErrNoSuchLedger)
	if err != nil {
		return 0, err
	}
	return version(st), nil
}

// casSet sets p to value if its mzxid is expected.
func (d *Driver) casSet(ctx context.Context, what, p string, value []byte, expected metadata.Version, absent error) (*gozk.Stat, error) {
	st, err := d.currentStat(ctx, p, expected)
	if err != nil {
		return nil, d.storeErr("read "+what, err)
	}
	if st == nil {
		return nil, fmt.Errorf("%s: %w", what, absent)
	}
	if version(st) != expected {
		return nil, fmt.Errorf("%s: expected version %d, stored %d: %w", what, expected, version(st), metadata.ErrBadVersion)
	}
	nst, err := d.conn.set(ctx, p, value, st.Version)
	switch {
	case errors.Is(err, gozk.ErrBadVersion):
		return nil, fmt.Errorf("%s: expected version %d: %w", what, expected, metadata.ErrBadVersion)
	case errors.Is(err, gozk.ErrNoNode):
		return nil, fmt.Errorf("%s: %w", what, absent)
	case err != nil:
		return nil, d.storeErr("write "+what, err)
	}
	return nst, nil
}

// casDelete deletes p if its mzxid is expected (any version with
// VersionAny).
func (d *Driver) casDelete(ctx context.Context, what, p string, expected metadata.Version, absent error) error {
	zv := int32(-1)
	if expected != metadata.VersionAny {
		st, err := d.currentStat(ctx, p, expected)
		if err != nil {
			return d.storeErr("read "+what, err)
		}
		if st == nil {
			return fmt.Errorf("%s: %w", what, absent)
		}
		if version(st) != expected {
			return fmt.Errorf("%s: expected version %d, stored %d: %w", what, expected, version(st), metadata.ErrBadVersion)
		}
		zv = st.Version
	}
	err := d.conn.delete(ctx, p, zv)
	switch {
	case errors.Is(err, gozk.ErrBadVersion):
		return fmt.Errorf("%s: expected version %d: %w", what, expected, metadata.ErrBadVersion)
	case errors.Is(err, gozk.ErrNoNode):
		return fmt.Errorf("%s: %w", what, absent)
	case err != nil:
		return d.storeErr("delete "+what, err)
	}
	return nil
}

// DeleteLedger deletes the ledger's znode if its version is expected, then,
// for the hierarchical managers, its parents that are left empty (Java's
// asyncDeleteFullPathOptimistic; a concurrent create under them re-creates
// them).
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
	p, m, err := d.ledgerPath(ctx, id)
	if err != nil {
		return err
	}
	if err := d.casDelete(ctx, fmt.Sprintf("ledger %d (%s)", id, p), p, expected, metadata.ErrNoSuchLedger); err != nil {
		return err
	}
	if m != Flat {
		d.deleteEmptyParents(ctx, p, d.p.root)
	}
	return nil
}

// deleteEmptyParents deletes the ancestors of p below stop while they have
// no children (best effort: a parent that gained a child stays).
func (d *Driver) deleteEmptyParents(ctx context.Context, p, stop string) {
	for dir := path.Dir(p); dir != stop && len(dir) > len(stop); dir = path.Dir(dir) {
		st, err := d.conn.exists(ctx, dir)
		if err != nil || st == nil || st.NumChildren != 0 {
			return
		}
		if err := d.conn.delete(ctx, dir, st.Version); err != nil {
			return
		}
	}
}

// ListLedgers walks the manager's ledger trees in id order (children sorted
// at every level: fixed-width digit names sort as numbers), pruning
// subtrees below startID, and stops after limit ids. In a tree, a name
// that is not the level's digits (or "L" and digits for a ledger) fails the
// listing naming the znode: it is not skipped, as Java's GC would skip it.
// Top-level names that are not ledger trees (available, cookies, idgen, …)
// are not part of the listing.
func (d *Driver) ListLedgers(ctx context.Context, startID int64, limit int) ([]int64, error) {
	if startID < 0 {
		return nil, fmt.Errorf("%w: list from %d", metadata.ErrInvalidLedgerID, startID)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("zookeeper: ListLedgers: limit %d must be > 0", limit)
	}
	if startID > metadata.MaxLedgerID {
		return nil, nil
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	m, err := d.manager(ctx)
	if err != nil {
		return nil, err
	}
	// Java syncs before listing (ZkUtils.getChildrenInSingleNode): a
	// bookie's GC must not miss a ledger created through another server.
	if err := d.conn.sync(ctx, d.p.root); err != nil && !errors.Is(err, gozk.ErrNoNode) {
		return nil, d.storeErr("sync "+d.p.root, err)
	}
	top, err := d.conn.children(ctx, d.p.root)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, d.storeErr("list "+d.p.root, err)
	}
	slices.Sort(top)
	var ids []int64
	if m == Flat {
		for _, name := range top {
			if isSpecialNode(name) || len(name) == 0 || name[0] != 'L' {
				continue
			}
			if !m.isLedgerParent(name) {
				return nil, metadata.Corrupt(d.p.root+"/"+name, fmt.Errorf("znode under the flat ledger root is not L<ten or more digits>"))
			}
			id, ok := parseDigits(name[1:])
			if !ok || id > metadata.MaxLedgerID {
				return nil, metadata.Corrupt(d.p.root+"/"+name, fmt.Errorf("ledger id out of range"))
			}
			if id >= startID {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
	} else {
		for _, widths := range m.trees() {
			w := &treeWalk{d: d, widths: widths, start: uint64(startID), limit: limit}
			for _, name := range top {
				if len(name) != widths[0] || !allDigits(name) {
					continue
				}
				if err := w.walk(ctx, d.p.root+"/"+name, 1, name); err != nil {
					return nil, err
				}
				if w.full() {
					break
				}
			}
			ids = append(ids, w.ids...)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, nil
}

// treeWalk collects, in order, up to limit ids ≥ start from one ledger
// tree whose levels have the digit widths widths (the last is the leaf's).
type treeWalk struct {
	d      *Driver
	widths []int
	start  uint64
	limit  int
	ids    []int64
}

func (w *treeWalk) full() bool { return len(w.ids) >= w.limit }

// walk visits dir, the node at depth level whose digits so far are prefix.
func (w *treeWalk) walk(ctx context.Context, dir string, level int, prefix string) error {
	rest := 0 // digits below this node
	for _, n := range w.widths[level:] {
		rest += n
	}
	// Prune: every id below this node is at most prefix followed by nines.
	if max, ok := parseDigits(prefix + nines(rest)); ok && uint64(max) < w.start {
		return nil
	}
	names, err := w.d.conn.children(ctx, dir)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil // deleted meanwhile (an emptied parent)
	}
	if err != nil {
		return w.d.storeErr("list "+dir, err)
	}
	slices.Sort(names)
	leaf := level == len(w.widths)-1
	width := w.widths[level]
	for _, name := range names {
		digits := name
		if leaf {
			if len(name) == 0 || name[0] != 'L' {
				return metadata.Corrupt(dir+"/"+name, fmt.Errorf("znode in the ledger tree is not L<%d digits>", width))
			}
			digits = name[1:]
		}
		if len(digits) != width || !allDigits(digits) {
			return metadata.Corrupt(dir+"/"+name, fmt.Errorf("znode in the ledger tree is not %d digits", width))
		}
		if !leaf {
			if err := w.walk(ctx, dir+"/"+name, level+1, prefix+digits); err != nil {
				return err
			}
			if w.full() {
				return nil
			}
			continue
		}
		id, ok := parseDigits(prefix + digits)
		if !ok || id > metadata.MaxLedgerID {
			return metadata.Corrupt(dir+"/"+name, fmt.Errorf("ledger id %s%s out of range", prefix, digits))
		}
		if uint64(id) >= w.start {
			w.ids = append(w.ids, id)
			if w.full() {
				return nil
			}
		}
	}
	return nil
}

func nines(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '9'
	}
	return string(b)
}

// parseDigits parses a decimal string of up to 19 digits as a
// non-negative int64; false if it does not fit.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// WatchLedger reads the znode with a watch and re-reads it at every change
// (ZooKeeper watches fire once). Events are coalesced while the reader is
// slow (the newest version wins); a deletion or an unparsable value is
// delivered last. When the driver's session expires (its watches are
// lost), the watch reads the znode again and carries on.
func (d *Driver) WatchLedger(ctx context.Context, id int64) (<-chan metadata.LedgerEvent, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	p, _, err := d.ledgerPath(ctx, id)
	if err != nil {
		return nil, err
	}
	b, st, ch, err := d.conn.getW(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, fmt.Errorf("watch ledger %d (%s): %w", id, p, metadata.ErrNoSuchLedger)
	}
	if err != nil {
		return nil, d.storeErr(fmt.Sprintf("watch ledger %d at %s", id, p), err)
	}
	first := ledgerEvent(p, b, st)
	out := make(chan metadata.LedgerEvent)
	err = d.goWatch(ctx, func(ctx context.Context) {
		defer close(out)
		d.runLedgerWatch(ctx, p, first, ch, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func ledgerEvent(p string, b []byte, st *gozk.Stat) metadata.LedgerEvent {
	md, err := parseLedger(p, b, st)
	if err != nil {
		return metadata.LedgerEvent{Err: err}
	}
	return metadata.LedgerEvent{Metadata: md, Version: version(st)}
}

func isFinal(ev metadata.LedgerEvent) bool { return ev.Deleted || ev.Err != nil }

func (d *Driver) runLedgerWatch(ctx context.Context, p string, first metadata.LedgerEvent, zch <-chan gozk.Event, out chan<- metadata.LedgerEvent) {
	pending, final := &first, isFinal(first)
	last := first.Version
	setPending := func(ev metadata.LedgerEvent) {
		if isFinal(ev) {
			pending, final = &ev, true
			return
		}
		if ev.Version > last {
			pending, last = &ev, ev.Version
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
		var recv <-chan gozk.Event
		if !final {
			recv = zch
		}
		select {
		case <-ctx.Done():
			return
		case send <- ev:
			pending = nil
		case zev, ok := <-recv:
			if ok && zev.Type == gozk.EventNodeDeleted {
				setPending(metadata.LedgerEvent{Deleted: true})
				continue
			}
			if ctx.Err() != nil {
				return
			}
			// Changed, or the watch was lost (session expired): read and
			// watch again, through connection errors.
			for {
				b, st, ch, err := d.conn.getW(ctx, p)
				switch {
				case errors.Is(err, gozk.ErrNoNode):
					setPending(metadata.LedgerEvent{Deleted: true})
				case err != nil && d.transient(err):
					if !d.backoff(ctx) {
						return
					}
					continue
				case err != nil:
					if ctx.Err() != nil {
						return
					}
					setPending(metadata.LedgerEvent{Err: d.storeErr("watch "+p, err)})
				default:
					zch = ch
					setPending(ledgerEvent(p, b, st))
				}
				break
			}
		}
	}
}
