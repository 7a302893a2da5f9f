package ledgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/storage/index"
)

// # Eviction of idle ledger state
//
// The store keeps a *ledger (ledger.go) per ledger in use: per-ledger lock,
// master key, fence bit, explicit LAC, known LAC, highest entry added, LAC
// watches. A bookie holding many ledgers (Pulsar creates many small ones)
// would otherwise keep one for every ledger touched since Open, deleted ones
// included. The sweeper (EvictIdleLedgers; the background loop runs it every
// Config.LedgerIdleTime) drops the ones that are idle and that a reload
// would rebuild exactly; the next use loads them again (loadLocked, and
// loadLACLocked for the LAC).
//
// What pins a ledger (never evicted while it holds):
//
//   - a holder: every operation takes the object with acquire and gives it
//     back with release; refs counts the holders, under the map shard's
//     lock. The sweeper evicts only with refs == 1 (itself), checked under
//     the shard lock at the moment it removes the object, while it holds
//     l.mu. So no goroutine ever holds an evicted object with a pending use,
//     and one ledger never has two live objects (the per-ledger lock that
//     makes "check fenced, then add" atomic with Fence stays one lock);
//   - recent use: acquire stamps the current sweep epoch; a sweep evicts only
//     objects not acquired since before the previous sweep (idle for at
//     least one full LedgerIdleTime);
//   - a registered LAC watch (a waiting long-poll read): the sweeper
//     refuses a ledger whose watch list is not empty. Watches are added
//     under l.mu by WatchLAC, which holds a reference meanwhile; a watch's
//     cancel may run after its ledger was evicted (it was woken and removed
//     first, so its cancel is a no-op on the dropped object);
//   - state that lives only in memory (checked under l.mu against a fresh
//     read of the index, see reloadsEqualLocked): the sweeper reads what a
//     reload would read and evicts only if every observable field comes back
//     the same:
//     known, master key, fenced and deleted, the explicit LAC (bytes and
//     presence) must equal the index state record. This refuses a ledger
//     whose master-key record failed to reach the journal (admitLocked
//     leaves it unknown in memory while the index already has its state:
//     a reload would take it as known and the next add would skip the
//     journaled key that replay needs);
//     a fence must be durable (fenceDurable): a reload marks a fence found in
//     the index durable, which is true only once the fence record is synced;
//     a pending fence pins its ledger until its journal group completes
//     (forever if the journal failed);
//     the highest entry added (lastEntry) must be in the index: entries
//     still in the write cache pin their ledger until a flush indexes
//     them (ReadEntry(-1) and LedgerInfo take max(lastEntry, index));
//     the known LAC must not exceed what a reload computes, max(explicit
//     LAC, LAC field of the last indexed entry): a ledger whose entries
//     carried LACs out of order keeps its object, so a LAC never goes
//     backwards. The LAC field is read from the entry unless this object
//     saw the latest body of that entry id (seenEntry: every write of an
//     entry goes through the one live object, under l.mu, and
//     loadLACLocked reads the latest, write cache first).
//
// Why a reload is equivalent: every field above is either equal to the
// index (read under l.mu, and no write to the ledger's index state happens
// without l.mu held) or recomputed from it by the same functions the first
// load uses, and the index is where every other reader (Ledgers, GC,
// LedgerInfo for an absent object) already looks. Durability across a crash
// does not involve these objects at all: journal replay rebuilds from the
// journal and the synced index, so eviction changes nothing there. The
// unsynced index writes a reload may read are covered by the journal
// exactly as they are for the object that was dropped.
//
// Lock order: l.mu, then the shard's lock (the sweeper); acquire and release
// take only the shard's lock, and nobody takes l.mu while holding it.
//
// Pacing: a sweep holds a shard's lock only to scan a chunk of its objects
// (evictScanChunk; acquire waits meanwhile), and the background loop checks
// at most Config.LedgerEvictionChecksPerSecond candidates a second (each
// check reads the index up to twice). Sweeps run one at a time (sweepMu).

// ledgerMap holds the ledger objects, sharded to spread lock contention.
type ledgerMap struct {
	// epoch advances at each sweep (atomic: acquire reads it under a shard
	// lock, the sweeper advances it under none).
	epoch  atomic.Uint64
	shards [64]ledgerShardMap
}

