package cli

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
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
	// minNumRacksPerWriteQuorum ≤ 0 asks for no racks in Java (it takes
	// min(Qw, value)): one rack, since placement.Config reads ≤ 0 as its
	// default.
	minRacks := max(pc.MinNumRacksPerWriteQuorum, 1)
	src := &rereplication.PlacementSource{Config: placement.Config{
		Kind:                       kind,
		MinRacksPerWriteQuorum:     minRacks,
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
		c.MinNumRacksPerWriteQuorum = minRacks
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

// placementFlags are the placement settings of the commands that choose
// replacement bookies outside a bookie (`folio autorecovery`, `folio shell
// recover`): the flag form of a client's placement block and of the
// bookie's placement keys.
type placementFlags struct {
	policy, script, rackFile, regions        string
	scriptArgs, minRacks, minZones, desZones int
	minRegions                               int
	enforceRacks, noStrictZones              bool
}

func (p *placementFlags) register(f *pflag.FlagSet) {
	f.StringVar(&p.policy, "placement-policy", "",
		"placement policy choosing replacement bookies: random, rackaware, regionaware, zoneaware or BookKeeper's ensemblePlacementPolicy class name (default: rackaware with --rack-locations or --network-topology-script, else random)")
	f.StringVar(&p.rackFile, "rack-locations", "",
		"bookie location file (\"bookie-id /region/rack\", or \"/zone/upgradeDomain\" for zoneaware, per line) the placement check judges by and replacements are chosen by, as a client with these locations places ensembles")
	f.StringVar(&p.script, "network-topology-script", "",
		"executable printing the location of each bookie host given as argument (networkTopologyScriptFileName), for bookies --rack-locations does not place")
	f.IntVar(&p.scriptArgs, "network-topology-script-number-args", client.DefaultNetworkTopologyScriptNumberArgs, "most bookie hosts per script run")
	f.IntVar(&p.minRacks, "min-racks-per-write-quorum", placement.DefaultMinRacksPerWriteQuorum,
		"racks every write set must span to adhere, capped at the write quorum (minNumRacksPerWriteQuorum)")
	f.BoolVar(&p.enforceRacks, "enforce-min-racks-per-write-quorum", false,
		"rack-aware: fail a replacement that cannot keep the racks instead of falling back (enforceMinNumRacksPerWriteQuorum)")
	f.IntVar(&p.minZones, "min-zones-per-write-quorum", placement.DefaultMinZonesPerWriteQuorum, "zone-aware: minNumZonesPerWriteQuorum")
	f.IntVar(&p.desZones, "desired-zones-per-write-quorum", placement.DefaultDesiredZonesPerWriteQuorum, "zone-aware: desiredNumZonesPerWriteQuorum")
	f.BoolVar(&p.noStrictZones, "no-strict-zoneaware-placement", false, "zone-aware: enforceStrictZoneawarePlacement=false (random placement)")
	f.StringVar(&p.regions, "regions-to-write", "", "region-aware: reppRegionsToWrite, regions separated by \";\"")
	f.IntVar(&p.minRegions, "min-regions-for-durability", placement.DefaultMinRegionsForDurability, "region-aware: reppMinimumRegionsForDurability")
}

// source builds the replacement policies and the placement check's
// judge from the flags.
func (p *placementFlags) source(cmd *cobra.Command, log *slog.Logger) (*rereplication.PlacementSource, placement.AdherenceChecker, error) {
	kind, err := placement.ParseKind(p.policy)
	if err != nil {
		return nil, nil, Usagef(cmd, "--placement-policy: %v", err)
	}
	for name, v := range map[string]int{"--min-racks-per-write-quorum": p.minRacks, "--min-zones-per-write-quorum": p.minZones,
		"--desired-zones-per-write-quorum": p.desZones, "--min-regions-for-durability": p.minRegions, "--network-topology-script-number-args": p.scriptArgs} {
		if v < 1 {
			return nil, nil, Usagef(cmd, "%s %d: want at least 1", name, v)
		}
	}
	var locs map[metadata.BookieID]string
	if p.rackFile != "" {
		f, err := os.Open(p.rackFile)
		if err != nil {
			return nil, nil, Usagef(cmd, "--rack-locations: %v", err)
		}
		defer f.Close()
		if locs, err = placement.ParseLocations(f); err != nil {
			return nil, nil, Usagef(cmd, "--rack-locations %s: %v", p.rackFile, err)
		}
	}
	var regions []string
	for _, r := range strings.Split(p.regions, ";") {
		if r = strings.TrimSpace(r); r != "" {
			regions = append(regions, r)
		}
	}
	src := &rereplication.PlacementSource{Config: placement.Config{
		Kind: kind, Locations: locs,
		MinRacksPerWriteQuorum: p.minRacks, EnforceMinNumRacks: p.enforceRacks,
		MinZonesPerWriteQuorum: p.minZones, DesiredZonesPerWriteQuorum: p.desZones, EnforceStrictZoneaware: !p.noStrictZones,
		RegionsToWrite: regions, MinRegionsForDurability: p.minRegions, EnforceDurabilityInReplace: true, EnableValidation: true,
	}}
	if err := src.Config.Validate(); err != nil {
		return nil, nil, Usagef(cmd, "%v", err)
	}
	if p.script != "" {
		if st, err := os.Stat(p.script); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return nil, nil, Usagef(cmd, "--network-topology-script %s: not an executable file", p.script)
		}
		def := placement.DefaultRack
		if kind == placement.KindZoneAware {
			def = placement.DefaultFaultDomain
		}
		src.Script = &topologyscript.Resolver{Script: p.script, MaxArgs: p.scriptArgs, Timeout: client.DefaultNetworkTopologyScriptTimeout, Default: def, Log: log}
		if src.Config.Locations == nil {
			src.Config.Locations = map[metadata.BookieID]string{} // the script's locations turn on rack-aware by default, as a client's
		}
	}
	// The placement check judges by the static locations (a script's are
	// not known before a placement asks for them).
	judgeSrc := rand.NewPCG(rand.Uint64(), rand.Uint64())
	switch {
	case locs == nil:
		return src, placement.NewRandom(judgeSrc), nil
	case kind == placement.KindZoneAware:
		return src, placement.NewZoneAware(judgeSrc, locs, 0, 0, p.minZones, p.desZones, !p.noStrictZones), nil
	default:
		r := placement.NewRackAware(judgeSrc, locs, p.enforceRacks)
		r.MinRacksPerWriteQuorum = p.minRacks
		return src, r, nil
	}
}

// clientConfig applies the flags to the configuration of the client that
// fences and recovers open ledgers, so that its rewrites are placed alike.
func (p *placementFlags) clientConfig(c *client.Config) {
	c.PlacementPolicy = p.policy
	c.BookieRackFile = p.rackFile
	c.NetworkTopologyScript = p.script
	c.NetworkTopologyScriptNumberArgs = p.scriptArgs
	c.MinNumRacksPerWriteQuorum = p.minRacks
	c.EnforceMinNumRacksPerWriteQuorum = p.enforceRacks
	c.MinNumZonesPerWriteQuorum = p.minZones
	c.DesiredNumZonesPerWriteQuorum = p.desZones
	c.NoStrictZoneawarePlacement = p.noStrictZones
	c.MinRegionsForDurability = p.minRegions
	for _, r := range strings.Split(p.regions, ";") {
		if r = strings.TrimSpace(r); r != "" {
			c.RegionsToWrite = append(c.RegionsToWrite, r)
		}
	}
}
