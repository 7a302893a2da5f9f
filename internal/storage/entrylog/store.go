package entrylog

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
)

// Options configure a Store. Zero fields take the documented defaults.
type Options struct {
	// WriteCacheBytes bounds the write cache (active plus frozen
	// generation), counting bodies plus a per-entry overhead. Default
	// 64 MiB; BookKeeper's default is 25% of direct memory.
	WriteCacheBytes int64
	// MaxAddWait is how long an Add waits for space in a full write cache
	// before failing with ErrWriteCacheFull. Default 10 s (BookKeeper's
	// dbStorage_maxThrottleTimeMs). Negative: fail at once.
	MaxAddWait time.Duration
	// MaxLogBytes is the size at which the current entry log is sealed and
	// a new one started. Default 1 GiB (BookKeeper's logSizeLimit).
	MaxLogBytes int64
	// ReadCacheBytes bounds the read cache. Default 16 MiB. Negative: none.
	ReadCacheBytes int64
	// ReadAheadEntries bounds how many following entries of the ledger one
	// read-ahead (ReadAhead) caches: BookKeeper's
	// dbStorage_readAheadCacheBatchSize. Default 100. Negative: none.
	ReadAheadEntries int
	// ReadAheadBytes, when positive, also bounds the bytes of one
	// read-ahead batch: BookKeeper's dbStorage_readAheadCacheBatchBytesSize
	// (its default -1 means "count only"). Default 0: bounded by
	// ReadAheadEntries, half the read cache and MaxReadBytes. Negative: no
	// read-ahead at all.
	ReadAheadBytes int64
	// MaxReadBytes bounds one read issued by ReadAhead or ReadMany (a
	// read-ahead span, a coalesced run of records). Default 4 MiB.
	MaxReadBytes int64
	// MaxReadGapBytes is the most bytes of other records ReadMany reads
	// through to join two wanted records into one read. Default 64 KiB.
	MaxReadGapBytes int64
	// WriteBufferBytes is the size of the writes issued while flushing and
	// compacting. Default 1 MiB.
	WriteBufferBytes int
	// Clock is required.
	Clock Clock
	// CompactionLimiter throttles compaction reads and writes. Default:
	// unlimited. See NewRateLimiter.
	CompactionLimiter Limiter
}

func (o *Options) ensureDefaults() {
	if o.WriteCacheBytes <= 0 {
		o.WriteCacheBytes = 64 << 20
	}
	if o.MaxAddWait == 0 {
		o.MaxAddWait = 10 * time.Second
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = 1 << 30
	}
	if o.ReadCacheBytes == 0 {
		o.ReadCacheBytes = 16 << 20
	}
	if o.ReadAheadEntries == 0 {
		o.ReadAheadEntries = 100
	}
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = 4 << 20
	}
	if o.MaxReadGapBytes <= 0 {
		o.MaxReadGapBytes = 64 << 10
	}
	if o.WriteBufferBytes <= 0 {
		o.WriteBufferBytes = 1 << 20
	}
	if o.CompactionLimiter == nil {
		o.CompactionLimiter = unlimited{}
	}
}

// logFile is one entry log known to the store. Readers hold mu.RLock while
// using f; removal takes mu.Lock, so a file is never closed under a reader.
type logFile struct {
	id   uint64
	dir  *logDir
	path string
	mu   sync.RWMutex
	f    vfs.File // read handle; nil once removed
	// Below: guarded by Store.mu.
	removed bool
	size    int64 // bytes of verified records + header (scan end or written and synced)
	// damage is set by Open for a log whose records do not verify to the
	// end of the file and whose tail is not a crash's torn tail: the
	// records after the damage may be live and indexed, so the log is never
	// compacted or removed (GC counts it in CompactStats.LogsDamaged).
	damage  *CorruptionError
	ledgers map[int64]int64
	total   int64 // sum of ledgers: record bytes (headers + bodies)
}

// logWriter appends to one entry log. It is owned by whoever holds the
// corresponding store mutex (flushMu for the current log, compactMu for a
// compaction output).
type logWriter struct {
	lf     *logFile
	f      vfs.File
	offset int64 // file size after everything written so far
	buf    []byte
	synced bool
}

// logDir is one directory of the store's entry logs (package comment,
// "Directories and spill").
type logDir struct {
	index int
	path  string
	// full: the directory takes no new entry logs (SetDirFull).
	full atomic.Bool
	// made: the directory exists and its parent was synced since Open
	// found or created it. Guarded by Store.dirMu.
	made bool
}

// Store is the entry-log store: write cache, entry logs, read cache and
// compaction. All methods are safe for concurrent use. Lock order:
// compactMu, then flushMu, then dropMu, then mu, then a logFile.mu;
// dirMu is taken alone.
type Store struct {
	fs   vfs.FS
	dirs []*logDir
	opts Options
	// dirMu guards logDir.made and lastDir.
	dirMu sync.Mutex
	// lastDir is where the last log was created: where new logs go while
	// every directory is full.
	lastDir *logDir

	flushWanted chan struct{}

	// beforeRead, if set (tests only, before any read), runs in ReadAhead
	// and ReadMany between finding a log and reading it.
	beforeRead func()

	// flushMu serialises Flush (one writer of the current log).
	flushMu sync.Mutex
	current *logWriter // guarded by flushMu
	// sealedInFlush lists logs sealed by the running Flush; guarded by
	// flushMu. Flush releases them to GC when it returns.
	sealedInFlush []uint64
	// dropMu is held by Flush across filtering and applying placements and
	// by DropLedger, so a dropped ledger is never indexed after DropLedger.
	dropMu sync.Mutex
	// compactMu serialises GC and CompactLog.
	compactMu sync.Mutex

	mu struct {
		sync.Mutex
		closed    bool
		active    *generation
		frozen    *generation // nil unless a flush is in progress or failed
		freeChunk [][]byte
		// spaceFreed is closed (and replaced) whenever the write cache
		// shrinks; waiting adds select on it.
		spaceFreed chan struct{}
		readCache  *readCache
		// fillEpoch changes whenever a read-ahead fill that started before
		// might cache something no longer right: a DropLedger, or a flush
		// releasing its generation (the entries in it were just indexed at
		// new locations). See readCache.
		fillEpoch uint64
		logs      map[uint64]*logFile
		removed   map[uint64]struct{}
		nextLogID uint64
		// writing holds logs open for writing (current or compaction
		// output); they are not sealed and never compacted.
		writing map[uint64]struct{}
	}
}

