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
// called exactly once, on the goroutine running the group commit (the
// writer goroutine, or a Flush caller in Manual mode): with err == nil only
// after the record's bytes were written and fdatasynced, with pos its
// Position; otherwise with an error matching ErrFailed (and the cause) and
// the zero Position. Callbacks of one Journal run one at a time in Position
// order. AppendDone must not block: in particular it must not wait for
// queue space in Append, which only the caller of AppendDone frees.
type Callback interface {
	AppendDone(pos Position, err error)
}

// Journal is one journal directory with its group-commit writer. Its
// methods are safe for concurrent use.
type Journal struct {
	fs      vfs.FS
	dir     string
	opts    Options
	clock   Clock
	firstID uint64 // the file Open created: Replay covers the files before it
	opened  link   // what firstID's header says about the file before it
	lock    io.Closer

	wake chan struct{} // to the writer goroutine: work may be due (capacity 1)
	done chan struct{} // closed when the writer goroutine exits; nil if Manual

	writeFile atomic.Uint64 // the file being written; MarkDurable never deletes it

	// flushMu serializes group commits. w is owned by its holder.
	flushMu sync.Mutex
	w       struct {
		dir       vfs.File
		file      vfs.File // nil once abandoned or closed
		fileID    uint64
		syncedEnd int64 // end of the last synced group in file
		zeroedEnd int64 // zeros (or data) are written up to here
	}

	// mu guards the queue. Lock order: flushMu before mu; neither is held
	// while callbacks run.
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

// group is the unit of group commit: records encoded back to back, written
// with one write and made durable with one fdatasync.
type group struct {
	fileID  uint64
	base    int64 // offset of the first record, a multiple of GroupAlignment
	buf     []byte
	ends    []int64 // end offset of each record
	cbs     []Callback
	firstAt time.Time // when the first record arrived (only with MaxGroupWait)
	sealed  bool
}

// Open opens (creating if needed) the journal in dir. It makes the last
// file of the previous incarnation durable, finds where its log ends
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
	if err := j.open(); err != nil {
		if j.w.dir != nil {
			j.w.dir.Close()
		}
		lock.Close()
		return nil, err
	}
	if !opts.Manual {
		j.done = make(chan struct{})
		go j.run()
	}
	return j, nil
}

