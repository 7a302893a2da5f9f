package rereplication

import (
	"context"
	"maps"
	"math/rand/v2"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/topologyscript"
)

// PlacementSource builds the placement policy of one ledger's repair from
// the cluster's placement configuration, as a client builds the policy of
// a ledger it writes (client's newPolicy): the same policy kind and
// settings, locations from a static map and from the topology script
// (networkTopologyScriptFileName) for the bookies the map does not place.
// AutoRecovery (in a bookie or `folio autorecovery`) and the shell's
// recover use it, so a repaired fragment is placed by the rules its ledger
// was written by. Safe for concurrent use: each call returns a fresh
// policy.
type PlacementSource struct {
	// Config is the policy configuration; its Locations are the static
	// ones (nil: none).
	Config placement.Config
	// Script, if not nil, resolves the bookies Config.Locations does not
	// place.
	Script *topologyscript.Resolver
}

// Policy returns a fresh policy for a ledger of write quorum wq and ack
// quorum aq, knowing the locations of bookies (the candidates and the
// ensemble: the script is run for those it has not resolved yet).
func (s *PlacementSource) Policy(ctx context.Context, wq, aq int, bookies []metadata.BookieID) placement.Policy {
	cfg := s.Config
	if s.Script != nil {
		var todo []metadata.BookieID
		for _, b := range bookies {
			if _, ok := cfg.Locations[b]; !ok {
				todo = append(todo, b)
			}
		}
		locs := s.Script.Locations(ctx, todo)
		maps.Copy(locs, cfg.Locations)
		cfg.Locations = locs
		// Forget bookies that are in no current call (left the cluster,
		// or only in ledgers repaired before) once the resolver holds more
		// than twice this call's bookies: the prune then costs O(1) per
		// answer kept, and the resolver stays within twice the working
		// set. A forgotten bookie still in use is resolved again.
		if n := s.Script.Len(); n > 2*len(bookies) {
			keep := make(map[metadata.BookieID]bool, len(bookies))
			for _, b := range bookies {
				keep[b] = true
			}
			s.Script.Retain(func(b metadata.BookieID) bool { return keep[b] })
		}
	}
	return cfg.ForLedger(rand.NewPCG(rand.Uint64(), rand.Uint64()), wq, aq)
}
