package client

import (
	"sync"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// slowBookiePenalty is how long a bookie that was slow (left behind by a
// speculative read) or failed a read is asked last by reads.
const slowBookiePenalty = 30 * time.Second

// bookieHealth remembers bookies that were recently slow or failing, so
// that reads ask their other replicas first (Java's reorderReadSequence).
type bookieHealth struct {
	mu   sync.Mutex
	slow map[metadata.BookieID]time.Time // until
}

func newBookieHealth() *bookieHealth {
	return &bookieHealth{slow: map[metadata.BookieID]time.Time{}}
}

func (h *bookieHealth) markSlow(b metadata.BookieID) {
	h.mu.Lock()
	h.slow[b] = time.Now().Add(slowBookiePenalty)
	h.mu.Unlock()
}

func (h *bookieHealth) markOK(b metadata.BookieID) {
	h.mu.Lock()
	delete(h.slow, b)
	h.mu.Unlock()
}

// avoidSet returns a snapshot of the bookies to ask last, as a pure
// function for the read machine (nil when there are none).
func (h *bookieHealth) avoidSet() func(metadata.BookieID) bool {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var set map[metadata.BookieID]bool
	for b, until := range h.slow {
		if now.After(until) {
			delete(h.slow, b)
			continue
		}
		if set == nil {
			set = map[metadata.BookieID]bool{}
		}
		set[b] = true
	}
	if set == nil {
		return nil
	}
	return func(b metadata.BookieID) bool { return set[b] }
}
