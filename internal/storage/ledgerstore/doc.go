// Package ledgerstore is the bookie's storage engine: it ties the journal
// (internal/storage/journal), the entry logs with their write cache
// (internal/storage/entrylog) and the Pebble index (internal/storage/index)
// into a storage.Store, and owns checkpoints, journal replay, ledger
// deletion and garbage collection (DESIGN.md §4, issue 4).
//
// # Layout and sharding
//
// Config.JournalDirs: one Journal (one group-commit writer) per directory;
// a ledger's records all go to journal ledgerID mod len(JournalDirs), so
// they keep their order. Each journal directory also holds CHECKPOINT.
//
// Config.LedgerDirs: the first N directories, N being their number when
// the store was created, are the shards: shard i holds the index
// ("index/") and the state of the ledgers with ledger id mod N equal to i,
// forever; N never changes. A shard per directory keeps every ledger's
// locations and state in one place (one fsync domain per checkpoint step,
// no cross-directory lookups) and spreads flush and compaction I/O over
// the devices. Directories after the first N are capacity directories
// (see "Expansion"): no index, no shard, only spilled entry logs. Each
// ledger directory holds a LAYOUT file; Open refuses a moved or removed
// directory (ErrLayout, ErrDataLost), since that would reshuffle ledgers
// or lose entry logs. Open creates missing directories and fsyncs every
// ancestor of every ledger and journal directory up to the root (once per
// Open): the levels above a directory may have been created unsynced (by
// the bookie, an operator or MkdirAll), and a power loss would then take
// the directory with everything in it.
//
// # Spill
//
// A shard's entry logs live in its own directory ("entrylogs/") and, when
// that one is full, in any other ledger directory j, in
// "<dir_j>/entrylogs-shard-<i>/". One entrylog.Store per shard spans all
// these directories with one log-id space, so index locations (log id,
// offset, length) need no directory: Open scans every directory of the
// shard, and the same log id in two of them is a corruption error naming
// both files, never silently one of them. GC and compaction stay per shard
// (one index), wherever a log lives.
//
// Where new logs go (entry logs and compaction outputs): the shard's own
// directory unless it is marked full (SetLedgerDirFull, from the bookie's
// disk checker), else the writable directory with the most free space
// (ties: the lowest position). A shard whose current log is in a
// directory that became full rolls to a new log elsewhere at its next
// flush: a full directory takes no new entry logs. The marks live in
// memory: Config.FullLedgerDirs carries the disk checker's verdict into
// Open, which applies it before journal replay writes any entry log. A
// directory that runs out of space before anyone marked it (ENOSPC
// creating, writing or syncing an entry log) is marked full for that
// shard and the flush writes its (still cached) entries again in another
// writable directory; the failed log is never written again, and the mark
// stays until SetLedgerDirFull(position, false). When every ledger
// directory is full, the shards keep writing where they are: the bookie is
// read-only by then, but journal replay, recovery adds and compaction may
// still need room. The index of a shard keeps growing in its own
// directory even when that is full: index writes are small next to entry
// logs (locations and states, not entries). Journal directories cannot
// spill: a full journal directory makes the bookie read-only.
//
// # Expansion
//
// With Config.AllowExpansion (allowStorageExpansion), ledger directories
// appended to the configured list (the recorded ones unchanged, in the
// same order) join the store as capacity directories at Open: each gets a
// LAYOUT (store id, its position, shard count N, directory count D',
// capacity role: position >= N) and then hosts spill logs of any shard.
// The order is crash-safe: every new directory's LAYOUT is written (file
// fsync, rename, directory fsync), then every journal directory's
// CHECKPOINT is rewritten with D', then every existing directory's LAYOUT
// (shard directories first, in position order), and no entry log is
// written to a new directory before every LAYOUT records D' (entry logs
// open only after). A crash part-way leaves new directories with LAYOUTs
// nobody relies on: the next Open with the same configuration completes
// the expansion; one with the old configuration opens as long as no
// CHECKPOINT and no old LAYOUT records D' yet, and is refused
// (ErrDataLost, below) once one does, until the new directories are
// configured again. Open refuses:
//
//   - more directories than the store records, without AllowExpansion
//     (ErrLayout; the message names allowStorageExpansion);
//   - fewer directories than the store's directory count (see "Lost
//     data"): a removed directory takes its entry logs with it (a
//     *LostError matching ErrDataLost and ErrLayout);
//   - a new directory that is not empty: it may hold only a LAYOUT of this
//     store at its position (an interrupted expansion), the bookie's
//     cookie (VERSION and its temporary files) and lost+found (ErrLayout);
//   - a moved directory (ErrLayout, as any LAYOUT at another position);
//   - a capacity directory whose LAYOUT is missing while a CHECKPOINT or
//     another LAYOUT records it: the directory was wiped or replaced, and the entry logs
//     spilled to it with it (*LostError).
//
// # Files
//
// CHECKPOINT (64 bytes, big-endian, replaced atomically by write-temp,
// fsync, rename, fsync-directory):
//
//	+----------+---------+-----------+------------+-------------+-------------+----------+------------+-------------+---------+
//	| magic (8)| vers (4)| journal(4)| journals(4)| shard       | directory   | file id  | offset (8) | store id    | CRC32C  |
//	| FOLIOCKP | 3       | index     | count      | count N (4) | count D (4) | (8)      |            | (16)        | (4)     |
//	+----------+---------+-----------+------------+-------------+-------------+----------+------------+-------------+---------+
//
// (file id, offset) is a journal.Position: every record of this journal
// before it is durable in the entry logs and indexes. The zero position
// means "replay everything". Version 2 (60 bytes) is version 3 without the
// directory count (which it does not record). LAYOUT
// (44 bytes, written the same way):
//
//	+----------+---------+-----------+------------+-------------+----------+---------+
//	| magic (8)| vers (4)| position  | shard      | directory   | store id | CRC32C  |
//	| FOLIOLDR | 3       | (4)       | count N (4)| count D (4) | (16)     | (4)     |
//	+----------+---------+-----------+------------+-------------+----------+---------+
//
// A position below N is a shard's directory, one at or beyond N a capacity
// directory. Version 2 (40 bytes) is version 3 without the directory count
// (read as D = N); version 1 of both files (44 and 24 bytes) is version 2
// without the store id. Open rewrites every CHECKPOINT and LAYOUT older
// than version 3 before any entry log is opened (see Upgrade). Older versions are read, never written (see
// Upgrade). Each index also holds a stamp: the store id, its shard index
// and the shard count (internal/storage/index).
//
// # Lost data
//
// A bookie must never answer "no such entry" for an entry it acknowledged,
// nor accept a normal add to a ledger it fenced (DESIGN.md §6). Cookies
// catch a wiped bookie; Open catches a store that lost one part: an index/
// deleted (entry logs, LAYOUT and CHECKPOINT left in place) would otherwise
// be recreated empty, and a journal directory that lost its CHECKPOINT (and
// with it, maybe, the records since the last checkpoint) would be replayed
// from nothing. Open decides "lost" only from positive evidence that the
// part existed, never from its absence alone, so a new store, or one that
// crashed before its first checkpoint, opens:
//
//   - The store id, 16 random bytes drawn at the first open
//     (Config.Entropy), is recorded in order: every index stamp (synced),
//     then every CHECKPOINT, then every LAYOUT, all before the journals
//     open. So a LAYOUT with the id proves every CHECKPOINT and index had
//     it, and a CHECKPOINT with the id proves every index had it. A crash
//     part-way leaves a prefix of this order, which the next Open completes.
//   - A shard's entry logs, in its own directory or spilled into another,
//     prove its index existed (it is created before the first flush),
//     journal files prove the journal
//     directory's CHECKPOINT existed (written before the journal opens),
//     and a CHECKPOINT with a non-zero position proves every index existed.
//     These hold for stores written before store ids existed as well.
//
// A missing or unstamped index, or a missing (or id-less) CHECKPOINT,
// against such evidence is a *LostError (errors.Is ErrDataLost) naming the
// path, what is missing, the evidence, and how to recover: restore the
// files from a backup, or let AutoRecovery re-replicate the bookie's
// ledgers and reset it with `folio shell bookieformat --force`. Open creates
// and writes nothing before these checks pass: missing indexes are checked
// for before any is opened (index.Exists, and index.Options.MustExist keeps
// Pebble from creating an empty one); opening the existing ones only
// rewrites Pebble's own manifest. A store id that differs between files, or
// a stamp naming another shard, is ErrLayout (directories of different
// stores). Deleting only a shard directory's LAYOUT loses nothing and is
// repaired from the index stamp and the CHECKPOINTs (the next Open
// rewrites it, with the directory count the CHECKPOINTs record; a
// configuration with fewer directories is refused first, see below). Entry logs deleted under an intact index
// are not detected here: reads of their entries fail with an I/O error,
// never "no such entry".
//
// Capacity directories hold no index, so their evidence is the directory
// count D, recorded in two places: every CHECKPOINT (version 3) and every
// LAYOUT. A CHECKPOINT, and an existing directory's LAYOUT, records D only
// after every directory below D has its LAYOUT. The store's D is the
// largest one the CHECKPOINTs and the shard directories' LAYOUTs record,
// so no single lost or deleted file lets a shrink through (nor does Open
// then rewrite the evidence away); an added directory's LAYOUT from an
// interrupted expansion proves nothing, and counts only when neither a
// CHECKPOINT nor a shard directory's LAYOUT records D (refusing is the
// safe direction). A configured directory below D without a LAYOUT was
// wiped or replaced (*LostError naming the file that records D), and a
// configuration with fewer directories than D removed one (the same
// evidence). Spilled entry logs are evidence for their shard's index as
// the own ones are.
//
// # Upgrade
//
// Directories written before store ids existed (version 1 CHECKPOINT and
// LAYOUT, unstamped indexes) open as before; that first open draws a store
// id and records it as above, so the evidence exists from then on. Losses
// that happened before that open are caught only by the second kind of
// evidence (entry logs, journal files, a non-zero checkpoint). The first
// Open by a build with spill rewrites every CHECKPOINT and LAYOUT older
// than version 3 as version 3 (same content, each atomically, so a crash
// part-way is completed by the next Open), before any entry log is opened
// and so before any can go to a spill directory. Downgrade is not
// supported, and this is what enforces it: a Folio without store ids
// refuses version 2 files, and one without spill refuses version 3 files;
// such a build would otherwise open a store with spilled entry logs
// without seeing them, answer "no such entry" for their entries and reuse
// their log ids.
//
// # Add, fence and the per-ledger lock
//
// Each ledger has a lock under which AddEntry checks the master key
// (recording it on first use: index state + a journaled master-key
// record), checks the fence bit (Recovery adds pass; a fenced-and-deleted
// ledger refuses all adds), copies the entry into the write cache, raises
// the known LAC (max of body[16:24]) and queues the journal record. The add
// completes from the journal's callback once its group is durable. Fence
// sets the bit under the same lock and waits for its journal record, which
// is queued after every add admitted before it: so after Fence returns,
// every such add is durable (or failed), which closes BookKeeper's
// fence/add race (spec/protocol.md §7, PR #4701).
//
// Every change is applied in memory (write cache, index without sync)
// BEFORE its journal record is queued. That ordering is what makes
// checkpoints sound: when a checkpoint captures a journal's durable
// Position P, every record at or before P has already been applied, so
// flushing the write cache and syncing the index covers all of them.
//
// # Ledger state in memory
//
// The per-ledger objects (the lock above, master key, fence bit, LACs) are
// a cache of the index: a ledger's object is loaded on first use and
// dropped by the eviction sweep (Config.LedgerIdleTime,
// EvictIdleLedgers) once it is idle and a reload would rebuild it exactly,
// so a bookie holding many ledgers keeps only the ones in use in memory.
// evict.go states the contract: what pins a ledger (an operation holding
// it, a LAC watch, a fence not yet durable, entries not yet indexed, state
// the index does not have) and why a reload is equivalent.
//
// # Checkpoint
//
// See Store.Checkpoint: capture positions → flush write caches (entry logs
// fsynced) → index Sync → CHECKPOINT written atomically → journal files
// before it deleted. A crash between any two steps replays from the
// previous CHECKPOINT; replay is idempotent.
//
// # Replay
//
// Open replays each journal from its CHECKPOINT before returning (see
// Store.replay for the per-record rules), then checkpoints, so a bookie
// listens only after replay and repeated crashes do not lengthen replay.
//
// # Deletion
//
// The journal has no delete record. DeleteLedger therefore checkpoints
// first (the ledger's records then lie before every journal's checkpoint
// and are never replayed), then drops the cached entries, deletes the
// index records and syncs the index. Replay skips records of ledgers that
// have no state (their master-key record would have come first), so late
// records of a deleted ledger do not resurrect it. A ledger fenced and then
// deleted keeps a fenced-and-deleted state and refuses every add.
//
// # Failures
//
// A journal write or fsync failure fails every add not yet synced
// (journal semantics) and puts the store in the failed state: Failed() is
// closed, Err says why, and later adds, fences and explicit LACs fail with
// storage.ErrReadOnly. Reads keep working. Write-cache flush, index sync
// and checkpoint-file errors fail the store the same way (nothing is lost:
// the journal still holds the records). Only the index answers "no such
// entry"; a ledger state that cannot be read is storage.ErrUnknownLedgerState
// and an entry log that cannot produce an indexed entry is an I/O error.
//
// # Background loops
//
// Without Config.Manual, Open starts: one flush loop per shard
// (on entrylog.FlushWanted), a checkpoint loop (Config.CheckpointInterval)
// and a GC loop (every Config.GCInterval, and on TriggerCompaction). Their
// bodies are FlushWriteCache, Checkpoint and GCTick (which compacts on
// Config.Compaction's minor/major schedule, suspended or forced by
// SetNoSpace; GC is the one-shot pass with Config.GCThreshold), which tests
// and the simulator call directly; with
// ManualJournal they also step group commits with StepJournals. Time comes
// only from Config.Clock.
package ledgerstore
