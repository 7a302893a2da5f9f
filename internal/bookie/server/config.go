package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/foliodb/folio/internal/metadata"
)

// Defaults of a bookie (BookKeeper's ServerConfiguration defaults unless
// stated).
const (
	DefaultBookiePort     = 3181
	DefaultHTTPServerPort = 8080
	DefaultMetadataURI    = "etcd://127.0.0.1:2379/ledgers"
	DefaultGCWaitTime     = 10 * time.Minute
	DefaultDiskThreshold  = 0.95
	DefaultDiskCheck      = 10 * time.Second
	// DefaultShutdownTimeout bounds a graceful stop (Folio's own knob).
	DefaultShutdownTimeout = 8 * time.Second
	// DefaultRegistrationRetry is the pause between failed attempts to
	// register or to open a metadata session (Folio's own knob).
	DefaultRegistrationRetry = time.Second

	// Defaults of AutoRecoveryConfig (BookKeeper's).
	DefaultAuditorBookieCheckInterval         = 86400 * time.Second
	DefaultAuditorLedgerCheckInterval         = 604800 * time.Second
	DefaultOpenLedgerRereplicationGracePeriod = 30 * time.Second
	DefaultRereplicateBackoff                 = 5 * time.Second
	// DefaultAutoRecoveryPollInterval is the pause of an idle replication
	// worker (Folio's own knob: Java's worker blocks on a ZooKeeper watch).
	DefaultAutoRecoveryPollInterval = time.Second
)

// Config is one bookie's configuration. LoadConfig builds it from a
// bk_server.conf-style file; the zero value is not useful, start from
// DefaultConfig.
type Config struct {
	// BookiePort is the TCP port of the bookie protocol (bookiePort). 0 picks
	// a free port (tests only: the bookie id contains the port, so a bookie
	// must keep its port across restarts).
	BookiePort int
	// ListenHost is the address the listener binds (Folio's listenHost;
	// default "" = every interface, as Java binds).
	ListenHost string
	// AdvertisedAddress is the host part of the bookie id (advertisedAddress).
	AdvertisedAddress string
	// ListeningInterface names the network interface whose first IPv4
	// address is the bookie id's host when AdvertisedAddress is empty
	// (listeningInterface; default: the first non-loopback interface).
	ListeningInterface string
	// UseHostNameAsBookieID uses the host name instead of an IP address
	// (useHostNameAsBookieID).
	UseHostNameAsBookieID bool
	// AllowLoopback permits a loopback address as the bookie id's host
	// (allowLoopback; for tests and single-machine clusters).
	AllowLoopback bool

	// JournalDirs, LedgerDirs and IndexDirs are the storage directories
	// (journalDirectories or journalDirectory, ledgerDirectories,
	// indexDirectories). Data lives in <dir>/current, next to the cookie's
	// VERSION file, as in Java. IndexDirs empty means "with the ledgers".
	JournalDirs []string
	LedgerDirs  []string
	IndexDirs   []string

	// MetadataServiceURI names the metadata store (metadataServiceUri).
	// When the configuration does not set it but sets zkServers,
	// LoadConfig builds it from the legacy ZooKeeper keys as BookKeeper's
	// getMetadataServiceUri does:
	// zk+<type>://<zkServers, ',' → ';'><zkLedgersRootPath>, <type> from
	// ledgerManagerFactoryClass ("null": the cluster's LAYOUT decides).
	MetadataServiceURI string
	// ZKServers and ZKLedgersRootPath are BookKeeper's legacy ZooKeeper
	// keys (zkServers, zkLedgersRootPath, default /ledgers), as Pulsar's
	// bookkeeper.conf sets them.
	ZKServers         string
	ZKLedgersRootPath string
	// ZKEnableSecurity asks for ZooKeeper ACLs (zkEnableSecurity): Folio
	// does not support them, and refuses to start rather than create open
	// znodes where protected ones were asked for.
	ZKEnableSecurity bool
	// SessionTTL is the registration lease TTL (zkTimeout, in ms in the
	// file; default 10 s).
	SessionTTL time.Duration
	// RegistrationRetry is the pause between failed registration attempts.
	RegistrationRetry time.Duration

	// HTTPServerEnabled starts the admin HTTP server (httpServerEnabled;
	// default false, as Java's). HTTPServerHost and HTTPServerPort are
	// where it listens (httpServerHost, httpServerPort).
	HTTPServerEnabled bool
	HTTPServerHost    string
	HTTPServerPort    int
	// Stats is where metrics are served without the admin HTTP server
	// (statsconfig.go).
	Stats StatsConfig

	// MetadataSecurity and HTTPSecurity are the metadata store
	// connection's and the admin HTTP server's TLS and authentication
	// (secconfig.go).
	MetadataSecurity MetadataSecurityConfig
	HTTPSecurity     HTTPSecurityConfig

	// GCWaitTime is the period of the garbage collection of deleted ledgers
	// (gcWaitTime, ms in the file). The first pass runs one period after
	// start, never at boot.
	GCWaitTime time.Duration

	// DiskUsageThreshold: above this fraction of used disk the bookie turns
	// read-only (diskUsageThreshold). DiskUsageLwmThreshold: below it the
	// bookie turns writable again (diskUsageLwmThreshold; default the
	// threshold, as in Java). DiskCheckInterval is how often usage is read
	// (diskCheckInterval, ms).
	DiskUsageThreshold    float64
	DiskUsageLwmThreshold float64
	DiskCheckInterval     time.Duration
	// ReadOnlyModeEnabled: on a full disk or a storage failure the bookie
	// turns read-only (readOnlyModeEnabled, default true); when false it
	// shuts down instead, as Java does.
	ReadOnlyModeEnabled bool
	// ForceReadOnly starts the bookie read-only (readOnlyModeOnStartup /
	// `bookie -readOnly`).
	ForceReadOnly bool

	// ShutdownTimeout bounds a graceful stop: in-flight requests get this
	// long before their connections are closed (Folio's shutdownTimeout, ms).
	ShutdownTimeout time.Duration

	// AutoRecovery is the AutoRecovery run inside the bookie's process
	// (autoRecoveryDaemonEnabled and the auditor and replication keys).
	AutoRecovery AutoRecoveryConfig

	// Security is TLS and authorisation of the bookie's connections
	// (tlsconfig.go).
	Security SecurityConfig

	// Props holds every property as read (file, environment, flags), for
	// the storage engine's own keys.
	Props map[string]string
}