// Open opens (creating dir if needed) the entry logs in dir: OpenDirs
// with one directory.
func Open(fs vfs.FS, dir string, opts Options) (*Store, error) {
	return OpenDirs(fs, []string{dir}, opts)
}

// OpenDirs opens an entry-log store whose logs live in several
// directories with one log-id space (package comment, "Directories and
// spill"). dirs[0] is the store's own directory, created if needed; the
// others are read if they exist and created when a log first goes there.
// Open removes leftover compaction outputs and empty logs from a crash,
// scans every log to rebuild per-ledger usage, and never appends to an
// existing log: the first Flush starts a new one. The same log id in two
// directories is a *CorruptionError naming both files.
func OpenDirs(fs vfs.FS, dirs []string, opts Options) (*Store, error) {
	opts.ensureDefaults()
	if opts.Clock == nil {
		return nil, errors.New("entrylog: Options.Clock is required")
	}
	if len(dirs) == 0 {
		return nil, errors.New("entrylog: no directory given")
	}
	s := &Store{fs: fs, opts: opts, flushWanted: make(chan struct{}, 1)}
	for i, d := range dirs {
		if slices.Contains(dirs[:i], d) {
			return nil, fmt.Errorf("entrylog: directory %s given twice", d)
		}
		s.dirs = append(s.dirs, &logDir{index: i, path: d})
	}
	s.lastDir = s.dirs[0]
	s.mu.active = newGeneration(nil)
	s.mu.spaceFreed = make(chan struct{})
	s.mu.readCache = newReadCache(opts.ReadCacheBytes)
	s.mu.logs = make(map[uint64]*logFile)
	s.mu.removed = make(map[uint64]struct{})
	s.mu.writing = make(map[uint64]struct{})
	if err := s.makeDir(s.dirs[0]); err != nil {
		return nil, err
	}
	for _, d := range s.dirs {
		if err := s.openDir(d); err != nil {
			s.closeLogs()
			return nil, err
		}
	}
	if s.mu.nextLogID == 0 {
		s.mu.nextLogID = 1
	}
	return s, nil
}

// makeDir creates d if needed and syncs its parent, so that a newly
// created directory survives a crash (the logs' own directory entries are
// synced as they are created). Once per directory and Open, also for a
// directory that exists: a crash may have come between its creation and
// the parent's sync.
func (s *Store) makeDir(d *logDir) error {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if d.made {
		return nil
	}
	if err := s.fs.MkdirAll(d.path, 0o755); err != nil {
		return fmt.Errorf("entrylog: create %s: %w", d.path, err)
	}
	if err := syncDir(s.fs, s.fs.PathDir(d.path)); err != nil {
		return err
	}
	d.made = true
	return nil
}

// openDir registers the logs in d (a missing directory holds none),
// removing a crash's leftovers.
func (s *Store) openDir(d *logDir) error {
	names, err := s.fs.List(d.path)
	if errors.Is(err, iofs.ErrNotExist) && d.index > 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("entrylog: list %s: %w", d.path, err)
	}
	slices.Sort(names)
	changed := false
	for _, name := range names {
		path := s.fs.PathJoin(d.path, name)
		if strings.HasSuffix(name, compactingSufix) {
			if err := s.fs.Remove(path); err != nil {
				return fmt.Errorf("entrylog: remove unfinished compaction output %s: %w", path, err)
			}
			changed = true
			continue
		}
		id, ok := parseLogFileName(name)
		if !ok {
			continue
		}
		if other, dup := s.mu.logs[id]; dup {
			return duplicateLog(id, other.path, path)
		}
		s.mu.nextLogID = max(s.mu.nextLogID, id+1)
		lf, empty, err := s.openLog(id, path)
		if err != nil {
			return err
		}
		if empty {
			// Created but its header never reached the disk: no record was
			// ever written to it, so nothing can refer to it.
			if err := s.fs.Remove(path); err != nil {
				return fmt.Errorf("entrylog: remove empty log %s: %w", path, err)
			}
			changed = true
			continue
		}
		lf.dir = d
		s.mu.logs[id] = lf
	}
	if changed {
		if err := syncDir(s.fs, d.path); err != nil {
			return err
		}
	}
	return nil
}

// SetDirFull marks directory i (its index in OpenDirs's list) full (it
// takes no new entry logs; the current log moves elsewhere at the next
// Flush) or writable again. Idempotent; an index out of range is ignored.
func (s *Store) SetDirFull(i int, full bool) {
	if i >= 0 && i < len(s.dirs) {
		s.dirs[i].full.Store(full)
	}
}

// pickDir is where a new log goes: the own directory unless it is full,
// else the writable directory with the most free space, read from the
// directory or, before it exists, its nearest existing ancestor (ties: the
// lowest index; a directory whose usage cannot be read is skipped). When every
// directory is full the store keeps writing where it is: in cur's
// directory if cur is not nil, else where the last log was created.
func (s *Store) pickDir(cur *logDir) *logDir {
	if !s.dirs[0].full.Load() {
		return s.dirs[0]
	}
	var best *logDir
	var bestFree uint64
	for _, d := range s.dirs[1:] {
		if d.full.Load() {
			continue
		}
		u, err := s.fs.GetDiskUsage(s.usagePath(d))
		if err != nil {
			continue
		}
		if best == nil || u.AvailBytes > bestFree {
			best, bestFree = d, u.AvailBytes
		}
	}
	if best != nil {
		return best
	}
	for _, d := range s.dirs[1:] {
		if !d.full.Load() {
			return d // writable, usage unknown
		}
	}
	if cur != nil {
		return cur
	}
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	return s.lastDir
}

