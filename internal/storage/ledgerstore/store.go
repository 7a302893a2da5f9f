package ledgerstore

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/index"
	"github.com/foliodb/folio/internal/storage/journal"
)

// Store is the bookie's storage engine; it implements storage.Store. See
// the package comment for the design.
type Store struct {
	// deletions counts ledger deletions begun (DeleteLedger). A batch read
	// that saw it change may have combined two incarnations of a ledger id
	// deleted and created again while it ran (ReadEntries).
	deletions atomic.Uint64

	fs       vfs.FS
	cfg      Config
	storeID  StoreID
	journals []*journalShard
	shards   []*ledgerShard
	ledgers  ledgerMap
	// shardCacheBytes is each ledger directory's write-cache bound.
	shardCacheBytes int64

	// ckptMu serialises Checkpoint (and the deletion protocol built on it).
	ckptMu sync.Mutex

	failedCh chan struct{}
	mu       struct {
		sync.Mutex
		failed  error // first failure; the store is read-only from then on
		closing bool
		closed  bool
	}

	stop chan struct{}
	wg   sync.WaitGroup

	// sweepMu serialises eviction sweeps (evict.go).
	sweepMu sync.Mutex

	// gcTrigger (capacity 1) asks the GC loop for a forced tick.
	gcTrigger chan struct{}
	gcState   struct {
		mu sync.Mutex
		// lastMinor and lastMajor are when the last compaction of each
		// kind ran (Open counts as one: the first comes an interval later).
		lastMinor, lastMajor time.Time
		noSpace              bool
		// suspendMinor and suspendMajor are the admin's requests
		// (SuspendCompaction).
		suspendMinor, suspendMajor bool
		// running is the kind of the tick in progress ("" when none);
		// forcing says it was forced.
		// logsRemoved, bytesRead and bytesWritten total every pass's
		// GCStats since Open (gc_details, the reclaimed-bytes metric).
		logsRemoved, bytesRead, bytesWritten int64
		running                              CompactionKind
		forcing                              bool
		minorCount, majorCount               int64
	}

	// hook, if set (tests only, through setHook), is called at named points
	// of Checkpoint and DeleteLedger, to crash the file system between steps
	// (and between an eviction sweep's chunks).
	// Atomic: tests set it while the background loops run.
	hook atomic.Pointer[func(point string)]
	// stateFault, if set (tests only), is returned by the live operations'
	// index state writes (putState) instead of writing: Pebble takes an
	// unsynced write into its memtable and reports a WAL error only later,
	// so a file-system fault cannot make PutState fail at the call.
	stateFault atomic.Pointer[error]
}

var _ storage.Store = (*Store)(nil)

// journalShard is one journal directory and its checkpoint bookkeeping.
type journalShard struct {
	index int
	dir   string
	j     *journal.Journal

	mu struct {
		sync.Mutex
		// durable is the highest Position whose record is durable in the
		// journal (callbacks run in Position order). Every record at or
		// before it was applied to the write cache / index before it was
		// appended, so a checkpoint that captures durable first and then
		// flushes and syncs covers it.
		durable journal.Position
		// checkpointed is the Position recorded in CHECKPOINT.
		checkpointed journal.Position
	}
}

// AppendDone makes journalShard a journal.Callback for records nobody
// waits for (master keys): it only advances the durable position.
func (jr *journalShard) AppendDone(pos journal.Position, err error) {
	if err == nil {
		jr.advance(pos)
	}
}

func (jr *journalShard) advance(pos journal.Position) {
	jr.mu.Lock()
	if pos.Compare(jr.mu.durable) > 0 {
		jr.mu.durable = pos
	}
	jr.mu.Unlock()
}

func (jr *journalShard) positions() (durable, checkpointed journal.Position) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	return jr.mu.durable, jr.mu.checkpointed
}

// ledgerShard is one ledger directory: entry logs and their index.
type ledgerShard struct {
	index int
	dir   string
	el    *entrylog.Store
	ix    *index.Index
}

// flush writes the shard's write cache to its entry log and index
// (unsynced index: the journal covers it until the next checkpoint).
func (sh *ledgerShard) flush() error {
	if err := sh.el.Flush(sh.ix.PutLocations); err != nil {
		return fmt.Errorf("ledgerstore: flushing write cache of %s: %w", sh.dir, err)
	}
	return nil
}

func (s *Store) journalFor(ledgerID int64) *journalShard {
	return s.journals[uint64(ledgerID)%uint64(len(s.journals))]
}

func (s *Store) shardFor(ledgerID int64) *ledgerShard {
	return s.shards[uint64(ledgerID)%uint64(len(s.shards))]
}

