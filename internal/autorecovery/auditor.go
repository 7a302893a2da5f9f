// Package autorecovery is Folio's AutoRecovery (spec/protocol.md §6): the
// Auditor, elected once per cluster, which finds ledgers with data on lost
// bookies, and (periodic ledger check, rereplication.LedgerChecker) ledgers
// whose registered bookies lack entries, and marks them under-replicated;
// and the ReplicationWorker, which takes the lock on an under-replicated
// ledger, copies its fragments from lost or bad bookies to replacements
// the client's placement policy chooses (rereplication.Replicator) and
// clears the record only if its version is unchanged. Optionally the auditor also checks ensembles against the
// placement policy, and workers move data to fix them.
//
// Both keep their state in the metadata store (metadata.AutoRecoveryDriver):
// locks and the election are tied to sessions (leases), so a crashed process
// loses them and another takes over. Their decisions are in steppable parts
// (bookieTracker, Worker.Step) driven by an injected clock.
package autorecovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// Defaults of AuditorConfig (BookKeeper's).
const (
	DefaultLostBookieRecoveryDelay = 0
	DefaultBookieCheckInterval     = 86400 * time.Second
	DefaultLedgerCheckInterval     = 604800 * time.Second
	DefaultSessionTTL              = metadata.DefaultSessionTTL
	// DefaultRetryInterval is how long a loop waits after a metadata error.
	DefaultRetryInterval = time.Second
)

// AuditorConfig configures an Auditor. Zero values take the defaults.
type AuditorConfig struct {
	// Driver is the metadata store; it must implement
	// metadata.AutoRecoveryDriver.
	Driver metadata.Driver
	// ID names this candidate in the election (whoisauditor shows it).
	ID metadata.BookieID
	// Clock drives delays and periodic checks; nil means the wall clock.
	Clock clock.Clock
	// SessionTTL is the lease TTL of the election session.
	SessionTTL time.Duration
	// LostBookieRecoveryDelay is used while none is stored in the metadata
	// (`lostbookierecoverydelay --set` stores one); default 0.
	LostBookieRecoveryDelay time.Duration
	// BookieCheckInterval is the period of the full bookie check
	// (auditorPeriodicBookieCheckInterval); < 0 disables it.
	BookieCheckInterval time.Duration
	// LedgerCheckInterval is the period of the check of every ledger's
	// entries on their bookies (auditorPeriodicCheckInterval, BookKeeper's
	// LedgerChecker); < 0 disables it. The interval runs from the last
	// completion stored in the metadata, whichever auditor ran it: a newly
	// elected auditor waits only for what is left of it, and runs the
	// check at once if none is stored (as BookKeeper does).
	LedgerCheckInterval time.Duration
	// LedgerVerificationPercentage is the share of each bookie's entries in
	// a fragment that the ledger check reads
	// (auditorLedgerVerificationPercentage); 0 reads only the first and last.
	LedgerVerificationPercentage int
	// LedgerCheckConcurrency is how many ledgers the ledger and placement
	// checks handle at a time; ≤ 0 means DefaultLedgerCheckConcurrency.
	LedgerCheckConcurrency int
	// Bookies reads entries for the ledger check; nil: each check opens
	// its own connections and closes them when done.
	Bookies *rereplication.Bookies
	// PlacementPolicyCheckInterval is the period of the placement policy
	// check of closed ledgers
	// (auditorPeriodicPlacementPolicyCheckInterval); 0 (the default) or < 0
	// disables it. Scheduled from the stored last completion, as
	// LedgerCheckInterval.
	PlacementPolicyCheckInterval time.Duration
	// PlacementPolicy judges ensembles in the placement check, e.g. a
	// placement.RackAware with the cluster's rack locations; nil means
	// placement.Random's rule (distinct bookies).
	PlacementPolicy placement.AdherenceChecker
	// RepairPlacement makes the placement check mark ledgers that do not
	// adhere (listing the bookies to move) when the writable bookies allow
	// a compliant placement (repairedPlacementPolicyNotAdheringBookieEnable;
	// default false). Workers need the same PlacementPolicy and
	// RepairPlacement to move them; otherwise they clear such records.
	RepairPlacement bool
	// RetryInterval is the pause after a metadata error.
	RetryInterval time.Duration
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// Metrics, if not nil, records elections and audits.
	Metrics *Metrics
}

