package client

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
)

// loadRacks reads Config.BookieRacks and Config.BookieRackFile into
// c.racks (nil when rack-aware placement is off).
func (c *Client) loadRacks() error {
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

// newPolicy returns a fresh placement policy (policies are not safe for
// concurrent use: each writer and recovery gets its own).
func (c *Client) newPolicy() placement.Policy {
	return placement.New(rand.NewPCG(rand.Uint64(), rand.Uint64()), c.racks, c.cfg.EnforceMinNumRacksPerWriteQuorum)
}
