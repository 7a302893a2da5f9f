// Package journal is the bookie's write-ahead log: append-only files with
// group commit, where an append is acknowledged only after the bytes that
// hold it have been written and fdatasynced (DESIGN.md §4).
//
// # Using it
//
// One Journal owns one directory. A bookie with several journal directories
// opens one Journal per directory and shards ledgers over them by ledger id
// (ledgerID mod N, as BookKeeper does), so all records of one ledger live in
// one journal and keep their order. Each Journal has its own positions and
// its own checkpoint.
//
// Start-up order: Open (which seals the previous incarnation's last file and
// starts a new one), Replay from the last checkpoint, then serve appends.
// Append copies the record into the pending group and returns; the Callback
// runs once the group is durable (or has definitively failed) with the
// record's Position. Positions are totally ordered and callbacks run in
// position order. Once everything up to a Position is durable elsewhere
// (entry logs and index), MarkDurable(pos) deletes the journal files that
// lie wholly before it.
//
// Replay may deliver a record more than once across restarts (a crash
// between persisting a checkpoint and deleting old files, or an old
// checkpoint) and may deliver records that were never acknowledged (their
// group reached the disk but the fdatasync failed or the process died before
// the ack). Whole records only, never partial ones. The integrator must
// apply replayed records idempotently: entries by (ledger, entry) id, fence
// and master key as set-once, explicit LAC as last-writer-wins in replay
// order.
//
// # File format (version 1)
//
// Files are named "%016x.jnl" by a file id that only grows; a file being
// created is named "%016x.jnl.tmp" until its header is durable, and
// leftover .tmp files are deleted by Open. All integers are little-endian.
//
// A file starts with a 512-byte header block (only the first 44 bytes are
// used; the rest are zeros):
//
//	+------------+-----------+----------+-----------+-------------+------------+---------+
//	| magic (8)  | version(4)| flags (4)| file id(8)| prev id (8) | prev end(8)| CRC (4) |
//	| "FOLIOJNL" | 1         | 0        |           | 0 = none    |            | CRC32C  |
//	+------------+-----------+----------+-----------+-------------+------------+---------+
//
// prev id / prev end name the file written before this one and the offset
// at which its valid records ended, as known when this file was created
// (after that file was synced). Replay checks that the previous file still
// ends there: a record lost at the end of a file that is followed by another
// file is corruption, not a torn tail. The CRC covers bytes [0, 40).
//
// After the header the file holds groups. A group is what one group commit
// wrote and synced: a run of records back to back. Every group starts at a
// multiple of 512 bytes (GroupAlignment); the bytes between the end of one
// group and the start of the next are zeros and are never written, because
// the file was preallocated with zeros.
//
//	     512                        1536 (aligned)
//	+----+--------------------------+----+------------------------+-- zeros
//	|hdr | rec* rec rec             |0000| rec* rec               |0000...
//	+----+--------------------------+----+------------------------+--
//	      group 1                         group 2          (* = group start flag)
//
// A record:
//
//	+----------+------------+----------+-----------+--------------------------+
//	| CRC (4)  | length (4) | type (1) | flags (1) | payload (length bytes)   |
//	+----------+------------+----------+-----------+--------------------------+
//
//	payload by type:
//	  1 add entry     ledger id (8) | entry id (8) | entry body
//	  2 master key    ledger id (8) | master key
//	  3 fence         ledger id (8)
//	  4 explicit LAC  ledger id (8) | explicit LAC body
//
//	flags: bit 0 = group start; the other bits must be zero.
//
// The CRC is CRC32C over the record's position (file id (8) | offset (8))
// followed by length, type, flags and payload. Seeding with the position
// means a record is valid only where it was written: a copy of journal
// bytes inside an entry body, or stale bytes in a reused file, can never
// pass for a record when replay scans for group starts.
//
// Type 0 is never written, so an all-zero header reads as "nothing here".
// A record whose CRC is valid but whose type or flags this version does not
// know is reported as an error naming file and offset (a newer format
// wrote it), never skipped.
//
// # Why preallocate with zeros
//
// spec/performance.md §3.1: on this class of machine an fdatasync into
// blocks that are already written and allocated costs ~90 µs, into a
// growing file ~150 µs, because growing forces a file-system metadata
// commit with each sync. fallocate (vfs Preallocate) leaves extents
// "unwritten" and does not help. So the writer keeps at least
// PreallocBytes of zeros, written and synced, ahead of the write position;
// the add path then overwrites zeros and never changes the file size. The
// zeros double as the format's padding and as its end-of-log marker.
//
// # Torn tails and corruption
//
// The writer writes a group, syncs it, and only then writes the next group
// (there is never more than one unsynced group), and it never appends to a
// file written by an earlier incarnation. So after a crash only the last
// group of the last file can be damaged, and a group-start record proves
// that every byte before it in its file had been synced. Replay reads
// records until the first position B where no valid record follows; then:
//
//   - if B..next 512-byte boundary is zeros and a valid group start is
//     there, that was group padding: continue;
//   - else, if any later 512-byte boundary of the file holds a valid group
//     start, the bytes at B had been synced before that group was written:
//     a corrupt record in the middle, reported as a *CorruptionError naming
//     file and offset;
//   - else B is the end of the log in this file (a torn or zeroed tail from
//     the last, unacknowledged group), and it must agree with the "prev
//     end" recorded in the next file's header, if any.
//
// # Failure semantics
//
// An error from write or fdatasync is never retried on the same file: after
// a failed fdatasync the kernel may have dropped the dirty pages and marked
// them clean, so a second fdatasync can succeed without the data ever
// reaching the disk. The file is abandoned, every append of the failed group
// and every queued append fails, the journal enters a failed state
// (Journal.Err, Options.OnFailure) and all later appends fail with
// ErrFailed. Nothing is acknowledged that was not synced. The owner turns
// the bookie read-only; reopening the directory starts a new file.
package journal