type ledgerShardMap struct {
	sync.Mutex
	m map[int64]*ledger
	// list holds m's objects, each at its pos, so that a sweep can scan
	// the shard in chunks, dropping the lock in between (a Go map
	// iteration cannot be resumed). Appended by acquire, swap-removed by
	// eviction.
	list []*ledger
	// peak is the most objects m held since it was made: a Go map never
	// shrinks, so a sweep that leaves m well below it copies m into a new
	// one (the point of evicting is the memory).
	peak int
}

func (lm *ledgerMap) shard(id int64) *ledgerShardMap {
	return &lm.shards[uint64(id)%uint64(len(lm.shards))]
}

// acquire returns ledger id's object, creating it (unloaded) if absent,
// with a reference the caller must give back with release.
func (lm *ledgerMap) acquire(id int64) *ledger {
	sh := lm.shard(id)
	sh.Lock()
	defer sh.Unlock()
	if sh.m == nil {
		sh.m = make(map[int64]*ledger)
	}
	l := sh.m[id]
	if l == nil {
		l = &ledger{id: id}
		l.mu.lastEntry, l.mu.lac = -1, -1
		l.mu.seenEntry, l.mu.seenLAC = -1, -1
		sh.m[id] = l
		l.pos = len(sh.list)
		sh.list = append(sh.list, l)
		sh.peak = max(sh.peak, len(sh.m))
	}
	l.refs++
	l.used = lm.epoch.Load()
	return l
}

// acquireExisting is acquire without creating: nil if the ledger has no
// object.
func (lm *ledgerMap) acquireExisting(id int64) *ledger {
	sh := lm.shard(id)
	sh.Lock()
	defer sh.Unlock()
	l := sh.m[id]
	if l != nil {
		l.refs++
		l.used = lm.epoch.Load()
	}
	return l
}

// release gives back a reference taken by acquire or acquireExisting.
func (lm *ledgerMap) release(l *ledger) {
	sh := lm.shard(l.id)
	sh.Lock()
	l.refs--
	if l.refs < 0 {
		sh.Unlock()
		panic(fmt.Sprintf("ledgerstore: ledger %d released more often than acquired", l.id))
	}
	sh.Unlock()
}

// removeLocked drops l from the shard: from m, and from list by moving the
// last object into l's place.
// REQUIRES: sh locked, l in sh.
func (sh *ledgerShardMap) removeLocked(l *ledger) {
	if l.pos >= len(sh.list) || sh.list[l.pos] != l || sh.m[l.id] != l {
		// Removing by a stale position would drop another live object
		// (two objects for one id afterwards, or one never swept again).
		panic(fmt.Sprintf("ledgerstore: ledger %d's object is not where the shard says", l.id))
	}
	delete(sh.m, l.id)
	last := len(sh.list) - 1
	moved := sh.list[last]
	sh.list[l.pos], moved.pos = moved, l.pos
	sh.list[last] = nil
	sh.list = sh.list[:last]
}

// shrinkLocked copies m and list into smaller ones once they hold less
// than a quarter of their peak: neither a Go map nor a slice's array
// shrinks by itself, and the point of evicting is the memory.
// REQUIRES: sh locked.
func (sh *ledgerShardMap) shrinkLocked() {
	if len(sh.m) >= sh.peak/4 {
		return
	}
	// A fresh map sized to what is left (maps.Clone keeps the old size).
	m := make(map[int64]*ledger, len(sh.m))
	for id, l := range sh.m {
		m[id] = l
	}
	sh.m, sh.peak = m, len(m)
	sh.list = append([]*ledger(nil), sh.list...)
}

// len returns how many ledger objects the map holds.
func (lm *ledgerMap) len() int {
	n := 0
	for i := range lm.shards {
		sh := &lm.shards[i]
		sh.Lock()
		n += len(sh.m)
		sh.Unlock()
	}
	return n
}

// CachedLedgers returns how many ledgers have in-memory state (the rest
// are only in the index; see EvictIdleLedgers).
func (s *Store) CachedLedgers() int { return s.ledgers.len() }

