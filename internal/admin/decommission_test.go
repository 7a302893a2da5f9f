package admin

import (
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

func TestStoresEntriesOn(t *testing.T) {
	seg := func(first int64, b ...metadata.BookieID) metadata.Segment {
		return metadata.Segment{FirstEntryID: first, Ensemble: b}
	}
	m := &metadata.LedgerMetadata{EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2, State: metadata.LedgerClosed,
		LastEntryID: 5,
		Ensembles: []metadata.Segment{
			seg(0, "a:1", "b:1", "c:1"), // entry 0 only: write set {a, b}
			seg(1, "a:1", "b:1", "d:1"), // entries 1..5: all indexes
			seg(6, "e:1", "b:1", "d:1"), // never written
		}}
	for b, want := range map[metadata.BookieID]bool{"a:1": true, "b:1": true, "c:1": false, "d:1": true, "e:1": false, "f:1": false} {
		if got := StoresEntriesOn(m, b); got != want {
			t.Errorf("closed: StoresEntriesOn(%s) = %v, want %v", b, got, want)
		}
	}
	m.State, m.LastEntryID = metadata.LedgerOpen, -1
	if !StoresEntriesOn(m, "e:1") {
		t.Error("open: the last segment's bookies must count")
	}
	if StoresEntriesOn(m, "c:1") {
		t.Error("open: c:1 holds no entry of the first segment")
	}
}