// usagePath is the path whose file system's usage stands for d's: d
// itself once it exists, else its nearest existing ancestor (a spill
// directory is created only when its first log goes there, and statfs(2)
// fails for a path that does not exist, which would leave the most-free
// rule comparing only the directories already used).
func (s *Store) usagePath(d *logDir) string {
	p := d.path
	for {
		if _, err := s.fs.Stat(p); err == nil {
			return p
		}
		parent := s.fs.PathDir(p)
		if parent == p {
			return d.path
		}
		p = parent
	}
}

// writableElsewhere reports whether a directory other than d takes new
// logs.
func (s *Store) writableElsewhere(d *logDir) bool {
	for _, o := range s.dirs {
		if o != d && !o.full.Load() {
			return true
		}
	}
	return false
}

// Dirs returns the directories of the store's entry logs, as given to
// OpenDirs.
func (s *Store) Dirs() []string {
	out := make([]string, len(s.dirs))
	for i, d := range s.dirs {
		out[i] = d.path
	}
	return out
}

// LogDir returns the directory holding log id, if the store has it.
func (s *Store) LogDir(id uint64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, ok := s.mu.logs[id]
	if !ok {
		return "", false
	}
	return lf.dir.path, true
}

// openLog opens log id for reading and scans it. empty reports a file
// shorter than the header or all zero (a crash right after creation,
// before the header was synced). A zero header followed by anything but
// zeros is damage: openLog returns a *CorruptionError and Open fails,
// keeping the file, as for any header that does not verify.
func (s *Store) openLog(id uint64, path string) (lf *logFile, empty bool, err error) {
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("entrylog: open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("entrylog: stat %s: %w", path, err)
	}
	var hdr [HeaderSize]byte
	if fi.Size() < HeaderSize {
		f.Close()
		return nil, true, nil
	}
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("entrylog: read header of %s: %w", path, err)
	}
	if hdr == ([HeaderSize]byte{}) {
		// createLog syncs the header before writing any record: a zero
		// header is a crash artifact only if nothing but zeros follows.
		err := zeroHeaderError(f, path, fi.Size())
		f.Close()
		if ce, ok := err.(*CorruptionError); ok && ce.Torn {
			return nil, true, nil
		}
		return nil, false, err
	}
	if reason := checkHeader(hdr[:], id); reason != "" {
		f.Close()
		return nil, false, &CorruptionError{File: path, Offset: 0, Reason: reason}
	}
	lf = &logFile{id: id, path: path, f: f, ledgers: make(map[int64]int64)}
	end, err := scanLog(f, path, fi.Size(), unlimited{}, func(r record, _ int64, size int) error {
		lf.ledgers[r.ledgerID] += int64(size)
		lf.total += int64(size)
		return nil
	})
	if err != nil {
		f.Close()
		return nil, false, err
	}
	lf.size = end
	if end < fi.Size() {
		// Verified records end early. A torn tail (the last record cut by
		// the end of the file, nothing verifiable after it) is the end of
		// the log's data. Anything else is damage with possibly live
		// records after it: keep the log out of GC.
		terr := tailError(f, path, end, fi.Size())
		ce, ok := terr.(*CorruptionError)
		if !ok {
			f.Close()
			return nil, false, terr
		}
		if !ce.Torn {
			lf.damage = ce
		}
	}
	return lf, false, nil
}

// scanLog calls fn for every verified record of the file after the header,
// in order, and returns the offset where verified data ends (the first
// record that is torn or does not verify, or the file size). Reads go
// through lim. The record passed to fn aliases a buffer reused afterwards.
func scanLog(f vfs.File, path string, fileSize int64, lim Limiter, fn func(r record, off int64, size int) error) (int64, error) {
	return scanFrom(f, path, HeaderSize, fileSize, lim, fn)
}

// scanFrom is scanLog starting at offset start (a record boundary).
func scanFrom(f vfs.File, path string, start, fileSize int64, lim Limiter, fn func(r record, off int64, size int) error) (int64, error) {
	const chunk = 256 << 10
	buf := make([]byte, 0, chunk)
	off := start // file offset of buf[0]
	for {
		r, total, need, reason := parseRecord(buf)
		if reason != "" {
			return off, nil
		}
		if need > 0 {
			if off+int64(len(buf)) >= fileSize {
				return off, nil // torn tail
			}
			if off+int64(need) > fileSize {
				return off, nil
			}
			want := max(need, chunk)
			if cap(buf) < want {
				nb := make([]byte, len(buf), want)
				copy(nb, buf)
				buf = nb
			}
			n := min(int64(want-len(buf)), fileSize-off-int64(len(buf)))
			if err := lim.Wait(n); err != nil {
				return off, err
			}
			start := len(buf)
			buf = buf[:start+int(n)]
			if _, err := f.ReadAt(buf[start:], off+int64(start)); err != nil && !errors.Is(err, io.EOF) {
				return off, fmt.Errorf("entrylog: read %s at offset %d: %w", path, off+int64(start), err)
			}
			continue
		}
		if err := fn(r, off, total); err != nil {
			return off, err
		}
		off += int64(total)
		// Shift the unconsumed tail to the front of the buffer.
		rest := copy(buf, buf[total:])
		buf = buf[:rest]
	}
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("entrylog: open dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("entrylog: sync dir %s: %w", dir, err)
	}
	return nil
}

func (s *Store) closeLogs() {
	for _, lf := range s.mu.logs {
		lf.mu.Lock()
		if lf.f != nil {
			lf.f.Close()
			lf.f = nil
		}
		lf.mu.Unlock()
	}
}

// Close releases the files. Entries still in the write cache are dropped
// (the journal holds them); call Flush first for a clean shutdown.
func (s *Store) Close() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	close(s.mu.spaceFreed)
	var err error
	if s.current != nil {
		err = s.current.f.Close()
		s.current = nil
	}
	s.closeLogs()
	return err
}

// FlushWanted receives a value when the write cache is half full or an
// Add is waiting for space: the flush loop should call Flush now rather
// than at its next interval.
func (s *Store) FlushWanted() <-chan struct{} { return s.flushWanted }

func (s *Store) signalFlush() {
	select {
	case s.flushWanted <- struct{}{}:
	default:
	}
}

