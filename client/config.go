package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// Defaults of Config, BookKeeper's where it has one
// (ClientConfiguration, spec/wire-protocol.md §7.4).
const (
	DefaultAddEntryTimeout  = 5 * time.Second
	DefaultReadEntryTimeout = 5 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultMetadataTimeout  = 10 * time.Second
	// DefaultSpeculativeReadTimeout is Java's speculativeReadTimeout.
	DefaultSpeculativeReadTimeout = 2 * time.Second
	DefaultMaxOutstandingAdds     = 10000
	// DefaultRecoveryReadBatchSize is Folio's default read-ahead of ledger
	// recovery. Java's recoveryReadBatchSize defaults to 1 (one entry read
	// at a time); reading ahead is safe because every entry is decided on
	// its own by the Qw − Qa + 1 rule and entries past the end are ignored
	// (spec/protocol.md §4.4), and it makes recovery of a long unconfirmed
	// tail one round trip per batch instead of one per entry.
	DefaultRecoveryReadBatchSize = 16

	// Placement defaults, Java's.
	DefaultMinNumRacksPerWriteQuorum       = 2
	DefaultMinNumZonesPerWriteQuorum       = 2
	DefaultDesiredNumZonesPerWriteQuorum   = 3
	DefaultMinRegionsForDurability         = 2
	DefaultNetworkTopologyScriptNumberArgs = 100
	DefaultNetworkTopologyScriptTimeout    = 10 * time.Second
	// DefaultNetworkTopologyScriptFailureCacheTime is how long bookies the
	// script failed to resolve keep the default location before it is
	// asked again.
	DefaultNetworkTopologyScriptFailureCacheTime = time.Minute
	DefaultBookieHealthCheckInterval             = 60 * time.Second
	DefaultBookieErrorThresholdPerInterval       = 5
	DefaultBookieQuarantineTime                  = 1800 * time.Second
	// DefaultSpeculativeReadTimeoutBackoffMultiplier is Java's
	// speculativeReadTimeoutBackoffMultiplier.
	DefaultSpeculativeReadTimeoutBackoffMultiplier = 2.0
	// DefaultReadAheadChunks is the read-ahead of ReadHandle.Entries, in
	// chunks of up to 512 entries.
	DefaultReadAheadChunks = 1
)

