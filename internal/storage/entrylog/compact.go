package entrylog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// isTorn reports whether err is a *CorruptionError classified Torn.
func isTorn(err error) bool {
	var ce *CorruptionError
	return errors.As(err, &ce) && ce.Torn
}

// LogUsage describes one entry log for garbage collection.
type LogUsage struct {
	LogID uint64
	// TotalBytes counts the records (headers and bodies) found in the log.
	TotalBytes int64
	// LiveBytes counts the records of ledgers the predicate called live.
	LiveBytes int64
	// Sealed logs are no longer written to; only they are compacted.
	Sealed bool
	// Damaged logs do not verify to the end of the file (Open found damage
	// that is not a crash's torn tail): their totals count only the records
	// before the damage, so GC never compacts or removes them.
	Damaged bool
}

// LiveFraction is LiveBytes/TotalBytes; 0 for a log without records, so
// GC removes it.
func (u LogUsage) LiveFraction() float64 {
	if u.TotalBytes == 0 {
		return 0
	}
	return float64(u.LiveBytes) / float64(u.TotalBytes)
}

// Usage reports every entry log's total and live bytes, by log id. live
// says whether a ledger still exists; it is called without store locks held
// (it may consult the index) but must not call back into the store.
func (s *Store) Usage(live func(ledgerID int64) bool) []LogUsage {
	type snap struct {
		id      uint64
		total   int64
		ledgers map[int64]int64
		sealed  bool
		damaged bool
	}
	s.mu.Lock()
	snaps := make([]snap, 0, len(s.mu.logs))
	for id, lf := range s.mu.logs {
		_, writing := s.mu.writing[id]
		// Maps are copied so live runs without the store lock.
		snaps = append(snaps, snap{id, lf.total, copyMap(lf.ledgers), !writing, lf.damage != nil})
	}
	s.mu.Unlock()
	out := make([]LogUsage, 0, len(snaps))
	for _, sn := range snaps {
		u := LogUsage{LogID: sn.id, TotalBytes: sn.total, Sealed: sn.sealed, Damaged: sn.damaged}
		for l, n := range sn.ledgers {
			if live(l) {
				u.LiveBytes += n
			}
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b LogUsage) int {
		switch {
		case a.LogID < b.LogID:
			return -1
		case a.LogID > b.LogID:
			return 1
		}
		return 0
	})
	return out
}