// EvictIdleLedgers is one sweep (the body of the eviction loop, which runs
// every Config.LedgerIdleTime; tests and the simulator call it directly):
// it advances the sweep epoch and drops the in-memory state of every
// ledger not used since before the previous sweep that nothing pins and
// that a reload would rebuild exactly (see the comment at the top of
// evict.go). It returns how many it dropped; an index read that fails
// keeps its ledger, and the sweep goes on: it returns the first such error
// with the count of the others. Close waits for a sweep in progress (the
// sweep reads the indexes Close closes); a sweep after Close is refused.
// A direct call is not paced (Config.LedgerEvictionChecksPerSecond paces
// the loop's sweeps).
func (s *Store) EvictIdleLedgers() (int, error) {
	return s.sweep(nil)
}

// evictScanChunk is how many objects a sweep examines per hold of a
// shard's lock.
const evictScanChunk = 256

// sweep is EvictIdleLedgers, its index checks paced by p (nil: unpaced).
func (s *Store) sweep(p *evictPacer) (int, error) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	s.mu.Lock()
	closed := s.mu.closing
	s.mu.Unlock()
	if closed {
		return 0, errors.New("ledgerstore: EvictIdleLedgers on a closed store")
	}
	chunk := evictScanChunk
	if s.cfg.evictScanChunk > 0 {
		chunk = s.cfg.evictScanChunk
	}
	lm := &s.ledgers
	epoch := lm.epoch.Add(1)
	evicted := 0
	var firstErr error
	nerr := 0
	var cand []*ledger
	for i := range lm.shards {
		sh := &lm.shards[i]
		// The shard's list is scanned from the end down, one chunk per
		// hold of its lock: [next, len) is scanned. Evicting an object
		// moves the last one (scanned, or appended since the sweep
		// started: used, so no candidate) into a scanned place, so the
		// unscanned part [0, next) never changes while the lock is
		// dropped (sweeps are serialised by sweepMu).
		sh.Lock()
		next := len(sh.list)
		sh.Unlock()
		for next > 0 {
			clear(cand) // no pointers to evicted objects kept until the sweep ends
			cand = cand[:0]
			sh.Lock()
			lo := max(next-chunk, 0)
			for _, l := range sh.list[lo:next] {
				// used+1 < epoch: not acquired during the epoch that
				// just ended nor the current one.
				if l.refs == 0 && l.used+1 < epoch {
					l.refs++ // the sweeper's own reference
					cand = append(cand, l)
				}
			}
			next = lo
			sh.Unlock()
			s.at("evict:chunk")
			for j, l := range cand {
				if p != nil && !p.wait() {
					for _, l := range cand[j:] {
						lm.release(l)
					}
					return evicted, errors.New("ledgerstore: eviction sweep stopped: store closing")
				}
				ok, err := s.evictOne(l, epoch)
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					nerr++
				}
				if ok {
					evicted++
				}
			}
		}
		sh.Lock()
		sh.shrinkLocked()
		sh.Unlock()
	}
	return evicted, sweepErr(firstErr, nerr)
}

// sweepErr is a sweep's error: the first of its n failed checks, with the
// count of the others (one error per idle ledger would pile up when an
// index fails).
func sweepErr(first error, n int) error {
	if n > 1 {
		return fmt.Errorf("%w (and %d more ledgers kept for failed index reads)", first, n-1)
	}
	return first
}