// Config configures a Client. The zero value of each field is its default.
type Config struct {
	// MetadataServiceURI names the metadata store, as in BookKeeper:
	// "etcd://host1:2379;host2:2379/ledgers". Required. For TLS to etcd
	// the URI is etcd+https://host1:2379;host2:2379/ledgers.
	MetadataServiceURI string

	// MetadataTLS is the TLS configuration of the connection to an
	// etcd+https:// store: RootCAs that sign etcd's certificate (nil: the
	// system's) and, for an etcd that requires client certificates, the
	// client's in Certificates. Set with an etcd:// URI it is an error,
	// not ignored. Not modified.
	MetadataTLS *tls.Config
	// MetadataUser and MetadataPassword authenticate to etcd (its user and
	// password authentication); both or neither.
	MetadataUser, MetadataPassword string

	// Dialer opens TCP connections to bookies; nil means net.Dialer. Tests
	// use it to cut a client off from chosen bookies.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

	// AddEntryTimeout bounds one bookie's answer to an add (Java's
	// addEntryTimeoutSec, 5 s). A timed-out bookie is replaced by an
	// ensemble change; it does not fail the append by itself.
	AddEntryTimeout time.Duration
	// ReadEntryTimeout bounds one bookie's answer to a read or LAC read
	// (Java's readEntryTimeoutSec, 5 s); the read then tries another
	// replica.
	ReadEntryTimeout time.Duration
	// SpeculativeReadTimeout is how long a read waits for a replica
	// before also asking the next replica of the entry's write set (Java's
	// speculativeReadTimeout, 2 s), and again after each further delay.
	// Bookies left behind, and bookies whose reads fail, are asked last
	// by later reads for 30 s. Negative disables speculative reads.
	SpeculativeReadTimeout time.Duration
	// ConnectTimeout bounds a TCP connect to a bookie (10 s).
	ConnectTimeout time.Duration
	// MetadataTimeout bounds one metadata store operation done on behalf
	// of a ledger (ensemble change, close) when no context is given (10 s,
	// Java's zkTimeout).
	MetadataTimeout time.Duration

	// TLS, if set, secures every bookie connection as Java's client does
	// with tlsProviderFactoryClass: a START_TLS before any request (also
	// with UseV2WireProtocol), then TLS; a bookie without TLS, a failed
	// handshake or a refused certificate fails the connection (ErrTLS),
	// never plaintext. TLSConfigFromPEM builds it from Java's PEM files;
	// any other *tls.Config is used as given, with ServerName set to the
	// bookie's host when empty (Go then checks the bookie's certificate
	// against that host name, which Java does not by default).
	TLS *tls.Config
	// StartTLSTimeout bounds a connection's START_TLS exchange and TLS
	// handshake (Java's startTLSTimeoutSecs, 10 s).
	StartTLSTimeout time.Duration

	// UseV2WireProtocol speaks the binary v2 protocol to bookies instead of
	// v3 (protobuf), as Java's useV2WireProtocol. LAC reads then use
	// READ_ENTRY(-1) instead of READ_LAC.
	UseV2WireProtocol bool
	// ConnectionsPerBookie is the connection pool size per bookie (1).
	ConnectionsPerBookie int

	// MaxOutstandingAdds bounds the appends that are accepted but not yet
	// completed, over all ledgers of the client (10000). When reached,
	// appends wait for room, or fail at once with ErrTooManyRequests if
	// FailFastWhenBusy. WriteAdvHandle writes are not counted (its doc
	// says why).
	MaxOutstandingAdds int
	FailFastWhenBusy   bool

	// RecoveryReadBatchSize is how many entries ledger recovery reads at
	// once past the last one it has decided (16; 1 reads entry by entry, as
	// Java's default). Every recovery read fences either way.
	RecoveryReadBatchSize int

	// Placement (Java: ensemblePlacementPolicy and the settings of its
	// policies; bookie health check and quarantine).
	//
	// BookieRacks maps bookie ids to network locations ("/region/rack" for
	// the rack- and region-aware policies, "/zone/upgradeDomain" for the
	// zone-aware one). BookieRackFile names a file of "bookie-id
	// /location" lines read at New (its entries override BookieRacks).
	// Bookies listed in neither are resolved by NetworkTopologyScript when
	// set, else are in the policy's default location
	// (/default-region/default-rack, or /default-zone/default-upgradedomain
	// for zone-aware). With PlacementPolicy empty, any configured location
	// turns on rack-aware placement and none means random placement, as
	// before policies could be named.
	BookieRacks    map[string]string
	BookieRackFile string
	// PlacementPolicy names the placement policy (Java's
	// ensemblePlacementPolicy): "random", "rackaware", "regionaware",
	// "zoneaware", or Java's class names
	// (org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy,
	// RackawareEnsemblePlacementPolicy, RegionAwareEnsemblePlacementPolicy,
	// ZoneawareEnsemblePlacementPolicy). Empty: see BookieRacks.
	//
	// rackaware: every write quorum spans min(Qw,
	// MinNumRacksPerWriteQuorum) racks, one bookie per rack while racks
	// remain; replacements prefer racks the ensemble uses least. When the
	// racks cannot give that, placement falls back to spreading members
	// round-robin over the racks, unless EnforceMinNumRacksPerWriteQuorum.
	//
	// zoneaware: E must be a multiple of Qw and Qw above
	// MinNumZonesPerWriteQuorum (else ErrInvalidConfig); every write quorum
	// spans min(Qw, DesiredNumZonesPerWriteQuorum) zones when the bookies
	// allow, else at least MinNumZonesPerWriteQuorum (else
	// ErrNotEnoughBookies); bookies of one zone in a write quorum are in two
	// upgrade domains; bookies without a zone are never chosen. With
	// NoStrictZoneawarePlacement placement is random.
	//
	// regionaware: members spread evenly over the regions with writable
	// bookies, and over racks within them. With RegionsToWrite set, no
	// MinRegionsForDurability−1 regions may hold an ack quorum of any
	// write quorum (Qa below that count, or Qa ≤ Qw − Qw/m, is
	// ErrInvalidConfig; an impossible placement is ErrNotEnoughBookies
	// unless DisableRegionValidation).
	PlacementPolicy string
	// MinNumRacksPerWriteQuorum is Java's minNumRacksPerWriteQuorum (2):
	// the racks every write quorum spans (capped at Qw).
	MinNumRacksPerWriteQuorum int
	// EnforceMinNumRacksPerWriteQuorum is Java's
	// enforceMinNumRacksPerWriteQuorum (false): rack-aware placement fails
	// with ErrNotEnoughBookies instead of falling back when no ensemble
	// meets MinNumRacksPerWriteQuorum, and never chooses bookies of the
	// default rack.
	EnforceMinNumRacksPerWriteQuorum bool
	// EnforceMinNumFaultDomainsForWrite is Java's
	// enforceMinNumFaultDomainsForWrite (false): an append is acknowledged
	// only when its Qa acks come from bookies in enough fault domains of
	// the placement policy (Java's areAckedBookiesAdheringToPlacementPolicy):
	// rackaware and regionaware, min(Qw, MinNumRacksPerWriteQuorum)
	// distinct locations; zoneaware, min(Qw, MinNumZonesPerWriteQuorum)
	// zones; random, no rule. An append short of it waits for more acks of
	// its write quorum, so with Qw = Qa, or an ensemble the policy could
	// only place by falling back, it may wait until AddEntryQuorumTimeout
	// (set one) or forever, as in Java. With DelayEnsembleChange a failed
	// bookie is replaced as soon as an append can no longer meet the rule
	// without it (Java waits). Ledger recovery's rewrites follow the same
	// rule, as Java's do.
	EnforceMinNumFaultDomainsForWrite bool
	// MinNumZonesPerWriteQuorum is Java's minNumZonesPerWriteQuorum (2).
	MinNumZonesPerWriteQuorum int
	// DesiredNumZonesPerWriteQuorum is Java's
	// desiredNumZonesPerWriteQuorum (3); not below
	// MinNumZonesPerWriteQuorum.
	DesiredNumZonesPerWriteQuorum int
	// NoStrictZoneawarePlacement is Java's
	// enforceStrictZoneawarePlacement=false (Java's default is true).
	NoStrictZoneawarePlacement bool
	// RegionsToWrite is Java's reppRegionsToWrite ("R1;R2;R3" there): the
	// regions durability counts on; empty: durability is not enforced.
	RegionsToWrite []string
	// MinRegionsForDurability is Java's reppMinimumRegionsForDurability
	// (2); at most len(RegionsToWrite).
	MinRegionsForDurability int
	// DisableDurabilityEnforcementInReplace is Java's
	// reppEnableDurabilityEnforcementInReplace=false (default true).
	DisableDurabilityEnforcementInReplace bool
	// DisableRegionValidation is Java's reppEnableValidation=false
	// (default true): a region-aware ensemble that cannot meet durability
	// is used anyway instead of failing.
	DisableRegionValidation bool
	// NetworkTopologyScript is Java's networkTopologyScriptFileName: an
	// executable run with bookie hosts as arguments (at most
	// NetworkTopologyScriptNumberArgs per run, Java's
	// networkTopologyScriptNumberArgs, 100) that prints one location per
	// argument, whitespace separated, each starting with "/". Answers are
	// cached. A failed run, a run over NetworkTopologyScriptTimeout (10 s;
	// Java has none) or bad output logs a warning and places the bookies in
	// the policy's default location, as Java's resolver does, for
	// NetworkTopologyScriptFailureCacheTime (1 min), after which the
	// bookies are asked again. The script runs in the background when
	// bookies join (never delaying membership changes), in parallel
	// batches; on timeout its whole process group is killed.
	NetworkTopologyScript                 string
	NetworkTopologyScriptNumberArgs       int
	NetworkTopologyScriptTimeout          time.Duration
	NetworkTopologyScriptFailureCacheTime time.Duration
	// EnableBookieHealthCheck is Java's enableBookieHealthCheck (false): a
	// bookie with BookieErrorThresholdPerInterval (Java's
	// bookieErrorThresholdPerInterval, 5) failed requests (errors and
	// timeouts of adds and reads) within one BookieHealthCheckInterval
	// (Java's bookieHealthCheckIntervalSeconds, 60 s) is quarantined for
	// BookieQuarantineTime (Java's bookieQuarantineTimeSeconds, 1800 s):
	// new ensembles and replacements leave it out unless no placement
	// exists without it. Folio quarantines as the threshold is reached,
	// not at the end of the interval.
	EnableBookieHealthCheck         bool
	BookieHealthCheckInterval       time.Duration
	BookieErrorThresholdPerInterval int
	BookieQuarantineTime            time.Duration

	// MaxFrameSize is the largest frame the client sends or accepts, its
	// 4-byte length prefix included (Java's nettyMaxFrameSizeBytes; 0: the
	// default, 5242880). An append whose request would exceed it fails
	// before it is sent; a read answer over it closes the bookie
	// connection. Raise it on clients and bookies alike for entries near
	// 5 MiB (Pulsar sets 5253120).
	MaxFrameSize int

	// Writer options (Java: ClientConfiguration addEntryQuorumTimeoutSec,
	// delayEnsembleChange, maxNumEnsembleChanges). They apply to every
	// ledger the client writes.

	// AddEntryQuorumTimeout, when positive, bounds how long an append may
	// wait for an ack quorum (Java's addEntryQuorumTimeoutSec; Java's
	// default -1 is off, as zero is here). An append not acknowledged by Qa
	// bookies within it fails with ErrAddQuorumTimeout (which matches
	// ErrTimeout: the outcome is unknown to the caller), and so does every
	// append pending behind it: the handle closes the ledger at its last
	// acknowledged entry, as Java does, and later appends fail with
	// ErrLedgerClosed. An append that has its quorum but waits behind an
	// ensemble change or a lower entry does not time out. It fails between
	// the timeout and a quarter of it later. Unlike AddEntryTimeout, which
	// replaces one slow bookie, this bounds the append as a whole while it
	// lacks its quorum (too few bookies answering). It does not bound a
	// stalled ensemble change for appends that already have Qa acks (with
	// Qw > Qa they wait for the change's metadata write, which
	// MetadataTimeout bounds). Negative or below a millisecond is invalid.
	AddEntryQuorumTimeout time.Duration
	// DelayEnsembleChange keeps a failed bookie in the ensemble as long as
	// every pending append can still reach its ack quorum without it
	// (Java's delayEnsembleChange, default false): an append is then
	// acknowledged by Qa bookies of the rest of its write set, and the
	// ensemble change happens only when an append can no longer reach Qa
	// (more than Qw − Qa of its write set failed), replacing the bookies
	// that failed for that append; a bookie that answers "read-only" is
	// replaced at once. It has effect only when Qw > Qa, and none for
	// DeferredSync ledgers (a failure stops those writers anyway).
	//
	// What an operator should expect: entries written while a bookie is
	// failed have fewer than Qw copies (at least Qa), and the ledger
	// metadata still names the failed bookie for them, so nothing in the
	// metadata shows the gap. They are re-replicated only by AutoRecovery:
	// when the auditor sees the bookie lost (after lostBookieRecoveryDelay),
	// or when its periodic ledger check (auditorPeriodicCheckInterval, a
	// week by default) finds the missing entries. A bookie that comes back
	// does not get them. Until then, losing the Qa bookies that hold such
	// an entry loses it, where an immediate ensemble change would have
	// given it Qw copies. And while the lost bookie stays in the last
	// ensemble of an OPEN ledger, AutoRecovery (after its
	// openLedgerRereplicationGracePeriod, 30 s by default) recovers the
	// ledger to re-replicate it, which fences a writer still writing: with
	// AutoRecovery on, a long-lived writer ends about that long after
	// losing a bookie, as in Java.
	DelayEnsembleChange bool
	// MaxNumEnsembleChanges bounds the ensemble changes of one write
	// handle (Java's maxNumEnsembleChanges; zero means Java's default,
	// Integer.MAX_VALUE: no limit). A bookie failure that needs one more
	// fails the pending appends with ErrTooManyEnsembleChanges and closes
	// the ledger at its last acknowledged entry. Each round of replacement
	// counts, including a second round for failures that came during a
	// change. Unlike Java, a round whose failed bookies the previous round
	// already replaced (late failures of the same bookie) is not counted:
	// one bookie crash under pipelined load uses one change, where Java
	// often uses two. NoEnsembleChanges allows none (Java's 0). Below
	// NoEnsembleChanges is invalid.
	MaxNumEnsembleChanges int

	// Reads (Java: ClientConfiguration's read settings). Speculative reads
	// follow Java's DefaultSpeculativeRequestExecutionPolicy: the first
	// extra request after FirstSpeculativeReadTimeout, each later one
	// after the previous delay times SpeculativeReadTimeoutBackoffMultiplier,
	// capped at MaxSpeculativeReadTimeout. With neither set, every delay
	// is SpeculativeReadTimeout, as before and as Java's defaults.

	// FirstSpeculativeReadTimeout is the delay before a read first asks
	// another replica (Java's firstSpeculativeReadTimeout, default
	// speculativeReadTimeout). Zero: SpeculativeReadTimeout. Negative, or
	// a negative SpeculativeReadTimeout: no speculative reads.
	FirstSpeculativeReadTimeout time.Duration
	// MaxSpeculativeReadTimeout caps the backed-off delay (Java's
	// maxSpeculativeReadTimeout, default speculativeReadTimeout). Zero:
	// the larger of SpeculativeReadTimeout and FirstSpeculativeReadTimeout
	// (no backoff); below FirstSpeculativeReadTimeout it is an error.
	MaxSpeculativeReadTimeout time.Duration
	// SpeculativeReadTimeoutBackoffMultiplier multiplies the delay after
	// each speculative request (Java's
	// speculativeReadTimeoutBackoffMultiplier, 2.0). Zero: 2.0; negative,
	// NaN or infinite: an error.
	SpeculativeReadTimeoutBackoffMultiplier float64
	// StickyReadsEnabled sends all reads of a ReadHandle to one bookie of
	// the ensemble (picked at random at open) until it fails a read, then
	// to the next one of the ensemble (Java's stickyReadsEnabled, false).
	// It applies only to ledgers with EnsembleSize == WriteQuorumSize,
	// where every bookie stores every entry; for the others it is ignored,
	// as in Java. The bookie's read-ahead cache then serves sequential
	// reads.
	StickyReadsEnabled bool
	// DisableBatchRead makes BatchRead use single reads even with
	// UseV2WireProtocol (Java's batchReadEnabled=false; Java's default,
	// and Folio's, is batch reads on).
	DisableBatchRead bool
	// ReadAheadChunks is how many chunks (of up to 512 entries) the
	// iterator of ReadHandle.Entries reads ahead of the one its caller is
	// consuming (1). Negative: no read-ahead, each chunk is read when
	// the previous one is consumed. Java's client has no equivalent (its
	// readers read ahead themselves, e.g. Pulsar's managed ledger cache).
	ReadAheadChunks int

	// Logger receives the client's logs; nil means slog.Default().
	Logger *slog.Logger

	// Metrics receives the client's operation latencies and counts; nil
	// records nothing (NopMetrics). clientprom.New records them in
	// Prometheus under BookKeeper's bookkeeper_client_* names.
	Metrics Metrics

	// clock times everything the client waits for: the machines' Ticks,
	// the transport's timeout sweep, the bookie-watch backoff and the
	// pauses of long polls and Tail; nil means clock.Real. Unexported, so
	// the public API shows no internal type: only the package's own tests
	// set it (to a clock.Manual).
	clock clock.Clock
}

