package autorecovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// Defaults of WorkerConfig (BookKeeper's where it has one).
const (
	DefaultOpenLedgerRereplicationGracePeriod = 30 * time.Second
	DefaultPollInterval                       = time.Second
	DefaultFailureBackoff                     = 5 * time.Second // rwRereplicateBackoffMs
	DefaultReleaseTimeout                     = 5 * time.Second
)

// ErrLockNotReleased: Step could not release a ledger's lock (the store did
// not answer within ReleaseTimeout). The lock stays held by the session
// until the session ends: no worker, this one included (a session's locks
// are not re-entrant), can repair the ledger meanwhile. The caller must end
// the session and go on under a new one, as Run does.
var ErrLockNotReleased = errors.New("lock not released")

// WorkerConfig configures a ReplicationWorker. Zero values take defaults.
type WorkerConfig struct {
	// Driver is the metadata store (a metadata.AutoRecoveryDriver).
	Driver metadata.Driver
	// Client fences and closes OPEN ledgers (open with recovery).
	Client *client.Client
	// Bookies copies entries between bookies.
	Bookies *rereplication.Bookies
	// ID is the lock owner written into each lock.
	ID metadata.BookieID
	// Clock; nil means the wall clock.
	Clock clock.Clock
	// SessionTTL is the lease TTL the locks are tied to.
	SessionTTL time.Duration
	// OpenLedgerRereplicationGracePeriod is how long an OPEN ledger with a
	// lost bookie in its last ensemble is left to its writer before it is
	// fenced and closed.
	OpenLedgerRereplicationGracePeriod time.Duration
	// PollInterval is the pause when there is nothing to do (or
	// replication is disabled).
	PollInterval time.Duration
	// FailureBackoff is how long a ledger whose repair failed is left
	// alone by this worker.
	FailureBackoff time.Duration
	// ReleaseTimeout bounds each of the calls that end work on a ledger
	// or a session, also after Run's context ended: clearing a record,
	// releasing a lock, closing the session.
	ReleaseTimeout time.Duration
	// RateLimitBytesPerSecond bounds the bytes this worker copies per
	// second (all ledgers together); 0 means unlimited.
	RateLimitBytesPerSecond int
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// Metrics, if not nil, records the work done.
	Metrics *Metrics
	// LedgerVerificationPercentage is the share of a bookie's entries the
	// re-check of a bookie that is registered but named in a record reads
	// (as AuditorConfig's; use the same value, or a copy the auditor found
	// bad may be judged fine and its record cleared).
	LedgerVerificationPercentage int
	// PlacementPolicy and RepairPlacement: with RepairPlacement, closed
	// fragments that name a bookie of the record and do not adhere to
	// PlacementPolicy are moved to policy-compliant bookies (the
	// auditor's RepairPlacement marks them). Nil PlacementPolicy means
	// placement.Random's rule.
	PlacementPolicy placement.AdherenceChecker
	RepairPlacement bool
	// NewPlacementPolicy returns a policy that chooses the bookie taking a
	// lost or bad bookie's place, as a client's ensemble change does: pass
	// placement.New over the same rack locations as the cluster's clients.
	// It is called for each ledger repaired (a policy is not safe for
	// concurrent use). Nil: placement.New without locations, the policy of
	// a client without rack locations (any writable bookie outside the
	// ensemble, at random).
	NewPlacementPolicy func() placement.Policy
	// PlacementSource, if not nil, builds the policy choosing each
	// replacement from the cluster's placement configuration (policy kind,
	// its settings, static locations and topology script), bound to the
	// repaired ledger's quorums, as a client's is; NewPlacementPolicy is
	// then not used.
	PlacementSource *rereplication.PlacementSource
}

