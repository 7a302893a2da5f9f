package standalone

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// watchers returns n watches that block until their context ends, counting
// how many ended, and one that fails with failure once fail is closed.
func watchers(n int, failure error, fail <-chan struct{}, ended *atomic.Int32) []func(context.Context) error {
	var w []func(context.Context) error
	for range n {
		w = append(w, func(ctx context.Context) error {
			<-ctx.Done()
			ended.Add(1)
			return nil
		})
	}
	return append(w, func(ctx context.Context) error {
		select {
		case <-fail:
			return failure
		case <-ctx.Done():
			ended.Add(1)
			return nil
		}
	})
}

// TestSuperviseEndsWatchersWhenAPartFails: when a part fails while Run's
// context is still live (Run returns the failure), every other supervisor
// goroutine has ended by the time supervise returns; none waits for a
// context that may never end. The parts are stand-ins: a real bookie or
// etcd cannot be made to fail on cue from here.
func TestSuperviseEndsWatchersWhenAPartFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	boom := errors.New("bookie 127.0.0.1:3181: listener died")
	fail := make(chan struct{})
	close(fail)
	var ended atomic.Int32
	err := supervise(context.Background(), watchers(3, boom, fail, &ended))
	if !errors.Is(err, boom) {
		t.Fatalf("supervise = %v, want %v", err, boom)
	}
	if n := ended.Load(); n != 3 {
		t.Fatalf("%d of 3 watchers ended before supervise returned", n)
	}
}

// TestSuperviseStopsOnContextEnd: ctx's end is a stop, not a failure, and
// also ends every watcher before supervise returns.
func TestSuperviseStopsOnContextEnd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ended atomic.Int32
	if err := supervise(ctx, watchers(2, errors.New("unused"), make(chan struct{}), &ended)); err != nil {
		t.Fatalf("supervise after ctx's end = %v, want nil", err)
	}
	if n := ended.Load(); n != 3 {
		t.Fatalf("%d of 3 watchers ended before supervise returned", n)
	}
}
