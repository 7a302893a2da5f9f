package server

import (
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/foliodb/folio/internal/storage"
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