func (j *Journal) open() error {
	ids, err := listFiles(j.fs, j.dir, true)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		last := ids[len(ids)-1]
		path := j.path(last)
		// The previous incarnation may have died before its last group was
		// synced while the page cache still holds it. Sync before reading,
		// so what we find (and record in the next header) is what is durable.
		if err := syncPath(j.fs, path); err != nil {
			return err
		}
		end, _, err := scanFile(j.fs, path, last, FirstGroupOffset, nil)
		if err != nil {
			return err
		}
		j.opened = link{prevID: last, prevEnd: end}
	}
	if j.w.dir, err = j.fs.OpenDir(j.dir); err != nil {
		return fmt.Errorf("journal: opening directory %s: %w", j.dir, err)
	}
	id := j.opened.prevID + 1
	if err := j.startFile(id, j.opened); err != nil {
		return err
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
	g.buf = appendRecord(g.buf, g.fileID, off, &rec, len(g.buf) == 0)
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
		if len(g.buf) > 0 && len(g.buf)+size > j.opts.MaxGroupBytes {
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

// Flush is the body of the group-commit loop: if a group is due it writes
// the oldest queued group at its place (rotating or preallocating first if
// needed), fdatasyncs the file, and runs the group's callbacks. It returns
// how many appends it completed: 0 if no group was due (see MaxGroupWait)
// or the journal has failed. If this call made the journal fail, the
// returned error is the failure (its appends and all queued ones have been
// failed). Calls are serialized; the writer goroutine calls it in a loop,
// and in Manual mode the owner does.
func (j *Journal) Flush() (int, error) {
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	g := j.takeGroup()
	if g == nil {
		return 0, nil
	}
	if err := j.commit(g); err != nil {
		return 0, j.fail(g, err)
	}
	n := len(g.ends)
	j.complete(g) // recycles g
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

// commit writes g and makes it durable. Only a nil return means durable.
func (j *Journal) commit(g *group) error {
	if j.w.file == nil {
		return fmt.Errorf("journal: file %s is not open", fileName(j.w.fileID))
	}
	if g.fileID != j.w.fileID {
		// Every group of the current file is synced (one group in flight at
		// a time), so its log ends at syncedEnd: record that in the new
		// file's header.
		if err := j.rotate(g.fileID); err != nil {
			return err
		}
	}
	end := g.base + int64(len(g.buf))
	if end > j.w.zeroedEnd {
		target := j.w.zeroedEnd + j.opts.PreallocBytes
		if target < end {
			target = alignUp(end) + j.opts.PreallocBytes
		}
		if err := writeZeros(j.w.file, j.w.zeroedEnd, target); err != nil {
			return fmt.Errorf("journal: preallocating %s: %w", j.path(j.w.fileID), err)
		}
		// The group's fdatasync below makes the zeros durable too.
		j.w.zeroedEnd = target
	}
	if _, err := j.w.file.WriteAt(g.buf, g.base); err != nil {
		return fmt.Errorf("journal: writing %d bytes to %s at offset %d: %w",
			len(g.buf), j.path(j.w.fileID), g.base, err)
	}
	var syncStart time.Time
	if j.opts.OnSync != nil {
		syncStart = j.clock.Now()
	}
	if err := j.w.file.SyncData(); err != nil {
		return fmt.Errorf("journal: fdatasync of %s: %w", j.path(j.w.fileID), err)
	}
	if j.opts.OnSync != nil {
		j.opts.OnSync(j.clock.Now().Sub(syncStart), len(g.ends))
	}
	j.w.syncedEnd = end
	return nil
}

// QueuedRecords is how many records are queued or being written, not yet
// completed (BookKeeper's JOURNAL_QUEUE_SIZE).
func (j *Journal) QueuedRecords() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.queuedRecords
}

func (j *Journal) rotate(id uint64) error {
	prev := link{prevID: j.w.fileID, prevEnd: j.w.syncedEnd}
	old := j.w.file
	j.w.file = nil
	// Every byte of old is synced; a close error loses nothing.
	_ = old.Close()
	return j.startFile(id, prev)
}

// startFile creates file id with its header and first chunk of zeros,
// durable under its final name before any record goes in.
func (j *Journal) startFile(id uint64, prev link) error {
	path := j.path(id)
	tmp := path[:len(path)-len(fileSuffix)] + tmpSuffix
	f, err := j.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("journal: creating %s: %w", tmp, err)
	}
	zeroedEnd := FirstGroupOffset + j.opts.PreallocBytes
	err = func() error {
		if _, err := f.WriteAt(encodeFileHeader(id, prev.prevID, prev.prevEnd), 0); err != nil {
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
		return j.w.dir.Sync()
	}()
	if err != nil {
		_ = f.Close()
		_ = j.fs.Remove(tmp)
		return fmt.Errorf("journal: creating %s: %w", path, err)
	}
	j.w.file, j.w.fileID = f, id
	j.w.syncedEnd, j.w.zeroedEnd = FirstGroupOffset, zeroedEnd
	j.writeFile.Store(id)
	return nil
}

// fail puts the journal in the failed state after g could not be made
// durable. The file is abandoned, never synced again: after a failed
// fdatasync the kernel may have dropped the dirty pages and marked them
// clean, so a retry could "succeed" without the data on disk.
func (j *Journal) fail(g *group, cause error) error {
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	if j.w.file != nil {
		_ = j.w.file.Close()
		j.w.file = nil
	}
	j.mu.Lock()
	first := j.mu.failed == nil
	if first {
		j.mu.failed = err
	}
	failed := append([]*group{g}, j.mu.queue...)
	j.mu.queue = nil
	j.mu.queuedBytes, j.mu.queuedRecords = 0, 0
	j.wakeSpaceWaitersLocked()
	j.mu.Unlock()
	// The owner hears first, so it can turn read-only before any failed
	// append's callback runs.
	if first && j.opts.OnFailure != nil {
		j.opts.OnFailure(err)
	}
	for _, fg := range failed {
		for _, cb := range fg.cbs {
			cb.AppendDone(Position{}, err)
		}
	}
	return err
}

// complete releases g's queue space and runs its callbacks.
func (j *Journal) complete(g *group) {
	j.mu.Lock()
	j.mu.queuedBytes -= int64(len(g.buf))
	j.mu.queuedRecords -= len(g.ends)
	j.wakeSpaceWaitersLocked()
	j.mu.Unlock()
	for i, cb := range g.cbs {
		cb.AppendDone(Position{File: g.fileID, Offset: g.ends[i]}, nil)
	}
	clear(g.cbs)
	g.buf, g.ends, g.cbs = g.buf[:0], g.ends[:0], g.cbs[:0]
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

// run is the writer goroutine: a thin loop around Flush.
func (j *Journal) run() {
	defer close(j.done)
	for {
		if n, _ := j.Flush(); n > 0 {
			continue
		}
		wait, exit := j.idle()
		switch {
		case exit:
			return
		case wait < 0:
			// A group became due between Flush and idle: flush again.
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

// idle says what the writer should do when Flush found nothing due: exit
// (closing and nothing queued), sleep until woken (wait == 0), sleep at most
// wait (a group is waiting for MaxGroupWait), or flush again (wait < 0).
func (j *Journal) idle() (wait time.Duration, exit bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.mu.queue) == 0 || j.mu.failed != nil {
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
// run), and closes the files. A failed journal closes without writing.
// Close is idempotent; it must not be called from a Callback or OnFailure.
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
	if j.w.dir != nil {
		_ = j.w.dir.Close()
		j.w.dir = nil
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
