package zk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// AutoRecovery on BookKeeper's ZooKeeper paths (doc.go, AutoRecovery), so
// that Java and Folio auditors and replication workers share one cluster.

// ensureUR creates underreplication/, its LAYOUT, ledgers/ and locks/ if
// missing, as Java's ZkLedgerUnderreplicationManager does when it starts;
// an existing LAYOUT must be BASIC version 1. Done once per driver.
func (d *Driver) ensureUR(ctx context.Context) error {
	d.mu.Lock()
	ready := d.mu.urReady
	d.mu.Unlock()
	if ready {
		return nil
	}
	if err := d.conn.ensurePath(ctx, d.p.ur); err != nil {
		return d.storeErr("create "+d.p.ur, err)
	}
	_, err := d.conn.create(ctx, d.p.urLayout, []byte(URLayoutValue), gozk.FlagPersistent)
	if errors.Is(err, gozk.ErrNodeExists) {
		b, _, gerr := d.conn.get(ctx, d.p.urLayout)
		if gerr != nil {
			return d.storeErr("read "+d.p.urLayout, gerr)
		}
		var f formatpb.LedgerRereplicationLayoutFormat
		if perr := prototext.Unmarshal(b, &f); perr != nil || f.GetType() != "BASIC" || f.GetVersion() != 1 {
			return metadata.Corrupt(d.p.urLayout, fmt.Errorf("under-replication layout %q is not BASIC version 1", b))
		}
	} else if err != nil {
		return d.storeErr("create "+d.p.urLayout, err)
	}
	for _, p := range []string{d.p.urLedgers, d.p.urLocks} {
		if err := d.conn.ensurePath(ctx, p); err != nil {
			return d.storeErr("create "+p, err)
		}
	}
	d.mu.Lock()
	d.mu.urReady = true
	d.mu.Unlock()
	return nil
}

func (d *Driver) parseRecord(id int64, p string, b []byte, st *gozk.Stat) (metadata.UnderReplicatedLedger, error) {
	missing, ctime, err := metadata.DecodeUnderReplicated(b)
	if err != nil {
		return metadata.UnderReplicatedLedger{}, metadata.Corrupt(p, err)
	}
	return metadata.UnderReplicatedLedger{LedgerID: id, MissingReplicas: missing, Ctime: ctime, Version: version(st)}, nil
}

// MarkLedgerUnderReplicated creates the record (and its hex parents) or
// merges missing into it with a setData on the version read. A record that
// already lists every missing bookie is not rewritten.
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
	if err := d.ensureUR(ctx); err != nil {
		return err
	}
	p := d.p.urRecord(ledgerID)
	for {
		b, st, err := d.conn.get(ctx, p)
		if errors.Is(err, gozk.ErrNoNode) {
			m := slices.Clone(missing)
			slices.Sort(m)
			_, err := d.conn.createFull(ctx, p, []byte(metadata.EncodeUnderReplicated(slices.Compact(m), time.Now())), gozk.FlagPersistent)
			if errors.Is(err, gozk.ErrNodeExists) {
				continue
			}
			if err != nil {
				return d.storeErr("mark "+p, err)
			}
			return nil
		}
		if err != nil {
			return d.storeErr("read "+p, err)
		}
		rec, err := d.parseRecord(ledgerID, p, b, st)
		if err != nil {
			return err
		}
		merged := append(slices.Clone(rec.MissingReplicas), missing...)
		slices.Sort(merged)
		merged = slices.Compact(merged)
		if slices.Equal(merged, rec.MissingReplicas) {
			return nil
		}
		_, err = d.conn.set(ctx, p, []byte(metadata.EncodeUnderReplicated(merged, rec.Ctime)), st.Version)
		if errors.Is(err, gozk.ErrBadVersion) || errors.Is(err, gozk.ErrNoNode) {
			continue
		}
		if err != nil {
			return d.storeErr("mark "+p, err)
		}
		return nil
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
	p := d.p.urRecord(ledgerID)
	b, st, err := d.conn.get(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return metadata.UnderReplicatedLedger{}, fmt.Errorf("under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.UnderReplicatedLedger{}, d.storeErr("read "+p, err)
	}
	return d.parseRecord(ledgerID, p, b, st)
}

// ListUnderReplicatedLedgers walks underreplication/ledgers/ in id order
// (four levels of 4-hex-digit names, then urL%010d records), pruning what
// lies below startID. A name that is not of its level's form fails the
// listing, naming it.
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
	w := &urWalk{d: d, start: uint64(startID), limit: limit}
	if err := w.walk(ctx, d.p.urLedgers, 0, 0); err != nil {
		return nil, err
	}
	return w.out, nil
}

