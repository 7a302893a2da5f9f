package etcd

import (
	"context"

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
	return d.casDeleteOnce(ctx, "test", d.k.ledger(id), expected, metadata.ErrNoSuchLedger, retried)
}

func LockAttempt(ctx context.Context, d *Driver, s metadata.Session, id int64, owner metadata.BookieID, retried bool) (int64, error) {
	return d.lockOnce(ctx, s.(*session), id, owner, retried)
}