func (c *WorkerConfig) setDefaults() {
	if c.NewPlacementPolicy == nil {
		c.NewPlacementPolicy = func() placement.Policy {
			return placement.New(rand.NewPCG(rand.Uint64(), rand.Uint64()), nil, false)
		}
	}
	if c.PlacementPolicy == nil {
		c.PlacementPolicy = placement.NewRandom(rand.NewPCG(0, 0)) // Adheres and PlanRepair draw nothing
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.OpenLedgerRereplicationGracePeriod <= 0 {
		c.OpenLedgerRereplicationGracePeriod = DefaultOpenLedgerRereplicationGracePeriod
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.FailureBackoff <= 0 {
		c.FailureBackoff = DefaultFailureBackoff
	}
	if c.ReleaseTimeout <= 0 {
		c.ReleaseTimeout = DefaultReleaseTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Worker is a ReplicationWorker.
type Worker struct {
	cfg   WorkerConfig
	ar    metadata.AutoRecoveryDriver
	log   *slog.Logger
	limit *rate.Limiter // nil: unlimited

	mu struct {
		sync.Mutex
		// notBefore: ledgers this worker leaves alone until then (failed
		// repairs, OPEN ledgers within their grace period).
		notBefore map[int64]time.Time
		// openSince: when this worker first saw an OPEN ledger with a lost
		// bookie in its last ensemble.
		openSince map[int64]time.Time
	}
}

// NewWorker returns a Worker; metadata.ErrNotSupported if the driver has no
// AutoRecovery support.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	cfg.setDefaults()
	ar, ok := cfg.Driver.(metadata.AutoRecoveryDriver)
	if !ok {
		return nil, fmt.Errorf("replication worker: %w", metadata.ErrNotSupported)
	}
	if cfg.Client == nil || cfg.Bookies == nil {
		return nil, errors.New("replication worker: Client and Bookies are required")
	}
	if err := metadata.ValidateBookieID(cfg.ID); err != nil {
		return nil, fmt.Errorf("replication worker id: %w", err)
	}
	w := &Worker{cfg: cfg, ar: ar, log: cfg.Logger.With("component", "replication-worker", "id", cfg.ID)}
	if cfg.RateLimitBytesPerSecond > 0 {
		w.limit = rate.NewLimiter(rate.Limit(cfg.RateLimitBytesPerSecond), cfg.RateLimitBytesPerSecond)
	}
	w.mu.notBefore = map[int64]time.Time{}
	w.mu.openSince = map[int64]time.Time{}
	return w, nil
}

// Run repairs under-replicated ledgers until ctx ends (then it returns
// ctx's error). Locks are tied to one session; a lost session is replaced,
// and so is one holding a lock Step could not release (ErrLockNotReleased):
// closing it releases the lock (or, if the store does not answer, it
// expires a TTL later, its keepalives stopped).
func (w *Worker) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		s, err := w.cfg.Driver.OpenSession(ctx, metadata.SessionOptions{TTL: w.cfg.SessionTTL})
		if err != nil {
			w.pause(ctx)
			continue
		}
		w.runSession(ctx, s)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReleaseTimeout)
		if err := s.Close(cctx); err != nil && ctx.Err() == nil {
			w.log.Warn("cannot close the session; its locks expire with its lease", "err", err)
		}
		cancel()
	}
	return ctx.Err()
}

// runSession runs steps under s until ctx ends, s ends, or s holds a lock
// that could not be released.
func (w *Worker) runSession(ctx context.Context, s metadata.Session) {
	for ctx.Err() == nil {
		did, err := w.Step(ctx, s)
		if errors.Is(err, metadata.ErrSessionExpired) {
			return
		}
		if errors.Is(err, ErrLockNotReleased) {
			w.log.Warn("a lock could not be released; ending the session that holds it", "err", err)
			return
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("replication step failed", "err", err)
		}
		if !did {
			w.pause(ctx)
		}
		select {
		case <-s.Done():
			return
		default:
		}
	}
}

func (w *Worker) pause(ctx context.Context) {
	_ = clock.Sleep(ctx, w.cfg.Clock, w.cfg.PollInterval)
}

// Step takes the lock on one under-replicated ledger (not in this worker's
// backoff), repairs it and clears or releases it. It reports whether it
// found a ledger to work on. If the lock cannot be released the error wraps
// ErrLockNotReleased, and the caller must end s.
func (w *Worker) Step(ctx context.Context, s metadata.Session) (bool, error) {
	if on, err := w.ar.ReplicationEnabled(ctx); err != nil || !on {
		return false, err
	}
	now := w.cfg.Clock.Now()
	var cands []metadata.UnderReplicatedLedger
	for start := int64(0); ; {
		page, err := w.ar.ListUnderReplicatedLedgers(ctx, start, 1000)
		if err != nil {
			return false, err
		}
		if len(page) == 0 {
			break
		}
		w.mu.Lock()
		for _, r := range page {
			if nb, ok := w.mu.notBefore[r.LedgerID]; !ok || !now.Before(nb) {
				cands = append(cands, r)
			}
		}
		w.mu.Unlock()
		start = page[len(page)-1].LedgerID + 1
	}
	// Random order, so that workers spread over the ledgers (as Java walks
	// the tree at random).
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, r := range cands {
		lock, err := w.ar.LockUnderReplicatedLedger(ctx, s, r.LedgerID, w.cfg.ID)
		if errors.Is(err, metadata.ErrLocked) || errors.Is(err, metadata.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		err = w.repair(ctx, r.LedgerID, lock)
		if errors.Is(err, errDeferred) {
			err = nil // backed off until the grace period ends
		}
		if err != nil {
			w.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.failures })
			w.backoff(r.LedgerID, w.cfg.FailureBackoff)
			w.log.Warn("re-replication failed; will retry", "ledger", r.LedgerID, "err", err)
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReleaseTimeout)
		uerr := lock.Unlock(uctx)
		cancel()
		if uerr != nil {
			err = errors.Join(err, fmt.Errorf("ledger %d: %w: %w", r.LedgerID, ErrLockNotReleased, uerr))
		}
		return true, err
	}
	return false, nil
}