// Add copies body into the write cache as entry (ledgerID, entryID),
// replacing a cached copy of the same entry. It does not touch the disk.
// When the cache has no room it signals FlushWanted and waits up to
// Options.MaxAddWait (on the Clock) for a flush to free space, then fails
// with ErrWriteCacheFull. body is not retained.
func (s *Store) Add(ledgerID, entryID int64, body []byte) error {
	if ledgerID < 0 || entryID < 0 {
		return fmt.Errorf("%w: ledger %d entry %d", ErrInvalidID, ledgerID, entryID)
	}
	need := int64(len(body)) + entryOverheadBytes
	if len(body) > MaxEntryBytes || need > s.opts.WriteCacheBytes {
		return fmt.Errorf("%w: %d bytes (write cache %d bytes, record limit %d)",
			ErrEntryTooLarge, len(body), s.opts.WriteCacheBytes, MaxEntryBytes)
	}
	var deadline clock.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	s.mu.Lock()
	for {
		if s.mu.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		if s.usedLocked()+need <= s.opts.WriteCacheBytes {
			break
		}
		wake := s.mu.spaceFreed
		s.mu.Unlock()
		s.signalFlush()
		if s.opts.MaxAddWait < 0 {
			return fmt.Errorf("%w: %d bytes cached, limit %d", ErrWriteCacheFull, s.used(), s.opts.WriteCacheBytes)
		}
		if deadline == nil {
			deadline = s.opts.Clock.NewTimer(s.opts.MaxAddWait)
		}
		select {
		case <-wake:
		case <-deadline.C():
			return fmt.Errorf("%w: waited %v, %d bytes cached, limit %d",
				ErrWriteCacheFull, s.opts.MaxAddWait, s.used(), s.opts.WriteCacheBytes)
		}
		s.mu.Lock()
	}
	g := s.mu.active
	k := entryKey{ledgerID, entryID}
	g.put(k, body, &s.mu.freeChunk)
	// A rewrite must not be shadowed by an older read-ahead copy (readCache).
	s.mu.readCache.remove(k)
	half := g.bytes >= s.opts.WriteCacheBytes/2
	s.mu.Unlock()
	if half {
		s.signalFlush()
	}
	return nil
}

func (s *Store) usedLocked() int64 {
	n := s.mu.active.bytes
	if s.mu.frozen != nil {
		n += s.mu.frozen.bytes
	}
	return n
}

func (s *Store) used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usedLocked()
}

// CachedBytes reports the bytes charged in the write cache.
func (s *Store) CachedBytes() int64 { return s.used() }

// ReadCached returns a copy of the entry if it is in the write cache
// (not yet flushed, or being flushed). The caller owns the result.
func (s *Store) ReadCached(ledgerID, entryID int64) ([]byte, bool) {
	k := entryKey{ledgerID, entryID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.mu.active.get(k); ok {
		return append([]byte(nil), b...), true
	}
	if b, ok := s.mu.frozen.get(k); ok {
		return append([]byte(nil), b...), true
	}
	return nil, false
}

// Read returns the body of entry (ledgerID, entryID) stored at loc (from
// the index), read from the entry log: ReadAhead with nothing to read
// ahead. The read cache is not consulted (ReadCachedEntry is, before the
// index lookup). The caller owns the result. Errors: ErrLogRemoved (look
// loc up again), ErrNoLog, a *CorruptionError (the record at loc is not
// that entry or does not verify), or an I/O error. Read never reports "no
// such entry": only the index can say an entry does not exist.
func (s *Store) Read(ledgerID, entryID int64, loc Location) ([]byte, error) {
	return s.ReadAhead(ledgerID, Want{EntryID: entryID, Loc: loc}, nil, 0)
}

// Want is an entry to read and the location the index holds for it.
type Want struct {
	EntryID int64
	Loc     Location
}

// Result is the outcome of reading one Want: a body or an error (the
// errors Read returns).
type Result struct {
	Body []byte
	Err  error
}

// FillEpoch returns the token a read-ahead fill must pass to ReadAhead:
// take it BEFORE looking the locations up in the index. A fill whose token
// is outdated (a DropLedger or a flush released the write cache since) is
// not cached (readCache explains why).
func (s *Store) FillEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.fillEpoch
}

