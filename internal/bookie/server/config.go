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
	"github.com/foliodb/folio/internal/opstats"
	"github.com/foliodb/folio/internal/wire"
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
	// Storage defaults (BookKeeper's logSizeLimit, journalMaxSizeMB,
	// journalMaxBackups and compaction keys).
	DefaultEntryLogSizeLimit        = 1 << 30
	MaxEntryLogSizeLimit            = 1 << 30
	DefaultJournalMaxSizeMB         = 2048
	DefaultJournalMaxBackups        = 5
	DefaultMinorCompactionThreshold = 0.2
	DefaultMinorCompactionInterval  = 3600 * time.Second
	DefaultMajorCompactionThreshold = 0.8
	DefaultMajorCompactionInterval  = 86400 * time.Second
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
	// CustomBookieID is the bookie's id when set (bookieId): any name
	// BookKeeper's BookieId accepts, not necessarily host:port. The bookie
	// registers and stamps its cookies under it, and publishes its address
	// (BookieAddress) in the registration's BookieServiceInfo, through which
	// clients resolve it. Empty: the id is the address.
	CustomBookieID string
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
	// ForceReadOnly starts the bookie read-only, as if an admin had asked
	// for it: `PUT .../state/readonly {"readOnly": false}` makes it writable
	// (Folio's readOnlyModeOnStartup; BookKeeper 4.17 has no such key).
	ForceReadOnly bool
	// ForceReadOnlyBookie runs the bookie read-only for the life of the
	// process (forceReadOnlyBookie, default false; `folio bookie
	// --readonly`, Java's `bookie -readOnly`): registered under readonly,
	// refusing adds, serving reads; nothing makes it writable, as Java's
	// ReadOnlyBookie. It needs readOnlyModeEnabled=true (Java refuses the
	// same combination).
	ForceReadOnlyBookie bool
	// RejectBatchRead answers every v2 BATCH_READ_ENTRY with EBADREQ, as
	// a bookie without batch reads (rejectBatchRead, Folio's key, default
	// false): for testing clients' fallback to single reads.
	RejectBatchRead bool
	// ReadOnlyModeOnAnyDiskFull: the bookie turns read-only as soon as any
	// ledger directory is full (readOnlyModeOnAnyDiskFullEnabled, default
	// false: only when all are). Either way a full ledger directory takes
	// no new entry logs (its shards' logs spill into the others; see
	// StateManager), and a full journal directory makes the bookie
	// read-only.
	ReadOnlyModeOnAnyDiskFull bool
	// AllowStorageExpansion accepts a configuration that adds ledger or
	// index directories to a bookie with data (allowStorageExpansion,
	// default false), as BookKeeper does: the new directories must be empty
	// and, for ledger directories, appended after the existing ones; the
	// cookies are updated at start (ValidateCookies) and the storage takes
	// the new ledger directories as capacity for every shard's entry logs.
	// Without the key such a start is refused naming it.
	AllowStorageExpansion bool

	// Storage keys (BookKeeper's names and units).
	//
	// EntryLogSizeLimit seals an entry log at this many bytes (logSizeLimit,
	// default and maximum 1 GiB as BookKeeper's; Folio's older
	// entryLogSizeLimit is an alias).
	EntryLogSizeLimit int64
	// JournalMaxSizeMB rotates a journal file at this size (journalMaxSizeMB,
	// MB, default 2048). JournalMaxBackups is how many journal files no
	// longer needed by replay are kept after a checkpoint
	// (journalMaxBackups, default 5).
	JournalMaxSizeMB  int64
	JournalMaxBackups int
	// Compaction of entry logs (BookKeeper's GarbageCollectorThread): each
	// GC period (gcWaitTime) wholly dead entry logs are removed; a major
	// compaction (logs below MajorCompactionThreshold live) runs when
	// MajorCompactionInterval has passed since the last one, else a minor
	// one (MinorCompactionThreshold) when MinorCompactionInterval has. A
	// threshold or interval ≤ 0 disables that kind
	// (minorCompactionThreshold 0.2, minorCompactionInterval 3600 s,
	// majorCompactionThreshold 0.8, majorCompactionInterval 86400 s).
	MinorCompactionThreshold float64
	MinorCompactionInterval  time.Duration
	MajorCompactionThreshold float64
	MajorCompactionInterval  time.Duration
	// ForceGCAllowWhenNoSpace: while the disk is full, compaction runs
	// forced (every GC period, ignoring the intervals) to win space back;
	// when false it is suspended while full (isForceGCAllowWhenNoSpace,
	// default false).
	ForceGCAllowWhenNoSpace bool
	// ForceAllowCompaction lets a manual GC (`PUT /api/v1/bookie/gc`)
	// compact with a kind's threshold even when that kind is disabled by its
	// interval (forceAllowCompaction, default false).
	ForceAllowCompaction bool

	// ShutdownTimeout bounds a graceful stop: in-flight requests get this
	// long before their connections are closed (Folio's shutdownTimeout, ms).
	ShutdownTimeout time.Duration
	// MaxFrameSize is the largest request frame accepted and response
	// frame sent, length prefix included (nettyMaxFrameSizeBytes; default
	// 5242880, Pulsar's configurations set 5253120).
	MaxFrameSize int

	// AutoRecovery is the AutoRecovery run inside the bookie's process
	// (autoRecoveryDaemonEnabled and the auditor and replication keys).
	AutoRecovery AutoRecoveryConfig
	// Placement is the placement configuration AutoRecovery chooses
	// replacement bookies by (placement.go).
	Placement PlacementConfig

	// Security is TLS and authorisation of the bookie's connections
	// (tlsconfig.go).
	Security SecurityConfig

	// LogLevel and LogFormat configure the process's log (Folio's logLevel:
	// debug, info, warn or error; logFormat: text or json). The command
	// that runs the bookie applies them; --log-level and --log-format
	// override them.
	LogLevel  string
	LogFormat string

	// Props holds every property as read (file, environment, flags), for
	// the storage engine's own keys.
	Props map[string]string
	// Sources says where each property of Props was set: the file and
	// line ("/etc/bk_server.conf:12"), the environment variable
	// ("BK_gcWaitTime", "PULSAR_PREFIX_gcWaitTime", "FOLIO_GC_WAIT_TIME")
	// or "--set". A key absent from it has its default.
	Sources map[string]string
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
		MaxFrameSize:          wire.MaxFrameSize,
		Stats:                 StatsConfig{PrometheusAddress: DefaultPrometheusStatsAddress, PrometheusPort: DefaultPrometheusStatsPort, LatencyRollover: opstats.DefaultRollover},
		GCWaitTime:            DefaultGCWaitTime,
		DiskUsageThreshold:    DefaultDiskThreshold,
		DiskUsageLwmThreshold: DefaultDiskThreshold,
		DiskCheckInterval:     DefaultDiskCheck,
		ReadOnlyModeEnabled:   true,
		ShutdownTimeout:       DefaultShutdownTimeout,
		// Storage keys: BookKeeper's defaults.
		EntryLogSizeLimit:        DefaultEntryLogSizeLimit,
		JournalMaxSizeMB:         DefaultJournalMaxSizeMB,
		JournalMaxBackups:        DefaultJournalMaxBackups,
		MinorCompactionThreshold: DefaultMinorCompactionThreshold,
		MinorCompactionInterval:  DefaultMinorCompactionInterval,
		MajorCompactionThreshold: DefaultMajorCompactionThreshold,
		MajorCompactionInterval:  DefaultMajorCompactionInterval,
		AutoRecovery: AutoRecoveryConfig{
			BookieCheckInterval:                DefaultAuditorBookieCheckInterval,
			LedgerCheckInterval:                DefaultAuditorLedgerCheckInterval,
			OpenLedgerRereplicationGracePeriod: DefaultOpenLedgerRereplicationGracePeriod,
			RereplicateBackoff:                 DefaultRereplicateBackoff,
			RateLimitBytesPerSecond:            -1,
			PollInterval:                       DefaultAutoRecoveryPollInterval,
		},
		Placement: defaultPlacement(),
		LogLevel:  "info",
		LogFormat: "text",
		Props:     map[string]string{},
		Sources:   map[string]string{},
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

