package ledgerstore

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/index"
	"github.com/foliodb/folio/internal/storage/journal"
)

// ErrDataLost is matched by every *LostError: Open found positive evidence
// that part of the store existed and is gone.
var ErrDataLost = errors.New("ledgerstore: store data lost")

// LostError is Open's refusal of a store that lost a part it provably had
// (an index, a journal CHECKPOINT): serving from it would answer "no such
// entry" for entries the bookie acknowledged and accept adds to ledgers it
// fenced (DESIGN.md §6, invariant 6). The store is never rebuilt silently.
type LostError struct {
	// Path is the missing or replaced file or directory.
	Path string
	// What says what is missing, in words.
	What string
	// Evidence says which file proves that it existed.
	Evidence string
}

// recoverHint is the operator's way out, as for a cookie mismatch: the
// bookie's copies are gone, the other replicas are not.
const recoverHint = "to recover, restore the missing files from a backup of this bookie if one exists; " +
	"otherwise treat the bookie's data as lost: let AutoRecovery (or `folio shell recover <bookie-id>`) " +
	"re-replicate its ledgers, then reset the bookie with `folio shell bookieformat --conf <bookie config> --force` " +
	"(deletes its data and cookies) and start it as a new bookie; do not delete store files to make it start"

func (e *LostError) Error() string {
	return fmt.Sprintf("ledgerstore: %s: %s, but %s: refusing to open the store, since it would answer "+
		"\"no such entry\" for entries this bookie acknowledged and forget which ledgers it fenced; %s",
		e.Path, e.What, e.Evidence, recoverHint)
}

// Is makes errors.Is(err, ErrDataLost) hold.
func (e *LostError) Is(target error) bool { return target == ErrDataLost }

// ledgerDirState is what Open found in a ledger directory before opening
// its index and entry logs.
type ledgerDirState struct {
	dir       string
	layout    layout
	hasLayout bool
	hasLogs   bool
	// logsIn is a directory holding the shard's entry logs (own or spill).
	logsIn string
	// hasStamp: the index carries the store's stamp (set by openIndex).
	hasStamp bool
}

// journalDirState is what Open found in a journal directory before opening
// its journal.
type journalDirState struct {
	dir      string
	ckpt     checkpoint
	hasCkpt  bool
	hasFiles bool
}

// evidence is everything Open learned about the store's directories, and
// the decisions drawn from it (see the package comment, "Lost data").
type evidence struct {
	ledger  []ledgerDirState
	journal []journalDirState
	// id is the store id, zero while no file records one; idFrom names
	// the file it was read from.
	id     StoreID
	idFrom string
	// stampedBy names a LAYOUT or CHECKPOINT that carries id: every index
	// was stamped before it was written. "" if none.
	stampedBy string
	// committedBy names a LAYOUT that carries id: every CHECKPOINT carried
	// it before it was written. "" if none.
	committedBy string
	// checkpointedBy names a CHECKPOINT with a non-zero position: every
	// index existed before it was written. "" if none.
	checkpointedBy string
}