func (w *Worker) backoff(id int64, d time.Duration) {
	w.mu.Lock()
	w.mu.notBefore[id] = w.cfg.Clock.Now().Add(d)
	w.mu.Unlock()
}

// errDeferred: an OPEN ledger is within its grace period.
var errDeferred = errors.New("open ledger left to its writer for the grace period")

// repair re-replicates ledger id under lock (spec §6.6): one ledgerRepair
// step at a time, each on freshly read metadata, until the record can be
// cleared or a step fails.
func (w *Worker) repair(ctx context.Context, id int64, lock metadata.Lock) error {
	ctx, cancel := whileLocked(ctx, lock)
	defer cancel()
	rec, err := w.ar.ReadUnderReplicatedLedger(ctx, id)
	if err != nil {
		return err
	}
	r := &ledgerRepair{w: w, id: id, rec: rec, rep: w.replicator()}
	for attempt := 0; ; attempt++ {
		if attempt > 10*len(rec.MissingReplicas)+100 {
			return fmt.Errorf("ledger %d: no progress", id)
		}
		if done, err := r.step(ctx); done || err != nil {
			return err
		}
	}
}

// whileLocked returns a context that ends when lock is lost (another
// worker may take over) or ctx ends; call cancel to release its goroutine.
func whileLocked(ctx context.Context, lock metadata.Lock) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-lock.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// ledgerRepair is the state of one repair call.
type ledgerRepair struct {
	w   *Worker
	id  int64
	rec metadata.UnderReplicatedLedger
	rep *rereplication.Replicator
	// verified: the registered bookies the record names were re-checked
	// and hold every entry of the closed fragments (placement moves, which
	// may follow, do not undo that).
	verified bool
}

// step reads the ledger and the bookies and does one thing: clears the
// record (done), fences an OPEN ledger whose last ensemble lost a bookie,
// re-checks the registered bookies the record names, or replaces one lost
// bookie of one fragment. done, or an error, ends the repair.
func (r *ledgerRepair) step(ctx context.Context) (done bool, err error) {
	w, md := r.w, r.w.cfg.Driver
	m, _, err := md.ReadLedger(ctx, r.id)
	if errors.Is(err, metadata.ErrNoSuchLedger) {
		// Deleted: nothing to repair.
		return true, w.clear(ctx, r.id, r.rec.Version)
	}
	if err != nil {
		return true, err
	}
	writable, err := md.WritableBookies(ctx)
	if err != nil {
		return true, err
	}
	ro, err := md.ReadOnlyBookies(ctx)
	if err != nil {
		return true, err
	}
	avail := union(writable, ro)
	lost := lostBookies(m, avail)
	switch {
	case len(lost) == 0:
		return r.checkSuspects(ctx, m, writable, avail)
	case !m.IsClosed() && slices.ContainsFunc(m.Ensembles[len(m.Ensembles)-1].Ensemble, func(b metadata.BookieID) bool { return slices.Contains(lost, b) }):
		// The writer may still replace the bookie itself; after the
		// grace period, fence and close (its adds then fail).
		return false, w.fenceAfterGrace(ctx, r.id)
	default:
		return false, r.replaceLost(ctx, m, writable, lost)
	}
}

// lostBookies are the bookies m's ensembles name that are not available,
// in first-appearance order.
func lostBookies(m *metadata.LedgerMetadata, avail []metadata.BookieID) []metadata.BookieID {
	var lost []metadata.BookieID
	for _, seg := range m.Ensembles {
		for _, b := range seg.Ensemble {
			if !slices.Contains(avail, b) && !slices.Contains(lost, b) {
				lost = append(lost, b)
			}
		}
	}
	return lost
}

