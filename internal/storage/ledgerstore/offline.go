package ledgerstore

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/index"
	"github.com/foliodb/folio/internal/storage/journal"
)

// The offline tools below (`folio shell lastmark`, `localconsistencycheck`,
// `rebuild-index`) work on a stopped store's directories. They take the
// LOCK of every journal directory first, as journal.Open does, so that they
// never run next to a bookie that uses the directories.

// ErrInUse: a journal directory's LOCK is held, by a running bookie.
var ErrInUse = errors.New("ledgerstore: the store's directories are in use (is the bookie running?)")

// lockJournals locks every existing journal directory of cfg; release
// unlocks them.
func lockJournals(fs vfs.FS, dirs []string) (release func(), err error) {
	var locks []io.Closer
	release = func() {
		for _, l := range locks {
			l.Close()
		}
	}
	for _, d := range dirs {
		if _, err := fs.Stat(d); errors.Is(err, iofs.ErrNotExist) {
			continue
		} else if err != nil {
			release()
			return nil, fmt.Errorf("ledgerstore: %s: %w", d, err)
		}
		l, err := fs.Lock(fs.PathJoin(d, "LOCK"))
		if err != nil {
			release()
			return nil, fmt.Errorf("%w: cannot lock %s: %v", ErrInUse, d, err)
		}
		locks = append(locks, l)
	}
	return release, nil
}

// LastMark is one journal directory's last log mark: the journal position
// up to which every record is durable in the entry logs and indexes (its
// CHECKPOINT), BookKeeper's "lastMark". Replay starts there.
type LastMark struct {
	JournalDir string
	// Position is the zero Position when the journal has no checkpoint yet
	// (a new store: replay from the beginning).
	Position journal.Position
	// Checkpointed says whether a CHECKPOINT file exists.
	Checkpointed bool
}

// LastMarks reads the CHECKPOINT of every journal directory of cfg without
// changing anything. It may run while the bookie runs: CHECKPOINT is
// replaced atomically.
func LastMarks(fs vfs.FS, cfg Config) ([]LastMark, error) {
	var out []LastMark
	for i, dir := range cfg.JournalDirs {
		path := fs.PathJoin(dir, checkpointFile)
		b, ok, err := readSmallFile(fs, path)
		if err != nil {
			return nil, err
		}
		m := LastMark{JournalDir: dir, Checkpointed: ok}
		if ok {
			c, err := decodeCheckpoint(path, b)
			if err != nil {
				return nil, err
			}
			if c.journalIndex != uint32(i) || c.journalCount != uint32(len(cfg.JournalDirs)) {
				return nil, fmt.Errorf("%w: %s belongs to journal %d of %d, now configured as journal %d of %d",
					ErrLayout, dir, c.journalIndex, c.journalCount, i, len(cfg.JournalDirs))
			}
			m.Position = c.pos
		}
		out = append(out, m)
	}
	return out, nil
}

// Problem is one inconsistency found by CheckConsistency.
type Problem struct {
	LedgerDir string
	// LedgerID and EntryID name the entry (EntryID -1: the ledger as a
	// whole, e.g. an index value that does not decode).
	LedgerID, EntryID int64
	// Location is the index's location of the entry (zero when unknown).
	Location entrylog.Location
	// Reason says what is wrong.
	Reason string
}

// CheckResult is what CheckConsistency examined and found.
type CheckResult struct {
	Ledgers, Entries int64
	Problems         []Problem
}

