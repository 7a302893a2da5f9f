package server

import (
	"slices"
	"strconv"
	"strings"
)

// KeyClass is how Folio treats a bk_server.conf key.
type KeyClass string

const (
	// Implemented: Folio acts on the key, with BookKeeper's name, unit and
	// default unless the key's Reason documents a difference.
	Implemented KeyClass = "implemented"
	// Irrelevant: the key tunes something Folio does not have (the JVM,
	// Netty, RocksDB, thread pools, Java plug-ins) or asks for what Folio
	// always does. It is accepted; the bookie logs one INFO line listing
	// the irrelevant keys present.
	Irrelevant KeyClass = "irrelevant"
	// NotSupported: the key asks for something Folio does not do. Values
	// that change what the operator gets (KeyInfo.RefuseWhen) stop the
	// start with a message naming the key and where it was set; harmless
	// ones (KeyInfo.WarnWhen) draw a warning.
	NotSupported KeyClass = "not supported"
)

// KeyCond is a condition on a key's value, with its description for
// messages and the documentation, and a value that meets it (tests).
type KeyCond struct {
	Text    string
	Example string
	Holds   func(v string) bool
}

// KeyInfo describes one configuration key.
type KeyInfo struct {
	Name  string
	Class KeyClass
	// Default is the value in effect when the key is not set, as it would
	// be written in the file ("" for none).
	Default string
	// Reason says why the key has its class: for implemented keys what it
	// does and where Folio differs, for the others why Folio does not act
	// on it.
	Reason string
	// RefuseWhen, for a NotSupported key, is when its value stops the
	// start; WarnWhen, when it draws a warning. Nil: never.
	RefuseWhen *KeyCond
	WarnWhen   *KeyCond
	// Secret values are never printed (--print-config shows "(set)").
	Secret bool
}

// Value conditions of not-supported keys.
var (
	whenPositive = &KeyCond{"> 0", "3600", func(v string) bool {
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err != nil || n > 0 // a value Java could not read is refused, not guessed at
	}}
	whenTrue = &KeyCond{"true", "true", func(v string) bool {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		return err != nil || b
	}}
	whenSet = &KeyCond{"set", "com.example.Custom", func(v string) bool {
		v = strings.TrimSpace(v)
		return v != "" && v != "null"
	}}
	whenAny = &KeyCond{"present", "x", func(string) bool { return true }}
)

// whenNotIn holds for a non-empty value other than the given ones.
func whenNotIn(vals ...string) *KeyCond {
	return &KeyCond{"other than " + strings.Join(vals, " or "), "com.example.Custom", func(v string) bool {
		v = strings.TrimSpace(v)
		return v != "" && v != "null" && !slices.Contains(vals, v)
	}}
}

// whenPositiveExcept holds for a positive number other than def.
func whenPositiveExcept(def string) *KeyCond {
	return &KeyCond{"> 0 other than " + def + " (the default)", "3600000", func(v string) bool {
		v = strings.TrimSpace(v)
		return v != def && whenPositive.Holds(v)
	}}
}

func impl(name, def, reason string) KeyInfo {
	return KeyInfo{Name: name, Class: Implemented, Default: def, Reason: reason}
}

func irr(name, def, reason string) KeyInfo {
	return KeyInfo{Name: name, Class: Irrelevant, Default: def, Reason: reason}
}

func refuse(name, def string, when *KeyCond, reason string) KeyInfo {
	return KeyInfo{Name: name, Class: NotSupported, Default: def, Reason: reason, RefuseWhen: when}
}

func warn(name, def string, when *KeyCond, reason string) KeyInfo {
	return KeyInfo{Name: name, Class: NotSupported, Default: def, Reason: reason, WarnWhen: when}
}

// Reasons shared by many keys.
const (
	rJVM        = "JVM/Netty tuning: Folio is a Go process"
	rThreads    = "thread-pool tuning: Folio serves requests on goroutines"
	rRocks      = "RocksDB/DbLedgerStorage tuning: Folio's ledger storage has its own index and caches"
	rInterleave = "InterleavedLedgerStorage/SortedLedgerStorage tuning: Folio's ledger storage has no such structure"
	rJournal    = "Java journal format/IO tuning: Folio's journal has its own format and group commit"
	rEntryLog   = "Java entry log IO tuning: Folio's entry logs have their own writer"
	rStream     = "BookKeeper's stream storage (table service), loaded only through extraServerComponents, which Folio refuses"
	rCodahale   = "Codahale stats provider option: Folio serves Prometheus metrics only"
	rClient     = "BookKeeper client option of the Java bookie's own client: Folio's AutoRecovery copies entries as stored and reads with its own client"
	rFolio      = "Folio's key"
	rSame       = "as BookKeeper"
	rPlacement  = "AutoRecovery inside the bookie chooses replacement bookies by the placement policy and these settings, as a Folio client configured alike places ensembles (the auditor's placement check still judges by distinct bookies)"
)

