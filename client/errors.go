package client

import (
	"errors"
	"fmt"

	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// The client's errors, matched with errors.Is. An error the client returns
// may wrap one of these with context (which bookie, which ledger); the
// BookKeeper status code each stands for is given by Code.
var (
	// ErrLedgerFenced: another client is recovering the ledger. For an
	// append it means "outcome unknown": the entry may still end up in the
	// ledger (spec/protocol.md §1.9); treat it like a timeout.
	ErrLedgerFenced = errors.New("ledger fenced")
	// ErrLedgerClosed: the ledger is closed and takes no more entries. For
	// an append that was pending it means "outcome unknown".
	ErrLedgerClosed = errors.New("ledger closed")
	// ErrNoSuchLedger: the ledger's metadata does not exist.
	ErrNoSuchLedger = errors.New("no such ledger")
	// ErrNoSuchEntry: the entry does not exist; enough bookies of its write
	// set said so explicitly (never inferred from errors or timeouts).
	ErrNoSuchEntry = errors.New("no such entry")
	// ErrUnauthorized: wrong password (ledger master key), or a bookie
	// refused the client's certificate (BookieAuthZFactory; then ErrTLS
	// matches too).
	ErrUnauthorized = errors.New("unauthorized: wrong ledger password")
	// ErrTLS: a bookie connection could not be secured as Config.TLS asks:
	// the bookie has no TLS, the handshake failed (certificate missing,
	// expired, of another CA), or the bookie refused the certificate.
	ErrTLS = errors.New("bookie connection security failed")
	// ErrMetadataAuth: the metadata store refused the client's
	// credentials (Config.MetadataUser and MetadataPassword, or the client
	// certificate's user) or their permissions on the cluster's keys.
	ErrMetadataAuth = errors.New("metadata store refused the client's credentials")
	// ErrMetadataTLS: the connection to the metadata store could not be
	// secured as Config.MetadataTLS asks: the store has no TLS, its
	// certificate does not verify, or it refused the client certificate.
	ErrMetadataTLS = errors.New("metadata store connection security failed")
	// ErrInvalidConfig: the Config or LedgerOptions are invalid or
	// contradict each other (a TLS setting with a plaintext metadata URI,
	// a malformed URI, impossible quorum sizes); nothing was contacted.
	ErrInvalidConfig = errors.New("invalid client configuration")
	// ErrEntryTooLarge: an append's payload does not fit one frame
	// (Config.MaxFrameSize, Java's nettyMaxFrameSizeBytes, less a small
	// header allowance); nothing was sent.
	ErrEntryTooLarge = errors.New("entry too large")
	// ErrNotEnoughBookies: too few writable bookies to create the ensemble
	// or to replace a failed bookie.
	ErrNotEnoughBookies = errors.New("not enough writable bookies")
	// ErrTimeout: a bookie did not answer in time. The outcome is unknown.
	ErrTimeout = errors.New("timed out")
	// ErrTooManyRequests: the client's bound on outstanding appends is
	// reached (Config.FailFastWhenBusy), or a bookie was overloaded.
	ErrTooManyRequests = errors.New("too many outstanding requests")
	// ErrMetadataVersion: the ledger's metadata changed under the
	// operation; for a close, another client closed the ledger at a
	// different end (entries this writer had pending may be lost, the ones
	// it acknowledged are not).
	ErrMetadataVersion = errors.New("ledger metadata changed concurrently")
	// ErrLedgerRecovery: recovery could not finish; the ledger stays
	// IN_RECOVERY and recovery may be retried.
	ErrLedgerRecovery = errors.New("ledger recovery failed")
	// ErrReadBeyondLAC: Read asked for entries past the last add confirmed
	// (use ReadUnconfirmed to read what bookies have).
	ErrReadBeyondLAC = errors.New("read beyond the last add confirmed")
	// ErrClientClosed: the Client was closed (Client.Close). Operations
	// started after the close fail with it (CreateLedger, OpenLedger,
	// AppendAsync, a handle's Close and the metadata requests of a
	// recovery still running); appends pending when the client closed fail
	// with it and with ErrLedgerClosed (both match: their outcome is
	// unknown). Code gives -19, Java's BKClientClosedException.
	ErrClientClosed = errors.New("client closed")
	// ErrAddQuorumTimeout: an append was not acknowledged by an ack quorum
	// within Config.AddEntryQuorumTimeout. It matches ErrTimeout too: the
	// outcome is unknown. The handle then fails every pending append with
	// it and closes the ledger at its last acknowledged entry, as Java
	// does; later appends fail with ErrLedgerClosed. Code gives -21,
	// Java's AddEntryQuorumTimeoutException.
	ErrAddQuorumTimeout = fmt.Errorf("add entry quorum timeout: %w", ErrTimeout)
	// ErrTooManyEnsembleChanges: a bookie failure needed an ensemble change
	// beyond Config.MaxNumEnsembleChanges. The handle fails its pending
	// appends with it (outcome unknown) and closes the ledger at its last
	// acknowledged entry; later appends fail with ErrLedgerClosed. Code
	// gives -12, the WriteException Java closes the handle with.
	ErrTooManyEnsembleChanges = errors.New("too many ensemble changes")
	// ErrLedgerExists: LedgerOptions.LedgerID names a ledger that exists
	// already; nothing was created or changed. Code gives -20, Java's
	// LedgerExistException.
	ErrLedgerExists = errors.New("ledger already exists")
	// ErrDuplicateEntryID: WriteAdvHandle.WriteAt named an entry id that
	// is pending or already acknowledged; nothing was sent, and the handle
	// and the other entries go on. Code gives -22, Java's
	// DuplicateEntryIdException.
	ErrDuplicateEntryID = errors.New("duplicate entry id")
	// ErrInvalidEntryID: WriteAdvHandle.WriteAt named a negative entry id;
	// nothing was sent, and the handle goes on. Code gives -14, Java's
	// IncorrectParameterException (Java itself reports a negative id as a
	// DuplicateEntryIdException, as it is below the initial LAC).
	ErrInvalidEntryID = errors.New("invalid entry id")
)

// errorTable is the one table mapping the client's errors to BookKeeper's
// client return codes (BKException.Code) and to the internal errors they
// stand for. Rows are tried in order, so a more specific cause comes
// first (a failed ensemble change carries both "not enough bookies" and
// "closed").
var errorTable = []struct {
	err    error
	code   int
	causes []error
}{
	{ErrReadBeyondLAC, -1, nil},                                                           // ReadException
	{ErrClientClosed, -19, nil},                                                           // BKClientClosedException
	{ErrNotEnoughBookies, -6, []error{ledger.ErrNotEnoughBookies}},                        // NotEnoughBookiesException
	{ErrLedgerFenced, -101, []error{ledger.ErrLedgerFenced}},                              // LedgerFencedException
	{ErrUnauthorized, -102, []error{ledger.ErrUnauthorized}},                              // UnauthorizedAccessException
	{ErrTLS, -24, []error{transport.ErrTLS}},                                              // SecurityException
	{ErrInvalidConfig, -14, []error{metadata.ErrBadSecurity, metadata.ErrBadURI}},         // IncorrectParameterException
	{ErrMetadataAuth, -18, []error{metadata.ErrAuthFailed, metadata.ErrPermissionDenied}}, // MetaStoreException
	{ErrMetadataTLS, -18, []error{metadata.ErrTLS}},                                       // MetaStoreException
	{ErrMetadataVersion, -17, []error{ledger.ErrMetadataVersion, metadata.ErrBadVersion}}, // MetadataVersionException
	{ErrLedgerRecovery, -10, []error{ledger.ErrLedgerRecovery}},                           // LedgerRecoveryException
	{ErrTooManyEnsembleChanges, -12, []error{ledger.ErrTooManyEnsembleChanges}},           // WriteException
	{ErrLedgerClosed, -11, []error{ledger.ErrLedgerClosed}},                               // LedgerClosedException
	{ErrNoSuchLedger, -7, []error{metadata.ErrNoSuchLedger}},                              // NoSuchLedgerExistsException
	{ErrNoSuchEntry, -13, []error{ledger.ErrNoSuchEntry}},                                 // NoSuchEntryException
	{ErrAddQuorumTimeout, -21, []error{ledger.ErrAddQuorumTimeout}},                       // AddEntryQuorumTimeoutException
	{ErrTimeout, -23, []error{ledger.ErrTimeout, transport.ErrTimeout}},                   // TimeoutException
	{ErrTooManyRequests, -105, []error{wire.ErrTooManyRequests}},                          // TooManyRequestsException
	{ErrEntryTooLarge, -100, []error{wire.ErrFrameTooLarge}},                              // IllegalOpException
	{ErrLedgerExists, -20, []error{metadata.ErrLedgerExists}},                             // LedgerExistException
	{ErrDuplicateEntryID, -22, []error{ledger.ErrDuplicateEntryID}},                       // DuplicateEntryIdException
	{ErrInvalidEntryID, -14, []error{ledger.ErrInvalidEntryID}},                           // IncorrectParameterException
}

// Code returns the BookKeeper client return code (BKException.Code) of err:
// 0 for nil, the code of the first of the client's errors that err matches,
// -8 (BookieHandleNotAvailable) for a lost bookie connection, and -1
// (ReadException, Java's catch-all) for anything else.
func Code(err error) int {
	if err == nil {
		return 0
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	if errors.Is(err, transport.ErrBookieUnavailable) {
		return -8
	}
	return -1
}

// clientError is an internal error given its public meaning: it matches the
// public sentinel and still unwraps to the cause.
type clientError struct {
	public error
	cause  error
}

func (e *clientError) Error() string        { return e.cause.Error() }
func (e *clientError) Unwrap() error        { return e.cause }
func (e *clientError) Is(target error) bool { return errors.Is(e.public, target) }

// publicError gives err its public sentinel from errorTable, if a cause
// matches and it has none yet.
func publicError(err error) error {
	if err == nil {
		return nil
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return err // already public
		}
	}
	for _, row := range errorTable {
		for _, c := range row.causes {
			if errors.Is(err, c) {
				return &clientError{public: row.err, cause: err}
			}
		}
	}
	return err
}