// Validate reports the first setting New would refuse (wrapping
// ErrInvalidConfig), without connecting to anything. New calls it.
func (c Config) Validate() error { return c.setDefaults() }

func (c *Config) setDefaults() error {
	if c.MetadataServiceURI == "" {
		return fmt.Errorf("client: Config.MetadataServiceURI is required: %w", ErrInvalidConfig)
	}
	if c.MaxFrameSize != 0 {
		if err := wire.CheckFrameLimit(c.MaxFrameSize); err != nil {
			return fmt.Errorf("client: Config.MaxFrameSize: %w: %w", err, ErrInvalidConfig)
		}
	}
	if err := c.checkWriterOptions(); err != nil {
		return err
	}
	setDuration(&c.AddEntryTimeout, DefaultAddEntryTimeout)
	setDuration(&c.ReadEntryTimeout, DefaultReadEntryTimeout)
	setDuration(&c.ConnectTimeout, DefaultConnectTimeout)
	if c.SpeculativeReadTimeout == 0 {
		c.SpeculativeReadTimeout = DefaultSpeculativeReadTimeout
	}
	if err := c.setReadDefaults(); err != nil {
		return err
	}
	setDuration(&c.MetadataTimeout, DefaultMetadataTimeout)
	if c.MaxOutstandingAdds <= 0 {
		c.MaxOutstandingAdds = DefaultMaxOutstandingAdds
	}
	if c.RecoveryReadBatchSize <= 0 {
		c.RecoveryReadBatchSize = DefaultRecoveryReadBatchSize
	}
	if c.ConnectionsPerBookie <= 0 {
		c.ConnectionsPerBookie = 1
	}
	if err := c.placementDefaults(); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	return nil
}

