// Package entrylog stores entry bodies for the bookie: a bounded in-memory
// write cache in front of append-only entry log files that hold the entries
// of many ledgers interleaved (BookKeeper's DbLedgerStorage design,
// spec/performance.md §2.1 steps 2, 7 and 8).
//
// # Data flow
//
//	Add ──► write cache (active generation, bounded bytes)
//	             │ Flush: freeze the active generation, sort by (ledger, entry),
//	             ▼        append to the current entry log, fsync it
//	        entry log NNNN.log ──► apply(placements) ──► caller writes the index
//	             │
//	Read ◄── write cache, then read cache (ReadCachedEntry), then the entry
//	         log at the index's Location (ReadAhead: one read that also
//	         fills the read cache with the ledger's following entries the
//	         index names; ReadMany: a batch in (log, offset) order, nearby
//	         records joined into one read)
//
// The read cache is consulted before the index; readCache (cache.go)
// states what it may hold and when it is invalidated.
//
// The package owns no index: Flush and compaction hand the new locations to
// a caller-supplied function (the integrator writes them to the Pebble index
// in internal/storage/index) and only then forget the cached copy, so an
// entry is always readable from the cache, from the log through the index,
// or both.
//
// # Directories and spill
//
// A store's logs may live in several directories (OpenDirs): its own
// first, then others it spills into. They share one log-id space (a new
// id is one past the highest found in any directory), so a Location never
// names a directory. Open scans them all; the same id in two directories
// is a *CorruptionError naming both files. A new log, or a compaction
// output, goes to the own directory unless it is marked full (SetDirFull),
// else to the writable directory with the most free space (ties: the
// lowest index; the file system's GetDiskUsage of the directory, or of its
// nearest existing ancestor before it is created, says), else, when every
// directory is full, where the store is writing already. The current log
// of a directory that became full is sealed at the next Flush and the
// next one starts elsewhere. ENOSPC creating, writing or syncing a log
// marks its directory full and the Flush writes the frozen generation
// again, from its start, into another writable directory (the records of
// the failed attempt are indexed nowhere and GC removes them); with no
// writable directory left Flush returns the error. Compaction marks the
// directory full the same way but does not retry: that log's compaction
// fails and a later pass compacts it into another directory. Directories other
// than the own one are created when the first log goes there. A log is
// read, compacted and removed (its directory fsynced) where it lives.
//
// # Entry log file format (version 1)
//
// Every integer is big-endian. A file is named "%016x.log" after its log id;
// log ids only grow and are never reused (the highest id found at Open plus
// one is the next). A file starts with a 32-byte header:
//
//	 0       8          12              20           28        32
//	+--------+----------+---------------+------------+---------+
//	| magic  | version  | log id        | reserved   | crc32c  |
//	| "FOLIOLOG" uint32 | uint64        | 8 zero B   | of 0:28 |
//	+--------+----------+---------------+------------+---------+
//
// then records, back to back, each a 24-byte header and the entry body:
//
//	 0        4        8            16           24
//	+--------+--------+------------+------------+-------------------+
//	| length | crc32c | ledger id  | entry id   | body (length B)   |
//	| uint32 | uint32 | int64      | int64      |                   |
//	+--------+--------+------------+------------+-------------------+
//
// crc32c (Castagnoli) covers the length field, the two ids and the body, so
// a record read at a Location proves it is the entry that was asked for:
// a torn write, a stale or zeroed block, or a location pointing at the wrong
// record all fail the check. length is bounded by MaxEntryBytes so a garbage
// header is never trusted to size an allocation. A Location is (log id,
// offset of the record header, body length).
//
// Why the fields: the magic and version let a reader refuse a file it does
// not understand; the log id in the header catches a misnamed file; the ids
// in every record make the log self-describing, so it can be scanned to
// rebuild per-ledger usage for garbage collection without the index.
//
// Files are written only by appending. A file that was open for writing
// when the process stopped is never appended to again: Open always starts a
// new log, so a torn tail is never followed by new records. Scanning a log
// (at Open, to rebuild usage, and during compaction) stops at the first
// record that does not verify. That is the end of the log's data only when
// it is a torn tail: the record is cut short by the end of the file and no
// verifiable record follows (looked for byte by byte). Anything else is
// damage with possibly live records after it: Open keeps such a log out of
// garbage collection for good (Store.DamagedLogs, CompactStats.LogsDamaged)
// and CompactLog refuses it. A log is removed at Open as a crash leftover
// only when it is shorter than its header or all zero; a zero header
// before data is damage (the header is synced before any record) and fails
// Open. Reading a record at a Location that does not verify is a
// *CorruptionError naming the file and offset, never "no such entry".
//
// # Durability
//
// Flush returns placements only after the entry log was fsynced (and, for a
// new file, its directory). A failed write or fsync abandons the file for
// writing (it is never fsynced again: the kernel may have dropped the dirty
// pages, see issue 4 item 7); the frozen generation stays in memory and the
// next Flush writes it to a new log. The entries in the cache are not
// durable: the journal (internal/storage/journal) is the write-ahead log and
// replays them after a crash.
//
// # Garbage collection and compaction: the protocol
//
// The store keeps, for every log, the bytes each ledger occupies in it
// (built while flushing, rebuilt by scanning at Open). Usage(live) reports,
// per log, total and live bytes under a liveness predicate over ledger ids.
// GC(threshold, live, apply) removes sealed logs with no live bytes and
// compacts sealed logs whose live fraction is below threshold. Compacting
// one log (CompactLog) is, in this order:
//
//  1. Read the old log sequentially (rate-limited) and append every record
//     of a live ledger to a new file "%016x.log.compacting" (rate-limited).
//  2. fsync the new file, rename it to "%016x.log", fsync the directory.
//     A crash before the rename leaves only a ".compacting" file, which Open
//     deletes; nothing refers to it.
//  3. Call apply(relocations), also when there are none. The caller MUST,
//     before returning nil, sync the index (so deletions that made records
//     dead are durable too), make each relocation durable in the index,
//     and apply each one only if the
//     index still maps (ledger, entry) to Old (compare-and-set: an entry
//     that was deleted or re-written since must not be resurrected or
//     overwritten). index.Index.Relocate does exactly this and syncs.
//  4. Only after apply returned nil: mark the old log removed, close it,
//     delete the file and fsync the directory.
//
// If apply fails, the old log stays and the new one becomes an ordinary log
// holding duplicates (reclaimed by a later GC). So at every instant a live
// entry is readable at the location the durable index holds. A reader that
// looked a location up before step 3 and reads after step 4 gets
// ErrLogRemoved: it must look the location up in the index again (once is
// enough: the index already holds the new location).
//
// Liveness is per ledger, as in BookKeeper's GC: records of a live ledger
// that the index no longer points at (an entry written twice, or the
// orphan copy left by a compaction that crashed after step 2) count as live
// until their ledger is deleted; the compare-and-set in step 3 keeps them
// from ever being indexed.
//
// # Ledger deletion
//
// The integrator deletes a ledger by calling DropLedger (so that cached
// entries of the ledger are never flushed into the index again) and then
// deleting it from the index. DropLedger waits for an in-progress flush to
// finish applying its placements, so a flush cannot re-index a deleted
// ledger behind the index deletion.
//
// # Background loops
//
// Flush, GC and CompactLog are loop bodies: the caller runs them from a
// thin goroutine (or the simulator steps them). FlushWanted signals when the
// write cache is half full or an Add is waiting for space. Time comes from
// an injected Clock; nothing here reads the wall clock.
package entrylog
