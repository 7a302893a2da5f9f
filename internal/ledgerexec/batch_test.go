package ledgerexec

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/wire"
)

// answering is a Bookies that answers every request at once with resp.
type answering struct {
	resp *wire.Response
	reqs []wire.Request
}

func (a *answering) Send(_ string, _ int64, req *wire.Request, cb func(*wire.Response, error)) {
	a.reqs = append(a.reqs, *req)
	cb(a.resp, nil)
}

// SendBatchRead builds BATCH_READ_ENTRY; an OK answer's bodies are copied
// into the event; EBADREQ becomes ErrBatchReadUnsupported (and still
// matches the bookie's status).
func TestBatchReadRequest(t *testing.T) {
	var evs []ledger.Event
	ok := &wire.Response{Header: wire.Header{Op: wire.OpBatchReadEntry},
		BatchRead: wire.BatchReadResponse{Status: wire.StatusOK, Entries: [][]byte{[]byte("a"), []byte("b")}}}
	a := &answering{resp: ok}
	x := New(Config{LedgerID: 9, Digester: mustDigester(), Bookies: a, Store: &recorder{},
		Emit: func(ev ledger.Event) { evs = append(evs, ev) }})
	x.Do(ledger.SendBatchRead{Bookie: "b1", StartEntryID: 5, MaxCount: 3, MaxSize: 1000})
	r := a.reqs[0]
	if r.Header.Op != wire.OpBatchReadEntry || r.Has != wire.BodyBatchRead || r.BatchRead.LedgerID != 9 || r.BatchRead.StartEntryID != 5 ||
		r.BatchRead.MaxCount != 3 || r.BatchRead.MaxSize != 1000 || r.BatchRead.Fence {
		t.Fatalf("request %+v", r)
	}
	ev := evs[0].(ledger.BatchReadResponse)
	if ev.Err != nil || ev.Bookie != "b1" || ev.StartEntryID != 5 || len(ev.Bodies) != 2 || string(ev.Bodies[1]) != "b" {
		t.Fatalf("event %+v", ev)
	}
	ok.BatchRead.Entries[1][0] = 'x' // the connection's buffer is reused
	if string(ev.Bodies[1]) != "b" {
		t.Fatal("the event aliases the response")
	}

	a.resp = &wire.Response{Header: wire.Header{Op: wire.OpBatchReadEntry}, Status: wire.StatusBadRequest}
	x.Do(ledger.SendBatchRead{Bookie: "b2", StartEntryID: 5, MaxCount: 3, MaxSize: 1000})
	ev = evs[1].(ledger.BatchReadResponse)
	if !errors.Is(ev.Err, ledger.ErrBatchReadUnsupported) || !errors.Is(ev.Err, wire.ErrBadRequest) {
		t.Fatalf("EBADREQ: %v", ev.Err)
	}
}

// backoffMachine wants Ticks at growing intervals and records when each
// came; it is done after n.
type backoffMachine struct {
	clk       *clock.Manual
	intervals []time.Duration
	at        []time.Time
	done      bool
}

func (m *backoffMachine) Step(ev ledger.Event) {
	if _, ok := ev.(ledger.Tick); ok {
		m.at = append(m.at, m.clk.Now())
		m.intervals = m.intervals[1:]
		m.done = len(m.intervals) == 0
	}
}
func (m *backoffMachine) Ready() []ledger.Effect { return nil }
func (m *backoffMachine) Done() bool             { return m.done }
func (m *backoffMachine) TickInterval() time.Duration {
	if len(m.intervals) == 0 {
		return 0
	}
	return m.intervals[0]
}

// Run reads TickInterval again after every Tick: a machine backs off.
func TestRunTickBackoff(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := clock.NewManual(start)
	m := &backoffMachine{clk: clk, intervals: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}}
	x := New(Config{LedgerID: 9, Digester: mustDigester(), Bookies: &recorder{}, Store: &recorder{}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- x.Run(ctx, clk, nil, m, func() {}, func(ledger.Effect) {}) }()
	// Advance each wanted interval once the loop has armed its timer (the
	// previous one fired, so an armed timer is the next tick's).
	for _, d := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		for clk.Waiters() != 1 {
			runtime.Gosched()
		}
		clk.Advance(d)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 70 * time.Millisecond}
	if len(m.at) != len(want) {
		t.Fatalf("%d ticks, want %d", len(m.at), len(want))
	}
	for i, at := range m.at {
		if at.Sub(start) != want[i] {
			t.Fatalf("ticks at %v after the start, want %v", m.at, want)
		}
	}
}