// AutoRecoveryConfig configures the AutoRecovery a bookie runs in its own
// process (BookKeeper's autoRecoveryDaemonEnabled): an auditor candidate
// and a replication worker under the bookie's id, with sessions of
// zkTimeout (Config.SessionTTL), as Java's does. The command that runs the
// bookie starts it (this package does not import AutoRecovery); the same
// keys are read, as in Java, whether or not it is enabled.
type AutoRecoveryConfig struct {
	// Enabled runs AutoRecovery inside the bookie
	// (autoRecoveryDaemonEnabled, default false; `folio bookie
	// --autorecovery`).
	Enabled bool
	// LostBookieRecoveryDelay is how long the auditor waits after one
	// bookie disappears before marking its ledgers, while no delay is
	// stored in the metadata (lostBookieRecoveryDelay, seconds, default 0).
	LostBookieRecoveryDelay time.Duration
	// BookieCheckInterval is the period of the auditor's full bookie check
	// (auditorPeriodicBookieCheckInterval, seconds, default 86400); 0
	// disables it.
	BookieCheckInterval time.Duration
	// LedgerCheckInterval is the period of the auditor's check of every
	// ledger's entries on their bookies (auditorPeriodicCheckInterval,
	// seconds, default 604800); 0 disables it.
	LedgerCheckInterval time.Duration
	// LedgerVerificationPercentage is the share of each fragment's entries
	// the ledger check reads (auditorLedgerVerificationPercentage, percent
	// 0-100, default 0: only the first and last).
	LedgerVerificationPercentage int
	// PlacementPolicyCheckInterval is the period of the auditor's placement
	// policy check of closed ledgers
	// (auditorPeriodicPlacementPolicyCheckInterval, seconds, default 0:
	// disabled).
	PlacementPolicyCheckInterval time.Duration
	// OpenLedgerRereplicationGracePeriod is how long an OPEN ledger that
	// lost a bookie of its last ensemble is left to its writer before the
	// worker fences and closes it (openLedgerRereplicationGracePeriod,
	// milliseconds, default 30000).
	OpenLedgerRereplicationGracePeriod time.Duration
	// RereplicateBackoff is how long the worker leaves a ledger whose
	// repair failed (rwRereplicateBackoffMs, milliseconds, default 5000).
	RereplicateBackoff time.Duration
	// RateLimitBytesPerSecond bounds the bytes the worker copies per second
	// (replicationRateByBytes, default -1); ≤ 0 means unlimited.
	RateLimitBytesPerSecond int
	// PollInterval is the pause of an idle worker (Folio's
	// autoRecoveryPollInterval, milliseconds, default 1000).
	PollInterval time.Duration
}

