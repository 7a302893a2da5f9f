package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The placement keys AutoRecovery chooses replacements by: BookKeeper's
// defaults, every key read, bad values refused naming the key, a custom
// policy class refused, another DNS resolver class warned about.
func TestPlacementKeys(t *testing.T) {
	if got, want := DefaultConfig().Placement, (PlacementConfig{
		Policy: "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy", TopologyScriptNumberArgs: 100,
		MinNumRacksPerWriteQuorum: 2, MinNumZonesPerWriteQuorum: 2, DesiredNumZonesPerWriteQuorum: 3, EnforceStrictZoneawarePlacement: true,
		MinRegionsForDurability: 2, EnableDurabilityEnforcementInReplace: true, EnableValidation: true,
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	script := filepath.Join(t.TempDir(), "topo.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor h in \"$@\"; do echo /z/u; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cfg, err := LoadConfig("", Overrides{Set: []string{
		"ensemblePlacementPolicy=org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy",
		"reppDnsResolverClass=org.apache.bookkeeper.net.ScriptBasedMapping",
		"networkTopologyScriptFileName=" + script, "networkTopologyScriptNumberArgs=7",
		"minNumRacksPerWriteQuorum=3", "enforceMinNumRacksPerWriteQuorum=true", "enforceMinNumFaultDomainsForWrite=true",
		"minNumZonesPerWriteQuorum=3", "desiredNumZonesPerWriteQuorum=4", "enforceStrictZoneawarePlacement=false",
		"reppRegionsToWrite=r1;r2; r3", "reppMinimumRegionsForDurability=3",
		"reppEnableDurabilityEnforcementInReplace=false", "reppEnableValidation=false",
	}}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := PlacementConfig{
		Policy: "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy", TopologyScript: script, TopologyScriptNumberArgs: 7,
		MinNumRacksPerWriteQuorum: 3, EnforceMinNumRacksPerWriteQuorum: true, EnforceMinNumFaultDomainsForWrite: true,
		MinNumZonesPerWriteQuorum: 3, DesiredNumZonesPerWriteQuorum: 4, EnforceStrictZoneawarePlacement: false,
		RegionsToWrite: []string{"r1", "r2", "r3"}, MinRegionsForDurability: 3,
		EnableDurabilityEnforcementInReplace: false, EnableValidation: false,
	}
	if !reflect.DeepEqual(cfg.Placement, want) {
		t.Errorf("from the keys:\n got %+v\nwant %+v", cfg.Placement, want)
	}
	if strings.Contains(logs.String(), "WARN") {
		t.Errorf("warnings for supported placement keys:\n%s", logs.String())
	}

	logs.Reset()
	if _, err := LoadConfig("", Overrides{Set: []string{"reppDnsResolverClass=org.apache.pulsar.zookeeper.ZkBookieRackAffinityMapping"}},
		slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "reppDnsResolverClass") {
		t.Errorf("no warning for Pulsar's resolver class:\n%s", logs.String())
	}

	missing := filepath.Join(t.TempDir(), "missing.sh")
	for _, kv := range [][]string{
		{"ensemblePlacementPolicy=com.example.CustomPolicy"},
		{"ensemblePlacementPolicy=zoneaware"}, // bk_server.conf takes class names
		{"networkTopologyScriptFileName=" + missing},
		{"networkTopologyScriptFileName=" + t.TempDir()},
		{"networkTopologyScriptNumberArgs=0"},
		{"minNumRacksPerWriteQuorum=two"},
		{"enforceMinNumFaultDomainsForWrite=maybe"},
		{"minNumZonesPerWriteQuorum=4"}, // above the desired 3
		{"reppRegionsToWrite=r1", "reppMinimumRegionsForDurability=2"},
		{"reppRegionsToWrite=r1;r/2"},
	} {
		k, _, _ := strings.Cut(kv[0], "=")
		_, err := LoadConfig("", Overrides{Set: append([]string{"autoRecoveryDaemonEnabled=true"}, kv...)}, nil)
		if err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), "--set") {
			t.Errorf("%v: %v, want an error naming %s and where it was set (--set)", kv, err, k)
		}
	}

	// Accepted: minNumRacksPerWriteQuorum ≤ 0 (Java's min(Qw, value)
	// racks: none asked for), the rule with a script or with the random
	// policy, and without AutoRecovery in the bookie the keys it alone
	// reads are not checked (Java never builds its policy then).
	for _, kv := range [][]string{
		{"autoRecoveryDaemonEnabled=true", "minNumRacksPerWriteQuorum=0"},
		{"autoRecoveryDaemonEnabled=true", "minNumRacksPerWriteQuorum=-1"},
		{"autoRecoveryDaemonEnabled=true", "enforceMinNumFaultDomainsForWrite=true", "networkTopologyScriptFileName=" + script},
		{"autoRecoveryDaemonEnabled=true", "enforceMinNumFaultDomainsForWrite=true", "ensemblePlacementPolicy=org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy"},
		{"enforceMinNumFaultDomainsForWrite=true"},
		// No location source: accepted as Java does (a recovery rewrite its
		// whole write set stored counts as written, so nothing waits forever).
		{"autoRecoveryDaemonEnabled=true", "enforceMinNumFaultDomainsForWrite=true"},
		{"autoRecoveryDaemonEnabled=true", "enforceMinNumFaultDomainsForWrite=true", "ensemblePlacementPolicy=org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy"},
		{"networkTopologyScriptFileName=" + missing},
		{"ensemblePlacementPolicy=com.example.CustomPolicy"},
	} {
		if _, err := LoadConfig("", Overrides{Set: kv}, nil); err != nil {
			t.Errorf("%v: %v", kv, err)
		}
	}
}
