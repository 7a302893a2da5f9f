package ledgerstore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A ledger deleted and created again (same id) while a batch read runs:
// the answer never combines the two incarnations' entries.
func TestReadEntriesNeverMixesIncarnations(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), testConfig())
	defer s.Close()
	const l = 3
	for e := int64(0); e < 10; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	slots := 0
	s.setHook(func(p string) {
		if p != "readentries:slot" {
			return
		}
		if slots++; slots == 4 { // three slots taken from the first incarnation
			if err := s.DeleteLedger(contextBackground(), l); err != nil {
				t.Error(err)
			}
			for e := int64(0); e < 10; e++ {
				mustAdd(t, s, l, e, entryBody(l, e, e-1, 1, 100))
			}
		}
	})
	got, err := s.ReadEntries(l, 0, 0, 1<<30, 4)
	s.setHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if slots < 4 {
		t.Fatalf("the read took %d slots; the deletion never ran inside it", slots)
	}
	old, renewed := 0, 0
	for e, b := range got {
		switch string(b) {
		case string(entryBody(l, int64(e), int64(e)-1, 0, 100)):
			old++
		case string(entryBody(l, int64(e), int64(e)-1, 1, 100)):
			renewed++
		default:
			t.Fatalf("entry %d: bytes of neither incarnation", e)
		}
	}
	if old > 0 && renewed > 0 {
		t.Fatalf("one answer holds %d entries of the deleted ledger and %d of the new one", old, renewed)
	}
	if len(got) == 0 {
		t.Fatal("no entry answered")
	}
}

// TestReadEntriesCountsDeletionBeforeLookup: a deletion that starts after
// ReadEntries found the ledger but before it walked the index (it is
// parked after dropping the caches, the index not yet deleted) must be
// noticed. The read then walks the old index; the deletion completes and
// the ledger is written again (entries 0..4, in the write cache), so the
// slots would mix new bodies (cache) with old ones (the old locations of
// 5..9) unless the read counted deletions before its lookup.
func TestReadEntriesCountsDeletionBeforeLookup(t *testing.T) {
	s := mustOpen(t, vfs.NewMem(), testConfig())
	defer s.Close()
	const l = 3
	for e := int64(0); e < 10; e++ {
		mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 100))
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	dropped, release, deleted := make(chan struct{}), make(chan struct{}), make(chan struct{})
	started, renewed := false, false
	s.setHook(func(p string) {
		switch p {
		case "readentries:lookedup":
			if started {
				return
			}
			started = true
			go func() {
				defer close(deleted)
				if err := s.DeleteLedger(contextBackground(), l); err != nil {
					t.Error(err)
				}
			}()
			<-dropped
		case "delete:dropped":
			close(dropped)
			<-release
		case "readentries:slot":
			if renewed || !started {
				return
			}
			renewed = true
			close(release)
			<-deleted
			for e := int64(0); e < 5; e++ {
				mustAdd(t, s, l, e, entryBody(l, e, e-1, 1, 100))
			}
		}
	})
	got, err := s.ReadEntries(l, 0, 0, 1<<30, 4)
	s.setHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !renewed {
		t.Fatal("the ledger was never written again inside the read")
	}
	old, fresh := 0, 0
	for e, b := range got {
		switch string(b) {
		case string(entryBody(l, int64(e), int64(e)-1, 0, 100)):
			old++
		case string(entryBody(l, int64(e), int64(e)-1, 1, 100)):
			fresh++
		default:
			t.Fatalf("entry %d: bytes of neither incarnation", e)
		}
	}
	if old > 0 && fresh > 0 {
		t.Fatalf("one answer holds %d entries of the deleted ledger and %d of the new one", old, fresh)
	}
	if len(got) == 0 {
		t.Fatal("no entry answered")
	}
}
