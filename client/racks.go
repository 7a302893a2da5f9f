package client

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/topologyscript"
)

// loadRacks reads Config.BookieRacks and Config.BookieRackFile into
// c.racks (nil when none are configured) and prepares the topology script.
func (c *Client) loadRacks() error {
	if c.cfg.NetworkTopologyScript != "" {
		def := placement.DefaultRack
		if k, _ := placement.ParseKind(c.cfg.PlacementPolicy); k == placement.KindZoneAware {
			def = placement.DefaultFaultDomain
		}
		c.script = &topologyscript.Resolver{Script: c.cfg.NetworkTopologyScript, MaxArgs: c.cfg.NetworkTopologyScriptNumberArgs,
			Timeout: c.cfg.NetworkTopologyScriptTimeout, Default: def, Log: c.log}
	}
	if len(c.cfg.BookieRacks) == 0 && c.cfg.BookieRackFile == "" {
		return nil
	}
	c.racks = map[metadata.BookieID]string{}
	for b, loc := range c.cfg.BookieRacks {
		c.racks[metadata.BookieID(b)] = loc
	}
	if c.cfg.BookieRackFile != "" {
		f, err := os.Open(c.cfg.BookieRackFile)
		if err != nil {
			return fmt.Errorf("client: bookie rack file: %w", err)
		}
		defer f.Close()
		m, err := placement.ParseLocations(f)
		if err != nil {
			return fmt.Errorf("client: bookie rack file %s: %w", c.cfg.BookieRackFile, err)
		}
		for b, loc := range m {
			c.racks[b] = loc
		}
	}
	return nil
}

// resolveLocations runs the topology script (if any) for the bookies of
// writable without a configured location, outside c.mu (it runs a
// process), and publishes the result for newPolicy.
func (c *Client) resolveLocations(ctx context.Context, writable []metadata.BookieID) {
	if c.script == nil {
		return
	}
	var todo []metadata.BookieID
	for _, b := range writable {
		if _, ok := c.racks[b]; !ok {
			todo = append(todo, b)
		}
	}
	locs := c.script.Locations(ctx, todo)
	c.mu.Lock()
	c.mu.scriptRacks = locs
	c.mu.Unlock()
}

// ackRule is the fault-domain rule of pl for a ledger of quorums wq and
// aq when Config.EnforceMinNumFaultDomainsForWrite is set, else nil.
func (c *Client) ackRule(pl placement.Policy, wq, aq int) func([]metadata.BookieID) bool {
	if !c.cfg.EnforceMinNumFaultDomainsForWrite {
		return nil
	}
	return placement.AckedAdherence(pl, wq, aq)
}

// newPolicy returns a fresh placement policy for a ledger of write quorum
// wq and ack quorum aq (policies are not safe for concurrent use: each
// writer, recovery and create gets its own). c.mu must be held.
func (c *Client) newPolicy(wq, aq int) placement.Policy {
	locs := c.racks
	if len(c.mu.scriptRacks) > 0 {
		locs = maps.Clone(c.mu.scriptRacks)
		maps.Copy(locs, c.racks)
	}
	var avoid func(metadata.BookieID) bool
	if c.cfg.EnableBookieHealthCheck {
		avoid = c.health.quarantined
	}
	pc := c.cfg.placementConfig(locs, avoid)
	return pc.ForLedger(rand.NewPCG(rand.Uint64(), rand.Uint64()), wq, aq)
}
