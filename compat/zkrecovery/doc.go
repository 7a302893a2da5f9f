// Package zkrecovery runs Apache BookKeeper's AutoRecovery
// (AutoRecoveryMain) and Folio's (`folio autorecovery`) in one auditor
// election on ZooKeeper, re-replicating the ledgers of killed Java and
// Folio bookies (compat/harness.ZooKeeperAutoRecovery); it is a package of
// its own so that each compat package stays within the per-package time
// budget.
package zkrecovery