func (c *AuditorConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.BookieCheckInterval == 0 {
		c.BookieCheckInterval = DefaultBookieCheckInterval
	}
	if c.LedgerCheckInterval == 0 {
		c.LedgerCheckInterval = DefaultLedgerCheckInterval
	}
	if c.PlacementPolicy == nil {
		c.PlacementPolicy = placement.NewRandom(rand.NewPCG(0, 0)) // Adheres draws nothing
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Auditor watches bookie membership while it is the elected auditor and
// marks the ledgers of lost bookies under-replicated.
type Auditor struct {
	cfg AuditorConfig
	ar  metadata.AutoRecoveryDriver
	log *slog.Logger
}

// NewAuditor returns an Auditor; metadata.ErrNotSupported if the driver
// has no AutoRecovery support.
func NewAuditor(cfg AuditorConfig) (*Auditor, error) {
	cfg.setDefaults()
	ar, ok := cfg.Driver.(metadata.AutoRecoveryDriver)
	if !ok {
		return nil, fmt.Errorf("auditor: %w", metadata.ErrNotSupported)
	}
	if err := metadata.ValidateBookieID(cfg.ID); err != nil {
		return nil, fmt.Errorf("auditor id: %w", err)
	}
	return &Auditor{cfg: cfg, ar: ar, log: cfg.Logger.With("component", "auditor", "id", cfg.ID)}, nil
}

// Run campaigns for auditor and audits while elected, again after losing
// the session, until ctx ends (then it returns ctx's error).
func (a *Auditor) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := a.runSession(ctx)
		if ctx.Err() != nil {
			break
		}
		a.log.Warn("auditor session ended", "err", err)
		_ = clock.Sleep(ctx, a.cfg.Clock, a.cfg.RetryInterval)
	}
	return ctx.Err()
}

func (a *Auditor) runSession(ctx context.Context) error {
	s, err := a.cfg.Driver.OpenSession(ctx, metadata.SessionOptions{TTL: a.cfg.SessionTTL})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Close(cctx)
	}()
	lead, err := a.ar.CampaignAuditor(ctx, s, a.cfg.ID)
	if err != nil {
		return err
	}
	a.log.Info("elected auditor")
	a.cfg.Metrics.setAuditor(true)
	defer a.cfg.Metrics.setAuditor(false)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lead.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	err = a.lead(lctx)
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = lead.Unlock(uctx)
	ucancel()
	if err == nil || lctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("lost auditor leadership: %w", err)
	}
	return err
}

// bookieTracker is the lost-bookie state machine (spec §6.2), free of I/O:
// feed it membership and delay changes; it says when to audit.
type bookieTracker struct {
	delay    time.Duration
	known    map[metadata.BookieID]bool // available at the last membership; nil before the first
	pending  map[metadata.BookieID]bool // lost, waiting for the delay
	deadline time.Time                  // of the delayed audit; zero: none
}

func newBookieTracker(delay time.Duration) *bookieTracker {
	return &bookieTracker{delay: delay, pending: map[metadata.BookieID]bool{}}
}

// membership records the available bookies (writable and read-only); it
// reports whether to audit now.
func (t *bookieTracker) membership(now time.Time, avail []metadata.BookieID) (auditNow bool) {
	isAvail := map[metadata.BookieID]bool{}
	for _, b := range avail {
		isAvail[b] = true
	}
	var newlyLost []metadata.BookieID
	for b := range t.known {
		if !isAvail[b] {
			newlyLost = append(newlyLost, b)
		}
	}
	t.known = isAvail
	for b := range t.pending {
		if isAvail[b] {
			delete(t.pending, b) // came back within the delay (rolling restart)
		}
	}
	for _, b := range newlyLost {
		t.pending[b] = true
	}
	switch {
	case len(t.pending) == 0:
		t.deadline = time.Time{}
		return false
	case len(newlyLost) == 0:
		return false
	case t.delay == 0 || len(t.pending) > 1:
		return true
	case t.deadline.Before(now.Add(t.delay)):
		// Also postpones an earlier audit (a new auditor's first), so the
		// bookie gets its full delay.
		t.deadline = now.Add(t.delay)
	}
	return false
}

