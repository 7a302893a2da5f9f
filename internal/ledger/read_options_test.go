package ledger

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// Sticky reads (E == Qw): every entry is asked of the sticky bookie first,
// whatever its write set; the bookies that failed are reported.
func TestReadSticky(t *testing.T) {
	dig := batchDigester(t)
	r, err := NewRead(ReadConfig{LedgerID: 7, Metadata: fullMetadata(), Verifier: dig, First: 0, Last: 2,
		Sticky: true, StickyIndex: 2, Avoid: func(b metadata.BookieID) bool { return b == "b3" }})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	for _, s := range sends(r.Ready()) {
		if s.Bookies[0] != "b3" {
			t.Fatalf("entry %d asked of %s, want the sticky b3 (Avoid does not apply)", s.EntryID, s.Bookies[0])
		}
	}
	r.Step(ReadResponse{Bookie: "b3", EntryID: 0, Err: ErrTimeout})
	if s := sends(r.Ready()); len(s) != 1 || s[0].Bookies[0] != "b1" {
		t.Fatalf("after b3 failed: %v", s)
	}
	if fmt.Sprint(r.Failed()) != "[b3]" {
		t.Fatalf("failed %v", r.Failed())
	}

	// E > Qw: sticky is ignored (a bookie does not store every entry).
	r, _ = NewRead(ReadConfig{LedgerID: 7, Metadata: specMetadata(), Verifier: dig, First: 0, Last: 1, Sticky: true, StickyIndex: 2})
	r.Start()
	if s := sends(r.Ready()); s[0].Bookies[0] != "b1" || s[1].Bookies[0] != "b2" {
		t.Fatalf("striped ledger: %v", s)
	}
}