// DefaultConfig returns a configuration with every default applied.
func DefaultConfig() Config {
	return Config{
		BookiePort:            DefaultBookiePort,
		JournalDirs:           []string{"/tmp/bk-txn"},
		LedgerDirs:            []string{"/tmp/bk-data"},
		MetadataServiceURI:    DefaultMetadataURI,
		SessionTTL:            metadata.DefaultSessionTTL,
		RegistrationRetry:     DefaultRegistrationRetry,
		HTTPServerPort:        DefaultHTTPServerPort,
		Stats:                 StatsConfig{PrometheusAddress: DefaultPrometheusStatsAddress, PrometheusPort: DefaultPrometheusStatsPort},
		GCWaitTime:            DefaultGCWaitTime,
		DiskUsageThreshold:    DefaultDiskThreshold,
		DiskUsageLwmThreshold: DefaultDiskThreshold,
		DiskCheckInterval:     DefaultDiskCheck,
		ReadOnlyModeEnabled:   true,
		ShutdownTimeout:       DefaultShutdownTimeout,
		AutoRecovery: AutoRecoveryConfig{
			BookieCheckInterval:                DefaultAuditorBookieCheckInterval,
			LedgerCheckInterval:                DefaultAuditorLedgerCheckInterval,
			OpenLedgerRereplicationGracePeriod: DefaultOpenLedgerRereplicationGracePeriod,
			RereplicateBackoff:                 DefaultRereplicateBackoff,
			RateLimitBytesPerSecond:            -1,
			PollInterval:                       DefaultAutoRecoveryPollInterval,
		},
		Props: map[string]string{},
	}
}

// configKey binds a property name to a Config field.
type configKey struct {
	name string
	set  func(c *Config, v string) error
}

func intKey(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*f(c) = n
		return nil
	}
}

func boolKey(f func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a boolean: %q", v)
		}
		*f(c) = b
		return nil
	}
}

func floatKey(f func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || x <= 0 || x > 1 {
			return fmt.Errorf("want a fraction in (0, 1]: %q", v)
		}
		*f(c) = x
		return nil
	}
}

// msKey reads a duration in milliseconds, as BookKeeper writes them.
func msKey(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want milliseconds: %q", v)
		}
		*f(c) = time.Duration(n) * time.Millisecond
		return nil
	}
}

// secondsKey reads a duration in whole seconds, as BookKeeper writes the
// auditor's intervals and lostBookieRecoveryDelay.
func secondsKey(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > int64(math.MaxInt64/time.Second) {
			return fmt.Errorf("want seconds: %q", v)
		}
		*f(c) = time.Duration(n) * time.Second
		return nil
	}
}

// percentKey reads an integer percentage, 0 to 100.
func percentKey(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 100 {
			return fmt.Errorf("want a percentage from 0 to 100: %q", v)
		}
		*f(c) = n
		return nil
	}
}

func stringKey(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = strings.TrimSpace(v); return nil }
}

// listKey reads a comma-separated list (Commons Configuration's list
// delimiter, which BookKeeper relies on for directories).
func listKey(f func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*f(c) = out
		return nil
	}
}

