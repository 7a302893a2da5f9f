package ledgerstore

import (
	"fmt"

	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/journal"
)

// Checkpoint makes everything journaled so far durable outside the
// journals and lets the journals drop it (the body of the checkpoint loop).
// The steps, each durable before the next starts:
//
//  1. capture each journal's durable Position P (every record at or before
//     P was applied to the write cache and index before it was appended);
//  2. flush every write cache into its entry log (fsynced) and index;
//  3. Sync every index (state records and locations written before this);
//  4. per journal, write P into its CHECKPOINT file (atomic rename);
//  5. per journal, MarkDurable(P): delete the journal files wholly before P.
//
// A crash before step 4 replays from the previous checkpoint (records
// applied twice, idempotently); between 4 and 5 it replays from P with old
// files still present (harmless). An I/O error in steps 2–4 fails the store
// (read-only); the journals still hold everything, so nothing acknowledged
// is lost. A failed deletion in step 5 is returned but does not fail the
// store (old files are only replayed again).
func (s *Store) Checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	marks := make([]journal.Position, len(s.journals))
	for i, jr := range s.journals {
		marks[i], _ = jr.positions()
	}
	s.at("checkpoint:captured")
	for _, sh := range s.shards {
		// Twice: if an earlier flush failed, the first call only retries
		// the generation it left frozen, and the active one may hold
		// entries at or before the captured positions.
		for range 2 {
			if err := sh.flush(); err != nil {
				s.fail(err)
				return err
			}
		}
	}
	s.at("checkpoint:flushed")
	for _, sh := range s.shards {
		if err := sh.ix.Sync(); err != nil {
			err = fmt.Errorf("ledgerstore: checkpoint of %s: %w", sh.dir, err)
			s.fail(err)
			return err
		}
	}
	s.at("checkpoint:synced")
	nj, nl := uint32(len(s.journals)), uint32(len(s.shards))
	for i, jr := range s.journals {
		_, done := jr.positions()
		if marks[i].Compare(done) <= 0 {
			continue
		}
		c := checkpoint{journalIndex: uint32(jr.index), journalCount: nj, ledgerDirCount: nl, pos: marks[i], storeID: s.storeID}
		if err := writeFileAtomic(s.fs, jr.dir, checkpointFile, encodeCheckpoint(c)); err != nil {
			err = fmt.Errorf("ledgerstore: recording checkpoint of %s: %w", jr.dir, err)
			s.fail(err)
			return err
		}
		jr.mu.Lock()
		jr.mu.checkpointed = marks[i]
		jr.mu.Unlock()
	}
	s.at("checkpoint:recorded")
	for i, jr := range s.journals {
		if marks[i] == (journal.Position{}) {
			continue
		}
		if err := jr.j.MarkDurable(marks[i]); err != nil {
			return fmt.Errorf("ledgerstore: dropping checkpointed journal files: %w", err)
		}
	}
	s.at("checkpoint:done")
	return nil
}

// GCStats reports one garbage-collection pass over every ledger directory.
type GCStats = entrylog.CompactStats

// GC is the body of the garbage-collection loop: in every ledger directory
// it removes entry logs holding only deleted ledgers' entries and compacts
// sealed logs whose live fraction is below Config.GCThreshold (no sealed
// log while compaction is suspended, see SuspendCompaction), moving live
// entries with index.Relocate as the compare-and-set apply step (see
// entrylog's package comment for the protocol). A ledger is live while its
// state record exists and is not fenced-and-deleted; if its state cannot be
// read it counts as live (never drop data on doubt).
func (s *Store) GC() (GCStats, error) {
	var total GCStats
	threshold := s.compactionThreshold()
	s.compaction.running.Store(true)
	defer func() {
		s.compaction.running.Store(false)
		s.compaction.logsRemoved.Add(int64(total.LogsRemoved))
		s.compaction.bytesRead.Add(total.BytesRead)
		s.compaction.bytesWritten.Add(total.BytesWritten)
		if threshold > 0 {
			s.compaction.passes.Add(1)
			s.compaction.lastPass.Store(s.cfg.Clock.Now().UnixNano())
		}
	}()
	for _, sh := range s.shards {
		live := func(ledgerID int64) bool {
			st, err := sh.ix.LedgerState(ledgerID)
			if err != nil {
				return !isNoLedger(err)
			}
			return !st.Deleted
		}
		apply := func(rs []entrylog.Relocation) error {
			_, err := sh.ix.Relocate(rs)
			return err
		}
		st, err := sh.el.GC(threshold, live, apply)
		total.LogsRemoved += st.LogsRemoved
		total.LogsWritten += st.LogsWritten
		total.BytesRead += st.BytesRead
		total.BytesWritten += st.BytesWritten
		total.EntriesMoved += st.EntriesMoved
		total.EntriesDropped += st.EntriesDropped
		if err != nil {
			return total, fmt.Errorf("ledgerstore: garbage collection in %s: %w", sh.dir, err)
		}
	}
	return total, nil
}