// bkKeys is every key of BookKeeper 4.17's bk_server.conf and of the keys
// its ServerConfiguration and AbstractConfiguration read, with the keys
// Folio adds, each classified. The implemented ones are exactly the keys
// of configKeys, storageKeys and propsKeys (TestKeyTableConsistency);
// unknown keys draw a warning naming the nearest one of this table.
var bkKeys = []KeyInfo{
	// Server parameters.
	impl("bookiePort", "3181", rSame),
	impl("listenHost", "", rFolio+": the address the listener binds; empty binds every interface, as Java does"),
	impl("advertisedAddress", "", rSame),
	impl("listeningInterface", "", rSame+"; empty: the first up, non-loopback interface"),
	impl("useHostNameAsBookieID", "false", rSame),
	refuse("useShortHostName", "false", whenTrue, "a short host name in the bookie id is not implemented: the id would differ from the Java bookie's"),
	impl("allowLoopback", "false", rSame),
	irr("allowEphemeralPorts", "false", "Folio accepts bookiePort=0 (a free port, for tests) without it"),
	warn("allowMultipleDirsUnderSameDiskPartition", "true", &KeyCond{"false", "false", func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "false") }},
		"Folio does not check that directories are on distinct partitions; false is accepted without the check"),
	irr("bookieDeathWatchInterval", "1000", "Java's watchdog thread: a Folio bookie stops on a fatal error itself"),
	irr("enableLocalTransport", "false", "in-JVM transport for Java clients in the same process"),
	refuse("disableServerSocketBind", "false", whenTrue, "a bookie without a network listener (in-JVM clients only) is not supported: Folio always listens on bookiePort"),
	refuse("extraServerComponents", "", whenSet, "extra Java server components (e.g. Pulsar's stream storage for function state) cannot run in Folio"),
	irr("ignoreExtraServerComponentsStartupFailures", "false", "only with extraServerComponents, which Folio refuses"),
	irr("bookieAddressResolverEnabled", "true", rClient),
	irr("allocatorPoolingPolicy", "PooledDirect", rJVM),
	irr("allocatorPoolingConcurrency", "8", rJVM),
	irr("allocatorOutOfMemoryPolicy", "FallbackToHeap", rJVM),
	irr("allocatorLeakDetectionPolicy", "Disabled", rJVM),
	irr("allocatorExitOnOutOfMemory", "false", rJVM),
	irr("enableBusyWait", "false", rThreads),
	irr("preserveMdcForTaskExecution", "false", "Java logging context (MDC)"),
	impl("shutdownTimeout", "8000", rFolio+": milliseconds a graceful stop waits for requests in flight"),
	impl("registrationRetryInterval", "1000", rFolio+": milliseconds between failed registration attempts"),
	impl("logLevel", "info", rFolio+": debug, info, warn or error; --log-level overrides it (BookKeeper configures logging in log4j2.yaml)"),
	impl("logFormat", "text", rFolio+": text or json (log/slog handlers); --log-format overrides it"),
	impl("rejectBatchRead", "false", rFolio+": true answers every BATCH_READ_ENTRY with EBADREQ, as a bookie without batch reads (for testing clients' fallback to single reads)"),
	impl("bookieId", "", rSame+": a custom bookie id (not host:port); the address is published in the registration's BookieServiceInfo, through which clients resolve it"),
	refuse("dataIntegrityChecking", "false", whenTrue, "BookKeeper's data integrity checker (checking and repairing local storage on start) is not implemented"),
	refuse("dataIntegrityStampMissingCookies", "false", whenTrue, "stamping missing cookies belongs to the data integrity checker, which is not implemented"),
	refuse("localConsistencyCheckOnStartup", "false", whenTrue, "a consistency check of local storage on start is not implemented (the journal replay checks what it reads)"),
	warn("skipReplayJournalInvalidRecord", "false", whenTrue, "Folio never skips an invalid journal record: a corrupt journal stops the start (stricter than asked)"),

	// Thread settings.
	irr("numAddWorkerThreads", "1", rThreads),
	irr("numReadWorkerThreads", "8", rThreads),
	irr("numHighPriorityWorkerThreads", "8", rThreads),
	irr("numLongPollWorkerThreads", "0", rThreads),
	irr("numJournalCallbackThreads", "1", rThreads),
	irr("numOfMemtableFlushThreads", "8", rThreads),
	irr("maxPendingReadRequestsPerThread", "10000", rThreads),
	irr("maxPendingAddRequestsPerThread", "10000", rThreads),
	irr("readWorkerThreadsThrottlingEnabled", "true", rThreads),
	irr("serverNumIOThreads", "2 × cores", rThreads),
	irr("serverNumAcceptorThreads", "1", rThreads),
	irr("requestTimerTickDurationMs", "10", "Java's long-poll timer wheel"),
	irr("requestTimerNumTicks", "1024", "Java's long-poll timer wheel"),
	irr("maxAddsInProgressLimit", "0", "Folio bounds the request bytes in flight per connection itself"),
	irr("maxReadsInProgressLimit", "0", "Folio bounds the request bytes in flight per connection itself"),
	irr("closeChannelOnResponseTimeout", "false", "Netty back-pressure: Folio closes a connection whose peer does not take responses in 30 s"),
	irr("waitTimeoutOnResponseBackpressureMs", "-1", "Netty back-pressure: Folio closes a connection whose peer does not take responses in 30 s"),
	irr("maxBatchReadSize", "5242880", "Folio caps a batch read response at the frame size"),

	// Netty server settings.
	irr("serverTcpNoDelay", "true", rJVM+" (Go sets TCP_NODELAY)"),
	irr("serverSockKeepalive", "true", rJVM+" (Go enables keep-alive)"),
	irr("serverTcpLinger", "0", rJVM),
	irr("serverSockLinger", "0", rJVM+" (an old spelling of serverTcpLinger)"),
	irr("serverWriteBufferLowWaterMark", "393216", rJVM),
	irr("serverWriteBufferHighWaterMark", "524288", rJVM),
	irr("byteBufAllocatorSizeInitial", "65536", rJVM),
	irr("byteBufAllocatorSizeMin", "65536", rJVM),
	irr("byteBufAllocatorSizeMax", "1048576", rJVM),
	impl("nettyMaxFrameSizeBytes", "5242880", rSame+": the largest request frame accepted and response frame sent, prefix included, 65536 to 1073741824 (Pulsar's configurations set 5253120; set clients alike: client.Config.MaxFrameSize)"),

	// HTTP server.
	impl("httpServerEnabled", "false", rSame+" (folio standalone always runs its one admin HTTP server)"),
	impl("httpServerHost", "", rSame+"; empty means every interface (Java's 0.0.0.0)"),
	impl("httpServerPort", "8080", rSame),
	irr("httpServerClass", "org.apache.bookkeeper.http.vertx.VertxHttpServer", "Java HTTP server implementation: Folio has its own"),
	impl("httpServerTlsEnable", "false", rSame),
	impl("httpServerKeyStorePath", "", "the server's PEM private key (Java reads a key store; JKS is refused)"),
	{Name: "httpServerKeyStorePassword", Class: Implemented, Reason: "must be empty: Folio reads unencrypted PEM keys", Secret: true},
	impl("httpServerCertificatePath", "", rFolio+": the PEM certificate chain of httpServerKeyStorePath"),
	impl("httpServerTrustStorePath", "", "PEM CAs whose client certificates the admin server requires"),
	{Name: "httpServerTrustStorePassword", Class: Implemented, Reason: "accepted and unused: a PEM trust store has no password", Secret: true},
	impl("httpServerAuthTokenPath", "", rFolio+": file of the admin API's bearer token"),
	impl("httpServerPprofEnabled", "false", rFolio+": serve /debug/pprof"),

	// Security.
	impl("tlsProviderFactoryClass", "", rSame+": TLSContextFactory turns TLS on"),
	impl("tlsProvider", "", "accepted (Go's TLS serves both OpenSSL and JDK)"),
	impl("tlsClientAuthentication", "false", rSame),
	impl("tlsKeyStoreType", "", "PEM only; empty means JKS, as in Java, and JKS/PKCS12 are refused"),
	impl("tlsKeyStore", "", rSame+" (PEM)"),
	impl("tlsKeyStorePasswordPath", "", "refused when set: Folio reads unencrypted PEM keys"),
	impl("tlsCertificatePath", "", rSame),
	impl("tlsTrustStoreType", "", "PEM only, as tlsKeyStoreType"),
	impl("tlsTrustStore", "", rSame+" (PEM)"),
	impl("tlsTrustStorePasswordPath", "", "accepted and unused: a PEM trust store has no password"),
	impl("tlsEnabledProtocols", "", rSame),
	impl("tlsEnabledCipherSuites", "", rSame),
	impl("tlsCertFilesRefreshDurationSeconds", "0", rSame),
	impl("tlsHostnameVerificationEnabled", "false", rSame+" (the bookie's own client)"),
	impl("startTLSTimeoutSecs", "", rSame+" (the bookie's own client; empty: 10 s)"),
	impl("clientKeyStoreType", "", "Java's client alias of tlsKeyStoreType, for the bookie's own client"),
	impl("clientKeyStore", "", "Java's client alias of tlsKeyStore"),
	impl("clientKeyStorePasswordPath", "", "Java's client alias of tlsKeyStorePasswordPath"),
	impl("clientTrustStoreType", "", "Java's client alias of tlsTrustStoreType"),
	impl("clientTrustStore", "", "Java's client alias of tlsTrustStore"),
	impl("clientTrustStorePasswordPath", "", "Java's client alias of tlsTrustStorePasswordPath"),
	impl("bookieAuthProviderFactoryClass", "", "empty or BookieAuthZFactory (TLS client certificates and authorizedRoles); SASL is refused"),
	impl("authorizedRoles", "", rSame),
	impl("clientAuthProviderFactoryClass", "", "refused when set: Folio's own client authenticates with TLS certificates only"),
	impl("permittedStartupUsers", "", rSame),
	refuse("saslJaasBookieSectionName", "", whenAny, "SASL and Kerberos authentication are not supported"),
	refuse("saslJaasAuditorSectionName", "", whenAny, "SASL and Kerberos authentication are not supported"),
	refuse("saslJaasClientSectionName", "", whenAny, "SASL and Kerberos authentication are not supported"),
	refuse("saslJaasClientAllowedIds", "", whenAny, "SASL and Kerberos authentication are not supported"),
	refuse("kerberos.kinit", "", whenAny, "SASL and Kerberos authentication are not supported"),
	refuse("bookkeeper.sasl.servicename", "", whenAny, "SASL and Kerberos authentication are not supported"),
	impl("metadataServiceTlsCaFile", "", rFolio+": CA of the etcd connection"),
	impl("metadataServiceTlsCertFile", "", rFolio+": client certificate of the etcd connection"),
	impl("metadataServiceTlsKeyFile", "", rFolio+": client key of the etcd connection"),
	impl("metadataServiceUser", "", rFolio+": etcd user"),
	impl("metadataServicePasswordPath", "", rFolio+": file of the etcd user's password"),

	// Metadata service.
	impl("metadataServiceUri", "etcd://127.0.0.1:2379/ledgers", "BookKeeper has no default; zk://, zk+<type>:// and Folio's etcd:// URIs"),
	impl("zkServers", "", "used when metadataServiceUri is not set: the store is zk+<type>://<zkServers><zkLedgersRootPath>"),
	impl("zkLedgersRootPath", "", rSame+"; empty means /ledgers"),
	impl("zkTimeout", "10000", rSame+": the registration lease (ZooKeeper session) timeout in ms"),
	impl("zkEnableSecurity", "false", "true is refused: Folio does not set ZooKeeper ACLs"),
	irr("zkRetryBackoffStartMs", "10000", "Java ZooKeeper client retry policy: Folio's ZooKeeper driver reconnects on its own schedule"),
	irr("zkRetryBackoffMaxMs", "10000", "Java ZooKeeper client retry policy: Folio's ZooKeeper driver reconnects on its own schedule"),
	irr("zkRetryBackoffMaxRetries", "2147483647", "Java ZooKeeper client retry policy: Folio's ZooKeeper driver reconnects on its own schedule"),
	irr("zkRequestRateLimit", "0", "Java ZooKeeper client rate limiter"),
	impl("ledgerManagerFactoryClass", "", "the <type> of the zk+<type>:// URI built from zkServers; an unknown class is refused"),
	irr("ledgerManagerType", "", "deprecated by ledgerManagerFactoryClass; the cluster's LAYOUT decides the ledger manager"),
	irr("ledgerManagerFactoryDisableClassCheck", "false", "Java class loading"),
	irr("allowShadedLedgerManagerFactoryClass", "false", "Java class loading (shaded jars)"),
	irr("shadedLedgerManagerFactoryClassPrefix", "dlshade.", "Java class loading (shaded jars)"),
	irr("registrationManagerClass", "", "deprecated Java plug-in: the metadataServiceUri scheme picks the driver"),
	irr("metastoreImplClass", "", "the MS ledger manager's Java metastore, which Folio does not have"),
	irr("metastoreMaxEntriesPerScan", "50", "the MS ledger manager's Java metastore, which Folio does not have"),
	irr("ledgerMetadataVersion", "-1", rClient+" (Folio writes metadata format 3)"),
	irr("storeSystemTimeAsLedgerCreationTime", "false", rClient),
	irr("ledgerIdFormatterClass", "", "Java shell output formatting"),
	irr("entryFormatterClass", "", "Java shell output formatting"),
	irr("enableHealthCheck", "true", rClient),
	irr("digestType", "CRC32", rClient),
	{Name: "passwd", Class: Irrelevant, Reason: rClient, Secret: true},
	irr("enableDigestTypeAutodetection", "true", rClient),
	irr("useV2WireProtocol", "false", rClient),
	irr("stickyReadSEnabled", "false", rClient),
	irr("reorderReadSequenceEnabled", "false", rClient),

	// Journal settings.
	impl("journalDirectories", "/tmp/bk-txn", rSame),
	impl("journalDirectory", "/tmp/bk-txn", rSame+" (deprecated by journalDirectories)"),
	impl("journalMaxSizeMB", "2048", "journal file rotation size in MiB"),
	impl("journalMaxBackups", "5", "journal files kept after the checkpoint no longer needs them"),
	impl("journalMaxGroupWaitMSec", "0", "the journal's group commit wait; Folio's default 0 groups what queues during the previous fsync (BookKeeper: 2)"),
	irr("journalFormatVersionToWrite", "6", rJournal),
	irr("journalPreAllocSizeMB", "16", rJournal),
	irr("journalWriteBufferSizeKB", "64", rJournal),
	irr("journalRemoveFromPageCache", "true", rJournal),
	irr("journalAdaptiveGroupWrites", "true", rJournal),
	irr("journalBufferedWritesThreshold", "524288", rJournal),
	irr("journalBufferedEntriesThreshold", "0", rJournal),
	irr("journalFlushWhenQueueEmpty", "false", rJournal),
	irr("journalAlignmentSize", "512", rJournal),
	irr("journalChannelProvider", "org.apache.bookkeeper.bookie.DefaultFileChannelProvider", rJournal),
	irr("journalReuseFiles", "false", rJournal),
	irr("journalQueueSize", "10000", rJournal),
	irr("journalMaxMemorySizeMb", "", rJournal),
	irr("journalPageCacheFlushIntervalMSec", "1000", rJournal),
	irr("journalSyncData", "true", "Folio always fsyncs the journal before acknowledging (false is not honoured: writes stay durable)"),
	irr("journalWriteData", "true", "Folio always writes entries to the journal (false is not honoured: writes stay durable)"),

	// Ledger storage settings.
	impl("ledgerDirectories", "/tmp/bk-data", rSame),
	impl("indexDirectories", "", "stamped with a cookie as in Java, but Folio keeps the index in the ledger directories"),
	irr("ledgerStorageClass", "org.apache.bookkeeper.bookie.SortedLedgerStorage", "Folio has one ledger storage of its own (see Migrating from Java bookies)"),
	irr("sortedLedgerStorageEnabled", "true", rInterleave),
	irr("skipListSizeLimit", "67108864", rInterleave),
	irr("skipListArenaChunkSize", "4194304", rInterleave),
	irr("skipListArenaMaxAllocSize", "131072", rInterleave),
	irr("openFileLimit", "20000", rInterleave),
	irr("fileInfoFormatVersionToWrite", "1", rInterleave),
	irr("fileInfoCacheInitialCapacity", "", rInterleave),
	irr("fileInfoMaxIdleTime", "0", rInterleave),
	irr("pageSize", "8192", rInterleave),
	irr("pageLimit", "-1", rInterleave),
	impl("flushInterval", "10000", "milliseconds between checkpoints (write cache flushed, journal trimmed)"),
	impl("allowStorageExpansion", "false", "as BookKeeper: true accepts ledger or index directories added to a bookie with data (empty ones); the cookie is updated in every directory and in the metadata store (compare-and-set); `updatecookie -expandstorage` does the same offline. Folio's ledger directories keep their order: new ones are appended and hold entry logs of every shard (existing ledgers stay where they are); removing or reordering one is refused"),
	irr("minUsableSizeForIndexFileCreation", "104857600", "Java's space reserve for index files: Folio's read-only switch follows diskUsageThreshold"),
	irr("minUsableSizeForEntryLogCreation", "1.2 × logSizeLimit", "Java's space reserve for entry logs: Folio's read-only switch follows diskUsageThreshold"),
	irr("minUsableSizeForHighPriorityWrites", "minUsableSizeForEntryLogCreation", "Java's space reserve for high-priority writes: Folio's read-only switch follows diskUsageThreshold"),

	// Entry log settings.
	impl("entryLogSizeLimit", "1073741824", rFolio+": older Folio name of logSizeLimit (an alias; both set to different values is refused)"),
	impl("logSizeLimit", "1073741824", "bytes at which an entry log is sealed (at most 1 GiB)"),
	irr("entryLogFilePreallocationEnabled", "true", rEntryLog),
	irr("flushEntrylogBytes", "0", rEntryLog),
	irr("readBufferSizeBytes", "512", rEntryLog),
	irr("writeBufferSizeBytes", "65536", rEntryLog),
	irr("entryLogPerLedgerEnabled", "false", rEntryLog),
	irr("entryLogPerLedgerCounterLimitsMultFactor", "10", rEntryLog),
	irr("entrylogMapAccessExpiryTimeInSeconds", "300", rEntryLog),
	irr("maximumNumberOfActiveEntryLogs", "500", rEntryLog),

	// Entry log compaction and garbage collection.
	impl("gcWaitTime", "600000", rSame+": milliseconds between garbage collection passes"),
	{Name: "gcOverreplicatedLedgerWaitTime", Class: NotSupported, Default: "86400000",
		RefuseWhen: whenPositiveExcept("86400000"), WarnWhen: whenPositive,
		Reason: "garbage collection of over-replicated ledgers is not implemented: copies of ledgers this bookie no longer belongs to stay until the ledger is deleted (disk, never data). BookKeeper's default (every Java and Pulsar configuration sets it) is accepted with a warning, 0 (off) silently; any other period is refused"},
	irr("gcOverreplicatedLedgerMaxConcurrentRequests", "1000", "only with over-replicated ledger GC (gcOverreplicatedLedgerWaitTime)"),
	irr("gcMetadataOpRateLimit", "1000", "Java GC's metadata rate limiter: Folio lists ledgers in pages"),
	irr("gcEntryLogMetadataCacheEnabled", "false", rEntryLog),
	irr("gcEntryLogMetadataCachePath", "", rEntryLog),
	irr("useTargetEntryLogSizeForGc", "false", rEntryLog),
	irr("verifyMetadataOnGC", "false", "Folio always re-reads a ledger's metadata before deleting it"),
	impl("minorCompactionThreshold", "0.2", "entry logs whose live fraction is below it are compacted by minor compaction; ≤ 0 turns minor compaction off"),
	impl("minorCompactionInterval", "3600", "seconds between minor compactions; ≤ 0 turns them off"),
	impl("majorCompactionThreshold", "0.8", "entry logs whose live fraction is below it are compacted by major compaction; ≤ 0 turns major compaction off"),
	impl("majorCompactionInterval", "86400", "seconds between major compactions; ≤ 0 turns them off"),
	impl("isForceGCAllowWhenNoSpace", "false", "on a full disk compaction pauses unless true (then it runs forced)"),
	impl("forceAllowCompaction", "false", "a manual GC (PUT /api/v1/bookie/gc) also runs a disabled compaction kind"),
	irr("minorCompactionMaxTimeMillis", "-1", "Folio bounds compaction by compactionRateByBytes, not by time"),
	irr("majorCompactionMaxTimeMillis", "-1", "Folio bounds compaction by compactionRateByBytes, not by time"),
	irr("compactionMaxOutstandingRequests", "100000", "Java compaction batching"),
	irr("compactionRate", "1000", "Folio throttles compaction by bytes only (compactionRateByBytes)"),
	irr("compactionRateByEntries", "1000", "Folio throttles compaction by bytes only (compactionRateByBytes)"),
	irr("isThrottleByBytes", "false", "Folio throttles compaction by bytes only (compactionRateByBytes)"),
	impl("compactionRateByBytes", "33554432", "bytes per second compaction copies; Folio throttles by bytes whatever isThrottleByBytes says (BookKeeper's default: 1000000)"),
	irr("useTransactionalCompaction", "false", "Folio's compaction is crash-safe by construction"),

	// DbLedgerStorage.
	impl("dbStorage_writeCacheMaxSizeMb", "64", "MiB of write cache, split over the ledger directories (BookKeeper: 1/4 of direct memory)"),
	impl("dbStorage_readAheadCacheMaxSizeMb", "16", "MiB of read cache (BookKeeper: 1/4 of direct memory)"),
	impl("dbStorage_readAheadCacheBatchSize", "100", "entries a read-cache miss reads ahead (the following entries of the ledger in the same entry log, in one read); ≤ 0: none"),
	impl("dbStorage_readAheadCacheBatchBytesSize", "-1", "if positive, also bounds the bytes one read-ahead caches; -1: bounded by the count and half the read cache"),
	impl("ledgerStateMaxIdleTime", "600", rFolio+": seconds after which an idle ledger's in-memory state (master key, fence bit, LACs) is dropped, to be reloaded from the index on next use (BookKeeper's DbLedgerStorage drops its transient ledger info after a fixed 10 minutes); a ledger is dropped between one and two periods after its last use, never while a long-poll read waits on it or while it holds state not yet in the index; 0 keeps every ledger's state in memory"),
	irr("dbStorage_rocksDB_blockCacheSize", "", rRocks),
	irr("dbStorage_rocksDB_writeBufferSizeMB", "64", rRocks),
	irr("dbStorage_rocksDB_sstSizeInMB", "64", rRocks),
	irr("dbStorage_rocksDB_blockSize", "65536", rRocks),
	irr("dbStorage_rocksDB_bloomFilterBitsPerKey", "10", rRocks),
	irr("dbStorage_rocksDB_numLevels", "-1", rRocks),
	irr("dbStorage_rocksDB_numFilesInLevel0", "4", rRocks),
	irr("dbStorage_rocksDB_maxSizeInLevel1MB", "256", rRocks),
	irr("dbStorage_rocksDB_checksum_type", "kxxHash", rRocks),
	irr("dbStorage_rocksDB_format_version", "5", rRocks),
	irr("dbStorage_rocksDB_logPath", "", rRocks),
	irr("dbStorage_directIOEntryLoggerMaxFdCacheTimeSeconds", "300", rRocks),
	irr("dbStorage_directIOEntryLoggerReadBufferSizeMB", "8", rRocks),
	irr("dbStorage_directIOEntryLoggerTotalReadBufferSizeMB", "", rRocks),
	irr("dbStorage_directIOEntryLoggerTotalWriteBufferSizeMB", "", rRocks),
	irr("defaultRocksdbConf", "conf/default_rocksdb.conf", rRocks),
	irr("entryLocationRocksdbConf", "conf/entry_location_rocksdb.conf", rRocks),
	irr("ledgerMetadataRocksdbConf", "conf/ledger_metadata_rocksdb.conf", rRocks),
	irr("entryLocationCompactionInterval", "-1", rRocks),
	irr("maxOperationNumbersInSingleRocksdbWriteBatch", "100000", rRocks),

	// Read-only mode and disk utilization.
	impl("readOnlyModeEnabled", "true", rSame),
	impl("readOnlyModeOnStartup", "false", rFolio+": start read-only; the admin can make the bookie writable (forceReadOnlyBookie cannot be undone)"),
	impl("forceReadOnlyBookie", "false", "the bookie is read-only for the life of the process; the admin cannot make it writable (needs readOnlyModeEnabled=true)"),
	impl("readOnlyModeOnAnyDiskFullEnabled", "false", "as BookKeeper: a full ledger directory takes no new entry logs (its ledgers' new entry logs go to the others) and the bookie turns read-only when all are full; with true, as soon as any is. A full journal directory makes it read-only either way"),
	refuse("persistBookieStatusEnabled", "false", whenTrue, "persisting the read-only state across restarts is not implemented: a bookie made read-only by an operator would come back writable"),
	impl("diskUsageThreshold", "0.95", rSame+": per ledger and journal directory (the used fraction of its volume)"),
	impl("diskUsageLwmThreshold", "0.95", rSame+": the threshold when not set; a full directory takes entry logs again below it"),
	irr("diskUsageWarnThreshold", "0.90", "Java logs and forces GC above it: Folio exports the disk usage as metrics"),
	impl("diskCheckInterval", "10000", rSame),

	// Statistics.
	impl("statsProviderClass", "", rSame+": with httpServerEnabled=false, BookKeeper's Prometheus provider (org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider) opens a /metrics listener on prometheusStatsHttpAddress:prometheusStatsHttpPort; with the admin HTTP server on, /metrics is served there and no other listener opens"),
	impl("prometheusStatsHttpAddress", "0.0.0.0", rSame+": the /metrics listener's address (see statsProviderClass)"),
	impl("prometheusStatsHttpPort", "8000", rSame+": the /metrics listener's port (see statsProviderClass)"),
	irr("enableStatistics", "true", "Folio always keeps its metrics"),
	impl("prometheusStatsLatencyRolloverSeconds", "60", rSame+": latency quantiles describe the last complete window of this many seconds"),
	irr("exposeDefaultJVMMetrics", "true", rJVM),
	irr("enableTaskExecutionStats", "false", rThreads),
	irr("sanityCheckMetricsEnabled", "false", "Java metrics self-check"),
	irr("limitStatsLogging", "true", "Java stats logging"),
	irr("codahaleStatsPrefix", "", rCodahale),
	irr("codahaleStatsOutputFrequencySeconds", "60", rCodahale),
	irr("codahaleStatsGraphiteEndpoint", "", rCodahale),
	irr("codahaleStatsCSVEndpoint", "", rCodahale),
	irr("codahaleStatsSlf4jEndpoint", "", rCodahale),
	irr("codahaleStatsJmxEndpoint", "", rCodahale),

	// AutoRecovery.
	impl("autoRecoveryDaemonEnabled", "false", rSame),
	impl("lostBookieRecoveryDelay", "0", rSame+" (seconds)"),
	impl("auditorPeriodicBookieCheckInterval", "86400", rSame+" (seconds; 0 off)"),
	impl("auditorPeriodicCheckInterval", "604800", rSame+" (seconds; 0 off)"),
	impl("auditorLedgerVerificationPercentage", "0", rSame),
	impl("auditorPeriodicPlacementPolicyCheckInterval", "0", rSame+" (seconds; 0 off); the check judges by distinct bookies inside the bookie"),
	refuse("auditorReplicasCheckInterval", "0", whenPositive,
		"the auditor's replicas check (comparing each bookie's ledger list with the metadata) is not implemented: refused when > 0 (enabled), accepted at 0 (off, BookKeeper's default)"),
	refuse("repairedPlacementPolicyNotAdheringBookieEnabled", "false", whenTrue,
		"placement repair does not run inside the bookie: run `folio autorecovery --repair-placement` instead"),
	warn("underreplicatedLedgerRecoveryGracePeriod", "0", whenPositive, "the auditor does not report ledgers under-replicated for longer than a grace period"),
	irr("auditorMaxNumberOfConcurrentOpenLedgerOperations", "500", "Folio's auditor bounds its ledger checks itself"),
	irr("auditorAcquireConcurrentOpenLedgerOperationsTimeOutMSec", "120000", "Folio's auditor bounds its ledger checks itself"),
	irr("inFlightReadEntryNumInLedgerChecker", "-1", "Folio's ledger checker bounds its reads itself"),
	irr("storeSystemTimeAsLedgerUnderreplicatedMarkTime", "true", "Folio's under-replication marks carry no time"),
	impl("openLedgerRereplicationGracePeriod", "30000", rSame+" (ms)"),
	impl("rwRereplicateBackoffMs", "5000", rSame+" (ms)"),
	impl("replicationRateByBytes", "-1", rSame+" (bytes per second; ≤ 0 unlimited)"),
	irr("rereplicationEntryBatchSize", "10", "Folio's worker copies fragments with its own batching"),
	irr("lockReleaseOfFailedLedgerGracePeriod", "300000", "Folio's worker backs off by rwRereplicateBackoffMs"),
	impl("autoRecoveryPollInterval", "1000", rFolio+": ms an idle replication worker waits (Java blocks on a ZooKeeper watch)"),
	refuse("localScrubInterval", "0", whenPositive,
		"the local scrubber (re-reading every entry of the bookie's storage periodically) is not implemented: refused when > 0 (enabled), accepted at 0 (off, BookKeeper's default)"),
	irr("localScrubRateLimit", "60", "only with localScrubInterval, which is refused when enabled"),

	// Placement settings (the bookie's own client, used by AutoRecovery).
	impl("ensemblePlacementPolicy", "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy",
		rPlacement+": BookKeeper's DefaultEnsemblePlacementPolicy, RackawareEnsemblePlacementPolicy, RegionAwareEnsemblePlacementPolicy or ZoneawareEnsemblePlacementPolicy (full class names); any other class (a custom policy) stops the start. Without networkTopologyScriptFileName every bookie is in the default location, so the default rack-aware policy places at random, as BookKeeper's does"),
	warn("reppDnsResolverClass", "org.apache.bookkeeper.net.ScriptBasedMapping", whenNotIn("org.apache.bookkeeper.net.ScriptBasedMapping"),
		"the script resolver (ScriptBasedMapping, the default) is the only one: with another class (Pulsar's ZkBookieRackAffinityMapping included) AutoRecovery does not ask it for locations; it still runs networkTopologyScriptFileName when set, and places other bookies in the policy's default location"),
	impl("networkTopologyScriptFileName", "", rPlacement+": run with bookie hosts as arguments, one location per argument (BookKeeper's ScriptBasedMapping); answers are cached, a failed run places the bookies in the default location with a warning and is retried at the next placement; a missing or non-executable file stops the start"),
	impl("networkTopologyScriptNumberArgs", "100", rPlacement+": the most bookie hosts per script run"),
	impl("minNumRacksPerWriteQuorum", "2", rPlacement+": the racks every write set of a replaced fragment spans (capped at Qw; ≤ 0 asks for none, as in Java)"),
	impl("enforceMinNumRacksPerWriteQuorum", "false", rPlacement+": a replacement that cannot keep minNumRacksPerWriteQuorum racks fails (the ledger stays under-replicated) instead of falling back, and bookies of the default rack are never chosen"),
	impl("enforceMinNumFaultDomainsForWrite", "false", "the rewrites of AutoRecovery's fencing recovery of an open ledger are acknowledged only by bookies in enough fault domains, as a client's appends (fragment copies go to one bookie: nothing to count); a rewrite its whole write set stored counts as written even short of the rule (Java hangs there); accepted without a location source, as in Java (every bookie is then in the default rack and each rewrite waits for its whole write set)"),
	impl("minNumZonesPerWriteQuorum", "2", rPlacement+" (zone-aware)"),
	impl("desiredNumZonesPerWriteQuorum", "3", rPlacement+" (zone-aware)"),
	impl("enforceStrictZoneawarePlacement", "true", rPlacement+" (zone-aware)"),
	impl("reppRegionsToWrite", "", rPlacement+" (region-aware): regions separated by \";\""),
	impl("reppMinimumRegionsForDurability", "2", rPlacement+" (region-aware)"),
	impl("reppEnableDurabilityEnforcementInReplace", "true", rPlacement+" (region-aware)"),
	impl("reppEnableValidation", "true", rPlacement+" (region-aware)"),
	irr("ignoreLocalNodeInPlacementPolicy", "false", "AutoRecovery never prefers its own bookie"),

	// Stream storage (table service) and DistributedLog, Java only.
	irr("storageserver.grpc.port", "4181", rStream),
	irr("dlog.bkcEnsembleSize", "3", rStream),
	irr("dlog.bkcWriteQuorumSize", "2", rStream),
	irr("dlog.bkcAckQuorumSize", "2", rStream),
	irr("storage.range.store.dirs", "data/bookkeeper/ranges", rStream),
	irr("storage.serve.readonly.tables", "false", rStream),
	irr("storage.cluster.controller.schedule.interval.ms", "30000", rStream),
}

