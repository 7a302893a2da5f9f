package ledger

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/placement"
)

// TestTicks: each machine reports its TickInterval and takes a Tick in any
// state; the Writer's Tick sends the explicit LAC once it moved, a Read's
// asks the next replica, the others' do nothing.
func TestTicks(t *testing.T) {
	dig, _ := digest.New(digest.CRC32C, []byte("pw"))
	md := specMetadata()

	w, err := NewWriter(WriterConfig{LedgerID: 7, Metadata: md, Placement: placement.NewRandom(rand.NewPCG(1, 1)), ExplicitLACInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if w.TickInterval() != time.Second || w.Done() {
		t.Fatalf("writer: interval %v done %v", w.TickInterval(), w.Done())
	}
	w.Step(Tick{})
	if effs := w.Ready(); len(effs) != 0 {
		t.Fatalf("writer: tick before any ack: %v", effs)
	}
	if _, err := w.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	w.Ready()
	w.Step(AddResponse{Bookie: "b1", EntryID: 0})
	w.Step(AddResponse{Bookie: "b2", EntryID: 0})
	w.Ready()
	w.Step(Tick{})
	if effs := w.Ready(); len(effs) != 1 || effs[0].(SendWriteLAC).LAC != 0 {
		t.Fatalf("writer: tick after entry 0 acknowledged: %v", effs)
	}
	w.Step(Tick{})
	if effs := w.Ready(); len(effs) != 0 {
		t.Fatalf("writer: second tick with the LAC unchanged: %v", effs)
	}
	w.Close()
	w.Ready()
	w.Step(MetadataWritten{Version: 2})
	if effs := w.Ready(); !w.Done() || len(effs) != 1 {
		t.Fatalf("writer: after close: done %v, effects %v", w.Done(), effs)
	}

	r, err := NewRead(ReadConfig{LedgerID: 7, Metadata: md, Verifier: dig, First: 0, Last: 0, SpeculativeTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.TickInterval() != time.Millisecond {
		t.Fatalf("read: interval %v", r.TickInterval())
	}

	others := []Machine{
		NewReadLAC(ReadLACConfig{LedgerID: 7, Metadata: md, Verifier: dig}),
		NewLongPollLAC(LongPollConfig{LedgerID: 7, Metadata: md, Verifier: dig, PreviousLAC: -1, TimeoutMs: 10}),
		NewRecovery(RecoveryConfig{LedgerID: 7, Metadata: md, Verifier: dig, Placement: placement.NewRandom(rand.NewPCG(1, 1)), ReadAhead: 1}),
	}
	for _, m := range others {
		m.Step(Tick{})
		if effs := m.Ready(); m.TickInterval() != 0 || len(effs) != 0 {
			t.Errorf("%T: interval %v, tick gave %v", m, m.TickInterval(), effs)
		}
	}
}
