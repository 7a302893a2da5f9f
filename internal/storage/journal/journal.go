package journal

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Position is a place in one journal: the byte just after a record. The
// zero Position is before every record. Positions compare first by file id,
// then by offset; an append's Position is greater than that of every
// append completed before it.
type Position struct {
	File   uint64 // journal file id (0 only in the zero Position)
	Offset int64  // byte offset in that file
}

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.File < q.File:
		return -1
	case p.File > q.File:
		return 1
	case p.Offset < q.Offset:
		return -1
	case p.Offset > q.Offset:
		return 1
	}
	return 0
}

func (p Position) String() string { return fmt.Sprintf("%s:%d", fileName(p.File), p.Offset) }

// Callback receives the outcome of one accepted append. AppendDone is
// called exactly once, on a journal goroutine (the syncer; the writer for
// appends failed before they were written; a Flush caller in Manual mode):
// with err == nil only after the record's bytes were written and
// fdatasynced, with pos its Position; otherwise with an error matching
// ErrFailed (and the cause) and the zero Position. Callbacks of one
// Journal run one at a time (never concurrently) in Position order. AppendDone must not block: in particular it must not wait for
// queue space in Append, which only the caller of AppendDone frees.
type Callback interface {
	AppendDone(pos Position, err error)
}

// Journal is one journal directory with its group-commit writer. Its
// methods are safe for concurrent use.
//
// Without Manual, three goroutines do the work (see "The write pipeline" in
// the package comment): the writer takes due groups off the queue and
// writes them, the syncer fdatasyncs what was written and runs the
// callbacks, and the preallocator keeps zeros ahead of the write position
// and creates the next file before it is needed. With Manual, Flush does
// all of it inline, one group at a time.
type Journal struct {
	fs      vfs.FS
	dir     string
	opts    Options
	clock   Clock
	firstID uint64 // the file Open created: Replay covers the files before it
	opened  link   // what firstID's header says about the file before it
	lock    io.Closer
	dirFile vfs.File // the directory, for syncing new files' names

	wake chan struct{} // to the writer goroutine: work may be due (capacity 1)
	done chan struct{} // closed when the goroutines have exited; nil if Manual

	writeFile atomic.Uint64 // the file being written; MarkDurable never deletes it

	// flushMu serializes Flush (Manual) and guards w against Close.
	flushMu sync.Mutex
	// w is the write position, owned by the writer goroutine (Manual: the
	// holder of flushMu).
	w struct {
		file    vfs.File // nil once closed
		fileID  uint64
		prevEnd int64  // the previous file's end, recorded in every group header
		seq     uint64 // sequence number of the last group written to file
		end     int64  // end of the last group written to file
	}

	// io stops all I/O on the journal's files at the first error: every
	// write, sync and file creation holds io for reading while it checks
	// err and runs; abandon takes it for writing, so once it returns no
	// operation is in progress and none starts again.
	io struct {
		sync.RWMutex
		err error
	}

	// p connects the writer, the syncer and the preallocator.
	p struct {
		sync.Mutex
		cond sync.Cond
		// written holds the groups written and not yet taken by the syncer,
		// oldest first.
		written []*group
		// unsynced counts groups written whose fdatasync has not completed;
		// the writer keeps it ≤ 2 (pipeline depth 1) and drains it to 0
		// before rotating. uncompleted counts groups handed to the syncer
		// whose callbacks have not all run.
		unsynced, uncompleted int
		err                   error // the failure, set after OnFailure ran
		writerDone            bool  // the syncer exits once written is empty
		stop                  bool  // the preallocator exits

		// cur is the file being written, as the preallocator sees it; next
		// is the file created ahead of rotation (nil until ready).
		cur, next *preFile
		writePos  int64 // end of the last group written to cur
		// curPinned: cur durably records where the file before it ends
		// (its header does, or one of its groups is synced). Only then is
		// the next file created ahead, so that a file without groups is
		// only ever the last one (Open removes it).
		curPinned bool
		want      int64 // the writer waits for zeros up to here in cur
		extending bool  // the preallocator is writing zeros to cur
	}

	// mu guards the queue. Lock order: flushMu before mu, p before mu;
	// neither is held while callbacks run.
	mu struct {
		sync.Mutex
		// queue holds the groups not yet taken by a group commit, oldest
		// first; only the last may be open (unsealed) for more records.
		queue []*group
		// queuedBytes and queuedRecords count queued and in-flight appends
		// (up to their completion); bounded by MaxQueueBytes/Records.
		queuedBytes   int64
		queuedRecords int
		// nextFile and nextBase are where the next group will be written:
		// fixed when the group before it is sealed.
		nextFile uint64
		nextBase int64
		failed   error
		closing  bool
		// space is closed (and replaced) when queue space is freed and
		// spaceWaiters > 0.
		space        chan struct{}
		spaceWaiters int
		free         []*group
	}
}

// preFile is a journal file as the preallocator sees it.
type preFile struct {
	id        uint64
	file      vfs.File // the writer's and syncer's handle (from Create)
	pfile     vfs.File // the preallocator's own handle (see preallocate)
	zeroedEnd int64    // zeros are written and synced up to here
}

