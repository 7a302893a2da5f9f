package ledgerstore

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/index"
)

// ledger is the in-memory state of one ledger. A ledger in use has one
// (acquired from Store.ledgers, see evict.go); it is loaded from the index
// on first use and dropped again when idle and equal to what a reload
// would rebuild (evict.go states the contract).
//
// mu is the per-ledger lock: the master-key check, the fence check and the
// enqueueing of an add (write cache + journal) happen under it, as does
// setting the fence bit, so "check fenced, then add" is atomic with respect
// to Fence (spec/protocol.md §7, BookKeeper PR #4701). Journal callbacks
// never take mu (an adder holding mu may wait for journal queue space that
// only the callbacks free).
type ledger struct {
	id int64
	// refs, used and pos are guarded by the ledgerMap shard's lock, not by mu
	// (see evict.go): refs counts the holders of this object (operations
	// in progress, registered LAC watches, the sweeper while it checks);
	// used is the sweep epoch of the last acquire.
	refs int
	used uint64
	// pos is the object's place in its shard's list (evict.go), guarded
	// by the shard's lock.
	pos int
	mu  struct {
		sync.Mutex
		loaded bool // state below reflects the index (or was created)
		// known: the ledger exists here (it has a master key). A ledger
		// fenced and then deleted stays known with deleted set.
		known     bool
		masterKey []byte
		fenced    bool
		deleted   bool
		explicit  []byte // the last WRITE_LAC body, nil if none
		// lastEntry is the highest entry id added since Open (replay
		// included); the index holds the rest. -1: none.
		lastEntry int64
		// lac is the known LAC (max LAC field of entries added since Open
		// and of the explicit LAC); lacLoaded says whether the stored
		// entries' LAC has been merged in.
		lac       int64
		lacLoaded bool
		// seenEntry and seenLAC are the highest entry id whose body this
		// object saw (added, replayed or read by loadLACLocked) and that
		// body's LAC field (-1 if it has none): the sweeper's shortcut
		// for "LAC field of the last indexed entry" (evict.go).
		seenEntry, seenLAC int64
		// watches are the WatchLAC callbacks to call (in registration
		// order) when lac grows or the ledger is deleted.
		watches list.List
	}
	// fenceDurable: a fence of this ledger is known durable (journal synced
	// or loaded from the index after Open's checkpoint). Set from journal
	// callbacks, hence atomic.
	fenceDurable atomic.Bool
}

// loadLocked fills l from the index on first use.
// REQUIRES: l.mu held.
func (l *ledger) loadLocked(ix *index.Index) error {
	if l.mu.loaded {
		return nil
	}
	st, err := ix.LedgerState(l.id)
	if errors.Is(err, index.ErrNoLedger) {
		l.mu.loaded = true
		return nil
	}
	if err != nil {
		// Neither "absent" nor a state we can trust: never let a caller
		// take this for an unknown ledger (DESIGN.md §6.6).
		return fmt.Errorf("%w: ledger %d: %w", storage.ErrUnknownLedgerState, l.id, err)
	}
	l.mu.loaded = true
	l.mu.known = true
	l.mu.masterKey = st.MasterKey
	l.mu.fenced = st.Fenced
	l.mu.deleted = st.Deleted
	l.mu.explicit = st.ExplicitLAC
	if st.Fenced {
		// Open synced the index before serving, so a fence found there is
		// durable.
		l.fenceDurable.Store(true)
	}
	if lac, ok := explicitLACValue(st.ExplicitLAC); ok {
		l.raiseLACLocked(lac)
	}
	return nil
}

// state returns the index form of l's state.
// REQUIRES: l.mu held.
func (l *ledger) stateLocked() index.State {
	return index.State{MasterKey: l.mu.masterKey, Fenced: l.mu.fenced, Deleted: l.mu.deleted, ExplicitLAC: l.mu.explicit}
}

// sawEntryLocked records entry entryID's body (the latest written for
// that id) for the sweeper's shortcut, and returns its LAC field.
// REQUIRES: l.mu held.
func (l *ledger) sawEntryLocked(entryID int64, body []byte) (int64, bool) {
	lac, ok := entryLAC(body)
	if entryID >= l.mu.seenEntry {
		l.mu.seenEntry, l.mu.seenLAC = entryID, -1
		if ok {
			l.mu.seenLAC = lac
		}
	}
	return lac, ok
}

// raiseLACLocked raises the known LAC and wakes watchers.
// REQUIRES: l.mu held.
func (l *ledger) raiseLACLocked(lac int64) {
	if lac <= l.mu.lac {
		return
	}
	l.mu.lac = lac
	l.wakeWatchesLocked()
}

// wakeWatchesLocked calls and drops every registered LAC watch.
// REQUIRES: l.mu held.
func (l *ledger) wakeWatchesLocked() {
	for e := l.mu.watches.Front(); e != nil; e = l.mu.watches.Front() {
		wake := l.mu.watches.Remove(e).(func())
		wake()
	}
}

// forgetLocked resets l after deletion; a fenced ledger stays known as
// fenced-and-deleted.
// REQUIRES: l.mu held.
func (l *ledger) forgetLocked() {
	fenced := l.mu.known && l.mu.fenced
	key := l.mu.masterKey
	l.mu.known, l.mu.fenced, l.mu.deleted = fenced, fenced, fenced
	l.mu.masterKey = nil
	if fenced {
		l.mu.masterKey = key
	}
	l.mu.explicit = nil
	l.mu.lastEntry, l.mu.lac, l.mu.lacLoaded = -1, -1, false
	l.mu.seenEntry, l.mu.seenLAC = -1, -1
	if !fenced {
		l.fenceDurable.Store(false)
	}
	l.wakeWatchesLocked()
}

// entryLAC returns the LAC field of a BookKeeper entry body (ledgerId,
// entryId, lastAddConfirmed, ... big-endian; spec/wire-protocol.md §5).
func entryLAC(body []byte) (int64, bool) {
	if len(body) < 24 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(body[16:24])), true
}

// explicitLACValue returns the lac field of a WRITE_LAC body (ledgerId,
// lac, digest).
func explicitLACValue(body []byte) (int64, bool) {
	if len(body) < 16 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(body[8:16])), true
}