// ReadCachedEntry returns a copy of the entry from the write cache (not yet
// flushed, or being flushed), else from the read cache. The write cache
// comes first: it holds the newest copy. A miss says nothing about
// existence: the caller asks the index next.
func (s *Store) ReadCachedEntry(ledgerID, entryID int64) ([]byte, bool) {
	k := entryKey{ledgerID, entryID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.mu.active.get(k); ok {
		return append([]byte(nil), b...), true
	}
	if b, ok := s.mu.frozen.get(k); ok {
		return append([]byte(nil), b...), true
	}
	if b, ok := s.mu.readCache.get(k); ok {
		return append([]byte(nil), b...), true
	}
	return nil, false
}

// ReadAhead reads target as Read does and, in the same read from the entry
// log, the records at the locations in next (the following entries of the
// ledger, as the index maps them, in entry order), caching those that
// verify in the read cache, BookKeeper's DbLedgerStorage read-ahead. It
// reads one span from target's offset: next is taken in order while in
// the same log after target, within Options.MaxReadBytes of target's
// offset, and within the batch bounds (ReadAheadEntries, ReadAheadBytes if
// positive, half the read cache); records of other ledgers inside the
// span are read through. epoch is FillEpoch taken before the index lookup.
//
// The bytes a read returns before failing are valid: an I/O error past
// target's record does not fail target (nothing is cached then), and one
// inside it is reported only if a read of target alone fails too.
//
// Only target's outcome is reported. A following record that is damaged,
// beyond the end of the file, or not the entry the index named is simply
// not cached: reading that entry later goes to the log and reports the
// damage there, so read-ahead never turns damage into a miss or a wrong
// body, and never caches it.
func (s *Store) ReadAhead(ledgerID int64, target Want, next []Want, epoch uint64) ([]byte, error) {
	lf, err := s.logFor(ledgerID, target)
	if err != nil {
		return nil, err
	}
	loc := target.Loc
	want := int64(RecordHeaderSize) + int64(loc.Size)
	span := want
	var ahead []Want
	if s.opts.ReadAheadEntries > 0 && s.opts.ReadAheadBytes >= 0 && s.opts.ReadCacheBytes > 0 {
		budget := s.opts.ReadCacheBytes / 2
		if s.opts.ReadAheadBytes > 0 {
			budget = min(budget, s.opts.ReadAheadBytes)
		}
		var bytes int64
		need := want // record bytes wanted in the span
		for _, w := range next {
			if len(ahead) >= s.opts.ReadAheadEntries || bytes >= budget {
				break
			}
			rec := int64(RecordHeaderSize) + int64(w.Loc.Size)
			end := w.Loc.Offset + rec - loc.Offset
			if w.Loc.LogID != loc.LogID || w.Loc.Offset < loc.Offset+want || end > s.opts.MaxReadBytes ||
				end > 4*(need+rec)+s.opts.MaxReadGapBytes {
				// Another log, before target (written out of order), too
				// far, or so sparse among other ledgers' records that the
				// span would be mostly theirs (at most 4 bytes read per
				// byte wanted, plus one gap): BookKeeper's read-ahead also
				// stops at another log.
				break
			}
			ahead = append(ahead, w)
			need += rec
			bytes += int64(w.Loc.Size) + entryOverheadBytes
			span = max(span, end)
		}
	}
	buf := make([]byte, span)
	if s.beforeRead != nil {
		s.beforeRead()
	}
	lf.mu.RLock()
	if lf.f == nil {
		lf.mu.RUnlock()
		return nil, fmt.Errorf("%w: %s", ErrLogRemoved, loc)
	}
	got, err := lf.f.ReadAt(buf, loc.Offset)
	lf.mu.RUnlock()
	// [0, got) is valid data whatever err says: a pread over a bad sector
	// returns the bytes before it and then the error, which concerns only
	// the records reaching past got.
	if int64(got) < want {
		switch {
		case err == nil || errors.Is(err, io.EOF):
			return nil, &CorruptionError{File: lf.path, Offset: loc.Offset,
				Reason: fmt.Sprintf("record of ledger %d entry %d runs past the end of the file", ledgerID, target.EntryID)}
		case span > want:
			// The span's read failed before target's end; a failure
			// (transient, or one that only a span-sized read meets) must
			// not fail target while a read of target alone can succeed.
			return s.ReadAhead(ledgerID, target, nil, 0)
		}
		return nil, fmt.Errorf("entrylog: read %s at offset %d: %w", lf.path, loc.Offset, err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		// Target is whole; the records past got are not, and the device
		// just failed a read: report target and leave the rest to be read
		// (and their damage reported) on their own.
		ahead = nil
	}
	buf = buf[:got]
	body, err := verifyRecord(lf.path, buf[:want], loc, ledgerID, target.EntryID)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), body...)
	if len(ahead) > 0 {
		s.fill(ledgerID, ahead, buf, loc.Offset, lf.path, epoch)
	}
	return out, nil
}

// fill caches the records of ahead found in buf (read from the log at
// base) that verify, if epoch is still current. The bodies are copied into
// one compact slab so the cache does not pin the span's other bytes.
func (s *Store) fill(ledgerID int64, ahead []Want, buf []byte, base int64, path string, epoch uint64) {
	type found struct {
		k    entryKey
		body []byte
	}
	fs := make([]found, 0, len(ahead))
	total := 0
	for _, w := range ahead {
		rel := w.Loc.Offset - base
		end := rel + int64(RecordHeaderSize) + int64(w.Loc.Size)
		if end > int64(len(buf)) {
			break
		}
		body, err := verifyRecord(path, buf[rel:end], w.Loc, ledgerID, w.EntryID)
		if err != nil {
			continue
		}
		fs = append(fs, found{entryKey{ledgerID, w.EntryID}, body})
		total += len(body)
	}
	slab := make([]byte, 0, total)
	for i := range fs {
		start := len(slab)
		slab = append(slab, fs[i].body...)
		fs[i].body = slab[start:len(slab):len(slab)]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.fillEpoch != epoch || s.mu.closed {
		return
	}
	for _, f := range fs {
		if _, ok := s.mu.active.get(f.k); ok {
			continue
		}
		if _, ok := s.mu.frozen.get(f.k); ok {
			continue
		}
		s.mu.readCache.put(f.k, f.body)
	}
}

// ReadMany reads entries of one ledger at the index locations in wants and
// returns their outcomes in the same order (results[i] for wants[i]). It
// reads in (log, offset) order, joining records of one log into one read
// of at most Options.MaxReadBytes while each gap is at most
// Options.MaxReadGapBytes and the read stays mostly this ledger's (at most
// 4 bytes read per byte wanted, plus one gap, as ReadAhead) and the gaps
// read through in all stay within the records' own bytes plus one gap: a
// run of a ledger's entries written by one flush is one read, sparse
// entries among other ledgers' records cost about their own bytes, and a
// call reads at most twice the bytes of its records plus
// Options.MaxReadGapBytes. Each record is
// verified as Read verifies it; an error is the error Read would return
// for that entry, never "no such entry". The read cache is neither
// consulted nor filled (the caller consumes the bodies). The bodies of one
// read share one compact buffer holding only bodies, so a caller retaining
// a body pins at most the bodies read with it; the caller owns them.
func (s *Store) ReadMany(ledgerID int64, wants []Want) []Result {
	res := make([]Result, len(wants))
	files := make([]*logFile, len(wants))
	order := make([]int, 0, len(wants))
	for i, w := range wants {
		lf, err := s.logFor(ledgerID, w)
		if err != nil {
			res[i].Err = err
			continue
		}
		files[i] = lf
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		la, lb := wants[a].Loc, wants[b].Loc
		if c := cmp.Compare(la.LogID, lb.LogID); c != 0 {
			return c
		}
		return cmp.Compare(la.Offset, lb.Offset)
	})
	// Bytes of other records the whole call may read through: as many as
	// its records' own, plus one gap.
	gapBudget := s.opts.MaxReadGapBytes
	for _, i := range order {
		gapBudget += recordEnd(wants[i].Loc) - wants[i].Loc.Offset
	}
	for len(order) > 0 {
		first := wants[order[0]].Loc
		end := recordEnd(first)
		need := end - first.Offset // record bytes wanted in the run
		n := 1
		for ; n < len(order); n++ {
			l := wants[order[n]].Loc
			rec := recordEnd(l) - l.Offset
			span := recordEnd(l) - first.Offset
			if l.LogID != first.LogID || l.Offset < end || l.Offset-end > s.opts.MaxReadGapBytes ||
				span > s.opts.MaxReadBytes || span > 4*(need+rec)+s.opts.MaxReadGapBytes ||
				l.Offset-end > gapBudget {
				// l.Offset < end: overlapping locations (damaged index);
				// read it on its own so the check names it.
				break
			}
			gapBudget -= l.Offset - end
			end = recordEnd(l)
			need += rec
		}
		s.readRun(ledgerID, wants, order[:n], files[order[0]], first.Offset, end, res)
		order = order[n:]
	}
	return res
}

