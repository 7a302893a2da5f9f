// Package benchjava runs Apache BookKeeper's own benchmark tools
// (BenchThroughputLatency, BenchBookie) against Java bookies and Folio
// bookies on one ZooKeeper (compat/harness.BenchJava). Its test is built
// only with the benchjava tag: `make bench-java` runs it, CI does not.
package benchjava
