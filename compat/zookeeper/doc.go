// Package zookeeper runs Apache BookKeeper's Java bookies, client and shell
// and Folio's on one ZooKeeper server, each implementation on its own
// ZooKeeper metadata driver (compat/harness.ZooKeeperInterop); it is a
// package of its own so that each compat package stays within the
// per-package time budget.
package zookeeper
