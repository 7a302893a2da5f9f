package rereplication

import (
	"context"
	"fmt"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
)

// FenceAndClose fences ledger id and closes it at its recovered end (a
// client open with recovery, spec/protocol.md §4), so that no writer can
// add to the fragment a repair is about to copy. A ledger already CLOSED is
// left as it is. It needs the password stored in the metadata
// (ErrNoPassword otherwise). A failure leaves the ledger IN_RECOVERY
// (client.ErrLedgerRecovery) or OPEN and fenced; calling again retries.
func FenceAndClose(ctx context.Context, c *client.Client, md metadata.LedgerManager, id int64) error {
	m, _, err := md.ReadLedger(ctx, id)
	if err != nil {
		return fmt.Errorf("reading ledger %d: %w", id, err)
	}
	if !m.HasPassword {
		return fmt.Errorf("%w: ledger %d was written by a client that did not store it", ErrNoPassword, id)
	}
	if m.IsClosed() {
		return nil
	}
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Recovery: true, Password: m.Password})
	if err != nil {
		return err
	}
	return r.Close()
}
