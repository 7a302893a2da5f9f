// Package admin holds the operator's cluster operations: what the public
// admin API (github.com/foliodb/folio/admin, which wraps these with public
// types and is what `folio shell` calls for them) and a bookie's admin
// HTTP server (HTTPCluster) run. The CLI only parses flags and formats what
// these functions return (DESIGN.md §8, docs/design/layout.md). By file:
//
//   - bookies.go: the registered bookies (ListBookies) and their disk
//     figures (GetBookieInfo);
//   - sanity.go, simpletest.go: the bookie sanity check and the simple test
//     (write, read back, delete);
//   - inspect.go, availability.go, fence.go: ledger inspection (each
//     bookie's entries and LAC, what a recovery would decide, fence state
//     over the bookies' HTTP);
//   - recover.go: recovering one ledger (fence, find the end, close;
//     forced re-recovery of a CLOSED ledger);
//   - decommission.go: recovering a failed bookie's data
//     (RecoverBookie, with a dry-run plan), draining and decommissioning a
//     bookie, triggering an audit, the ledgers a bookie stores entries of;
//   - rebookie.go: re-addressing a bookie in every ledger's metadata;
//   - ledgerdump.go: dumping and restoring ledger metadata;
//   - httpcluster.go: the cluster routes of a bookie's admin HTTP server.
//
// The re-replication engine these use (copying fragments, choosing
// replacements, the ledger checker, direct bookie connections) is
// internal/rereplication, shared with AutoRecovery; AutoRecovery does not
// import this package.
//
// Functions here never print; long operations report progress through a
// callback the caller may leave nil.
package admin
