package ledgerstore

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strings"

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
	// Layout: the loss comes from the configured directory list (a ledger
	// directory removed from it); errors.Is(err, ErrLayout) holds too.
	Layout bool
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

// Is makes errors.Is(err, ErrDataLost) hold (and ErrLayout for a
// directory removed from the configuration).
func (e *LostError) Is(target error) bool {
	return target == ErrDataLost || (e.Layout && target == ErrLayout)
}

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

// capacityDirState is what Open found in a capacity directory (a ledger
// directory at a position at or beyond the shard count).
type capacityDirState struct {
	pos       int
	dir       string
	layout    layout
	hasLayout bool
	// added: this Open adds the directory to the store (expansion).
	added bool
}

// evidence is everything Open learned about the store's directories, and
// the decisions drawn from it (see the package comment, "Lost data").
type evidence struct {
	// ledger holds the shard directories (the first shards of
	// Config.LedgerDirs), capacity the others.
	ledger   []ledgerDirState
	capacity []capacityDirState
	journal  []journalDirState
	// shards is the store's shard count; dirs the number of ledger
	// directories its LAYOUTs record (the largest), dirsFrom the LAYOUT
	// that records it ("" if none does).
	shards, dirs int
	dirsFrom     string
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

// layoutAt returns the LAYOUT Open found at ledger directory position p.
func (ev *evidence) layoutAt(p int) (layout, bool) {
	if p < len(ev.ledger) {
		return ev.ledger[p].layout, ev.ledger[p].hasLayout
	}
	c := ev.capacity[p-len(ev.ledger)]
	return c.layout, c.hasLayout
}

// Names a new ledger directory may hold besides a LAYOUT of this store at
// its position (from an interrupted expansion): the bookie's cookie
// (written to every directory before the store opens), its temporary
// file, and a file system's lost+found.
var newDirAllowed = map[string]bool{"VERSION": true, layoutFile: true, layoutFile + tmpSuffix: true, "lost+found": true}

// inspect reads the LAYOUT and CHECKPOINT files and looks for entry logs
// and journal files, changing nothing (a missing directory is an empty
// one), and checks the layout each file records: the shard count, the
// ledger directories (none removed, none moved, new ones only at the end,
// empty, and with Config.AllowExpansion), and the journal count.
func (s *Store) inspect() (*evidence, error) {
	ev := &evidence{}
	nc, nj := len(s.cfg.LedgerDirs), uint32(len(s.cfg.JournalDirs))
	layouts := make([]*layout, nc)
	shardsFrom := ""
	for p, dir := range s.cfg.LedgerDirs {
		path := s.fs.PathJoin(dir, layoutFile)
		b, ok, err := readSmallFile(s.fs, path)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		l, err := decodeLayout(path, b)
		if err != nil {
			return nil, err
		}
		if l.index != uint32(p) {
			return nil, fmt.Errorf("%w: %s is ledger directory %d of %d, now configured as %d of %d",
				ErrLayout, dir, l.index, l.dirs, p, nc)
		}
		switch {
		case shardsFrom == "":
			ev.shards, shardsFrom = int(l.count), path
		case int(l.count) != ev.shards:
			return nil, fmt.Errorf("%w: %s records %d shards, but %s records %d: the directories belong to different stores",
				ErrLayout, shardsFrom, ev.shards, path, l.count)
		}
		if err := ev.learn(l.storeID, path); err != nil {
			return nil, err
		}
		if l.storeID != (StoreID{}) && ev.committedBy == "" {
			ev.stampedBy, ev.committedBy = path, path
		}
		layouts[p] = &l
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
			if shardsFrom == "" {
				// No LAYOUT left: the shard count is the CHECKPOINT's.
				ev.shards, shardsFrom = int(c.ledgerDirCount), path
			}
			if c.journalIndex != uint32(i) || c.journalCount != nj || int(c.ledgerDirCount) != ev.shards {
				return nil, fmt.Errorf("%w: %s belongs to journal %d of %d with %d ledger directories, now configured as journal %d of %d with %d",
					ErrLayout, dir, c.journalIndex, c.journalCount, c.ledgerDirCount, i, nj, ev.shards)
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
	if shardsFrom == "" {
		ev.shards = nc // a new store: every directory is a shard
	}
	// The directory count is what the shard directories' LAYOUTs record:
	// an expansion rewrites them (after every added directory has its
	// LAYOUT) before any capacity directory's, so their largest count is
	// the committed one, while an added directory's LAYOUT from an
	// interrupted expansion may record a count nobody relies on. Only when
	// no shard directory has a LAYOUT do the capacity directories' count
	// (the largest: refusing is the safe direction).
	for pass := 0; pass < 2 && ev.dirsFrom == ""; pass++ {
		for p, l := range layouts {
			if l != nil && (p < ev.shards) == (pass == 0) && int(l.dirs) > ev.dirs {
				ev.dirs, ev.dirsFrom = int(l.dirs), s.fs.PathJoin(s.cfg.LedgerDirs[p], layoutFile)
			}
		}
	}
	if ev.dirs == 0 {
		ev.dirs = ev.shards
	}
	if nc < ev.dirs {
		because := ev.dirsFrom
		if because == "" {
			because = shardsFrom
		}
		return nil, &LostError{Path: strings.Join(s.cfg.LedgerDirs, ","), Layout: true,
			What: fmt.Sprintf("%d ledger directories are configured, but the store has %d (%s missing from the list): "+
				"removing a ledger directory loses the entry logs and the index on it", nc, ev.dirs, missingPositions(nc, ev.dirs)),
			Evidence: fmt.Sprintf("%s records %d ledger directories", because, ev.dirs)}
	}
	for p, dir := range s.cfg.LedgerDirs {
		if p >= ev.shards {
			break
		}
		st := ledgerDirState{dir: dir}
		if l := layouts[p]; l != nil {
			st.layout, st.hasLayout = *l, true
		}
		// The shard's logs spilled into other directories are evidence too.
		for _, d := range shardLogDirs(s.fs, s.cfg.LedgerDirs, p) {
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
	var added []string
	for p := ev.shards; p < nc; p++ {
		dir := s.cfg.LedgerDirs[p]
		st := capacityDirState{pos: p, dir: dir, added: p >= ev.dirs}
		if l := layouts[p]; l != nil {
			st.layout, st.hasLayout = *l, true
		}
		switch {
		case !st.added && !st.hasLayout:
			return nil, &LostError{Path: s.fs.PathJoin(dir, layoutFile),
				What: fmt.Sprintf("the LAYOUT of capacity directory %d is missing: the directory was wiped or replaced, "+
					"losing the entry logs spilled to it", p),
				Evidence: fmt.Sprintf("%s records %d ledger directories", ev.dirsFrom, ev.dirs)}
		case st.added:
			added = append(added, dir)
		}
		ev.capacity = append(ev.capacity, st)
	}
	if len(added) > 0 && !s.cfg.AllowExpansion {
		recorded := "a new store's"
		if ev.dirsFrom != "" {
			recorded = ev.dirsFrom + "'s"
		} else if shardsFrom != "" {
			recorded = shardsFrom + "'s"
		}
		return nil, fmt.Errorf("%w: ledger directories %s are configured after the store's %d (%s count): "+
			"to add them to the store as capacity directories, set allowStorageExpansion=true",
			ErrLayout, strings.Join(added, ", "), ev.dirs, recorded)
	}
	for _, c := range ev.capacity {
		if !c.added {
			continue
		}
		if err := checkNewDir(s.fs, c.dir); err != nil {
			return nil, err
		}
		// A LAYOUT left by an interrupted expansion was written after every
		// CHECKPOINT carried the store id: without a CHECKPOINT carrying
		// its id it belongs to another store (whose id must not be adopted
		// by a store that has none yet).
		if c.hasLayout && !ev.checkpointHasID(c.layout.storeID) {
			return nil, fmt.Errorf("%w: %s holds a LAYOUT of store %s, which no CHECKPOINT of this store records: "+
				"a ledger directory added to a store must be empty", ErrLayout, c.dir, c.layout.storeID)
		}
	}
	return ev, nil
}

// missingPositions names positions [from, to) in words.
func missingPositions(from, to int) string {
	if to-from == 1 {
		return fmt.Sprintf("position %d is", from)
	}
	return fmt.Sprintf("positions %d to %d are", from, to-1)
}

// checkpointHasID reports whether some journal directory's CHECKPOINT
// carries store id id.
func (ev *evidence) checkpointHasID(id StoreID) bool {
	for _, j := range ev.journal {
		if j.hasCkpt && id != (StoreID{}) && j.ckpt.storeID == id {
			return true
		}
	}
	return false
}

// checkNewDir refuses a directory that expansion would add unless it is
// empty but for newDirAllowed (a missing directory is empty).
func checkNewDir(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledgerstore: list %s: %w", dir, err)
	}
	var other []string
	for _, n := range names {
		if !newDirAllowed[n] && !strings.HasPrefix(n, ".VERSION") {
			other = append(other, n)
		}
	}
	if len(other) > 0 {
		slices.Sort(other)
		return fmt.Errorf("%w: %s is not empty (it holds %s): a ledger directory added to a store must be empty",
			ErrLayout, dir, strings.Join(other, ", "))
	}
	return nil
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
	// LAYOUTs last. The directories this Open adds get theirs first, so
	// that no LAYOUT records the new directory count before every added
	// directory has its LAYOUT (package comment, "Expansion").
	nd := uint32(len(ev.ledger) + len(ev.capacity))
	want := func(p int) layout {
		return layout{index: uint32(p), count: nl, dirs: nd, storeID: ev.id}
	}
	write := func(p int, point string) error {
		if l, ok := ev.layoutAt(p); ok && l == want(p) {
			return nil
		}
		if err := writeFileAtomic(s.fs, s.cfg.LedgerDirs[p], layoutFile, encodeLayout(want(p))); err != nil {
			return err
		}
		s.at(point)
		return nil
	}
	for _, c := range ev.capacity {
		if c.added {
			if err := write(c.pos, "expand-added-layout"); err != nil {
				return err
			}
		}
	}
	for p := range int(nd) {
		if p >= len(ev.ledger) && ev.capacity[p-len(ev.ledger)].added {
			continue
		}
		if err := write(p, "layout"); err != nil {
			return err
		}
	}
	return nil
}
