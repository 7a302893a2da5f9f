package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/time/rate"

	"github.com/foliodb/folio/internal/metadata"
)

// ErrSourceBookieActive: the bookie to re-address is still registered
// (BookKeeper's updateBookieInLedger: "Source bookie can't be active").
var ErrSourceBookieActive = errors.New("source bookie is still registered")

// DefaultUpdatesPerSecond is BookKeeper's default -updatespersec.
const DefaultUpdatesPerSecond = 5

// ReplaceBookieOptions configure ReplaceBookieInLedgers.
type ReplaceBookieOptions struct {
	// UpdatesPerSecond bounds the metadata writes (BookKeeper's
	// -updatespersec); ≤ 0 means DefaultUpdatesPerSecond.
	UpdatesPerSecond int
	// Limit is the most ledgers to examine, in id order (BookKeeper's
	// -limit counts the ledgers it issues, whether or not they name the
	// bookie); 0: every ledger.
	Limit int
	// Progress, if not nil, is called after each ledger examined.
	Progress func(examined, updated int)
}

// ReplaceBookieResult says what ReplaceBookieInLedgers did.
type ReplaceBookieResult struct {
	// Examined is how many ledgers were read.
	Examined int `json:"ledgersExamined"`
	// Updated are the ledgers whose ensembles named the old id and were
	// rewritten, ascending.
	Updated []int64 `json:"ledgersUpdated"`
}

// ReplaceBookieInLedgers rewrites every ensemble of every ledger that names
// from so that it names to instead (BookKeeper's UpdateLedgerOp, behind
// `updateledgers` and `updateBookieInLedger`). Only the metadata changes:
// the entries stay where they are, so to must be the same bookie (same
// disks) under its new id or address. Each ledger is a read and a
// compare-and-set, re-read and retried when its version moved (a writer
// changed the ensemble meanwhile); a ledger deleted meanwhile is skipped.
// A ledger whose ensemble would then name to twice is an error naming it:
// to already stores other entries of that ensemble, which is not a
// re-addressing. The first error stops the walk; what was done before it
// stands, and the call may be repeated (ledgers already rewritten no
// longer name from).
func ReplaceBookieInLedgers(ctx context.Context, md metadata.LedgerManager, from, to metadata.BookieID, o ReplaceBookieOptions) (ReplaceBookieResult, error) {
	res := ReplaceBookieResult{Updated: []int64{}}
	if from == to {
		return res, fmt.Errorf("replace bookie %s by itself", from)
	}
	for _, id := range []metadata.BookieID{from, to} {
		if err := metadata.ValidateBookieID(id); err != nil {
			return res, err
		}
	}
	perSec := o.UpdatesPerSecond
	if perSec <= 0 {
		perSec = DefaultUpdatesPerSecond
	}
	limit := rate.NewLimiter(rate.Limit(perSec), 1)
	for start := int64(0); ; {
		ids, err := md.ListLedgers(ctx, start, 1000)
		if err != nil {
			return res, fmt.Errorf("listing ledgers: %w", err)
		}
		if len(ids) == 0 {
			return res, nil
		}
		for _, id := range ids {
			if o.Limit > 0 && res.Examined >= o.Limit {
				return res, nil
			}
			res.Examined++
			changed, err := replaceBookieInLedger(ctx, md, id, from, to, limit)
			if err != nil {
				return res, err
			}
			if changed {
				res.Updated = append(res.Updated, id)
			}
			if o.Progress != nil {
				o.Progress(res.Examined, len(res.Updated))
			}
		}
		start = ids[len(ids)-1] + 1
	}
}

// replaceBookieInLedger is the CAS loop of one ledger.
func replaceBookieInLedger(ctx context.Context, md metadata.LedgerManager, id int64, from, to metadata.BookieID, limit *rate.Limiter) (bool, error) {
	for {
		m, v, err := md.ReadLedger(ctx, id)
		if errors.Is(err, metadata.ErrNoSuchLedger) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading ledger %d: %w", id, err)
		}
		next, changed, err := ReplaceBookie(m, from, to)
		if err != nil {
			return false, fmt.Errorf("ledger %d: %w", id, err)
		}
		if !changed {
			return false, nil
		}
		if err := limit.Wait(ctx); err != nil {
			return false, err
		}
		_, err = md.WriteLedger(ctx, id, next, v)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, metadata.ErrBadVersion):
			continue // changed since the read: look again
		case errors.Is(err, metadata.ErrNoSuchLedger):
			return false, nil
		default:
			return false, fmt.Errorf("writing ledger %d: %w", id, err)
		}
	}
}

// ReplaceBookie returns a copy of m whose ensembles name to wherever they
// named from, and whether anything changed. An ensemble that would name to
// twice is an error.
func ReplaceBookie(m *metadata.LedgerMetadata, from, to metadata.BookieID) (*metadata.LedgerMetadata, bool, error) {
	next := m.Clone()
	changed := false
	for i := range next.Ensembles {
		seg := &next.Ensembles[i]
		idx := slices.Index(seg.Ensemble, from)
		if idx < 0 {
			continue
		}
		if slices.Contains(seg.Ensemble, to) {
			return nil, false, fmt.Errorf("the ensemble from entry %d names both %s and %s: replacing one by the other would name a bookie twice",
				seg.FirstEntryID, from, to)
		}
		seg.Ensemble[idx] = to
		changed = true
	}
	return next, changed, nil
}
