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
// Config.LedgerDirs: each directory is a shard with its own entry logs
// ("entrylogs/") and index ("index/"), holding the ledgers with ledger id
// mod len(LedgerDirs) equal to its position. A shard per directory keeps
// every ledger's entries, locations and state in one place (one fsync
// domain per checkpoint step, no cross-directory lookups) and spreads flush
// and compaction I/O over the devices. Each holds a LAYOUT file; Open
// refuses a changed number or order of directories (ErrLayout), since that
// would reshuffle ledgers.
//
// # Files
//
// CHECKPOINT (60 bytes, big-endian, replaced atomically by write-temp,
// fsync, rename, fsync-directory):
//
//	+----------+---------+-----------+------------+-----------+----------+------------+-------------+---------+
//	| magic (8)| vers (4)| journal(4)| journals(4)| ledger    | file id  | offset (8) | store id    | CRC32C  |
//	| FOLIOCKP | 2       | index     | count      | dirs (4)  | (8)      |            | (16)        | (4)     |
//	+----------+---------+-----------+------------+-----------+----------+------------+-------------+---------+
//
// (file id, offset) is a journal.Position: every record of this journal
// before it is durable in the entry logs and indexes. The zero position
// means "replay everything". LAYOUT (40 bytes, written the same way):
// magic "FOLIOLDR", version 2, shard index (4), shard count (4), store id
// (16), CRC32C. Version 1 of both files (44 and 24 bytes) is the same
// without the store id; it is read, never written (see Upgrade). Each index
// also holds a stamp: the store id, its shard index and count
// (internal/storage/index).
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
//   - Entry logs in a ledger directory prove its index existed (it is
//     created before the first flush), journal files prove the journal
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
// stores). Deleting only a LAYOUT loses nothing and is repaired from the
// index stamp. Entry logs deleted under an intact index are not detected
// here: reads of their entries fail with an I/O error, never "no such
// entry".
//
// # Upgrade
//
// Directories written before store ids existed (version 1 CHECKPOINT and
// LAYOUT, unstamped indexes) open as before; that first open draws a store
// id and records it as above, so the evidence exists from then on. Losses
// that happened before that open are caught only by the second kind of
// evidence (entry logs, journal files, a non-zero checkpoint). An older
// Folio refuses version 2 files (downgrade is not supported).
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
// Without Config.Manual, Open starts: one flush loop per ledger directory
// (on entrylog.FlushWanted), a checkpoint loop (Config.CheckpointInterval)
// and a GC loop (every Config.GCInterval, and on TriggerCompaction). Their
// bodies are FlushWriteCache, Checkpoint and GCTick (which compacts on
// Config.Compaction's minor/major schedule, suspended or forced by
// SetNoSpace; GC is the one-shot pass with Config.GCThreshold), which tests
// and the simulator call directly; with
// ManualJournal they also step group commits with StepJournals. Time comes
// only from Config.Clock.
package ledgerstore
