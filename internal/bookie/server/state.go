package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// ErrStorageFailed refuses to make a bookie writable after its storage
// failed: only a restart (after the operator fixed the disk) clears it.
var ErrStorageFailed = errors.New("storage failed; the bookie stays read-only until restarted")

// ErrForceReadOnly refuses to make a bookie started with
// forceReadOnlyBookie=true writable (Java's answer).
var ErrForceReadOnly = errors.New("bookie is in forceReadOnly mode, cannot transit to writable mode")

// StateManager decides whether the bookie is read-only (spec/protocol.md
// §6.9) from three causes, any of which makes it so:
//   - forced: an admin request (HTTP PUT .../state/readonly),
//     readOnlyModeOnStartup, or forceReadOnlyBookie (which no request
//     clears: the bookie is read-only for the life of the process);
//   - disk full: used/total above DiskUsageThreshold; cleared when usage
//     falls below DiskUsageLwmThreshold (hysteresis);
//   - storage failed (store.Failed()): permanent for this process.
//
// Every change calls apply(readOnly) (the bookie's request gate and the
// registration). Check is the loop's body; Run calls it every
// DiskCheckInterval and when the store fails.
type StateManager struct {
	store     storage.Store
	high, low float64
	interval  time.Duration
	enabled   bool // readOnlyModeEnabled
	clock     clock.Clock
	log       *slog.Logger
	apply     func(readOnly bool)
	// fatal is called instead of going read-only when read-only mode is
	// disabled (Java shuts the bookie down).
	fatal func(error)
	// pinned is forceReadOnlyBookie: forced for good.
	pinned bool
	// onDiskFull, if set, is told every disk check's verdict (the store's
	// compaction suspends or forces itself on a full disk).
	onDiskFull func(full bool)

	mu struct {
		sync.Mutex
		forced, diskFull, failed bool
		readOnly                 bool
		applied                  bool // apply has been called at least once
	}
}

// NewStateManager returns a manager; forced is the start-up mode.
func NewStateManager(store storage.Store, cfg *Config, forced bool, clk clock.Clock, log *slog.Logger, apply func(bool), fatal func(error)) *StateManager {
	if clk == nil {
		clk = clock.Real{}
	}
	m := &StateManager{
		store: store, high: cfg.DiskUsageThreshold, low: cfg.DiskUsageLwmThreshold,
		interval: cfg.DiskCheckInterval, enabled: cfg.ReadOnlyModeEnabled,
		clock: clk, log: log, apply: apply, fatal: fatal, pinned: cfg.ForceReadOnlyBookie,
	}
	m.mu.forced = forced || m.pinned
	return m
}

// ReadOnly reports the current mode.
func (m *StateManager) ReadOnly() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.readOnly
}

// causesLocked is Causes for apply, which runs under the manager's lock.
func (m *StateManager) causesLocked() (forced, diskFull, failed bool) {
	return m.mu.forced, m.mu.diskFull, m.mu.failed
}

// Causes reports why the bookie is read-only.
func (m *StateManager) Causes() (forced, diskFull, failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.forced, m.mu.diskFull, m.mu.failed
}

// OnDiskFull registers fn to be told every disk check's verdict; call it
// before Run.
func (m *StateManager) OnDiskFull(fn func(full bool)) { m.onDiskFull = fn }

// SetForced sets or clears the admin's read-only request and returns the
// resulting mode. Clearing it leaves the bookie read-only while another
// cause holds; ErrStorageFailed then says so when the storage failed.
// With forceReadOnlyBookie nothing clears it: ErrForceReadOnly.
func (m *StateManager) SetForced(readOnly bool) (bool, error) {
	if !readOnly && m.pinned {
		return m.update(), ErrForceReadOnly
	}
	m.mu.Lock()
	m.mu.forced = readOnly
	failed := m.mu.failed
	m.mu.Unlock()
	ro := m.update()
	if !readOnly && failed {
		return ro, ErrStorageFailed
	}
	return ro, nil
}

// Check reads the disk usage and the store's health and updates the mode:
// the loop's body.
func (m *StateManager) Check() bool {
	select {
	case <-m.store.Failed():
		m.mu.Lock()
		first := !m.mu.failed
		m.mu.failed = true
		m.mu.Unlock()
		if first {
			m.log.Error("storage failed; the bookie turns read-only", "err", m.store.Err())
			if !m.enabled && m.fatal != nil {
				m.fatal(m.store.Err())
			}
		}
	default:
	}
	if u, err := m.store.DiskUsage(); err != nil {
		m.log.Warn("reading disk usage failed", "err", err)
	} else if u.Total > 0 {
		used := float64(u.Total-min(u.Free, u.Total)) / float64(u.Total)
		m.mu.Lock()
		was := m.mu.diskFull
		switch {
		case used >= m.high:
			m.mu.diskFull = true
		case used < m.low:
			m.mu.diskFull = false
		}
		full := m.mu.diskFull
		m.mu.Unlock()
		if m.onDiskFull != nil {
			m.onDiskFull(full)
		}
		if full && !was {
			m.log.Warn("disk usage above threshold; the bookie turns read-only", "used", used, "threshold", m.high)
			if !m.enabled && m.fatal != nil {
				m.fatal(errors.New("disk full and readOnlyModeEnabled=false"))
			}
		} else if !full && was {
			m.log.Info("disk usage below the low-water mark", "used", used, "lwm", m.low)
		}
	}
	return m.update()
}

// update recomputes the mode and applies a change.
func (m *StateManager) update() bool {
	m.mu.Lock()
	ro := m.mu.forced || m.mu.diskFull || m.mu.failed
	changed := !m.mu.applied || ro != m.mu.readOnly
	m.mu.readOnly, m.mu.applied = ro, true
	// apply runs under the lock so that two updates cannot apply their
	// results out of order; apply must not call back into the manager.
	if changed && m.apply != nil {
		m.apply(ro)
	}
	m.mu.Unlock()
	return ro
}

// Run checks at once, then every interval and whenever the store fails,
// until ctx is cancelled.
func (m *StateManager) Run(ctx context.Context) {
	failed := m.store.Failed()
	t := m.clock.NewTimer(m.interval)
	defer t.Stop()
	for {
		m.Check()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-failed:
			failed = nil // once
		}
		t.Reset(m.interval)
	}
}
