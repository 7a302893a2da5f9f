package ledgerstore

import (
	"bytes"
	"fmt"

	"github.com/foliodb/folio/internal/storage/journal"
)

// replay re-applies jr's records from its checkpoint. Records may come more
// than once (an old checkpoint) and may never have been acknowledged (their
// group reached the disk but the ack did not happen); both are harmless:
//
//   - master key: creates the ledger if it has no state (set-once);
//   - fence: sets the bit (idempotent);
//   - explicit LAC: last writer wins, in journal order;
//   - entry: put into the write cache by (ledger, entry) id (overwrite).
//
// A record of a ledger without state (other than a master key) is skipped:
// a ledger's master-key record always precedes its other records in the
// same journal, so "no state" means the ledger was deleted (DeleteLedger
// checkpoints before deleting, so its own records are never replayed; a
// deleted ledger's late records are dropped here). A fenced-and-deleted
// ledger takes no entries.
func (s *Store) replay(jr *journalShard) error {
	from, _ := jr.positions()
	var last journal.Position
	err := jr.j.Replay(from, func(pos journal.Position, rec journal.Record) error {
		if err := s.applyReplayed(rec); err != nil {
			return fmt.Errorf("ledgerstore: replaying %s of ledger %d (journal %s, ending %v): %w",
				rec.Type, rec.LedgerID, jr.dir, pos, err)
		}
		last = pos
		return nil
	})
	if err != nil {
		return err
	}
	if last != (journal.Position{}) {
		jr.advance(last)
	}
	return nil
}

func (s *Store) applyReplayed(rec journal.Record) error {
	if rec.LedgerID < 0 {
		return fmt.Errorf("invalid ledger id %d", rec.LedgerID)
	}
	sh := s.shardFor(rec.LedgerID)
	l := s.ledgers.acquire(rec.LedgerID)
	defer s.ledgers.release(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(sh.ix); err != nil {
		return err
	}
	switch rec.Type {
	case journal.TypeMasterKey:
		if l.mu.known {
			return nil
		}
		l.mu.known, l.mu.masterKey = true, bytes.Clone(rec.Body)
		return sh.ix.PutState(l.id, l.stateLocked())
	}
	if !l.mu.known {
		return nil
	}
	switch rec.Type {
	case journal.TypeFence:
		l.fenceDurable.Store(true)
		if l.mu.fenced {
			return nil
		}
		l.mu.fenced = true
		return sh.ix.PutState(l.id, l.stateLocked())
	case journal.TypeExplicitLAC:
		if l.mu.deleted {
			return nil
		}
		l.mu.explicit = bytes.Clone(rec.Body)
		if lac, ok := explicitLACValue(rec.Body); ok {
			l.raiseLACLocked(lac)
		}
		return sh.ix.PutState(l.id, l.stateLocked())
	case journal.TypeAddEntry:
		if l.mu.deleted {
			return nil
		}
		// Nothing flushes during replay but us: keep the cache below half
		// so the Add below never waits for space.
		if sh.el.CachedBytes()+int64(len(rec.Body))+1024 > s.shardCacheBytes/2 {
			if err := sh.flush(); err != nil {
				return err
			}
		}
		if err := sh.el.Add(l.id, rec.EntryID, rec.Body); err != nil {
			return err
		}
		l.mu.lastEntry = max(l.mu.lastEntry, rec.EntryID)
		if lac, ok := l.sawEntryLocked(rec.EntryID, rec.Body); ok {
			l.raiseLACLocked(lac)
		}
		return nil
	}
	return fmt.Errorf("unknown record type %v", rec.Type)
}
