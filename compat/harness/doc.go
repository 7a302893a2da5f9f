// Package harness runs Apache BookKeeper 4.17's own Java code (built from
// ../java with Maven) against Folio: the Java programs, `folio standalone`,
// Java bookies and AutoRecoveryMain, a ZooKeeper server, and the interop
// scenarios, on etcd (interop.go, javabookie.go, javaonly.go) and on
// ZooKeeper (zookeeper.go, zkinterop.go, zkrecovery.go, zkmigration.go),
// and BookKeeper's benchmark tools (benchjava.go). The test packages
// (compat, compat/javabookies, compat/zookeeper, compat/zkrecovery,
// compat/zkmigration, compat/benchjava) call its entry points; it is split
// from them so that each test package stays within the per-package time
// budget.
package harness
