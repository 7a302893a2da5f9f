package etcd

import (
	"context"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// StopKeepAlive stops s's keepalives without revoking its lease, as if its
// process had died: etcd removes the registrations a TTL later.
func StopKeepAlive(s metadata.Session) { s.(*session).stopKA() }

// BucketID exposes bucketID.
var BucketID = bucketID

// Transient exposes transient.
var Transient = transient

// The single attempts of the driver's writes, for tests of how an attempt
// after one that failed but may have been applied (retried) recognises that
// earlier attempt's effect.

func WriteLedgerAttempt(ctx context.Context, d *Driver, id int64, md *metadata.LedgerMetadata, expected metadata.Version, retried bool) (metadata.Version, error) {
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	return d.casPutOnce(ctx, "test", d.k.ledger(id), value, expected, metadata.ErrNoSuchLedger, retried)
}

func CreateLedgerAttempt(ctx context.Context, d *Driver, id int64, md *metadata.LedgerMetadata, retried bool) (metadata.Version, error) {
	value, err := metadata.SerializeLedgerMetadata(md)
	if err != nil {
		return 0, err
	}
	return d.createOnce(ctx, "test", d.k.ledger(id), value, metadata.ErrLedgerExists, retried)
}

func DeleteLedgerAttempt(ctx context.Context, d *Driver, id int64, expected metadata.Version, retried bool) error {
	return d.casDeleteOnce(ctx, "test", d.k.ledger(id), expected, 0, metadata.ErrNoSuchLedger, retried)
}

// DeleteAnyLedgerAttempt is an attempt of DeleteLedger with VersionAny that
// read the key at create revision created before its first attempt.
func DeleteAnyLedgerAttempt(ctx context.Context, d *Driver, id int64, created int64, retried bool) error {
	return d.casDeleteOnce(ctx, "test", d.k.ledger(id), metadata.VersionAny, created, metadata.ErrNoSuchLedger, retried)
}

func LockAttempt(ctx context.Context, d *Driver, s metadata.Session, id int64, owner metadata.BookieID, retried bool) (int64, error) {
	return d.lockOnce(ctx, s.(*session), id, owner, retried)
}

// The attempts of the writes guarded on state read before their first
// attempt, given that state: an attempt applied late (after the state
// changed) is exactly this.

// UnregisterBookieAttempt is an attempt of UnregisterBookie that read the
// key at create revision created.
func UnregisterBookieAttempt(ctx context.Context, s metadata.Session, id metadata.BookieID, readOnly bool, created int64) error {
	ss := s.(*session)
	key := ss.d.k.registration(id, readOnly)
	return ss.d.deleteIfCreated(ctx, "test", key, created)
}

// RegisterBookieAttempt is an attempt of RegisterBookie that found the key
// absent and the other mode's key at create revision otherCreated (0:
// absent); it reports whether it registered.
func RegisterBookieAttempt(ctx context.Context, s metadata.Session, id metadata.BookieID, readOnly bool, otherCreated int64) (bool, error) {
	ss := s.(*session)
	return ss.registerOnce(ctx, id, ss.d.k.registration(id, readOnly), ss.d.k.registration(id, !readOnly), otherCreated)
}

// MarkLedgerReplicatedAttempt is an attempt of MarkLedgerReplicated that
// read the lock at create revision held (0: none).
func MarkLedgerReplicatedAttempt(ctx context.Context, d *Driver, id int64, expected metadata.Version, held int64, retried bool) error {
	return d.clearOnce(ctx, id, expected, held, retried)
}

// ReplicationSwitchRevision is the mod revision of the replication switch's
// companion key as SetReplicationEnabled reads it first.
func ReplicationSwitchRevision(ctx context.Context, d *Driver) (int64, error) {
	_, sw, err := d.readSwitch(ctx)
	return sw, err
}

// SetReplicationEnabledAttempt is an attempt of SetReplicationEnabled that
// read the companion key at mod revision sw; it reports whether it
// switched.
func SetReplicationEnabledAttempt(ctx context.Context, d *Driver, enabled bool, sw int64) (bool, error) {
	return d.switchOnce(ctx, enabled, sw)
}

// SetLostBookieRecoveryDelayAttempt is an attempt of
// SetLostBookieRecoveryDelay that read the key at mod revision mod (0:
// absent); it reports whether it wrote.
func SetLostBookieRecoveryDelayAttempt(ctx context.Context, d *Driver, delay time.Duration, mod int64) (bool, error) {
	return d.replaceOnce(ctx, d.k.urDelay(), EncodeDelay(delay), mod)
}