// firstMembership records a new auditor's first view of the available
// bookies. It knows no history: what the ledgers reference and is not
// available is lost now; it reports whether to audit at once (a zero
// delay), else the audit is scheduled a delay later.
func (t *bookieTracker) firstMembership(now time.Time, avail []metadata.BookieID) (auditNow bool) {
	t.known = map[metadata.BookieID]bool{}
	for _, b := range avail {
		t.known[b] = true
	}
	if t.delay == 0 {
		return true
	}
	t.deadline = now.Add(t.delay)
	return false
}

// delayChanged applies a new stored delay: the same value again or 0 means
// audit now; another value reschedules a pending delayed audit.
func (t *bookieTracker) delayChanged(now time.Time, d time.Duration) (auditNow bool) {
	old := t.delay
	t.delay = d
	if d == 0 || d == old {
		return true
	}
	if !t.deadline.IsZero() {
		t.deadline = now.Add(d)
	}
	return false
}

// due reports whether a delayed audit is due at now.
func (t *bookieTracker) due(now time.Time) bool {
	return !t.deadline.IsZero() && !now.Before(t.deadline)
}

// audited records that an audit ran: nothing is pending any more.
func (t *bookieTracker) audited() {
	clear(t.pending)
	t.deadline = time.Time{}
}