// NoEnsembleChanges as Config.MaxNumEnsembleChanges allows no ensemble
// change: the first bookie failure that needs one fails the write (Java's
// maxNumEnsembleChanges = 0).
const NoEnsembleChanges = -1

// checkWriterOptions validates the writer options block.
func (c *Config) checkWriterOptions() error {
	if c.AddEntryQuorumTimeout != 0 && c.AddEntryQuorumTimeout < time.Millisecond {
		return fmt.Errorf("client: Config.AddEntryQuorumTimeout %v: want zero (off) or at least 1ms: %w", c.AddEntryQuorumTimeout, ErrInvalidConfig)
	}
	if c.MaxNumEnsembleChanges < NoEnsembleChanges {
		return fmt.Errorf("client: Config.MaxNumEnsembleChanges %d: want ≥ 0 (0: no limit) or NoEnsembleChanges: %w", c.MaxNumEnsembleChanges, ErrInvalidConfig)
	}
	return nil
}

// setReadDefaults checks and defaults the Reads block (after
// SpeculativeReadTimeout got its default).
func (c *Config) setReadDefaults() error {
	m := c.SpeculativeReadTimeoutBackoffMultiplier
	if m < 0 || math.IsNaN(m) || math.IsInf(m, 0) {
		return fmt.Errorf("client: Config.SpeculativeReadTimeoutBackoffMultiplier is %v, need a finite value > 0: %w", m, ErrInvalidConfig)
	}
	if m == 0 {
		c.SpeculativeReadTimeoutBackoffMultiplier = DefaultSpeculativeReadTimeoutBackoffMultiplier
	}
	if c.FirstSpeculativeReadTimeout == 0 {
		c.FirstSpeculativeReadTimeout = c.SpeculativeReadTimeout
	}
	if c.MaxSpeculativeReadTimeout < 0 {
		return fmt.Errorf("client: Config.MaxSpeculativeReadTimeout is %v, need ≥ 0: %w", c.MaxSpeculativeReadTimeout, ErrInvalidConfig)
	}
	if c.MaxSpeculativeReadTimeout == 0 {
		c.MaxSpeculativeReadTimeout = max(c.SpeculativeReadTimeout, c.FirstSpeculativeReadTimeout)
	}
	if c.FirstSpeculativeReadTimeout > 0 && c.MaxSpeculativeReadTimeout < c.FirstSpeculativeReadTimeout {
		return fmt.Errorf("client: Config.MaxSpeculativeReadTimeout %v is below FirstSpeculativeReadTimeout %v: %w",
			c.MaxSpeculativeReadTimeout, c.FirstSpeculativeReadTimeout, ErrInvalidConfig)
	}
	if c.ReadAheadChunks == 0 {
		c.ReadAheadChunks = DefaultReadAheadChunks
	}
	return nil
}

