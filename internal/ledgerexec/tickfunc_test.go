package ledgerexec

import (
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger"
)

// tickMachine wants a Tick after each of intervals in turn, and is done
// after doneAfter Ticks (0: never).
type tickMachine struct {
	clk       *clock.Manual
	start     time.Time
	intervals []time.Duration
	doneAfter int
	at        []time.Duration // when each Tick came, from start
}

func (m *tickMachine) Step(ev ledger.Event) {
	if _, ok := ev.(ledger.Tick); !ok {
		panic("tickMachine steps only Ticks")
	}
	m.at = append(m.at, m.clk.Now().Sub(m.start))
}
func (m *tickMachine) Ready() []ledger.Effect { return nil }
func (m *tickMachine) Done() bool             { return m.doneAfter > 0 && len(m.at) >= m.doneAfter }
func (m *tickMachine) TickInterval() time.Duration {
	if len(m.at) < len(m.intervals) {
		return m.intervals[len(m.at)]
	}
	return m.intervals[len(m.intervals)-1]
}

// TestTickFunc: Ticks come at the machine's intervals, read again after
// each Tick (backoff), and stop when the machine is done, when its
// interval becomes zero, or at Stop.
func TestTickFunc(t *testing.T) {
	ms := time.Millisecond
	start := time.Unix(0, 0)
	run := func(m *tickMachine, advance time.Duration) *TickFunc {
		m.clk, m.start = clock.NewManual(start), start
		tf := NewTickFunc(m.clk, m, func() { m.Step(ledger.Tick{}) })
		for range advance / ms {
			m.clk.Advance(ms)
		}
		return tf
	}

	backoff := &tickMachine{intervals: []time.Duration{10 * ms, 20 * ms, 40 * ms}, doneAfter: 4}
	run(backoff, time.Second)
	if want := []time.Duration{10 * ms, 30 * ms, 70 * ms, 110 * ms}; !slices.Equal(backoff.at, want) {
		t.Errorf("backoff ticks at %v, want %v (none after done)", backoff.at, want)
	}
	if n := backoff.clk.Waiters(); n != 0 {
		t.Errorf("%d timers armed after the machine is done", n)
	}

	zero := &tickMachine{intervals: []time.Duration{5 * ms, 0}}
	run(zero, time.Second)
	if want := []time.Duration{5 * ms}; !slices.Equal(zero.at, want) {
		t.Errorf("ticks at %v, want %v (none after a zero interval)", zero.at, want)
	}

	stopped := &tickMachine{intervals: []time.Duration{10 * ms}}
	tf := run(stopped, 25*ms)
	tf.Stop()
	stopped.clk.Advance(time.Second)
	if want := []time.Duration{10 * ms, 20 * ms}; !slices.Equal(stopped.at, want) {
		t.Errorf("ticks at %v, want %v (none after Stop)", stopped.at, want)
	}

	never := &tickMachine{intervals: []time.Duration{0}}
	run(never, time.Second)
	if len(never.at) != 0 || never.clk.Waiters() != 0 {
		t.Errorf("a zero TickInterval ticked %v", never.at)
	}
}
