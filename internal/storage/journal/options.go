package journal

import (
	"errors"
	"fmt"
	"time"

	"github.com/foliodb/folio/internal/clock"
)

// Clock is the time source of the group-commit loop's waits (the group
// wait, the bounded queue wait): clock.Real in production, clock.Manual in
// tests and the simulator.
type Clock = clock.Clock

// Options configure a Journal. Zero fields take the defaults named below.
type Options struct {
	// Clock is required.
	Clock Clock

	// MaxGroupWait is how long a group may wait for more records before it
	// is written. 0 (the default) writes a group as soon as the writer is
	// free: at low load each append is written at once (latency ≈ one
	// fdatasync), under load records gather while the previous fdatasync
	// runs. This is BookKeeper's journalFlushWhenQueueEmpty=true; its
	// default of 2 ms adds that much latency at low load for little gain.
	MaxGroupWait time.Duration

	// MaxGroupBytes closes a group once it holds this many bytes (a single
	// larger record forms a group of its own). Default 512 KiB, BookKeeper's
	// journalBufferedWritesThreshold: at ≥256 KiB per fdatasync the disk
	// streams (spec/performance.md §3.2). At most 1 GiB: Open refuses more.
	MaxGroupBytes int

	// MaxQueueBytes and MaxQueueRecords bound what is queued and in flight
	// (not yet completed). An append that would exceed either waits up to
	// QueueWait for space, then fails with ErrQueueFull. Defaults 64 MiB and
	// 10,000 records (BookKeeper's journalQueueSize).
	MaxQueueBytes   int64
	MaxQueueRecords int

	// QueueWait bounds how long Append blocks for queue space. Default 1 s;
	// negative means fail at once.
	QueueWait time.Duration

	// PreallocBytes is the chunk of zeros written (and synced) ahead of the
	// write position, and the first chunk of every file: the preallocator
	// adds a chunk whenever less than half of one is left ahead of the
	// last group written (Manual mode: whenever a group would not fit).
	// Default 4 MiB; 4–16 MiB is sensible.
	PreallocBytes int64

	// MaxFileBytes rotates to a new file once a group ends at or beyond
	// this offset (a file may exceed it by one group). Default 256 MiB.
	// Smaller files let checkpoints free space sooner.
	MaxFileBytes int64

	// MaxBackups is how many journal files MarkDurable keeps among those it
	// could delete (wholly before the checkpointed position): the newest
	// MaxBackups of them stay, for an operator's post-mortem, as
	// BookKeeper's journalMaxBackups does. They are never replayed (replay
	// starts at the checkpoint's file). Default 0: none are kept.
	MaxBackups int

	// Manual, if set, starts no writer goroutine: the owner (a test or the
	// simulator) calls Flush to run group commits.
	Manual bool

	// OnSync, if set, is called after each successful fdatasync of groups
	// (on the syncer goroutine; in Manual mode, in Flush) with its duration
	// (on Clock) and the number of records it made durable (metrics). It
	// must be cheap and not block.
	OnSync func(took time.Duration, records int)

	// OnFailure, if set, is called once, from the goroutine that met the
	// error, when the journal fails (see ErrFailed), before the failed
	// appends' callbacks run. It must not block and must not call Close.
	OnFailure func(error)

	// hooks are the crash tests' view of the pipeline; nil in production.
	hooks *testHooks
}

// testHooks are called at the points of the write pipeline where a crash
// matters (tests only). Each runs on the goroutine named.
type testHooks struct {
	// beforeHandOff: writer, g is written and about to be handed to the
	// syncer; unsynced groups were written before it (1: the previous
	// group's fdatasync has not completed).
	beforeHandOff func(g *group, unsynced int)
	// afterSync: syncer, the fdatasync covering batch returned success;
	// nothing of it is acknowledged yet and the writer cannot write the
	// group after the next.
	afterSync func(batch []*group)
	// zerosWritten: preallocator, zeros [from, to) of file id are written,
	// not yet synced.
	zerosWritten func(id uint64, from, to int64)
	// createdAhead: preallocator, file id was created ahead.
	createdAhead func(id uint64)
	// rotated: writer, switched to file id (created ahead), nothing
	// written to it yet.
	rotated func(id uint64)
	// waiting: about to wait for the pipeline to change, with the
	// pipeline's lock held: who is "writer" (pipeline: the group after the
	// next, or a rotation, waits for a sync), "failRest" (failing the
	// queue waits for the syncer to complete what it was handed) or
	// "prealloc" (nothing to do); unsynced is the pipeline's count.
	waiting func(who string, unsynced int)
}

// maxGroupBytes bounds Options.MaxGroupBytes so that a group's length
// (plus one record over) always fits the group header's 32 bits.
const maxGroupBytes = 1 << 30

func (o Options) withDefaults() (Options, error) {
	if o.Clock == nil {
		return o, errors.New("journal: Options.Clock is required")
	}
	if o.MaxGroupBytes <= 0 {
		o.MaxGroupBytes = 512 << 10
	}
	if o.MaxQueueBytes <= 0 {
		o.MaxQueueBytes = 64 << 20
	}
	if o.MaxQueueRecords <= 0 {
		o.MaxQueueRecords = 10000
	}
	if o.QueueWait == 0 {
		o.QueueWait = time.Second
	}
	if o.PreallocBytes <= 0 {
		o.PreallocBytes = 4 << 20
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 256 << 20
	}
	if o.MaxGroupBytes > maxGroupBytes {
		// A group header stores the payload length in 32 bits; a group may
		// exceed MaxGroupBytes by one record (at most MaxPayloadBytes).
		return o, fmt.Errorf("journal: MaxGroupBytes %d above the limit of %d", o.MaxGroupBytes, maxGroupBytes)
	}
	if o.MaxBackups < 0 {
		return o, fmt.Errorf("journal: negative MaxBackups %d", o.MaxBackups)
	}
	if o.MaxGroupWait < 0 {
		return o, fmt.Errorf("journal: negative MaxGroupWait %v", o.MaxGroupWait)
	}
	o.PreallocBytes = alignUp(o.PreallocBytes)
	if o.MaxFileBytes < 2*FirstGroupOffset {
		return o, fmt.Errorf("journal: MaxFileBytes %d too small", o.MaxFileBytes)
	}
	return o, nil
}
