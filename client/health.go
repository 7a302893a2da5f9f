package client

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// slowBookiePenalty is how long a bookie that was slow (left behind by a
// speculative read) or failed a read is asked last by reads.
const slowBookiePenalty = 30 * time.Second

// bookieHealth remembers bookies that were recently slow or failing, so
// that reads ask their other replicas first (Java's reorderReadSequence),
// and, with Config.EnableBookieHealthCheck, quarantines bookies that fail
// too often (Java's bookie health check) so placement avoids them.
type bookieHealth struct {
	mu   sync.Mutex
	slow map[metadata.BookieID]time.Time // until

	// Quarantine, timed on the client's clock.
	clock      clock.Clock
	enabled    bool
	start      time.Time     // origin of the check intervals
	interval   time.Duration // Config.BookieHealthCheckInterval
	threshold  int           // Config.BookieErrorThresholdPerInterval
	quarantine time.Duration // Config.BookieQuarantineTime
	errs       map[metadata.BookieID]errorWindow
	held       map[metadata.BookieID]time.Time // quarantined until
	log        func(b metadata.BookieID, errs int, until time.Time)
}

// errorWindow counts a bookie's errors in check interval n.
type errorWindow struct {
	n     int64
	count int
}

func newBookieHealth(cfg Config) *bookieHealth {
	h := &bookieHealth{slow: map[metadata.BookieID]time.Time{},
		clock: cfg.clock, enabled: cfg.EnableBookieHealthCheck, interval: cfg.BookieHealthCheckInterval,
		threshold: cfg.BookieErrorThresholdPerInterval, quarantine: cfg.BookieQuarantineTime,
		errs: map[metadata.BookieID]errorWindow{}, held: map[metadata.BookieID]time.Time{}}
	if h.clock == nil {
		h.clock = clock.Real{}
	}
	h.start = h.clock.Now()
	if lg := cfg.Logger; lg != nil {
		h.log = func(b metadata.BookieID, errs int, until time.Time) {
			lg.Warn("bookie quarantined: placement avoids it", "bookie", b, "errors", errs, "interval", h.interval, "until", until)
		}
	}
	return h
}

// recordError counts a failed request to b (Java's recordError: errors
// other than the expected ones of the protocol). When b reaches the
// threshold within one check interval it is quarantined for the
// quarantine time from now. A no-op unless the health check is enabled.
func (h *bookieHealth) recordError(b metadata.BookieID) {
	if !h.enabled {
		return
	}
	now := h.clock.Now()
	n := int64(now.Sub(h.start) / h.interval)
	h.mu.Lock()
	// Counts of past intervals are dead: drop them, so errs holds only
	// the bookies that failed in this interval.
	maps.DeleteFunc(h.errs, func(_ metadata.BookieID, w errorWindow) bool { return w.n != n })
	w, ok := h.errs[b]
	if !ok {
		w = errorWindow{n: n}
	}
	w.count++
	h.errs[b] = w
	var until time.Time
	if w.count == h.threshold {
		until = now.Add(h.quarantine)
		h.held[b] = until
	}
	h.mu.Unlock()
	if !until.IsZero() && h.log != nil {
		h.log(b, w.count, until)
	}
}

// prune forgets the state of bookies that are no longer registered
// (issue 22 §4: per-bookie client state does not outlive the bookie's
// membership) and expired entries: error counts and quarantines of
// bookies neither writable nor read-only, ended quarantines and slowness.
func (h *bookieHealth) prune(writable, readOnly []metadata.BookieID) {
	registered := func(b metadata.BookieID) bool {
		return slices.Contains(writable, b) || slices.Contains(readOnly, b)
	}
	now := h.clock.Now()
	wall := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	maps.DeleteFunc(h.errs, func(b metadata.BookieID, _ errorWindow) bool { return !registered(b) })
	maps.DeleteFunc(h.held, func(b metadata.BookieID, until time.Time) bool { return !registered(b) || !now.Before(until) })
	maps.DeleteFunc(h.slow, func(b metadata.BookieID, until time.Time) bool { return !registered(b) || wall.After(until) })
}

// size is the number of bookies with state (tests).
func (h *bookieHealth) size() (errs, held, slow int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.errs), len(h.held), len(h.slow)
}

// quarantined reports whether b is quarantined now: the live form
// placement policies get, so a writer's later replacements see
// quarantines that came after it was opened. This is the one impure input
// of a placement policy (placement.Config.Avoid): it reads the client's
// clock and this shared state, under h.mu, when a policy places. A
// policy's choice still depends only on its inputs at that moment; the
// deterministic simulator, which builds its policies without Avoid, is
// unaffected.
func (h *bookieHealth) quarantined(b metadata.BookieID) bool {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.held[b]
	if ok && !now.Before(until) {
		delete(h.held, b)
		return false
	}
	return ok
}

// countsAsError reports whether a bookie's answer counts towards its
// quarantine: as Java's, every failure but the expected ones (no such
// entry or ledger, fenced, read-only, and connection failures, which Java
// counts only with bookieConnectionErrorQuarantineEnabled), and requests
// failed by the client's own Close (transport.ErrClosed), which say
// nothing about the bookie.
func countsAsError(resp *wire.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, transport.ErrBookieUnavailable) && !errors.Is(err, transport.ErrClosed)
	}
	switch resp.Status {
	case wire.StatusOK, wire.StatusNoEntry, wire.StatusNoLedger, wire.StatusFenced, wire.StatusReadOnly:
		return false
	}
	return true
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