// Open opens (creating if needed) the store in cfg's directories on fs:
// it checks that no part of the store was lost (a *LostError, matching
// ErrDataLost, names what is missing, the evidence and how to recover),
// opens the indexes and entry logs, replays every journal from its
// checkpoint (restoring entries, master keys, fence bits and explicit
// LACs), checkpoints, and only then returns, with the background loops
// running (unless cfg.Manual). A bookie must not serve before Open
// returns.
func Open(fs vfs.FS, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{fs: fs, cfg: cfg, failedCh: make(chan struct{}), stop: make(chan struct{}), gcTrigger: make(chan struct{}, 1)}
	now := cfg.Clock.Now()
	s.gcState.lastMinor, s.gcState.lastMajor = now, now
	if cfg.openHook != nil {
		s.setHook(cfg.openHook)
	}
	if err := s.open(); err != nil {
		s.closeAll()
		return nil, err
	}
	if !cfg.Manual {
		s.startLoops()
	}
	return s, nil
}

func (s *Store) open() error {
	var err error
	// Read what the directories hold and refuse lost parts before anything
	// is created or replayed (see the package comment, "Lost data").
	ev, err := s.inspect()
	if err != nil {
		return err
	}
	elOpts := s.cfg.entrylogOptions(len(ev.ledger))
	s.shardCacheBytes = elOpts.WriteCacheBytes
	// An index swap interrupted by a crash (see finishSwap) must be
	// finished by rebuild-index: opening the old index, or none, and
	// letting a later run swap in a rebuilt index that misses what the
	// bookie did meanwhile, would lose state.
	for _, st := range ev.ledger {
		marker := s.fs.PathJoin(st.dir, rebuildDoneFile)
		if _, err := s.fs.Stat(marker); err == nil {
			return fmt.Errorf("ledgerstore: %s: an index rebuild was interrupted before its rebuilt index was put in place; "+
				"run `folio shell rebuild-index` again to finish it before starting the bookie", marker)
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("ledgerstore: %s: %w", marker, err)
		}
	}
	if err := ev.checkJournals(s.fs); err != nil {
		return err
	}
	if err := ev.checkIndexesExist(s.fs); err != nil {
		return err
	}
	if err := s.mkdirs(); err != nil {
		return err
	}
	for i, st := range ev.ledger {
		sh := &ledgerShard{index: i, dir: st.dir}
		s.shards = append(s.shards, sh)
		if sh.ix, err = s.openIndex(ev, i); err != nil {
			return err
		}
	}
	if err := s.completeStamp(ev, s.cfg.Entropy); err != nil {
		return err
	}
	s.storeID = ev.id
	for _, sh := range s.shards {
		if sh.el, err = entrylog.OpenDirs(s.fs, shardLogDirs(s.fs, s.cfg.LedgerDirs, sh.index), elOpts); err != nil {
			return err
		}
	}
	// The disk checker's verdict from before Open, so that replay does not
	// flush into a full directory.
	for _, p := range s.cfg.FullLedgerDirs {
		s.SetLedgerDirFull(p, true)
	}
	for i, st := range ev.journal {
		jr := &journalShard{index: i, dir: st.dir}
		jr.mu.durable, jr.mu.checkpointed = st.ckpt.pos, st.ckpt.pos
		s.journals = append(s.journals, jr)
		if jr.j, err = journal.Open(s.fs, st.dir, s.cfg.journalOptions(s.fail)); err != nil {
			return err
		}
	}
	for _, jr := range s.journals {
		if err := s.replay(jr); err != nil {
			return err
		}
	}
	// Make what replay rebuilt durable and drop the replayed journal files,
	// so repeated crashes do not lengthen replay.
	return s.Checkpoint()
}

// closeAll releases whatever open() managed to open.
func (s *Store) closeAll() error {
	var errs []error
	for _, jr := range s.journals {
		if jr.j != nil {
			errs = append(errs, jr.j.Close())
		}
	}
	for _, sh := range s.shards {
		if sh.el != nil {
			errs = append(errs, sh.el.Close())
		}
		if sh.ix != nil {
			errs = append(errs, sh.ix.Close())
		}
	}
	return errors.Join(errs...)
}

// fail puts the store in the failed (read-only) state; the first cause
// wins. It is the journals' OnFailure hook, so it must not block.
func (s *Store) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.failed != nil {
		return
	}
	s.mu.failed = err
	close(s.failedCh)
}

// StoreID returns the store's id (recorded in its LAYOUT, CHECKPOINT and
// index stamps).
func (s *Store) StoreID() StoreID { return s.storeID }

