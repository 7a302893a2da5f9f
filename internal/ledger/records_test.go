package ledger

import (
	"math/rand/v2"
	"testing"

	"github.com/foliodb/folio/internal/ledger/placement"
)

// freeList is an AddRecords over a plain free list (the machines are
// single-threaded in these tests) that counts the records it handed back:
// the writer tests run with recycling on, as the client and the simulator
// do.
type freeList struct {
	free   []any
	reused int
}

func (f *freeList) records() *AddRecords {
	return &AddRecords{
		Get: func() any {
			if len(f.free) == 0 {
				return nil
			}
			r := f.free[len(f.free)-1]
			f.free[len(f.free)-1] = nil
			f.free = f.free[:len(f.free)-1]
			f.reused++
			return r
		},
		Put: func(r any) { f.free = append(f.free, r) },
	}
}

// TestRecycledAddNeedsFreshAcks: a record recycled from an acknowledged
// add starts with no acks. The next add on it, sent to a write set that
// overlaps the old one, reaches its LAC only with AckQuorum acks of its
// own: neither one ack nor the old add's acks suffice.
func TestRecycledAddNeedsFreshAcks(t *testing.T) {
	var fl freeList
	w, err := NewWriter(WriterConfig{LedgerID: 7, Metadata: specMetadata(), Placement: placement.NewRandom(rand.NewPCG(1, 1)),
		AddRecords: fl.records()})
	if err != nil {
		t.Fatal(err)
	}
	// E3 Qw2 Qa2 on b1 b2 b3: entry 0 goes to b1 b2, entry 1 to b2 b3.
	if _, err := w.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	w.Ready()
	w.Step(AddResponse{Bookie: "b1", EntryID: 0})
	w.Step(AddResponse{Bookie: "b2", EntryID: 0})
	w.Ready()
	if lac := w.LastAddConfirmed(); lac != 0 {
		t.Fatalf("LAC %d after entry 0's quorum, want 0", lac)
	}
	if len(fl.free) != 1 {
		t.Fatalf("%d records recycled after entry 0 was acknowledged, want 1", len(fl.free))
	}

	if _, err := w.Append([]byte("b")); err != nil {
		t.Fatal(err)
	}
	w.Ready()
	if fl.reused != 1 {
		t.Fatalf("entry 1 took %d recycled records, want entry 0's", fl.reused)
	}
	w.Step(AddResponse{Bookie: "b2", EntryID: 1})
	w.Ready()
	if lac := w.LastAddConfirmed(); lac != 0 {
		t.Fatalf("LAC %d after one ack of entry 1 (Qa 2)", lac)
	}
	w.Step(AddResponse{Bookie: "b3", EntryID: 1})
	w.Ready()
	if lac := w.LastAddConfirmed(); lac != 1 {
		t.Fatalf("LAC %d after entry 1's two acks on a recycled record, want 1", lac)
	}
	// A duplicate ack of an acknowledged entry changes nothing.
	w.Step(AddResponse{Bookie: "b3", EntryID: 1})
	w.Ready()
	if lac := w.LastAddConfirmed(); lac != 1 {
		t.Fatalf("LAC %d after a duplicate ack", lac)
	}
}