// inspect reads the LAYOUT and CHECKPOINT files and looks for entry logs
// and journal files, changing nothing (a missing directory is an empty
// one), and checks the layout each file records.
func (s *Store) inspect() (*evidence, error) {
	ev := &evidence{}
	nl, nj := uint32(len(s.cfg.LedgerDirs)), uint32(len(s.cfg.JournalDirs))
	for i, dir := range s.cfg.LedgerDirs {
		st := ledgerDirState{dir: dir}
		path := s.fs.PathJoin(dir, layoutFile)
		b, ok, err := readSmallFile(s.fs, path)
		if err != nil {
			return nil, err
		}
		if ok {
			if st.layout, err = decodeLayout(path, b); err != nil {
				return nil, err
			}
			st.hasLayout = true
			if st.layout.index != uint32(i) || st.layout.count != nl {
				return nil, fmt.Errorf("%w: %s is ledger directory %d of %d, now configured as %d of %d",
					ErrLayout, dir, st.layout.index, st.layout.count, i, nl)
			}
			if err := ev.learn(st.layout.storeID, path); err != nil {
				return nil, err
			}
			if st.layout.storeID != (StoreID{}) && ev.committedBy == "" {
				ev.stampedBy, ev.committedBy = path, path
			}
		}
		// The shard's logs spilled into other directories are evidence too.
		for _, d := range shardLogDirs(s.fs, s.cfg.LedgerDirs, i) {
			has, err := entrylog.HasLogs(s.fs, d)
			if err != nil {
				return nil, err
			}
			if has && st.logsIn == "" {
				st.hasLogs, st.logsIn = true, d
			}
		}
		ev.ledger = append(ev.ledger, st)
	}
	for i, dir := range s.cfg.JournalDirs {
		st := journalDirState{dir: dir}
		path := s.fs.PathJoin(dir, checkpointFile)
		b, ok, err := readSmallFile(s.fs, path)
		if err != nil {
			return nil, err
		}
		if ok {
			if st.ckpt, err = decodeCheckpoint(path, b); err != nil {
				return nil, err
			}
			st.hasCkpt = true
			c := st.ckpt
			if c.journalIndex != uint32(i) || c.journalCount != nj || c.ledgerDirCount != nl {
				return nil, fmt.Errorf("%w: %s belongs to journal %d of %d with %d ledger directories, now configured as journal %d of %d with %d",
					ErrLayout, dir, c.journalIndex, c.journalCount, c.ledgerDirCount, i, nj, nl)
			}
			if err := ev.learn(c.storeID, path); err != nil {
				return nil, err
			}
			if c.storeID != (StoreID{}) && ev.stampedBy == "" {
				ev.stampedBy = path
			}
			if c.pos != (journal.Position{}) && ev.checkpointedBy == "" {
				ev.checkpointedBy = path
			}
		}
		files, err := journal.Files(s.fs, dir)
		if err != nil {
			return nil, err
		}
		st.hasFiles = len(files) > 0
		ev.journal = append(ev.journal, st)
	}
	return ev, nil
}

// mkdirs creates the configured directories that do not exist yet (once
// the evidence checks passed), syncing each parent.
func (s *Store) mkdirs() error {
	for _, dir := range append(slices.Clone(s.cfg.LedgerDirs), s.cfg.JournalDirs...) {
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("ledgerstore: create %s: %w", dir, err)
		}
		if err := syncDir(s.fs, s.fs.PathDir(dir)); err != nil {
			return err
		}
	}
	return nil
}

// learn records a store id found in path; ids of different stores are a
// layout error (a directory swapped in from another bookie).
func (ev *evidence) learn(id StoreID, path string) error {
	switch {
	case id == (StoreID{}):
	case ev.id == (StoreID{}):
		ev.id, ev.idFrom = id, path
	case ev.id != id:
		return fmt.Errorf("%w: %s records store id %s, but %s records %s: the directories belong to different stores "+
			"(a disk swapped in from another bookie, or restored from another copy)", ErrLayout, ev.idFrom, ev.id, path, id)
	}
	return nil
}

// checkJournals refuses a journal directory that lost its CHECKPOINT.
func (ev *evidence) checkJournals(fs vfs.FS) error {
	for _, st := range ev.journal {
		path := fs.PathJoin(st.dir, checkpointFile)
		switch {
		case !st.hasCkpt && st.hasFiles:
			return &LostError{Path: path, What: "the journal's CHECKPOINT is missing",
				Evidence: st.dir + " holds journal files, which are only written after CHECKPOINT"}
		case ev.committedBy != "" && !st.hasCkpt:
			return &LostError{Path: path, What: "the journal's CHECKPOINT is missing (the journal directory was wiped or replaced, " +
				"losing its records since the last checkpoint)",
				Evidence: fmt.Sprintf("%s records store id %s, written only after every journal directory's CHECKPOINT", ev.committedBy, ev.id)}
		case ev.committedBy != "" && st.ckpt.storeID == (StoreID{}):
			return &LostError{Path: path, What: "the journal's CHECKPOINT carries no store id (restored from an older copy?)",
				Evidence: fmt.Sprintf("%s records store id %s, written only after every journal directory's CHECKPOINT carried it", ev.committedBy, ev.id)}
		}
	}
	return nil
}

// indexMustExist returns the evidence that ledger directory st's index
// existed, or "".
func (ev *evidence) indexMustExist(st ledgerDirState) string {
	switch {
	case st.layout.storeID != (StoreID{}):
		return fmt.Sprintf("%s records store id %s, written only after every index was stamped with it", st.dir+"/"+layoutFile, ev.id)
	case ev.stampedBy != "":
		return fmt.Sprintf("%s records store id %s, written only after every index was stamped with it", ev.stampedBy, ev.id)
	case st.hasLogs:
		return st.logsIn + " holds entry logs of this directory's ledgers, which are only written after the index is created"
	case ev.checkpointedBy != "":
		return ev.checkpointedBy + " records a checkpoint, taken only after every index was created"
	}
	return ""
}

