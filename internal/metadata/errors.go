package metadata

import (
	"errors"
	"fmt"
	"strings"
)

// Every failure a metadata driver reports on purpose is one of these
// sentinels, possibly wrapped with context (the key, the ledger id). Match
// them with errors.Is. Anything else (a dial error, a context error, an
// unavailable store) is an operating error of the transport, passed through
// wrapped; callers treat it as "outcome unknown" and may retry.
var (
	// ErrLedgerExists: CreateLedgerMetadata found the ledger's key already
	// present. CreateLedger handles it by generating a new id (as Java's
	// LedgerCreateOp does) and never returns it.
	ErrLedgerExists = errors.New("ledger metadata already exists")

	// ErrNoSuchLedger: the ledger's key is absent. Only an absent key gives
	// this error: a key that is present but unreadable gives
	// ErrCorruptMetadata, so that "no such ledger" can be trusted by bookie
	// garbage collection and by readers deciding that data is gone.
	ErrNoSuchLedger = errors.New("no such ledger")

	// ErrBadVersion: a compare-and-set found a different version than the
	// expected one (someone else wrote first). Re-read and re-apply, as
	// BookKeeper's MetadataUpdateLoop does.
	ErrBadVersion = errors.New("metadata version mismatch")

	// ErrCorruptMetadata: a stored value cannot be parsed or fails
	// validation. The error always names the key (see CorruptError). It is
	// never "no such ledger": the value exists, and data may depend on it.
	ErrCorruptMetadata = errors.New("corrupt metadata")

	// ErrInvalidMetadata: a value given to a write fails validation; nothing
	// was written. Folio never stores a value Java would refuse to read.
	ErrInvalidMetadata = errors.New("invalid ledger metadata")

	// ErrInvalidLedgerID: a ledger id outside [0, MaxLedgerID].
	ErrInvalidLedgerID = errors.New("invalid ledger id")

	// ErrClusterExists: InitNewCluster, or Format without force, found an
	// initialised cluster under the scope.
	ErrClusterExists = errors.New("cluster already initialised")

	// ErrNoCluster: the scope has not been initialised (no instance id).
	ErrNoCluster = errors.New("cluster not initialised")

	// ErrBookiesRegistered: Format refuses to wipe a cluster while bookies
	// are registered (writable or read-only), whatever the force flag; stop
	// them first.
	ErrBookiesRegistered = errors.New("bookies are still registered")

	// ErrBookieRegistered: RegisterBookie found the bookie's key held by
	// another session (a previous process whose lease has not yet expired,
	// or a second process with the same bookie id).
	ErrBookieRegistered = errors.New("previous bookie registration still exists")

	// ErrNoSuchCookie: no cookie is stored for the bookie.
	ErrNoSuchCookie = errors.New("no such cookie")

	// ErrCookieExists: WriteCookie with VersionNew found a cookie.
	ErrCookieExists = errors.New("cookie already exists")

	// ErrSessionExpired: the session's lease is gone (expired or revoked);
	// everything registered under it has been removed by the store. Open a
	// new session and register again.
	ErrSessionExpired = errors.New("metadata session expired")

	// ErrLocked: a lock (an under-replicated ledger's lock) is already
	// held, by another session or by the same one (locks are not
	// re-entrant).
	ErrLocked = errors.New("lock already held")

	// ErrNotFound: an AutoRecovery record (under-replicated ledger, auditor)
	// is absent.
	ErrNotFound = errors.New("not found")

	// ErrNotSupported: the driver does not implement this optional feature.
	ErrNotSupported = errors.New("not supported by this metadata driver")

	// ErrClosed: the driver or session has been closed.
	ErrClosed = errors.New("metadata driver closed")

	// ErrBadURI: the metadata service URI is malformed or names an unknown
	// scheme.
	ErrBadURI = errors.New("bad metadata service URI")

	// ErrBadSecurity: the security settings (Options.Security) contradict
	// each other or the URI (TLS with a plaintext etcd:// URI, a user
	// without a password), or the driver cannot honour them (the ZooKeeper
	// driver has neither TLS nor authentication).
	ErrBadSecurity = errors.New("bad metadata store security settings")

	// ErrAuthFailed: the store refused the credentials (a wrong user or
	// password), or requires authentication and none was given.
	ErrAuthFailed = errors.New("metadata store authentication failed")

	// ErrPermissionDenied: the store authenticated the client but its user
	// may not read or write the cluster's keys.
	ErrPermissionDenied = errors.New("metadata store permission denied")

	// ErrTLS: the TLS connection to the store could not be made: the
	// store's certificate is not trusted (or not valid for its address),
	// the store refused the client certificate (or the lack of one), or
	// one side speaks TLS and the other does not.
	ErrTLS = errors.New("TLS connection to the metadata store failed")

	// ErrNotBuilt: the URI names the ZooKeeper driver, which is not linked
	// into this program (every `folio` command and the client link it; a
	// program that imports only internal/metadata does not).
	ErrNotBuilt = errors.New("ZooKeeper metadata driver not linked into this program")
)

// CorruptError is the error of a stored value that cannot be used. It wraps
// ErrCorruptMetadata, so errors.Is(err, ErrCorruptMetadata) holds, and its
// message names the store key (for etcd, the full key with the scope).
type CorruptError struct {
	// Key is the store key holding the bad value.
	Key string
	// Err says what is wrong with it.
	Err error
}

func (e *CorruptError) Error() string {
	msg := e.Err.Error()
	if errors.Is(e.Err, ErrCorruptMetadata) {
		// The cause already starts with ErrCorruptMetadata's text.
		msg = strings.TrimPrefix(msg, ErrCorruptMetadata.Error()+": ")
	}
	return fmt.Sprintf("corrupt metadata at key %q: %s", e.Key, msg)
}

// Unwrap returns both ErrCorruptMetadata and the cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorruptMetadata, e.Err} }

// Corrupt returns a *CorruptError for key.
func Corrupt(key string, err error) error { return &CorruptError{Key: key, Err: err} }