// configKeys are the keys Folio uses, BookKeeper's names first.
var configKeys = []configKey{
	{"bookiePort", intKey(func(c *Config) *int { return &c.BookiePort })},
	{"listenHost", stringKey(func(c *Config) *string { return &c.ListenHost })},
	{"advertisedAddress", stringKey(func(c *Config) *string { return &c.AdvertisedAddress })},
	{"listeningInterface", stringKey(func(c *Config) *string { return &c.ListeningInterface })},
	{"useHostNameAsBookieID", boolKey(func(c *Config) *bool { return &c.UseHostNameAsBookieID })},
	{"allowLoopback", boolKey(func(c *Config) *bool { return &c.AllowLoopback })},
	{"journalDirectory", listKey(func(c *Config) *[]string { return &c.JournalDirs })},
	{"journalDirectories", listKey(func(c *Config) *[]string { return &c.JournalDirs })},
	{"ledgerDirectories", listKey(func(c *Config) *[]string { return &c.LedgerDirs })},
	{"indexDirectories", listKey(func(c *Config) *[]string { return &c.IndexDirs })},
	{"metadataServiceUri", stringKey(func(c *Config) *string { return &c.MetadataServiceURI })},
	{"zkTimeout", msKey(func(c *Config) *time.Duration { return &c.SessionTTL })},
	{"zkServers", stringKey(func(c *Config) *string { return &c.ZKServers })},
	{"zkLedgersRootPath", stringKey(func(c *Config) *string { return &c.ZKLedgersRootPath })},
	{"zkEnableSecurity", boolKey(func(c *Config) *bool { return &c.ZKEnableSecurity })},
	{"registrationRetryInterval", msKey(func(c *Config) *time.Duration { return &c.RegistrationRetry })},
	{"httpServerEnabled", boolKey(func(c *Config) *bool { return &c.HTTPServerEnabled })},
	{"httpServerHost", stringKey(func(c *Config) *string { return &c.HTTPServerHost })},
	{"httpServerPort", intKey(func(c *Config) *int { return &c.HTTPServerPort })},
	{"gcWaitTime", msKey(func(c *Config) *time.Duration { return &c.GCWaitTime })},
	{"diskUsageThreshold", floatKey(func(c *Config) *float64 { return &c.DiskUsageThreshold })},
	{"diskUsageLwmThreshold", floatKey(func(c *Config) *float64 { return &c.DiskUsageLwmThreshold })},
	{"diskCheckInterval", msKey(func(c *Config) *time.Duration { return &c.DiskCheckInterval })},
	{"readOnlyModeEnabled", boolKey(func(c *Config) *bool { return &c.ReadOnlyModeEnabled })},
	{"readOnlyModeOnStartup", boolKey(func(c *Config) *bool { return &c.ForceReadOnly })},
	{"shutdownTimeout", msKey(func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"autoRecoveryDaemonEnabled", boolKey(func(c *Config) *bool { return &c.AutoRecovery.Enabled })},
	{"lostBookieRecoveryDelay", secondsKey(func(c *Config) *time.Duration { return &c.AutoRecovery.LostBookieRecoveryDelay })},
	{"auditorPeriodicBookieCheckInterval", secondsKey(func(c *Config) *time.Duration { return &c.AutoRecovery.BookieCheckInterval })},
	{"auditorPeriodicCheckInterval", secondsKey(func(c *Config) *time.Duration { return &c.AutoRecovery.LedgerCheckInterval })},
	{"auditorLedgerVerificationPercentage", percentKey(func(c *Config) *int { return &c.AutoRecovery.LedgerVerificationPercentage })},
	{"auditorPeriodicPlacementPolicyCheckInterval", secondsKey(func(c *Config) *time.Duration { return &c.AutoRecovery.PlacementPolicyCheckInterval })},
	{"openLedgerRereplicationGracePeriod", msKey(func(c *Config) *time.Duration { return &c.AutoRecovery.OpenLedgerRereplicationGracePeriod })},
	{"rwRereplicateBackoffMs", msKey(func(c *Config) *time.Duration { return &c.AutoRecovery.RereplicateBackoff })},
	{"replicationRateByBytes", intKey(func(c *Config) *int { return &c.AutoRecovery.RateLimitBytesPerSecond })},
	{"autoRecoveryPollInterval", msKey(func(c *Config) *time.Duration { return &c.AutoRecovery.PollInterval })},
	// wip-http: where metrics are served (statsconfig.go).
	{"statsProviderClass", stringKey(func(c *Config) *string { return &c.Stats.ProviderClass })},
	{"prometheusStatsHttpAddress", stringKey(func(c *Config) *string { return &c.Stats.PrometheusAddress })},
	{"prometheusStatsHttpPort", intKey(func(c *Config) *int { return &c.Stats.PrometheusPort })},
}

// ignoredKeys are BookKeeper keys that Folio reads without complaint but
// does not act on (its storage has no such knob, or the default is the only
// behaviour). Anything neither here nor in configKeys draws a warning.
var ignoredKeys = []string{
	"ledgerStorageClass", "entryLogFilePreallocationEnabled", "logSizeLimit", "journalFormatVersionToWrite",
	"fileInfoFormatVersionToWrite", "journalMaxSizeMB", "journalMaxBackups", "journalPreAllocSizeMB",
	"journalWriteBufferSizeKB", "journalRemoveFromPageCache", "journalAdaptiveGroupWrites",
	"journalMaxGroupWaitMSec", "journalBufferedWritesThreshold", "numAddWorkerThreads",
	"numReadWorkerThreads", "numHighPriorityWorkerThreads", "maxPendingReadRequestsPerThread",
	"maxPendingAddRequestsPerThread",
	"httpServerClass", "extraServerComponents", "flushInterval", "minorCompactionThreshold",
	"minorCompactionInterval", "majorCompactionThreshold", "majorCompactionInterval",
	"compactionMaxOutstandingRequests", "compactionRate", "isThrottleByBytes", "compactionRateByEntries",
	"compactionRateByBytes", "openFileLimit", "pageSize", "pageLimit", "dbStorage_writeCacheMaxSizeMb",
	"dbStorage_readAheadCacheMaxSizeMb", "dbStorage_rocksDB_blockCacheSize",
	"enableStatistics", "rereplicationEntryBatchSize",
	"lockReleaseOfFailedLedgerGracePeriod", "bookieDeathWatchInterval", "serverTcpNoDelay",
	"serverSockKeepalive", "serverSockLinger", "byteBufAllocatorSizeMax", "nettyMaxFrameSizeBytes",
	"journalSyncData", "journalPageCacheFlushIntervalMSec", "skipListSizeLimit", "skipListArenaChunkSize",
	"entryLogSizeLimit", "verifyMetadataOnGC", "gcOverreplicatedLedgerWaitTime", "storageserver.grpc.port",
	"dlog.bkcEnsembleSize", "dlog.bkcWriteQuorumSize", "dlog.bkcAckQuorumSize", "storage.range.store.dirs",
	"storage.serve.readonly.tables", "storage.cluster.controller.schedule.interval.ms",
	"allowStorageExpansion", "bookieId", "ledgerManagerFactoryClass",
}

func findKey(name string) (configKey, bool) {
	for _, k := range configKeys {
		if k.name == name {
			return k, true
		}
	}
	return configKey{}, false
}

// EnvName is the environment variable that overrides key: FOLIO_ and the
// key in upper snake case (bookiePort → FOLIO_BOOKIE_PORT,
// metadataServiceUri → FOLIO_METADATA_SERVICE_URI, the shell's variable).
func EnvName(key string) string {
	var b strings.Builder
	b.WriteString("FOLIO_")
	prevLower := false
	for _, r := range key {
		switch {
		case r == '.' || r == '-':
			b.WriteByte('_')
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	return b.String()
}

// Set applies one property. Keys Folio uses are checked (a bad value is an
// error naming the key); BookKeeper keys Folio does not use are kept in
// Props silently; anything else is kept and logged as a warning, never an
// error, so a bk_server.conf from a Java bookie loads.
func (c *Config) Set(key, value string, log *slog.Logger) error {
	if c.Props == nil {
		c.Props = map[string]string{}
	}
	c.Props[key] = value
	if k, ok := findKey(key); ok {
		if err := k.set(c, value); err != nil {
			return fmt.Errorf("config key %s: %w", key, err)
		}
		return nil
	}
	if !slices.Contains(ignoredKeys, key) && log != nil {
		log.Warn("unknown configuration key; ignored", "key", key)
	}
	return nil
}

// Overrides are the sources applied on top of a config file, in order.
type Overrides struct {
	// Getenv looks up FOLIO_* variables (nil: none).
	Getenv func(string) string
	// Set are key=value pairs from the command line, applied last.
	Set []string
}

// LoadConfig returns DefaultConfig with the file at path (may be "")
// applied, then the environment (FOLIO_<KEY> for every key Folio uses),
// then the command-line pairs. log receives warnings about unknown keys.
func LoadConfig(path string, ov Overrides, log *slog.Logger) (Config, error) {
	c := DefaultConfig()
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return c, fmt.Errorf("reading the bookie configuration: %w", err)
		}
		defer f.Close()
		if err := c.Load(f, log); err != nil {
			return c, fmt.Errorf("configuration %s: %w", path, err)
		}
	}
	if ov.Getenv != nil {
		for _, k := range configKeys {
			if v := ov.Getenv(EnvName(k.name)); v != "" {
				if err := c.Set(k.name, v, log); err != nil {
					return c, fmt.Errorf("environment %s: %w", EnvName(k.name), err)
				}
			}
		}
	}
	for _, kv := range ov.Set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return c, fmt.Errorf("override %q: want key=value", kv)
		}
		if err := c.Set(strings.TrimSpace(k), v, log); err != nil {
			return c, err
		}
	}
	if err := c.resolveLegacyZooKeeper(); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Java's ledger manager factory classes and their URI types
