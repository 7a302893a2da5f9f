package metadata

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/foliodb/folio/internal/metadata/formatpb"
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

// ReplicationWorkerReader is implemented by AutoRecovery drivers that can
// say who holds an under-replicated ledger's lock (Java's
// getReplicationWorkerIdRereplicatingLedger).
type ReplicationWorkerReader interface {
	// ReplicationWorker returns the owner id the lock of ledgerID holds:
	// the replication worker re-replicating it now. ErrNotFound if the
	// ledger is not locked; ErrCorruptMetadata if the lock's value is not
	// an id.
	ReplicationWorker(ctx context.Context, ledgerID int64) (BookieID, error)
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
	// holding owner's id as the lock's value. ErrLocked if it is held: by
	// another session, or by s itself (locks are not re-entrant);
	// ErrNotFound if there is no record. The lock ends with Unlock or
	// with the session: a lock whose Unlock failed stays held until s
	// ends, so its holder should then end s.
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

	// SetLastCheckTime stores when check last completed, overwriting the
	// previous time. Only milliseconds are kept (BookKeeper stores epoch
	// milliseconds, set*CTime). completed must not be before 1970.
	SetLastCheckTime(ctx context.Context, check PeriodicCheck, completed time.Time) error

	// LastCheckTime returns when check last completed, truncated to the
	// millisecond, or the zero Time if none is stored ("never"). A stored
	// value that does not parse is ErrCorruptMetadata naming its key,
	// never "never".
	LastCheckTime(ctx context.Context, check PeriodicCheck) (time.Time, error)
}

// PeriodicCheck names one of the auditor's periodic checks whose last
// completion time the store keeps (spec/protocol.md §6.3), so that a newly
// elected auditor waits only for what is left of the interval.
type PeriodicCheck int

const (
	// LedgerCheck is the check of every ledger's entries on its bookies
	// (checkAllLedgers, auditorPeriodicCheckInterval).
	LedgerCheck PeriodicCheck = iota + 1
	// PlacementPolicyCheck is the check of closed ledgers' ensembles
	// against the placement policy (auditorPeriodicPlacementPolicyCheckInterval).
	PlacementPolicyCheck
	// ReplicasCheck is BookKeeper's replicas check
	// (auditorReplicasCheckInterval). Folio's auditor does not run
	// it; its time is kept for parity with Java's key set.
	ReplicasCheck
)

// PeriodicChecks lists every PeriodicCheck.
var PeriodicChecks = []PeriodicCheck{LedgerCheck, PlacementPolicyCheck, ReplicasCheck}

// String returns the check's name in BookKeeper's terms.
func (c PeriodicCheck) String() string {
	switch c {
	case LedgerCheck:
		return "checkAllLedgers"
	case PlacementPolicyCheck:
		return "placementPolicyCheck"
	case ReplicasCheck:
		return "replicasCheck"
	}
	return fmt.Sprintf("PeriodicCheck(%d)", int(c))
}

// Node returns the name of the node under `underreplication/` that holds
// the check's last completion time: Java's BookKeeperConstants
// (CHECK_ALL_LEDGERS_CTIME, PLACEMENT_POLICY_CHECK_CTIME,
// REPLICAS_CHECK_CTIME); "" for an unknown check.
func (c PeriodicCheck) Node() string {
	switch c {
	case LedgerCheck:
		return "checkallledgersctime"
	case PlacementPolicyCheck:
		return "placementpolicycheckctime"
	case ReplicasCheck:
		return "replicascheckctime"
	}
	return ""
}

// Validate reports an unknown check.
func (c PeriodicCheck) Validate() error {
	if c.Node() == "" {
		return fmt.Errorf("unknown periodic check %d", int(c))
	}
	return nil
}

// format returns an empty message of the check's stored format, and its
// one field (the completion time in epoch milliseconds).
func (c PeriodicCheck) format() (protoreflect.Message, protoreflect.FieldDescriptor) {
	var m proto.Message
	switch c {
	case LedgerCheck:
		m = &formatpb.CheckAllLedgersFormat{}
	case PlacementPolicyCheck:
		m = &formatpb.PlacementPolicyCheckFormat{}
	case ReplicasCheck:
		m = &formatpb.ReplicasCheckFormat{}
	default:
		return nil, nil
	}
	r := m.ProtoReflect()
	return r, r.Descriptor().Fields().ByNumber(1)
}

// EncodeCheckTime returns the stored value of check's completion time: the
// protobuf binary encoding of its format message (CheckAllLedgersFormat,
// PlacementPolicyCheckFormat or ReplicasCheckFormat) with the one int64
// field set to completed in epoch milliseconds, the bytes Java's ZooKeeper
// manager writes (`08` then the varint).
func EncodeCheckTime(check PeriodicCheck, completed time.Time) ([]byte, error) {
	m, fd := check.format()
	if m == nil {
		return nil, check.Validate()
	}
	ms := completed.UnixMilli()
	if completed.IsZero() || ms < 0 {
		return nil, fmt.Errorf("%s completion time %v is before 1970", check, completed)
	}
	m.Set(fd, protoreflect.ValueOfInt64(ms))
	return proto.Marshal(m.Interface())
}

// DecodeCheckTime parses EncodeCheckTime's bytes. It is stricter than
// Java's reader, which takes a value without the field for "never": the
// field must be present and ≥ 0, and nothing else may be there (no unknown
// fields), so that a damaged value is reported, not taken for "never".
func DecodeCheckTime(check PeriodicCheck, value []byte) (time.Time, error) {
	m, fd := check.format()
	if m == nil {
		return time.Time{}, check.Validate()
	}
	name := string(m.Descriptor().Name())
	if err := proto.Unmarshal(value, m.Interface()); err != nil {
		return time.Time{}, fmt.Errorf("%q is not a %s: %w", value, name, err)
	}
	if len(m.GetUnknown()) > 0 {
		return time.Time{}, fmt.Errorf("%q is not a %s: unknown fields", value, name)
	}
	if !m.Has(fd) {
		return time.Time{}, fmt.Errorf("%q: %s without %s", value, name, fd.Name())
	}
	ms := m.Get(fd).Int()
	if ms < 0 {
		return time.Time{}, fmt.Errorf("%s %s %d is negative", name, fd.Name(), ms)
	}
	return time.UnixMilli(ms), nil
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
