package ledgerstore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/journal"
)

// Clock is the store's time source, passed on to its journals and entry
// logs. internal/storage may not read the wall clock: the bookie process
// passes clock.Real{} from internal/clock, tests a clock.Manual and the
// simulator its own virtual clock.
type Clock = clock.Clock

// Config configures Open. Zero fields take the defaults named below. The
// directory lists fix the sharding (ledger id mod count) and are recorded
// on disk: reopening with a different number of journal directories, with
// fewer ledger directories, or with directories in another order, is
// refused; ledger directories may only be appended (AllowExpansion).
type Config struct {
	// JournalDirs are the journal directories, at least one. Ledgers are
	// sharded over them by ledger id mod len(JournalDirs), one group-commit
	// writer each; put them on separate devices to add fsync bandwidth.
	JournalDirs []string
	// LedgerDirs are the ledger directories, at least one. The first N
	// (their number when the store was created) are the shards: each holds
	// the Pebble index ("index/") and the entry logs ("entrylogs/") of the
	// ledgers with ledger id mod N == its position. Any directory may also
	// hold entry logs that other shards spilled into it while their own
	// directory was full ("entrylogs-shard-<i>/"); directories after the
	// first N (capacity directories, AllowExpansion) hold only those.
	LedgerDirs []string
	// AllowExpansion lets Open add ledger directories appended to the end
	// of LedgerDirs (the recorded ones unchanged, in the same order) to an
	// existing store as capacity directories: they hold entry logs spilled
	// from any shard, never a shard of their own (see the package comment,
	// "Expansion"). The bookie sets it from allowStorageExpansion. Without
	// it, more ledger directories than the store records is ErrLayout.
	AllowExpansion bool
	// FullLedgerDirs lists the positions (indexes in LedgerDirs) of the
	// ledger directories that are full when Open starts: the bookie's
	// disk checker's verdict, which Open applies (as SetLedgerDirFull(p,
	// true)) before journal replay writes any entry log, so a restart
	// does not flush replayed entries into a full directory. Later changes
	// go through SetLedgerDirFull. Independently of it, an entry log that
	// cannot be created or written for lack of space (ENOSPC) marks its
	// directory full for that shard and the flush moves to another
	// writable directory. A position out of range is an error.
	FullLedgerDirs []int

	// Clock is required.
	Clock Clock

	// WriteCacheBytes bounds the write caches in total (split evenly over
	// the ledger directories). Default 64 MiB. An add that finds its cache
	// full waits up to MaxAddWait for a flush, then fails with
	// storage.ErrTooManyRequests.
	WriteCacheBytes int64
	// MaxAddWait: see WriteCacheBytes. Default 10 s (BookKeeper's
	// dbStorage_maxThrottleTimeMs). Negative: fail at once.
	MaxAddWait time.Duration
	// ReadCacheBytes bounds the read-ahead caches in total. Default 16 MiB;
	// negative disables them.
	ReadCacheBytes int64
	// ReadAheadEntries: on a read-cache miss, the read of an entry from its
	// entry log also reads and caches up to this many following entries of
	// the ledger (those the index places after it in the same log, within
	// one read of at most 4 MiB), so a catch-up reader's next reads hit the
	// cache: BookKeeper's dbStorage_readAheadCacheBatchSize. Default 100;
	// negative disables read-ahead.
	ReadAheadEntries int
	// ReadAheadBytes, when positive, also bounds the bytes of one
	// read-ahead: BookKeeper's dbStorage_readAheadCacheBatchBytesSize.
	// Default 0 (count only, and at most half a shard's read cache);
	// negative disables read-ahead.
	ReadAheadBytes int64
	// IndexCacheBytes is each Pebble index's block cache. Default 32 MiB.
	IndexCacheBytes int64
	// MaxEntryLogBytes seals an entry log at this size. Default 1 GiB.
	MaxEntryLogBytes int64

	// Group commit, per journal (see journal.Options for each knob).
	// MaxGroupWait 0 (default) writes a group as soon as the writer is free.
	JournalMaxGroupWait    time.Duration
	JournalMaxGroupBytes   int   // default 512 KiB
	JournalMaxQueueBytes   int64 // default 64 MiB
	JournalMaxQueueRecords int   // default 10,000
	// JournalQueueWait bounds how long an add waits for journal queue space
	// before failing with storage.ErrTooManyRequests. Default 1 s.
	JournalQueueWait     time.Duration
	JournalPreallocBytes int64 // default 4 MiB
	JournalMaxFileBytes  int64 // default 256 MiB
	// JournalMaxBackups is how many journal files a checkpoint leaves in
	// place among those replay no longer needs (journal.Options.MaxBackups,
	// BookKeeper's journalMaxBackups). Default 0.
	JournalMaxBackups int

	// CheckpointInterval is how often the background loop checkpoints
	// (BookKeeper's flushInterval). Default 10 s. It bounds journal replay
	// after a crash.
	CheckpointInterval time.Duration

	// GCInterval is how often the background loop garbage-collects entry
	// logs (GCTick). Default 15 min (BookKeeper's gcWaitTime is 10–15 min).
	GCInterval time.Duration
	// GCThreshold is the threshold of GC, the one-shot pass tests and the
	// simulator call: sealed entry logs whose live fraction is below it are
	// compacted; wholly dead logs are removed. Default 0.2. The background
	// loop follows Compaction instead.
	GCThreshold float64
	// Compaction schedules the background loop's compactions (BookKeeper's
	// minor and major compaction). nil: DefaultCompaction.
	Compaction *CompactionPolicy
	// CompactionBytesPerSecond rate-limits compaction reads and writes.
	// Default 32 MiB/s; negative: unlimited.
	CompactionBytesPerSecond int64

	// LedgerIdleTime is the eviction period of idle ledgers' in-memory
	// state: the background loop sweeps (EvictIdleLedgers) every
	// LedgerIdleTime, dropping the state of ledgers unused since before
	// the previous sweep (so idle for one to two periods) that a reload
	// rebuilds exactly (evict.go). Default 10 min (BookKeeper's
	// DbLedgerStorage drops its transient ledger info after 10 minutes);
	// negative: never evict.
	LedgerIdleTime time.Duration
	// LedgerEvictionChecksPerSecond paces the background sweep: at most
	// that many idle ledgers checked a second (a check reads the ledger's
	// index state and maybe its last entry, under the ledger's lock), in
	// bursts of a tenth of it. Default 10000 (a million idle ledgers in
	// under two minutes, well within the default period); negative:
	// unpaced. Direct EvictIdleLedgers calls are never paced.
	LedgerEvictionChecksPerSecond int

	// Observer, if set, receives the journal's measurements (metrics).
	Observer Observer

	// Manual starts no background goroutines besides the journals' own
	// (writer, syncer and preallocator of each):
	// the owner calls FlushWriteCache, Checkpoint and GC (tests, simulator).
	Manual bool
	// ManualJournal also runs the journals without goroutines: the
	// owner calls StepJournals to run group commits. Adds, fences and
	// explicit LACs then complete only when StepJournals runs.
	ManualJournal bool
	// Go runs fn on another goroutine: the completion of an add that fails
	// before it reaches the journal (storage.AddCompletion must not run on
	// the caller's goroutine). Default: the go statement. The simulator
	// queues fn on its event loop instead, so that the completion's moment
	// is a function of the seed.
	Go func(fn func())
	// DisableIndexCompactions runs the Pebble indexes without automatic
	// compactions or asynchronous table statistics, so that no background
	// work changes what is on disk between the owner's calls (the
	// simulator's crash images must not depend on goroutine scheduling).
	// The index stays small enough in such runs for L0 not to matter.
	DisableIndexCompactions bool
	// Entropy is where a new store draws its store id (16 bytes, at the
	// first open; see the package comment, "Lost data"). Default
	// crypto/rand.Reader; tests and the simulator may pass a seeded source.
	Entropy io.Reader

	// evictScanChunk, if positive (tests only), replaces evictScanChunk.
	evictScanChunk int

	// openHook, if set (tests only), is installed as the store's hook
	// before Open does anything, so that tests can crash the file system
	// between the steps of Open (expansion).
	openHook func(point string)
}