// group is the unit of group commit: a group header and records encoded
// back to back, written with one write and made durable with one
// fdatasync.
type group struct {
	fileID  uint64
	base    int64   // offset of the group header, a multiple of GroupAlignment
	buf     []byte  // group header (filled when written), then the records
	ends    []int64 // end offset of each record
	cbs     []Callback
	file    vfs.File  // the file it was written to (for the syncer)
	firstAt time.Time // when the first record arrived (only with MaxGroupWait)
	sealed  bool
}

// payloadBytes is the size of g's records.
func (g *group) payloadBytes() int { return len(g.buf) - GroupHeaderSize }

// Open opens (creating if needed) the journal in dir. It makes the last
// files of the previous incarnation durable, finds where its log ends
// (failing with a *CorruptionError if synced data is damaged), and starts a
// new file: a journal never appends to a file written before Open, which is
// what lets replay tell a torn tail from corruption. Call Replay next.
func Open(fs vfs.FS, dir string, opts Options) (*Journal, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: creating %s: %w", dir, err)
	}
	// Make the directory's own entry durable (it may just have been
	// created): files synced into a directory that vanishes are lost.
	if err := syncDir(fs, fs.PathDir(dir)); err != nil {
		return nil, err
	}
	lock, err := fs.Lock(fs.PathJoin(dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("journal: locking %s (another journal has it open?): %w", dir, err)
	}
	j := &Journal{fs: fs, dir: dir, opts: opts, clock: opts.Clock, lock: lock, wake: make(chan struct{}, 1)}
	j.p.cond.L = &j.p.Mutex
	if err := j.open(); err != nil {
		if j.w.file != nil {
			j.w.file.Close()
		}
		if j.dirFile != nil {
			j.dirFile.Close()
		}
		lock.Close()
		return nil, err
	}
	if !opts.Manual {
		j.start()
	}
	return j, nil
}

func (j *Journal) open() error {
	ids, err := listFiles(j.fs, j.dir, true)
	if err != nil {
		return err
	}
	if j.dirFile, err = j.fs.OpenDir(j.dir); err != nil {
		return fmt.Errorf("journal: opening directory %s: %w", j.dir, err)
	}
	var maxID uint64
	if len(ids) > 0 {
		maxID = ids[len(ids)-1]
		// The previous incarnation may have died before its last groups
		// were synced while the page cache still holds them: sync before
		// reading, so what we find (and record in the next header) is what
		// is durable. Its last two files, because the last may be a file
		// created ahead of rotation while the one before was written.
		for _, id := range ids[max(len(ids)-2, 0):] {
			if err := syncPath(j.fs, j.path(id)); err != nil {
				return err
			}
		}
		last := ids[len(ids)-1]
		sc, err := scanFile(j.fs, j.path(last), last, FirstGroupOffset, nil)
		if err != nil {
			return err
		}
		if sc.unusedAhead() {
			// A file created ahead of a rotation that never happened: no
			// group header was ever written to it, and it does not record
			// where the file before it ends. Remove it (durably, before the
			// new file names its predecessor), so that the file Open creates
			// records that end instead.
			if err := j.fs.Remove(j.path(last)); err != nil {
				return fmt.Errorf("journal: removing unused %s: %w", j.path(last), err)
			}
			if err := j.dirFile.Sync(); err != nil {
				return fmt.Errorf("journal: syncing directory %s: %w", j.dir, err)
			}
			ids = ids[:len(ids)-1]
			sc = fileScan{}
			if len(ids) > 0 {
				last = ids[len(ids)-1]
				if sc, err = scanFile(j.fs, j.path(last), last, FirstGroupOffset, nil); err != nil {
					return err
				}
			}
		}
		if len(ids) > 0 {
			j.opened = link{prevID: last, prevEnd: sc.end}
		}
	}
	// File ids only grow, also past a removed file.
	id := maxID + 1
	f, zeroedEnd, err := j.createFile(id, j.opened)
	if err != nil {
		return err
	}
	j.setFile(f, id, j.opened.prevEnd)
	j.p.cur = &preFile{id: id, file: f, zeroedEnd: zeroedEnd}
	j.p.writePos, j.p.curPinned = FirstGroupOffset, true
	if !j.opts.Manual {
		if j.p.cur.pfile, err = j.fs.OpenReadWrite(j.path(id), vfs.WriteCategoryUnspecified); err != nil {
			return fmt.Errorf("journal: opening %s: %w", j.path(id), err)
		}
	}
	j.firstID = id
	j.mu.nextFile, j.mu.nextBase = id, FirstGroupOffset
	return nil
}

