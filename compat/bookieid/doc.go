// Package bookieid runs Apache BookKeeper's Java client and shell against
// Folio bookies with custom bookie ids on ZooKeeper
// (compat/harness.CustomBookieIDs); a package of its own so that each
// compat package stays within the per-package time budget.
package bookieid