type urWalk struct {
	d     *Driver
	start uint64
	limit int
	out   []metadata.UnderReplicatedLedger
}

// walk visits dir at depth level (0: ledgers/), whose groups so far make
// the high bits prefix.
func (w *urWalk) walk(ctx context.Context, dir string, level int, prefix uint64) error {
	if level > 0 {
		shift := uint(16 * (4 - level))
		if prefix<<shift|(1<<shift-1) < w.start {
			return nil // every id below is smaller than start
		}
	}
	names, err := w.d.conn.children(ctx, dir)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return w.d.storeErr("list "+dir, err)
	}
	slices.Sort(names)
	if level < 4 {
		for _, n := range names {
			g, err := strconv.ParseUint(n, 16, 16)
			if err != nil || len(n) != 4 || strings.ToLower(n) != n {
				return metadata.Corrupt(dir+"/"+n, fmt.Errorf("znode in the under-replication tree is not 4 lowercase hex digits"))
			}
			if err := w.walk(ctx, dir+"/"+n, level+1, prefix<<16|g); err != nil {
				return err
			}
			if len(w.out) >= w.limit {
				return nil
			}
		}
		return nil
	}
	var ids []int64
	for _, n := range names {
		id, ok := int64(0), false
		if strings.HasPrefix(n, "urL") {
			id, ok = parseDigits(n[3:])
		}
		if !ok || len(n) < 13 || uint64(id) != prefix {
			return metadata.Corrupt(dir+"/"+n, fmt.Errorf("znode is not urL%%010d of the ledger id its parents name (%d)", prefix))
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if uint64(id) < w.start {
			continue
		}
		p := w.d.p.urRecord(id)
		b, st, err := w.d.conn.get(ctx, p)
		if errors.Is(err, gozk.ErrNoNode) {
			continue // cleared meanwhile
		}
		if err != nil {
			return w.d.storeErr("read "+p, err)
		}
		rec, err := w.d.parseRecord(id, p, b, st)
		if err != nil {
			return err
		}
		w.out = append(w.out, rec)
		if len(w.out) >= w.limit {
			return nil
		}
	}
	return nil
}

