package ledgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/index"
	"github.com/foliodb/folio/internal/storage/journal"
)

// addOp carries one add from the journal's callback to the caller's
// AddCompletion. Pooled, so an add allocates nothing here.
type addOp struct {
	jr   *journalShard
	done storage.AddCompletion
	// obs and start time the add for Config.Observer (obs nil: untimed).
	obs   Observer
	clock Clock
	start time.Time
}

var addOpPool = sync.Pool{New: func() any { return new(addOp) }}

// AppendDone runs on a journal goroutine (the syncer once the entry's group
// is durable, err == nil; the syncer or the writer once it has failed; in
// StepJournals with ManualJournal); it never blocks on store locks.
func (op *addOp) AppendDone(pos journal.Position, err error) {
	jr, done := op.jr, op.done
	if op.obs != nil {
		op.obs.JournalAdded(op.clock.Now().Sub(op.start), err)
	}
	op.jr, op.done, op.obs, op.clock = nil, nil, nil, nil
	addOpPool.Put(op)
	if err != nil {
		done.AddComplete(fmt.Errorf("ledgerstore: add not durable: %w", err))
		return
	}
	jr.advance(pos)
	done.AddComplete(nil)
}

// AddEntry implements storage.Store. Under the ledger's lock it checks the
// master key (recording it, journaled, on first use) and the fence bit,
// copies the entry into the write cache, raises the known LAC, and queues
// the journal record; done runs when the journal group is durable. An
// entry is put in the write cache before its journal record is queued, so
// that a checkpoint covering the record's Position always covers the entry
// (see Checkpoint). DeferredSync adds are acknowledged after the fsync too
// (the journal has no earlier completion point): stronger than asked.
func (s *Store) AddEntry(ledgerID, entryID int64, masterKey, body []byte, opts storage.AddOptions, done storage.AddCompletion) {
	if err := s.addEntry(ledgerID, entryID, masterKey, body, opts, done); err != nil {
		// The contract: done runs on another goroutine.
		s.cfg.Go(func() { done.AddComplete(err) })
	}
}

func (s *Store) addEntry(ledgerID, entryID int64, masterKey, body []byte, opts storage.AddOptions, done storage.AddCompletion) error {
	if ledgerID < 0 || entryID < 0 {
		return fmt.Errorf("ledgerstore: invalid ids: ledger %d entry %d", ledgerID, entryID)
	}
	if err := s.writable(); err != nil {
		return err
	}
	sh, jr := s.shardFor(ledgerID), s.journalFor(ledgerID)
	l := s.ledgers.acquire(ledgerID)
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.admitLocked(l, sh, jr, masterKey); err != nil {
		return err
	}
	if l.mu.deleted || (l.mu.fenced && !opts.Recovery) {
		return fmt.Errorf("%w: ledger %d", storage.ErrFenced, ledgerID)
	}
	if err := sh.el.Add(ledgerID, entryID, body); err != nil {
		if errors.Is(err, entrylog.ErrWriteCacheFull) {
			return fmt.Errorf("%w: %w", storage.ErrTooManyRequests, err)
		}
		return err
	}
	l.mu.lastEntry = max(l.mu.lastEntry, entryID)
	if lac, ok := l.sawEntryLocked(entryID, body); ok {
		l.raiseLACLocked(lac)
	}
	op := addOpPool.Get().(*addOp)
	op.jr, op.done = jr, done
	if s.cfg.Observer != nil {
		op.obs, op.clock, op.start = s.cfg.Observer, s.cfg.Clock, s.cfg.Clock.Now()
	}
	if err := jr.j.AppendEntry(ledgerID, entryID, body, op); err != nil {
		op.jr, op.done, op.obs, op.clock = nil, nil, nil, nil
		addOpPool.Put(op)
		// The entry stays in the write cache: an add that fails may still
		// be stored (as after a timeout), never half.
		return journalErr(err)
	}
	return nil
}

