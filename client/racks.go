package client

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"

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
			Timeout: c.cfg.NetworkTopologyScriptTimeout, FailureTTL: c.cfg.NetworkTopologyScriptFailureCacheTime,
			Default: def, Log: c.log, Now: c.clock.Now}
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

// resolveLocations runs the topology script (if any) for bookies without
// a configured location that it has not resolved yet, and forgets the
// answers for bookies outside keep (bookies that left the cluster). It
// runs processes: never with c.mu held.
func (c *Client) resolveLocations(ctx context.Context, bookies []metadata.BookieID, keep map[metadata.BookieID]bool) {
	if c.script == nil {
		return
	}
	var todo []metadata.BookieID
	for _, b := range bookies {
		if _, ok := c.racks[b]; !ok {
			todo = append(todo, b)
		}
	}
	c.script.Locations(ctx, todo)
	if keep != nil {
		c.script.Retain(func(b metadata.BookieID) bool { return keep[b] })
	}
}

// resolveLater asks the resolver goroutine to resolve the registered
// bookies. Requests made while a run is under way coalesce into one more
// run. Never blocks.
func (c *Client) resolveLater() {
	if c.script == nil {
		return
	}
	select {
	case c.resolveKick <- struct{}{}:
	default: // a run is already due: it will see the latest membership
	}
}

// resolveLoop is the one goroutine running the topology script after
// New: membership changes publish the registered bookies first and
// resolve here, so a slow or failing script never delays them; each run
// also forgets the locations of bookies no longer registered (a recovery
// resolves the members it replaces itself, see Client.recover). It ends
// with the client (its runs are cancelled by c.ctx).
func (c *Client) resolveLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.resolveKick:
		}
		c.mu.Lock()
		todo := append(slices.Clone(c.mu.writable), c.mu.readOnly...)
		c.mu.Unlock()
		keep := make(map[metadata.BookieID]bool, len(todo))
		for _, b := range todo {
			keep[b] = true
		}
		c.resolveLocations(c.ctx, todo, keep)
	}
}

// ackRule is the fault-domain rule of pl for a ledger of quorums wq and
// aq when Config.EnforceMinNumFaultDomainsForWrite is set, else nil. It
// judges by pl's locations, taken when the handle was made, so the rule is
// pure and stable for the ledger's life: a bookie resolved later counts in
// the default location (as a bookie Java's resolver cannot place), which
// may count as one more domain than it really is. A rule that read live
// locations would change its answer between acks, and an add whose acks
// were all in could then wait with nothing left to wake it.
func (c *Client) ackRule(pl placement.Policy, wq, aq int) func([]metadata.BookieID) bool {
	if !c.cfg.EnforceMinNumFaultDomainsForWrite {
		return nil
	}
	return placement.AckedAdherence(pl, wq, aq)
}

// newPolicy returns a fresh placement policy for a ledger of write quorum
// wq and ack quorum aq (policies are not safe for concurrent use: each
// writer, recovery and create gets its own). Its locations are the
// configured ones over everything the script resolved (not only the
// writable bookies: a read-only member or the bookie being replaced keeps
// its location). It takes no client lock; placing (NewEnsemble) must not
// run under c.mu either, since a search may take milliseconds.
func (c *Client) newPolicy(wq, aq int) placement.Policy {
	locs := c.racks
	if c.script != nil {
		// Non-nil even when the script has resolved nothing yet (its first
		// run failed): the default policy stays rack-aware, and with it
		// the fault-domain rule, instead of turning random.
		locs = c.script.Cached()
		if locs == nil {
			locs = map[metadata.BookieID]string{}
		}
		maps.Copy(locs, c.racks)
	}
	var avoid func(metadata.BookieID) bool
	if c.cfg.EnableBookieHealthCheck {
		avoid = c.health.quarantined
	}
	pc := c.cfg.placementConfig(locs, avoid)
	p := pc.ForLedger(rand.NewPCG(rand.Uint64(), rand.Uint64()), wq, aq)
	if c.policyHook != nil {
		p = c.policyHook(p)
	}
	return p
}