// (AbstractConfiguration.getLedgerManagerLayoutStringFromFactoryClass).
var ledgerManagerTypes = map[string]string{
	"org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory":     "hierarchical",
	"org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory": "longhierarchical",
	"org.apache.bookkeeper.meta.FlatLedgerManagerFactory":             "flat",
	"org.apache.bookkeeper.meta.MSLedgerManagerFactory":               "ms",
}

// resolveLegacyZooKeeper applies BookKeeper's fallback from
// metadataServiceUri to zkServers + zkLedgersRootPath (+
// ledgerManagerFactoryClass), and refuses zkEnableSecurity.
func (c *Config) resolveLegacyZooKeeper() error {
	if c.ZKEnableSecurity {
		return errZKEnableSecurity
	}
	if _, set := c.Props["metadataServiceUri"]; set && strings.TrimSpace(c.MetadataServiceURI) != "" {
		return nil
	}
	servers := strings.TrimSpace(c.ZKServers)
	if servers == "" {
		return nil
	}
	root := strings.TrimSpace(c.ZKLedgersRootPath)
	if root == "" {
		root = "/ledgers"
	}
	typ := "null"
	if class := strings.TrimSpace(c.Props["ledgerManagerFactoryClass"]); class != "" {
		t, ok := ledgerManagerTypes[class]
		if !ok {
			return fmt.Errorf("ledgerManagerFactoryClass %s is not a ZooKeeper ledger manager Folio knows", class)
		}
		typ = t
	}
	c.MetadataServiceURI = fmt.Sprintf("zk+%s://%s%s", typ, strings.ReplaceAll(servers, ",", ";"), root)
	return nil
}