// Failed is closed when the store stops accepting writes for good.
func (s *Store) Failed() <-chan struct{} { return s.failedCh }

// Err returns why the store failed, or nil.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

// writable returns nil if the store accepts writes, else an error matching
// storage.ErrReadOnly (with the cause).
func (s *Store) writable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.failed != nil:
		return fmt.Errorf("%w: %w", storage.ErrReadOnly, s.mu.failed)
	case s.mu.closing:
		return fmt.Errorf("%w: store closed", storage.ErrReadOnly)
	}
	return nil
}

// Close stops the background loops, completes the journals' queued
// records, checkpoints (unless the store failed: then the journals keep
// what they hold for the next Open's replay) and closes every file.
// Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		return nil
	}
	s.mu.closing = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	// A sweep in progress (a direct EvictIdleLedgers call) still reads the
	// indexes: wait for it; later ones see closing and stop at once.
	s.sweepMu.Lock()
	s.sweepMu.Unlock()
	var errs []error
	for _, jr := range s.journals {
		errs = append(errs, jr.j.Close())
	}
	if s.Err() == nil {
		errs = append(errs, s.Checkpoint())
	}
	for _, sh := range s.shards {
		errs = append(errs, sh.el.Close(), sh.ix.Close())
	}
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	return errors.Join(errs...)
}

// StepJournals runs one group commit on every journal (ManualJournal
// mode) and returns how many records completed.
func (s *Store) StepJournals() (int, error) {
	total := 0
	var errs []error
	for _, jr := range s.journals {
		n, err := jr.j.Flush()
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// FlushWriteCache writes every ledger directory's write cache to its entry
// log and index (the body of the flush loop). The index is not synced:
// that is the checkpoint's job.
func (s *Store) FlushWriteCache() error {
	for _, sh := range s.shards {
		if err := sh.flush(); err != nil {
			s.fail(err)
			return err
		}
	}
	return nil
}

func (s *Store) startLoops() {
	for _, sh := range s.shards {
		s.wg.Add(1)
		go s.flushLoop(sh)
	}
	s.wg.Add(2)
	go s.checkpointLoop()
	go s.gcLoop()
	if s.cfg.LedgerIdleTime > 0 {
		s.wg.Add(1)
		go s.evictLoop()
	}
}

// evictLoop sweeps idle ledgers' in-memory state every LedgerIdleTime
// (EvictIdleLedgers). A failed index read keeps its ledger and is retried
// at the next sweep; it is not a store failure (nothing was written).
func (s *Store) evictLoop() {
	defer s.wg.Done()
	t := s.cfg.Clock.NewTimer(s.cfg.LedgerIdleTime)
	defer t.Stop()
	var p *evictPacer
	if s.cfg.LedgerEvictionChecksPerSecond > 0 {
		p = newEvictPacer(s.cfg.Clock, s.stop, s.cfg.LedgerEvictionChecksPerSecond)
	}
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
		}
		_, _ = s.sweep(p)
		t.Reset(s.cfg.LedgerIdleTime)
	}
}

// flushLoop flushes a write cache whenever it asks (half full, or an add
// is waiting for space).
func (s *Store) flushLoop(sh *ledgerShard) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-sh.el.FlushWanted():
		}
		if err := sh.flush(); err != nil {
			s.fail(err)
		}
	}
}

// checkpointLoop checkpoints CheckpointInterval after the end of the
// previous checkpoint.
func (s *Store) checkpointLoop() {
	defer s.wg.Done()
	t := s.cfg.Clock.NewTimer(s.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
		}
		// A failure is recorded in Err and Failed by Checkpoint.
		_ = s.Checkpoint()
		t.Reset(s.cfg.CheckpointInterval)
	}
}

// gcLoop runs a GC round GCInterval after the end of the previous one,
// or at once when triggered.
func (s *Store) gcLoop() {
	defer s.wg.Done()
	t := s.cfg.Clock.NewTimer(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
			_, _, _ = s.GCTick(false)
		case <-s.gcTrigger:
			_, _, _ = s.GCTick(true)
		}
		t.Reset(s.cfg.GCInterval)
	}
}

func (s *Store) at(point string) {
	if h := s.hook.Load(); h != nil {
		(*h)(point)
	}
}

// putState writes ledger id's state to sh's index (ops.go's writes; see
// stateFault).
func (s *Store) putState(sh *ledgerShard, id int64, st index.State) error {
	if err := s.stateFault.Load(); err != nil {
		return *err
	}
	return sh.ix.PutState(id, st)
}

// setHook installs (nil: removes) the test hook called by at.
func (s *Store) setHook(h func(point string)) {
	if h == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&h)
}
