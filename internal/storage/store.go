// Package storage holds what the bookie sees of its storage engine: the
// Store interface, its options and errors. The engine itself lives below:
// journal/ (write-ahead log, group commit), entrylog/ (entry logs, write
// cache, compaction), index/ (Pebble index and per-ledger state) and
// ledgerstore/ (the Store that ties them together, checkpoints and replay).
// All of it does file I/O through a vfs.FS and reads time from an injected
// clock (DESIGN.md §4).
package storage

import (
	"context"
	"errors"
)

// Store is what a bookie needs from its storage engine
// (internal/storage/ledgerstore implements it). Every method is safe for
// concurrent use. Errors are the sentinels below (wrapped with detail);
// anything else is an I/O failure, reported to clients as EIO, never as "no
// such entry".
//
// Durability contract (DESIGN.md §6): AddEntry completes without error only
// once the entry is durable (journal fsync), unless DeferredSync is set; Fence
// and SetExplicitLAC return only once durable. Fence bits and master keys
// survive crashes and ledger deletion.
type Store interface {
	// AddEntry stores body, a digested entry whose first 16 bytes are
	// (ledgerID, entryID), for the ledger. On the ledger's first write or
	// fence the store records masterKey; later calls must present the same
	// key (ErrUnauthorized otherwise). Unless opts.Recovery, a fenced ledger
	// refuses the add with ErrFenced; the fence check and the add are atomic
	// with respect to Fence. A ledger fenced and then deleted refuses even
	// recovery adds (ErrFenced). Re-adding an existing entry overwrites it.
	//
	// AddEntry does not block on I/O: it queues the add and calls
	// done.AddComplete exactly once, from another goroutine, when the entry is
	// durable or the add failed. A queue that stays full for the store's
	// bounded wait fails the add with ErrTooManyRequests. The store may
	// retain body until done is called: the caller must not modify it before.
	AddEntry(ledgerID, entryID int64, masterKey, body []byte, opts AddOptions, done AddCompletion)

	// Fence marks the ledger fenced, creating it (with masterKey) if unknown,
	// and returns once the fence is durable. Fencing is idempotent and
	// permanent. ErrUnauthorized on a key mismatch.
	Fence(ctx context.Context, ledgerID int64, masterKey []byte) error

	// ReadEntry returns the stored body of an entry, byte for byte; entryID
	// -1 means the entry with the highest id. ErrNoLedger when the ledger is
	// unknown, ErrNoEntry when it is known and the entry is absent; both only
	// when the store is certain. The returned slice is the caller's.
	ReadEntry(ledgerID, entryID int64) ([]byte, error)

	// LastAddConfirmed is the bookie's known LAC of the ledger: the largest
	// of the LAC fields of its stored entries and of the explicit LAC.
	// ErrNoLedger if unknown. -1 when nothing is confirmed.
	LastAddConfirmed(ledgerID int64) (int64, error)

	// WatchLAC registers interest in the ledger's LAC moving past previous.
	// It returns the current known LAC; if that is ≤ previous, wake is
	// called once when the LAC grows or the ledger is deleted, unless
	// cancel was called first (if it is > previous, wake is never called).
	// Watches of one ledger are woken in the order they were registered.
	// wake runs on the goroutine that raised the LAC, with the store's
	// locks held: it must not block and must not call the store (it hands
	// the work on). cancel releases the watch: always call it, not holding
	// a lock wake takes; calling it again, or after wake, does nothing.
	// ErrNoLedger if the ledger is unknown.
	WatchLAC(ledgerID, previous int64, wake func()) (lac int64, cancel func(), err error)

	// SetExplicitLAC stores the WRITE_LAC body (ledgerId, lac, digest)
	// unchanged, raises the known LAC to its lac field, and returns once
	// durable. Key checked as for adds; fenced ledgers accept it.
	SetExplicitLAC(ctx context.Context, ledgerID int64, masterKey, body []byte) error

	// ExplicitLAC returns the stored WRITE_LAC body, ErrNoEntry if none was
	// stored, ErrNoLedger if the ledger is unknown.
	ExplicitLAC(ledgerID int64) ([]byte, error)

	// Force makes every add already acknowledged for the ledger durable (for
	// DEFERRED_SYNC writers).
	Force(ctx context.Context, ledgerID int64) error

	// Entries calls fn with the ids of the ledger's stored entries,
	// ascending, until fn returns false. ErrNoLedger if unknown.
	Entries(ledgerID int64, fn func(entryID int64) bool) error

	// Ledgers calls fn with the ids of every ledger the store holds
	// (deleted-and-fenced markers excluded), until fn returns false.
	Ledgers(fn func(ledgerID int64) bool) error

	// DeleteLedger drops the ledger's entries. A fenced ledger stays known as
	// fenced-and-deleted.
	DeleteLedger(ctx context.Context, ledgerID int64) error

	// LedgerInfo reports the bookie's state of the ledger (fence bit, known
	// LAC, last stored entry) without changing anything: it never fences,
	// never creates a ledger and never writes (for inspection). A
	// fenced-and-deleted ledger reports Fenced and Deleted; ErrNoLedger if
	// the store does not know the ledger at all.
	LedgerInfo(ledgerID int64) (LedgerInfo, error)

	// DiskUsage reports the bytes of the volumes holding the store.
	DiskUsage() (DiskUsage, error)

	// Failed is closed when the store stops accepting writes for good (a
	// failed fsync, a write error): the bookie turns read-only. Err says why.
	Failed() <-chan struct{}
	Err() error
}

