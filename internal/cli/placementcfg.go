package cli

import (
	"log/slog"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/topologyscript"
)

// bookiePlacement maps a bookie's placement keys (server.PlacementConfig,
// checked by server.Config.Validate) onto what its AutoRecovery chooses
// replacements with: a PlacementSource for the workers' copies, and the
// same settings on the workers' client (its fencing recoveries), as a
// Folio client with these settings places ensembles.
func bookiePlacement(pc server.PlacementConfig, log *slog.Logger) (*rereplication.PlacementSource, func(*client.Config), error) {
	kind, err := placement.ParseKind(pc.Policy)
	if err != nil {
		return nil, nil, err
	}
	src := &rereplication.PlacementSource{Config: placement.Config{
		Kind:                       kind,
		MinRacksPerWriteQuorum:     pc.MinNumRacksPerWriteQuorum,
		EnforceMinNumRacks:         pc.EnforceMinNumRacksPerWriteQuorum,
		MinZonesPerWriteQuorum:     pc.MinNumZonesPerWriteQuorum,
		DesiredZonesPerWriteQuorum: pc.DesiredNumZonesPerWriteQuorum,
		EnforceStrictZoneaware:     pc.EnforceStrictZoneawarePlacement,
		RegionsToWrite:             pc.RegionsToWrite,
		MinRegionsForDurability:    pc.MinRegionsForDurability,
		EnforceDurabilityInReplace: pc.EnableDurabilityEnforcementInReplace,
		EnableValidation:           pc.EnableValidation,
	}}
	if err := src.Config.Validate(); err != nil {
		return nil, nil, err
	}
	if pc.TopologyScript != "" {
		def := placement.DefaultRack
		if kind == placement.KindZoneAware {
			def = placement.DefaultFaultDomain
		}
		src.Script = &topologyscript.Resolver{Script: pc.TopologyScript, MaxArgs: pc.TopologyScriptNumberArgs,
			Timeout: client.DefaultNetworkTopologyScriptTimeout, Default: def, Log: log}
	}
	clientCfg := func(c *client.Config) {
		c.PlacementPolicy = pc.Policy
		c.NetworkTopologyScript = pc.TopologyScript
		c.NetworkTopologyScriptNumberArgs = pc.TopologyScriptNumberArgs
		c.MinNumRacksPerWriteQuorum = pc.MinNumRacksPerWriteQuorum
		c.EnforceMinNumRacksPerWriteQuorum = pc.EnforceMinNumRacksPerWriteQuorum
		c.EnforceMinNumFaultDomainsForWrite = pc.EnforceMinNumFaultDomainsForWrite
		c.MinNumZonesPerWriteQuorum = pc.MinNumZonesPerWriteQuorum
		c.DesiredNumZonesPerWriteQuorum = pc.DesiredNumZonesPerWriteQuorum
		c.NoStrictZoneawarePlacement = !pc.EnforceStrictZoneawarePlacement
		c.RegionsToWrite = pc.RegionsToWrite
		c.MinRegionsForDurability = pc.MinRegionsForDurability
		c.DisableDurabilityEnforcementInReplace = !pc.EnableDurabilityEnforcementInReplace
		c.DisableRegionValidation = !pc.EnableValidation
	}
	return src, clientCfg, nil
}
