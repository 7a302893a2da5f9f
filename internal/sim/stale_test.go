package sim

import (
	"testing"

	"github.com/foliodb/folio/internal/ledger"
)

// spy passes events to its machine and records those it was not meant to
// get: answers to READ_LAC or to LAC reads (entry -1), which the Read of
// entries it stands in front of never sent.
type spy struct {
	ledger.Machine
	stray []ledger.Event
}

func (s *spy) Step(ev ledger.Event) {
	switch ev := ev.(type) {
	case ledger.ReadLACResponse, ledger.LongPollResponse:
		s.stray = append(s.stray, ev)
		return
	case ledger.ReadResponse:
		if ev.EntryID < 0 {
			s.stray = append(s.stray, ev)
			return
		}
	}
	s.Machine.Step(ev)
}

// TestStaleLostRequest: a tailing reader's connection to a bookie is lost
// while its LAC read is out, and the reader moves on to reading entries
// before the loss is delivered (connectionLost delivers it later). The
// failure belongs to the finished LAC read: it must not be stepped into
// the Read (which panics on an event it cannot step).
func TestStaleLostRequest(t *testing.T) {
	w := newWorld(Config{Seed: 1}.withDefaults())
	defer w.shutdown()
	wr := w.createLedger(3, 3, 2, 3, writerOpts{})
	if wr == nil {
		t.Fatal("no ledger")
	}
	w.topUp(wr) // entries 0-2, acknowledged before the reader starts
	w.runUntil(func() bool { return len(wr.led.acked) == 3 })
	if len(wr.led.acked) != 3 {
		t.Fatalf("acknowledged %v, want entries 0-2", wr.led.acked)
	}
	a := w.newActor(kindReader, "t", wr.led)
	a.longPoll = false
	w.readerRound(a) // a LAC read, out to the ensemble
	if len(a.pending) == 0 {
		t.Fatal("the LAC read sent nothing")
	}
	var lost *pendingReq
	for _, txn := range sortedKeys(a.pending) {
		lost = a.pending[txn]
		break
	}
	a.connectionLost(lost.bookie)

	// The LAC read finishes (as on its other answers) with entries to read:
	// the reader switches to a Read of them.
	a.readerLAC(ledger.LACComplete{LAC: 2})
	s := &spy{Machine: a.m}
	a.m = s
	at := w.now
	w.runUntil(func() bool { return w.now > at }) // the delivery is due now
	if len(w.violations) > 0 {
		t.Fatalf("violations: %v\n%s", w.violations, w.trace.String())
	}
	if len(s.stray) > 0 {
		t.Errorf("the Read was stepped the LAC read's failures: %v", s.stray)
	}
}
