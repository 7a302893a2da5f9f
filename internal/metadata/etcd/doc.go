// Package etcd is Folio's etcd metadata driver. It stores exactly what Apache
// BookKeeper 4.17's etcd driver (metadata-drivers/etcd) stores, key for key
// and byte for byte, so Java BookKeeper clients and bookies can share the
// cluster (spec/metadata.md §2). It registers itself for the `etcd` URI
// scheme: metadata.Open(ctx, "etcd://h1:2379;h2:2379/ledgers", …) (import
// this package for its side effect). etcd+https://h1:2379/ledgers connects
// over TLS, with metadata.Options.Security's CA, client certificate and
// user (security.go; Java's driver has neither).
//
// # Keys
//
// The scope is the URI's path, e.g. "/ledgers"; every key starts with it.
//
//	<scope>                              ""  cluster marker; its create_revision guards init
//	<scope>/layout                       "2\norg.apache.bookkeeper.metadata.etcd.EtcdLedgerManagerFactory:0"
//	<scope>/instanceid                   random UUID v4 text (cookies must carry it)
//	<scope>/cookies                      ""  placeholder
//	<scope>/cookies/<bookieId>           cookie text (opaque here; §4)
//	<scope>/bookies                      ""  placeholder
//	<scope>/bookies/writable             ""  placeholder
//	<scope>/bookies/readonly             ""  placeholder
//	<scope>/bookies/writable/<bookieId>  ""  under the bookie's lease
//	<scope>/bookies/readonly/<bookieId>  ""  under the bookie's lease
//	<scope>/ledgers                      ""  placeholder
//	<scope>/ledgers/<uuid>               ledger metadata, format 3 (§1.2)
//	<scope>/buckets                      ""  placeholder
//	<scope>/buckets/NNN                  ""  NNN = 000..127; the key's version is the id counter
//	<scope>/underreplication             ""  placeholder (Java never uses it)
//
// <uuid> is Java's `new UUID(0, ledgerId)` text (LedgerUUID): id 1 is
// 00000000-0000-0000-0000-000000000001 and 5<<56|1 is
// 00000000-0000-0000-0500-000000000001. InitNewCluster writes the ten
// placeholder keys (with layout and instance id) in one txn guarded by
// `create_revision(<scope>) == 0`.
//
// Folio-only keys: AutoRecovery (metadata.AutoRecoveryDriver, autorecovery.go)
// keeps its state under `<scope>/underreplication/`, a subtree no Java
// component reads (spec/metadata.md §6 risk 7); names follow Java's
// ZooKeeper layout (§3):
//
//	<scope>/underreplication/ledgers/<uuid>         record: TextFormat of UnderreplicatedLedgerFormat
//	                                                (`replica: "<bookieId>"` lines, then `ctime: <ms>`)
//	<scope>/underreplication/locks/<uuid>           the ledger's lock: the owner's id, under its lease
//	<scope>/underreplication/auditorelection/<hex>  election keys of go.etcd.io/etcd/client/v3/concurrency
//	                                                (one per candidate lease; lowest create_revision leads;
//	                                                value = candidate id)
//	<scope>/underreplication/disable                ""  present while replication is disabled
//	<scope>/underreplication/replicationswitch      ""  put by every switch of the above: its
//	                                                mod_revision guards the switch (retry.go)
//	<scope>/underreplication/lostBookieRecoveryDelay  decimal seconds ("60", "0.5")
//	<scope>/underreplication/checkallledgersctime       last ledger check's completion: binary CheckAllLedgersFormat
//	<scope>/underreplication/placementpolicycheckctime  last placement check's: binary PlacementPolicyCheckFormat
//	<scope>/underreplication/replicascheckctime         last replicas check's: binary ReplicasCheckFormat
//	                                                (unused: Folio's auditor has no replicas check)
//
// The three check times are what Java's ZooKeeper manager stores at the
// same node names (Java's etcd driver has no under-replication manager,
// so nothing of Java's reads them on etcd): the protobuf *binary* encoding
// (not TextFormat, unlike the records) of a message whose one field 1 is
// the completion time in epoch milliseconds: tag 0x08, then the varint
// (1700000000000 ms is `08 80 d0 95 ff bc 31`). An absent key means "never ran"; a newly elected
// auditor runs such a check at once, as Java's does. Java reads a value
// without the field as "never" too; Folio refuses it (and unknown fields,
// and negative times) as ErrCorruptMetadata naming the key, since no
// writer produces one.
//
// A record's version is its mod_revision. Marking is a CAS loop (create
// if `create_revision == 0`, else merge the missing bookies with `if
// mod_revision == read`; a record that already lists them is not
// rewritten). Clearing is `if mod_revision == expected then delete record
// and release lock else release lock`, where releasing deletes the lock
// read before the first attempt (`if create_revision(lock) == read`, a
// nested txn), not a lock taken since. Locking is `if
// create_revision(record) > 0 and create_revision(lock) == 0 then put(lock,
// owner, lease)`; a lock is not re-entrant: one held by the same session is
// refused too (ErrLocked, naming the session), so a lock whose Unlock failed
// stays until its session ends (the replication worker then ends it). The
// lock ends with Unlock (a delete guarded by its create_revision), with the
// lease, or when the key is deleted (a watch closes Lock.Done). The auditor election
// shares the session's lease through a concurrency.Session that is
// orphaned, never closed (closing would revoke the lease).
//
// # Versions and compare-and-set
//
// A value's version is the key's mod_revision; the version a write returns
// is the txn header revision (the new mod_revision). Create is `if
// create_revision == 0 then put`, write `if mod_revision == expected then put
// else get` (the else branch tells BadVersion from NoSuchLedger), delete `if
// mod_revision == expected` or, with VersionAny, `if create_revision ==
// c`, c read just before (a key created again since is not deleted).
// Revisions are store-wide, so a re-created key never reuses an old
// version. A value that does not parse is reported as ErrCorruptMetadata
// naming the key, never as "no such ledger".
//
// # Retries
//
// Every request is retried while etcd is unavailable (retry.go). A retried
// write recognises its own earlier attempt's effect, and no write is left
// that an abandoned attempt, applied late, could turn against a later
// change: writes that would compare nothing are guarded on state read
// before their first attempt (retry.go lists them).
//
// # Listing
//
// ListLedgers is a keys-only, key-sorted range scan from the key of id 0 to
// the key of MaxInt64 (exclusive), the range Java bookies' garbage collector
// scans. A key in that range that is not a canonical ledger UUID fails the
// listing, naming it (Java's GC stops on it too); it is never skipped.
//
// # Ledger ids
//
// GenerateLedgerID is Java's Etcd64bitIdGenerator: 128 buckets, a random
// start, round-robin; one txn puts "" at `buckets/NNN` and gets it back; id =
// bucket<<56 | key version. Java and Folio clients share the counters.
//
// Ledger metadata carries no creator token on etcd (ctoken 0, as Java's
// etcd driver writes it; ZooKeeper's drivers use it to recognise their own
// create). A retried create recognises its own by the bytes instead: the
// key holds exactly our value and was never rewritten (createdByUs). That
// cannot tell two creators of one id with identical bytes apart, which is
// sound because ids come from GenerateLedgerID, never handed out twice:
// every production path creates ledgers through CreateLedger. Only tests
// call CreateLedgerMetadata with an id of their choosing.
//
// # Registration and sessions
//
// A Session is one lease (TTL in whole seconds) kept alive by the client.
// RegisterBookie is `if create_revision(key) == 0 and create_revision(other)
// == read then put(key, "", lease) and delete the other mode's key`, both
// keys read first; a key held by another lease is waited for up to 2×TTL
// (Config.RegistrationWait) and then fails with ErrBookieRegistered
// ("previous bookie registration still exists"). UnregisterBookie deletes
// the key read first (`if create_revision == read`), whoever holds it. When
// the lease is lost, Session.Done closes; the owner opens a new session and
// registers again. The value is the session's BookieServiceInfoFormat
// (SessionOptions.ServiceInfo; empty without one): Java's etcd driver
// stores nothing and reads only the keys, so its clients can resolve only
// host:port ids, while Folio's read the value (BookieServiceInfo) and so
// resolve custom bookie ids (bookieId) too.
//
// # Watches
//
// WatchLedger watches one key from the revision it read (a DELETE ends it);
// WatchBookies watches [<scope>/bookies/, <scope>/bookies0). Both coalesce
// while the reader is slow and, if the revisions they need were compacted,
// re-read and continue.
//
// # Format
//
// Format refuses while any key other than the placeholders exists in
// [<scope>/bookies, <scope>/bookies0), and then deletes `<scope>` and every
// key under `<scope>/`. Unlike Java's nuke, which deletes [<scope>,
// <scope>0), it leaves sibling clusters such as `<scope>-x` alone.
package etcd
