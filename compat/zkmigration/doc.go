// Package zkmigration moves a ZooKeeper cluster of Apache BookKeeper
// bookies onto Folio bookies as docs/operations.md "Migrating from Java
// bookies" says (compat/harness.ZooKeeperMigration); it is a package of
// its own so that each compat package stays within the per-package time
// budget.
package zkmigration