// admitLocked loads l, checks the master key, and creates the ledger on
// first use: its state goes to the index (unsynced) and a master-key
// record to the journal before any other record of the ledger, so replay
// can always rebuild the state that later records rely on.
// REQUIRES: l.mu held.
func (s *Store) admitLocked(l *ledger, sh *ledgerShard, jr *journalShard, masterKey []byte) error {
	if err := l.loadLocked(sh.ix); err != nil {
		return err
	}
	if l.mu.known {
		if !bytes.Equal(l.mu.masterKey, masterKey) {
			return fmt.Errorf("%w: ledger %d", storage.ErrUnauthorized, l.id)
		}
		return nil
	}
	key := bytes.Clone(masterKey)
	st := index.State{MasterKey: key}
	if err := s.putState(sh, l.id, st); err != nil {
		s.fail(err)
		return err
	}
	if err := jr.j.AppendMasterKey(l.id, key, jr); err != nil {
		// Not journaled: stay unknown so the next add records it again
		// (an entry must never be acknowledged after a key that replay
		// cannot find).
		return journalErr(err)
	}
	l.mu.known, l.mu.masterKey = true, key
	l.mu.fenced, l.mu.deleted, l.mu.explicit = false, false, nil
	return nil
}

// journalErr maps a journal Append error to the storage contract.
func journalErr(err error) error {
	switch {
	case errors.Is(err, journal.ErrQueueFull):
		return fmt.Errorf("%w: %w", storage.ErrTooManyRequests, err)
	case errors.Is(err, journal.ErrFailed), errors.Is(err, journal.ErrClosed):
		return fmt.Errorf("%w: %w", storage.ErrReadOnly, err)
	}
	return err
}

// syncWaiter waits for one journal record to be durable.
type syncWaiter struct {
	jr  *journalShard
	ch  chan error
	l   *ledger
	set bool // on success, mark l's fence durable
}

func (w *syncWaiter) AppendDone(pos journal.Position, err error) {
	if err == nil {
		w.jr.advance(pos)
		if w.set {
			w.l.fenceDurable.Store(true)
		}
	}
	w.ch <- err
}

