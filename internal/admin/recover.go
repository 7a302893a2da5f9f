package admin

import (
	"context"
	"fmt"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// RecoverOptions configure RecoverLedger.
type RecoverOptions struct {
	// Force re-runs recovery on a CLOSED ledger: the metadata is moved
	// CLOSED → IN_RECOVERY by CAS and recovered again, which may move its
	// end (spec/protocol.md §4.10, issue #1657). Only for repairing a
	// ledger closed at a wrong point; readers may have seen the old end.
	Force bool
	// Password and DigestType are used only for legacy ledgers whose
	// metadata stores no password (spec §4.11); otherwise the stored
	// password and digest type are used and these are ignored.
	Password   []byte
	DigestType client.DigestType
}

// RecoverResult is the recovered ledger.
type RecoverResult struct {
	LedgerID    int64  `json:"ledgerId"`
	State       string `json:"state"`
	LastEntryID int64  `json:"lastEntryId"`
	Length      int64  `json:"length"`
	// AlreadyClosed: the ledger was CLOSED before and not forced; nothing
	// was changed.
	AlreadyClosed bool `json:"alreadyClosed"`
	// Forced: a CLOSED ledger was re-opened for recovery (Force).
	Forced bool `json:"forced"`
	// PreviousLastEntryID is the end before a forced recovery (-1 otherwise).
	PreviousLastEntryID int64              `json:"previousLastEntryId"`
	Ensembles           []metadata.Segment `json:"ensembles"`
	Version             int64              `json:"version"`
}

// ErrNoPassword: the ledger's metadata has no password and none was given.
var ErrNoPassword = rereplication.ErrNoPassword

// RecoverLedger recovers ledger id (fence, find the end, close: spec §4)
// through c: the client runs the ledger.Recovery machine on the one effect
// executor (internal/ledgerexec) that the client's writes and reads and the
// simulator's recoveries use, so the fencing reads and recovery adds sent
// here are built by the same code the simulator checks. It reads and (for
// Force) writes the metadata through md, and returns the closed metadata
// as stored. The password and digest are the ledger's own, from the
// metadata. A failure leaves the ledger IN_RECOVERY
// (client.ErrLedgerRecovery) and may be retried.
func RecoverLedger(ctx context.Context, c *client.Client, md metadata.Driver, id int64, o RecoverOptions) (RecoverResult, error) {
	res := RecoverResult{LedgerID: id, PreviousLastEntryID: -1}
	m, v, err := md.ReadLedger(ctx, id)
	if err != nil {
		return res, fmt.Errorf("reading ledger %d: %w", id, err)
	}
	open := client.OpenOptions{Recovery: true, Password: m.Password}
	if !m.HasPassword {
		if o.Password == nil {
			return res, fmt.Errorf("%w: ledger %d was written by a client that did not store it; give the password", ErrNoPassword, id)
		}
		open.Password, open.DigestType = o.Password, o.DigestType
	}
	if m.IsClosed() {
		if !o.Force {
			res.AlreadyClosed = true
			fill(&res, m, v)
			return res, nil
		}
		// CLOSED → IN_RECOVERY by CAS on the version just read; a concurrent
		// change fails it rather than being overwritten.
		res.Forced, res.PreviousLastEntryID = true, m.LastEntryID
		nm := m.Clone()
		nm.State = metadata.LedgerInRecovery
		if _, err := md.WriteLedger(ctx, id, nm, v); err != nil {
			return res, fmt.Errorf("ledger %d: marking IN_RECOVERY for force recovery: %w", id, err)
		}
	}
	r, err := c.OpenLedger(ctx, id, open)
	if err != nil {
		return res, err
	}
	r.Close()
	// The close CAS wrote (or adopted) the end; report what is stored.
	m, v, err = md.ReadLedger(ctx, id)
	if err != nil {
		return res, fmt.Errorf("ledger %d recovered, but reading its metadata back failed: %w", id, err)
	}
	fill(&res, m, v)
	return res, nil
}

func fill(res *RecoverResult, m *metadata.LedgerMetadata, v metadata.Version) {
	res.State = m.State.String()
	res.LastEntryID, res.Length = m.LastEntryID, m.Length
	res.Ensembles = m.Ensembles
	res.Version = int64(v)
}