// checkIndexesExist refuses the store if an index is missing while there
// is evidence that it existed, before any index is opened (opening one
// rewrites Pebble's manifest).
func (ev *evidence) checkIndexesExist(fs vfs.FS) error {
	for _, st := range ev.ledger {
		because := ev.indexMustExist(st)
		if because == "" {
			continue
		}
		dir := fs.PathJoin(st.dir, "index")
		ok, err := index.Exists(fs, dir)
		if err != nil {
			return err
		}
		if !ok {
			return lostIndex(dir, because)
		}
	}
	return nil
}

func lostIndex(dir, because string) *LostError {
	return &LostError{Path: dir, What: "the index (entry locations, master keys, fence bits and explicit LACs " +
		"of this directory's ledgers) is missing", Evidence: because}
}

// openIndex opens ledger directory i's index, refusing it if there is
// evidence that it existed and it is missing or carries no stamp, or if
// its stamp names another store or directory.
func (s *Store) openIndex(ev *evidence, i int) (*index.Index, error) {
	st := &ev.ledger[i]
	dir := s.fs.PathJoin(st.dir, "index")
	because := ev.indexMustExist(*st)
	ix, err := index.Open(s.fs, dir, index.Options{
		CacheBytes:                  s.cfg.IndexCacheBytes,
		DisableAutomaticCompactions: s.cfg.DisableIndexCompactions,
		MustExist:                   because != "",
	})
	if errors.Is(err, index.ErrNotExist) {
		return nil, lostIndex(dir, because)
	}
	if err != nil {
		return nil, err
	}
	stamp, ok, err := ix.Stamp()
	if err != nil {
		ix.Close()
		return nil, err
	}
	switch {
	case !ok && ev.stampedBy != "":
		ix.Close()
		return nil, &LostError{Path: dir, What: "the index carries no store id: it was deleted and recreated empty, or replaced", Evidence: because}
	case !ok:
		return ix, nil
	case stamp.Shard != uint32(i) || stamp.Shards != uint32(len(ev.ledger)):
		ix.Close()
		return nil, fmt.Errorf("%w: %s belongs to ledger directory %d of %d, now configured as %d of %d",
			ErrLayout, dir, stamp.Shard, stamp.Shards, i, len(ev.ledger))
	}
	if err := ev.learn(StoreID(stamp.StoreID), dir); err != nil {
		ix.Close()
		return nil, err
	}
	st.hasStamp = true
	return ix, nil
}

// completeStamp records the store id wherever it is missing, in the order
// that makes each file evidence for the ones before it: every index
// (synced), then every CHECKPOINT, then every LAYOUT. A crash in between
// leaves a prefix that the next Open completes. A store without any id
// (new, or written before store ids existed) gets a new one from entropy.
func (s *Store) completeStamp(ev *evidence, entropy io.Reader) error {
	if ev.id == (StoreID{}) {
		if _, err := io.ReadFull(entropy, ev.id[:]); err != nil {
			return fmt.Errorf("ledgerstore: draw a store id: %w", err)
		}
		if ev.id == (StoreID{}) {
			return errors.New("ledgerstore: the entropy source gave an all-zero store id")
		}
	}
	for i, st := range ev.ledger {
		if st.hasStamp {
			continue
		}
		stamp := index.Stamp{StoreID: ev.id, Shard: uint32(i), Shards: uint32(len(ev.ledger))}
		if err := s.shards[i].ix.SetStamp(stamp); err != nil {
			return fmt.Errorf("ledgerstore: stamp the index of %s: %w", st.dir, err)
		}
	}
	nj, nl := uint32(len(ev.journal)), uint32(len(ev.ledger))
	for i, st := range ev.journal {
		if st.hasCkpt && st.ckpt.storeID == ev.id {
			continue
		}
		c := checkpoint{journalIndex: uint32(i), journalCount: nj, ledgerDirCount: nl, pos: st.ckpt.pos, storeID: ev.id}
		if err := writeFileAtomic(s.fs, st.dir, checkpointFile, encodeCheckpoint(c)); err != nil {
			return err
		}
	}
	for i, st := range ev.ledger {
		if st.hasLayout && st.layout.storeID == ev.id {
			continue
		}
		if err := writeFileAtomic(s.fs, st.dir, layoutFile, encodeLayout(layout{index: uint32(i), count: nl, storeID: ev.id})); err != nil {
			return err
		}
	}
	return nil
}
