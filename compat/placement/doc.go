// Package placement compares Folio's placement policies with Apache
// BookKeeper's own (compat/harness.PlacementVerdicts) on generated
// topologies; a package of its own so that each compat package stays
// within the per-package time budget.
package placement