func recordEnd(l Location) int64 { return l.Offset + int64(RecordHeaderSize) + int64(l.Size) }

// readRun reads [start, end) of lf once and verifies each of the wants at
// the indexes in run (in offset order), setting their results; the bodies
// that verify are copied into one slab. The bytes read before a failed
// read's end are valid whatever its error: only the records reaching past
// them fail, and when the run has more than one record each of those is
// read again on its own, so a bad sector fails only the records over it.
func (s *Store) readRun(ledgerID int64, wants []Want, run []int, lf *logFile, start, end int64, res []Result) {
	buf := make([]byte, end-start)
	if s.beforeRead != nil {
		s.beforeRead()
	}
	lf.mu.RLock()
	var got int
	var err error
	if lf.f == nil {
		err = fmt.Errorf("%w: %s", ErrLogRemoved, wants[run[0]].Loc)
	} else {
		got, err = lf.f.ReadAt(buf, start)
	}
	lf.mu.RUnlock()
	if errors.Is(err, io.EOF) {
		err = nil // records past got are reported one by one below
	}
	var retry []int
	bodies := 0
	for _, i := range run {
		w := wants[i]
		rel := w.Loc.Offset - start
		recEnd := rel + int64(RecordHeaderSize) + int64(w.Loc.Size)
		switch {
		case recEnd <= int64(got):
			res[i].Body, res[i].Err = verifyRecord(lf.path, buf[rel:recEnd:recEnd], w.Loc, ledgerID, w.EntryID)
			bodies += len(res[i].Body)
		case errors.Is(err, ErrLogRemoved):
			res[i].Err = err
		case err != nil && len(run) > 1:
			retry = append(retry, i)
		case err != nil:
			res[i].Err = fmt.Errorf("entrylog: read %s at offset %d: %w", lf.path, w.Loc.Offset, err)
		default:
			res[i].Err = &CorruptionError{File: lf.path, Offset: w.Loc.Offset,
				Reason: fmt.Sprintf("record of ledger %d entry %d runs past the end of the file", ledgerID, w.EntryID)}
		}
	}
	slab := make([]byte, 0, bodies)
	for _, i := range run {
		if b := res[i].Body; b != nil {
			at := len(slab)
			slab = append(slab, b...)
			res[i].Body = slab[at:len(slab):len(slab)]
		}
	}
	for _, i := range retry {
		s.readRun(ledgerID, wants, []int{i}, lf, wants[i].Loc.Offset, recordEnd(wants[i].Loc), res)
	}
}

// logFor returns the open log holding w, or the error Read reports.
func (s *Store) logFor(ledgerID int64, w Want) (*logFile, error) {
	s.mu.Lock()
	lf, ok := s.mu.logs[w.Loc.LogID]
	_, removed := s.mu.removed[w.Loc.LogID]
	closed := s.mu.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case removed:
		return nil, fmt.Errorf("%w: %s", ErrLogRemoved, w.Loc)
	case !ok:
		return nil, fmt.Errorf("%w: %s (ledger %d entry %d)", ErrNoLog, w.Loc, ledgerID, w.EntryID)
	}
	return lf, nil
}

// verifyRecord checks that rec (exactly the bytes at loc) is the record of
// (ledgerID, entryID) with loc.Size body bytes and returns its body
// (aliasing rec), or a *CorruptionError naming path and offset.
func verifyRecord(path string, rec []byte, loc Location, ledgerID, entryID int64) ([]byte, error) {
	r, total, _, reason := parseRecord(rec)
	switch {
	case reason != "":
	case total == 0:
		reason = "truncated record"
	case r.ledgerID != ledgerID || r.entryID != entryID:
		reason = fmt.Sprintf("record holds ledger %d entry %d, want ledger %d entry %d", r.ledgerID, r.entryID, ledgerID, entryID)
	case len(r.body) != int(loc.Size):
		reason = fmt.Sprintf("record body is %d bytes, index says %d", len(r.body), loc.Size)
	}
	if reason != "" {
		return nil, &CorruptionError{File: path, Offset: loc.Offset, Reason: reason}
	}
	return r.body, nil
}

// DropLedger forgets ledgerID in the write and read caches, so its cached
// entries are never flushed or returned again. It waits for an in-progress
// flush to finish applying placements. Call it before deleting the ledger
// from the index. Records already in entry logs are reclaimed by GC once
// the liveness predicate reports the ledger dead.
func (s *Store) DropLedger(ledgerID int64) {
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.usedLocked()
	s.mu.active.removeLedger(ledgerID)
	if g := s.mu.frozen; g != nil {
		if g.dropped == nil {
			g.dropped = make(map[int64]struct{})
		}
		g.dropped[ledgerID] = struct{}{}
	}
	s.mu.readCache.removeLedger(ledgerID)
	s.mu.fillEpoch++
	if s.usedLocked() < before {
		s.wakeAddersLocked()
	}
}

// ForgetCached drops ledgerID's entries from the read cache and keeps any
// read-ahead in flight from caching (fillEpoch). The integrator calls it
// after deleting the ledger from the index: a read-ahead that started
// between DropLedger and that deletion walked index entries that are gone
// now, and must not leave them cached for a re-created ledger of the same
// id.
func (s *Store) ForgetCached(ledgerID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.readCache.removeLedger(ledgerID)
	s.mu.fillEpoch++
}