// MarkLedgerReplicated deletes the record if its version is expected, then
// its hex parents left empty (as Java does), and in every case the
// ledger's lock.
func (d *Driver) MarkLedgerReplicated(ctx context.Context, ledgerID int64, expected metadata.Version) error {
	if err := checkLedgerID(ledgerID); err != nil {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	p, lock := d.p.urRecord(ledgerID), d.p.urLock(ledgerID)
	releaseLock := func() error {
		if err := d.conn.delete(ctx, lock, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return d.storeErr("unlock "+lock, err)
		}
		return nil
	}
	err := d.casDelete(ctx, fmt.Sprintf("under-replicated ledger %d (%s)", ledgerID, p), p, expected, metadata.ErrNotFound)
	if lerr := releaseLock(); err == nil {
		err = lerr
	}
	if err != nil {
		return err
	}
	d.deleteEmptyParents(ctx, p, d.p.urLedgers)
	return nil
}

func (d *Driver) zkSession(s metadata.Session) (*session, error) {
	ss, ok := s.(*session)
	if !ok || ss.d != d {
		return nil, fmt.Errorf("zookeeper: session %T is not one of this driver's", s)
	}
	if ss.expired() {
		return nil, ss.expiredErr("use session")
	}
	return ss, nil
}

// lockData is the value of a lock or vote: the TextFormat of
// LockDataFormat / AuditorVoteFormat, `bookieId: "<id>"` (Java writes its
// host name into locks; Folio the worker's bookie id).
func lockData(id metadata.BookieID) []byte { return []byte(fmt.Sprintf("bookieId: %q\n", string(id))) }

// ReplicationWorker implements metadata.ReplicationWorkerReader: the
// bookieId of the lock znode's LockDataFormat (text), as Java's
// getReplicationWorkerIdRereplicatingLedger reads it.
func (d *Driver) ReplicationWorker(ctx context.Context, ledgerID int64) (metadata.BookieID, error) {
	if err := checkLedgerID(ledgerID); err != nil {
		return "", err
	}
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	p := d.p.urLock(ledgerID)
	b, _, err := d.conn.get(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return "", fmt.Errorf("lock of under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
	}
	if err != nil {
		return "", d.storeErr("read "+p, err)
	}
	var f formatpb.LockDataFormat
	if err := prototext.Unmarshal(b, &f); err != nil {
		return "", metadata.Corrupt(p, fmt.Errorf("lock %q is not a LockDataFormat: %w", b, err))
	}
	id := metadata.BookieID(f.GetBookieId())
	if err := metadata.ValidateBookieID(id); err != nil {
		return "", metadata.Corrupt(p, err)
	}
	return id, nil
}

// LockUnderReplicatedLedger creates the ephemeral
// `underreplication/locks/urL%010d` under session s, in one multi with a
// check that the record exists. ErrLocked if the lock exists, ErrNotFound
// if the record does not.
func (d *Driver) LockUnderReplicatedLedger(ctx context.Context, s metadata.Session, ledgerID int64, owner metadata.BookieID) (metadata.Lock, error) {
	if err := checkLedgerID(ledgerID); err != nil {
		return nil, err
	}
	ss, err := d.zkSession(s)
	if err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	p, lock := d.p.urRecord(ledgerID), d.p.urLock(ledgerID)
	for attempt := 0; ; attempt++ {
		rs, err := ss.c.multi(ctx,
			&gozk.CheckVersionRequest{Path: p, Version: -1},
			&gozk.CreateRequest{Path: lock, Acl: openACL, Flags: gozk.FlagEphemeral},
			&gozk.SetDataRequest{Path: lock, Data: lockData(owner), Version: 0})
		if err == nil {
			if err := ss.own(ctx, lock, rs[2].Stat); err != nil {
				return nil, err
			}
			return d.newNodeLock(ss, lock, nil)
		}
		i, opErr := failedOp(rs, err)
		switch {
		case i == 0 && errors.Is(opErr, gozk.ErrNoNode):
			return nil, fmt.Errorf("lock under-replicated ledger %d: %w", ledgerID, metadata.ErrNotFound)
		case i == 1 && errors.Is(opErr, gozk.ErrNodeExists):
			return nil, fmt.Errorf("lock under-replicated ledger %d: %w", ledgerID, metadata.ErrLocked)
		case i == 1 && errors.Is(opErr, gozk.ErrNoNode) && attempt == 0:
			if err := d.ensureUR(ctx); err != nil {
				return nil, err
			}
		default:
			return nil, ss.regErr(lock, err)
		}
	}
}

// nodeLock is a held ephemeral znode: Done closes when the znode is
// deleted (by anyone), the session ends, or Unlock is called.
type nodeLock struct {
	ss       *session
	path     string
	done     chan struct{}
	once     sync.Once
	stop     context.CancelFunc
	onUnlock func(ctx context.Context) error
}

func (d *Driver) newNodeLock(ss *session, p string, onUnlock func(ctx context.Context) error) (*nodeLock, error) {
	l := &nodeLock{ss: ss, path: p, done: make(chan struct{}), onUnlock: onUnlock}
	wctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	err := d.goWatch(wctx, func(ctx context.Context) {
		defer l.close()
		for {
			st, ch, err := ss.c.existsW(ctx, p)
			if err != nil && d.transient(err) && !ss.expired() {
				// Between servers: the session (and the znode) may well
				// live on; the session's own expiry ends the lock.
				if !d.backoff(ctx) {
					return
				}
				continue
			}
			if err != nil || st == nil || st.EphemeralOwner != ss.c.sessionID {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-ss.done:
				return
			case ev := <-ch:
				if ev.Type == gozk.EventNodeDeleted {
					return
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

func (l *nodeLock) close() { l.once.Do(func() { close(l.done) }) }

func (l *nodeLock) Done() <-chan struct{} { return l.done }

// Unlock deletes the znode if it is still this session's.
func (l *nodeLock) Unlock(ctx context.Context) error {
	defer l.stop()
	defer l.close()
	if l.onUnlock != nil {
		if err := l.onUnlock(ctx); err != nil {
			return err
		}
	}
	select {
	case <-l.done:
		return nil
	default:
	}
	st, err := l.ss.d.conn.exists(ctx, l.path)
	if err != nil {
		return l.ss.d.storeErr("unlock "+l.path, err)
	}
	if st == nil || st.EphemeralOwner != l.ss.c.sessionID {
		return nil
	}
	if err := l.ss.d.conn.delete(ctx, l.path, st.Version); err != nil && !errors.Is(err, gozk.ErrNoNode) && !errors.Is(err, gozk.ErrBadVersion) {
		return l.ss.d.storeErr("unlock "+l.path, err)
	}
	return nil
}

// SetReplicationEnabled creates (disable) or deletes (enable)
// `underreplication/disable`, as Java's disable/enableLedgerReplication.
func (d *Driver) SetReplicationEnabled(ctx context.Context, enabled bool) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	if enabled {
		if err := d.conn.delete(ctx, d.p.urDisable, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return d.storeErr("delete "+d.p.urDisable, err)
		}
		return nil
	}
	if _, err := d.conn.createFull(ctx, d.p.urDisable, nil, gozk.FlagPersistent); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
		return d.storeErr("create "+d.p.urDisable, err)
	}
	return nil
}

// ReplicationEnabled reports whether `underreplication/disable` is absent.
func (d *Driver) ReplicationEnabled(ctx context.Context) (bool, error) {
	if err := d.checkOpen(); err != nil {
		return false, err
	}
	st, err := d.conn.exists(ctx, d.p.urDisable)
	if err != nil {
		return false, d.storeErr("read "+d.p.urDisable, err)
	}
	return st == nil, nil
}

// EncodeDelay is the stored text of a lost-bookie recovery delay: whole
// seconds in decimal, what Java writes (Integer.toString) and reads
// (Integer.parseInt). A delay that is not a whole number of seconds, or
// does not fit Java's int, cannot be stored.
func EncodeDelay(delay time.Duration) (string, error) {
	if delay < 0 || delay%time.Second != 0 || delay/time.Second > 1<<31-1 {
		return "", fmt.Errorf("lost bookie recovery delay %v: ZooKeeper stores whole seconds (Java reads an int), 0 to 2147483647", delay)
	}
	return strconv.FormatInt(int64(delay/time.Second), 10), nil
}

// DecodeDelay parses EncodeDelay's text strictly as Java's
// Integer.parseInt would (an optional sign, decimal digits); a negative
// delay is refused.
func DecodeDelay(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("lost bookie recovery delay %q is not a non-negative whole number of seconds", s)
	}
	return time.Duration(n) * time.Second, nil
}

// SetLostBookieRecoveryDelay writes `underreplication/lostBookieRecoveryDelay`
// (setData if present, else create, as Java does); every write is seen by
// watchers, also one that repeats the value (triggerAudit).
func (d *Driver) SetLostBookieRecoveryDelay(ctx context.Context, delay time.Duration) error {
	text, err := EncodeDelay(delay)
	if err != nil {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	return d.put(ctx, d.p.urDelay, []byte(text))
}

// put sets p to b, creating it (and its parents) if absent.
func (d *Driver) put(ctx context.Context, p string, b []byte) error {
	for attempt := 0; attempt < 5; attempt++ {
		_, err := d.conn.set(ctx, p, b, -1)
		if err == nil {
			return nil
		}
		if !errors.Is(err, gozk.ErrNoNode) {
			return d.storeErr("write "+p, err)
		}
		_, err = d.conn.createFull(ctx, p, b, gozk.FlagPersistent)
		if err == nil {
			return nil
		}
		if !errors.Is(err, gozk.ErrNodeExists) {
			return d.storeErr("create "+p, err)
		}
	}
	return fmt.Errorf("zookeeper: write %s: it keeps appearing and disappearing", p)
}

// LostBookieRecoveryDelay implements metadata.UnderReplication.
func (d *Driver) LostBookieRecoveryDelay(ctx context.Context) (time.Duration, error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	b, _, err := d.conn.get(ctx, d.p.urDelay)
	if errors.Is(err, gozk.ErrNoNode) {
		return 0, fmt.Errorf("lost bookie recovery delay: %w", metadata.ErrNotFound)
	}
	if err != nil {
		return 0, d.storeErr("read "+d.p.urDelay, err)
	}
	v, err := DecodeDelay(string(b))
	if err != nil {
		return 0, metadata.Corrupt(d.p.urDelay, err)
	}
	return v, nil
}

// WatchLostBookieRecoveryDelay watches the delay znode. Every write is a
// new mzxid and so an event, also one that repeats the value, unless
// writes come faster than the watch is re-armed (ZooKeeper watches fire
// once): then the last value is delivered once.
func (d *Driver) WatchLostBookieRecoveryDelay(ctx context.Context) (<-chan metadata.DelayEvent, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	read := func(ctx context.Context) (metadata.DelayEvent, int64, <-chan gozk.Event, error) {
		for {
			b, st, ch, err := d.conn.getW(ctx, d.p.urDelay)
			if errors.Is(err, gozk.ErrNoNode) {
				st, ch, err := d.conn.existsW(ctx, d.p.urDelay)
				if err != nil {
					return metadata.DelayEvent{}, 0, nil, d.storeErr("watch "+d.p.urDelay, err)
				}
				if st != nil {
					continue
				}
				return metadata.DelayEvent{}, 0, ch, nil
			}
			if err != nil {
				return metadata.DelayEvent{}, 0, nil, d.storeErr("watch "+d.p.urDelay, err)
			}
			v, err := DecodeDelay(string(b))
			if err != nil {
				return metadata.DelayEvent{Err: metadata.Corrupt(d.p.urDelay, err)}, st.Mzxid, nil, nil
			}
			return metadata.DelayEvent{Delay: v, Set: true}, st.Mzxid, ch, nil
		}
	}
	first, mzxid, ch, err := read(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan metadata.DelayEvent, 1)
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
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
			ev, nz, nch, err := read(ctx)
			for err != nil && d.transient(err) && d.backoff(ctx) {
				ev, nz, nch, err = read(ctx)
			}
			if err != nil {
				if ctx.Err() == nil {
					send(metadata.DelayEvent{Err: err})
				}
				return
			}
			ch = nch
			if nz != mzxid || !ev.Set {
				mzxid = nz
				if !send(ev) {
					return
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetLastCheckTime writes metadata.EncodeCheckTime's bytes (binary, as
// Java) at `underreplication/<check.Node()>`.
func (d *Driver) SetLastCheckTime(ctx context.Context, check metadata.PeriodicCheck, completed time.Time) error {
	value, err := metadata.EncodeCheckTime(check, completed)
	if err != nil {
		return err
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	return d.put(ctx, d.p.urCheckTime(check), value)
}

// LastCheckTime implements metadata.UnderReplication.
func (d *Driver) LastCheckTime(ctx context.Context, check metadata.PeriodicCheck) (time.Time, error) {
	if err := check.Validate(); err != nil {
		return time.Time{}, err
	}
	if err := d.checkOpen(); err != nil {
		return time.Time{}, err
	}
	p := d.p.urCheckTime(check)
	b, _, err := d.conn.get(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, d.storeErr("read "+p, err)
	}
	t, err := metadata.DecodeCheckTime(check, b)
	if err != nil {
		return time.Time{}, metadata.Corrupt(p, err)
	}
	return t, nil
}

// Auditor election (Java's ZkLedgerAuditorManager): every candidate
// creates an ephemeral-sequential vote `auditorelection/V_<seq>` holding
// `bookieId: "<id>"`; the lowest sequence number is the auditor, and each
// other candidate watches the vote just below its own. Java and Folio
// candidates take part in the same election.

const votePrefix = "V_"

// votes lists the election's votes by sequence number.
func (d *Driver) votes(ctx context.Context) ([]string, error) {
	names, err := d.conn.children(ctx, d.p.urElection)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, d.storeErr("list "+d.p.urElection, err)
	}
	type vote struct {
		name string
		seq  int64
	}
	var vs []vote
	for _, n := range names {
		seq, ok := int64(0), false
		if strings.HasPrefix(n, votePrefix) {
			seq, ok = parseDigits(n[len(votePrefix):])
		}
		if !ok {
			return nil, metadata.Corrupt(d.p.urElection+"/"+n, fmt.Errorf("znode in the auditor election is not V_<sequence number>"))
		}
		vs = append(vs, vote{n, seq})
	}
	slices.SortFunc(vs, func(a, b vote) int { return int(min(max(a.seq-b.seq, -1), 1)) })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.name
	}
	return out, nil
}

// CampaignAuditor casts candidate's vote under session s and waits until it
// is the lowest. The returned Lock's Done closes when the vote is deleted
// or the session ends; Unlock resigns (deletes the vote). A campaign that
// ends (ctx, session) withdraws its vote.
func (d *Driver) CampaignAuditor(ctx context.Context, s metadata.Session, candidate metadata.BookieID) (metadata.Lock, error) {
	if err := checkBookieID(candidate); err != nil {
		return nil, err
	}
	ss, err := d.zkSession(s)
	if err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	data := lockData(candidate)
	created, err := ss.c.createFull(ctx, d.p.urElection+"/"+votePrefix, data, gozk.FlagEphemeralSequential)
	if err != nil {
		return nil, ss.regErr(d.p.urElection, err)
	}
	st, err := ss.c.exists(ctx, created)
	if err != nil || st == nil {
		_ = d.conn.delete(context.WithoutCancel(ctx), created, -1)
		return nil, ss.regErr(created, fmt.Errorf("vote %s vanished: %w", created, gozk.ErrSessionExpired))
	}
	if err := ss.own(ctx, created, st); err != nil {
		return nil, err
	}
	mine := path.Base(created)
	withdraw := func() { _ = d.conn.delete(context.WithoutCancel(ctx), created, -1) }
	for {
		vs, err := d.votes(ctx)
		if err != nil {
			withdraw()
			return nil, err
		}
		i := slices.Index(vs, mine)
		if i < 0 {
			return nil, ss.expiredErr("auditor vote " + created + " is gone")
		}
		if i == 0 {
			// Elected. Java records the auditor's id on the election znode
			// too (for debugging); so does Folio.
			_, _ = d.conn.set(ctx, d.p.urElection, data, -1)
			return d.newNodeLock(ss, created, nil)
		}
		pred := d.p.urElection + "/" + vs[i-1]
		pst, ch, err := ss.c.existsW(ctx, pred)
		if err != nil && d.transient(err) && !ss.expired() {
			if !d.backoff(ctx) {
				withdraw()
				return nil, ctx.Err()
			}
			continue
		}
		if err != nil {
			withdraw()
			if ss.expired() {
				return nil, ss.expiredErr("campaign for auditor")
			}
			return nil, d.storeErr("watch "+pred, err)
		}
		if pst == nil {
			continue
		}
		select {
		case <-ch:
		case <-ss.done:
			return nil, ss.expiredErr("campaign for auditor")
		case <-ctx.Done():
			withdraw()
			return nil, ctx.Err()
		case <-d.closeCtx.Done():
			return nil, metadata.ErrClosed
		}
	}
}

// Auditor returns the id in the lowest vote.
func (d *Driver) Auditor(ctx context.Context) (metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	for {
		vs, err := d.votes(ctx)
		if err != nil {
			return "", err
		}
		if len(vs) == 0 {
			return "", fmt.Errorf("auditor: %w", metadata.ErrNotFound)
		}
		p := d.p.urElection + "/" + vs[0]
		b, _, err := d.conn.get(ctx, p)
		if errors.Is(err, gozk.ErrNoNode) {
			continue // the auditor just left
		}
		if err != nil {
			return "", d.storeErr("read "+p, err)
		}
		var f formatpb.AuditorVoteFormat
		if err := prototext.Unmarshal(b, &f); err != nil || f.GetBookieId() == "" {
			return "", metadata.Corrupt(p, fmt.Errorf("vote %q is not an AuditorVoteFormat with a bookieId", b))
		}
		id := metadata.BookieID(f.GetBookieId())
		if err := metadata.ValidateBookieID(id); err != nil {
			return "", metadata.Corrupt(p, err)
		}
		return id, nil
	}
}