// Append queues rec and returns; cb runs once it is durable or failed (see
// Callback). rec.Body is copied before Append returns. If the queue is over
// its bounds Append waits up to Options.QueueWait, then fails with
// ErrQueueFull. On an error cb is never called.
func (j *Journal) Append(rec Record, cb Callback) error {
	if err := rec.validate(); err != nil {
		return err
	}
	size := rec.encodedSize()
	if int64(size) > j.opts.MaxQueueBytes {
		return fmt.Errorf("%w: %d bytes exceed MaxQueueBytes %d", ErrRecordTooLarge, size, j.opts.MaxQueueBytes)
	}
	j.mu.Lock()
	if err := j.waitForSpaceLocked(size); err != nil {
		j.mu.Unlock()
		return err
	}
	g, wake := j.openGroupLocked(size)
	off := g.base + int64(len(g.buf))
	g.buf = appendRecord(g.buf, g.fileID, off, &rec, false)
	g.ends = append(g.ends, off+int64(size))
	g.cbs = append(g.cbs, cb)
	j.mu.queuedBytes += int64(size)
	j.mu.queuedRecords++
	j.mu.Unlock()
	if wake {
		j.signal()
	}
	return nil
}

// AppendEntry appends an add-entry record. See Append.
func (j *Journal) AppendEntry(ledgerID, entryID int64, body []byte, cb Callback) error {
	return j.Append(Record{Type: TypeAddEntry, LedgerID: ledgerID, EntryID: entryID, Body: body}, cb)
}

// AppendMasterKey appends a master-key record. See Append.
func (j *Journal) AppendMasterKey(ledgerID int64, masterKey []byte, cb Callback) error {
	return j.Append(Record{Type: TypeMasterKey, LedgerID: ledgerID, Body: masterKey}, cb)
}

// AppendFence appends a fence record. See Append.
func (j *Journal) AppendFence(ledgerID int64, cb Callback) error {
	return j.Append(Record{Type: TypeFence, LedgerID: ledgerID}, cb)
}

// AppendExplicitLAC appends an explicit-LAC record. See Append.
func (j *Journal) AppendExplicitLAC(ledgerID int64, lac []byte, cb Callback) error {
	return j.Append(Record{Type: TypeExplicitLAC, LedgerID: ledgerID, Body: lac}, cb)
}

// AppendSync appends rec and waits until it is durable or failed. It must
// not be called from a Callback, nor in Manual mode without another
// goroutine calling Flush.
func (j *Journal) AppendSync(rec Record) (Position, error) {
	w := waiterPool.Get().(*waiter)
	if err := j.Append(rec, w); err != nil {
		waiterPool.Put(w)
		return Position{}, err
	}
	<-w.ch
	pos, err := w.pos, w.err
	w.err = nil
	waiterPool.Put(w)
	return pos, err
}

type waiter struct {
	ch  chan struct{}
	pos Position
	err error
}

func (w *waiter) AppendDone(pos Position, err error) {
	w.pos, w.err = pos, err
	w.ch <- struct{}{}
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan struct{}, 1)} }}

func (j *Journal) waitForSpaceLocked(size int) error {
	var deadline time.Time
	for {
		switch {
		case j.mu.failed != nil:
			return j.mu.failed
		case j.mu.closing:
			return ErrClosed
		case j.mu.queuedRecords < j.opts.MaxQueueRecords && j.mu.queuedBytes+int64(size) <= j.opts.MaxQueueBytes:
			return nil
		case j.opts.QueueWait < 0:
			return j.queueFullLocked()
		}
		now := j.clock.Now()
		if deadline.IsZero() {
			deadline = now.Add(j.opts.QueueWait)
		} else if !now.Before(deadline) {
			return j.queueFullLocked()
		}
		if j.mu.space == nil {
			j.mu.space = make(chan struct{})
		}
		ch := j.mu.space
		j.mu.spaceWaiters++
		j.mu.Unlock()
		t := j.clock.NewTimer(deadline.Sub(now))
		select {
		case <-ch:
		case <-t.C():
		}
		t.Stop()
		j.mu.Lock()
		j.mu.spaceWaiters--
	}
}

func (j *Journal) queueFullLocked() error {
	return fmt.Errorf("%w: %d records, %d bytes queued (limits %d, %d) after waiting %v",
		ErrQueueFull, j.mu.queuedRecords, j.mu.queuedBytes, j.opts.MaxQueueRecords, j.opts.MaxQueueBytes,
		max(j.opts.QueueWait, 0))
}

// openGroupLocked returns the group a size-byte record goes into, and
// whether the writer should be woken.
func (j *Journal) openGroupLocked(size int) (*group, bool) {
	n := len(j.mu.queue)
	var g *group
	wake := n == 0
	if n > 0 && !j.mu.queue[n-1].sealed {
		g = j.mu.queue[n-1]
		if len(g.ends) > 0 && len(g.buf)+size > j.opts.MaxGroupBytes {
			j.sealLocked(g)
			g, wake = nil, true
		}
	}
	if g == nil {
		g = j.newGroupLocked()
		j.mu.queue = append(j.mu.queue, g)
	}
	return g, wake
}

func (j *Journal) newGroupLocked() *group {
	var g *group
	if n := len(j.mu.free); n > 0 {
		g = j.mu.free[n-1]
		j.mu.free = j.mu.free[:n-1]
	} else {
		g = &group{buf: make([]byte, 0, 64<<10)}
	}
	// Room for the group header, filled in when the group is written.
	g.buf = growLen(g.buf[:0], GroupHeaderSize)
	g.fileID, g.base, g.sealed = j.mu.nextFile, j.mu.nextBase, false
	if j.opts.MaxGroupWait > 0 {
		g.firstAt = j.clock.Now()
	}
	return g
}

