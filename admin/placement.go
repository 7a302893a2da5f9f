package admin

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/topologyscript"
)

// placementSource builds, from the placement block of the client
// configuration (policy, locations, topology script, rack, zone and region
// settings), the source of the policies RecoverBookie chooses replacement
// bookies with: each repaired ledger's replacements are placed by the rules
// a client with this configuration writes by. nil when the configuration
// names no policy and no location (replacements at random, as a client
// without locations places ensembles).
func placementSource(c client.Config, log *slog.Logger) (*rereplication.PlacementSource, error) {
	if c.PlacementPolicy == "" && len(c.BookieRacks) == 0 && c.BookieRackFile == "" && c.NetworkTopologyScript == "" {
		return nil, nil
	}
	kind, err := placement.ParseKind(c.PlacementPolicy)
	if err != nil {
		return nil, fmt.Errorf("%w: PlacementPolicy: %w", client.ErrInvalidConfig, err)
	}
	locs := map[metadata.BookieID]string{}
	if c.BookieRackFile != "" {
		f, err := os.Open(c.BookieRackFile)
		if err != nil {
			return nil, fmt.Errorf("%w: BookieRackFile: %w", client.ErrInvalidConfig, err)
		}
		parsed, err := placement.ParseLocations(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: BookieRackFile %s: %w", client.ErrInvalidConfig, c.BookieRackFile, err)
		}
		for b, l := range parsed {
			locs[b] = l
		}
	}
	for b, l := range c.BookieRacks {
		if _, ok := locs[metadata.BookieID(b)]; !ok {
			locs[metadata.BookieID(b)] = l
		}
	}
	orDefault := func(v, def int) int {
		if v <= 0 {
			return def
		}
		return v
	}
	src := &rereplication.PlacementSource{Config: placement.Config{
		Kind:                       kind,
		Locations:                  locs,
		MinRacksPerWriteQuorum:     orDefault(c.MinNumRacksPerWriteQuorum, client.DefaultMinNumRacksPerWriteQuorum),
		EnforceMinNumRacks:         c.EnforceMinNumRacksPerWriteQuorum,
		MinZonesPerWriteQuorum:     orDefault(c.MinNumZonesPerWriteQuorum, client.DefaultMinNumZonesPerWriteQuorum),
		DesiredZonesPerWriteQuorum: orDefault(c.DesiredNumZonesPerWriteQuorum, client.DefaultDesiredNumZonesPerWriteQuorum),
		EnforceStrictZoneaware:     !c.NoStrictZoneawarePlacement,
		RegionsToWrite:             c.RegionsToWrite,
		MinRegionsForDurability:    orDefault(c.MinRegionsForDurability, client.DefaultMinRegionsForDurability),
		EnforceDurabilityInReplace: !c.DisableDurabilityEnforcementInReplace,
		EnableValidation:           !c.DisableRegionValidation,
	}}
	if err := src.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", client.ErrInvalidConfig, err)
	}
	if c.NetworkTopologyScript != "" {
		def := placement.DefaultRack
		if kind == placement.KindZoneAware {
			def = placement.DefaultFaultDomain
		}
		timeout := c.NetworkTopologyScriptTimeout
		if timeout <= 0 {
			timeout = client.DefaultNetworkTopologyScriptTimeout
		}
		src.Script = &topologyscript.Resolver{Script: c.NetworkTopologyScript,
			MaxArgs: orDefault(c.NetworkTopologyScriptNumberArgs, client.DefaultNetworkTopologyScriptNumberArgs),
			Timeout: timeout, Default: def, Log: log}
	}
	return src, nil
}
