package clock

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Both implementations satisfy the interface.
var (
	_ Clock = Real{}
	_ Clock = (*Manual)(nil)
)

func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestManualTimerFiresAtDeadline(t *testing.T) {
	c := NewManual(epoch)
	tm := c.NewTimer(10 * time.Millisecond)
	if c.Waiters() != 1 {
		t.Fatalf("waiters %d, want 1", c.Waiters())
	}
	c.Advance(9 * time.Millisecond)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired before its deadline")
	}
	c.Advance(5 * time.Millisecond)
	v, ok := received(tm.C())
	if !ok || !v.Equal(epoch.Add(10*time.Millisecond)) {
		t.Fatalf("got %v %v, want the deadline", v, ok)
	}
	if !c.Now().Equal(epoch.Add(14 * time.Millisecond)) {
		t.Fatalf("now %v", c.Now())
	}
	if c.Waiters() != 0 || tm.Stop() {
		t.Fatal("a fired timer is still armed")
	}
}

func TestManualTimerZeroDelivers(t *testing.T) {
	c := NewManual(epoch)
	if _, ok := received(c.NewTimer(0).C()); !ok {
		t.Fatal("NewTimer(0) did not deliver at once")
	}
}

func TestManualStopAndReset(t *testing.T) {
	c := NewManual(epoch)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(2 * time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	// Reset after firing: no stale value, fires again at the new deadline.
	tm2 := c.NewTimer(time.Second)
	c.Advance(time.Second)
	if tm2.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it armed")
	}
	if _, ok := received(tm2.C()); ok {
		t.Fatal("stale value after Reset")
	}
	c.Advance(time.Second)
	if _, ok := received(tm2.C()); !ok {
		t.Fatal("a reset timer did not fire")
	}
	// Reset of an armed timer moves its deadline.
	tm3 := c.NewTimer(time.Second)
	if !tm3.Reset(3 * time.Second) {
		t.Fatal("Reset of an armed timer reported it idle")
	}
	c.Advance(2 * time.Second)
	if _, ok := received(tm3.C()); ok {
		t.Fatal("fired at the old deadline")
	}
	c.Advance(time.Second)
	if _, ok := received(tm3.C()); !ok {
		t.Fatal("did not fire at the new deadline")
	}
}

func TestManualAfterFuncOrder(t *testing.T) {
	c := NewManual(epoch)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+c.Now().Sub(epoch).String()) }
	}
	c.AfterFunc(3*time.Second, at("c"))
	c.AfterFunc(time.Second, at("a"))
	c.AfterFunc(time.Second, at("b")) // same deadline: arming order
	stopped := c.AfterFunc(2*time.Second, at("x"))
	// A callback that arms another, due within the same Advance.
	c.AfterFunc(1500*time.Millisecond, func() {
		got = append(got, "chain@"+c.Now().Sub(epoch).String())
		c.AfterFunc(time.Second, at("chained"))
	})
	stopped.Stop()
	c.Advance(10 * time.Second)
	want := []string{"a@1s", "b@1s", "chain@1.5s", "chained@2.5s", "c@3s"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if !c.Now().Equal(epoch.Add(10 * time.Second)) {
		t.Fatalf("now %v", c.Now())
	}
}

func TestManualAfterFuncZeroRunsAtAdvance(t *testing.T) {
	c := NewManual(epoch)
	ran := false
	c.AfterFunc(0, func() { ran = true })
	if ran {
		t.Fatal("AfterFunc(0) ran on the arming goroutine")
	}
	c.Advance(0)
	if !ran {
		t.Fatal("AfterFunc(0) did not run at Advance(0)")
	}
}

func TestManualTicker(t *testing.T) {
	c := NewManual(epoch)
	k := c.NewTicker(time.Second)
	c.Advance(time.Second)
	if v, ok := received(k.C()); !ok || !v.Equal(epoch.Add(time.Second)) {
		t.Fatalf("first tick %v %v", v, ok)
	}
	// Five periods unread: one tick waits, the rest are dropped.
	c.Advance(5 * time.Second)
	if _, ok := received(k.C()); !ok {
		t.Fatal("no tick")
	}
	if _, ok := received(k.C()); ok {
		t.Fatal("ticks queued up")
	}
	k.Reset(3 * time.Second)
	c.Advance(2 * time.Second)
	if _, ok := received(k.C()); ok {
		t.Fatal("ticked before the new period")
	}
	c.Advance(time.Second)
	if _, ok := received(k.C()); !ok {
		t.Fatal("no tick after the new period")
	}
	k.Stop()
	c.Advance(10 * time.Second)
	if _, ok := received(k.C()); ok || c.Waiters() != 0 {
		t.Fatal("a stopped ticker ticked")
	}
}

// A goroutine waiting on a Manual timer is woken by Advance: the pattern
// the components' loops use under test.
func TestManualWakesWaiter(t *testing.T) {
	c := NewManual(epoch)
	done := make(chan time.Time)
	go func() {
		tm := c.NewTimer(time.Minute)
		defer tm.Stop()
		done <- <-tm.C()
	}()
	for c.Waiters() == 0 {
		runtime.Gosched() // the goroutine arms on its own schedule
	}
	c.Advance(time.Minute)
	if v := <-done; !v.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("woke at %v", v)
	}
}

func TestRealTimers(t *testing.T) {
	var c Clock = Real{}
	fired := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(fired) })
	<-fired
	<-c.NewTimer(time.Millisecond).C()
	k := c.NewTicker(time.Millisecond)
	<-k.C()
	k.Stop()
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of an armed real timer returned false")
	}
}

// Arming, stopping and resetting from many goroutines while another
// advances the clock (run with -race): every waiter wakes, nothing fires
// after Stop reported it stopped.
func TestManualConcurrent(t *testing.T) {
	c := NewManual(epoch)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			tm := c.NewTimer(time.Duration(i+1) * time.Millisecond)
			<-tm.C()
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				var fired atomic.Bool
				tm := c.AfterFunc(time.Millisecond, func() { fired.Store(true) })
				if tm.Stop() && fired.Load() {
					t.Error("a callback ran although Stop stopped it")
				}
				tm.Reset(time.Hour)
				tm.Stop()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		default:
			c.Advance(time.Millisecond)
			runtime.Gosched()
		}
	}
}
