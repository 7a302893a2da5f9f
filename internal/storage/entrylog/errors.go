package entrylog

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Match them with errors.Is.
var (
	// ErrWriteCacheFull: an Add waited Options.MaxAddWait for the write
	// cache to drain and it did not. The bookie answers the add with an error
	// (BookKeeper: the add is rejected after dbStorage_maxThrottleTimeMs);
	// the journal has not been written, so nothing was acknowledged.
	ErrWriteCacheFull = errors.New("entrylog: write cache full")
	// ErrEntryTooLarge: the entry can never fit the write cache or the
	// record format (MaxEntryBytes).
	ErrEntryTooLarge = errors.New("entrylog: entry too large")
	// ErrInvalidID: a negative ledger or entry id.
	ErrInvalidID = errors.New("entrylog: invalid ledger or entry id")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("entrylog: store closed")
	// ErrLogRemoved: the location names an entry log that compaction has
	// removed. The index already holds the entry's new location: look it up
	// again and retry.
	ErrLogRemoved = errors.New("entrylog: entry log removed by compaction")
	// ErrNoLog: the location names an entry log this store never had. With
	// a consistent index this means lost data; it is not "no such entry".
	ErrNoLog = errors.New("entrylog: no such entry log")
	// ErrCorrupt: matched by every *CorruptionError.
	ErrCorrupt = errors.New("entrylog: corrupt entry log")
	// ErrNotSealed: compaction was asked for a log that is still written to.
	ErrNotSealed = errors.New("entrylog: entry log is not sealed")
)

// CorruptionError reports a record or header that does not verify. It
// matches ErrCorrupt. It is an I/O-level failure: the entry may exist, so
// the bookie must not answer "no such entry" (DESIGN.md §6.6).
type CorruptionError struct {
	// File is the path of the entry log.
	File string
	// Offset is the byte offset of the bad header or record.
	Offset int64
	// Reason says which check failed.
	Reason string
	// Torn is set by ScanFile when the file ends the way a log being
	// written at a crash ends: the last record cut short by the end of the
	// file with no verifiable record after it, or a log created at a crash
	// before its header reached the disk (all zero). Anything else (a
	// checksum mismatch, an impossible length, a length running past the
	// end of the file with a verifiable record after it) is damage.
	Torn bool
	// Next, set by ScanFile, is the offset of the first verifiable record
	// after Offset; 0 when none follows.
	Next int64
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("entrylog: corrupt data in %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
