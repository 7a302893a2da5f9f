package journal

import (
	"errors"
	"fmt"
)

// Errors returned by the journal. Match them with errors.Is; the concrete
// errors wrap them with context.
var (
	// ErrFailed: the journal hit an I/O error (write or fdatasync) and no
	// longer accepts appends. The error returned wraps the original cause.
	// The owner should turn the bookie read-only; reopening the directory
	// starts a new file.
	ErrFailed = errors.New("journal: failed after an I/O error; read-only until reopened")

	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal: closed")

	// ErrQueueFull: the append queue stayed over its byte or record bound
	// for longer than Options.QueueWait. Back-pressure: retry later or shed
	// load.
	ErrQueueFull = errors.New("journal: append queue full")

	// ErrRecordTooLarge: the record's payload exceeds MaxPayloadBytes or
	// cannot ever fit the queue (Options.MaxQueueBytes).
	ErrRecordTooLarge = errors.New("journal: record too large")

	// ErrCorrupt marks every *CorruptionError.
	ErrCorrupt = errors.New("journal: corrupt")
)

// CorruptionError reports damaged or unreadable journal contents at a
// known place. It matches ErrCorrupt with errors.Is. A torn tail (the last,
// unacknowledged group of the last file) is not corruption: replay cuts it
// silently.
type CorruptionError struct {
	File   string // path of the journal file
	Offset int64  // byte offset of the damaged record or header
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("journal: corrupt data in %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
