package client

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
)

// failingWatch is a metadata driver whose bookie watch cannot be
// restarted: each attempt is reported on calls and fails.
type failingWatch struct {
	metadata.Driver
	calls chan struct{}
}

func (d *failingWatch) WatchBookies(context.Context) (<-chan metadata.BookiesEvent, error) {
	d.calls <- struct{}{}
	return nil, errors.New("watch refused by the test")
}

// TestWatchBackoffOnClock: a failed bookie watch is restarted after a
// backoff that doubles from 100 ms, timed on the client's clock: with a
// manual clock, the restart comes when the clock reaches the backoff, and
// not a nanosecond before.
func TestWatchBackoffOnClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	md := memory.NewStore(memory.Options{}).Open()
	defer md.Close()
	d := &failingWatch{Driver: md, calls: make(chan struct{}, 1)}
	c := &Client{md: d, clock: clk, log: slog.New(slog.DiscardHandler)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	events := make(chan metadata.BookiesEvent, 1)
	events <- metadata.BookiesEvent{Err: errors.New("watch lost")}
	c.wg.Add(1)
	go c.watchBookies(events)
	defer func() {
		c.cancel()
		c.wg.Wait()
	}()

	for _, backoff := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		waitArmed(t, clk)
		clk.Advance(backoff - time.Nanosecond)
		select {
		case <-d.calls:
			t.Fatalf("watch restarted before its %v backoff", backoff)
		default:
		}
		clk.Advance(time.Nanosecond)
		select {
		case <-d.calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no restart within 10 s of the %v backoff passing", backoff)
		}
	}
}

// waitArmed polls until a timer is armed on clk (the watch's backoff), or
// fails after 10 s.
func waitArmed(t *testing.T, clk *clock.Manual) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers armed on the clock, want the backoff's", clk.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
}
