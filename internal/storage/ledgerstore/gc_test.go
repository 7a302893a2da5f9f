package ledgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage"
)

// TestGCKeepsLiveEntries: after deleting some ledgers, GC removes or
// compacts the entry logs they filled, and every entry of the live ledgers
// still reads back, before and after a crash.
func TestGCKeepsLiveEntries(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	cfg.LedgerDirs = []string{"/l0"}
	cfg.MaxEntryLogBytes = 64 << 10
	cfg.GCThreshold = 0.6
	s := mustOpen(t, mem, cfg)
	const ledgers, entries = 8, 40
	for e := int64(0); e < entries; e++ {
		for l := int64(1); l <= ledgers; l++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 700))
		}
		if e%10 == 9 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fence(t, s, 2); err != nil {
		t.Fatal(err)
	}
	// Delete the even ledgers (2 fenced): more than half of every log dies.
	for l := int64(2); l <= ledgers; l += 2 {
		if err := s.DeleteLedger(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	before := countLogs(t, mem)
	st, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	after := countLogs(t, mem)
	t.Logf("GC: %+v; entry logs %d → %d", st, before, after)
	if st.LogsRemoved == 0 || st.EntriesDropped == 0 {
		t.Fatalf("GC removed nothing: %+v", st)
	}
	check := func(s *Store) {
		for l := int64(1); l <= ledgers; l++ {
			for e := int64(0); e < entries; e++ {
				if l%2 == 1 {
					mustRead(t, s, l, e, entryBody(l, e, e-1, 0, 700))
				} else if _, err := s.ReadEntry(l, e); !errors.Is(err, storage.ErrNoLedger) {
					t.Fatalf("deleted ledger %d entry %d: %v", l, e, err)
				}
			}
		}
		if err := addSync(t, s, 2, 100, entryBody(2, 100, 99, 0, 10), storage.AddOptions{Recovery: true}); !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("fenced-and-deleted ledger accepted a recovery add: %v", err)
		}
	}
	check(s)
	clone := mem.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	s2 := mustOpen(t, clone, cfg)
	defer s2.Close()
	check(s2)
	var ls []int64
	_ = s2.Ledgers(func(l int64) bool { ls = append(ls, l); return true })
	if len(ls) != ledgers/2 {
		t.Fatalf("Ledgers after delete: %v", ls)
	}
	// An unfenced deleted ledger may be created again, empty.
	mustAdd(t, s2, 4, 0, entryBody(4, 0, -1, 9, 10))
	if _, err := s2.ReadEntry(4, 1); !errors.Is(err, storage.ErrNoEntry) {
		t.Fatalf("re-created ledger shows old entries: %v", err)
	}
}

func countLogs(t *testing.T, fs vfs.FS) int {
	names, err := fs.List("/l0/entrylogs")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// TestDeleteIsNotUndoneByReplay: a deleted ledger's journal records are
// never replayed back into existence, whether or not a checkpoint ran
// after the delete.
func TestDeleteIsNotUndoneByReplay(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	s := mustOpen(t, mem, cfg)
	defer s.Close()
	for e := int64(0); e < 5; e++ {
		mustAdd(t, s, 7, e, entryBody(7, e, e-1, 0, 50))
		mustAdd(t, s, 8, e, entryBody(8, e, e-1, 0, 50))
	}
	if err := fence(t, s, 8); err != nil {
		t.Fatal(err)
	}
	for _, l := range []int64{7, 8} {
		if err := s.DeleteLedger(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	s2 := mustOpen(t, mem.CrashClone(vfs.CrashCloneCfg{}), cfg)
	defer s2.Close()
	if _, err := s2.ReadEntry(7, 0); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("deleted ledger 7 after crash: %v", err)
	}
	if err := addSync(t, s2, 8, 5, entryBody(8, 5, 4, 0, 5), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("fenced-and-deleted ledger 8 after crash accepted an add: %v", err)
	}
	if err := fence(t, s2, 8); err != nil {
		t.Fatalf("fence of fenced-and-deleted ledger: %v", err)
	}
}

// TestCrashBetweenCheckpointSteps crashes at each named point of a
// checkpoint (and between recording it and deleting journal files), with
// none and with half of the unsynced data kept.
func TestCrashBetweenCheckpointSteps(t *testing.T) {
	for _, point := range []string{"checkpoint:captured", "checkpoint:flushed", "checkpoint:synced", "checkpoint:recorded", "checkpoint:done"} {
		t.Run(point, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			cfg := testConfig()
			cfg.JournalMaxFileBytes = 16 << 10 // several journal files to delete
			cfg.JournalPreallocBytes = 4 << 10
			s := mustOpen(t, mem, cfg)
			defer s.Close()
			acks := newAckLog()
			add := func(l, e int64) {
				b := entryBody(l, e, e-1, 1, 300)
				acks.try(l, e, b)
				mustAdd(t, s, l, e, b)
				acks.ack(l, e, b)
			}
			for e := int64(0); e < 60; e++ {
				add(1+e%3, e)
			}
			if err := fence(t, s, 2); err != nil {
				t.Fatal(err)
			}
			acks.fence(2)
			var clones []*vfs.MemFS
			s.setHook(func(p string) {
				if p == point {
					clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{}))
				}
			})
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			s.setHook(nil)
			if len(clones) != 1 {
				t.Fatalf("hook %s ran %d times", point, len(clones))
			}
			for round := 0; round < 2; round++ {
				s2 := mustOpen(t, clones[0], cfg)
				acks.verify(t, s2)
				s2.Close()
			}
		})
	}
}

