package ledgerstore

import (
	"time"

	"github.com/foliodb/folio/internal/storage/journal"
)

// LogMark is one journal directory's last log mark: the journal position
// recorded by the latest checkpoint (BookKeeper's lastMark). Replay after a
// restart starts there.
type LogMark struct {
	Dir string
	journal.Position
}

// LastLogMarks returns each journal directory's last log mark, in
// directory order. A journal never checkpointed has the zero Position.
func (s *Store) LastLogMarks() []LogMark {
	marks := make([]LogMark, len(s.journals))
	for i, jr := range s.journals {
		jr.mu.Lock()
		marks[i] = LogMark{Dir: jr.dir, Position: jr.mu.checkpointed}
		jr.mu.Unlock()
	}
	return marks
}

// CompactionStatus describes the entry-log garbage collection
// (BookKeeper's GarbageCollectionStatus, one compaction level).
type CompactionStatus struct {
	// Compacting is true while a pass runs.
	Compacting bool
	// MajorSuspended and MinorSuspended are the operator's suspensions
	// (SuspendCompaction).
	MajorSuspended, MinorSuspended bool
	// Passes counts completed passes that compacted (not suspended).
	Passes int64
	// LastPass is when the last such pass ended (zero: never).
	LastPass time.Time
	// LogsRemoved, BytesRead and BytesWritten total every pass's
	// GCStats since the store opened: entry logs removed, and bytes of
	// sealed logs read and rewritten by compaction.
	LogsRemoved             int64
	BytesRead, BytesWritten int64
}

// SuspendCompaction suspends major and/or minor compaction (BookKeeper's
// suspendMajorGC/suspendMinorGC); false leaves a level as it is. Folio's
// entry-log compaction has one level, the threshold Config.GCThreshold: it
// is skipped while either level is suspended, so that an operator who
// suspends compaction to spare the disks gets no relocation I/O. Entry
// logs that hold only deleted ledgers' entries are still removed (no
// copying), as Java's garbage collector does while compaction is
// suspended.
func (s *Store) SuspendCompaction(major, minor bool) {
	if major {
		s.compaction.majorSuspended.Store(true)
	}
	if minor {
		s.compaction.minorSuspended.Store(true)
	}
}

// ResumeCompaction undoes SuspendCompaction for the levels given.
func (s *Store) ResumeCompaction(major, minor bool) {
	if major {
		s.compaction.majorSuspended.Store(false)
	}
	if minor {
		s.compaction.minorSuspended.Store(false)
	}
}

// CompactionStatus reports the compaction's state.
func (s *Store) CompactionStatus() CompactionStatus {
	st := CompactionStatus{
		Compacting:     s.compaction.running.Load(),
		MajorSuspended: s.compaction.majorSuspended.Load(),
		MinorSuspended: s.compaction.minorSuspended.Load(),
		Passes:         s.compaction.passes.Load(),
		LogsRemoved:    s.compaction.logsRemoved.Load(),
		BytesRead:      s.compaction.bytesRead.Load(),
		BytesWritten:   s.compaction.bytesWritten.Load(),
	}
	if ns := s.compaction.lastPass.Load(); ns != 0 {
		st.LastPass = time.Unix(0, ns)
	}
	return st
}

// compactionThreshold is the live fraction below which GC compacts a
// sealed log now: 0 (remove dead logs only) while compaction is suspended.
func (s *Store) compactionThreshold() float64 {
	if s.compaction.majorSuspended.Load() || s.compaction.minorSuspended.Load() {
		return 0
	}
	return s.cfg.GCThreshold
}

// JournalQueuedRecords is the records queued in all journals, not yet
// durable (BookKeeper's JOURNAL_QUEUE_SIZE).
func (s *Store) JournalQueuedRecords() int {
	n := 0
	for _, jr := range s.journals {
		n += jr.j.QueuedRecords()
	}
	return n
}
