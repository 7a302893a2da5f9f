package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
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
//   - disk full (see below);
//   - storage failed (store.Failed()): permanent for this process.
//
// Disk full is decided per directory, as BookKeeper's LedgerDirsMonitor
// does: a directory is full once its volume's used fraction reaches
// DiskUsageThreshold and stays full until it falls below
// DiskUsageLwmThreshold (hysteresis). A full ledger directory stops taking
// new entry logs (the store's SetLedgerDirFull: its shards' new logs spill
// into the others); the bookie is read-only for a full disk when every
// ledger directory is full, or any one with readOnlyModeOnAnyDiskFullEnabled,
// or any journal directory is full (a journal cannot move elsewhere). A
// store without per-directory figures (dirHealth) is judged on its
// fullest volume (storage.Store.DiskUsage) as one directory.
//
// Every change calls apply(readOnly) (the bookie's request gate and the
// registration). Check is the loop's body; Run calls it every
// DiskCheckInterval and when the store fails.
type StateManager struct {
	store     storage.Store
	high, low float64
	interval  time.Duration
	enabled   bool // readOnlyModeEnabled
	anyFull   bool // readOnlyModeOnAnyDiskFullEnabled
	// ledgerDirs and journalDirs name the directories by position, as
	// configured (the store's are their current/ subdirectories).
	ledgerDirs, journalDirs []string
	clock                   clock.Clock
	log                     *slog.Logger
	apply                   func(readOnly bool)
	// fatal is called instead of going read-only when read-only mode is
	// disabled (Java shuts the bookie down).
	fatal func(error)
	// pinned is forceReadOnlyBookie: forced for good.
	pinned bool
	// onDiskFull, if set, is told every disk check's verdict: whether the
	// bookie is read-only for a full disk (the store's compaction
	// suspends or forces itself then).
	onDiskFull func(full bool)

	// checkMu serialises Check, so that the store is told the directory
	// verdicts in the order they were reached.
	checkMu sync.Mutex

	mu struct {
		sync.Mutex
		forced, diskFull, failed bool
		readOnly                 bool
		applied                  bool // apply has been called at least once
		// dirs are the last disk check's verdicts: ledger directories in
		// position order, then journal directories.
		dirs []DirState
	}
}

// DirState is one directory's last disk check.
type DirState struct {
	// Dir is the directory as configured; Journal tells a journal
	// directory from a ledger directory; Position is its index among those.
	Dir      string
	Journal  bool
	Position int
	// Usage is the used fraction of the directory's volume (0 before the
	// first successful check).
	Usage float64
	// Full: above DiskUsageThreshold, and not yet below
	// DiskUsageLwmThreshold since.
	Full bool
}

// dirHealth is the store's per-directory side (ledgerstore.Store
// implements it).
type dirHealth interface {
	DirUsages() ([]ledgerstore.DirUsage, error)
	SetLedgerDirFull(position int, full bool)
}

// NewStateManager returns a manager; forced is the start-up mode.
func NewStateManager(store storage.Store, cfg *Config, forced bool, clk clock.Clock, log *slog.Logger, apply func(bool), fatal func(error)) *StateManager {
	if clk == nil {
		clk = clock.Real{}
	}
	m := &StateManager{
		store: store, high: cfg.DiskUsageThreshold, low: cfg.DiskUsageLwmThreshold,
		interval: cfg.DiskCheckInterval, enabled: cfg.ReadOnlyModeEnabled, anyFull: cfg.ReadOnlyModeOnAnyDiskFull,
		ledgerDirs: slices.Clone(cfg.LedgerDirs), journalDirs: slices.Clone(cfg.JournalDirs),
		clock: clk, log: log, apply: apply, fatal: fatal, pinned: cfg.ForceReadOnlyBookie,
	}
	m.mu.forced = forced || m.pinned
	if _, ok := store.(dirHealth); ok {
		for i, d := range m.ledgerDirs {
			m.mu.dirs = append(m.mu.dirs, DirState{Dir: d, Position: i})
		}
		for i, d := range m.journalDirs {
			m.mu.dirs = append(m.mu.dirs, DirState{Dir: d, Journal: true, Position: i})
		}
	} else {
		// One verdict for the store's fullest volume.
		m.mu.dirs = []DirState{{Dir: strings.Join(slices.Concat(m.ledgerDirs, m.journalDirs), ",")}}
	}
	return m
}

// Dirs returns the last disk check's verdicts: ledger directories in
// position order, then journal directories (for a store without
// per-directory figures, one entry for all).
func (m *StateManager) Dirs() []DirState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.dirs)
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
	m.checkMu.Lock()
	defer m.checkMu.Unlock()
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
	if usages, err := m.dirUsages(); err != nil {
		m.log.Warn("reading disk usage failed; the directories keep their last verdict", "err", err)
	} else {
		m.checkDirs(usages)
	}
	return m.update()
}

// dirUsages reads every directory's usage, in m.mu.dirs's order.
func (m *StateManager) dirUsages() ([]ledgerstore.DirUsage, error) {
	if dh, ok := m.store.(dirHealth); ok {
		return dh.DirUsages()
	}
	u, err := m.store.DiskUsage()
	if err != nil {
		return nil, err
	}
	return []ledgerstore.DirUsage{{Total: u.Total, Free: u.Free, Used: u.Used}}, nil
}