// Load applies a .properties stream to c.
func (c *Config) Load(r io.Reader, log *slog.Logger) error {
	props, err := ParseProperties(r)
	if err != nil {
		return err
	}
	for _, p := range props {
		if err := c.Set(p.Key, p.Value, log); err != nil {
			return fmt.Errorf("line %d: %w", p.Line, err)
		}
	}
	return nil
}

// Validate checks the combination of values.
func (c *Config) Validate() error {
	var errs []error
	if c.BookiePort < 0 || c.BookiePort > 65535 {
		errs = append(errs, fmt.Errorf("bookiePort %d is not a port", c.BookiePort))
	}
	if c.HTTPServerPort < 0 || c.HTTPServerPort > 65535 {
		errs = append(errs, fmt.Errorf("httpServerPort %d is not a port", c.HTTPServerPort))
	}
	if err := c.Stats.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.JournalDirs) == 0 {
		errs = append(errs, errors.New("journalDirectories is empty"))
	}
	if len(c.LedgerDirs) == 0 {
		errs = append(errs, errors.New("ledgerDirectories is empty"))
	}
	if c.DiskUsageLwmThreshold > c.DiskUsageThreshold {
		errs = append(errs, fmt.Errorf("diskUsageLwmThreshold %v is above diskUsageThreshold %v", c.DiskUsageLwmThreshold, c.DiskUsageThreshold))
	}
	if c.GCWaitTime <= 0 {
		errs = append(errs, errors.New("gcWaitTime must be positive"))
	}
	if c.DiskCheckInterval <= 0 {
		errs = append(errs, errors.New("diskCheckInterval must be positive"))
	}
	if c.SessionTTL <= 0 {
		errs = append(errs, errors.New("zkTimeout must be positive"))
	}
	if _, err := metadata.ParseURI(c.MetadataServiceURI); err != nil {
		errs = append(errs, err)
	}
	// Security settings: checked, then every file they name read, so that
	// the bookie never starts less protected than configured.
	if err := c.Security.validate(c.AutoRecovery.Enabled); err != nil {
		errs = append(errs, err)
	} else if err := c.Security.loadFiles(c.AutoRecovery.Enabled); err != nil {
		errs = append(errs, err)
	}
	if err := c.Security.CheckStartupUser(); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for _, d := range c.AllDirs() {
		if seen[d] {
			errs = append(errs, fmt.Errorf("directory %s is configured twice", d))
		}
		seen[d] = true
	}
	return errors.Join(errs...)
}

