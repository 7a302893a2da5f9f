package server

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// PlacementConfig is the placement configuration of the bookie's
// AutoRecovery: the bk_server.conf keys BookKeeper's own client reads when
// it re-replicates (ensemblePlacementPolicy and the settings of its
// policies). AutoRecovery chooses replacement bookies with them as a Folio
// client configured alike places ensembles (client.Config's placement
// block), and its fencing recoveries write back under the same rules.
type PlacementConfig struct {
	// Policy is ensemblePlacementPolicy: one of PlacementPolicyClasses
	// (default RackawareEnsemblePlacementPolicy, which without a topology
	// script places every bookie in the default rack: random placement).
	Policy string
	// TopologyScript and TopologyScriptNumberArgs are
	// networkTopologyScriptFileName (default none) and
	// networkTopologyScriptNumberArgs (default 100), read by the default
	// reppDnsResolverClass, ScriptBasedMapping.
	TopologyScript           string
	TopologyScriptNumberArgs int
	// MinNumRacksPerWriteQuorum (2) and EnforceMinNumRacksPerWriteQuorum
	// (false): rack- and region-aware.
	MinNumRacksPerWriteQuorum        int
	EnforceMinNumRacksPerWriteQuorum bool
	// EnforceMinNumFaultDomainsForWrite (false): the fencing recovery's
	// rewrites count fault domains as a client's appends do.
	EnforceMinNumFaultDomainsForWrite bool
	// MinNumZonesPerWriteQuorum (2), DesiredNumZonesPerWriteQuorum (3),
	// EnforceStrictZoneawarePlacement (true): zone-aware.
	MinNumZonesPerWriteQuorum       int
	DesiredNumZonesPerWriteQuorum   int
	EnforceStrictZoneawarePlacement bool
	// RegionsToWrite (reppRegionsToWrite, "R1;R2"), MinRegionsForDurability
	// (reppMinimumRegionsForDurability, 2),
	// EnableDurabilityEnforcementInReplace
	// (reppEnableDurabilityEnforcementInReplace, true), EnableValidation
	// (reppEnableValidation, true): region-aware.
	RegionsToWrite                       []string
	MinRegionsForDurability              int
	EnableDurabilityEnforcementInReplace bool
	EnableValidation                     bool
}

// PlacementPolicyClasses are the ensemblePlacementPolicy values the bookie
// accepts: BookKeeper's four policies, which Folio implements.
var PlacementPolicyClasses = []string{
	"org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy",
	"org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy",
	"org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy",
	"org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy",
}

// Placement defaults, BookKeeper's.
const (
	DefaultPlacementPolicy                 = "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy"
	DefaultNetworkTopologyScriptNumberArgs = 100
	DefaultMinNumRacksPerWriteQuorum       = 2
	DefaultMinNumZonesPerWriteQuorum       = 2
	DefaultDesiredNumZonesPerWriteQuorum   = 3
	DefaultMinRegionsForDurability         = 2
)

func defaultPlacement() PlacementConfig {
	return PlacementConfig{
		Policy:                               DefaultPlacementPolicy,
		TopologyScriptNumberArgs:             DefaultNetworkTopologyScriptNumberArgs,
		MinNumRacksPerWriteQuorum:            DefaultMinNumRacksPerWriteQuorum,
		MinNumZonesPerWriteQuorum:            DefaultMinNumZonesPerWriteQuorum,
		DesiredNumZonesPerWriteQuorum:        DefaultDesiredNumZonesPerWriteQuorum,
		EnforceStrictZoneawarePlacement:      true,
		MinRegionsForDurability:              DefaultMinRegionsForDurability,
		EnableDurabilityEnforcementInReplace: true,
		EnableValidation:                     true,
	}
}

// validate checks the placement keys as BookKeeper's policies do at
// initialisation. Only the bookie's own AutoRecovery reads them (enabled:
// autoRecoveryDaemonEnabled), so a bookie without it checks none, as
// Java's, which never builds a placement policy then. Each error says
// where its key was set (where(key): Config.Sources, or "default").
//
// minNumRacksPerWriteQuorum ≤ 0 is accepted as Java does: its policies
// take min(Qw, value) racks, so every ensemble and every ack set meets it;
// AutoRecovery maps it to one rack (internal/cli).
func (p *PlacementConfig) validate(enabled bool, where func(key string) string) []error {
	if !enabled {
		return nil
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s (set at %s): %s", key, where(key), fmt.Sprintf(format, args...)))
	}
	if !slices.Contains(PlacementPolicyClasses, p.Policy) {
		bad("ensemblePlacementPolicy", "%q: want one of %s", p.Policy, strings.Join(PlacementPolicyClasses, ", "))
	}
	for _, k := range []struct {
		name string
		v    int
	}{{"networkTopologyScriptNumberArgs", p.TopologyScriptNumberArgs},
		{"minNumZonesPerWriteQuorum", p.MinNumZonesPerWriteQuorum}, {"desiredNumZonesPerWriteQuorum", p.DesiredNumZonesPerWriteQuorum},
		{"reppMinimumRegionsForDurability", p.MinRegionsForDurability}} {
		if k.v < 1 {
			bad(k.name, "%d: want at least 1", k.v)
		}
	}
	if p.MinNumZonesPerWriteQuorum > p.DesiredNumZonesPerWriteQuorum {
		bad("minNumZonesPerWriteQuorum", "%d is above desiredNumZonesPerWriteQuorum %d (set at %s)", p.MinNumZonesPerWriteQuorum, p.DesiredNumZonesPerWriteQuorum, where("desiredNumZonesPerWriteQuorum"))
	}
	if n := len(p.RegionsToWrite); n > 0 && n < p.MinRegionsForDurability {
		bad("reppRegionsToWrite", "names %d regions, fewer than reppMinimumRegionsForDurability %d (set at %s)", n, p.MinRegionsForDurability, where("reppMinimumRegionsForDurability"))
	}
	for _, r := range p.RegionsToWrite {
		if strings.Contains(r, "/") {
			bad("reppRegionsToWrite", "region %q: want a name without \"/\"", r)
		}
	}
	if p.TopologyScript != "" {
		if err := checkExecutable(p.TopologyScript); err != nil {
			bad("networkTopologyScriptFileName", "%v", err)
		}
	}
	// enforceMinNumFaultDomainsForWrite without a location source is
	// accepted, as Java accepts it: inside a bookie the rule only delays the
	// rewrites of AutoRecovery's fencing recoveries, and a rewrite its whole
	// write set stored counts as written even short of the rule, so a
	// recovery does not wait forever (a Pulsar bk_server.conf with
	// ZkBookieRackAffinityMapping, which Folio does not resolve, starts).
	return errs
}

// regionListKey reads reppRegionsToWrite: region names separated by ";"
// (BookKeeper's format).
func regionListKey(c *Config, v string) error {
	var out []string
	for _, s := range strings.Split(v, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 && strings.TrimSpace(v) != "" {
		return errors.New("no region named")
	}
	c.Placement.RegionsToWrite = out
	return nil
}

// checkExecutable reports a path that is not an executable regular file.
func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// source says where key was set (Config.Sources), or "default".
func (c *Config) source(key string) string {
	if s, ok := c.Sources[key]; ok {
		return s
	}
	return "default"
}
