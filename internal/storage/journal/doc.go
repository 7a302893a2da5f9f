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
// # File format (version 2)
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
//	| "FOLIOJNL" | 2         | 0        |           | 0 = none    | 0 = in the | CRC32C  |
//	|            |           |          |           |             | groups     |         |
//	+------------+-----------+----------+-----------+-------------+------------+---------+
//
// prev id names the file written before this one; prev end is the offset
// at which its log ended, when known at creation (Open knows it; a file
// created ahead of rotation does not and writes 0: then every group header
// of the file records it). The CRC covers bytes [0, 40). Readers accept
// versions 1 and 2 and refuse any other with an error naming the version.
//
// After the header the file holds groups. A group is what one group commit
// wrote with one write: a 32-byte group header and a run of records back
// to back. Every group starts at a multiple of 512 bytes (GroupAlignment);
// the bytes between the end of one group and the start of the next are
// zeros and are never written, because the file was preallocated with
// zeros.
//
//	     512                        1536 (aligned)
//	+----+----+---------------------+----+----+-------------------+-- zeros
//	|hdr | gh | rec rec rec         |0000| gh | rec rec           |0000...
//	+----+----+---------------------+----+----+-------------------+--
//	      group 1 (seq 1)                 group 2 (seq 2)
//
// A group header (gh):
//
//	+---------+------------+-----------------+-----------+-----------+--------------+
//	| CRC (4) | length (4) | payload CRC (4) | flags (4) | seq (8)   | prev end (8) |
//	+---------+------------+-----------------+-----------+-----------+--------------+
//
// length is the size of the records that follow (the payload), payload CRC
// is CRC32C over them. seq numbers the groups of a file 1, 2, 3, ... in
// write order. prev end is where the previous file's log ended (0 if the
// file header names no previous file); it is the same in every group of a
// file. flags are zero. CRC is CRC32C over the group's position (file id
// (8) | offset (8)) followed by header bytes [4, 32): a header is valid
// only where it was written.
//
// A record is as in version 1 (below), with flags 0: the group header
// marks where a group starts. The log of a file ends at the end of its
// last intact group (R1..R3 below).
//
// # The write pipeline
//
// Without Options.Manual three goroutines write: the writer takes a due
// group from the queue, writes it and hands it to the syncer; the syncer
// fdatasyncs and runs the callbacks; the preallocator keeps zeros ahead
// and creates the next file ahead. So the write of group N+1 overlaps the
// fdatasync of group N (BookKeeper's journal has the same two threads).
// The invariants, which replay relies on:
//
//   - P1 (depth 1): group N+2 is written only after an fdatasync that
//     covers group N has completed successfully. At any moment at most two
//     groups are written and not known to be synced, and they are the last
//     two written.
//   - P2 (acknowledgement): a group's callbacks run only after an
//     fdatasync that started after its write completed has returned
//     success; one fdatasync may cover both written groups. Callbacks run
//     on the syncer goroutine, in position order.
//   - P3 (rotation drains): the first group of a file is written only after
//     every group of the file before it is synced, and its header records
//     the end of that file's log. So a file holding a valid group header
//     proves that its predecessor is wholly synced and ends where it says.
//   - P4 (zeros): a group is written only over bytes that already hold
//     zeros written and fdatasynced; the add path never changes the file's
//     size. If the preallocator is behind, the writer waits for it rather
//     than writing zeros itself: the work is the same either way, and one
//     owner of extension and file creation means no range is zeroed twice
//     and no file is created twice.
//   - P5 (ahead file): the next file (header durable with prev end 0, first
//     chunk of zeros synced, renamed, directory synced) is created only
//     once the current file durably records its predecessor's end (its
//     header does, or one of its groups is synced). So a file without a
//     valid group header and without prev end is only ever the last file;
//     Open removes it before creating its own file, which then records the
//     end of the file before.
//
// In Manual mode (tests, the simulator) Flush does the same inline and
// deterministically, one group at a time: write, fdatasync, callbacks;
// zeros are written inline and made durable by the group's own fdatasync,
// and rotation creates the next file with its header recording the end.
//
// # Torn tails and corruption (version 2)
//
// A journal never appends to a file written by an earlier incarnation:
// Open fdatasyncs the last two files of the directory (a file created
// ahead may be the last one while the one before it was being written),
// finds where the log ends, and starts a new file recording that end.
// Replay reads each file's groups in sequence from offset 512, expecting
// seq 1, 2, 3, ...:
//
//   - R1: a valid group header with the expected seq whose payload is
//     whole and matches its CRC: its records are delivered (each must be a
//     valid record with flags 0, together filling the payload exactly; if
//     not, a *CorruptionError: the checksum says it was written so);
//     continue at the next 512-byte boundary after it.
//   - R2: a valid group header with another seq there: *CorruptionError.
//   - R3: otherwise the expected group k is missing or damaged there.
//     Replay probes the 512-byte boundaries after it for valid group
//     headers: if k's header is valid (its payload is not), from the
//     boundary after k's extent (its length says where k ends, and k+1
//     can only be there); else every later boundary. One with seq k+1
//     (k's successor, written while k's fdatasync ran) is allowed, once,
//     and only at that boundary if k's header is valid; the boundaries
//     inside its extent are not probed (they hold its payload). Any other
//     (in particular seq >= k+2, the successor's successor, which by P1
//     proves that k had been synced) is a *CorruptionError at k's offset.
//     If there is none, the log of the file ends at the end of group k-1:
//     a torn tail, cut silently. Group k+1 is not delivered even if intact
//     (it was never acknowledged, P2). Payloads are not probed because
//     they are client data: an entry body may hold bytes that form a valid
//     group header for its own file and offset. Two cases still probe
//     payload boundaries, and there such a look-alike can turn a torn
//     tail into a false *CorruptionError (the bookie then refuses to start
//     until an operator looks; nothing acknowledged is lost): k's own
//     header lost (k's payload is probed, and a k+1 found there is not
//     trusted to say where it ends: probing goes on past it, so that a
//     real k+2 is still found), and k+1's header lost while k's is valid
//     (k+1's payload is probed). Closing them would mean not looking for
//     k+2 behind a damaged k+1, i.e. cutting damage of synced data as a
//     torn tail. An all-zero header block is preallocated space, never a
//     header, whatever its checksum.
//   - R4: if the file is followed by another, that file must record this
//     file's end (its header's prev end, else its group headers', which
//     must all agree) and the ends must be equal; otherwise a
//     *CorruptionError (synced data lost). A following file that records
//     nothing (no valid group header, prev end 0) is allowed only as the
//     last file of the directory (P5).
//   - R5: a replay that starts at a position beyond the end of the log of
//     its file is a *CorruptionError (an acknowledged record is gone).
//
// By P1 a crash leaves at most the last two groups written unsynced, so
// R3 cuts only what a crash can tear, and R2..R4 report damage anywhere
// else. What no rule can tell from a torn tail is damage that the disk
// does later to the last two groups of the log (the last synced group and
// the one after it, if any, while nothing follows them): it is cut like a
// torn tail. Version 1 had the same blind spot for its last group; Open
// narrows it, because the file it creates records the end it found.
//
// # Version 1 (read only)
//
// Files written by older builds have version 1 in their header; they are
// read, never written. Their header is laid out as above, with prev end
// always set when prev id is. There are no group headers: a group is a run
// of records starting at a multiple of 512 bytes whose first record has
// the group-start flag.
//
//	     512                        1536 (aligned)
//	+----+--------------------------+----+------------------------+-- zeros
//	|hdr | rec* rec rec             |0000| rec* rec               |0000...
//	+----+--------------------------+----+------------------------+--
//	      group 1                         group 2          (* = group start flag)
//
// A record (both versions):
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
//	flags: bit 0 = group start (version 1 only); the other bits must be zero.
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
// The version 1 writer wrote a group, synced it, and only then wrote the
// next group (never more than one unsynced group), so only the last group
// of the last file could be damaged by a crash, and a group-start record
// proves that every byte before it in its file had been synced. Replay of
// a version 1 file reads records until the first position B where no
// valid record follows; then:
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
// A directory may hold version 1 files followed by version 2 files (the
// first version 2 file is created by Open and records where the last
// version 1 file ends); replay reads each file by its own version.
//
// # Why preallocate with zeros
//
// spec/performance.md §3.1: on this class of machine an fdatasync into
// blocks that are already written and allocated costs ~90 µs, into a
// growing file ~150 µs, because growing forces a file-system metadata
// commit with each sync. fallocate (vfs Preallocate) leaves extents
// "unwritten" and does not help. So the journal keeps zeros, written and
// synced, ahead of the write position (P4): the preallocator extends the
// file by PreallocBytes whenever less than half of that is left ahead of
// the last group written, off the add path, writing and syncing through
// its own file handle (see Failure semantics). It writes and syncs 256 KiB
// at a time: fdatasync works on the file, not on the handle, so a group's
// fdatasync also writes back whatever zeros are dirty in the file at that
// moment, and small pieces bound that to one piece. The add path then
// overwrites zeros and never changes the file size. The zeros double as
// the format's padding and as its end-of-log marker.
//
// # Failure semantics
//
// An error from any write, fdatasync or file creation (by the writer, the
// syncer or the preallocator) is never retried on the same file: after a
// failed fdatasync the kernel may have dropped the dirty pages and marked
// them clean, so a second fdatasync can succeed without the data ever
// reaching the disk. The first error abandons the file: it waits for the
// I/O in progress, and no I/O on the journal's files starts after it. (I/O
// that another goroutine had started before, such as the fdatasync of
// group N while the write of group N+1 failed, completes; if that
// fdatasync succeeds, group N is durable and is acknowledged.) The
// journal enters a failed state (Journal.Err, Options.OnFailure, which
// runs before any failed callback); every append not yet acknowledged
// fails (in position order, after the acknowledgements of groups whose
// fdatasync had completed), and all later appends fail with ErrFailed.
// Nothing is acknowledged that was not synced. The preallocator writes and
// syncs through its own file handle: Linux reports a write-back error to
// every open file description once, so an error its fdatasync consumes
// still fails the syncer's next fdatasync of the same file. The owner turns
// the bookie read-only.
//
// After a failed fdatasync the directory must not be reopened in the same
// boot of the machine (restarting the process is not enough): the kernel
// reports a write-back error once per open file description, so Open's
// fdatasync of the last files through a fresh descriptor can succeed while
// pages the error hit are still only in the page cache (or lost). Open
// would then find, and record in its new file, a log end that is not on
// the disk; after a later power loss replay reports that end as lost
// synced data (R4) and the bookie does not start, although no
// acknowledged record was lost (nothing unsynced was acknowledged).
// Reboot first, or treat the journal directory as failed. After a failed
// write, file creation or a process crash, reopening is safe: Open syncs
// what the previous incarnation left and starts a new file.
package journal