// CheckConsistency is BookKeeper's localconsistencycheck: every location
// in every ledger directory's index must point at a readable record of the
// same ledger and entry, of the indexed size, whose checksum verifies. It
// changes nothing and refuses to run while the journals are locked (the
// bookie runs). A missing index, a state or location that does not decode
// and a record that does not verify are Problems; an error is returned
// only when the check itself cannot proceed.
func CheckConsistency(fs vfs.FS, cfg Config) (CheckResult, error) {
	var res CheckResult
	if len(cfg.LedgerDirs) == 0 || len(cfg.JournalDirs) == 0 {
		return res, errors.New("ledgerstore: no journal or ledger directories configured")
	}
	release, err := lockJournals(fs, cfg.JournalDirs)
	if err != nil {
		return res, err
	}
	defer release()
	// The shard count, and the check that the directories are the store's.
	ev, err := (&Store{fs: fs, cfg: cfg}).inspect()
	if err != nil {
		return res, err
	}
	for i, st := range ev.ledger {
		if err := checkDir(fs, st.dir, shardLogDirs(fs, cfg.LedgerDirs, i), &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// checkDir checks the index of the shard in dir against its entry logs
// in logDirs (its own and its spill directories).
func checkDir(fs vfs.FS, dir string, logDirs []string, res *CheckResult) error {
	ixDir := fs.PathJoin(dir, "index")
	ok, err := index.Exists(fs, ixDir)
	if err != nil {
		return err
	}
	if !ok {
		for _, d := range logDirs {
			hasLogs, err := entrylog.HasLogs(fs, d)
			if err != nil {
				return err
			}
			if hasLogs {
				res.Problems = append(res.Problems, Problem{LedgerDir: dir, LedgerID: -1, EntryID: -1,
					Reason: ixDir + " is missing while " + d + " holds entry logs of its ledgers (rebuild it with `folio shell rebuild-index`)"})
				break
			}
		}
		return nil
	}
	ix, err := index.Open(fs, ixDir, index.Options{MustExist: true})
	if err != nil {
		res.Problems = append(res.Problems, Problem{LedgerDir: dir, LedgerID: -1, EntryID: -1, Reason: "the index does not open: " + err.Error()})
		return nil
	}
	defer ix.Close()
	rd := entrylog.NewFileReader(fs, logDirs...)
	defer rd.Close()
	var ledgers []int64
	if err := ix.Ledgers(func(id int64, st index.State) bool {
		if !st.Deleted {
			ledgers = append(ledgers, id)
		}
		return true
	}); err != nil {
		res.Problems = append(res.Problems, Problem{LedgerDir: dir, LedgerID: -1, EntryID: -1, Reason: "listing the ledgers' states: " + err.Error()})
	}
	for _, id := range ledgers {
		res.Ledgers++
		err := ix.Entries(id, 0, func(e int64, loc index.Location) bool {
			res.Entries++
			if _, err := rd.Read(id, e, loc); err != nil {
				res.Problems = append(res.Problems, Problem{LedgerDir: dir, LedgerID: id, EntryID: e, Location: loc, Reason: err.Error()})
			}
			return true
		})
		if err != nil {
			res.Problems = append(res.Problems, Problem{LedgerDir: dir, LedgerID: id, EntryID: -1, Reason: "listing its entries: " + err.Error()})
		}
	}
	return nil
}

// RebuildOptions configure RebuildIndex.
type RebuildOptions struct {
	// All rebuilds every ledger directory's index; by default only those
	// that are missing, do not open, carry no stamp while the store has an
	// id, or hold a value that does not decode.
	All bool
	// AcceptDamage installs the rebuilt index even though an entry log is
	// damaged before its end (see LogDamage): the entries after the damage
	// cannot be indexed and the bookie will not serve them. Without it such
	// damage makes RebuildIndex fail with a *DamageError, changing nothing.
	AcceptDamage bool
	// MasterKey, if set, is asked for the master key of each ledger whose
	// key neither the old index nor the journals hold (the shell derives it
	// from the password in the ledger's metadata). ok false: unknown; an
	// error stops the rebuild (directories rebuilt before stay rebuilt,
	// the others unchanged).
	MasterKey func(ledgerID int64) (key []byte, ok bool, err error)
	// EnsembleLedgers, if set, returns every ledger whose metadata names
	// this bookie in one of its ensembles (the shell reads them from the
	// metadata store). Each one of a rebuilt directory that would get no
	// state otherwise (no records here, unknown to the old index and the
	// journals: a striped ledger, or one fenced before any entry arrived)
	// gets a fenced state, its master key from MasterKey: its fence may
	// have been lost with the index (DESIGN.md §6: a fence is never lost).
	// An error stops the rebuild before anything is written.
	EnsembleLedgers func() ([]int64, error)
	// AcceptLostFences lets a rebuild proceed without EnsembleLedgers
	// although a directory's old index is missing or incomplete: a ledger
	// fenced on this bookie without entries here then has no state after
	// the rebuild, and a late add of its old writer is accepted. Without
	// EnsembleLedgers or AcceptLostFences such a rebuild fails with
	// ErrFencesUnknown, changing nothing.
	AcceptLostFences bool
}

// ErrFencesUnknown: RebuildIndex would lose the fences of ledgers without
// entries on this bookie (RebuildOptions.EnsembleLedgers).
var ErrFencesUnknown = errors.New("ledgerstore: an old index is missing or incomplete and no list of this bookie's ledgers " +
	"was given: ledgers fenced here without entries here would lose their fence")

// LogDamage is an entry log that does not verify to its end.
type LogDamage struct {
	File string
	// Offset is where verified records end; Remaining how many bytes
	// follow.
	Offset, Remaining int64
	Reason            string
	// TornTail: the bytes after Offset are what a crash leaves in the log
	// being written: one record cut short by the end of the file with
	// nothing verifiable after it, a log created at a crash before its
	// header was written (all zero), or an unsynced stretch followed only
	// by records written after the last checkpoint (see crashTail). Its
	// acknowledged entries are still in the journal (a flush is durable
	// before the checkpoint passes them), so nothing is lost.
	TornTail bool
}

// DamageError is RebuildIndex's refusal of damaged entry logs.
type DamageError struct{ Damage []LogDamage }

func (e *DamageError) Error() string {
	s := fmt.Sprintf("ledgerstore: %d entry log(s) are damaged before their end; the entries after the damage cannot be indexed:", len(e.Damage))
	for _, d := range e.Damage {
		s += fmt.Sprintf(" %s at offset %d (%s, %d bytes follow);", d.File, d.Offset, d.Reason, d.Remaining)
	}
	return s + " nothing was changed"
}

// RebuiltDir reports one rebuilt ledger directory.
type RebuiltDir struct {
	Dir string
	// Why the index was rebuilt.
	Why string
	// LogsScanned, Entries and Ledgers count what the new index holds.
	LogsScanned      int
	Entries, Ledgers int64
	// StatesKept: ledger states (master key, fence, explicit LAC) salvaged
	// from the old index; KeysFromJournal: master keys found in the
	// journals; KeysFromCallback: master keys given by
	// RebuildOptions.MasterKey; UnknownKeys: ledgers whose master key was not found
	// (written again by no one: adds to them are refused as unauthorised);
	// FencedForSafety: ledgers marked fenced because their fence state was
	// lost.
	StatesKept, KeysFromJournal, KeysFromCallback, UnknownKeys, FencedForSafety int64
	// OldIndex is where the replaced index was moved ("" if there was none).
	OldIndex string
}

// RebuildReport is RebuildIndex's result.
type RebuildReport struct {
	Rebuilt []RebuiltDir
	// Skipped lists the ledger directories whose index was sound.
	Skipped []string
	// Resumed lists the ledger directories where an earlier run's swap,
	// interrupted after its rebuilt index was complete, was finished.
	Resumed []string
	// Damage lists every entry log that does not verify to its end.
	Damage []LogDamage
}

// ledgerLog is what the journals say about one ledger.
type ledgerLog struct {
	key    []byte
	hasKey bool
	// keyAfterCheckpoint: the master-key record lies after its journal's
	// checkpoint, so Open's replay creates the ledger.
	keyAfterCheckpoint bool
	fenced             bool
	explicit           []byte
}

// RebuildIndex rebuilds the index of a stopped store's ledger directories
// from their entry logs, for a bookie whose index was lost or corrupted:
//
//   - every record of every entry log is indexed at its location (a later
//     log's copy of an entry, from compaction, replaces an earlier one);
//   - every ledger with records in the logs or the journals, or listed by
//     RebuildOptions.EnsembleLedgers, gets a state.
//     Its master key, fence bit and explicit LAC come from the old index
//     when that still decodes, else from the journals' records (a ledger
//     whose master-key record is still in a journal has all its later
//     records there too), else the master key stays unknown and the ledger
//     is marked fenced: its fence state is lost, and refusing a late add
//     of a fenced ledger is safe while accepting one is not;
//   - the new index is stamped with the store id from LAYOUT or CHECKPOINT
//     and synced, marked complete, the old one moved aside
//     (index.replaced-N), and the new one put in its place (finishSwap: a
//     crash in between is finished by the next run), so that Open accepts
//     the store and replays the journals from their checkpoints as after
//     any stop.
//
// It cannot recover: fence bits and explicit LACs of ledgers whose state
// was neither in a readable old index nor in the journals (those ledgers
// are fenced instead, and their explicit LAC is gone: readers fall back to
// the entries' LAC); master keys of such ledgers; the fenced-and-deleted
// marker of a deleted ledger with no records left; and ledgers deleted but
// not yet garbage-collected from the logs come back until the bookie's GC
// finds their metadata gone. Entries after damage in an entry log cannot be
// indexed: see RebuildOptions.AcceptDamage. Without EnsembleLedgers, a
// ledger fenced here with no entries here is unknown once its old index is
// lost: see RebuildOptions.AcceptLostFences.
func RebuildIndex(fs vfs.FS, cfg Config, opts RebuildOptions) (RebuildReport, error) {
	var rep RebuildReport
	if len(cfg.LedgerDirs) == 0 || len(cfg.JournalDirs) == 0 {
		return rep, errors.New("ledgerstore: no journal or ledger directories configured")
	}
	release, err := lockJournals(fs, cfg.JournalDirs)
	if err != nil {
		return rep, err
	}
	defer release()
	s := &Store{fs: fs, cfg: cfg}
	ev, err := s.inspect()
	if err != nil {
		return rep, err
	}
	// Which directories to rebuild, and what their old index still says.
	type plan struct {
		i   int
		why string
		old *oldIndex
	}
	var plans []plan
	defer func() {
		for _, p := range plans {
			p.old.close()
		}
	}()
	for i, st := range ev.ledger {
		// A swap left unfinished by an earlier run (a crash between its
		// renames) is finished first: its index.rebuild is the index.
		pending, _, err := finishSwap(fs, st.dir)
		if err != nil {
			return rep, err
		}
		if pending {
			rep.Resumed = append(rep.Resumed, st.dir)
		}
		why, old, err := judgeIndex(fs, st.dir, ev, i, opts.All)
		if err != nil {
			return rep, err
		}
		if why == "" {
			old.close()
			rep.Skipped = append(rep.Skipped, st.dir)
			continue
		}
		plans = append(plans, plan{i: i, why: why, old: old})
	}
	if len(plans) == 0 {
		return rep, nil
	}
	// The ledgers whose fence only the metadata can restore: needed when
	// an old index does not list every ledger it had.
	var ensemble []int64
	needList := false
	for _, p := range plans {
		needList = needList || !p.old.complete
	}
	switch {
	case !needList:
	case opts.EnsembleLedgers != nil:
		if ensemble, err = opts.EnsembleLedgers(); err != nil {
			return rep, fmt.Errorf("ledgerstore: listing this bookie's ledgers: %w", err)
		}
	case !opts.AcceptLostFences:
		return rep, ErrFencesUnknown
	}
	// The journals: master keys, fences and explicit LACs, in order.
	jl := map[int64]*ledgerLog{}
	// replayable holds the entries whose add records lie after their
	// journal's checkpoint: Open's replay writes them again, so a log
	// region holding only such entries can be dropped without loss.
	replayable := replayableSet{entries: map[[2]int64]bool{}, first: map[int64]int64{}}
	for j, dir := range cfg.JournalDirs {
		if _, err := fs.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		ckpt := ev.journal[j].ckpt.pos
		err := journal.Replay(fs, dir, journal.Position{}, func(pos journal.Position, rec journal.Record) error {
			l := jl[rec.LedgerID]
			if l == nil {
				l = &ledgerLog{}
				jl[rec.LedgerID] = l
			}
			switch rec.Type {
			case journal.TypeMasterKey:
				if !l.hasKey {
					l.key, l.hasKey = slices.Clone(rec.Body), true
				}
				if pos.Compare(ckpt) > 0 {
					l.keyAfterCheckpoint = true
				}
			case journal.TypeFence:
				l.fenced = true
			case journal.TypeExplicitLAC:
				l.explicit = slices.Clone(rec.Body)
			case journal.TypeAddEntry:
				if pos.Compare(ckpt) > 0 {
					replayable.add(rec.LedgerID, rec.EntryID)
				}
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("ledgerstore: reading journal %s: %w", dir, err)
		}
	}
	// Scan every log first: damage refuses the rebuild before anything
	// is written.
	type scanned struct {
		plan
		logs []entrylog.LogFile
	}
	var todo []scanned
	for _, p := range plans {
		// The shard's own logs and those it spilled into other directories.
		ids, err := entrylog.LogFiles(fs, shardLogDirs(fs, cfg.LedgerDirs, p.i)...)
		if err != nil {
			return rep, err
		}
		for _, lf := range ids {
			path := lf.Path
			var last entrylog.Record // the last verified record
			seen := false
			err := entrylog.ScanFile(fs, path, func(r entrylog.Record) error {
				last, seen = r, true
				return nil
			})
			var prev *entrylog.Record
			if seen {
				last.Body = nil
				prev = &last
			}
			var ce *entrylog.CorruptionError
			switch {
			case errors.As(err, &ce):
				d := damageOf(fs, ce)
				if !d.TornTail {
					crash, err := crashTail(fs, ce, prev, replayable)
					if err != nil {
						return rep, err
					}
					if crash {
						d.TornTail = true
						d.Reason += "; taken for the unsynced tail of a log written at a crash: every record from there on that can be " +
							"identified is in a journal after its checkpoint, and replay writes it again"
					}
				}
				rep.Damage = append(rep.Damage, d)
			case err != nil:
				return rep, err
			}
		}
		todo = append(todo, scanned{plan: p, logs: ids})
	}
	var bad []LogDamage
	for _, d := range rep.Damage {
		if !d.TornTail {
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 && !opts.AcceptDamage {
		return rep, &DamageError{Damage: bad}
	}
	for _, t := range todo {
		rd, err := rebuildDir(fs, ev, t.i, t.why, t.old, t.logs, jl, ensemble, len(ev.ledger), opts.MasterKey)
		if err != nil {
			return rep, err
		}
		rep.Rebuilt = append(rep.Rebuilt, rd)
	}
	return rep, nil
}

// replayableSet is what the journals hold after their checkpoints: the
// entries Open's replay writes again, and each ledger's lowest such entry.
type replayableSet struct {
	entries map[[2]int64]bool
	first   map[int64]int64
}

func (r replayableSet) add(ledgerID, entryID int64) {
	r.entries[[2]int64{ledgerID, entryID}] = true
	if f, ok := r.first[ledgerID]; !ok || entryID < f {
		r.first[ledgerID] = entryID
	}
}

// afterCheckpoint reports whether entry (ledgerID, entryID) was written
// after the last checkpoint as far as the journals show: its add record is
// after its journal's checkpoint, or an earlier entry of its ledger's is.
// The latter covers the entries of a crash's last flush whose journal
// records never became durable (a ledger's adds are journaled in order, so
// its unjournaled entries follow its journaled ones); such entries were
// never acknowledged.
func (r replayableSet) afterCheckpoint(ledgerID, entryID int64) bool {
	if r.entries[[2]int64{ledgerID, entryID}] {
		return true
	}
	f, ok := r.first[ledgerID]
	return ok && f < entryID
}

// unknown reports whether the journals hold no add of ledgerID after their
// checkpoints.
func (r replayableSet) unknown(ledgerID int64) bool {
	_, ok := r.first[ledgerID]
	return !ok
}

// errStopScan ends a scan early.
var errStopScan = errors.New("stop")

// crashTail decides whether a log's records stop verifying at ce.Offset
// because of a crash rather than damage. After a crash, the part of the
// log written after its last sync may hold any mix of written and unwritten
// (zero) sectors, since unsynced pages reach the disk in any order: a
// record cut short, zeros, then verifiable records again. That part is (the
// end of) the flush running at the crash, which began after the last
// checkpoint (a checkpoint flushes and syncs before recording its journal
// position); each of its entries was acknowledged only through a journal
// record after that checkpoint, or never. So the damage is taken for a
// crash tail when all of these hold:
//
//   - the stretch that does not verify holds an unwritten (zero) sector,
//     or the refused record's header names an entry written after the
//     last checkpoint (replayableSet.afterCheckpoint);
//   - every verifiable record after it names such an entry, or an entry of
//     a ledger the journals know nothing about after their checkpoints (a
//     ledger whose adds in that flush never became durable, so were never
//     acknowledged);
//   - there is evidence that the region lies after the last checkpoint:
//     the refused record, the last verified record before it (prev, nil
//     if none) or a record after it names an entry written after the
//     checkpoint.
//
// Dropping such a tail loses nothing acknowledged: Open's replay writes its
// acknowledged entries again. Damage in data written before the last
// checkpoint (bit rot, a zeroed first block, a flipped length) is preceded
// and followed by records the journals no longer hold after their
// checkpoint and is refused. The residual risk is damage right at the
// checkpoint's boundary: a stretch of checkpointed records next to records
// the journals hold after the checkpoint.
func crashTail(fs vfs.FS, ce *entrylog.CorruptionError, prev *entrylog.Record, replayable replayableSet) (bool, error) {
	if ce.Offset < entrylog.HeaderSize {
		return false, nil // the file header: written and synced before any record
	}
	end := ce.Next
	if end == 0 {
		end = math.MaxInt64 // to the end of the file
	}
	hole, err := entrylog.HasZeroSector(fs, ce.File, ce.Offset, end)
	if err != nil {
		return false, err
	}
	l, e, err := entrylog.PeekRecord(fs, ce.File, ce.Offset)
	if err != nil {
		return false, err
	}
	evidence := replayable.afterCheckpoint(l, e)
	if !hole && !evidence {
		return false, nil
	}
	if prev != nil && replayable.afterCheckpoint(prev.LedgerID, prev.EntryID) {
		evidence = true
	}
	if ce.Next == 0 {
		return evidence, nil // nothing verifiable follows
	}
	ok := true
	err = entrylog.ScanSalvage(fs, ce.File, ce.Next, func(r entrylog.Record) error {
		switch {
		case replayable.afterCheckpoint(r.LedgerID, r.EntryID):
			evidence = true
		case replayable.unknown(r.LedgerID):
		default:
			ok = false
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return false, err
	}
	return ok && evidence, nil
}

// damageOf classifies a log's damage.
func damageOf(fs vfs.FS, ce *entrylog.CorruptionError) LogDamage {
	d := LogDamage{File: ce.File, Offset: ce.Offset, Reason: ce.Reason}
	if st, err := fs.Stat(ce.File); err == nil {
		d.Remaining = st.Size() - ce.Offset
	}
	d.TornTail = ce.Torn
	return d
}

// oldIndex is what a ledger directory's old index still says.
type oldIndex struct {
	ix *index.Index // nil: missing or does not open
	// states are the states listed before the first one that does not
	// decode; complete says whether the listing reached the end (then a
	// ledger without a state was deleted).
	states   map[int64]index.State
	complete bool
}

// state returns ledger id's state if the old index still has a readable
// one.
func (o *oldIndex) state(id int64) (index.State, bool) {
	if st, ok := o.states[id]; ok {
		return st, true
	}
	if o.ix == nil || o.complete {
		return index.State{}, false
	}
	st, err := o.ix.LedgerState(id)
	return st, err == nil
}

func (o *oldIndex) close() {
	if o.ix != nil {
		o.ix.Close()
		o.ix = nil
	}
}

// judgeIndex decides whether ledger directory i's index must be rebuilt
// (why != "") and opens what is left of it. The caller closes old.
func judgeIndex(fs vfs.FS, dir string, ev *evidence, i int, all bool) (why string, old *oldIndex, err error) {
	old = &oldIndex{states: map[int64]index.State{}}
	ixDir := fs.PathJoin(dir, "index")
	ok, err := index.Exists(fs, ixDir)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "the index is missing", old, nil
	}
	ix, err := index.Open(fs, ixDir, index.Options{MustExist: true})
	if err != nil {
		return "the index does not open: " + err.Error(), old, nil
	}
	old.ix = ix
	bad := ix.Ledgers(func(id int64, st index.State) bool {
		old.states[id] = st
		return true
	})
	old.complete = bad == nil
	stamp, stamped, err := ix.Stamp()
	switch {
	case err != nil:
		why = "the index's stamp does not decode: " + err.Error()
	case !stamped && ev.id != (StoreID{}):
		why = "the index carries no stamp (it was recreated empty)"
	case stamped && (stamp.Shard != uint32(i) || stamp.Shards != uint32(len(ev.ledger))):
		old.close()
		return "", nil, fmt.Errorf("%w: %s belongs to ledger directory %d of %d, now configured as %d of %d",
			ErrLayout, ixDir, stamp.Shard, stamp.Shards, i, len(ev.ledger))
	case stamped && ev.id != (StoreID{}) && StoreID(stamp.StoreID) != ev.id:
		old.close()
		return "", nil, fmt.Errorf("%w: %s carries store id %s, the store is %s", ErrLayout, ixDir, StoreID(stamp.StoreID), ev.id)
	case bad != nil:
		why = "a ledger state does not decode: " + bad.Error()
	}
	if why == "" {
		// Every location must decode too.
		for id := range old.states {
			if err := ix.Entries(id, 0, func(int64, index.Location) bool { return true }); err != nil {
				why = fmt.Sprintf("a location of ledger %d does not decode: %v", id, err)
				break
			}
		}
	}
	if why == "" && all {
		why = "rebuild of every index requested"
	}
	if why != "" && !stamped && ev.id != (StoreID{}) {
		// Recreated empty: its (empty) listing says nothing about which
		// ledgers were deleted.
		old.complete = false
	}
	return why, old, nil
}

// rebuildDir writes ledger directory i's new index from its logs and puts
// it in place of the old one.
func rebuildDir(fs vfs.FS, ev *evidence, i int, why string, old *oldIndex, logs []entrylog.LogFile,
	jl map[int64]*ledgerLog, ensemble []int64, shards int, keyOf func(int64) ([]byte, bool, error)) (RebuiltDir, error) {
	dir := ev.ledger[i].dir
	rd := RebuiltDir{Dir: dir, Why: why}
	tmp := fs.PathJoin(dir, rebuildTmpDir)
	if err := fs.RemoveAll(tmp); err != nil {
		return rd, fmt.Errorf("ledgerstore: remove %s: %w", tmp, err)
	}
	ix, err := index.Open(fs, tmp, index.Options{})
	if err != nil {
		return rd, err
	}
	closed, placed := false, false
	defer func() {
		if !closed {
			ix.Close()
		}
		if !placed {
			_ = fs.RemoveAll(tmp) // a failed rebuild leaves the old index alone
		}
	}()
	// live decides whether a ledger's records are indexed: not when the
	// old index's complete listing shows it deleted (and the journals do
	// not create it again), nor when it was deleted while fenced.
	liveMemo := map[int64]bool{}
	live := func(id int64) bool {
		if v, ok := liveMemo[id]; ok {
			return v
		}
		st, ok := old.state(id)
		v := true
		switch {
		case ok && st.Deleted:
			v = false
		case !ok && old.complete:
			// Not in a complete listing: deleted, unless replay will
			// create it again. (Journal records before the checkpoint
			// prove nothing: deletion writes no record.)
			l := jl[id]
			v = l != nil && l.keyAfterCheckpoint
		}
		liveMemo[id] = v
		return v
	}
	ledgers := map[int64]bool{}
	const batch = 4096
	var ps []index.Placement
	flush := func() error {
		if len(ps) == 0 {
			return nil
		}
		err := ix.PutLocations(ps)
		ps = ps[:0]
		return err
	}
	for _, lf := range logs {
		id, path := lf.ID, lf.Path
		rd.LogsScanned++
		err := entrylog.ScanFile(fs, path, func(r entrylog.Record) error {
			if r.LedgerID < 0 || r.EntryID < 0 || uint64(r.LedgerID)%uint64(shards) != uint64(i) {
				return fmt.Errorf("ledgerstore: %s at offset %d holds ledger %d entry %d, which does not belong to ledger directory %d of %d",
					path, r.Offset, r.LedgerID, r.EntryID, i, shards)
			}
			if !live(r.LedgerID) {
				return nil // deleted: its records wait for GC
			}
			ledgers[r.LedgerID] = true
			ps = append(ps, index.Placement{LedgerID: r.LedgerID, EntryID: r.EntryID,
				Loc: entrylog.Location{LogID: id, Offset: r.Offset, Size: uint32(len(r.Body))}})
			if len(ps) >= batch {
				return flush()
			}
			return nil
		})
		var ce *entrylog.CorruptionError
		if err != nil && !errors.As(err, &ce) {
			return rd, err
		}
		if err := flush(); err != nil {
			return rd, err
		}
	}
	// States: every ledger of this directory the logs, the old index or the
	// journals know.
	for id := range old.states {
		ledgers[id] = true // deleted-while-fenced markers included
	}
	// A ledger with records in the journals gets a state even without
	// entries in the logs: replay skips the records of a ledger without
	// state, and its entries may be in the journal only.
	for id := range jl {
		if id >= 0 && uint64(id)%uint64(shards) == uint64(i) && live(id) {
			ledgers[id] = true
		}
	}
	// A ledger whose ensembles name this bookie gets a state even without
	// records anywhere here: it may have been fenced here (it then gets a
	// fenced state below unless the old index or the journals say more).
	for _, id := range ensemble {
		if id >= 0 && uint64(id)%uint64(shards) == uint64(i) && live(id) {
			ledgers[id] = true
		}
	}
	ids := make([]int64, 0, len(ledgers))
	for id := range ledgers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st, kept := old.state(id)
		switch l := jl[id]; {
		case kept:
			rd.StatesKept++
		case l != nil && l.hasKey:
			st = index.State{MasterKey: l.key, Fenced: l.fenced, ExplicitLAC: l.explicit}
			rd.KeysFromJournal++
		default:
			st = index.State{Fenced: true}
			rd.FencedForSafety++
			key, ok := []byte(nil), false
			if keyOf != nil {
				var err error
				if key, ok, err = keyOf(id); err != nil {
					return rd, fmt.Errorf("ledgerstore: master key of ledger %d: %w", id, err)
				}
			}
			if ok {
				st.MasterKey = key
				rd.KeysFromCallback++
			} else {
				rd.UnknownKeys++
			}
		}
		if err := ix.PutState(id, st); err != nil {
			return rd, err
		}
		if !st.Deleted {
			rd.Ledgers++
		}
	}
	n := int64(0)
	for _, id := range ids {
		if err := ix.Entries(id, 0, func(int64, index.Location) bool { n++; return true }); err != nil {
			return rd, err
		}
	}
	rd.Entries = n
	if ev.id != (StoreID{}) {
		if err := ix.SetStamp(index.Stamp{StoreID: ev.id, Shard: uint32(i), Shards: uint32(shards)}); err != nil {
			return rd, err
		}
	}
	if err := ix.Sync(); err != nil {
		return rd, err
	}
	closed = true
	if err := ix.Close(); err != nil {
		return rd, err
	}
	old.close()
	// The marker records that index.rebuild is complete and synced; from
	// here on the swap is resumable (finishSwap), and a failure leaves
	// index.rebuild for the next run to finish putting in place.
	if err := writeFileAtomic(fs, dir, rebuildDoneFile, []byte("index.rebuild is complete\n")); err != nil {
		return rd, err
	}
	placed = true
	_, aside, err := finishSwap(fs, dir)
	rd.OldIndex = aside
	return rd, err
}

// Files of the index swap in a ledger directory.
const (
	rebuildTmpDir   = "index.rebuild"
	rebuildDoneFile = "index.rebuild.complete"
)

// finishSwap puts a complete rebuilt index (index.rebuild, marked complete
// by rebuildDoneFile) in place of ledger directory dir's index: the old
// index, if any, is renamed aside to the first free index.replaced-N (kept
// for the support case), index.rebuild to index, the directory synced
// after each rename, and the marker removed last. Every step is idempotent,
// so a crash anywhere leaves a state the next run finishes: RebuildIndex
// calls it for every ledger directory before judging its index, and a
// missing index with a pending swap is never mistaken for a lost one. It
// reports whether a swap was pending and where the old index went ("" if
// none was moved now), and does nothing when no swap is pending.
func finishSwap(fs vfs.FS, dir string) (pending bool, aside string, err error) {
	marker := fs.PathJoin(dir, rebuildDoneFile)
	if _, err := fs.Stat(marker); errors.Is(err, iofs.ErrNotExist) {
		return false, "", nil
	} else if err != nil {
		return false, "", fmt.Errorf("ledgerstore: %s: %w", marker, err)
	}
	aside, err = finishPending(fs, dir, marker)
	return true, aside, err
}

func finishPending(fs vfs.FS, dir, marker string) (aside string, err error) {
	tmp, ixDir := fs.PathJoin(dir, rebuildTmpDir), fs.PathJoin(dir, "index")
	_, err = fs.Stat(tmp)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		// Renamed into place already: only the marker is left.
	case err != nil:
		return "", fmt.Errorf("ledgerstore: %s: %w", tmp, err)
	default:
		if _, err := fs.Stat(ixDir); err == nil {
			for k := 1; ; k++ {
				a := fs.PathJoin(dir, fmt.Sprintf("index.replaced-%d", k))
				if _, err := fs.Stat(a); errors.Is(err, iofs.ErrNotExist) {
					if err := fs.Rename(ixDir, a); err != nil {
						return "", fmt.Errorf("ledgerstore: move the old index aside: %w", err)
					}
					aside = a
					break
				}
			}
			if err := syncDir(fs, dir); err != nil {
				return aside, err
			}
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return "", fmt.Errorf("ledgerstore: %s: %w", ixDir, err)
		}
		if err := fs.Rename(tmp, ixDir); err != nil {
			return aside, fmt.Errorf("ledgerstore: put the rebuilt index in place: %w", err)
		}
		if err := syncDir(fs, dir); err != nil {
			return aside, err
		}
	}
	if err := fs.Remove(marker); err != nil {
		return aside, fmt.Errorf("ledgerstore: remove %s: %w", marker, err)
	}
	return aside, syncDir(fs, dir)
}

// EntryLogDirs returns the directories in ledger directory dir that hold
// entry logs (a missing one holds none): its shard's own "entrylogs" and
// the spill directories "entrylogs-shard-<i>" of other shards, by name.
// Tools that list a bookie's files (list_disk_file) use it, so that
// spilled logs are listed too.
func EntryLogDirs(fs vfs.FS, dir string) ([]string, error) {
	names, err := fs.List(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledgerstore: list %s: %w", dir, err)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if n == ownLogsDir || (strings.HasPrefix(n, spillLogsPrefix) && isDecimal(n[len(spillLogsPrefix):])) {
			out = append(out, fs.PathJoin(dir, n))
		}
	}
	return out, nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
