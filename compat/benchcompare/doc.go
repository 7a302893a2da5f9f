// Package benchcompare runs the side-by-side benchmark of issue 22
// (compat/harness.BenchCompare): Apache BookKeeper 4.17 bookies (default
// and journalFlushWhenQueueEmpty) and Folio bookies on one ZooKeeper,
// driven by BookKeeper's own Java code and by Folio's Go client. Its test
// is built only with the benchcompare tag: `make bench-compare` runs it,
// CI does not.
package benchcompare