// sealLocked closes g to more records and fixes where the next group goes:
// the next aligned offset, or a new file once g ends at MaxFileBytes.
func (j *Journal) sealLocked(g *group) {
	g.sealed = true
	next := alignUp(g.base + int64(len(g.buf)))
	if next >= j.opts.MaxFileBytes {
		j.mu.nextFile, j.mu.nextBase = g.fileID+1, FirstGroupOffset
	} else {
		j.mu.nextFile, j.mu.nextBase = g.fileID, next
	}
}

func (j *Journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Flush runs one group commit in Manual mode: if a group is due it writes
// the oldest queued group at its place (rotating or preallocating first if
// needed), fdatasyncs the file, and runs the group's callbacks. It returns
// how many appends it completed: 0 if no group was due (see MaxGroupWait)
// or the journal has failed. If this call made the journal fail, the
// returned error is the failure (its appends and all queued ones have been
// failed). Calls are serialized. Without Manual the journal's own
// goroutines commit and Flush returns (0, nil) at once.
func (j *Journal) Flush() (int, error) {
	if !j.opts.Manual {
		return 0, nil
	}
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	g := j.takeGroup()
	if g == nil {
		return 0, nil
	}
	if err := j.commitInline(g); err != nil {
		err = j.abandon(err)
		j.failRest(g, err)
		return 0, err
	}
	n := len(g.ends)
	j.finish(g, nil) // recycles g
	return n, nil
}

// takeGroup pops the oldest group if it is due.
func (j *Journal) takeGroup() *group {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.mu.failed != nil || len(j.mu.queue) == 0 {
		return nil
	}
	g := j.mu.queue[0]
	if !g.sealed {
		if j.opts.MaxGroupWait > 0 && !j.mu.closing &&
			len(g.buf) < j.opts.MaxGroupBytes && j.clock.Now().Sub(g.firstAt) < j.opts.MaxGroupWait {
			return nil
		}
		j.sealLocked(g)
	}
	// Shift rather than reslice, so the queue's array is reused and
	// appending a group does not allocate.
	n := copy(j.mu.queue, j.mu.queue[1:])
	j.mu.queue[n] = nil
	j.mu.queue = j.mu.queue[:n]
	return g
}

// commitInline (Manual mode) writes g and makes it durable, one group at a
// time: rotation creates the next file here, and zeros are written here,
// made durable by the group's own fdatasync. Only a nil return means
// durable.
func (j *Journal) commitInline(g *group) error {
	if j.w.file == nil {
		return fmt.Errorf("journal: file %s is not open", fileName(j.w.fileID))
	}
	if g.fileID != j.w.fileID {
		// Every group of the current file is synced (one group at a time),
		// so its log ends at w.end: record that in the new file's header.
		prev := link{prevID: j.w.fileID, prevEnd: j.w.end}
		f, zeroedEnd, err := j.createFile(g.fileID, prev)
		if err != nil {
			return err
		}
		_ = j.w.file.Close() // every byte of it is synced: a close error loses nothing
		j.setFile(f, g.fileID, prev.prevEnd)
		j.p.cur = &preFile{id: g.fileID, file: f, zeroedEnd: zeroedEnd}
	}
	end := g.base + int64(len(g.buf))
	if cur := j.p.cur; end > cur.zeroedEnd {
		target := max(cur.zeroedEnd+j.opts.PreallocBytes, alignUp(end)+j.opts.PreallocBytes)
		if err := j.ioDo(func() error { return writeZeros(cur.file, cur.zeroedEnd, target) }); err != nil {
			return fmt.Errorf("journal: preallocating %s: %w", j.path(cur.id), err)
		}
		cur.zeroedEnd = target // the group's fdatasync below makes them durable
	}
	if err := j.writeGroup(g); err != nil {
		return err
	}
	return j.syncGroups(g.file, g.fileID, len(g.ends))
}

// writeGroup fills in g's header and writes g at its place in the current
// file.
func (j *Journal) writeGroup(g *group) error {
	j.w.seq++
	putGroupHeader(g.buf, g.fileID, g.base, j.w.seq, j.w.prevEnd)
	f := j.w.file
	err := j.ioDo(func() error {
		_, err := f.WriteAt(g.buf, g.base)
		return err
	})
	if err != nil {
		return fmt.Errorf("journal: writing %d bytes to %s at offset %d: %w",
			len(g.buf), j.path(g.fileID), g.base, err)
	}
	g.file = f
	j.w.end = g.base + int64(len(g.buf))
	return nil
}

// syncGroups fdatasyncs f (file id), which holds written groups of
// `records` records in all (for OnSync).
func (j *Journal) syncGroups(f vfs.File, id uint64, records int) error {
	var syncStart time.Time
	if j.opts.OnSync != nil {
		syncStart = j.clock.Now()
	}
	if err := j.ioDo(f.SyncData); err != nil {
		return fmt.Errorf("journal: fdatasync of %s: %w", j.path(id), err)
	}
	if j.opts.OnSync != nil {
		j.opts.OnSync(j.clock.Now().Sub(syncStart), records)
	}
	return nil
}

// waitingHook calls the waiting test hook, if any; p is locked.
func (j *Journal) waitingHook(who string) {
	if h := j.opts.hooks; h != nil && h.waiting != nil {
		h.waiting(who, j.p.unsynced)
	}
}

// ioDo runs op unless the journal's I/O has been stopped by a failure.
func (j *Journal) ioDo(op func() error) error {
	j.io.RLock()
	defer j.io.RUnlock()
	if j.io.err != nil {
		return fmt.Errorf("journal: file abandoned after an earlier failure (%w)", j.io.err)
	}
	return op()
}

// abandon puts the journal in the failed state after an I/O error and
// returns the failure (the first one, if another goroutine failed first).
// It waits for I/O in progress and stops all further I/O on the files:
// after a failed fdatasync the kernel may have dropped the dirty pages and
// marked them clean, so a later fdatasync could "succeed" without the data
// on disk. Then appends are refused, OnFailure runs, and only after that
// the pipeline learns of the failure (p.err) and fails callbacks.
func (j *Journal) abandon(cause error) error {
	j.io.Lock()
	if j.io.err != nil {
		err := j.io.err
		j.io.Unlock()
		return err
	}
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	j.io.err = err
	j.io.Unlock()
	j.mu.Lock()
	j.mu.failed = err
	j.wakeSpaceWaitersLocked()
	j.mu.Unlock()
	// The owner hears first, so it can turn read-only before any failed
	// append's callback runs.
	if j.opts.OnFailure != nil {
		j.opts.OnFailure(err)
	}
	j.p.Lock()
	j.p.err = err
	j.p.cond.Broadcast()
	j.p.Unlock()
	j.signal()
	return err
}

// failRest fails g (if not nil; a group taken but not handed to the
// syncer) and every queued group, in position order: it first waits until
// the pipeline knows of the failure and the syncer has completed every
// group handed to it (those come before g).
func (j *Journal) failRest(g *group, err error) {
	j.p.Lock()
	for j.p.err == nil || j.p.uncompleted > 0 {
		j.waitingHook("failRest")
		j.p.cond.Wait()
	}
	err = j.p.err
	j.p.Unlock()
	j.mu.Lock()
	failed := j.mu.queue
	j.mu.queue = nil
	j.mu.Unlock()
	if g != nil {
		j.finish(g, err)
	}
	for _, fg := range failed {
		j.finish(fg, err)
	}
}

// QueuedRecords is how many records are queued or being written, not yet
// completed (BookKeeper's JOURNAL_QUEUE_SIZE).
func (j *Journal) QueuedRecords() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.queuedRecords
}

