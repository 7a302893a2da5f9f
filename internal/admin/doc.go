// Package admin holds the cluster operations shared by the `folio shell`
// commands and AutoRecovery: listing bookies, asking them for disk figures,
// the simple test, the bookie sanity check and ledger inspection. The CLI
// only parses flags and formats what these functions return (DESIGN.md §8).
//
// Functions here never print; long operations report progress through a
// callback the caller may leave nil.
package admin