func (c Config) withDefaults() (Config, error) {
	if c.Clock == nil {
		return c, errors.New("ledgerstore: Config.Clock is required")
	}
	if len(c.JournalDirs) == 0 || len(c.LedgerDirs) == 0 {
		return c, errors.New("ledgerstore: at least one journal directory and one ledger directory are required")
	}
	seen := map[string]bool{}
	for _, p := range c.FullLedgerDirs {
		if p < 0 || p >= len(c.LedgerDirs) {
			return c, fmt.Errorf("ledgerstore: Config.FullLedgerDirs names position %d, but there are %d ledger directories", p, len(c.LedgerDirs))
		}
	}
	for _, d := range append(append([]string(nil), c.JournalDirs...), c.LedgerDirs...) {
		if d == "" {
			return c, errors.New("ledgerstore: empty directory name")
		}
		if seen[d] {
			return c, fmt.Errorf("ledgerstore: directory %s listed twice", d)
		}
		seen[d] = true
	}
	if c.WriteCacheBytes <= 0 {
		c.WriteCacheBytes = 64 << 20
	}
	if c.MaxAddWait == 0 {
		c.MaxAddWait = 10 * time.Second
	}
	if c.ReadCacheBytes == 0 {
		c.ReadCacheBytes = 16 << 20
	}
	if c.ReadAheadEntries == 0 {
		c.ReadAheadEntries = 100
	}
	if c.IndexCacheBytes <= 0 {
		c.IndexCacheBytes = 32 << 20
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 10 * time.Second
	}
	if c.GCInterval <= 0 {
		c.GCInterval = 15 * time.Minute
	}
	if c.LedgerIdleTime == 0 {
		c.LedgerIdleTime = 10 * time.Minute
	}
	if c.LedgerEvictionChecksPerSecond == 0 {
		c.LedgerEvictionChecksPerSecond = 10000
	}
	if c.GCThreshold <= 0 {
		c.GCThreshold = 0.2
	}
	if c.GCThreshold > 1 {
		return c, fmt.Errorf("ledgerstore: GCThreshold %v above 1", c.GCThreshold)
	}
	if c.Compaction == nil {
		d := DefaultCompaction()
		c.Compaction = &d
	} else if err := c.Compaction.validate(); err != nil {
		return c, err
	}
	if c.JournalMaxBackups < 0 {
		return c, fmt.Errorf("ledgerstore: negative JournalMaxBackups %d", c.JournalMaxBackups)
	}
	if c.CompactionBytesPerSecond == 0 {
		c.CompactionBytesPerSecond = 32 << 20
	}
	if c.Entropy == nil {
		c.Entropy = rand.Reader
	}
	if c.Go == nil {
		c.Go = func(fn func()) { go fn() }
	}
	return c, nil
}