func (s *Store) wakeAddersLocked() {
	if s.mu.closed {
		return
	}
	close(s.mu.spaceFreed)
	s.mu.spaceFreed = make(chan struct{})
}

// Flush is the write-cache flush loop body. It freezes the active
// generation (or retries a frozen one left by a failed flush), writes its
// entries sorted by (ledger, entry) to the current entry log (rotating at
// Options.MaxLogBytes), fsyncs, and calls apply with the placements. apply
// must record them in the index (a NoSync write is enough: the journal
// covers them until the next checkpoint, which syncs the index) and must
// not call back into DropLedger or Flush. Only after apply returns nil is
// the frozen generation released, so an entry is always readable from the
// cache or through the index. On any error the generation stays frozen and
// readable, and the next Flush writes it again into a new log (a log whose
// write or sync failed is never written again). ENOSPC in a directory is
// handled within the Flush: the directory is marked full (SetDirFull) and
// the generation is written again into another writable one.
//
// Flush returns nil at once if there is nothing to flush.
func (s *Store) Flush(apply func([]Placement) error) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.mu.frozen == nil {
		if len(s.mu.active.entries) == 0 {
			s.mu.Unlock()
			return nil
		}
		s.mu.frozen = s.mu.active
		s.mu.active = newGeneration(s.mu.freeChunk)
		if len(s.mu.freeChunk) > 0 {
			s.mu.freeChunk = s.mu.freeChunk[:len(s.mu.freeChunk)-1]
		}
	}
	g := s.mu.frozen
	s.mu.Unlock()
	defer s.releaseSealed()

	// The frozen generation is immutable; sort a copy of its entry list.
	order := slices.Clone(g.entries)
	slices.SortFunc(order, func(a, b cachedEntry) int {
		if c := cmp.Compare(a.key.ledgerID, b.key.ledgerID); c != 0 {
			return c
		}
		return cmp.Compare(a.key.entryID, b.key.entryID)
	})
	// A directory out of space (ENOSPC creating or writing a log) is
	// marked full and the generation is written again from its start into
	// another writable directory: it is still frozen in memory, and the
	// records of the failed attempt (in the abandoned log, or in a log it
	// sealed) are indexed nowhere, so GC removes them. A directory is
	// retried away from at most once per Flush (failed), whether or not
	// the disk checker marked it full meanwhile (its verdict can land
	// between picking the directory and the ENOSPC), so the loop ends;
	// with no writable directory left the error is returned as any other.
	var placements []Placement
	var usage map[*logFile]map[int64]int64
	failed := make(map[*logDir]bool, len(s.dirs))
	for {
		var err error
		placements, usage, err = s.writeFrozen(order)
		if err == nil {
			break
		}
		var de *dirError
		if !errors.As(err, &de) || failed[de.dir] || !s.markNoSpace(de.dir, err) {
			return err
		}
		failed[de.dir] = true
	}
	s.mu.Lock()
	for lf, u := range usage {
		for l, n := range u {
			lf.ledgers[l] += n
			lf.total += n
		}
	}
	if s.current != nil {
		s.current.lf.size = s.current.offset
	}
	s.mu.Unlock()

	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	s.mu.Lock()
	if len(g.dropped) > 0 {
		placements = slices.DeleteFunc(placements, func(p Placement) bool {
			_, gone := g.dropped[p.LedgerID]
			return gone
		})
	}
	s.mu.Unlock()
	if err := apply(placements); err != nil {
		return fmt.Errorf("entrylog: apply flushed placements: %w", err)
	}
	s.mu.Lock()
	s.mu.frozen = nil
	s.mu.fillEpoch++
	for _, c := range g.chunks {
		if cap(c) == arenaChunkBytes && len(s.mu.freeChunk) < 4 {
			s.mu.freeChunk = append(s.mu.freeChunk, c[:0])
		}
	}
	s.wakeAddersLocked()
	s.mu.Unlock()
	return nil
}

// writeFrozen appends the sorted entries of the frozen generation to the
// current log (rotating as needed) and syncs it, returning the placements
// and the bytes each ledger took in each log. An error from creating,
// writing or syncing a log is a *dirError naming its directory; the
// failed log is abandoned (never written or synced again).
// REQUIRES: flushMu held.
func (s *Store) writeFrozen(order []cachedEntry) ([]Placement, map[*logFile]map[int64]int64, error) {
	placements := make([]Placement, 0, len(order))
	usage := make(map[*logFile]map[int64]int64)
	for _, e := range order {
		w, err := s.currentWriter(int64(RecordHeaderSize + len(e.body)))
		if err != nil {
			return nil, nil, err
		}
		loc := Location{LogID: w.lf.id, Offset: w.offset, Size: uint32(len(e.body))}
		if err := s.appendTo(w, e.key.ledgerID, e.key.entryID, e.body); err != nil {
			s.abandonCurrent()
			return nil, nil, &dirError{dir: w.lf.dir, err: err}
		}
		placements = append(placements, Placement{LedgerID: e.key.ledgerID, EntryID: e.key.entryID, Loc: loc})
		u := usage[w.lf]
		if u == nil {
			u = make(map[int64]int64)
			usage[w.lf] = u
		}
		u[e.key.ledgerID] += int64(RecordHeaderSize + len(e.body))
	}
	if w := s.current; w != nil {
		if err := s.syncWriter(w); err != nil {
			s.abandonCurrent()
			return nil, nil, &dirError{dir: w.lf.dir, err: err}
		}
	}
	return placements, usage, nil
}

// markNoSpace marks d full if err says it is out of space (ENOSPC) and
// another directory takes new logs; it reports whether d is now marked
// (it may have been already: the disk checker's verdict can race the
// ENOSPC).
func (s *Store) markNoSpace(d *logDir, err error) bool {
	if !vfs.IsNoSpaceError(err) || !s.writableElsewhere(d) {
		return false
	}
	d.full.Store(true)
	return true
}

// dirError is a failure to create, write or sync a log in dir.
type dirError struct {
	dir *logDir
	err error
}

