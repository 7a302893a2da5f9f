// Package zk is Folio's ZooKeeper metadata driver. It stores exactly what
// Apache BookKeeper 4.17's ZooKeeper driver stores, znode for znode and
// byte for byte (spec/metadata.md §3), so that Folio bookies, clients,
// shell and AutoRecovery join the ZooKeeper-based BookKeeper clusters that
// exist, Java bookies and clients alongside. It registers itself for the
// `zk` URI scheme: metadata.Open(ctx, "zk://h1:2181;h2:2181/ledgers", …)
// (import this package for its side effect). It is built on
// github.com/go-zookeeper/zk.
//
// # URIs
//
// As BookKeeper parses them: `zk://hosts/root` and `zk+<type>://hosts/root`
// with type hierarchical, longhierarchical, flat or null (null, like no
// type, means "what LAYOUT says"; hierarchical where there is no LAYOUT).
// Hosts are separated by ';' (or ','); a host without a port gets 2181.
// The path is the ledgers root. `zk+ms://` (MSLedgerManagerFactory) and
// unknown types are refused, naming them. ZooKeeper ACLs and digest/SASL
// authentication are not supported: a URI with user information is
// refused rather than ignored, and every znode is created with the open
// ACL (world:anyone, all), as Java does without zkEnableSecurity; a server
// that denies access gives an error that says so.
//
// # Znodes
//
// Under the ledgers root <root> (e.g. /ledgers):
//
//	<root>                                  ""  the cluster (its existence is what initnewcluster checks)
//	<root>/LAYOUT                           "2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
//	                                        (or Long…, LegacyHierarchical…, Flat…; format 1 layouts are read too)
//	<root>/INSTANCEID                       random UUID v4 text
//	<root>/available                        ""
//	<root>/available/<bookieId>             ephemeral, binary BookieServiceInfoFormat (spec §5)
//	<root>/available/readonly               ""
//	<root>/available/readonly/<bookieId>    ephemeral, binary BookieServiceInfoFormat
//	<root>/cookies/<bookieId>               cookie text (spec §4)
//	<root>/idgen/ID-<seq>                   ephemeral-sequential, deleted at once: the sequence number is the id
//	<root>/idgen-long/HOB-%010d/ID-<seq>    the same above 2^31: id = HOB<<32 | seq
//	<root>/<ledger path>                    ledger metadata, format 3 (spec §1.2)
//	<root>/underreplication/...             AutoRecovery (below)
//
// Ledger paths (Manager.LedgerPath): hierarchical (the default, Java's
// "hybrid" manager) puts an id below Integer.MAX_VALUE at %010d split
// 2-4-4 (12345 → <root>/00/0001/L2345) and a larger one at %019d split
// 3-4-4-4-4 (360287970189639681 → <root>/036/0287/9701/8963/L9681);
// longhierarchical uses the long form for every id; legacy hierarchical the
// short form (ids of ten digits at most); flat <root>/L%010d, with ids from
// <root>/ID-. InitNewCluster creates, in one multi after the root's
// parents: the root, available, available/readonly, INSTANCEID, LAYOUT,
// cookies, underreplication and underreplication/LAYOUT. Java's
// initnewcluster creates the first five and its bookies, clients and
// auditors the others on first use, with the same content; an existing
// root is an existing cluster (ErrClusterExists), as in Java.
//
// # Versions and compare-and-set
//
// A znode's metadata.Version is its mzxid, the zxid of the transaction that
// last wrote it: ZooKeeper-wide, so versions of a znode only increase, also
// across deletion and re-creation (the znode version restarts at 0 there,
// which would let a stale compare-and-set through). A compare-and-set reads
// the stat (repeating the read after a sync when the server lags behind
// the version the caller holds), checks the mzxid, and writes with setData
// or delete conditional on the znode version read with it: whatever came
// in between makes the write fail with BadVersion. The one gap is a delete
// and re-create of the znode up to the same znode version between the read
// and the write; Java, comparing znode versions only, has it always. A
// create is a multi (create the znode empty, then setData at version 0) so
// that it returns the stat, and with it the version, of what it created:
// Java's ledger znodes therefore start at znode version 0 and Folio's at 1,
// which nothing reads. Values that do not parse are ErrCorruptMetadata
// naming the znode, never "absent". As in Java, a ledger without a stored
// ctime reads the znode's creation time as its ctime.
//
// # Listing
//
// ListLedgers walks the manager's trees with children sorted at every
// level (fixed-width digit names sort as numbers): for hierarchical, the
// short tree (top-level names of two digits) then the long one (three
// digits), as Java's iterator does; subtrees wholly below startID are not
// read. Top-level znodes that are not ledger trees (available, cookies,
// idgen, LAYOUT, …) are not part of it, as in Java. Inside a tree, a name
// that is not the level's digits, or "L" and the leaf's digits, fails the
// listing naming the znode (Java's GC skips it; Folio reports it). The
// listing syncs the root first, as Java does.
//
// # Ledger ids
//
// GenerateLedgerID is Java's ZkLedgerIdGenerator / LongZkLedgerIdGenerator
// (idgen.go): Java and Folio clients draw from the same counters. Folio
// skips id 0, which a fresh counter hands out first.
//
// # Sessions and registration
//
// A metadata.Session is a ZooKeeper session on a connection of its own,
// with TTL as its session timeout (the server clamps it to its
// min/maxSessionTimeout). RegisterBookie creates the ephemeral
// registration znode with the bookie's BookieServiceInfoFormat and deletes
// the other mode's znode in one multi; a znode held by another session is
// waited for (twice the timeout) and then ErrBookieRegistered, so one id is
// never registered twice. When the server reports the session expired (the
// client learns it on reconnecting, after a partition or a pause longer
// than the timeout), Done closes and the connection is closed, so nothing
// is created under the new session the client library would open in its
// place; every ephemeral znode a session creates is checked to be owned by
// it. The bookie then opens a new session and registers again, as with an
// etcd lease. The driver's own connection (metadata, cookies, watches)
// survives expiry: the client opens a new session and the driver's watches
// re-read what they watch.
//
// # Watches
//
// ZooKeeper watches fire once: WatchLedger, WatchBookies and
// WatchLostBookieRecoveryDelay re-read (with a new watch) at every event,
// so intermediate states may be coalesced and the newest is always
// delivered. The client library cannot remove a watch: a cancelled
// WatchLedger's watch stays registered until the znode next changes.
//
// # AutoRecovery
//
// On Java's paths, so that Java and Folio auditors and workers share one
// cluster:
//
//	<root>/underreplication/LAYOUT            `type: "BASIC"\nversion: 1\n` (TextFormat)
//	<root>/underreplication/ledgers/hhhh/hhhh/hhhh/hhhh/urL%010d
//	                                          record: TextFormat of UnderreplicatedLedgerFormat
//	                                          (`replica: "<id>"` lines, `ctime: <ms>`); hhhh = the id's
//	                                          16-bit groups in lowercase hex, high to low
//	<root>/underreplication/locks/urL%010d    ephemeral lock: `bookieId: "<worker>"` (LockDataFormat)
//	<root>/underreplication/auditorelection/V_<seq>
//	                                          ephemeral-sequential vote: `bookieId: "<id>"` (AuditorVoteFormat);
//	                                          the lowest sequence number is the auditor
//	<root>/underreplication/disable           present while re-replication is disabled
//	<root>/underreplication/lostBookieRecoveryDelay
//	                                          whole seconds, decimal (Java reads an int)
//	<root>/underreplication/checkallledgersctime, placementpolicycheckctime, replicascheckctime
//	                                          binary *CheckFormat: the check's last completion, epoch ms
//
// A lock is taken in one multi with a check that the record exists, and is
// released by MarkLedgerReplicated whatever the outcome of its
// compare-and-set; clearing a record also deletes its hex parents left
// empty, as Java does.
//
// # Deviations from Java
//
//   - Versions are mzxids (above); znodes Folio creates start at znode
//     version 1.
//   - Folio does not write cToken into ledger metadata (Java's ZooKeeper
//     ledger manager does, to make create idempotent across its automatic
//     resends; the Go client does not resend, and a create whose outcome is
//     unknown is reported as an error). Java reads a missing cToken as 0.
//   - Id 0 is never handed out.
//   - Merging missing replicas into an existing under-replication record
//     keeps its ctime (Java sets it to the merge time when
//     storeSystemTimeAsLedgerUnderreplicatedMarkTime is on).
//   - The lost-bookie recovery delay is whole seconds; a sub-second delay
//     cannot be stored (Java could not read it).
//   - InitNewCluster also creates the root's missing parents (e.g. /pulsar
//     for /pulsar/ledgers), cookies/, underreplication/ and its LAYOUT (Java
//     creates the last three on first use); Format deletes the whole root
//     and initialises it again, refusing, like Java's nuke, when the root
//     holds znodes that are not BookKeeper's.
//   - RegisterBookie waits up to twice the session timeout for a
//     registration znode held by another session (Java waits one timeout),
//     as the etcd driver waits for another lease.
//   - Inside ledger and under-replication trees, malformed names fail
//     listings instead of being skipped.
package zk
