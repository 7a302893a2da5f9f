// Package rereplication is the re-replication engine (spec/protocol.md
// §6.4–§6.7): finding the bookies of a ledger's fragments that lack their
// entries (LedgerChecker), choosing a replacement with the placement
// policy a client's ensemble change uses (placement.Policy), copying a
// fragment's entries to it from the surviving replicas and swapping it into
// the ensemble by compare-and-set (Replicator, Bookies.ReplicateFragment),
// and fencing and closing a ledger whose open last fragment must be
// repaired (FenceAndClose). Bookies reaches bookies directly for that work.
//
// AutoRecovery's auditor and replication workers (internal/autorecovery)
// and the operator's bookie recovery (internal/admin) both use it; it
// imports neither (DESIGN.md §8, docs/design/layout.md). Functions here
// never print and never start a goroutine that outlives the call, except
// the connections Bookies holds until Close.
package rereplication