var (
	keyIndex      map[string]*KeyInfo
	keyIndexLower map[string]*KeyInfo
)

func init() {
	keyIndex = make(map[string]*KeyInfo, len(bkKeys))
	keyIndexLower = make(map[string]*KeyInfo, len(bkKeys))
	for i := range bkKeys {
		k := &bkKeys[i]
		keyIndex[k.Name] = k
		keyIndexLower[strings.ToLower(k.Name)] = k
	}
}

// LookupKey returns the table entry of name (case-sensitive, as Java's
// keys are).
func LookupKey(name string) (KeyInfo, bool) {
	k, ok := keyIndex[name]
	if !ok {
		return KeyInfo{}, false
	}
	return *k, true
}

// Keys returns the key table sorted by name.
func Keys() []KeyInfo {
	out := slices.Clone(bkKeys)
	slices.SortFunc(out, func(a, b KeyInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// isSecret reports whether the value of key must not be printed: a
// table key marked so, or any key whose name speaks of a password or
// secret but not of a file holding one.
func isSecret(key string) bool {
	if k, ok := keyIndex[key]; ok && k.Secret {
		return true
	}
	l := strings.ToLower(key)
	if strings.HasSuffix(l, "path") || strings.HasSuffix(l, "file") {
		return false
	}
	return strings.Contains(l, "password") || strings.Contains(l, "passwd") || strings.Contains(l, "secret") || strings.Contains(l, "token")
}

// NearestKey returns the known key closest to name: the key equal to it
// ignoring case, else the one at the smallest edit distance (ignoring
// case; ties: the first in name order).
func NearestKey(name string) string {
	l := strings.ToLower(name)
	if k, ok := keyIndexLower[l]; ok {
		return k.Name
	}
	best, bestD := "", -1
	for _, k := range Keys() {
		d := editDistance(l, strings.ToLower(k.Name))
		if bestD < 0 || d < bestD {
			best, bestD = k.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
