package metadata

import (
	"context"
	"time"
)

// The interfaces AutoRecovery needs. They are declared here and implemented
// in the AutoRecovery issue; Java's etcd driver has none of them, so Folio
// keeps their keys under `<scope>/underreplication/` (a subtree Java never
// reads, spec/metadata.md §6 risk 7). A Driver that implements them also
// implements AutoRecoveryDriver; find it with a type assertion. Until then a
// caller reports ErrNotSupported.

// AutoRecoveryDriver is the optional part of a Driver that AutoRecovery uses.
type AutoRecoveryDriver interface {
	UnderReplication
	AuditorElection
}

// UnderReplicatedLedger is one under-replication record
// (UnderreplicatedLedgerFormat).
type UnderReplicatedLedger struct {
	LedgerID int64
	// MissingReplicas are the bookies whose copies are missing, ascending.
	MissingReplicas []BookieID
	// Ctime is when the record was first written (zero if unknown).
	Ctime time.Time
	// Version is the record's version, for MarkLedgerReplicated.
	Version Version
}

// UnderReplication records which ledgers need re-replication, and locks one
// ledger for the replication worker that repairs it.
type UnderReplication interface {
	// MarkLedgerUnderReplicated adds missing to the ledger's record,
	// creating it if absent (a CAS loop inside: concurrent auditors merge).
	MarkLedgerUnderReplicated(ctx context.Context, ledgerID int64, missing []BookieID) error

	// ReadUnderReplicatedLedger returns the record, or ErrNotFound.
	ReadUnderReplicatedLedger(ctx context.Context, ledgerID int64) (UnderReplicatedLedger, error)

	// ListUnderReplicatedLedgers returns up to limit (> 0) records with
	// ids ≥ startID, ascending (paged like ListLedgers).
	ListUnderReplicatedLedgers(ctx context.Context, startID int64, limit int) ([]UnderReplicatedLedger, error)

	// MarkLedgerReplicated deletes the record if its version is expected
	// (ErrBadVersion if it changed: new missing replicas arrived, repair
	// again); ErrNotFound if absent. The lock, if held, is released.
	MarkLedgerReplicated(ctx context.Context, ledgerID int64, expected Version) error

	// LockUnderReplicatedLedger takes the ledger's lock under session s,
	// holding owner's id as the lock's value. ErrLocked if another
	// session holds it, ErrNotFound if there is no record. The lock ends
	// with Unlock or with the session.
	LockUnderReplicatedLedger(ctx context.Context, s Session, ledgerID int64, owner BookieID) (Lock, error)

	// SetReplicationEnabled and ReplicationEnabled switch re-replication
	// on and off cluster-wide (`autorecovery -disable/-enable`); enabled
	// when never set.
	SetReplicationEnabled(ctx context.Context, enabled bool) error
	ReplicationEnabled(ctx context.Context) (bool, error)

	// SetLostBookieRecoveryDelay and LostBookieRecoveryDelay store how long
	// the auditor waits after a bookie disappears before marking its
	// ledgers; ErrNotFound if never set (use the configured default).
	SetLostBookieRecoveryDelay(ctx context.Context, d time.Duration) error
	LostBookieRecoveryDelay(ctx context.Context) (time.Duration, error)

	// WatchLostBookieRecoveryDelay watches the stored delay. The first
	// event is the current value (Set false if never set), then one event
	// per SetLostBookieRecoveryDelay, also one storing the same value again
	// (that is how triggerAudit asks the auditor to audit now). An event
	// with Err is the last.
	WatchLostBookieRecoveryDelay(ctx context.Context) (<-chan DelayEvent, error)
}

// DelayEvent is one state of the stored lost-bookie recovery delay.
type DelayEvent struct {
	Delay time.Duration
	// Set is false while no delay is stored (use the configured default).
	Set bool
	Err error
}

// Lock is a held lock tied to a session.
type Lock interface {
	// Done is closed when the lock is lost (session expired) or released.
	Done() <-chan struct{}
	// Unlock releases the lock; idempotent.
	Unlock(ctx context.Context) error
}

// AuditorElection elects the one auditor of the cluster.
type AuditorElection interface {
	// CampaignAuditor blocks until candidate (under session s) is the
	// auditor or ctx ends. The returned Lock's Done closes when
	// leadership is lost; Unlock resigns.
	CampaignAuditor(ctx context.Context, s Session, candidate BookieID) (Lock, error)

	// Auditor returns the current auditor, or ErrNotFound.
	Auditor(ctx context.Context) (BookieID, error)
}
