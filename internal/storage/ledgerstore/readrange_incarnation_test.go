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