func copyMap(m map[int64]int64) map[int64]int64 {
	c := make(map[int64]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// CompactStats reports what one compaction or GC pass did.
type CompactStats struct {
	// LogsRemoved counts entry logs deleted (compacted or wholly dead).
	LogsRemoved int
	// LogsWritten counts compaction outputs created.
	LogsWritten int
	// BytesRead and BytesWritten count record bytes read from old logs and
	// written to new ones.
	BytesRead, BytesWritten int64
	// EntriesMoved counts relocations handed to apply.
	EntriesMoved int
	// EntriesDropped counts records of dead ledgers left behind.
	EntriesDropped int
	// LogsDamaged counts entry logs GC left alone because their records do
	// not verify to the end of the file (Store.DamagedLogs says where).
	LogsDamaged int
}

func (c *CompactStats) add(o CompactStats) {
	c.LogsRemoved += o.LogsRemoved
	c.LogsWritten += o.LogsWritten
	c.BytesRead += o.BytesRead
	c.BytesWritten += o.BytesWritten
	c.EntriesMoved += o.EntriesMoved
	c.EntriesDropped += o.EntriesDropped
	c.LogsDamaged += o.LogsDamaged
}

// DamagedLogs returns, by log id, the damage Open found in entry logs that
// do not verify to their end (other than a crash's torn tail). Such logs
// are kept and never compacted: entries after the damage may be live.
func (s *Store) DamagedLogs() []*CorruptionError {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*CorruptionError
	for _, lf := range s.mu.logs {
		if lf.damage != nil {
			out = append(out, lf.damage)
		}
	}
	slices.SortFunc(out, func(a, b *CorruptionError) int { return strings.Compare(a.File, b.File) })
	return out
}

// GC is the garbage-collection loop body. It first removes every sealed
// entry log with no live bytes (under live), which needs no disk space and
// is what frees space on a full disk; then, for every sealed log whose live
// fraction is below threshold (e.g. 0.2 for BookKeeper's minor and 0.5 for
// its major compaction), it runs CompactLog. Both go through CompactLog
// (apply is called for a dead log too, with no relocations, so that the
// index is synced first). A damaged log (LogUsage.Damaged) is never
// touched; it is counted in LogsDamaged. One log's failure (say, ENOSPC
// writing a compaction output) does not stop the others: GC returns every
// failure joined, and stops early only when the store is closed. See the
// package comment for the protocol apply must follow.
func (s *Store) GC(threshold float64, live func(ledgerID int64) bool, apply func([]Relocation) error) (CompactStats, error) {
	var total CompactStats
	var errs []error
	usage := s.Usage(live)
	for pass := range 2 {
		for _, u := range usage {
			if u.Damaged {
				if pass == 0 {
					total.LogsDamaged++
				}
				continue
			}
			dead := u.LiveBytes == 0
			if !u.Sealed || u.LiveFraction() >= threshold || dead != (pass == 0) {
				continue
			}
			st, err := s.CompactLog(u.LogID, live, apply)
			total.add(st)
			if errors.Is(err, ErrClosed) {
				return total, err
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return total, errors.Join(errs...)
}

// CompactLog rewrites the records of live ledgers in sealed log logID into
// a new entry log, hands the relocations to apply, and then removes the old
// log (package comment, "Garbage collection and compaction: the protocol").
// apply must make the relocations durable in the index, each applied only
// if the index still holds Old, before returning nil; if it returns an
// error the old log is kept. apply is called even with no relocations (a
// wholly dead log): it must still sync the index, so that the deletions
// that made the log dead are durable before the log goes.
// Reads and writes go through Options.CompactionLimiter.
func (s *Store) CompactLog(logID uint64, live func(ledgerID int64) bool, apply func([]Relocation) error) (CompactStats, error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	var st CompactStats
	s.mu.Lock()
	lf, ok := s.mu.logs[logID]
	_, writing := s.mu.writing[logID]
	closed := s.mu.closed
	s.mu.Unlock()
	switch {
	case closed:
		return st, ErrClosed
	case !ok:
		return st, fmt.Errorf("%w: log %d", ErrNoLog, logID)
	case writing:
		return st, fmt.Errorf("%w: log %d", ErrNotSealed, logID)
	}

	var out *logWriter
	var relocs []Relocation
	var outUsage map[int64]int64
	lim := s.opts.CompactionLimiter
	if lf.damage != nil {
		return st, fmt.Errorf("entrylog: log %d is kept, not compacted: %w", logID, lf.damage)
	}
	lf.mu.RLock()
	fi, err := lf.f.Stat()
	if err == nil {
		var end int64
		end, err = scanLog(lf.f, lf.path, fi.Size(), lim, func(r record, off int64, size int) error {
			st.BytesRead += int64(size)
			if !live(r.ledgerID) {
				st.EntriesDropped++
				return nil
			}
			if out == nil {
				w, err := s.createLog(true, nil)
				if err != nil {
					return err
				}
				out = w
				outUsage = make(map[int64]int64)
			}
			if err := lim.Wait(int64(size)); err != nil {
				return err
			}
			newLoc := Location{LogID: out.lf.id, Offset: out.offset, Size: uint32(len(r.body))}
			if err := s.appendTo(out, r.ledgerID, r.entryID, r.body); err != nil {
				return err
			}
			relocs = append(relocs, Relocation{LedgerID: r.ledgerID, EntryID: r.entryID,
				Old: Location{LogID: logID, Offset: off, Size: uint32(len(r.body))}, New: newLoc})
			outUsage[r.ledgerID] += int64(size)
			st.BytesWritten += int64(size)
			return nil
		})
		if err == nil && end < fi.Size() {
			// The records stop verifying before the end of the file. Only
			// a torn tail (nothing verifiable after it) is the end of the
			// log's data; otherwise live records may follow the damage,
			// and removing the log would destroy them.
			if terr := tailError(lf.f, lf.path, end, fi.Size()); !isTorn(terr) {
				err = fmt.Errorf("entrylog: log %d is kept, not compacted: %w", logID, terr)
			}
		}
	} else {
		err = fmt.Errorf("entrylog: stat %s: %w", lf.path, err)
	}
	lf.mu.RUnlock()
	if err == nil && out != nil {
		err = s.publishCompacted(out, outUsage)
	}
	if err != nil {
		if out != nil {
			if out.f != nil { // publishCompacted closes it before its rename
				_ = out.f.Close()
			}
			// Best effort: the unpublished output is removed under either
			// name (publishCompacted may have failed after its rename; a
			// ".log" left here would never be registered or collected). A
			// leftover ".compacting" file is also removed at Open.
			_ = s.fs.Remove(s.fs.PathJoin(out.lf.dir.path, compactingFileName(out.lf.id)))
			if s.fs.Remove(out.lf.path) == nil {
				_ = syncDir(s.fs, out.lf.dir.path)
			}
		}
		return st, err
	}
	if out != nil {
		st.LogsWritten++
		st.EntriesMoved = len(relocs)
	}
	// apply runs even with no relocations: it syncs the index, which makes
	// durable the deletions that made this log's records dead. Without it a
	// crash could bring back index entries pointing into the removed log.
	if err := apply(relocs); err != nil {
		return st, fmt.Errorf("entrylog: apply relocations from log %d: %w", logID, err)
	}
	if err := s.removeLog(lf); err != nil {
		return st, err
	}
	st.LogsRemoved++
	return st, nil
}

// publishCompacted makes a compaction output durable and visible: sync,
// rename ".compacting" to ".log", sync the directory, register it.
func (s *Store) publishCompacted(w *logWriter, usage map[int64]int64) error {
	if err := s.syncWriter(w); err != nil {
		return err
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("entrylog: close %s: %w", w.lf.path, err)
	}
	tmp := s.fs.PathJoin(w.lf.dir.path, compactingFileName(w.lf.id))
	if err := s.fs.Rename(tmp, w.lf.path); err != nil {
		return fmt.Errorf("entrylog: rename %s: %w", tmp, err)
	}
	if err := syncDir(s.fs, w.lf.dir.path); err != nil {
		return err
	}
	r, err := s.fs.Open(w.lf.path)
	if err != nil {
		return fmt.Errorf("entrylog: open %s for reading: %w", w.lf.path, err)
	}
	lf := w.lf
	lf.f = r
	lf.size = w.offset
	for l, n := range usage {
		lf.ledgers[l] += n
		lf.total += n
	}
	s.mu.Lock()
	s.mu.logs[lf.id] = lf
	s.mu.Unlock()
	return nil
}

// removeLog deletes an entry log: later reads of it get ErrLogRemoved.
func (s *Store) removeLog(lf *logFile) error {
	s.mu.Lock()
	delete(s.mu.logs, lf.id)
	s.mu.removed[lf.id] = struct{}{}
	s.mu.Unlock()
	lf.mu.Lock() // waits for in-flight reads
	var cerr error
	if lf.f != nil {
		cerr = lf.f.Close()
		lf.f = nil
	}
	lf.mu.Unlock()
	if err := s.fs.Remove(lf.path); err != nil {
		return fmt.Errorf("entrylog: remove %s: %w", lf.path, err)
	}
	if err := syncDir(s.fs, lf.dir.path); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("entrylog: close %s: %w", lf.path, cerr)
	}
	return nil
}

// DiskUsage returns the bytes of all entry logs (headers included) as of
// the last flush or compaction.
func (s *Store) DiskUsage() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, lf := range s.mu.logs {
		n += lf.size
	}
	return n
}
