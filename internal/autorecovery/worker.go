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

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
)

// Defaults of WorkerConfig (BookKeeper's where it has one).
const (
	DefaultOpenLedgerRereplicationGracePeriod = 30 * time.Second
	DefaultPollInterval                       = time.Second
	DefaultFailureBackoff                     = 5 * time.Second // rwRereplicateBackoffMs
)

// WorkerConfig configures a ReplicationWorker. Zero values take defaults.
type WorkerConfig struct {
	// Driver is the metadata store (a metadata.AutoRecoveryDriver).
	Driver metadata.Driver
	// Client fences and closes OPEN ledgers (open with recovery).
	Client *client.Client
	// Bookies copies entries between bookies.
	Bookies *admin.Bookies
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
	// RateLimitBytesPerSecond bounds the bytes this worker copies per
	// second (all ledgers together); 0 means unlimited.
	RateLimitBytesPerSecond int
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// Metrics, if not nil, records the work done.
	Metrics *Metrics
}

func (c *WorkerConfig) setDefaults() {
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
// ctx's error). Locks are tied to one session; a lost session is replaced.
func (w *Worker) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		s, err := w.cfg.Driver.OpenSession(ctx, metadata.SessionOptions{TTL: w.cfg.SessionTTL})
		if err != nil {
			w.pause(ctx)
			continue
		}
		for ctx.Err() == nil {
			did, err := w.Step(ctx, s)
			if errors.Is(err, metadata.ErrSessionExpired) {
				break
			}
			if err != nil && ctx.Err() == nil {
				w.log.Warn("replication step failed", "err", err)
			}
			if !did {
				w.pause(ctx)
			}
			select {
			case <-s.Done():
			default:
				continue
			}
			break
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = s.Close(cctx)
		cancel()
	}
	return ctx.Err()
}

func (w *Worker) pause(ctx context.Context) {
	select {
	case <-w.cfg.Clock.After(w.cfg.PollInterval):
	case <-ctx.Done():
	}
}

// Step takes the lock on one under-replicated ledger (not in this worker's
// backoff), repairs it and clears or releases it. It reports whether it
// found a ledger to work on.
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
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = lock.Unlock(uctx)
		cancel()
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

// repair re-replicates ledger id under lock (spec §6.6).
func (w *Worker) repair(ctx context.Context, id int64, lock metadata.Lock) error {
	// Stop working when the lock is lost: another worker may take over.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lock.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	rec, err := w.ar.ReadUnderReplicatedLedger(ctx, id)
	if err != nil {
		return err
	}
	md := w.cfg.Driver
	for attempt := 0; ; attempt++ {
		if attempt > 10*len(rec.MissingReplicas)+100 {
			return fmt.Errorf("ledger %d: no progress", id)
		}
		m, _, err := md.ReadLedger(ctx, id)
		if errors.Is(err, metadata.ErrNoSuchLedger) {
			// Deleted: nothing to repair.
			return w.clear(ctx, id, rec.Version)
		}
		if err != nil {
			return err
		}
		writable, err := md.WritableBookies(ctx)
		if err != nil {
			return err
		}
		ro, err := md.ReadOnlyBookies(ctx)
		if err != nil {
			return err
		}
		avail := union(writable, ro)
		var lost []metadata.BookieID
		for _, seg := range m.Ensembles {
			for _, b := range seg.Ensemble {
				if !slices.Contains(avail, b) && !slices.Contains(lost, b) {
					lost = append(lost, b)
				}
			}
		}
		if len(lost) == 0 {
			return w.clear(ctx, id, rec.Version)
		}
		if !m.IsClosed() && slices.ContainsFunc(m.Ensembles[len(m.Ensembles)-1].Ensemble, func(b metadata.BookieID) bool { return slices.Contains(lost, b) }) {
			// The writer may still replace the bookie itself; after the
			// grace period, fence and close (its adds then fail).
			if !w.graceOver(id) {
				return errDeferred
			}
			if _, err := admin.RecoverLedger(ctx, w.cfg.Client, md, id, admin.RecoverOptions{}); err != nil {
				return fmt.Errorf("ledger %d: fencing and closing: %w", id, err)
			}
			w.log.Info("fenced and closed open ledger after the grace period", "ledger", id)
			w.cfg.Metrics.inc(func(m *Metrics) prometheus.Counter { return m.openFenced })
			continue
		}
		// Repair the first fragment with a lost bookie, then re-read.
		done := true
	frags:
		for _, f := range admin.ClosedFragments(m) {
			for i, b := range f.Ensemble {
				if !slices.Contains(lost, b) {
					continue
				}
				target, err := admin.ChooseReplacement(writable, slices.Concat(f.Ensemble, lost), nil)
				if err != nil {
					return err
				}
				res, err := w.cfg.Bookies.ReplicateFragment(ctx, md, id, m, f, i, target, lost, w.limit)
				if err != nil && !errors.Is(err, admin.ErrFragmentChanged) {
					return err
				}
				if err == nil && !res.Skipped {
					w.cfg.Metrics.fragment(res.Entries)
				}
				if err == nil {
					w.log.Info("re-replicated fragment", "ledger", id, "segment", res.Segment, "from", res.From, "to", res.To, "entries", res.Entries, "skipped", res.Skipped)
				}
				done = false
				break frags
			}
		}
		if done {
			// Lost bookies only in the last segment of an OPEN ledger
			// never happens here (handled above); nothing else to do.
			return fmt.Errorf("ledger %d: lost bookies %v left in segments that cannot be repaired yet", id, lost)
		}
	}
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
	err := w.ar.MarkLedgerReplicated(ctx, id, v)
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