// AllDirs returns the journal, ledger and index directories, in that order:
// the directories that carry a cookie.
func (c *Config) AllDirs() []string {
	var out []string
	out = append(out, c.JournalDirs...)
	out = append(out, c.LedgerDirs...)
	out = append(out, c.IndexDirs...)
	return out
}

// BookieHost returns the host part of the bookie id: AdvertisedAddress, else
// the host name (UseHostNameAsBookieID), else the first IPv4 address of
// ListeningInterface or of the first up, non-loopback interface. A loopback
// address is refused unless AllowLoopback (Java's "Trying to listen on
// loopback address"); with AllowLoopback and no other address, 127.0.0.1.
func (c *Config) BookieHost() (string, error) {
	host := c.AdvertisedAddress
	if host == "" && c.UseHostNameAsBookieID {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("bookie id: host name: %w", err)
		}
		host = h
	}
	if host == "" {
		ip, err := firstIPv4(c.ListeningInterface, c.AllowLoopback)
		if err != nil {
			return "", err
		}
		host = ip.String()
	}
	if !c.AllowLoopback {
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return "", fmt.Errorf("bookie id: %s is a loopback address; set allowLoopback=true (single-machine clusters and tests) or advertisedAddress", host)
		}
		if host == "localhost" {
			return "", errors.New("bookie id: localhost is a loopback address; set allowLoopback=true or advertisedAddress")
		}
	}
	return host, nil
}

func firstIPv4(iface string, allowLoopback bool) (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("bookie id: list network interfaces: %w", err)
	}
	for _, in := range ifaces {
		if iface != "" && in.Name != iface {
			continue
		}
		if in.Flags&net.FlagUp == 0 || (iface == "" && in.Flags&net.FlagLoopback != 0) {
			continue
		}
		addrs, err := in.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.To4(), nil
			}
		}
	}
	if iface != "" {
		return nil, fmt.Errorf("bookie id: network interface %q has no IPv4 address", iface)
	}
	if allowLoopback {
		return net.IPv4(127, 0, 0, 1).To4(), nil
	}
	return nil, errors.New("bookie id: no non-loopback IPv4 address found; set advertisedAddress (or allowLoopback=true)")
}

// BookieID is host:port for the given (bound) port.
func (c *Config) BookieID(port int) (metadata.BookieID, error) {
	host, err := c.BookieHost()
	if err != nil {
		return "", err
	}
	id := metadata.BookieID(net.JoinHostPort(host, strconv.Itoa(port)))
	if err := metadata.ValidateBookieID(id); err != nil {
		return "", err
	}
	return id, nil
}