func union(a, b []metadata.BookieID) []metadata.BookieID {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// lead runs the elected auditor until ctx ends or a watch fails. The
// ledger and placement checks run on their own goroutines (a check of all
// ledgers may take hours and must not hold up the bookie check); they stop
// with lead.
func (a *Auditor) lead(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var checks sync.WaitGroup
	defer checks.Wait()
	defer cancel()
	a.startPeriodicChecks(ctx, &checks)
	bch, err := a.cfg.Driver.WatchBookies(ctx)
	if err != nil {
		return err
	}
	dch, err := a.ar.WatchLostBookieRecoveryDelay(ctx)
	if err != nil {
		return err
	}
	t := newBookieTracker(a.cfg.LostBookieRecoveryDelay)
	if err := readStoredDelay(ctx, dch, t); err != nil {
		return err
	}
	return a.trackBookies(ctx, t, bch, dch)
}

// startPeriodicChecks starts the configured ledger and placement checks on
// goroutines of checks; they end with ctx.
func (a *Auditor) startPeriodicChecks(ctx context.Context, checks *sync.WaitGroup) {
	if d := a.cfg.LedgerCheckInterval; d > 0 {
		checks.Go(func() {
			// A skipped check (replication disabled) is not recorded, as in
			// BookKeeper: the next auditor goes by the last real run.
			a.every(ctx, metadata.LedgerCheck, d, func() (bool, error) {
				res, err := a.CheckAllLedgers(ctx)
				return err == nil && !res.Skipped, err
			})
		})
	}
	if d := a.cfg.PlacementPolicyCheckInterval; d > 0 {
		checks.Go(func() {
			// Skipped here only means nothing was marked; the check ran.
			a.every(ctx, metadata.PlacementPolicyCheck, d, func() (bool, error) {
				_, err := a.CheckPlacement(ctx)
				return err == nil, err
			})
		})
	}
}

// readStoredDelay takes the delay watch's first event, the current stored
// value, into t.
func readStoredDelay(ctx context.Context, dch <-chan metadata.DelayEvent, t *bookieTracker) error {
	select {
	case ev, ok := <-dch:
		if !ok || ev.Err != nil {
			return fmt.Errorf("delay watch ended: %v", ev.Err)
		}
		if ev.Set {
			t.delay = ev.Delay
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// trackBookies feeds the bookie and delay watches and the clock to t, and
// audits whenever t says so or the periodic bookie check is due, until ctx
// ends or a watch fails.
func (a *Auditor) trackBookies(ctx context.Context, t *bookieTracker, bch <-chan metadata.BookiesEvent, dch <-chan metadata.DelayEvent) error {
	clk := a.cfg.Clock
	auditNow := false
	var wake <-chan time.Time
	var wakeTimer clock.Timer
	defer func() {
		if wakeTimer != nil {
			wakeTimer.Stop()
		}
	}()
	var periodic <-chan time.Time
	var periodicTimer clock.Timer
	if a.cfg.BookieCheckInterval > 0 {
		periodicTimer = clk.NewTimer(a.cfg.BookieCheckInterval)
		defer periodicTimer.Stop()
		periodic = periodicTimer.C()
	}
	for {
		if auditNow {
			if err := a.auditLost(ctx, t); err != nil {
				return err
			}
			auditNow = false
		}
		wake = nil
		switch {
		case t.deadline.IsZero():
			if wakeTimer != nil {
				wakeTimer.Stop()
			}
		case wakeTimer == nil:
			wakeTimer = clk.NewTimer(t.deadline.Sub(clk.Now()))
			wake = wakeTimer.C()
		default:
			wakeTimer.Reset(t.deadline.Sub(clk.Now()))
			wake = wakeTimer.C()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-bch:
			if !ok || ev.Err != nil {
				return fmt.Errorf("bookie watch ended: %v", ev.Err)
			}
			avail := union(ev.Writable, ev.ReadOnly)
			if t.known == nil {
				auditNow = t.firstMembership(clk.Now(), avail)
				continue
			}
			auditNow = t.membership(clk.Now(), avail)
		case ev, ok := <-dch:
			if !ok || ev.Err != nil {
				return fmt.Errorf("delay watch ended: %v", ev.Err)
			}
			d := a.cfg.LostBookieRecoveryDelay
			if ev.Set {
				d = ev.Delay
			}
			auditNow = t.delayChanged(clk.Now(), d)
		case <-wake:
			auditNow = t.due(clk.Now())
		case <-periodic:
			periodicTimer.Reset(a.cfg.BookieCheckInterval)
			// Skipped while a delayed audit is pending, so the delay holds.
			auditNow = t.deadline.IsZero()
		}
	}
}

// auditLost runs one audit of the ledgers on lost bookies and records it in
// t and the metrics. A failed audit is retried RetryInterval later; the
// error is only ctx's.
func (a *Auditor) auditLost(ctx context.Context, t *bookieTracker) error {
	clk := a.cfg.Clock
	// Bookies the tracker still sees as available count as such, even if
	// they left the store a moment ago: their own membership event (and
	// delay) decides about them.
	known := t.known
	start := clk.Now()
	res, err := audit(ctx, a.cfg.Driver, a.ar, a.log, func(b metadata.BookieID) bool { return known[b] })
	if ctx.Err() == nil {
		a.cfg.Metrics.audited(len(res.Marked), clk.Now().Sub(start), err)
		a.countUnderReplicated(ctx)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		a.log.Warn("audit failed; retrying", "err", err)
		t.deadline = clk.Now().Add(a.cfg.RetryInterval)
	default:
		t.audited()
	}
	return nil
}

// every calls run, one periodic check, while this auditor leads (until ctx
// ends): first when what is left of the interval since the check's last
// completion stored in the metadata has passed (firstCheckWait), then an
// interval after each run. A failed run is retried after RetryInterval.
// After a run that completed (run reports true) its completion time is
// stored, so that the next auditor, after a failover, keeps to the
// schedule; a failed store is logged, never fatal (the next auditor then
// goes by the previous time, and runs the check early).
//
// Ledgers the ledger check could not read (LedgerCheckResult.Failed) do
// not stop the time being stored; BookKeeper's check fails as a whole on
// such a ledger and stores nothing, so that with a permanently unreadable
// ledger every new auditor would start the (hours-long) check again.
func (a *Auditor) every(ctx context.Context, check metadata.PeriodicCheck, interval time.Duration, run func() (completed bool, err error)) {
	clk := a.cfg.Clock
	last, err := a.ar.LastCheckTime(ctx, check)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// BookKeeper too takes an unreadable time (store unavailable,
		// value that does not parse) for "never"; the next completed run
		// overwrites it.
		a.log.Warn("cannot read the last "+check.String()+" time; running it now", "err", err)
		last = time.Time{}
	}
	wait := firstCheckWait(clk.Now(), last, interval)
	a.log.Info("scheduled "+check.String(), "lastCompleted", last, "interval", interval, "firstIn", wait)
	for {
		if clock.Sleep(ctx, clk, wait) != nil {
			return
		}
		wait = interval
		completed, err := run()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn(check.String()+" failed; retrying", "err", err)
			wait = a.cfg.RetryInterval
			continue
		}
		if !completed {
			continue
		}
		if err := a.ar.SetLastCheckTime(ctx, check, clk.Now()); err != nil && ctx.Err() == nil {
			a.log.Warn("cannot store the "+check.String()+" completion time", "err", err)
		}
	}
}

// firstCheckWait is how long a newly elected auditor waits before the
// first run of a periodic check that last completed at last (the zero Time:
// never), as BookKeeper's Auditor schedules checkAllLedgers and the
// placement check:
//   - never completed: at once. BookKeeper runs the check at once when no
//     time is stored (a new cluster, or one upgraded from a version that
//     did not store it).
//   - otherwise what is left of the interval, last + interval − now: 0 if
//     overdue, and at most interval: a time in the future (clocks of
//     auditors on different hosts disagree) counts as now, as in
//     BookKeeper.
func firstCheckWait(now, last time.Time, interval time.Duration) time.Duration {
	if last.IsZero() {
		return 0
	}
	since := max(now.Sub(last), 0)
	return max(interval-since, 0)
}

// AuditResult says what one audit found.
type AuditResult struct {
	Ledgers int // ledgers scanned
	// Lost are the referenced bookies that are not available.
	Lost []metadata.BookieID
	// Marked are the ledgers marked under-replicated.
	Marked []int64
	// Skipped: replication was disabled, nothing was marked.
	Skipped bool
}

// Audit is one bookie check: it indexes every ledger's bookies (all
// segments), finds those that are neither writable nor read-only, and marks
// every ledger with such a bookie under-replicated, listing the missing
// ones. It is skipped while replication is disabled (also if disabled
// during the scan).
func (a *Auditor) Audit(ctx context.Context) (AuditResult, error) {
	return audit(ctx, a.cfg.Driver, a.ar, a.log, nil)
}

// audit marks ledgers whose bookies are neither registered nor reported
// available by alsoAvailable (nil: none).
func audit(ctx context.Context, d metadata.Driver, ar metadata.AutoRecoveryDriver, log *slog.Logger, alsoAvailable func(metadata.BookieID) bool) (AuditResult, error) {
	var res AuditResult
	if on, err := ar.ReplicationEnabled(ctx); err != nil || !on {
		res.Skipped = err == nil
		return res, err
	}
	w, err := d.WritableBookies(ctx)
	if err != nil {
		return res, err
	}
	ro, err := d.ReadOnlyBookies(ctx)
	if err != nil {
		return res, err
	}
	avail := union(w, ro)
	type mark struct {
		id      int64
		missing []metadata.BookieID
	}
	var marks []mark
	lost := map[metadata.BookieID]bool{}
	for start := int64(0); ; {
		ids, err := d.ListLedgers(ctx, start, 1000)
		if err != nil {
			return res, err
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			m, _, err := d.ReadLedger(ctx, id)
			if errors.Is(err, metadata.ErrNoSuchLedger) {
				continue // deleted meanwhile
			}
			if err != nil {
				return res, err
			}
			res.Ledgers++
			var missing []metadata.BookieID
			for _, seg := range m.Ensembles {
				for _, b := range seg.Ensemble {
					if !slices.Contains(avail, b) && !slices.Contains(missing, b) && (alsoAvailable == nil || !alsoAvailable(b)) {
						missing = append(missing, b)
						lost[b] = true
					}
				}
			}
			if len(missing) > 0 {
				slices.Sort(missing)
				marks = append(marks, mark{id, missing})
			}
		}
		start = ids[len(ids)-1] + 1
	}
	for b := range lost {
		res.Lost = append(res.Lost, b)
	}
	slices.Sort(res.Lost)
	if on, err := ar.ReplicationEnabled(ctx); err != nil || !on {
		res.Skipped = err == nil
		return res, err
	}
	for _, m := range marks {
		if err := ar.MarkLedgerUnderReplicated(ctx, m.id, m.missing); err != nil {
			return res, err
		}
		res.Marked = append(res.Marked, m.id)
	}
	if len(res.Marked) > 0 {
		log.Info("audit marked ledgers under-replicated", "lost", res.Lost, "ledgers", len(res.Marked))
	}
	return res, nil
}

// countUnderReplicated refreshes the metrics' count of under-replicated
// ledgers after a check: one listing per check, never per scrape.
func (a *Auditor) countUnderReplicated(ctx context.Context) {
	if a.cfg.Metrics == nil {
		return
	}
	n := 0
	for start := int64(0); ; {
		page, err := a.ar.ListUnderReplicatedLedgers(ctx, start, 1000)
		if err != nil {
			a.log.Warn("counting under-replicated ledgers for the metrics", "err", err)
			return
		}
		if len(page) == 0 {
			break
		}
		n += len(page)
		start = page[len(page)-1].LedgerID + 1
	}
	a.cfg.Metrics.setUnderReplicated(n)
}