// logSizeKey reads logSizeLimit (and Folio's alias entryLogSizeLimit):
// bytes, 1 to 1 GiB (BookKeeper's range; 0 would seal a log per entry).
func logSizeKey(c *Config, v string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 || n > MaxEntryLogSizeLimit {
		return fmt.Errorf("want bytes from 1 to %d: %q", MaxEntryLogSizeLimit, v)
	}
	c.EntryLogSizeLimit = n
	return nil
}

func positiveInt64Key(f func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive integer: %q", v)
		}
		*f(c) = n
		return nil
	}
}

func nonNegativeIntKey(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer: %q", v)
		}
		*f(c) = n
		return nil
	}
}

// thresholdKey reads a compaction threshold: a fraction up to 1; 0 or
// less disables that compaction (BookKeeper refuses above 1).
func thresholdKey(f func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(x) || x > 1 {
			return fmt.Errorf("want a fraction up to 1 (0 or less disables): %q", v)
		}
		*f(c) = x
		return nil
	}
}

// signedSecondsKey reads a compaction interval in seconds; 0 or less
// disables that compaction, as in BookKeeper.
func signedSecondsKey(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n > int64(math.MaxInt64/time.Second) || n < -int64(math.MaxInt64/time.Second) {
			return fmt.Errorf("want seconds: %q", v)
		}
		*f(c) = time.Duration(n) * time.Second
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
	// Placement (AutoRecovery's replacements; placement.go).
	{"ensemblePlacementPolicy", stringKey(func(c *Config) *string { return &c.Placement.Policy })},
	{"networkTopologyScriptFileName", stringKey(func(c *Config) *string { return &c.Placement.TopologyScript })},
	{"networkTopologyScriptNumberArgs", intKey(func(c *Config) *int { return &c.Placement.TopologyScriptNumberArgs })},
	{"minNumRacksPerWriteQuorum", intKey(func(c *Config) *int { return &c.Placement.MinNumRacksPerWriteQuorum })},
	{"enforceMinNumRacksPerWriteQuorum", boolKey(func(c *Config) *bool { return &c.Placement.EnforceMinNumRacksPerWriteQuorum })},
	{"enforceMinNumFaultDomainsForWrite", boolKey(func(c *Config) *bool { return &c.Placement.EnforceMinNumFaultDomainsForWrite })},
	{"minNumZonesPerWriteQuorum", intKey(func(c *Config) *int { return &c.Placement.MinNumZonesPerWriteQuorum })},
	{"desiredNumZonesPerWriteQuorum", intKey(func(c *Config) *int { return &c.Placement.DesiredNumZonesPerWriteQuorum })},
	{"enforceStrictZoneawarePlacement", boolKey(func(c *Config) *bool { return &c.Placement.EnforceStrictZoneawarePlacement })},
	{"reppRegionsToWrite", regionListKey},
	{"reppMinimumRegionsForDurability", intKey(func(c *Config) *int { return &c.Placement.MinRegionsForDurability })},
	{"reppEnableDurabilityEnforcementInReplace", boolKey(func(c *Config) *bool { return &c.Placement.EnableDurabilityEnforcementInReplace })},
	{"reppEnableValidation", boolKey(func(c *Config) *bool { return &c.Placement.EnableValidation })},
	// Logging.
	{"logLevel", oneOfKey(func(c *Config) *string { return &c.LogLevel }, "debug", "info", "warn", "error")},
	{"logFormat", oneOfKey(func(c *Config) *string { return &c.LogFormat }, "text", "json")},
	// Storage and bookie-state keys.
	{"forceReadOnlyBookie", boolKey(func(c *Config) *bool { return &c.ForceReadOnlyBookie })},
	{"rejectBatchRead", boolKey(func(c *Config) *bool { return &c.RejectBatchRead })},
	{"readOnlyModeOnAnyDiskFullEnabled", boolKey(func(c *Config) *bool { return &c.ReadOnlyModeOnAnyDiskFull })},
	{"allowStorageExpansion", boolKey(func(c *Config) *bool { return &c.AllowStorageExpansion })},
	{"logSizeLimit", logSizeKey},
	{"entryLogSizeLimit", logSizeKey},
	{"journalMaxSizeMB", positiveInt64Key(func(c *Config) *int64 { return &c.JournalMaxSizeMB })},
	{"journalMaxBackups", nonNegativeIntKey(func(c *Config) *int { return &c.JournalMaxBackups })},
	{"minorCompactionThreshold", thresholdKey(func(c *Config) *float64 { return &c.MinorCompactionThreshold })},
	{"minorCompactionInterval", signedSecondsKey(func(c *Config) *time.Duration { return &c.MinorCompactionInterval })},
	{"majorCompactionThreshold", thresholdKey(func(c *Config) *float64 { return &c.MajorCompactionThreshold })},
	{"majorCompactionInterval", signedSecondsKey(func(c *Config) *time.Duration { return &c.MajorCompactionInterval })},
	{"isForceGCAllowWhenNoSpace", boolKey(func(c *Config) *bool { return &c.ForceGCAllowWhenNoSpace })},
	{"forceAllowCompaction", boolKey(func(c *Config) *bool { return &c.ForceAllowCompaction })},
	// Frame size (Pulsar's configurations raise it).
	{"nettyMaxFrameSizeBytes", intKey(func(c *Config) *int { return &c.MaxFrameSize })},
	// Bookie identity.
	{"bookieId", stringKey(func(c *Config) *string { return &c.CustomBookieID })},
	// Where metrics are served (statsconfig.go).
	{"statsProviderClass", stringKey(func(c *Config) *string { return &c.Stats.ProviderClass })},
	{"prometheusStatsHttpAddress", stringKey(func(c *Config) *string { return &c.Stats.PrometheusAddress })},
	{"prometheusStatsHttpPort", intKey(func(c *Config) *int { return &c.Stats.PrometheusPort })},
	{"prometheusStatsLatencyRolloverSeconds", secondsKey(func(c *Config) *time.Duration { return &c.Stats.LatencyRollover })},
}

