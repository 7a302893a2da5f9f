package ledger

import (
	"errors"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/wire"
)

// The errors the machines complete operations with. Match with errors.Is:
// a completion may wrap one of these with context, or carry a bookie's
// *wire.StatusError, which matches the wire sentinels re-exported here.
var (
	// ErrLedgerFenced: another client is recovering the ledger (a bookie
	// answered EFENCED, or the metadata says IN_RECOVERY). For an add it
	// means "outcome unknown": the entry may still end up in the ledger.
	ErrLedgerFenced = wire.ErrLedgerFenced

	// ErrLedgerClosed: the ledger is closed (by this writer or by a
	// recovery), so it takes no more entries. For an add that was pending
	// it means "outcome unknown".
	ErrLedgerClosed = errors.New("ledger closed")

	// ErrNotEnoughBookies: an ensemble change found no writable bookie to
	// replace a failed one. The writer fails its pending adds and closes the
	// ledger at its LAC.
	ErrNotEnoughBookies = placement.ErrNotEnoughBookies

	// ErrMetadataVersion: a close found the ledger already CLOSED at a
	// different end (someone recovered it while writes were outstanding;
	// spec/metadata.md §1.6), or the metadata changed in a way the
	// operation cannot merge with. Entries this writer had pending may be
	// lost; ones it acknowledged are not.
	ErrMetadataVersion = errors.New("ledger metadata changed under the operation")

	// ErrLedgerRecovery: recovery could not finish; the ledger stays
	// IN_RECOVERY and recovery may be retried by anyone.
	ErrLedgerRecovery = errors.New("ledger recovery failed")

	// ErrNoSuchEntry: the entry does not exist: enough bookies of its write
	// set (Qw − Qa + 1) answered with an explicit negative.
	ErrNoSuchEntry = wire.ErrNoSuchEntry

	// ErrUnauthorized: a bookie refused the master key.
	ErrUnauthorized = wire.ErrUnauthorized

	// ErrTimeout: what the shell puts in a response event for a request that
	// got no answer in time. It is an unknown outcome, never a negative.
	ErrTimeout = errors.New("bookie request timed out")

	// ErrNotAnswered: no verifiable answer was possible, e.g. every replica
	// of an entry failed its digest check.
	ErrNotAnswered = errors.New("no valid answer from the bookies")

	// ErrDuplicateEntryID: WriteAt named an entry id that is pending or
	// already acknowledged (Java's DuplicateEntryIdException). Nothing was
	// sent; the writer goes on.
	ErrDuplicateEntryID = errors.New("duplicate entry id")

	// ErrInvalidEntryID: WriteAt named a negative entry id. Nothing was
	// sent; the writer goes on.
	ErrInvalidEntryID = errors.New("invalid entry id")

	// ErrBatchReadUnsupported: what the shell puts in a BatchReadResponse
	// when the bookie cannot serve BATCH_READ_ENTRY (it answered EBADREQ,
	// now or earlier on the same connection). An unknown outcome for the
	// entries, never a negative.
	ErrBatchReadUnsupported = errors.New("bookie does not serve batch reads")
)

// isNegative reports whether err is an explicit negative: the bookie says it
// does not have the entry (ENOENTRY) or the ledger (ENOLEDGER). Only these
// count towards "absent"; timeouts and I/O errors never do (spec §4.4).
func isNegative(err error) bool {
	return errors.Is(err, wire.ErrNoSuchEntry) || errors.Is(err, wire.ErrNoSuchLedger)
}

// isUnrecoverableAddError reports whether an add error stops the writer
// instead of triggering an ensemble change (spec §1.4.3, §1.9): the ledger
// is fenced, the master key is wrong, or the bookie refused the request as
// illegal. Every other error is a bookie failure.
func isUnrecoverableAddError(err error) bool {
	return errors.Is(err, wire.ErrLedgerFenced) || errors.Is(err, wire.ErrUnauthorized) || errors.Is(err, wire.ErrBadRequest)
}
