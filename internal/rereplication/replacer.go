package rereplication

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/time/rate"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
)

// Replicator replaces bookies of ledger fragments: it chooses each
// replacement with Placement, the policy a client's ensemble change
// chooses with (so rack-aware placement holds for repaired fragments as for
// written ones), copies the fragment's entries to it and swaps it into the
// ensemble by CAS (Bookies.ReplicateFragment).
//
// A Replicator is not safe for concurrent use: a placement policy draws
// from its own random source. Give each worker its own.
type Replicator struct {
	// Bookies copies the entries (required).
	Bookies *Bookies
	// Ledgers reads and updates the ledgers' metadata (required).
	Ledgers metadata.LedgerManager
	// Placement chooses the replacements (required unless Source is set).
	Placement placement.Policy
	// Source, if not nil, builds the policy of each replacement from the
	// ledger's quorums and the locations of its candidates, and is used
	// instead of Placement (zone- and region-aware policies are bound to
	// a ledger's quorums).
	Source *PlacementSource
	// Limit, if not nil, is waited on for each copied entry's bytes (the
	// re-replication rate limit).
	Limit *rate.Limiter
}

// Replace replaces the bookie at index idx of fragment f of ledger id
// (metadata m as read) by one Placement chooses among writable, never a
// member of f's ensemble and never one of lost, and copies to it the
// entries that index should hold, reading from the other replicas and
// never from a bookie in lost. The error wraps placement.ErrNotEnoughBookies
// when there is no candidate, ErrFragmentChanged when the ledger changed
// under the copy (re-read and try again), or the copy's failure; the
// metadata is then as it was.
func (r *Replicator) Replace(ctx context.Context, id int64, m *metadata.LedgerMetadata, f Fragment, idx int,
	writable, lost []metadata.BookieID) (ReplicateResult, error) {
	pol := r.Placement
	if r.Source != nil {
		pol = r.Source.Policy(ctx, m.WriteQuorum, m.AckQuorum, append(slices.Clone(f.Ensemble), writable...))
	}
	target, err := pol.ReplaceBookie(f.Ensemble, idx, writable, lost)
	if err != nil {
		return ReplicateResult{Segment: f.Segment, From: f.Ensemble[idx]}, fmt.Errorf("ledger %d segment at entry %d: %w", id, f.First, err)
	}
	return r.Bookies.ReplicateFragment(ctx, r.Ledgers, id, m, f, idx, target, lost, r.Limit)
}

// ReplaceFirstLost replaces, in the first closed fragment of m (ClosedFragments)
// that names a bookie of lost, the first such bookie (Replace). found is
// false when no closed fragment names one: nothing was done. One call
// changes at most one bookie of one fragment; callers re-read the metadata
// and call again until found is false.
func (r *Replicator) ReplaceFirstLost(ctx context.Context, id int64, m *metadata.LedgerMetadata,
	writable, lost []metadata.BookieID) (res ReplicateResult, found bool, err error) {
	for _, f := range ClosedFragments(m) {
		if i := slices.IndexFunc(f.Ensemble, func(b metadata.BookieID) bool { return slices.Contains(lost, b) }); i >= 0 {
			res, err := r.Replace(ctx, id, m, f, i, writable, lost)
			return res, true, err
		}
	}
	return ReplicateResult{}, false, nil
}