// setFile makes f (file id) the file being written; prevEnd is where the
// file before it ended, recorded in each group header.
func (j *Journal) setFile(f vfs.File, id uint64, prevEnd int64) {
	j.w.file, j.w.fileID, j.w.prevEnd = f, id, prevEnd
	j.w.seq, j.w.end = 0, FirstGroupOffset
	j.writeFile.Store(id)
}

// createFile creates file id with its header and first chunk of zeros,
// durable under its final name before any record goes in. prev.prevEnd is
// 0 for a file created ahead of rotation (its group headers record it).
func (j *Journal) createFile(id uint64, prev link) (vfs.File, int64, error) {
	path := j.path(id)
	tmp := path[:len(path)-len(fileSuffix)] + tmpSuffix
	zeroedEnd := FirstGroupOffset + j.opts.PreallocBytes
	var f vfs.File
	err := j.ioDo(func() error {
		var err error
		if f, err = j.fs.Create(tmp, vfs.WriteCategoryUnspecified); err != nil {
			return err
		}
		if _, err := f.WriteAt(encodeFileHeader(FormatVersion, id, prev.prevID, prev.prevEnd), 0); err != nil {
			return err
		}
		if err := writeZeros(f, FirstGroupOffset, zeroedEnd); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := j.fs.Rename(tmp, path); err != nil {
			return err
		}
		return j.dirFile.Sync()
	})
	if err != nil {
		if f != nil {
			_ = f.Close()
			_ = j.fs.Remove(tmp)
		}
		return nil, 0, fmt.Errorf("journal: creating %s: %w", path, err)
	}
	return f, zeroedEnd, nil
}

// finish releases g's queue space, runs its callbacks (acks if err is
// nil, else failures) and recycles g.
func (j *Journal) finish(g *group, err error) {
	j.mu.Lock()
	j.mu.queuedBytes -= int64(g.payloadBytes())
	j.mu.queuedRecords -= len(g.ends)
	j.wakeSpaceWaitersLocked()
	j.mu.Unlock()
	for i, cb := range g.cbs {
		if err == nil {
			cb.AppendDone(Position{File: g.fileID, Offset: g.ends[i]}, nil)
		} else {
			cb.AppendDone(Position{}, err)
		}
	}
	clear(g.cbs)
	g.buf, g.ends, g.cbs, g.file = g.buf[:0], g.ends[:0], g.cbs[:0], nil
	if cap(g.buf) > 2*j.opts.MaxGroupBytes {
		g.buf = nil // a huge single record: do not keep its buffer
	}
	j.mu.Lock()
	if len(j.mu.free) < 4 {
		j.mu.free = append(j.mu.free, g)
	}
	j.mu.Unlock()
}

