// Package placement chooses bookies for ensembles: the policy interface the
// client's ensemble creation and ensemble change call, and BookKeeper's
// policies behind it: Random (DefaultEnsemblePlacementPolicy), RackAware,
// RegionAware and ZoneAware. Policies are pure: the caller supplies the
// writable set (from the metadata store's registrations), the locations
// and the random source, so a simulator replays the same choices from a
// seed. The one exception is Config.Avoid (the client's quarantined
// bookies), a function a policy calls when it places: the client's
// passes read its clock and its health state at that moment, so that a
// writer's later ensemble changes see quarantines that came after it was
// opened (as Java's BookieWatcher consults its quarantine cache at each
// placement). Policies built without Avoid (the simulator's) are pure.
//
// Placement searches are bounded (searchBudget): a worst case costs
// milliseconds whatever the topology, never a lock holder's seconds.
package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// ErrNotEnoughBookies: fewer writable bookies are available than the
// request needs (BookKeeper's BKNotEnoughBookiesException).
var ErrNotEnoughBookies = errors.New("not enough writable bookies")

// Policy picks bookies. Implementations must not modify or keep the slices
// they are given, and must be deterministic given their own state (a seeded
// random source), because the protocol machines calling them run in the
// deterministic simulator.
type Policy interface {
	// NewEnsemble returns size distinct bookies taken from writable, in
	// ensemble order. ErrNotEnoughBookies if writable holds fewer than size
	// distinct bookies.
	NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error)

	// ReplaceBookie returns a bookie from writable to take index idx of
	// ensemble, never one in ensemble and never one in exclude (the bookies
	// that failed). ErrNotEnoughBookies if there is none.
	ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error)
}

// New returns the rack-aware policy of locations (bookie id →
// "/region/rack"), not bound to a write quorum: RackAware over them,
// failing placements that cannot give every member its own rack when
// enforceMinNumRacks; Random when locations is nil. It draws from src.
// Placement of a ledger's ensembles goes through Config.ForLedger, which
// knows the ledger's quorums and the configured policy kind; New is the
// quorum-unaware form for callers that only have locations.
func New(src rand.Source, locations map[metadata.BookieID]string, enforceMinNumRacks bool) Policy {
	if locations != nil {
		return NewRackAware(src, locations, enforceMinNumRacks)
	}
	return NewRandom(src)
}

// Random picks uniformly among the eligible writable bookies. It is
// BookKeeper's DefaultEnsemblePlacementPolicy without network topology.
type Random struct {
	rand *rand.Rand
}

// NewRandom returns a Random policy drawing from src. Production passes a
// source seeded from the OS; tests and the simulator pass a fixed seed.
// A Random is not safe for concurrent use (neither is *rand.Rand).
func NewRandom(src rand.Source) *Random { return &Random{rand: rand.New(src)} }

// NewEnsemble implements Policy.
func (r *Random) NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	candidates := distinct(writable, nil)
	if len(candidates) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable", ErrNotEnoughBookies, size, len(candidates))
	}
	r.rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	return candidates[:size:size], nil
}

// ReplaceBookie implements Policy.
func (r *Random) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	candidates := distinct(writable, func(b metadata.BookieID) bool {
		return slices.Contains(ensemble, b) || slices.Contains(exclude, b)
	})
	if len(candidates) == 0 {
		return "", fmt.Errorf("%w: no writable bookie outside the ensemble to replace index %d (%s)", ErrNotEnoughBookies, idx, ensemble[idx])
	}
	return candidates[r.rand.IntN(len(candidates))], nil
}

// distinct returns the bookies of writable without duplicates and without
// those skip reports, in their first order (so a seeded choice is stable
// whatever the caller's duplicates).
func distinct(writable []metadata.BookieID, skip func(metadata.BookieID) bool) []metadata.BookieID {
	out := make([]metadata.BookieID, 0, len(writable))
	for _, b := range writable {
		if slices.Contains(out, b) || (skip != nil && skip(b)) {
			continue
		}
		out = append(out, b)
	}
	return out
}