// checkSuspects handles a ledger with no lost bookie: the bookies the
// record names that are registered were found bad by the ledger check, or
// the placement check wants them moved. They are re-checked (and replaced
// where still bad), then moved for placement with RepairPlacement; if they
// are fine, the record is cleared (done).
func (r *ledgerRepair) checkSuspects(ctx context.Context, m *metadata.LedgerMetadata, writable, avail []metadata.BookieID) (done bool, err error) {
	w := r.w
	var suspects []metadata.BookieID
	for _, b := range r.rec.MissingReplicas {
		if slices.ContainsFunc(m.Ensembles, func(s metadata.Segment) bool { return slices.Contains(s.Ensemble, b) }) {
			suspects = append(suspects, b)
		}
	}
	if len(suspects) == 0 {
		return true, w.clear(ctx, r.id, r.rec.Version)
	}
	if !r.verified {
		ok, err := w.repairBad(ctx, r.rep, r.id, m, suspects, writable, avail)
		if err != nil || !ok {
			return err != nil, err // !ok: something changed, re-read
		}
		r.verified = true
	}
	if w.cfg.RepairPlacement && m.IsClosed() {
		moved, err := w.repairPlacement(ctx, r.id, m, suspects, writable)
		if err != nil || moved {
			return err != nil, err
		}
	}
	return true, w.clear(ctx, r.id, r.rec.Version)
}

// replaceLost replaces one lost bookie of the first closed fragment naming
// one (the caller re-reads and calls again).
func (r *ledgerRepair) replaceLost(ctx context.Context, m *metadata.LedgerMetadata, writable, lost []metadata.BookieID) error {
	res, found, err := r.rep.ReplaceFirstLost(ctx, r.id, m, writable, lost)
	if !found {
		// Lost bookies only in the last segment of an OPEN ledger never
		// happens here (the caller fences those); nothing else to do.
		return fmt.Errorf("ledger %d: lost bookies %v left in segments that cannot be repaired yet", r.id, lost)
	}
	if err != nil && !errors.Is(err, rereplication.ErrFragmentChanged) {
		return err
	}
	if err == nil {
		r.w.replicated(r.id, res)
	}
	return nil
}

// replicator returns the engine for one ledger's repair, with a placement
// policy of its own.
func (w *Worker) replicator() *rereplication.Replicator {
	rep := &rereplication.Replicator{Bookies: w.cfg.Bookies, Ledgers: w.cfg.Driver, Source: w.cfg.PlacementSource, Limit: w.limit}
	if rep.Source == nil {
		rep.Placement = w.cfg.NewPlacementPolicy()
	}
	return rep
}

// replicated counts and logs one fragment copy.
func (w *Worker) replicated(id int64, res rereplication.ReplicateResult) {
	if !res.Skipped {
		w.cfg.Metrics.fragment(res.Entries, res.Bytes)
	}
	w.log.Info("re-replicated fragment", "ledger", id, "segment", res.Segment, "from", res.From, "to", res.To, "entries", res.Entries, "skipped", res.Skipped)
}

// fenceAfterGrace fences and closes an OPEN ledger whose last fragment
// cannot be repaired while it may grow, once its grace period is over
// (errDeferred before).
func (w *Worker) fenceAfterGrace(ctx context.Context, id int64) error {
	if !w.graceOver(id) {
		return errDeferred
	}
	if err := rereplication.FenceAndClose(ctx, w.cfg.Client, w.cfg.Driver, id); err != nil {
		return fmt.Errorf("ledger %d: fencing and closing: %w", id, err)
	}
	w.log.Info("fenced and closed open ledger after the grace period", "ledger", id)
	w.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.openFenced })
	return nil
}

