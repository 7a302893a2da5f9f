package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// usageStore is a storage.Store whose disk usage and failure a test sets;
// only the methods the StateManager calls are implemented.
type usageStore struct {
	storage.Store
	mu     sync.Mutex
	used   uint64
	failed chan struct{}
}

func (s *usageStore) DiskUsage() (storage.DiskUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return storage.DiskUsage{Total: 100, Used: s.used, Free: 100 - s.used}, nil
}
func (s *usageStore) Failed() <-chan struct{} { return s.failed }
func (s *usageStore) Err() error              { return errors.New("injected fsync failure") }
func (s *usageStore) set(used uint64)         { s.mu.Lock(); s.used = used; s.mu.Unlock() }

func TestStateManagerThresholdsForcedAndFailure(t *testing.T) {
	st := &usageStore{failed: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold = 0.9, 0.8
	var applied []bool
	m := NewStateManager(st, &cfg, false, nil, slog.Default(), func(ro bool) { applied = append(applied, ro) }, nil)
	steps := []struct {
		used uint64
		want bool
	}{{50, false}, {91, true}, {85, true}, {79, false}}
	for _, s := range steps {
		st.set(s.used)
		if got := m.Check(); got != s.want {
			t.Fatalf("used %d%%: read-only %v, want %v", s.used, got, s.want)
		}
	}
	if ro, err := m.SetForced(true); !ro || err != nil {
		t.Fatalf("forced: %v %v", ro, err)
	}
	if ro, _ := m.SetForced(false); ro {
		t.Fatal("still read-only after clearing the admin switch")
	}
	close(st.failed)
	if !m.Check() {
		t.Fatal("writable after a storage failure")
	}
	if ro, err := m.SetForced(false); !ro || !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("clearing after failure: %v %v", ro, err)
	}
	want := []bool{false, true, false, true, false, true}
	if len(applied) != len(want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
	for i := range want {
		if applied[i] != want[i] {
			t.Fatalf("applied %v, want %v", applied, want)
		}
	}
}

// TestStateManagerForceReadOnlyBookieAndDiskHook: forceReadOnlyBookie holds
// the bookie read-only against the admin's request and a disk below the
// low-water mark; every disk check reports its verdict to the store's hook.
func TestStateManagerForceReadOnlyBookieAndDiskHook(t *testing.T) {
	st := &usageStore{failed: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold = 0.9, 0.8
	cfg.ForceReadOnlyBookie = true
	m := NewStateManager(st, &cfg, false, nil, slog.Default(), nil, nil)
	var seen []bool
	m.OnDiskFull(func(full bool) { seen = append(seen, full) })
	for _, used := range []uint64{10, 95, 50} {
		st.set(used)
		if !m.Check() {
			t.Fatalf("used %d%%: writable with forceReadOnlyBookie", used)
		}
	}
	if ro, err := m.SetForced(false); !ro || !errors.Is(err, ErrForceReadOnly) {
		t.Fatalf("SetForced(false): %v %v", ro, err)
	}
	if ro, err := m.SetForced(true); !ro || err != nil {
		t.Fatalf("SetForced(true): %v %v", ro, err)
	}
	if forced, _, _ := m.Causes(); !forced {
		t.Fatal("forced cause not reported")
	}
	if want := []bool{false, true, false}; len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("disk hook saw %v, want %v", seen, want)
	}
}

// dirStore is a storage.Store with per-directory disk usage a test sets
// (ledger directories by position, then journal directories); it records
// what the StateManager tells it.
type dirStore struct {
	storage.Store
	mu      sync.Mutex
	ledgers []uint64 // used percent per ledger directory
	journal []uint64
	fail    error
	full    map[int]bool // SetLedgerDirFull's last word per position
	calls   int
}

func newDirStore(ledgers, journals int) *dirStore {
	return &dirStore{ledgers: make([]uint64, ledgers), journal: make([]uint64, journals), full: map[int]bool{}}
}

func (s *dirStore) DirUsages() ([]ledgerstore.DirUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []ledgerstore.DirUsage
	for i, u := range s.ledgers {
		out = append(out, ledgerstore.DirUsage{Dir: fmt.Sprintf("l%d/current", i), Position: i, Total: 100, Used: u, Free: 100 - u})
	}
	for i, u := range s.journal {
		out = append(out, ledgerstore.DirUsage{Dir: fmt.Sprintf("j%d/current", i), Journal: true, Position: i, Total: 100, Used: u, Free: 100 - u})
	}
	return out, nil
}

func (s *dirStore) SetLedgerDirFull(pos int, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.full[pos] = full
	s.calls++
}

func (s *dirStore) DiskUsage() (storage.DiskUsage, error) {
	panic("the StateManager must judge per directory when the store reports them")
}
func (s *dirStore) Failed() <-chan struct{} { return nil }

func (s *dirStore) set(journal bool, pos int, used uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if journal {
		s.journal[pos] = used
	} else {
		s.ledgers[pos] = used
	}
}

// TestStateManagerPerDirectory: each directory has its own verdict with
// the hysteresis; every check hands every ledger directory's verdict to
// the store (SetLedgerDirFull: it also clears a mark the store set itself
// on ENOSPC once the directory has room) and the bookie stays writable until
// every ledger directory is full; a full journal directory makes it
// read-only on its own; the store's compaction hook follows the read-only
// verdict; a failed usage read keeps the verdicts.
func TestStateManagerPerDirectory(t *testing.T) {
	st := newDirStore(2, 1)
	cfg := DefaultConfig()
	cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold = 0.9, 0.8
	cfg.LedgerDirs = []string{"/data/l0", "/data/l1"}
	cfg.JournalDirs = []string{"/data/j0"}
	m := NewStateManager(st, &cfg, false, nil, slog.New(slog.DiscardHandler), nil, nil)
	var noSpace []bool
	m.OnDiskFull(func(full bool) { noSpace = append(noSpace, full) })
	steps := []struct {
		journal    bool
		pos        int
		used       uint64
		readOnly   bool
		ledgerFull [2]bool
		writable   int
	}{
		{false, 0, 91, false, [2]bool{true, false}, 1},  // one of two full: writable, spills
		{false, 1, 95, true, [2]bool{true, true}, 0},    // both full: read-only
		{false, 0, 85, true, [2]bool{true, true}, 0},    // between the marks: still full
		{false, 0, 79, false, [2]bool{false, true}, 1},  // below the low mark: writable again
		{true, 0, 92, true, [2]bool{false, true}, 1},    // a full journal: read-only
		{true, 0, 50, false, [2]bool{false, true}, 1},   // journal has room again
		{false, 1, 10, false, [2]bool{false, false}, 2}, // all clear
		{false, 1, 100, false, [2]bool{false, true}, 1}, // one full again
		{false, 0, 100, true, [2]bool{true, true}, 0},   // all full
		{false, 1, 0, false, [2]bool{true, false}, 1},   // the other frees up
		{false, 0, 0, false, [2]bool{false, false}, 2},  // all clear
		{false, 0, 90, false, [2]bool{true, false}, 1},  // exactly the threshold is full
		{false, 0, 80, false, [2]bool{true, false}, 1},  // exactly the low mark is not below it
		{false, 0, 0, false, [2]bool{false, false}, 2},  // clear
		{false, 1, 95, false, [2]bool{false, true}, 1},  // the second alone
		{false, 1, 95, false, [2]bool{false, true}, 1},  // no change: verdicts re-applied
		{false, 1, 0, false, [2]bool{false, false}, 2},  // clear
	}
	wantCalls := 0
	for i, s := range steps {
		st.set(s.journal, s.pos, s.used)
		// The store marked directory 0 full on its own (ENOSPC); the check
		// re-applies the verdict either way.
		st.mu.Lock()
		st.full[0] = true
		st.mu.Unlock()
		if got := m.Check(); got != s.readOnly {
			t.Fatalf("step %d: read-only %v, want %v", i, got, s.readOnly)
		}
		wantCalls += 2
		for p := range 2 {
			st.mu.Lock()
			got := st.full[p]
			st.mu.Unlock()
			if got != s.ledgerFull[p] {
				t.Fatalf("step %d: store told ledger directory %d full=%v, want %v", i, p, got, s.ledgerFull[p])
			}
		}
		if st.calls != wantCalls {
			t.Fatalf("step %d: %d SetLedgerDirFull calls, want %d (every ledger directory each check)", i, st.calls, wantCalls)
		}
		if w := m.WritableLedgerDirs(); w != s.writable {
			t.Fatalf("step %d: %d writable ledger directories, want %d", i, w, s.writable)
		}
		if noSpace[len(noSpace)-1] != s.readOnly {
			t.Fatalf("step %d: compaction told no-space %v, want %v", i, noSpace[len(noSpace)-1], s.readOnly)
		}
		if _, diskFull, _ := m.Causes(); diskFull != s.readOnly {
			t.Fatalf("step %d: disk-full cause %v", i, diskFull)
		}
	}
	dirs := m.Dirs()
	if len(dirs) != 3 || dirs[0].Dir != "/data/l0" || dirs[1].Dir != "/data/l1" || !dirs[2].Journal || dirs[2].Dir != "/data/j0" {
		t.Fatalf("Dirs: %+v", dirs)
	}

	// A failed read keeps every verdict.
	st.set(false, 0, 99)
	st.set(false, 1, 99)
	if !m.Check() {
		t.Fatal("both ledger directories full: writable")
	}
	st.mu.Lock()
	st.fail = errors.New("statfs: input/output error")
	st.ledgers = []uint64{0, 0}
	st.mu.Unlock()
	if !m.Check() {
		t.Fatal("a failed usage read cleared the read-only verdict")
	}
	if d := m.Dirs(); !d[0].Full || !d[1].Full {
		t.Fatalf("a failed usage read changed the verdicts: %+v", d)
	}
}

// TestStateManagerAnyDiskFull: with readOnlyModeOnAnyDiskFullEnabled=true
// one full ledger directory makes the bookie read-only (it is still handed
// to the store); with readOnlyModeEnabled=false the bookie fails instead,
// naming the directory.
func TestStateManagerAnyDiskFull(t *testing.T) {
	st := newDirStore(3, 1)
	cfg := DefaultConfig()
	cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold = 0.9, 0.8
	cfg.LedgerDirs = []string{"/d/l0", "/d/l1", "/d/l2"}
	cfg.JournalDirs = []string{"/d/j0"}
	cfg.ReadOnlyModeOnAnyDiskFull = true
	m := NewStateManager(st, &cfg, false, nil, slog.New(slog.DiscardHandler), nil, nil)
	if m.Check() {
		t.Fatal("read-only with every directory empty")
	}
	st.set(false, 2, 95)
	if !m.Check() {
		t.Fatal("writable with a full ledger directory and readOnlyModeOnAnyDiskFullEnabled=true")
	}
	if !st.full[2] || st.full[0] || st.full[1] {
		t.Fatalf("store told %v", st.full)
	}
	st.set(false, 2, 50)
	if m.Check() {
		t.Fatal("read-only after the directory freed up")
	}

	cfg.ReadOnlyModeOnAnyDiskFull = false
	cfg.ReadOnlyModeEnabled = false
	var fatal error
	m = NewStateManager(newDirStore(3, 1), &cfg, false, nil, slog.New(slog.DiscardHandler), nil, func(err error) { fatal = err })
	m.store.(*dirStore).set(false, 0, 95)
	m.store.(*dirStore).set(false, 1, 95)
	m.Check()
	if fatal != nil {
		t.Fatalf("two of three full: %v", fatal)
	}
	m.store.(*dirStore).set(false, 2, 95)
	m.Check()
	if fatal == nil || !strings.Contains(fatal.Error(), "/d/l2") || !strings.Contains(fatal.Error(), "readOnlyModeEnabled=false") {
		t.Fatalf("all full with readOnlyModeEnabled=false: %v", fatal)
	}
}

// TestJavaDirUsageName: BookKeeper's per-directory usage gauge name, as the
// Pulsar chart's dashboard queries it for its ledger directory.
func TestJavaDirUsageName(t *testing.T) {
	for dir, want := range map[string]string{
		"/pulsar/data/bookkeeper/ledgers-0":  "bookie_ledger_dir__pulsar_data_bookkeeper_ledgers_0_usage",
		"/pulsar/data/bookkeeper/ledgers-0/": "bookie_ledger_dir__pulsar_data_bookkeeper_ledgers_0_usage",
		"data/bk.ledgers":                    "bookie_ledger_dir_data_bk_ledgers_usage",
	} {
		if got := javaDirUsageName(dir); got != want {
			t.Errorf("javaDirUsageName(%q) = %q, want %q", dir, got, want)
		}
	}
}