func (j *Journal) wakeSpaceWaitersLocked() {
	if j.mu.spaceWaiters > 0 && j.mu.space != nil {
		close(j.mu.space)
		j.mu.space = nil
	}
}

// start runs the writer, syncer and preallocator goroutines (not Manual).
func (j *Journal) start() {
	j.done = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); j.runWriter() }()
	go func() { defer wg.Done(); j.runSyncer() }()
	go func() { defer wg.Done(); j.runPreallocator() }()
	go func() { wg.Wait(); close(j.done) }()
}

// runWriter is the writer goroutine: it takes due groups and passes each
// through pipeline; after a failure it fails what is queued. It exits when
// closing with nothing queued, after the syncer has completed everything
// handed to it; then it stops the syncer and the preallocator.
func (j *Journal) runWriter() {
	defer func() {
		j.p.Lock()
		for j.p.uncompleted > 0 {
			j.p.cond.Wait()
		}
		j.p.writerDone, j.p.stop = true, true
		j.p.cond.Broadcast()
		j.p.Unlock()
	}()
	for {
		if err := j.Err(); err != nil {
			j.failRest(nil, err)
			j.mu.Lock()
			closing := j.mu.closing
			j.mu.Unlock()
			if closing {
				return
			}
			<-j.wake
			continue
		}
		if g := j.takeGroup(); g != nil {
			if err := j.pipeline(g); err != nil {
				j.failRest(g, j.abandon(err))
			}
			continue
		}
		wait, exit := j.idle()
		switch {
		case exit:
			return
		case wait < 0:
			// A group became due between takeGroup and idle: take it.
		case wait == 0:
			<-j.wake
		default:
			t := j.clock.NewTimer(wait)
			select {
			case <-j.wake:
			case <-t.C():
			}
			t.Stop()
		}
	}
}

// pipeline writes g and hands it to the syncer. It enforces the pipeline
// invariants (package comment): g is written only when at most one group
// is written and unsynced (so group N+2 is written only after group N's
// fdatasync completed), only when every group is synced if g starts a new
// file, and only over zeros that are written and synced.
func (j *Journal) pipeline(g *group) error {
	rotate := g.fileID != j.w.fileID
	j.p.Lock()
	for j.p.err == nil && (j.p.unsynced >= 2 || rotate && j.p.unsynced > 0) {
		j.waitingHook("writer")
		j.p.cond.Wait()
	}
	err := j.p.err
	j.p.Unlock()
	if err != nil {
		return err
	}
	if rotate {
		if err := j.rotate(g.fileID); err != nil {
			return err
		}
	}
	if err := j.waitZeros(g.base + int64(len(g.buf))); err != nil {
		return err
	}
	if err := j.writeGroup(g); err != nil {
		return err
	}
	j.p.Lock()
	if h := j.opts.hooks; h != nil && h.beforeHandOff != nil {
		h.beforeHandOff(g, j.p.unsynced)
	}
	j.p.written = append(j.p.written, g)
	j.p.unsynced++
	j.p.uncompleted++
	j.p.writePos = j.w.end
	j.p.cond.Broadcast()
	j.p.Unlock()
	return nil
}

// rotate switches the writer to file id, which the preallocator created
// ahead. The caller has drained the pipeline: every group of the current
// file is synced and its log ends at w.end, which the new file's group
// headers record. If the preallocator has not finished the file yet, the
// writer waits for it rather than creating the file itself: the work is
// the same either way, and one owner of file creation keeps it from being
// done twice or racing on the same name.
func (j *Journal) rotate(id uint64) error {
	prevEnd := j.w.end
	j.p.Lock()
	for j.p.err == nil && j.p.next == nil {
		j.p.cond.Wait()
	}
	if j.p.err != nil {
		err := j.p.err
		j.p.Unlock()
		return err
	}
	old, nf := j.p.cur, j.p.next
	j.p.cur, j.p.next = nf, nil
	j.p.writePos, j.p.want, j.p.curPinned = FirstGroupOffset, 0, false
	closePre := !j.p.extending // else the preallocator closes it when done
	j.p.cond.Broadcast()
	j.p.Unlock()
	if nf.id != id {
		return fmt.Errorf("journal: internal error: rotating to file %d, but file %d was created ahead", id, nf.id)
	}
	_ = old.file.Close() // every byte of it is synced: a close error loses nothing
	if closePre && old.pfile != nil {
		_ = old.pfile.Close()
	}
	j.setFile(nf.file, id, prevEnd)
	if h := j.opts.hooks; h != nil && h.rotated != nil {
		h.rotated(id)
	}
	return nil
}