// placementDefaults sets and checks the placement block.
func (c *Config) placementDefaults() error {
	kind, err := placement.ParseKind(c.PlacementPolicy)
	if err != nil {
		return fmt.Errorf("client: Config.PlacementPolicy: %w: %w", err, ErrInvalidConfig)
	}
	// With a domain-aware policy named and no location source every bookie
	// is in the default domain: the rule min(Qw, 2) domains could never be
	// met and every append would wait (Java's likewise), so refuse the
	// combination here. The default policy without locations is random
	// placement, which has no rule: accepted, as before.
	if c.EnforceMinNumFaultDomainsForWrite && kind != placement.KindRandom && kind != placement.KindDefault &&
		len(c.BookieRacks) == 0 && c.BookieRackFile == "" && c.NetworkTopologyScript == "" {
		return fmt.Errorf("client: Config.EnforceMinNumFaultDomainsForWrite is set but no bookie locations are configured "+
			"(BookieRacks, BookieRackFile and NetworkTopologyScript are all empty): every bookie would be in the default rack "+
			"and no append could meet the rule: %w", ErrInvalidConfig)
	}
	for name, v := range map[string]int{"MinNumRacksPerWriteQuorum": c.MinNumRacksPerWriteQuorum, "MinNumZonesPerWriteQuorum": c.MinNumZonesPerWriteQuorum,
		"DesiredNumZonesPerWriteQuorum": c.DesiredNumZonesPerWriteQuorum, "MinRegionsForDurability": c.MinRegionsForDurability,
		"NetworkTopologyScriptNumberArgs": c.NetworkTopologyScriptNumberArgs, "BookieErrorThresholdPerInterval": c.BookieErrorThresholdPerInterval} {
		if v < 0 {
			return fmt.Errorf("client: Config.%s is %d, want ≥ 0 (0: the default): %w", name, v, ErrInvalidConfig)
		}
	}
	setInt(&c.MinNumRacksPerWriteQuorum, DefaultMinNumRacksPerWriteQuorum)
	setInt(&c.MinNumZonesPerWriteQuorum, DefaultMinNumZonesPerWriteQuorum)
	setInt(&c.DesiredNumZonesPerWriteQuorum, DefaultDesiredNumZonesPerWriteQuorum)
	setInt(&c.MinRegionsForDurability, DefaultMinRegionsForDurability)
	setInt(&c.NetworkTopologyScriptNumberArgs, DefaultNetworkTopologyScriptNumberArgs)
	setInt(&c.BookieErrorThresholdPerInterval, DefaultBookieErrorThresholdPerInterval)
	setDuration(&c.NetworkTopologyScriptTimeout, DefaultNetworkTopologyScriptTimeout)
	setDuration(&c.NetworkTopologyScriptFailureCacheTime, DefaultNetworkTopologyScriptFailureCacheTime)
	setDuration(&c.BookieHealthCheckInterval, DefaultBookieHealthCheckInterval)
	setDuration(&c.BookieQuarantineTime, DefaultBookieQuarantineTime)
	pc := c.placementConfig(nil, nil)
	if err := pc.Validate(); err != nil {
		return fmt.Errorf("client: Config: %w: %w", err, ErrInvalidConfig)
	}
	return nil
}

