package ledgerstore

import (
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

// JournalQueuedRecords is the records queued in all journals, not yet
// durable (BookKeeper's JOURNAL_QUEUE_SIZE).
func (s *Store) JournalQueuedRecords() int {
	n := 0
	for _, jr := range s.journals {
		n += jr.j.QueuedRecords()
	}
	return n
}
