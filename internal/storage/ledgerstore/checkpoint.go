package ledgerstore

import (
	"errors"
	"fmt"
	"math"
	"time"

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
		c := checkpoint{journalIndex: uint32(jr.index), journalCount: nj, ledgerDirCount: nl, dirs: uint32(len(s.cfg.LedgerDirs)), pos: marks[i], storeID: s.storeID}
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

// GC is one garbage-collection pass with threshold Config.GCThreshold
// (tests and the simulator; the background loop runs GCTick): in every
// ledger directory it removes entry logs holding only deleted ledgers'
// entries and compacts sealed logs whose live fraction is below the
// threshold, moving live entries with index.Relocate as the compare-and-set
// apply step (see entrylog's package comment for the protocol). A ledger is
// live while its state record exists and is not fenced-and-deleted; if its
// state cannot be read it counts as live (never drop data on doubt).
func (s *Store) GC() (GCStats, error) {
	return s.gcWith(s.cfg.GCThreshold)
}

// deadOnly is the threshold that compacts nothing and removes only wholly
// dead logs: a log's live fraction is 0 exactly when it has no live bytes,
// and any live byte makes it at least 1/total, far above this.
const deadOnly = math.SmallestNonzeroFloat64

// CompactionKind says what a GC tick compacted.
type CompactionKind string

// The kinds of GCTick.
const (
	// CompactionNone: only wholly dead logs were removed.
	CompactionNone CompactionKind = "none"
	// CompactionSuspended: a compaction was held back (the disk is full
	// and isForceGCAllowWhenNoSpace is off, or SuspendCompaction); only
	// wholly dead logs were removed.
	CompactionSuspended CompactionKind = "suspended"
	CompactionMinor     CompactionKind = "minor"
	CompactionMajor     CompactionKind = "major"
)

// GCTick is the body of the garbage-collection loop (BookKeeper's
// GarbageCollectorThread.runWithFlags): it picks a compaction by
// Config.Compaction (see CompactionPolicy) and runs the pass. force is a
// manual trigger (TriggerCompaction): the kinds' intervals are ignored.
// Wholly dead logs are removed on every tick.
//
// Reads during compaction stay correct: an entry is readable at the old
// location until the index durably points at the new one, and a read that
// looked up the old location just before the old log was removed looks the
// entry up again (entrylog.ErrLogRemoved).
func (s *Store) GCTick(force bool) (GCStats, CompactionKind, error) {
	p := *s.cfg.Compaction
	now := s.cfg.Clock.Now()
	s.gcState.mu.Lock()
	noSpace := s.gcState.noSpace
	lastMinor, lastMajor := s.gcState.lastMinor, s.gcState.lastMajor
	suspendMinor, suspendMajor := s.gcState.suspendMinor, s.gcState.suspendMajor
	s.gcState.mu.Unlock()
	if noSpace && p.ForceWhenNoSpace {
		force = true
	}
	majorDue := (force && p.forceable(p.majorOn(), p.MajorThreshold)) || (p.majorOn() && now.Sub(lastMajor) >= p.MajorInterval)
	minorDue := (force && p.forceable(p.minorOn(), p.MinorThreshold)) || (p.minorOn() && now.Sub(lastMinor) >= p.MinorInterval)
	kind, threshold := CompactionNone, deadOnly
	switch {
	case noSpace && !p.ForceWhenNoSpace:
		kind = CompactionSuspended
	case majorDue && !suspendMajor:
		kind, threshold = CompactionMajor, p.MajorThreshold
	case minorDue && !suspendMinor:
		kind, threshold = CompactionMinor, p.MinorThreshold
	case majorDue || minorDue:
		kind = CompactionSuspended
	}
	s.gcState.mu.Lock()
	s.gcState.running, s.gcState.forcing = kind, force
	s.gcState.mu.Unlock()
	st, err := s.gcWith(threshold)
	s.gcState.mu.Lock()
	s.gcState.running, s.gcState.forcing = "", false
	if err == nil {
		switch kind {
		case CompactionMajor:
			s.gcState.lastMajor, s.gcState.lastMinor = now, now
			s.gcState.majorCount++
		case CompactionMinor:
			s.gcState.lastMinor = now
			s.gcState.minorCount++
		}
	}
	s.gcState.mu.Unlock()
	return st, kind, err
}

// SuspendCompaction suspends major and/or minor compaction until
// ResumeCompaction (BookKeeper's PUT /api/v1/bookie/gc/suspend_compaction);
// wholly dead logs are still removed. A suspended major compaction that is
// due lets a due minor one run, as in Java.
func (s *Store) SuspendCompaction(major, minor bool) {
	s.gcState.mu.Lock()
	defer s.gcState.mu.Unlock()
	s.gcState.suspendMajor = s.gcState.suspendMajor || major
	s.gcState.suspendMinor = s.gcState.suspendMinor || minor
}

// ResumeCompaction lifts SuspendCompaction for the kinds given.
func (s *Store) ResumeCompaction(major, minor bool) {
	s.gcState.mu.Lock()
	defer s.gcState.mu.Unlock()
	s.gcState.suspendMajor = s.gcState.suspendMajor && !major
	s.gcState.suspendMinor = s.gcState.suspendMinor && !minor
}

// CompactionStatus is the state of the GC loop's compactions (what
// BookKeeper's gc_details and suspend_compaction report).
type CompactionStatus struct {
	// Running is the kind of the tick in progress, "" when none; Forcing
	// says it is forced (manual, or isForceGCAllowWhenNoSpace).
	Running CompactionKind
	Forcing bool
	// LastMajor and LastMinor are when the last compaction of each kind
	// finished its pass (Open counts as one); MajorCount and MinorCount
	// count them since Open.
	LastMajor, LastMinor   time.Time
	MajorCount, MinorCount int64
	// MajorSuspended and MinorSuspended are SuspendCompaction's requests;
	// NoSpace is SetNoSpace's last verdict.
	MajorSuspended, MinorSuspended bool
	NoSpace                        bool
	// LogsRemoved, BytesRead and BytesWritten total every pass since
	// Open: entry logs removed, and bytes of sealed logs read and
	// rewritten by compaction (their difference is the space reclaimed).
	LogsRemoved, BytesRead, BytesWritten int64
}

// CompactionStatus returns the GC loop's compaction state.
func (s *Store) CompactionStatus() CompactionStatus {
	s.gcState.mu.Lock()
	defer s.gcState.mu.Unlock()
	g := &s.gcState
	return CompactionStatus{
		Running: g.running, Forcing: g.forcing, LastMajor: g.lastMajor, LastMinor: g.lastMinor,
		MajorCount: g.majorCount, MinorCount: g.minorCount,
		MajorSuspended: g.suspendMajor, MinorSuspended: g.suspendMinor, NoSpace: g.noSpace,
		LogsRemoved: g.logsRemoved, BytesRead: g.bytesRead, BytesWritten: g.bytesWritten,
	}
}

// SetNoSpace tells the store whether its disk is full (the bookie's disk
// check): while it is, compaction is suspended, or forced when
// CompactionPolicy.ForceWhenNoSpace (then a tick is also triggered now, as
// Java's enableForceGC does). It does not block.
func (s *Store) SetNoSpace(full bool) {
	s.gcState.mu.Lock()
	was := s.gcState.noSpace
	s.gcState.noSpace = full
	s.gcState.mu.Unlock()
	if full && !was && s.cfg.Compaction.ForceWhenNoSpace {
		s.TriggerCompaction()
	}
}

// TriggerCompaction asks the GC loop for a forced tick now (a manual GC).
// It does not block; without the background loops (Config.Manual) the
// owner calls GCTick(true) instead.
func (s *Store) TriggerCompaction() {
	select {
	case s.gcTrigger <- struct{}{}:
	default:
	}
}

// DamagedLogs lists the entry logs, in every ledger directory, whose
// records stop verifying before their end other than at a crash's torn
// tail: the store keeps them and never compacts or removes them, since
// entries after the damage may be live (GCStats.LogsDamaged counts them).
// The bookie logs them at start; an operator compares them with
// localconsistencycheck and re-replicates what cannot be read.
func (s *Store) DamagedLogs() []*entrylog.CorruptionError {
	var out []*entrylog.CorruptionError
	for _, sh := range s.shards {
		out = append(out, sh.el.DamagedLogs()...)
	}
	return out
}

func (s *Store) gcWith(threshold float64) (GCStats, error) {
	var total GCStats
	defer func() {
		s.gcState.mu.Lock()
		s.gcState.logsRemoved += int64(total.LogsRemoved)
		s.gcState.bytesRead += total.BytesRead
		s.gcState.bytesWritten += total.BytesWritten
		s.gcState.mu.Unlock()
	}()
	var errs []error
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
		total.LogsDamaged += st.LogsDamaged
		// One directory's failure (a compaction output hitting ENOSPC)
		// must not keep the others from removing their dead logs.
		if err != nil {
			errs = append(errs, fmt.Errorf("ledgerstore: garbage collection in %s: %w", sh.dir, err))
		}
	}
	return total, errors.Join(errs...)
}