// The speculative interval backs off after each Tick up to the max; the
// default (no max) stays constant.
func TestReadSpeculativeBackoff(t *testing.T) {
	dig := batchDigester(t)
	intervals := func(cfg ReadConfig) string {
		cfg.LedgerID, cfg.Metadata, cfg.Verifier, cfg.First, cfg.Last = 7, fullMetadata(), dig, 0, 0
		r, err := NewRead(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.Start()
		var out []time.Duration
		for range 4 {
			out = append(out, r.TickInterval())
			r.Step(Tick{})
		}
		return fmt.Sprint(out)
	}
	if got := intervals(ReadConfig{SpeculativeTimeout: 10 * time.Millisecond, SpeculativeMax: 35 * time.Millisecond, SpeculativeMultiplier: 2}); got != "[10ms 20ms 35ms 35ms]" {
		t.Errorf("backoff: %s", got)
	}
	if got := intervals(ReadConfig{SpeculativeTimeout: 10 * time.Millisecond}); got != "[10ms 10ms 10ms 10ms]" {
		t.Errorf("constant: %s", got)
	}
	if got := intervals(ReadConfig{}); got != "[0s 0s 0s 0s]" {
		t.Errorf("off: %s", got)
	}
}

// TryReadLastAddConfirmed's machine: the first verified answer above the
// known LAC ends it, without coverage; negatives count but do not end it;
// nothing valid is an error.
func TestReadLACTry(t *testing.T) {
	dig := batchDigester(t)
	md := specMetadata() // E=3, Qw=2, Qa=2
	newTry := func() *ReadLAC {
		m := NewReadLAC(ReadLACConfig{LedgerID: 7, Metadata: md, Verifier: dig, Try: true, KnownLAC: -1})
		m.Start()
		m.Ready()
		return m
	}
	result := func(m *ReadLAC) LACComplete {
		t.Helper()
		effs := m.Ready()
		if !m.Done() || len(effs) != 1 {
			t.Fatalf("not done: %v", effs)
		}
		return effs[0].(LACComplete)
	}

	m := newTry()
	m.Step(ReadResponse{Bookie: "b2", EntryID: -1, Body: dig.AppendEntry(nil, 7, 5, 4, 60, []byte("x"))})
	if res := result(m); res.Err != nil || res.LAC != 4 || res.Length != 60 {
		t.Fatalf("first answer: %+v", res)
	}

	m = newTry()
	m.Step(ReadResponse{Bookie: "b1", EntryID: -1, Err: wire.StatusNoEntry.Err()})
	if m.Done() {
		t.Fatal("a negative ended the try read")
	}
	m.Step(ReadResponse{Bookie: "b2", EntryID: -1, Err: ErrTimeout})
	m.Step(ReadResponse{Bookie: "b3", EntryID: -1, Err: wire.StatusNoLedger.Err()})
	if res := result(m); res.Err != nil || res.LAC != -1 {
		t.Fatalf("only negatives: %+v", res)
	}

	m = newTry()
	for _, b := range []metadata.BookieID{"b1", "b2", "b3"} {
		m.Step(ReadResponse{Bookie: b, EntryID: -1, Err: ErrTimeout})
	}
	if res := result(m); !errors.Is(res.Err, ErrTimeout) {
		t.Fatalf("no valid answer: %+v", res)
	}

	// Answers at or below the known LAC do not end it, even once they
	// cover every write set (Java's TryReadLastConfirmedOp has no coverage
	// rule): it waits for every answer and gives the highest.
	known := func(lac int64) *ReadLAC {
		m := NewReadLAC(ReadLACConfig{LedgerID: 7, Metadata: md, Verifier: dig, Try: true, KnownLAC: lac})
		m.Start()
		m.Ready()
		return m
	}
	m = known(4)
	m.Step(ReadResponse{Bookie: "b1", EntryID: -1, Body: dig.AppendEntry(nil, 7, 4, 3, 50, []byte("x"))})
	m.Step(ReadResponse{Bookie: "b2", EntryID: -1, Body: dig.AppendEntry(nil, 7, 5, 4, 60, []byte("x"))})
	if m.Done() {
		t.Fatal("answers at or below the known LAC ended the try read")
	}
	m.Step(ReadResponse{Bookie: "b3", EntryID: -1, Err: ErrTimeout})
	if res := result(m); res.Err != nil || res.LAC != 4 || res.Length != 60 {
		t.Fatalf("no answer above the known LAC: %+v", res)
	}
	// An answer above it ends the read at once.
	m = known(4)
	m.Step(ReadResponse{Bookie: "b1", EntryID: -1, Body: dig.AppendEntry(nil, 7, 4, 3, 50, []byte("x"))})
	m.Step(ReadResponse{Bookie: "b3", EntryID: -1, Body: dig.AppendEntry(nil, 7, 7, 6, 80, []byte("x"))})
	if res := result(m); res.Err != nil || res.LAC != 6 || res.Length != 80 {
		t.Fatalf("answer above the known LAC: %+v", res)
	}

	// Without Try, one answer is not enough (coverage needs two of three
	// write sets' worth here).
	m = NewReadLAC(ReadLACConfig{LedgerID: 7, Metadata: md, Verifier: dig})
	m.Start()
	m.Ready()
	m.Step(ReadResponse{Bookie: "b2", EntryID: -1, Body: dig.AppendEntry(nil, 7, 5, 4, 60, []byte("x"))})
	if m.Done() {
		t.Fatal("coverage read ended on one answer")
	}
}

// The backoff is monotone and reaches Max without overflow: a multiplier
// that makes no progress at a small interval adds a nanosecond instead of
// jumping to Max; one that would overflow gives Max.
func TestSpeculationNext(t *testing.T) {
	s := Speculation{First: time.Millisecond, Max: time.Hour, Multiplier: 1.0000001}
	if got := s.next(time.Millisecond); got != time.Millisecond+1 {
		t.Fatalf("next(1ms) with multiplier 1.0000001 = %v, want 1ms + 1ns", got)
	}
	s = Speculation{First: time.Millisecond, Max: time.Second, Multiplier: 1.5}
	cur, steps := s.First, 0
	for cur < s.Max {
		n := s.next(cur)
		if n <= cur || n > s.Max {
			t.Fatalf("next(%v) = %v", cur, n)
		}
		cur, steps = n, steps+1
	}
	if steps != 18 || s.next(cur) != s.Max {
		t.Fatalf("reached %v in %d steps", cur, steps)
	}
	huge := Speculation{First: time.Second, Max: math.MaxInt64, Multiplier: 1e300}
	if got := huge.next(time.Second); got != math.MaxInt64 {
		t.Fatalf("overflowing multiplier: %v", got)
	}
	big := Speculation{First: time.Second, Max: math.MaxInt64, Multiplier: 2}
	if got := big.next(math.MaxInt64 / 3 * 2); got != math.MaxInt64 {
		t.Fatalf("overflowing product: %v", got)
	}
	if got := (Speculation{Max: time.Second, Multiplier: 2}).next(0); got != 0 {
		t.Fatalf("speculation off: next(0) = %v", got)
	}
}
