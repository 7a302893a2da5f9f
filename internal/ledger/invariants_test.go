//go:build invariants

package ledger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// These tests run only with the invariants tag (make test sets it): they
// break a machine's bookkeeping by hand and check that the next Ready
// panics naming the broken invariant.

func invariantsMetadata() *metadata.LedgerMetadata {
	return &metadata.LedgerMetadata{
		EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2,
		State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"b1:1", "b2:1", "b3:1"}}},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte("pw"),
	}
}

// mustViolate runs f and fails unless it panics with an invariant
// violation containing want.
func mustViolate(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg := fmt.Sprint(r)
		if r == nil || !strings.Contains(msg, "invariant violated") || !strings.Contains(msg, want) {
			t.Fatalf("panic %v, want an invariant violation naming %q", r, want)
		}
	}()
	f()
}

// writerWithAcks returns a writer that appended three entries and had
// entry 0 acknowledged by two bookies (LAC 0).
func writerWithAcks(t *testing.T) *Writer {
	t.Helper()
	w, err := NewWriter(WriterConfig{LedgerID: 7, Metadata: invariantsMetadata(), Version: 1, Writable: []metadata.BookieID{"b1:1", "b2:1", "b3:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := w.Append([]byte("entry")); err != nil {
			t.Fatal(err)
		}
	}
	w.Step(AddResponse{Bookie: "b1:1", EntryID: 0})
	w.Step(AddResponse{Bookie: "b2:1", EntryID: 0})
	w.Ready() // consistent: no panic
	if w.LastAddConfirmed() != 0 {
		t.Fatalf("LAC %d, want 0", w.LastAddConfirmed())
	}
	return w
}

func TestInvariantsCatchWriterBookkeeping(t *testing.T) {
	t.Run("ack count", func(t *testing.T) {
		w := writerWithAcks(t)
		w.p.pending[0].acks = 2 // one ack flag set: the count disagrees
		mustViolate(t, "counts 2 acks", func() { w.Ready() })
	})
	t.Run("pending order", func(t *testing.T) {
		w := writerWithAcks(t)
		w.p.pending[0], w.p.pending[1] = w.p.pending[1], w.p.pending[0]
		mustViolate(t, "pending slot 0 holds e2", func() { w.Ready() })
	})
	t.Run("LAC backward", func(t *testing.T) {
		w := writerWithAcks(t)
		// Move the LAC back consistently: the pipeline alone looks fine.
		op := &pendingAdd{entryID: 0, lac: -1, length: 5, payload: []byte("entry"), acked: make([]bool, 3)}
		w.p.pending = append([]*pendingAdd{op}, w.p.pending...)
		w.p.lac, w.p.lacLength = -1, 0
		mustViolate(t, "LAC moved backward", func() { w.Ready() })
	})
	t.Run("acknowledgement past a gap", func(t *testing.T) {
		w := writerWithAcks(t)
		w.emit(AddComplete{EntryID: 2})
		mustViolate(t, "e2 acknowledged after e0, with LAC 0", func() { w.Ready() })
	})
	t.Run("completion twice", func(t *testing.T) {
		w := writerWithAcks(t)
		w.emit(AddComplete{EntryID: 0, Err: ErrLedgerClosed})
		mustViolate(t, "AddComplete e0 after e0", func() { w.Ready() })
	})
	t.Run("ensemble", func(t *testing.T) {
		w := writerWithAcks(t)
		w.p.ensemble[1] = "b9:1"
		mustViolate(t, "the stored last ensemble", func() { w.Ready() })
	})
}

// A recovery that would close below a LAC it saw (an acknowledged entry)
// is caught when it proposes the close.
func TestInvariantsCatchRecoveryClosingBelowAckedEntry(t *testing.T) {
	md := invariantsMetadata()
	md.State = metadata.LedgerInRecovery
	r := NewRecovery(RecoveryConfig{LedgerID: 7, Metadata: md, Version: 1})
	r.p = newPipeline(r.q, md.LastEnsemble().Ensemble, 3, 30)
	r.inv.startReading(3, 3)
	r.Ready()    // consistent: no panic
	r.inv.saw(5) // an entry read carried LAC 5: entries 0 … 5 were acknowledged
	closed := md.Clone()
	closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 3, 30
	r.emit(WriteMetadata{Metadata: closed, Expected: 1})
	mustViolate(t, "closing at e3 below LAC 5", func() { r.Ready() })

	// The same close with an unsafe knob on is the simulator's business.
	r = NewRecovery(RecoveryConfig{LedgerID: 7, Metadata: md, Version: 1, Unsafe: UnsafeKnobs{StartAtLACOnly: true}})
	r.p = newPipeline(r.q, md.LastEnsemble().Ensemble, 3, 30)
	r.inv.startReading(3, 3)
	r.inv.saw(5)
	r.emit(WriteMetadata{Metadata: closed, Expected: 1})
	r.Ready()
}

func TestInvariantsCatchRecoveryLACBackward(t *testing.T) {
	md := invariantsMetadata()
	md.State = metadata.LedgerInRecovery
	r := NewRecovery(RecoveryConfig{LedgerID: 7, Metadata: md, Version: 1})
	r.p = newPipeline(r.q, md.LastEnsemble().Ensemble, 3, 30)
	r.inv.startReading(3, 3)
	r.p.lac, r.p.lastAddPushed = 2, 2
	mustViolate(t, "LAC moved backward: 2 after 3", func() { r.Ready() })
}

func TestInvariantsCatchRecoveryReads(t *testing.T) {
	md := invariantsMetadata()
	md.State = metadata.LedgerInRecovery
	r := NewRecovery(RecoveryConfig{LedgerID: 7, Metadata: md, Version: 1})
	r.p = newPipeline(r.q, md.LastEnsemble().Ensemble, 3, 30)
	r.phase, r.nextRead = phaseRead, 4
	r.inv.startReading(3, 3)
	r.reads[4] = &recoveryRead{replicas: md.LastEnsemble().Ensemble, answered: []bool{true, false, false}, negatives: 1}
	r.Ready() // consistent: one negative from one answer
	r.reads[4].absent = true
	mustViolate(t, "e4 absent on 1 negatives, the threshold is 2", func() { r.Ready() })
}