// placementConfig is the placement.Config of the settings, with the given
// locations and avoided bookies.
func (c *Config) placementConfig(locs map[metadata.BookieID]string, avoid func(metadata.BookieID) bool) placement.Config {
	kind, _ := placement.ParseKind(c.PlacementPolicy)
	return placement.Config{
		Kind:                       kind,
		Locations:                  locs,
		MinRacksPerWriteQuorum:     c.MinNumRacksPerWriteQuorum,
		EnforceMinNumRacks:         c.EnforceMinNumRacksPerWriteQuorum,
		MinZonesPerWriteQuorum:     c.MinNumZonesPerWriteQuorum,
		DesiredZonesPerWriteQuorum: c.DesiredNumZonesPerWriteQuorum,
		EnforceStrictZoneaware:     !c.NoStrictZoneawarePlacement,
		RegionsToWrite:             c.RegionsToWrite,
		MinRegionsForDurability:    c.MinRegionsForDurability,
		EnforceDurabilityInReplace: !c.DisableDurabilityEnforcementInReplace,
		EnableValidation:           !c.DisableRegionValidation,
		Avoid:                      avoid,
	}
}

func setInt(v *int, def int) {
	if *v <= 0 {
		*v = def
	}
}

// speculation is the read machines' speculative schedule; First zero
// (none) when speculative reads are off.
func (c *Config) speculation() ledger.Speculation {
	if c.SpeculativeReadTimeout < 0 || c.FirstSpeculativeReadTimeout < 0 {
		return ledger.Speculation{}
	}
	return ledger.Speculation{First: c.FirstSpeculativeReadTimeout, Max: c.MaxSpeculativeReadTimeout,
		Multiplier: c.SpeculativeReadTimeoutBackoffMultiplier}
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// DigestType is a ledger's entry digest, numbered as BookKeeper's
// LedgerMetadataFormat.DigestType.
type DigestType int32

// Digest types. The zero DigestType means the default: CRC32C for a new
// ledger, the type stored in the metadata when opening.
const (
	DigestCRC32  DigestType = 1
	DigestHMAC   DigestType = 2
	DigestCRC32C DigestType = 3
	DigestDummy  DigestType = 4
)

// String returns BookKeeper's name of the digest type ("CRC32C", …).
func (d DigestType) String() string {
	switch d {
	case 0:
		return "default"
	case DigestCRC32:
		return "CRC32"
	case DigestHMAC:
		return "HMAC"
	case DigestCRC32C:
		return "CRC32C"
	case DigestDummy:
		return "DUMMY"
	}
	return fmt.Sprintf("DigestType(%d)", int32(d))
}

// LedgerOptions configure CreateLedger. Zero values take the defaults:
// EnsembleSize 3, WriteQuorumSize min(2, EnsembleSize), AckQuorumSize
// min(2, WriteQuorumSize), DigestCRC32C, an empty password.
type LedgerOptions struct {
	// EnsembleSize, WriteQuorumSize and AckQuorumSize are E, Qw and Qa:
	// entries are striped over E bookies, each written to Qw of them and
	// acknowledged once Qa stored it (E ≥ Qw ≥ Qa ≥ 1).
	EnsembleSize, WriteQuorumSize, AckQuorumSize int
	// DigestType is the entries' digest (Java's DigestType); zero means
	// CRC32C.
	DigestType DigestType
	// Password guards the ledger: every open must give the same bytes. It
	// is stored in the metadata, as BookKeeper stores it.
	Password []byte
	// CustomMetadata is stored with the ledger for the application.
	CustomMetadata map[string][]byte
	// ExplicitLACInterval, when positive, makes the writer send WRITE_LAC
	// to the write set of its LAC at this interval whenever the LAC moved
	// past what the entries already sent carry (Java's explicitLacInterval,
	// spec/protocol.md §1.6): readers then see the last entry of an idle
	// writer within about one interval. Zero (the default) is off: the
	// last entry stays invisible to readers until another entry or the
	// close.
	ExplicitLACInterval time.Duration
	// WriteFlags are the ledger's write flags (WriteFlagDeferredSync).
	WriteFlags WriteFlags
	// LedgerID, when positive, is the id the ledger is created under
	// (Java's CreateAdvBuilder.withLedgerId); zero means a generated id.
	// CreateLedgerAdv and CreateLedger both honour it (Java offers a
	// chosen id only for the Adv builder; a chosen id makes as much sense
	// for a handle that numbers entries itself). If a ledger with that id
	// exists the create fails with ErrLedgerExists and changes nothing.
	// Negative ids and ids above 2^63-2 (BookKeeper's largest ledger id)
	// fail with ErrInvalidConfig. Ledger 0 cannot be chosen: zero asks for
	// a generated id. A chosen id is not reserved against the generator:
	// a later generated id skips it (the generator retries taken ids).
	//
	// Never choose the id of a ledger that existed before, even one since
	// deleted: bookies may still hold its entries (deletion is collected
	// lazily), and with the same password they pass the digest check, so
	// a recovery or a reader of the new ledger can take the old ledger's
	// entries for its own (filling ids the new writer has not written),
	// and a bookie that fenced the old ledger refuses the new writer's
	// adds with ErrLedgerFenced. Java's withLedgerId has the same hazard;
	// applications choose ids from a space they never reuse.
	LedgerID int64
}

// WriteFlags are BookKeeper's WriteFlag set.
type WriteFlags uint32

// DeferredSync lets bookies acknowledge adds before they are durable
// (WriteFlag.DEFERRED_SYNC, spec/protocol.md §1.8). Acknowledged appends
// then do not move the LAC: WriteHandle.Force makes them durable and moves
// it. The ledger cannot survive a bookie failure: any failed bookie stops
// the writer (appends fail with ErrLedgerClosed, outcome unknown) and the
// ledger is closed at the last forced entry. Close also closes at the last
// forced entry: Force before Close to keep the rest. Needs the v3 protocol.
const DeferredSync WriteFlags = 1

func (o *LedgerOptions) withDefaults() (LedgerOptions, error) {
	r := *o
	if r.EnsembleSize == 0 {
		r.EnsembleSize = 3
	}
	if r.WriteQuorumSize == 0 {
		r.WriteQuorumSize = min(2, r.EnsembleSize)
	}
	if r.AckQuorumSize == 0 {
		r.AckQuorumSize = min(2, r.WriteQuorumSize)
	}
	if r.DigestType == 0 {
		r.DigestType = DigestCRC32C
	}
	if !(r.EnsembleSize >= r.WriteQuorumSize && r.WriteQuorumSize >= r.AckQuorumSize && r.AckQuorumSize >= 1) {
		return r, fmt.Errorf("client: need EnsembleSize ≥ WriteQuorumSize ≥ AckQuorumSize ≥ 1, got %d/%d/%d: %w",
			r.EnsembleSize, r.WriteQuorumSize, r.AckQuorumSize, ErrInvalidConfig)
	}
	if r.DigestType < DigestCRC32 || r.DigestType > DigestDummy {
		return r, fmt.Errorf("client: unknown digest type %v: %w", r.DigestType, ErrInvalidConfig)
	}
	if r.LedgerID < 0 || r.LedgerID > metadata.MaxLedgerID {
		return r, fmt.Errorf("client: LedgerID %d outside 0..%d (0: generate one): %w", r.LedgerID, int64(metadata.MaxLedgerID), ErrInvalidConfig)
	}
	return r, nil
}

// OpenOptions configure OpenLedger.
type OpenOptions struct {
	// Password must equal the ledger's (ErrUnauthorized otherwise).
	Password []byte
	// DigestType is used only for ledgers whose metadata has no digest type
	// (very old ones); otherwise the stored type is used, as Java does with
	// digest autodetection (its default). Zero means CRC32C there.
	DigestType DigestType
	// Recovery fences the ledger and closes it at its true end (ledger
	// recovery, spec/protocol.md §4): the writer, if alive, can add no
	// more. Without it the open neither fences nor changes anything.
	Recovery bool
}
