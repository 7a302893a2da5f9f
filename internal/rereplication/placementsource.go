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
	}
	return cfg.ForLedger(rand.NewPCG(rand.Uint64(), rand.Uint64()), wq, aq)
}
