package memory

import (
	"context"
	"sync"
)

// watcher delivers events in order through a goroutine that owns out, so the
// store never blocks on a slow reader: the store appends under w.mu and
// signals; the goroutine forwards. The queue is unbounded (test and
// simulator use only). The goroutine exits and closes out when ctx ends, the
// driver handle closes (stop), or after a terminal event.
type watcher[T any] struct {
	out      chan T
	signal   chan struct{}
	stop     <-chan struct{}
	terminal func(T) bool

	mu struct {
		sync.Mutex
		queue   []T
		stopped bool
	}
}

func newWatcher[T any](ctx context.Context, stop <-chan struct{}, terminal func(T) bool) *watcher[T] {
	w := &watcher[T]{out: make(chan T), signal: make(chan struct{}, 1), stop: stop, terminal: terminal}
	go w.run(ctx)
	return w
}

// push queues ev; it reports false if the watcher has stopped (the store
// then forgets it).
func (w *watcher[T]) push(ev T) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.stopped {
		return false
	}
	w.mu.queue = append(w.mu.queue, ev)
	select {
	case w.signal <- struct{}{}:
	default:
	}
	return true
}

func (w *watcher[T]) alive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.mu.stopped
}

func (w *watcher[T]) run(ctx context.Context) {
	defer func() {
		w.mu.Lock()
		w.mu.stopped = true
		w.mu.queue = nil
		w.mu.Unlock()
		close(w.out)
	}()
	for {
		w.mu.Lock()
		if len(w.mu.queue) == 0 {
			w.mu.Unlock()
			select {
			case <-w.signal:
				continue
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			}
		}
		ev := w.mu.queue[0]
		w.mu.queue = w.mu.queue[1:]
		w.mu.Unlock()
		select {
		case w.out <- ev:
		case <-ctx.Done():
			return
		case <-w.stop:
			return
		}
		if w.terminal(ev) {
			return
		}
	}
}
