package ledgerstore

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/foliodb/folio/internal/storage"
)

var errInjected = errors.New("injected I/O error")

// faultFS injects errInjected into operations of the given kinds on paths
// containing pathPart, while armed.
type faultFS struct {
	armed    atomic.Bool
	kinds    map[errorfs.OpKind]bool
	pathPart string
}

func (f *faultFS) injector() errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if f.armed.Load() && f.kinds[op.Kind] && strings.Contains(op.Path, f.pathPart) {
			return errInjected
		}
		return nil
	})
}

// TestJournalFailureFailsStore: a failed journal write or fdatasync fails
// the add (never acknowledged), fails the store (Failed closed, later adds
// ErrReadOnly), and everything acknowledged before survives a reopen.
func TestJournalFailureFailsStore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []errorfs.OpKind
	}{
		{"sync", []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}},
		{"write", []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			ff := &faultFS{kinds: map[errorfs.OpKind]bool{}, pathPart: "/j0/"}
			for _, k := range tc.kinds {
				ff.kinds[k] = true
			}
			cfg := testConfig()
			cfg.JournalDirs = []string{"/j0"}
			s := mustOpen(t, errorfs.Wrap(mem, ff.injector()), cfg)
			for e := int64(0); e < 10; e++ {
				mustAdd(t, s, 1, e, entryBody(1, e, e-1, 0, 200))
			}
			ff.armed.Store(true)
			if err := addSync(t, s, 1, 10, entryBody(1, 10, 9, 0, 200), storage.AddOptions{}); err == nil {
				t.Fatal("add acknowledged although its journal " + tc.name + " failed")
			}
			select {
			case <-s.Failed():
			default:
				t.Fatal("store did not enter the failed state")
			}
			if s.Err() == nil {
				t.Fatal("Err() is nil after failure")
			}
			ff.armed.Store(false)
			if err := addSync(t, s, 1, 11, entryBody(1, 11, 10, 0, 200), storage.AddOptions{}); !errors.Is(err, storage.ErrReadOnly) {
				t.Fatalf("add after failure: %v, want ErrReadOnly", err)
			}
			if err := fence(t, s, 2); !errors.Is(err, storage.ErrReadOnly) {
				t.Fatalf("fence after failure: %v, want ErrReadOnly", err)
			}
			// Reads still work.
			mustRead(t, s, 1, 3, entryBody(1, 3, 2, 0, 200))
			// Crash now (only synced data survives) and reopen.
			clone := mem.CrashClone(vfs.CrashCloneCfg{})
			s.Close()
			s2 := mustOpen(t, clone, cfg)
			defer s2.Close()
			for e := int64(0); e < 10; e++ {
				mustRead(t, s2, 1, e, entryBody(1, e, e-1, 0, 200))
			}
			if got, err := s2.ReadEntry(1, 10); err == nil && string(got) != string(entryBody(1, 10, 9, 0, 200)) {
				t.Fatal("unacknowledged entry 10 is half-visible")
			}
			mustAdd(t, s2, 1, 12, entryBody(1, 12, 11, 0, 200))
		})
	}
}

// TestReadErrorIsNotNoEntry: an entry log that cannot be read gives an
// error, never ErrNoEntry (spec/protocol.md §7 #5).
func TestReadErrorIsNotNoEntry(t *testing.T) {
	mem := vfs.NewMem()
	ff := &faultFS{kinds: map[errorfs.OpKind]bool{errorfs.OpFileReadAt: true, errorfs.OpFileRead: true}, pathPart: "/entrylogs/"}
	cfg := testConfig()
	cfg.ReadCacheBytes = -1
	s := mustOpen(t, errorfs.Wrap(mem, ff.injector()), cfg)
	defer s.Close()
	for e := int64(0); e < 5; e++ {
		mustAdd(t, s, 1, e, entryBody(1, e, e-1, 0, 300))
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ff.armed.Store(true)
	for _, e := range []int64{2, -1} {
		_, err := s.ReadEntry(1, e)
		if err == nil || errors.Is(err, storage.ErrNoEntry) || errors.Is(err, storage.ErrNoLedger) {
			t.Fatalf("read of entry %d with a failing entry log: %v, want an I/O error", e, err)
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("read error does not carry the cause: %v", err)
		}
	}
	ff.armed.Store(false)
	mustRead(t, s, 1, 2, entryBody(1, 2, 1, 0, 300))
}

// TestEntryLogWriteFailure: a checkpoint whose entry-log write or sync
// fails puts the store in the failed state, and nothing acknowledged is
// lost after a crash (the journal still holds it).
func TestEntryLogWriteFailure(t *testing.T) {
	mem := vfs.NewCrashableMem()
	ff := &faultFS{kinds: map[errorfs.OpKind]bool{errorfs.OpFileWrite: true, errorfs.OpFileSync: true}, pathPart: "/entrylogs/"}
	cfg := testConfig()
	s := mustOpen(t, errorfs.Wrap(mem, ff.injector()), cfg)
	for e := int64(0); e < 20; e++ {
		mustAdd(t, s, 4, e, entryBody(4, e, e-1, 0, 500))
	}
	ff.armed.Store(true)
	if err := s.Checkpoint(); err == nil {
		t.Fatal("checkpoint succeeded with failing entry-log writes")
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("store not failed")
	}
	mustRead(t, s, 4, 7, entryBody(4, 7, 6, 0, 500))
	clone := mem.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	s2 := mustOpen(t, clone, cfg)
	defer s2.Close()
	for e := int64(0); e < 20; e++ {
		mustRead(t, s2, 4, e, entryBody(4, e, e-1, 0, 500))
	}
}