// waitZeros waits until the current file has zeros written and synced up
// to end. The preallocator does the work; the writer only waits (see
// rotate for why). It extends as soon as less than half a chunk is left,
// so the writer waits only for a group larger than that or a disk slower
// than the appends.
func (j *Journal) waitZeros(end int64) error {
	j.p.Lock()
	defer j.p.Unlock()
	for j.p.err == nil && j.p.cur.zeroedEnd < end {
		j.p.want = end
		j.p.cond.Broadcast()
		j.p.cond.Wait()
	}
	return j.p.err
}

// runSyncer is the syncer goroutine: it fdatasyncs the written groups and
// completes them in order. One fdatasync covers every group written before
// it starts; they are acknowledged only after it completed.
func (j *Journal) runSyncer() {
	var batch []*group
	for {
		j.p.Lock()
		for len(j.p.written) == 0 && !j.p.writerDone {
			j.p.cond.Wait()
		}
		if len(j.p.written) == 0 {
			j.p.Unlock()
			return
		}
		batch = append(batch[:0], j.p.written...)
		clear(j.p.written)
		j.p.written = j.p.written[:0]
		err := j.p.err
		j.p.Unlock()
		if err == nil {
			records := 0
			for _, g := range batch {
				records += len(g.ends)
			}
			if serr := j.syncGroups(batch[0].file, batch[0].fileID, records); serr != nil {
				err = j.abandon(serr)
			} else if h := j.opts.hooks; h != nil && h.afterSync != nil {
				h.afterSync(batch)
			}
		}
		j.p.Lock()
		if err == nil && j.p.cur.id == batch[0].fileID {
			j.p.curPinned = true
		}
		j.p.unsynced -= len(batch)
		j.p.cond.Broadcast()
		j.p.Unlock()
		for _, g := range batch {
			j.finish(g, err)
		}
		clear(batch)
		j.p.Lock()
		j.p.uncompleted -= len(batch)
		j.p.cond.Broadcast()
		j.p.Unlock()
	}
}

// runPreallocator is the preallocator goroutine. It keeps at least half a
// chunk (PreallocBytes) of zeros, written and synced, ahead of the write
// position of the current file, more if the writer waits for them, and
// keeps the next file created (header durable, first chunk of zeros
// written and synced) before rotation needs it. An error fails the journal
// like any other.
func (j *Journal) runPreallocator() {
	for {
		j.p.Lock()
		var extend *preFile
		var target int64
		for {
			if j.p.stop || j.p.err != nil {
				j.p.Unlock()
				return
			}
			cur := j.p.cur
			need := j.p.want > cur.zeroedEnd ||
				cur.zeroedEnd-j.p.writePos < j.opts.PreallocBytes/2 &&
					cur.zeroedEnd < j.opts.MaxFileBytes+int64(j.opts.MaxGroupBytes)
			if need {
				extend = cur
				target = max(cur.zeroedEnd+j.opts.PreallocBytes, alignUp(j.p.want)+j.opts.PreallocBytes)
				j.p.extending = true
				break
			}
			if j.p.next == nil && j.p.curPinned {
				break
			}
			j.waitingHook("prealloc")
			j.p.cond.Wait()
		}
		j.p.Unlock()
		if extend != nil {
			if err := j.extend(extend, target); err != nil {
				j.abandon(fmt.Errorf("journal: preallocating %s: %w", j.path(extend.id), err))
				return
			}
			continue
		}
		nf, err := j.createAhead()
		if err != nil {
			j.abandon(err)
			return
		}
		if h := j.opts.hooks; h != nil && h.createdAhead != nil {
			h.createdAhead(nf.id)
		}
		j.p.Lock()
		j.p.next = nf
		j.p.cond.Broadcast()
		j.p.Unlock()
	}
}

// zeroPiece is how many bytes of zeros the preallocator writes before it
// syncs them. fdatasync works on the file, not on a handle: a group's
// fdatasync also writes back whatever zeros are dirty in the same file at
// that moment (and commits the size change). Small pieces, each synced at
// once, bound what a group's fdatasync can be charged with to one piece.
const zeroPiece = 256 << 10

// extend writes and syncs zeros from f's zeroed end to target, a piece at
// a time, publishing each piece as it becomes durable. If the writer
// rotates away from f meanwhile, it stops and closes f's handle.
func (j *Journal) extend(f *preFile, target int64) error {
	for {
		from := f.zeroedEnd
		to := min(target, from+zeroPiece)
		err := j.ioDo(func() error {
			if err := writeZeros(f.pfile, from, to); err != nil {
				return err
			}
			if h := j.opts.hooks; h != nil && h.zerosWritten != nil {
				h.zerosWritten(f.id, from, to)
			}
			return f.pfile.SyncData()
		})
		j.p.Lock()
		if err == nil {
			f.zeroedEnd = to
		}
		rotated := j.p.cur != f
		done := err != nil || rotated || to >= target || j.p.stop || j.p.err != nil
		if done {
			j.p.extending = false
		}
		j.p.cond.Broadcast()
		j.p.Unlock()
		if done {
			if rotated {
				_ = f.pfile.Close()
			}
			return err
		}
	}
}