// evictPacer spaces the background sweep's checks to at most rate a
// second on the store's clock, in bursts of up to burst: a token bucket
// that lends (a check past the tokens waits for its debt to be repaid).
// Used by the eviction loop's goroutine only.
type evictPacer struct {
	clock  Clock
	stop   <-chan struct{}
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newEvictPacer(c Clock, stop <-chan struct{}, perSecond int) *evictPacer {
	p := &evictPacer{clock: c, stop: stop, rate: float64(perSecond), burst: float64(max(perSecond/10, 1))}
	p.tokens, p.last = p.burst, c.Now()
	return p
}

// wait takes one check's token, waiting on the clock for it if the bucket
// is empty; false if the store closes meanwhile.
func (p *evictPacer) wait() bool {
	now := p.clock.Now()
	if el := now.Sub(p.last); el > 0 {
		p.tokens = min(p.burst, p.tokens+el.Seconds()*p.rate)
	}
	p.last = now
	p.tokens--
	if p.tokens >= 0 {
		return true
	}
	t := p.clock.NewTimer(time.Duration(-p.tokens / p.rate * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-p.stop:
		return false
	}
}

// evictOne drops l if nothing but the sweeper holds it, nothing used it
// since it was picked in this sweep's epoch, and a reload is equivalent;
// it gives back the sweeper's reference either way. (A paced sweep may
// reach a candidate long after picking it: one used meanwhile stays.)
func (s *Store) evictOne(l *ledger, epoch uint64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok, err := s.reloadsEqualLocked(l)
	sh := s.ledgers.shard(l.id)
	sh.Lock()
	l.refs--
	if ok && l.refs == 0 && l.used+1 < epoch {
		sh.removeLocked(l)
	} else {
		ok = false
	}
	sh.Unlock()
	return ok, err
}

// reloadsEqualLocked reports whether dropping l and loading it again from
// the index would give the same observable state (see the contract at the
// top of this file). Any doubt answers false.
// REQUIRES: l.mu held.
func (s *Store) reloadsEqualLocked(l *ledger) (bool, error) {
	if l.mu.watches.Len() > 0 {
		return false, nil
	}
	if !l.mu.loaded {
		// Never loaded (a failed load): it holds nothing a load would not
		// read again. lastEntry and lac are only raised after a load.
		return l.mu.lastEntry < 0 && l.mu.lac < 0 && !l.mu.known, nil
	}
	if l.mu.fenced && !l.fenceDurable.Load() {
		return false, nil
	}
	sh := s.shardFor(l.id)
	st, err := sh.ix.LedgerState(l.id)
	if errors.Is(err, index.ErrNoLedger) {
		// A reload finds no ledger: equal only if this object holds none
		// either (never created here, or deleted and not fenced).
		return !l.mu.known && !l.mu.fenced && l.mu.explicit == nil && l.mu.lastEntry < 0 && l.mu.lac < 0, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledgerstore: evicting ledger %d: %w", l.id, err)
	}
	if !l.mu.known || !bytes.Equal(l.mu.masterKey, st.MasterKey) || l.mu.fenced != st.Fenced || l.mu.deleted != st.Deleted ||
		(l.mu.explicit == nil) != (st.ExplicitLAC == nil) || !bytes.Equal(l.mu.explicit, st.ExplicitLAC) {
		return false, nil
	}
	if l.mu.deleted {
		// Fenced and deleted: a reload stops at the state (lookup refuses
		// it), and forgetLocked reset the rest.
		return l.mu.lastEntry < 0 && l.mu.lac < 0, nil
	}
	// The reload's LAC is max(explicit LAC, LAC field of the last indexed
	// entry); lastEntry must be indexed.
	reloadLAC := int64(-1)
	if v, ok := explicitLACValue(st.ExplicitLAC); ok {
		reloadLAC = v
	}
	if l.mu.lastEntry < 0 && l.mu.lac <= reloadLAC {
		return true, nil
	}
	last, _, err := sh.ix.LastEntry(l.id)
	if errors.Is(err, index.ErrNoEntry) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledgerstore: evicting ledger %d: %w", l.id, err)
	}
	if last < l.mu.lastEntry {
		return false, nil
	}
	if l.mu.lac <= reloadLAC {
		return true, nil
	}
	if last == l.mu.seenEntry {
		// This object saw the latest body written for that id (every
		// write of an entry goes through it, under l.mu): no read.
		return l.mu.lac <= max(reloadLAC, l.mu.seenLAC), nil
	}
	// The last indexed entry's body was not seen by this object: its LAC
	// was raised by an add of an earlier entry id (a recovery add
	// rewriting one, with a higher LAC field) and no LAC read followed
	// (loadLACLocked, which every LAC read runs, records the last entry as
	// seen). Rare, so the entry read is paid only here.
	b, err := s.readEntry(sh, l.id, last)
	if err != nil {
		return false, fmt.Errorf("ledgerstore: evicting ledger %d: %w", l.id, err)
	}
	if v, ok := entryLAC(b); ok {
		reloadLAC = max(reloadLAC, v)
	}
	return l.mu.lac <= reloadLAC, nil
}
