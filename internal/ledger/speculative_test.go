package ledger

import (
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
)

func specMetadata() *metadata.LedgerMetadata {
	return &metadata.LedgerMetadata{EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2, State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles: []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"b1", "b2", "b3"}}}}
}

func sends(effs []Effect) []SendRead {
	var out []SendRead
	for _, e := range effs {
		if s, ok := e.(SendRead); ok {
			out = append(out, s)
		}
	}
	return out
}

// A replica that does not answer: the speculative timeout asks the next
// one, reports the slow one, and the first answer wins.
func TestReadSpeculative(t *testing.T) {
	dig, _ := digest.New(digest.CRC32C, []byte("pw"))
	r, err := NewRead(ReadConfig{LedgerID: 7, Metadata: specMetadata(), Verifier: dig, First: 0, Last: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	s := sends(r.Ready())
	// e0 -> b1, e1 -> b2.
	if len(s) != 2 || s[0].Bookies[0] != "b1" || s[1].Bookies[0] != "b2" {
		t.Fatalf("initial sends %v", s)
	}
	r.Step(ReadResponse{Bookie: "b2", EntryID: 1, Body: dig.AppendEntry(nil, 7, 1, 0, 2, []byte("y"))})
	if effs := r.Ready(); len(effs) != 0 {
		t.Fatalf("e1 delivered before e0: %v", effs)
	}
	r.Step(Tick{})
	effs := r.Ready()
	s = sends(effs)
	if len(s) != 1 || s[0].EntryID != 0 || s[0].Bookies[0] != "b2" {
		t.Fatalf("speculative sends %v", effs)
	}
	if len(effs) != 2 || effs[1] != (BookieSlow{Bookie: "b1"}) {
		t.Fatalf("effects %v, want the send and b1 slow", effs)
	}
	// Nothing more to speculate on: e0's last replica was asked.
	r.Step(Tick{})
	if effs := r.Ready(); len(effs) != 0 {
		t.Fatalf("second speculation: %v", effs)
	}
	r.Step(ReadResponse{Bookie: "b2", EntryID: 0, Body: dig.AppendEntry(nil, 7, 0, -1, 1, []byte("x"))})
	effs = r.Ready()
	if len(effs) != 3 || !r.Done() {
		t.Fatalf("completion %v", effs)
	}
	if rc := effs[2].(ReadComplete); rc.Err != nil {
		t.Fatal(rc.Err)
	}
	// The late answer of b1 is ignored.
	r.Step(ReadResponse{Bookie: "b1", EntryID: 0, Err: ErrTimeout})
	if effs := r.Ready(); len(effs) != 0 {
		t.Fatalf("late answer: %v", effs)
	}
}

// An error from the first replica while the speculative one is still out
// waits for it; both failing with negatives is ErrNoSuchEntry.
func TestReadSpeculativeBothFail(t *testing.T) {
	dig, _ := digest.New(digest.CRC32C, []byte("pw"))
	r, _ := NewRead(ReadConfig{LedgerID: 7, Metadata: specMetadata(), Verifier: dig, First: 0, Last: 0})
	r.Start()
	r.Ready()
	r.Step(Tick{})
	r.Ready()
	r.Step(ReadResponse{Bookie: "b1", EntryID: 0, Err: ErrNoSuchEntry})
	if effs := r.Ready(); len(effs) != 0 || r.Done() {
		t.Fatalf("decided with b2 outstanding: %v", effs)
	}
	r.Step(ReadResponse{Bookie: "b2", EntryID: 0, Err: ErrNoSuchEntry})
	effs := r.Ready()
	if !r.Done() || len(effs) != 1 {
		t.Fatalf("effects %v", effs)
	}
	if rc := effs[0].(ReadComplete); rc.Err == nil {
		t.Fatal("read of a missing entry succeeded")
	}
}

// Avoided bookies are asked last.
func TestReadAvoid(t *testing.T) {
	dig, _ := digest.New(digest.CRC32C, []byte("pw"))
	r, _ := NewRead(ReadConfig{LedgerID: 7, Metadata: specMetadata(), Verifier: dig, First: 0, Last: 2,
		Avoid: func(b metadata.BookieID) bool { return b == "b2" }})
	r.Start()
	s := sends(r.Ready())
	// Write sets: e0 {b1 b2}, e1 {b2 b3}, e2 {b3 b1}.
	want := []metadata.BookieID{"b1", "b3", "b3"}
	for i, sr := range s {
		if sr.Bookies[0] != want[i] {
			t.Fatalf("e%d asked of %s, want %s", i, sr.Bookies[0], want[i])
		}
	}
}

// A speculative replica that fails fast does not stop the speculation for
// the entry: the next Tick asks its third replica, since none of the
// replicas asked has answered successfully (Java's
// maybeSendSpeculativeRead), rather than waiting for the silent first
// replica's transport timeout.
func TestReadSpeculationAfterSpeculativeError(t *testing.T) {
	dig := batchDigester(t)
	r, err := NewRead(ReadConfig{LedgerID: 7, Metadata: fullMetadata(), Verifier: dig, First: 0, Last: 0, SpeculativeTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	if s := sends(r.Ready()); len(s) != 1 || s[0].Bookies[0] != "b1" {
		t.Fatalf("initial sends %v", s)
	}
	r.Step(Tick{})
	if s := sends(r.Ready()); len(s) != 1 || s[0].Bookies[0] != "b2" {
		t.Fatalf("speculative sends %v", s)
	}
	r.Step(ReadResponse{Bookie: "b2", EntryID: 0, Err: ErrTimeout})
	if effs := r.Ready(); len(effs) != 0 {
		t.Fatalf("b2's error with b1 still out: %v", effs)
	}
	r.Step(Tick{})
	effs := r.Ready()
	if s := sends(effs); len(s) != 1 || s[0].Bookies[0] != "b3" {
		t.Fatalf("after b2 failed, a Tick sent %v, want b3", effs)
	}
	if effs[len(effs)-1] != (BookieSlow{Bookie: "b1"}) {
		t.Fatalf("effects %v, want the still silent b1 reported slow", effs)
	}
	r.Step(ReadResponse{Bookie: "b3", EntryID: 0, Body: dig.AppendEntry(nil, 7, 0, -1, 1, []byte("x"))})
	if effs := r.Ready(); !r.Done() || len(effs) != 2 || effs[1].(ReadComplete).Err != nil {
		t.Fatalf("completion %v", effs)
	}
}

// Speculation is op-wide as Java's heardFromHosts: an entry is not asked
// of its next replica while one of the replicas it was asked of has
// answered another entry of the read successfully (that bookie is up; this
// entry's answer is behind the others).
func TestReadSpeculationSkipsHeardFromReplicas(t *testing.T) {
	dig := batchDigester(t)
	// E = Qw = 3, sticky on b1: e0 and e1 are asked of b1.
	r, _ := NewRead(ReadConfig{LedgerID: 7, Metadata: fullMetadata(), Verifier: dig, First: 0, Last: 1,
		SpeculativeTimeout: 10 * time.Millisecond, Sticky: true, StickyIndex: 0})
	r.Start()
	if s := sends(r.Ready()); len(s) != 2 || s[0].Bookies[0] != "b1" || s[1].Bookies[0] != "b1" {
		t.Fatalf("initial sends %v", s)
	}
	r.Step(ReadResponse{Bookie: "b1", EntryID: 0, Body: dig.AppendEntry(nil, 7, 0, -1, 1, []byte("x"))})
	r.Ready()
	r.Step(Tick{})
	if effs := r.Ready(); len(effs) != 0 {
		t.Fatalf("speculated on an entry whose bookie answered another one: %v", effs)
	}
	r.Step(ReadResponse{Bookie: "b1", EntryID: 1, Body: dig.AppendEntry(nil, 7, 1, 0, 2, []byte("y"))})
	if effs := r.Ready(); !r.Done() || len(effs) != 2 || effs[1].(ReadComplete).Err != nil {
		t.Fatalf("completion %v", effs)
	}
}