// createAhead creates the file after the current one, unpinned (its group
// headers will record where the current file ends), with a second handle
// for the preallocator.
func (j *Journal) createAhead() (*preFile, error) {
	j.p.Lock()
	id := j.p.cur.id + 1
	j.p.Unlock()
	f, zeroedEnd, err := j.createFile(id, link{prevID: id - 1})
	if err != nil {
		return nil, err
	}
	// The preallocator writes and syncs zeros through its own handle: an
	// fdatasync reports a write-back error once per open file description,
	// so an error it sees is still reported to the syncer's fdatasync of
	// the groups, which thereby can never succeed on pages the error hit.
	var pf vfs.File
	err = j.ioDo(func() error {
		var err error
		pf, err = j.fs.OpenReadWrite(j.path(id), vfs.WriteCategoryUnspecified)
		return err
	})
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: opening %s: %w", j.path(id), err)
	}
	return &preFile{id: id, file: f, pfile: pf, zeroedEnd: zeroedEnd}, nil
}

// idle says what the writer should do when takeGroup found nothing due:
// exit (closing and nothing queued), sleep until woken (wait == 0), sleep
// at most wait (a group is waiting for MaxGroupWait), or take again
// (wait < 0).
func (j *Journal) idle() (wait time.Duration, exit bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.mu.failed != nil {
		return -1, false // runWriter fails what is queued
	}
	if len(j.mu.queue) == 0 {
		return 0, j.mu.closing
	}
	if j.mu.closing || j.mu.queue[0].sealed || j.opts.MaxGroupWait == 0 {
		return -1, false
	}
	wait = j.mu.queue[0].firstAt.Add(j.opts.MaxGroupWait).Sub(j.clock.Now())
	if wait <= 0 {
		return -1, false
	}
	return wait, false
}

// Err returns the failure (matching ErrFailed) if the journal has failed,
// else nil.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.failed
}

// Close stops accepting appends, commits what is queued (their callbacks
// run), and closes the files. A failed journal closes without writing. A
// file created ahead and never written is removed (if a crash leaves one,
// Open removes it). Close is idempotent; it must not be called from a
// Callback or OnFailure.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.mu.closing {
		j.mu.Unlock()
		return nil
	}
	j.mu.closing = true
	j.wakeSpaceWaitersLocked()
	j.mu.Unlock()
	if j.done != nil {
		j.signal()
		<-j.done
	} else {
		for {
			n, err := j.Flush()
			if n == 0 && (err != nil || j.queueEmpty()) {
				break
			}
		}
	}
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	var err error
	if j.w.file != nil {
		err = j.w.file.Close()
		j.w.file = nil
	}
	if cur := j.p.cur; cur != nil && cur.pfile != nil {
		_ = cur.pfile.Close()
	}
	if next := j.p.next; next != nil {
		_ = next.file.Close()
		_ = next.pfile.Close()
		j.p.next = nil
		if j.Err() == nil {
			_ = j.fs.Remove(j.path(next.id))
		}
	}
	if j.dirFile != nil {
		_ = j.dirFile.Close()
		j.dirFile = nil
	}
	if lerr := j.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

func (j *Journal) queueEmpty() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.mu.queue) == 0 || j.mu.failed != nil
}

// Replay delivers the records written before this Journal was opened, at
// or after from, in order (see the package-level Replay). Call it after
// Open and before serving reads; it may run while appends are being
// written, which it does not see.
func (j *Journal) Replay(from Position, fn ReplayFunc) error {
	ids, err := listFiles(j.fs, j.dir, false)
	if err != nil {
		return err
	}
	n := 0
	for n < len(ids) && ids[n] < j.firstID {
		n++
	}
	return replayFiles(j.fs, j.dir, ids[:n], from, &j.opened, fn)
}

// MarkDurable records that everything up to pos is durable elsewhere
// (checkpointed): the journal files wholly before pos.File are deleted,
// except the newest Options.MaxBackups of them (BookKeeper's
// journalMaxBackups). The caller must persist its checkpoint before calling
// MarkDurable; if it crashes in between, the files survive and are replayed
// again, which is harmless (replay is idempotent). The deletions are not
// synced: a deleted file that reappears after a crash is only replayed
// again, and a kept backup is never replayed (replay starts at the
// checkpoint's file).
func (j *Journal) MarkDurable(pos Position) error {
	limit := min(pos.File, j.writeFile.Load())
	ids, err := listFiles(j.fs, j.dir, false)
	if err != nil {
		return err
	}
	n := 0 // ids[:n] are wholly before limit
	for n < len(ids) && ids[n] < limit {
		n++
	}
	for _, id := range ids[:max(n-j.opts.MaxBackups, 0)] {
		if err := j.fs.Remove(j.path(id)); err != nil {
			return fmt.Errorf("journal: deleting %s: %w", j.path(id), err)
		}
	}
	return nil
}

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }

func (j *Journal) path(id uint64) string { return j.fs.PathJoin(j.dir, fileName(id)) }