// checkDirs applies one disk check: each directory's verdict with the
// hysteresis, the store told of every ledger directory that turned full or
// writable, then the bookie's disk-full cause.
func (m *StateManager) checkDirs(usages []ledgerstore.DirUsage) {
	type change struct {
		d    DirState
		full bool
	}
	var changes []change
	m.mu.Lock()
	was := m.mu.diskFull
	for _, u := range usages {
		i := m.dirIndexLocked(u.Journal, u.Position)
		if i < 0 || u.Total == 0 {
			continue // a volume reporting no size: keep the last verdict
		}
		d := &m.mu.dirs[i]
		d.Usage = float64(u.Total-min(u.Free, u.Total)) / float64(u.Total)
		full := d.Full
		switch {
		case d.Usage >= m.high:
			full = true
		case d.Usage < m.low:
			full = false
		}
		if full != d.Full {
			d.Full = full
			changes = append(changes, change{*d, full})
		}
	}
	why := m.diskFullReasonLocked()
	m.mu.diskFull = why != ""
	writable := m.writableLedgerDirsLocked()
	verdicts := slices.Clone(m.mu.dirs)
	m.mu.Unlock()

	dh, _ := m.store.(dirHealth)
	if dh != nil {
		// Every check re-applies every ledger directory's verdict, not only
		// the changes: the store also marks a directory full on its own when
		// writing an entry log there fails with ENOSPC, and only a verdict
		// of "writable" clears that mark once space is free again (a
		// directory still short of space just fails its next log again,
		// which the store retries elsewhere).
		for _, d := range verdicts {
			if !d.Journal {
				dh.SetLedgerDirFull(d.Position, d.Full)
			}
		}
	}
	for _, c := range changes {
		kind := "ledger"
		if c.d.Journal {
			kind = "journal"
		}
		switch {
		case c.full && c.d.Journal:
			m.log.Warn("journal directory full", "dir", c.d.Dir, "used", c.d.Usage, "threshold", m.high)
		case c.full:
			m.log.Warn("ledger directory full: it takes no new entry logs; its ledgers' new entry logs go to the other ledger directories",
				"dir", c.d.Dir, "used", c.d.Usage, "threshold", m.high, "writableLedgerDirs", writable)
		default:
			m.log.Info(kind+" directory below the low-water mark: writable again", "dir", c.d.Dir, "used", c.d.Usage, "lwm", m.low)
		}
	}
	if m.onDiskFull != nil {
		m.onDiskFull(why != "")
	}
	switch {
	case why != "" && !was:
		m.log.Warn("disk full; the bookie turns read-only: "+why, "threshold", m.high)
		if !m.enabled && m.fatal != nil {
			m.fatal(errors.New("disk full (" + why + ") and readOnlyModeEnabled=false"))
		}
	case why == "" && was:
		m.log.Info("disk usage below the low-water mark; no longer read-only for a full disk", "lwm", m.low)
	}
}

// dirIndexLocked is the index in m.mu.dirs of the directory a DirUsage
// reports, -1 if unknown.
func (m *StateManager) dirIndexLocked(journal bool, position int) int {
	for i, d := range m.mu.dirs {
		if d.Journal == journal && d.Position == position {
			return i
		}
	}
	return -1
}

// diskFullReasonLocked says why the directories' verdicts make the bookie
// read-only, "" if they do not.
func (m *StateManager) diskFullReasonLocked() string {
	var fullLedger, fullJournal []string
	ledgers := 0
	for _, d := range m.mu.dirs {
		switch {
		case d.Journal && d.Full:
			fullJournal = append(fullJournal, d.Dir)
		case d.Journal:
		case d.Full:
			ledgers++
			fullLedger = append(fullLedger, d.Dir)
		default:
			ledgers++
		}
	}
	switch {
	case len(fullJournal) > 0:
		return "journal directory " + strings.Join(fullJournal, ", ") + " is full"
	case len(fullLedger) == 0:
		return ""
	case len(fullLedger) == ledgers:
		return "every ledger directory is full (" + strings.Join(fullLedger, ", ") + ")"
	case m.anyFull:
		return "ledger directory " + strings.Join(fullLedger, ", ") + " is full and readOnlyModeOnAnyDiskFullEnabled=true"
	}
	return ""
}

// writableLedgerDirsLocked counts the ledger directories that take new
// entry logs.
func (m *StateManager) writableLedgerDirsLocked() int {
	n := 0
	for _, d := range m.mu.dirs {
		if !d.Journal && !d.Full {
			n++
		}
	}
	return n
}

// WritableLedgerDirs is how many ledger directories take new entry logs
// (bookie_ledger_writable_dirs, BookKeeper's count of ledger directories
// not full). For a store without per-directory figures: all of them, or 0
// when its fullest volume is full.
func (m *StateManager) WritableLedgerDirs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.store.(dirHealth); !ok {
		if m.mu.dirs[0].Full {
			return 0
		}
		return len(m.ledgerDirs)
	}
	return m.writableLedgerDirsLocked()
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