func (c Config) journalOptions(onFailure func(error)) journal.Options {
	return journal.Options{
		Clock:           c.Clock,
		MaxGroupWait:    c.JournalMaxGroupWait,
		MaxGroupBytes:   c.JournalMaxGroupBytes,
		MaxQueueBytes:   c.JournalMaxQueueBytes,
		MaxQueueRecords: c.JournalMaxQueueRecords,
		QueueWait:       c.JournalQueueWait,
		PreallocBytes:   c.JournalPreallocBytes,
		MaxFileBytes:    c.JournalMaxFileBytes,
		MaxBackups:      c.JournalMaxBackups,
		Manual:          c.ManualJournal,
		OnFailure:       onFailure,
		OnSync:          c.onSync(),
	}
}

// Observer receives the store's journal measurements (BookKeeper's
// JOURNAL_SYNC and JOURNAL_ADD_ENTRY). Methods run on a journal's
// goroutines (JournalSynced and acknowledged adds on its syncer, adds
// failed by a write error on its writer; with ManualJournal, in
// StepJournals): they must be cheap and must not block.
type Observer interface {
	// JournalSynced is one fdatasync of a journal's groups (with the
	// pipelined writer one fdatasync may cover two groups).
	JournalSynced(took time.Duration)
	// JournalAdded is one entry's time from its journal append to durable
	// (err nil) or failed.
	JournalAdded(took time.Duration, err error)
}