func (w *syncWaiter) wait(ctx context.Context) error {
	select {
	case err := <-w.ch:
		if err != nil {
			return fmt.Errorf("ledgerstore: not durable: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fence implements storage.Store: it sets the fence bit under the ledger's
// lock (so no add admitted after it passes the fence check) and returns
// once a fence record, queued after every add admitted before it, is
// durable; those adds are therefore durable (or failed) too. A ledger
// already fenced durably returns at once.
func (s *Store) Fence(ctx context.Context, ledgerID int64, masterKey []byte) error {
	if ledgerID < 0 {
		return fmt.Errorf("ledgerstore: invalid ledger id %d", ledgerID)
	}
	sh, jr := s.shardFor(ledgerID), s.journalFor(ledgerID)
	// The reference is held until the fence is durable (or the wait ends);
	// a fence not yet durable also pins its ledger by itself (evict.go),
	// since the waiter's callback marks this object durable.
	l := s.ledgers.acquire(ledgerID)
	defer s.ledgers.release(l)
	l.mu.Lock()
	if err := l.loadLocked(sh.ix); err != nil {
		l.mu.Unlock()
		return err
	}
	if l.mu.known && !bytes.Equal(l.mu.masterKey, masterKey) {
		l.mu.Unlock()
		return fmt.Errorf("%w: ledger %d", storage.ErrUnauthorized, ledgerID)
	}
	if l.mu.known && l.mu.fenced && l.fenceDurable.Load() {
		l.mu.Unlock()
		return nil
	}
	if err := s.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	if err := s.admitLocked(l, sh, jr, masterKey); err != nil {
		l.mu.Unlock()
		return err
	}
	if !l.mu.fenced {
		l.mu.fenced = true
		if err := s.putState(sh, ledgerID, l.stateLocked()); err != nil {
			l.mu.Unlock()
			s.fail(err)
			return err
		}
	}
	w := &syncWaiter{jr: jr, ch: make(chan error, 1), l: l, set: true}
	err := jr.j.AppendFence(ledgerID, w)
	l.mu.Unlock()
	if err != nil {
		return journalErr(err)
	}
	return w.wait(ctx)
}

// SetExplicitLAC implements storage.Store.
func (s *Store) SetExplicitLAC(ctx context.Context, ledgerID int64, masterKey, body []byte) error {
	if ledgerID < 0 {
		return fmt.Errorf("ledgerstore: invalid ledger id %d", ledgerID)
	}
	if err := s.writable(); err != nil {
		return err
	}
	sh, jr := s.shardFor(ledgerID), s.journalFor(ledgerID)
	l := s.ledgers.acquire(ledgerID)
	defer s.ledgers.release(l)
	l.mu.Lock()
	if err := s.admitLocked(l, sh, jr, masterKey); err != nil {
		l.mu.Unlock()
		return err
	}
	if l.mu.deleted {
		l.mu.Unlock()
		return fmt.Errorf("%w: ledger %d was fenced and deleted", storage.ErrFenced, ledgerID)
	}
	l.mu.explicit = bytes.Clone(body)
	if lac, ok := explicitLACValue(body); ok {
		l.raiseLACLocked(lac)
	}
	if err := s.putState(sh, ledgerID, l.stateLocked()); err != nil {
		l.mu.Unlock()
		s.fail(err)
		return err
	}
	w := &syncWaiter{jr: jr, ch: make(chan error, 1)}
	err := jr.j.AppendExplicitLAC(ledgerID, body, w)
	l.mu.Unlock()
	if err != nil {
		return journalErr(err)
	}
	return w.wait(ctx)
}

// Force implements storage.Store. Every add is acknowledged only after its
// journal fsync (DeferredSync included), so what was acknowledged is
// already durable.
func (s *Store) Force(ctx context.Context, ledgerID int64) error {
	return ctx.Err()
}

// lookup returns the loaded ledger, acquired (the caller releases it), or
// an error matching storage.ErrNoLedger if the store does not hold it
// (fenced-and-deleted ledgers included). It does not keep objects for
// unknown ids.
func (s *Store) lookup(ledgerID int64) (*ledger, error) {
	if ledgerID < 0 {
		return nil, fmt.Errorf("%w: invalid ledger id %d", storage.ErrNoLedger, ledgerID)
	}
	l := s.ledgers.acquireExisting(ledgerID)
	if l == nil {
		st, err := s.shardFor(ledgerID).ix.LedgerState(ledgerID)
		switch {
		case isNoLedger(err):
			return nil, fmt.Errorf("%w: ledger %d", storage.ErrNoLedger, ledgerID)
		case err != nil:
			return nil, fmt.Errorf("%w: ledger %d: %w", storage.ErrUnknownLedgerState, ledgerID, err)
		case st.Deleted:
			return nil, fmt.Errorf("%w: ledger %d was deleted", storage.ErrNoLedger, ledgerID)
		}
		l = s.ledgers.acquire(ledgerID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(s.shardFor(ledgerID).ix); err != nil {
		s.ledgers.release(l)
		return nil, err
	}
	if !l.mu.known || l.mu.deleted {
		s.ledgers.release(l)
		return nil, fmt.Errorf("%w: ledger %d", storage.ErrNoLedger, ledgerID)
	}
	return l, nil
}

func isNoLedger(err error) bool { return errors.Is(err, index.ErrNoLedger) }

// ReadEntry implements storage.Store: the write cache, then the index and
// the entry log. Only the index may say "no such entry"; an entry log that
// cannot produce an indexed entry is an error.
func (s *Store) ReadEntry(ledgerID, entryID int64) ([]byte, error) {
	l, err := s.lookup(ledgerID)
	if err != nil {
		return nil, err
	}
	defer s.ledgers.release(l)
	sh := s.shardFor(ledgerID)
	if entryID == -1 {
		l.mu.Lock()
		last := l.mu.lastEntry
		l.mu.Unlock()
		id, _, err := sh.ix.LastEntry(ledgerID)
		switch {
		case err == nil:
			last = max(last, id)
		case !errors.Is(err, index.ErrNoEntry):
			return nil, err
		}
		if last < 0 {
			return nil, fmt.Errorf("%w: ledger %d has no entries", storage.ErrNoEntry, ledgerID)
		}
		entryID = last
	}
	if entryID < 0 {
		return nil, fmt.Errorf("%w: ledger %d entry %d", storage.ErrNoEntry, ledgerID, entryID)
	}
	return s.readEntry(sh, ledgerID, entryID)
}

// readEntry reads an existing ledger's entry: the write cache, the read
// cache, then the index and the entry log, reading ahead on the way.
func (s *Store) readEntry(sh *ledgerShard, ledgerID, entryID int64) ([]byte, error) {
	// The caches come first. The write cache holds the newest copy; the
	// read cache holds only entries the index placed when they were read
	// ahead, and is emptied of a ledger when it is deleted (entrylog's
	// readCache states the contract). A flush indexes an entry before
	// dropping it from the write cache, so a cache miss followed by an
	// index miss means absent. A compaction may remove the log between
	// lookup and read: look up again (the index already holds the new
	// place).
	if b, ok := sh.el.ReadCachedEntry(ledgerID, entryID); ok {
		return b, nil
	}
	for attempt := 0; ; attempt++ {
		s.at("read:locate")
		// The fill token is taken before the index is read: a deletion or
		// a flush after this point keeps the read-ahead out of the cache.
		epoch := sh.el.FillEpoch()
		target, next, err := s.readAheadLocations(sh, ledgerID, entryID)
		if errors.Is(err, index.ErrNoEntry) {
			return nil, fmt.Errorf("%w: ledger %d entry %d", storage.ErrNoEntry, ledgerID, entryID)
		}
		if err != nil {
			return nil, err
		}
		b, err := sh.el.ReadAhead(ledgerID, target, next, epoch)
		if errors.Is(err, entrylog.ErrLogRemoved) && attempt < 3 {
			continue
		}
		return b, err
	}
}

// readAheadLocations returns the index location of entryID and of the
// entries that follow it without a gap (at most ReadAheadEntries), in one
// index iteration. Without read-ahead it is one point lookup. An absent
// entryID is index.ErrNoEntry.
func (s *Store) readAheadLocations(sh *ledgerShard, ledgerID, entryID int64) (entrylog.Want, []entrylog.Want, error) {
	n := s.cfg.ReadAheadEntries
	if n <= 0 || s.cfg.ReadAheadBytes < 0 || s.cfg.ReadCacheBytes <= 0 {
		loc, err := sh.ix.Get(ledgerID, entryID)
		return entrylog.Want{EntryID: entryID, Loc: loc}, nil, err
	}
	var target entrylog.Want
	found := false
	var next []entrylog.Want
	err := sh.ix.Entries(ledgerID, entryID, func(id int64, loc entrylog.Location) bool {
		if !found {
			if id != entryID {
				return false
			}
			target, found = entrylog.Want{EntryID: id, Loc: loc}, true
			return true
		}
		if id != entryID+1+int64(len(next)) {
			return false // a gap: BookKeeper's read-ahead stops there too
		}
		next = append(next, entrylog.Want{EntryID: id, Loc: loc})
		return len(next) < n
	})
	if err != nil {
		return target, nil, err
	}
	if !found {
		return target, nil, fmt.Errorf("%w: ledger %d entry %d", index.ErrNoEntry, ledgerID, entryID)
	}
	return target, next, nil
}

// LastAddConfirmed implements storage.Store.
func (s *Store) LastAddConfirmed(ledgerID int64) (int64, error) {
	l, err := s.lookup(ledgerID)
	if err != nil {
		return 0, err
	}
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.loadLACLocked(l); err != nil {
		return 0, err
	}
	return l.mu.lac, nil
}

// loadLACLocked merges the LAC field of the ledger's last stored entry
// into the known LAC, once.
// REQUIRES: l.mu held.
func (s *Store) loadLACLocked(l *ledger) error {
	if l.mu.lacLoaded {
		return nil
	}
	sh := s.shardFor(l.id)
	id, _, err := sh.ix.LastEntry(l.id)
	switch {
	case errors.Is(err, index.ErrNoEntry):
	case err != nil:
		return err
	default:
		b, err := s.readEntry(sh, l.id, id)
		if err != nil {
			return err
		}
		if lac, ok := l.sawEntryLocked(id, b); ok {
			l.raiseLACLocked(lac)
		}
	}
	l.mu.lacLoaded = true
	return nil
}

// WatchLAC implements storage.Store: a watch is an element of the
// ledger's list of watches, removed by cancel or when it is woken.
func (s *Store) WatchLAC(ledgerID, previous int64, wake func()) (int64, func(), error) {
	l, err := s.lookup(ledgerID)
	if err != nil {
		return 0, nil, err
	}
	// A registered watch pins the ledger by itself (evict.go): its cancel
	// may outlive this reference.
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.loadLACLocked(l); err != nil {
		return 0, nil, err
	}
	if l.mu.lac > previous || !l.mu.known {
		return l.mu.lac, noCancel, nil
	}
	e := l.mu.watches.PushBack(wake)
	return l.mu.lac, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.mu.watches.Remove(e) // no-op once woken: Remove checks membership
	}, nil
}

func noCancel() {}

// ExplicitLAC implements storage.Store.
func (s *Store) ExplicitLAC(ledgerID int64) ([]byte, error) {
	l, err := s.lookup(ledgerID)
	if err != nil {
		return nil, err
	}
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.explicit == nil {
		return nil, fmt.Errorf("%w: ledger %d has no explicit LAC", storage.ErrNoEntry, ledgerID)
	}
	return bytes.Clone(l.mu.explicit), nil
}

// Entries implements storage.Store. It flushes the ledger's write cache
// first (the cache cannot list one ledger), so the index holds every
// entry added before the call.
func (s *Store) Entries(ledgerID int64, fn func(entryID int64) bool) error {
	l, err := s.lookup(ledgerID)
	if err != nil {
		return err
	}
	s.ledgers.release(l)
	sh := s.shardFor(ledgerID)
	if err := sh.flush(); err != nil {
		s.fail(err)
		return err
	}
	return sh.ix.Entries(ledgerID, 0, func(entryID int64, _ entrylog.Location) bool { return fn(entryID) })
}

// Ledgers implements storage.Store: every ledger with a state record, by
// ledger directory and ascending id within one.
func (s *Store) Ledgers(fn func(ledgerID int64) bool) error {
	for _, sh := range s.shards {
		stopped := false
		err := sh.ix.Ledgers(func(id int64, st index.State) bool {
			if st.Deleted {
				return true
			}
			stopped = !fn(id)
			return !stopped
		})
		if err != nil || stopped {
			return err
		}
	}
	return nil
}

// DeleteLedger implements storage.Store. It first checkpoints, so that
// every journal record of the ledger written so far lies before the
// journal's checkpoint and is never replayed (the journal has no delete
// record); then, under the ledger's lock, it drops the cached entries,
// deletes the ledger from the index (a fenced ledger stays as
// fenced-and-deleted) and syncs the index before returning.
func (s *Store) DeleteLedger(ctx context.Context, ledgerID int64) error {
	if ledgerID < 0 {
		return fmt.Errorf("ledgerstore: invalid ledger id %d", ledgerID)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.Checkpoint(); err != nil {
		return err
	}
	s.at("delete:checkpointed")
	sh := s.shardFor(ledgerID)
	l := s.ledgers.acquire(ledgerID)
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(sh.ix); err != nil {
		return err
	}
	if !l.mu.known || l.mu.deleted {
		return nil
	}
	s.deletions.Add(1) // before anything of the ledger is dropped
	sh.el.DropLedger(ledgerID)
	s.at("delete:dropped")
	if err := sh.ix.DeleteLedger(ledgerID); err != nil {
		s.fail(err)
		return err
	}
	// A read-ahead may have walked the index between DropLedger and the
	// deletion: forget what it cached (entrylog's readCache contract).
	sh.el.ForgetCached(ledgerID)
	if err := sh.ix.Sync(); err != nil {
		s.fail(err)
		return err
	}
	l.forgetLocked()
	return nil
}

// DiskUsage implements storage.Store. Directories may share a volume and
// vfs does not say which, so it reports the fullest volume holding any of
// the store's directories. Per-directory verdicts (a full ledger directory
// only stops taking entry logs) need DirUsages.
func (s *Store) DiskUsage() (storage.DiskUsage, error) {
	var best storage.DiskUsage
	var bestFrac float64 = -1
	var firstErr error
	for _, dir := range append(append([]string(nil), s.cfg.LedgerDirs...), s.cfg.JournalDirs...) {
		u, err := s.fs.GetDiskUsage(dir)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("ledgerstore: disk usage of %s: %w", dir, err)
			}
			continue
		}
		if u.TotalBytes == 0 {
			continue
		}
		frac := float64(u.UsedBytes) / float64(u.TotalBytes)
		if frac > bestFrac {
			bestFrac = frac
			best = storage.DiskUsage{Total: u.TotalBytes, Free: u.AvailBytes, Used: u.UsedBytes}
		}
	}
	if bestFrac < 0 {
		if firstErr == nil {
			firstErr = errors.New("ledgerstore: no disk usage reported")
		}
		return storage.DiskUsage{}, firstErr
	}
	return best, nil
}

// LedgerInfo implements storage.Store. It reads the ledger's state under
// its lock and writes nothing: no fence, no key, no flush. Unlike lookup it
// reports fenced-and-deleted ledgers (as Deleted).
func (s *Store) LedgerInfo(ledgerID int64) (storage.LedgerInfo, error) {
	none := storage.LedgerInfo{LastAddConfirmed: -1, LastEntryID: -1}
	if ledgerID < 0 {
		return none, fmt.Errorf("%w: invalid ledger id %d", storage.ErrNoLedger, ledgerID)
	}
	sh := s.shardFor(ledgerID)
	l := s.ledgers.acquireExisting(ledgerID)
	if l == nil {
		// Do not keep an object for an id the store does not hold.
		st, err := sh.ix.LedgerState(ledgerID)
		switch {
		case isNoLedger(err):
			return none, fmt.Errorf("%w: ledger %d", storage.ErrNoLedger, ledgerID)
		case err != nil:
			return none, fmt.Errorf("%w: ledger %d: %w", storage.ErrUnknownLedgerState, ledgerID, err)
		case st.Deleted:
			none.Fenced, none.Deleted = st.Fenced, true
			return none, nil
		}
		l = s.ledgers.acquire(ledgerID)
	}
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(sh.ix); err != nil {
		return none, err
	}
	if !l.mu.known {
		return none, fmt.Errorf("%w: ledger %d", storage.ErrNoLedger, ledgerID)
	}
	if l.mu.deleted {
		none.Fenced, none.Deleted = l.mu.fenced, true
		return none, nil
	}
	if err := s.loadLACLocked(l); err != nil {
		return none, err
	}
	last := l.mu.lastEntry
	id, _, err := sh.ix.LastEntry(ledgerID)
	switch {
	case err == nil:
		last = max(last, id)
	case !errors.Is(err, index.ErrNoEntry):
		return none, err
	}
	return storage.LedgerInfo{
		Fenced:           l.mu.fenced,
		LastAddConfirmed: l.mu.lac,
		LastEntryID:      last,
		HasExplicitLAC:   l.mu.explicit != nil,
	}, nil
}

// DirUsage is the disk usage of the volume holding one of the store's
// directories.
type DirUsage struct {
	// Dir is the directory as configured.
	Dir string
	// Journal: a journal directory (else a ledger directory).
	Journal bool
	// Position is the directory's index in Config.LedgerDirs or
	// Config.JournalDirs.
	Position int
	// Total, Free and Used are the volume's bytes (Free: available to
	// this process).
	Total, Free, Used uint64
}

// DirUsages reports the disk usage under every configured ledger
// directory (in position order), then every journal directory. Directories
// may share a volume; each reports it. An error for one directory fails
// the call, naming it.
func (s *Store) DirUsages() ([]DirUsage, error) {
	out := make([]DirUsage, 0, len(s.cfg.LedgerDirs)+len(s.cfg.JournalDirs))
	add := func(dir string, journal bool, pos int) error {
		u, err := s.fs.GetDiskUsage(dir)
		if err != nil {
			kind := "ledger"
			if journal {
				kind = "journal"
			}
			return fmt.Errorf("ledgerstore: disk usage of %s directory %s: %w", kind, dir, err)
		}
		out = append(out, DirUsage{Dir: dir, Journal: journal, Position: pos, Total: u.TotalBytes, Free: u.AvailBytes, Used: u.UsedBytes})
		return nil
	}
	for i, dir := range s.cfg.LedgerDirs {
		if err := add(dir, false, i); err != nil {
			return nil, err
		}
	}
	for i, dir := range s.cfg.JournalDirs {
		if err := add(dir, true, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SetLedgerDirFull makes the ledger directory at position (its index in
// Config.LedgerDirs) stop (full) or resume (!full) taking new entry logs,
// for every shard: a shard whose current log is in a full directory moves
// to a new log in another writable one at its next flush (package comment,
// "Spill"). While every ledger directory is full the shards keep writing
// where they are. Safe for concurrent use; idempotent; a position out of
// range is ignored.
func (s *Store) SetLedgerDirFull(position int, full bool) {
	if position < 0 || position >= len(s.cfg.LedgerDirs) {
		return
	}
	for _, sh := range s.shards {
		sh.el.SetDirFull(logDirIndex(sh.index, position), full)
	}
}