// propsKeys are implemented keys read from Config.Props where they are
// used (besides storageKeys).
var propsKeys = []string{"ledgerManagerFactoryClass"}

// oneOfKey reads one of a few words, case-insensitively.
func oneOfKey(f func(*Config) *string, words ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		w := strings.ToLower(strings.TrimSpace(v))
		if !slices.Contains(words, w) {
			return fmt.Errorf("want one of %s: %q", strings.Join(words, ", "), v)
		}
		*f(c) = w
		return nil
	}
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

// Set applies one property given on the command line (source "--set");
// see SetFrom.
func (c *Config) Set(key, value string, _ *slog.Logger) error {
	return c.SetFrom(key, value, "--set")
}

// SetFrom applies one property set at source (a file and line, an
// environment variable, "--set"). Keys Folio implements are checked (a bad
// value is an error naming the key); every other key is kept in Props for
// CheckKeys, which refuses, warns about or accepts it, so that a
// bk_server.conf from a Java bookie loads.
func (c *Config) SetFrom(key, value, source string) error {
	if c.Props == nil {
		c.Props = map[string]string{}
	}
	if c.Sources == nil {
		c.Sources = map[string]string{}
	}
	c.Props[key] = value
	c.Sources[key] = source
	if k, ok := findKey(key); ok {
		if err := k.set(c, value); err != nil {
			return fmt.Errorf("config key %s (%s): %w", key, source, err)
		}
	}
	if key == "journalDirectories" || key == "journalDirectory" {
		c.resolveJournalDirs()
	}
	if _, lwmSet := c.Props["diskUsageLwmThreshold"]; key == "diskUsageThreshold" && !lwmSet {
		// BookKeeper's default of the low water mark is the threshold.
		c.DiskUsageLwmThreshold = c.DiskUsageThreshold
	}
	return nil
}