// RangeReader is implemented by stores that read a run of consecutive
// entries at once (BATCH_READ_ENTRY), in the order they lie on disk.
type RangeReader interface {
	// ReadEntries returns entries firstEntryID, firstEntryID+1, ... of the
	// ledger, byte for byte as ReadEntry would, while they exist: at most
	// maxCount (≤ 0: no count bound) and, after the first, while the sum
	// over the returned entries of perEntryBytes + len(body) stays within
	// maxBytes (the first entry is always returned). The first entry's
	// failure is the error, with no entries (ErrNoLedger, ErrNoEntry only
	// when certain, as ReadEntry). The run ends silently at an absent
	// entry; when it ends at a later entry that could not be read for
	// another reason (damage, I/O), the entries before it are returned
	// together with that error, for the caller to log.
	ReadEntries(ledgerID, firstEntryID int64, maxCount int, maxBytes, perEntryBytes int64) ([][]byte, error)
}

// LedgerInfo is a bookie's state of one ledger (Store.LedgerInfo).
type LedgerInfo struct {
	// Fenced: the fence bit is set (fences are permanent).
	Fenced bool
	// Deleted: the ledger was fenced and then deleted; only its fence
	// remains (LastAddConfirmed and LastEntryID are then -1).
	Deleted bool
	// LastAddConfirmed is the known LAC, as Store.LastAddConfirmed; -1 when
	// nothing is confirmed.
	LastAddConfirmed int64
	// LastEntryID is the highest stored entry id; -1 when none.
	LastEntryID int64
	// HasExplicitLAC: a WRITE_LAC body is stored.
	HasExplicitLAC bool
}

// AddOptions qualify an add.
type AddOptions struct {
	// Recovery: a RECOVERY_ADD, accepted on fenced ledgers.
	Recovery bool
	// DeferredSync: acknowledge once written, before the fsync; Force makes
	// it durable.
	DeferredSync bool
}

// AddCompletion receives the outcome of one AddEntry. An interface rather
// than a func so a request can complete itself without a closure
// allocation.
type AddCompletion interface {
	AddComplete(err error)
}

// DiskUsage of the volumes under a store's directories, in bytes.
type DiskUsage struct {
	Total, Free, Used uint64
}

// Storage errors.
var (
	ErrNoLedger           = errors.New("ledger not found on this bookie")
	ErrNoEntry            = errors.New("entry not found on this bookie")
	ErrFenced             = errors.New("ledger fenced")
	ErrUnauthorized       = errors.New("master key does not match the ledger's")
	ErrTooManyRequests    = errors.New("storage queue full")
	ErrReadOnly           = errors.New("storage is read-only")
	ErrUnknownLedgerState = errors.New("ledger state unknown")
)
