package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/foliodb/folio/internal/metadata"
)

// DumpLedgerMetadata returns ledger id's metadata in BookKeeper's binary
// form (LedgerMetadataSerDe.serialize, format 3: the bytes Java's
// `ledgermetadata -dumptofile` writes, and a store holds). The bytes carry
// the ledger's password: keep the file private.
func DumpLedgerMetadata(ctx context.Context, md metadata.LedgerManager, id int64) ([]byte, error) {
	m, _, err := md.ReadLedger(ctx, id)
	if err != nil {
		return nil, err
	}
	b, err := metadata.SerializeLedgerMetadata(m)
	if err != nil {
		return nil, fmt.Errorf("ledger %d: %w", id, err)
	}
	return b, nil
}

// RestoreResult says what RestoreLedgerMetadata did.
type RestoreResult struct {
	LedgerID int64 `json:"ledgerId"`
	// Created: the ledger had no metadata and now has the file's;
	// otherwise an existing value was replaced (update).
	Created bool  `json:"created"`
	Version int64 `json:"version"`
}

// RestoreLedgerMetadata stores data (BookKeeper's binary ledger metadata,
// formats 1–3, as DumpLedgerMetadata or Java's -dumptofile wrote it) as
// ledger id's metadata, as Java's `ledgermetadata -restorefromfile` does:
// it creates the ledger's metadata if absent; if present, it fails with
// ErrLedgerExists unless update is set, and then replaces it. Java's
// update is a blind write; this one is a compare-and-set on the version
// just read, retried if the ledger changed in between, so a concurrent
// writer's change is never lost silently between the read and the write.
func RestoreLedgerMetadata(ctx context.Context, md metadata.LedgerManager, id int64, data []byte, update bool) (RestoreResult, error) {
	res := RestoreResult{LedgerID: id}
	m, err := metadata.ParseLedgerMetadata(data)
	if err != nil {
		return res, err
	}
	if err := m.Validate(); err != nil {
		return res, fmt.Errorf("%w: %v", metadata.ErrInvalidMetadata, err)
	}
	for {
		v, err := md.CreateLedgerMetadata(ctx, id, m)
		if err == nil {
			res.Created, res.Version = true, int64(v)
			return res, nil
		}
		if !errors.Is(err, metadata.ErrLedgerExists) || !update {
			return res, err
		}
		_, cur, err := md.ReadLedger(ctx, id)
		switch {
		case errors.Is(err, metadata.ErrNoSuchLedger):
			continue // deleted meanwhile: create it
		case errors.Is(err, metadata.ErrCorruptMetadata):
			// Only a version read from the value can guard the write.
			return res, fmt.Errorf("ledger %d: the stored metadata is unreadable (%w); delete it deliberately, then restore", id, err)
		case err != nil:
			return res, err
		}
		v, err = md.WriteLedger(ctx, id, m, cur)
		switch {
		case err == nil:
			res.Version = int64(v)
			return res, nil
		case errors.Is(err, metadata.ErrBadVersion), errors.Is(err, metadata.ErrNoSuchLedger):
			continue
		default:
			return res, err
		}
	}
}