// resolveJournalDirs applies BookKeeper's rule for the two journal keys
// (getJournalDirNames): journalDirectories when it lists a directory,
// whatever the order the keys were set in; else journalDirectory.
func (c *Config) resolveJournalDirs() {
	for _, k := range []string{"journalDirectories", "journalDirectory"} {
		v, ok := c.Props[k]
		if !ok {
			continue
		}
		var dirs []string
		_ = listKey(func(*Config) *[]string { return &dirs })(c, v)
		if len(dirs) > 0 || k == "journalDirectory" {
			c.JournalDirs = dirs
			return
		}
	}
}

// Overrides are the sources applied on top of a config file, in order:
// BK_<key>, PULSAR_PREFIX_<key> and FOLIO_<KEY> variables, then Set.
type Overrides struct {
	// Getenv looks up environment variables (nil: none).
	Getenv func(string) string
	// Environ lists the environment as KEY=value (os.Environ). With it,
	// every PULSAR_PREFIX_<key> variable applies, unknown keys included
	// (as Pulsar's apply-config-from-env.py adds them); without it only
	// the keys of the key table and of the file are looked up.
	Environ func() []string
	// Set are key=value pairs from the command line, applied last.
	Set []string
}

// LoadConfig returns DefaultConfig with, in increasing precedence, the
// file at path (may be ""), the environment and the command-line pairs
// applied (see applyEnv), then checks every key (CheckKeys: refused keys
// are an error naming the key and where it was set) and the values
// (Validate). log receives the key warnings and the line listing the keys
// irrelevant to Folio.
func LoadConfig(path string, ov Overrides, log *slog.Logger) (Config, error) {
	c := DefaultConfig()
	var fileKeys []string
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return c, fmt.Errorf("reading the bookie configuration: %w", err)
		}
		props, err := ParseProperties(f)
		f.Close()
		if err != nil {
			return c, fmt.Errorf("configuration %s: %w", path, err)
		}
		for _, p := range props {
			if err := c.SetFrom(p.Key, p.Value, fmt.Sprintf("%s:%d", path, p.Line)); err != nil {
				return c, err // names the key, the file and the line
			}
			fileKeys = append(fileKeys, p.Key)
		}
	}
	if err := c.applyEnv(ov, fileKeys); err != nil {
		return c, err
	}
	for _, kv := range ov.Set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return c, fmt.Errorf("override %q: want key=value", kv)
		}
		if err := c.SetFrom(strings.TrimSpace(k), v, "--set"); err != nil {
			return c, err
		}
	}
	if err := c.resolveLegacyZooKeeper(); err != nil {
		return c, err
	}
	if err := c.CheckKeys(log); err != nil {
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

// Load applies a .properties stream to c (source "line N").
func (c *Config) Load(r io.Reader, _ *slog.Logger) error {
	props, err := ParseProperties(r)
	if err != nil {
		return err
	}
	for _, p := range props {
		if err := c.SetFrom(p.Key, p.Value, fmt.Sprintf("line %d", p.Line)); err != nil {
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
	if err := wire.CheckFrameLimit(c.MaxFrameSize); err != nil {
		errs = append(errs, fmt.Errorf("nettyMaxFrameSizeBytes: %w", err))
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
	errs = append(errs, c.validateStore()...)
	errs = append(errs, c.Placement.validate(c.AutoRecovery.Enabled, c.source)...)
	seen := map[string]bool{}
	for _, d := range c.AllDirs() {
		if seen[d] {
			errs = append(errs, fmt.Errorf("directory %s is configured twice", d))
		}
		seen[d] = true
	}
	return errors.Join(errs...)
}

// validateStore checks the storage and read-only keys as BookKeeper does
// (GarbageCollectorThread's compaction checks, ReadOnlyBookie's).
func (c *Config) validateStore() []error {
	var errs []error
	if c.ForceReadOnlyBookie && !c.ReadOnlyModeEnabled {
		errs = append(errs, errors.New("forceReadOnlyBookie=true needs readOnlyModeEnabled=true (a bookie cannot run read-only with read-only mode disabled; Java refuses the same)"))
	}
	a, aok := c.Props["logSizeLimit"]
	b, bok := c.Props["entryLogSizeLimit"]
	if aok && bok && strings.TrimSpace(a) != strings.TrimSpace(b) {
		errs = append(errs, fmt.Errorf("logSizeLimit=%s and entryLogSizeLimit=%s disagree: set only logSizeLimit (entryLogSizeLimit is Folio's older name for it)", a, b))
	}
	minorOn := c.MinorCompactionThreshold > 0 && c.MinorCompactionInterval > 0
	majorOn := c.MajorCompactionThreshold > 0 && c.MajorCompactionInterval > 0
	if minorOn && c.MinorCompactionInterval < c.GCWaitTime {
		errs = append(errs, fmt.Errorf("minorCompactionInterval %v is shorter than gcWaitTime %v (compaction runs within a GC pass)", c.MinorCompactionInterval, c.GCWaitTime))
	}
	if majorOn && c.MajorCompactionInterval < c.GCWaitTime {
		errs = append(errs, fmt.Errorf("majorCompactionInterval %v is shorter than gcWaitTime %v (compaction runs within a GC pass)", c.MajorCompactionInterval, c.GCWaitTime))
	}
	if minorOn && majorOn && (c.MinorCompactionInterval >= c.MajorCompactionInterval || c.MinorCompactionThreshold >= c.MajorCompactionThreshold) {
		errs = append(errs, fmt.Errorf("minor compaction (threshold %v, interval %v) must be more frequent and less aggressive than major (threshold %v, interval %v)",
			c.MinorCompactionThreshold, c.MinorCompactionInterval, c.MajorCompactionThreshold, c.MajorCompactionInterval))
	}
	return errs
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

// BookieID is the bookie's id for the given (bound) port: CustomBookieID
// if set (Java's BookieImpl.getBookieId), else BookieAddress.
func (c *Config) BookieID(port int) (metadata.BookieID, error) {
	if c.CustomBookieID != "" {
		id := metadata.BookieID(c.CustomBookieID)
		if err := metadata.ValidateBookieID(id); err != nil {
			return "", fmt.Errorf("bookieId: %w", err)
		}
		return id, nil
	}
	addr, err := c.BookieAddress(port)
	if err != nil {
		return "", err
	}
	id := metadata.BookieID(addr)
	if err := metadata.ValidateBookieID(id); err != nil {
		return "", err
	}
	return id, nil
}

// BookieAddress is host:port where clients reach the bookie: BookieHost and
// the given (bound) port. It is the bookie id unless CustomBookieID is set.
func (c *Config) BookieAddress(port int) (string, error) {
	host, err := c.BookieHost()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}