// repairBad re-checks the copies of the registered bookies suspects (spec
// §6.6 step 2) with the LedgerChecker and replaces each that is still bad
// in a closed fragment: its entries are copied to a writable bookie outside
// the fragment's ensemble from the other replicas, never from it, and the
// ensemble is updated by CAS (the lost-bookie path). A bad copy in the
// open last fragment of an OPEN ledger is left to its writer for the grace
// period, then the ledger is fenced and closed so that the next pass can
// copy it. ok reports that no suspect is bad any more; false means
// something changed (re-read the metadata and call again).
func (w *Worker) repairBad(ctx context.Context, rep *rereplication.Replicator, id int64, m *metadata.LedgerMetadata, suspects, writable, avail []metadata.BookieID) (ok bool, err error) {
	lac := m.LastEntryID
	if !m.IsClosed() {
		lac = w.cfg.Bookies.ReadLAC(ctx, id, m)
	}
	chk := &rereplication.LedgerChecker{Reader: w.cfg.Bookies, Percentage: w.cfg.LedgerVerificationPercentage}
	frags, err := chk.Check(ctx, rereplication.CheckRequest{LedgerID: id, Metadata: m, LAC: lac, Bookies: suspects,
		Available: func(b metadata.BookieID) bool { return slices.Contains(avail, b) }})
	if err != nil {
		return false, err
	}
	repaired, openBad := false, false
	for _, f := range frags {
		if len(f.Bad) == 0 {
			continue
		}
		if !f.Closed {
			openBad = true
			continue
		}
		bad := make([]metadata.BookieID, len(f.Bad))
		for k, i := range f.Bad {
			bad[k] = f.Ensemble[i]
		}
		w.log.Info("registered bookie lacks entries; replacing it", "ledger", id, "segment", f.Segment, "bad", bad)
		g := f.Fragment
		g.Ensemble = slices.Clone(f.Ensemble)
		for _, i := range f.Bad {
			res, err := rep.Replace(ctx, id, m, g, i, writable, bad)
			if errors.Is(err, rereplication.ErrFragmentChanged) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			w.replicated(id, res)
			g.Ensemble[i] = res.To
			repaired = true
		}
	}
	switch {
	case repaired:
		return false, nil
	case openBad:
		return false, w.fenceAfterGrace(ctx, id)
	}
	return true, nil
}

// repairPlacement moves, in the first closed fragment that names a suspect
// and does not adhere to the placement policy, the bookies a
// policy-compliant plan replaces (RepairPlacement), copying from the other
// replicas (the moved bookie, healthy, only as a last resort). moved
// reports that the metadata changed; a fragment the writable bookies cannot
// make adhere is left as it is.
func (w *Worker) repairPlacement(ctx context.Context, id int64, m *metadata.LedgerMetadata, suspects, writable []metadata.BookieID) (moved bool, err error) {
	pol := w.cfg.PlacementPolicy
	for _, f := range rereplication.ClosedFragments(m) {
		if !slices.ContainsFunc(f.Ensemble, func(b metadata.BookieID) bool { return slices.Contains(suspects, b) }) ||
			pol.Adheres(f.Ensemble, m.WriteQuorum, m.AckQuorum) != placement.NotAdhering {
			continue
		}
		plan, ok := pol.PlanRepair(f.Ensemble, m.WriteQuorum, m.AckQuorum, shuffled(writable))
		if !ok {
			w.log.Warn("no placement-compliant replacement among the writable bookies", "ledger", id, "segment", f.Segment, "ensemble", f.Ensemble)
			continue
		}
		g := f
		g.Ensemble = slices.Clone(f.Ensemble)
		for _, i := range slices.Sorted(maps.Keys(plan)) {
			res, err := w.cfg.Bookies.ReplicateFragment(ctx, w.cfg.Driver, id, m, g, i, plan[i], nil, w.limit)
			if errors.Is(err, rereplication.ErrFragmentChanged) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			w.replicated(id, res)
			g.Ensemble[i] = plan[i]
		}
		w.log.Info("moved fragment for placement", "ledger", id, "segment", f.Segment, "ensemble", g.Ensemble)
		return true, nil
	}
	return false, nil
}

// graceOver reports whether ledger id's grace period has passed, starting
// it on first sight; while it runs the ledger is backed off until its end.
func (w *Worker) graceOver(id int64) bool {
	now := w.cfg.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	since, ok := w.mu.openSince[id]
	if !ok {
		since = now
		w.mu.openSince[id] = now
	}
	end := since.Add(w.cfg.OpenLedgerRereplicationGracePeriod)
	if now.Before(end) {
		w.mu.notBefore[id] = end
		return false
	}
	return true
}

// clear deletes the record if its version is unchanged; if the auditor
// marked it again meanwhile the record stays (and is repaired again).
func (w *Worker) clear(ctx context.Context, id int64, v metadata.Version) error {
	// Not on ctx: repair's ctx ends when the lock goes, and clearing the
	// record releases the lock, so the driver's last steps (removing empty
	// parents) would see their own context cancelled. The version check
	// keeps a late clear safe.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ReleaseTimeout)
	defer cancel()
	err := w.ar.MarkLedgerReplicated(cctx, id, v)
	if err == nil {
		w.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.ledgersReplicated })
	}
	w.mu.Lock()
	delete(w.mu.openSince, id)
	delete(w.mu.notBefore, id)
	w.mu.Unlock()
	if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
		return nil // re-marked: the next step repairs it again; or already cleared
	}
	return err
}