func (c Config) onSync() func(time.Duration, int) {
	if c.Observer == nil {
		return nil
	}
	obs := c.Observer
	return func(took time.Duration, _ int) { obs.JournalSynced(took) }
}

// entrylogOptions are the options of each shard's entry-log store; the
// caches are split over the shards.
func (c Config) entrylogOptions(shards int) entrylog.Options {
	n := int64(shards)
	o := entrylog.Options{
		WriteCacheBytes:  max(c.WriteCacheBytes/n, 64<<10),
		MaxAddWait:       c.MaxAddWait,
		MaxLogBytes:      c.MaxEntryLogBytes,
		ReadCacheBytes:   c.ReadCacheBytes,
		ReadAheadBytes:   c.ReadAheadBytes,
		ReadAheadEntries: c.ReadAheadEntries,
		Clock:            c.Clock,
	}
	if c.ReadCacheBytes > 0 {
		o.ReadCacheBytes = max(c.ReadCacheBytes/n, 64<<10)
	}
	if c.CompactionBytesPerSecond > 0 {
		o.CompactionLimiter = entrylog.NewRateLimiter(c.Clock, c.CompactionBytesPerSecond, max(c.CompactionBytesPerSecond/10, 1<<20))
	}
	return o
}

// CompactionPolicy is when the GC loop compacts entry logs, BookKeeper's
// GarbageCollectorThread rules: every tick removes wholly dead logs; a
// major compaction (compact sealed logs whose live fraction is below
// MajorThreshold) runs when MajorInterval has passed since the last major
// one, else a minor one (MinorThreshold) when MinorInterval has passed
// since the last compaction of either kind. A kind with threshold ≤ 0 or
// interval ≤ 0 is disabled. The first compaction of each kind comes one
// interval after Open, never at start.
type CompactionPolicy struct {
	MinorThreshold float64
	MinorInterval  time.Duration
	MajorThreshold float64
	MajorInterval  time.Duration
	// ForceAllowed lets TriggerCompaction compact with a kind's threshold
	// even when its interval disables it (forceAllowCompaction), provided
	// the threshold is in (0, 1).
	ForceAllowed bool
	// ForceWhenNoSpace: while SetNoSpace(true) holds, every tick is forced
	// (isForceGCAllowWhenNoSpace); otherwise compaction is suspended then
	// (dead logs are still removed: that only frees space).
	ForceWhenNoSpace bool
}

// DefaultCompaction is BookKeeper's: minor 0.2 every hour, major 0.8 every
// day.
func DefaultCompaction() CompactionPolicy {
	return CompactionPolicy{MinorThreshold: 0.2, MinorInterval: time.Hour, MajorThreshold: 0.8, MajorInterval: 24 * time.Hour}
}

func (p CompactionPolicy) validate() error {
	if p.MinorThreshold > 1 || p.MajorThreshold > 1 {
		return fmt.Errorf("ledgerstore: compaction threshold above 1 (minor %v, major %v)", p.MinorThreshold, p.MajorThreshold)
	}
	return nil
}

func (p CompactionPolicy) minorOn() bool { return p.MinorThreshold > 0 && p.MinorInterval > 0 }
func (p CompactionPolicy) majorOn() bool { return p.MajorThreshold > 0 && p.MajorInterval > 0 }

// forceable reports whether a forced tick may use threshold t of a kind
// (enabled, or forceAllowCompaction with t in (0, 1)).
func (p CompactionPolicy) forceable(on bool, t float64) bool {
	return on || (p.ForceAllowed && t > 0 && t < 1)
}