// TestExplicitLACAndWatch: explicit LAC bodies are stored unchanged, raise
// the known LAC, survive a crash; watchers wake when the LAC grows.
func TestExplicitLACAndWatch(t *testing.T) {
	mem := vfs.NewCrashableMem()
	cfg := testConfig()
	s := mustOpen(t, mem, cfg)
	mustAdd(t, s, 3, 0, entryBody(3, 0, -1, 0, 10))
	// Three watches, the second cancelled: the others wake once each, in
	// registration order.
	woken := make(chan int, 3)
	var cancels []func()
	for i := range 3 {
		lac, cancel, err := s.WatchLAC(3, -1, func() { woken <- i })
		if err != nil || lac != -1 {
			t.Fatalf("WatchLAC: %d %v", lac, err)
		}
		cancels = append(cancels, cancel)
	}
	cancels[1]()
	mustAdd(t, s, 3, 1, entryBody(3, 1, 0, 0, 10))
	for _, want := range []int{0, 2} {
		select {
		case got := <-woken:
			if got != want {
				t.Fatalf("woken watch %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("watcher not woken by LAC 0")
		}
	}
	for _, cancel := range cancels {
		cancel() // after the wake: does nothing
	}
	// A watch below the known LAC is not registered: never woken.
	if lac, cancel, err := s.WatchLAC(3, -1, func() { woken <- -1 }); err != nil || lac != 0 {
		t.Fatalf("WatchLAC below the LAC: %d %v", lac, err)
	} else {
		cancel()
	}
	body := make([]byte, 16+4)
	binary.BigEndian.PutUint64(body[0:], 3)
	binary.BigEndian.PutUint64(body[8:], 1)
	copy(body[16:], "crc!")
	if err := s.SetExplicitLAC(context.Background(), 3, masterKey(3), body); err != nil {
		t.Fatal(err)
	}
	if lac, _ := s.LastAddConfirmed(3); lac != 1 {
		t.Fatalf("LAC after explicit LAC = %d, want 1", lac)
	}
	if _, err := s.ExplicitLAC(4); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("ExplicitLAC of unknown ledger: %v", err)
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	s2 := mustOpen(t, clone, cfg)
	defer s2.Close()
	got, err := s2.ExplicitLAC(3)
	if err != nil || string(got) != string(body) {
		t.Fatalf("explicit LAC after crash: %x %v", got, err)
	}
	if lac, _ := s2.LastAddConfirmed(3); lac != 1 {
		t.Fatalf("LAC after crash = %d, want 1", lac)
	}
	mustAdd(t, s2, 3, 2, entryBody(3, 2, 1, 0, 10))
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean reopen computes the LAC from the entries and explicit LAC.
	s3 := mustOpen(t, clone, cfg)
	defer s3.Close()
	if lac, err := s3.LastAddConfirmed(3); err != nil || lac != 1 {
		t.Fatalf("LAC after reopen = %d, %v; want 1", lac, err)
	}
	mustRead(t, s3, 3, -1, entryBody(3, 2, 1, 0, 10))
}
