package entrylog

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// compactableStore returns a store over fs holding sealed logs in which
// ledger 2 is dead and ledger 1 live, with the index x.
func compactableStore(t *testing.T, fs vfs.FS) (*Store, *fakeIndex) {
	t.Helper()
	s := openStore(t, fs, Options{MaxLogBytes: 8 << 10})
	x := newFakeIndex()
	for round := int64(0); round < 6; round++ {
		addAll(t, s, []int64{1, 2}, round*5, round*5+5)
		if err := s.Flush(x.put); err != nil {
			t.Fatal(err)
		}
	}
	s.DropLedger(2)
	x.deleteLedger(2)
	return s, x
}

// leftovers lists the files of the store's directory that are neither a
// registered log nor a removed one: outputs a failed compaction left.
func leftovers(t *testing.T, s *Store, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List("ledgers")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range names {
		id, ok := parseLogFileName(n)
		if _, known := s.mu.logs[id]; !ok || !known {
			out = append(out, n)
		}
	}
	return out
}

// Regression (review 2, finding 7): a compaction output whose header cannot
// be written (a full disk) left an empty ".log.compacting" file behind
// until the next Open.
func TestCompactionCreateFailureLeavesNoFile(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	fail := false
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if fail && strings.HasSuffix(op.Path, compactingSufix) && op.Kind == errorfs.OpFileSync {
			return syscall.ENOSPC
		}
		return nil
	}))
	s, x := compactableStore(t, fs)
	defer s.Close()
	live := func(l int64) bool { return l == 1 }
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := s.GC(0.99, live, x.relocate); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("GC with a failing output: %v, want ENOSPC", err)
	}
	if l := leftovers(t, s, mem); len(l) > 0 {
		t.Fatalf("failed compactions left %v", l)
	}
	for e := int64(0); e < 30; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
}

// Regression (review 2, finding 7): when publishCompacted failed after
// renaming its output to ".log", the cleanup removed the old ".compacting"
// name, and the unregistered ".log" stayed forever (and would be taken for
// a log by the next Open).
func TestCompactionPublishFailureLeavesNoLog(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	fail, renamed := false, map[string]bool{}
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !fail:
		case op.Kind == errorfs.OpRename && strings.HasSuffix(op.Path, compactingSufix):
			renamed[strings.TrimSuffix(op.Path, ".compacting")] = true
		case op.Kind == errorfs.OpOpen && renamed[op.Path]:
			return errors.New("injected open failure")
		}
		return nil
	}))
	s, x := compactableStore(t, fs)
	defer s.Close()
	live := func(l int64) bool { return l == 1 }
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := s.GC(0.99, live, x.relocate); err == nil {
		t.Fatal("GC hid the failure to open its output")
	}
	mu.Lock()
	n := len(renamed)
	mu.Unlock()
	if n == 0 {
		t.Fatal("setup: no compaction output was renamed")
	}
	if l := leftovers(t, s, mem); len(l) > 0 {
		t.Fatalf("failed publications left %v", l)
	}
	for e := int64(0); e < 30; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if _, err := s.GC(0.99, live, x.relocate); err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 30; e++ {
		mustReadBack(t, s, x, 1, e, size(1, e))
	}
}
