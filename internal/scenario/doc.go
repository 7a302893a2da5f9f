// Package scenario holds only tests: the process-level acceptance scenarios
// of spec/protocol.md §8.2 for fencing and ledger recovery (real bookie
// processes from internal/testcluster, a writer that is a separate process
// recording what it was told succeeded, the universal checks U1–U4, and the
// ledger's metadata history read back from etcd), the randomized
// writer-vs-recoverer race, and the recovery benchmark.
package scenario
