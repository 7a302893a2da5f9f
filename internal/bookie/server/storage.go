package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// storageKeys map BookKeeper's storage keys onto ledgerstore.Config. The
// values are read from Config.Props; sizes in BookKeeper's units.
var storageKeys = []struct {
	name  string
	apply func(c *ledgerstore.Config, n int64)
	// signed: negative values are allowed (BookKeeper gives them a meaning).
	signed bool
}{
	{"flushInterval", func(c *ledgerstore.Config, n int64) { c.CheckpointInterval = time.Duration(n) * time.Millisecond }, false},
	{"journalMaxGroupWaitMSec", func(c *ledgerstore.Config, n int64) { c.JournalMaxGroupWait = time.Duration(n) * time.Millisecond }, false},
	{"dbStorage_writeCacheMaxSizeMb", func(c *ledgerstore.Config, n int64) { c.WriteCacheBytes = n << 20 }, false},
	{"dbStorage_readAheadCacheMaxSizeMb", func(c *ledgerstore.Config, n int64) { c.ReadCacheBytes = n << 20 }, false},
	// BookKeeper reads ahead while fewer than batchSize entries were read
	// (so 0 reads nothing ahead) and, if batchBytesSize > 0, fewer bytes
	// than that (-1, its default: no byte bound).
	{"dbStorage_readAheadCacheBatchSize", func(c *ledgerstore.Config, n int64) {
		c.ReadAheadEntries = int(min(n, 1<<20))
		if n <= 0 {
			c.ReadAheadEntries = -1
		}
	}, true},
	{"dbStorage_readAheadCacheBatchBytesSize", func(c *ledgerstore.Config, n int64) { c.ReadAheadBytes = max(n, 0) }, true},
	{"compactionRateByBytes", func(c *ledgerstore.Config, n int64) { c.CompactionBytesPerSecond = n }, false},
	{"ledgerStateMaxIdleTime", func(c *ledgerstore.Config, n int64) {
		c.LedgerIdleTime = time.Duration(n) * time.Second
		if n == 0 {
			c.LedgerIdleTime = -1 // never evict
		}
	}, false},
}

// StorageConfig is the ledgerstore configuration of cfg: the data lives in
// <dir>/current of each journal and ledger directory, next to the cookie.
// logSizeLimit, journalMaxSizeMB, journalMaxBackups, gcWaitTime and the
// compaction keys come from cfg's fields; the other storage keys from
// Props.
func StorageConfig(cfg *Config) (ledgerstore.Config, error) {
	sc := ledgerstore.Config{Clock: clock.Real{}}
	for _, d := range cfg.JournalDirs {
		sc.JournalDirs = append(sc.JournalDirs, CurrentDir(d))
	}
	for _, d := range cfg.LedgerDirs {
		sc.LedgerDirs = append(sc.LedgerDirs, CurrentDir(d))
	}
	sc.AllowExpansion = cfg.AllowStorageExpansion
	sc.MaxEntryLogBytes = cfg.EntryLogSizeLimit
	sc.JournalMaxFileBytes = cfg.JournalMaxSizeMB << 20
	sc.JournalMaxBackups = cfg.JournalMaxBackups
	// BookKeeper's GC thread runs every gcWaitTime and compacts within it.
	sc.GCInterval = cfg.GCWaitTime
	sc.Compaction = &ledgerstore.CompactionPolicy{
		MinorThreshold:   cfg.MinorCompactionThreshold,
		MinorInterval:    cfg.MinorCompactionInterval,
		MajorThreshold:   cfg.MajorCompactionThreshold,
		MajorInterval:    cfg.MajorCompactionInterval,
		ForceAllowed:     cfg.ForceAllowCompaction,
		ForceWhenNoSpace: cfg.ForceGCAllowWhenNoSpace,
	}
	for _, k := range storageKeys {
		v, ok := cfg.Props[k.name]
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return sc, fmt.Errorf("config key %s: want an integer: %q", k.name, v)
		}
		if n < 0 && !k.signed {
			return sc, fmt.Errorf("config key %s: want a non-negative integer: %q", k.name, v)
		}
		k.apply(&sc, n)
	}
	return sc, nil
}

// compactionControl is the bookie's side of its store's garbage
// collection and journal (ledgerstore.Store implements it): what it tells
// the store (a full disk, a manual GC, the admin's suspensions) and what it
// reports (compaction state, log marks, the journal queue).
type compactionControl interface {
	SetNoSpace(full bool)
	TriggerCompaction()
	SuspendCompaction(major, minor bool)
	ResumeCompaction(major, minor bool)
	CompactionStatus() ledgerstore.CompactionStatus
	LastLogMarks() []ledgerstore.LogMark
	JournalQueuedRecords() int
}

// openStore opens the bookie's storage on fs (the OS file system if nil),
// replaying the journals (obs receives the journal's measurements), and
// returns it with its close function (flush, checkpoint, close). It runs
// after the cookie check, whose cookie lists exactly the configured
// directories: directories appended since the storage was created were
// accepted there (allowStorageExpansion=true at this or an earlier start,
// or `updatecookie --expandstorage`, as in BookKeeper, where the key only
// relaxes the cookie check), so the storage takes them
// (ledgerstore.Config.AllowExpansion). It still refuses a removed or
// reordered directory, or a new one that is not empty.
func openStore(cfg *Config, log *slog.Logger, obs ledgerstore.Observer, fs vfs.FS) (storage.Store, func(context.Context) error, error) {
	sc, err := StorageConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	sc.Observer = obs
	sc.AllowExpansion = true
	if fs == nil {
		fs = vfs.Default
	}
	for _, d := range append(append([]string(nil), sc.JournalDirs...), sc.LedgerDirs...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	// Ledger directories already full take no entry logs from the start,
	// journal replay included (the state manager's checks take over once
	// the store is open).
	for i, d := range sc.LedgerDirs {
		u, err := fs.GetDiskUsage(d)
		if err != nil {
			log.Warn("reading a ledger directory's disk usage failed; it is taken as writable until the first disk check", "dir", d, "err", err)
			continue
		}
		if u.TotalBytes > 0 && float64(u.TotalBytes-min(u.AvailBytes, u.TotalBytes))/float64(u.TotalBytes) >= cfg.DiskUsageThreshold {
			sc.FullLedgerDirs = append(sc.FullLedgerDirs, i)
			log.Warn("ledger directory full at start: it takes no new entry logs", "dir", d, "threshold", cfg.DiskUsageThreshold)
		}
	}
	st, err := ledgerstore.Open(fs, sc)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range st.DamagedLogs() {
		log.Warn("entry log is damaged before its end; it is kept and never garbage-collected (entries after the damage may be live): "+
			"run `folio shell localconsistencycheck` with the bookie stopped", "file", d.File, "offset", d.Offset, "reason", d.Reason)
	}
	return st, func(context.Context) error { return st.Close() }, nil
}
