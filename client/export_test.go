package client

import "github.com/foliodb/folio/internal/metadata"

// Hooks for the external tests (package client_test, which may import
// internal/testcluster: an internal test cannot, that is an import cycle).

// ConnectedBookies returns the bookies c's transport holds state for.
func ConnectedBookies(c *Client) []string { return c.tr.Bookies() }

// RememberedAddresses is the number of bookie addresses c's resolver holds.
func RememberedAddresses(c *Client) int { return c.resolver.Remembered() }

// HasHealthState reports whether c's health check holds state for b.
func HasHealthState(c *Client, b string) bool {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	id := metadata.BookieID(b)
	_, e := c.health.errs[id]
	_, h := c.health.held[id]
	_, s := c.health.slow[id]
	return e || h || s
}

// WritableCount is the number of writable bookies c knows of.
func WritableCount(c *Client) int { return len(c.writable()) }

// PruneNow runs the pruning of a membership change with c's current
// membership and open write handles.
func PruneNow(c *Client) { c.pruneBookies() }