func (e *dirError) Error() string { return e.err.Error() }
func (e *dirError) Unwrap() error { return e.err }

// releaseSealed lets GC compact the logs sealed during this flush.
// REQUIRES: flushMu held.
func (s *Store) releaseSealed() {
	if len(s.sealedInFlush) == 0 {
		return
	}
	s.mu.Lock()
	for _, id := range s.sealedInFlush {
		delete(s.mu.writing, id)
	}
	s.mu.Unlock()
	s.sealedInFlush = s.sealedInFlush[:0]
}

// currentWriter returns the log to append a record of n bytes to, sealing
// the current one (synced) when the record would take it past MaxLogBytes.
// REQUIRES: flushMu held.
func (s *Store) currentWriter(n int64) (*logWriter, error) {
	var prev *logDir
	if w := s.current; w != nil {
		prev = w.lf.dir
		// A log whose directory became full is sealed as soon as another
		// directory can take the next one (even before its first record).
		moving := w.lf.dir.full.Load() && s.writableElsewhere(w.lf.dir)
		if !moving && (w.offset+n <= s.opts.MaxLogBytes || w.offset == HeaderSize) {
			return w, nil
		}
		if err := s.syncWriter(w); err != nil {
			s.abandonCurrent()
			return nil, &dirError{dir: w.lf.dir, err: err}
		}
		// The sealed log stays in mu.writing (so GC leaves it alone) until
		// the flush that wrote it has applied its placements: compacting
		// it earlier would relocate entries the index does not hold yet
		// and then remove the file they are about to be indexed at.
		s.mu.Lock()
		w.lf.size = w.offset
		s.mu.Unlock()
		s.sealedInFlush = append(s.sealedInFlush, w.lf.id)
		s.current = nil
		if err := w.f.Close(); err != nil {
			return nil, fmt.Errorf("entrylog: close %s: %w", w.lf.path, err)
		}
	}
	w, err := s.createLog(false, prev)
	if err != nil {
		return nil, err
	}
	s.current = w
	return w, nil
}

// abandonCurrent drops the current writer after a failed write or sync: the
// file is never written or synced again. It stays readable for the records
// that an earlier successful sync made durable.
// REQUIRES: flushMu held.
func (s *Store) abandonCurrent() {
	w := s.current
	if w == nil {
		return
	}
	s.current = nil
	s.mu.Lock()
	delete(s.mu.writing, w.lf.id)
	s.mu.Unlock()
	_ = w.f.Close() // the write error is what matters
}

// createLog creates a new entry log (or, for compaction, a ".compacting"
// file) in the directory pickDir(cur) chooses, writes and syncs its header,
// syncs the directory, and registers it for reading. A compaction output
// is registered only by publishCompacted.
func (s *Store) createLog(compacting bool, cur *logDir) (*logWriter, error) {
	d := s.pickDir(cur)
	w, err := s.createLogIn(d, compacting)
	if err != nil && !errors.Is(err, ErrClosed) {
		return nil, &dirError{dir: d, err: err}
	}
	return w, err
}

// createLogIn is createLog in directory d.
func (s *Store) createLogIn(d *logDir, compacting bool) (*logWriter, error) {
	if err := s.makeDir(d); err != nil {
		return nil, err
	}
	s.dirMu.Lock()
	s.lastDir = d
	s.dirMu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	id := s.mu.nextLogID
	s.mu.nextLogID++
	s.mu.Unlock()
	name := LogFileName(id)
	if compacting {
		name = compactingFileName(id)
	}
	path := s.fs.PathJoin(d.path, name)
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("entrylog: create %s: %w", path, err)
	}
	// A file created here but not returned is removed again (best effort:
	// Open removes leftover ".compacting" files and logs that hold no
	// record), so that a failing disk does not collect empty files.
	fail := func(err error) (*logWriter, error) {
		f.Close()
		_ = s.fs.Remove(path)
		return nil, err
	}
	var hdr [HeaderSize]byte
	encodeHeader(hdr[:], id)
	if _, err := f.Write(hdr[:]); err != nil {
		return fail(fmt.Errorf("entrylog: write header of %s: %w", path, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("entrylog: sync %s: %w", path, err))
	}
	if err := syncDir(s.fs, d.path); err != nil {
		return fail(err)
	}
	logPath := s.fs.PathJoin(d.path, LogFileName(id))
	lf := &logFile{id: id, dir: d, path: logPath, size: HeaderSize, ledgers: make(map[int64]int64)}
	w := &logWriter{lf: lf, f: f, offset: HeaderSize, buf: make([]byte, 0, s.opts.WriteBufferBytes)}
	if compacting {
		return w, nil
	}
	r, err := s.fs.Open(path)
	if err != nil {
		return fail(fmt.Errorf("entrylog: open %s for reading: %w", path, err))
	}
	lf.f = r
	s.mu.Lock()
	s.mu.logs[id] = lf
	s.mu.writing[id] = struct{}{}
	s.mu.Unlock()
	return w, nil
}

// appendTo buffers one record, writing the buffer out when it is full.
func (s *Store) appendTo(w *logWriter, ledgerID, entryID int64, body []byte) error {
	if len(w.buf)+RecordHeaderSize+len(body) > cap(w.buf) && len(w.buf) > 0 {
		if err := s.writeOut(w); err != nil {
			return err
		}
	}
	w.buf = appendRecord(w.buf, ledgerID, entryID, body)
	w.offset += int64(RecordHeaderSize + len(body))
	w.synced = false
	return nil
}

// writeOut writes the buffered bytes to the file.
func (s *Store) writeOut(w *logWriter) error {
	if len(w.buf) == 0 {
		return nil
	}
	start := w.offset - int64(len(w.buf))
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("entrylog: write %s at offset %d: %w", w.lf.path, start, err)
	}
	w.buf = w.buf[:0]
	return nil
}

// syncWriter writes out the buffer and fsyncs the file.
func (s *Store) syncWriter(w *logWriter) error {
	if err := s.writeOut(w); err != nil {
		return err
	}
	if w.synced {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("entrylog: sync %s: %w", w.lf.path, err)
	}
	w.synced = true
	return nil
}
