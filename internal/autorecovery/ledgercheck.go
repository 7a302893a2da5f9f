package autorecovery

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// The auditor's periodic checks besides the bookie check (spec/protocol.md
// §6.3): checkAllLedgers reads every ledger's entries on its bookies with
// the LedgerChecker and marks ledgers with bad fragments; the placement
// check counts closed ledgers whose ensembles break the placement policy
// and, with RepairPlacement, marks them so that workers move their data.

// DefaultLedgerCheckConcurrency is how many ledgers one ledger check reads
// at a time (BookKeeper throttles its opens with a semaphore too); each
// reads up to rereplication.DefaultCheckConcurrency entries at a time.
const DefaultLedgerCheckConcurrency = 4

// LedgerCheckResult says what one check of all ledgers found.
type LedgerCheckResult struct {
	// Ledgers is the number of ledgers checked.
	Ledgers int
	// Marked maps each ledger marked under-replicated to its bad bookies.
	Marked map[int64][]metadata.BookieID
	// Failed are ledgers that could not be checked (their metadata could
	// not be read, or names an unknown digest type); the next run retries.
	Failed []int64
	// Skipped: replication was disabled (before or during the scan);
	// nothing was marked.
	Skipped bool
	// Duration is how long the check took (on the auditor's clock).
	Duration time.Duration
}

// CheckAllLedgers checks every ledger's fragments on their bookies
// (BookKeeper's checkAllLedgers): each bookie must return, intact, the
// first and last entries it should hold in each fragment and a
// LedgerVerificationPercentage sample between; unregistered bookies are bad
// without a read. Ledgers with a bad fragment are marked under-replicated,
// listing the bad bookies, for the workers to repair. It is skipped while
// replication is disabled (also if disabled during the scan). It reads
// ledgers without recovery: open ones are not fenced, their last fragment
// ends at the LAC the bookies report.
func (a *Auditor) CheckAllLedgers(ctx context.Context) (LedgerCheckResult, error) {
	start := a.cfg.Clock.Now()
	res, err := a.checkAllLedgers(ctx)
	res.Duration = a.cfg.Clock.Now().Sub(start)
	if ctx.Err() == nil {
		a.cfg.Metrics.ledgerChecked(res, err)
		if err == nil && !res.Skipped {
			a.countUnderReplicated(ctx)
		}
	}
	switch {
	case err != nil:
	case res.Skipped:
		a.log.Info("ledger check skipped: replication is disabled")
	default:
		a.log.Info("ledger check done", "ledgers", res.Ledgers, "marked", len(res.Marked), "failed", len(res.Failed), "took", res.Duration)
	}
	return res, err
}

func (a *Auditor) checkAllLedgers(ctx context.Context) (LedgerCheckResult, error) {
	res := LedgerCheckResult{Marked: map[int64][]metadata.BookieID{}}
	if on, err := a.ar.ReplicationEnabled(ctx); err != nil || !on {
		res.Skipped = err == nil
		return res, err
	}
	bks := a.cfg.Bookies
	if bks == nil {
		bks = rereplication.NewBookies(0, a.log)
		bks.ResolveWith(a.cfg.Driver)
		defer bks.Close()
	}
	avail, err := availableBookies(ctx, a.cfg.Driver)
	if err != nil {
		return res, err
	}
	isAvail := func(b metadata.BookieID) bool { return slices.Contains(avail, b) }
	chk := &rereplication.LedgerChecker{Reader: bks, Percentage: a.cfg.LedgerVerificationPercentage}

	var mu sync.Mutex // guards res and marks
	marks := map[int64][]metadata.BookieID{}
	err = forEachLedger(ctx, a.cfg.Driver, a.cfg.LedgerCheckConcurrency, func(id int64, m *metadata.LedgerMetadata) {
		lac := m.LastEntryID
		if !m.IsClosed() {
			lac = bks.ReadLAC(ctx, id, m)
		}
		frags, err := chk.Check(ctx, rereplication.CheckRequest{LedgerID: id, Metadata: m, LAC: lac, Available: isAvail})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("ledger check: cannot check ledger", "ledger", id, "err", err)
				res.Failed = append(res.Failed, id)
			}
			return
		}
		res.Ledgers++
		if bad := rereplication.BadBookies(frags); len(bad) > 0 {
			marks[id] = bad
		}
	}, func(id int64, err error) {
		mu.Lock()
		res.Failed = append(res.Failed, id)
		mu.Unlock()
		a.log.Warn("ledger check: cannot read metadata", "ledger", id, "err", err)
	})
	slices.Sort(res.Failed)
	if err != nil {
		return res, err
	}
	if len(marks) == 0 {
		return res, nil
	}
	if on, err := a.ar.ReplicationEnabled(ctx); err != nil || !on {
		res.Skipped = err == nil
		return res, err
	}
	for _, id := range slices.Sorted(maps.Keys(marks)) {
		if err := a.ar.MarkLedgerUnderReplicated(ctx, id, marks[id]); err != nil {
			return res, err
		}
		res.Marked[id] = marks[id]
		a.log.Info("ledger check marked ledger under-replicated", "ledger", id, "bad", marks[id])
	}
	return res, nil
}

// availableBookies returns the registered bookies, writable and read-only.
func availableBookies(ctx context.Context, d metadata.Driver) ([]metadata.BookieID, error) {
	w, err := d.WritableBookies(ctx)
	if err != nil {
		return nil, err
	}
	ro, err := d.ReadOnlyBookies(ctx)
	if err != nil {
		return nil, err
	}
	return union(w, ro), nil
}

// forEachLedger lists every ledger and calls fn with its metadata from up
// to concurrency goroutines (≤ 0: DefaultLedgerCheckConcurrency); ledgers
// deleted meanwhile are skipped, and one whose metadata cannot be read goes
// to failed. The error is the listing's or ctx's.
func forEachLedger(ctx context.Context, d metadata.Driver, concurrency int,
	fn func(int64, *metadata.LedgerMetadata), failed func(int64, error)) error {
	if concurrency <= 0 {
		concurrency = DefaultLedgerCheckConcurrency
	}
	ids := make(chan int64)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for id := range ids {
				m, _, err := d.ReadLedger(ctx, id)
				switch {
				case errors.Is(err, metadata.ErrNoSuchLedger):
				case err != nil:
					if ctx.Err() == nil {
						failed(id, err)
					}
				default:
					fn(id, m)
				}
			}
		})
	}
	var err error
list:
	for start := int64(0); ; {
		var page []int64
		if page, err = d.ListLedgers(ctx, start, 1000); err != nil || len(page) == 0 {
			break
		}
		for _, id := range page {
			select {
			case ids <- id:
			case <-ctx.Done():
				err = ctx.Err()
				break list
			}
		}
		start = page[len(page)-1] + 1
	}
	close(ids)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// PlacementCheckResult says what one placement check found.
type PlacementCheckResult struct {
	// Ledgers is the number of closed ledgers checked.
	Ledgers int
	// NotAdhering are the ledgers with a segment that breaks the policy;
	// SoftlyAdhering those whose worst segment meets it only softly.
	NotAdhering, SoftlyAdhering []int64
	// NotAdheringSegments and SoftlyAdheringSegments count segments.
	NotAdheringSegments, SoftlyAdheringSegments int
	// Marked (with RepairPlacement) maps each ledger marked
	// under-replicated to the bookies a policy-compliant move replaces.
	Marked map[int64][]metadata.BookieID
	// Unrepairable (with RepairPlacement) are not-adhering ledgers the
	// writable bookies cannot fix; they are not marked.
	Unrepairable []int64
	// Skipped: replication was disabled, nothing was marked (the counts
	// are still made).
	Skipped bool
	// Duration is how long the check took (on the auditor's clock).
	Duration time.Duration
}

// CheckPlacement judges every segment of every closed ledger against the
// placement policy (BookKeeper's placementPolicyCheck). Open ledgers are
// left to their writers. With RepairPlacement, a ledger with a segment that
// does not adhere is marked under-replicated, listing the bookies a
// policy-compliant plan would replace, but only if the writable bookies
// make such a plan possible (else the worker could not fix it and the mark
// would only churn); workers configured with the same policy and
// RepairPlacement then move the data.
func (a *Auditor) CheckPlacement(ctx context.Context) (PlacementCheckResult, error) {
	start := a.cfg.Clock.Now()
	res, err := a.checkPlacement(ctx)
	res.Duration = a.cfg.Clock.Now().Sub(start)
	if ctx.Err() == nil {
		a.cfg.Metrics.placementChecked(res, err)
		if err == nil && len(res.Marked) > 0 {
			a.countUnderReplicated(ctx)
		}
	}
	if err == nil {
		a.log.Info("placement policy check done", "ledgers", res.Ledgers, "notAdhering", len(res.NotAdhering),
			"softlyAdhering", len(res.SoftlyAdhering), "marked", len(res.Marked), "unrepairable", len(res.Unrepairable), "took", res.Duration)
	}
	return res, err
}

func (a *Auditor) checkPlacement(ctx context.Context) (PlacementCheckResult, error) {
	res := PlacementCheckResult{Marked: map[int64][]metadata.BookieID{}}
	pol := a.cfg.PlacementPolicy
	var writable []metadata.BookieID
	if a.cfg.RepairPlacement {
		var err error
		if writable, err = a.cfg.Driver.WritableBookies(ctx); err != nil {
			return res, err
		}
	}
	var mu sync.Mutex // guards res and marks
	marks := map[int64][]metadata.BookieID{}
	err := forEachLedger(ctx, a.cfg.Driver, a.cfg.LedgerCheckConcurrency, func(id int64, m *metadata.LedgerMetadata) {
		if !m.IsClosed() {
			return
		}
		worst := placement.MeetsStrict
		var notAdhering, soft int
		var offending []metadata.BookieID
		repairable := true
		for _, seg := range m.Ensembles {
			adh := pol.Adheres(seg.Ensemble, m.WriteQuorum, m.AckQuorum)
			worst = min(worst, adh)
			switch adh {
			case placement.NotAdhering:
				notAdhering++
				if !a.cfg.RepairPlacement {
					continue
				}
				plan, ok := pol.PlanRepair(seg.Ensemble, m.WriteQuorum, m.AckQuorum, shuffled(writable))
				if !ok {
					repairable = false
					continue
				}
				for i := range plan {
					offending = append(offending, seg.Ensemble[i])
				}
			case placement.MeetsSoft:
				soft++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		res.Ledgers++
		res.NotAdheringSegments += notAdhering
		res.SoftlyAdheringSegments += soft
		switch worst {
		case placement.NotAdhering:
			res.NotAdhering = append(res.NotAdhering, id)
			a.log.Debug("ledger does not adhere to the placement policy", "ledger", id)
		case placement.MeetsSoft:
			res.SoftlyAdhering = append(res.SoftlyAdhering, id)
		}
		if !repairable {
			res.Unrepairable = append(res.Unrepairable, id)
		}
		if len(offending) > 0 {
			slices.Sort(offending)
			marks[id] = slices.Compact(offending)
		}
	}, func(id int64, err error) {
		a.log.Warn("placement check: cannot read metadata", "ledger", id, "err", err)
	})
	slices.Sort(res.NotAdhering)
	slices.Sort(res.SoftlyAdhering)
	slices.Sort(res.Unrepairable)
	if err != nil || len(marks) == 0 {
		return res, err
	}
	if on, err := a.ar.ReplicationEnabled(ctx); err != nil || !on {
		res.Skipped = err == nil
		return res, err
	}
	for _, id := range slices.Sorted(maps.Keys(marks)) {
		if err := a.ar.MarkLedgerUnderReplicated(ctx, id, marks[id]); err != nil {
			return res, err
		}
		res.Marked[id] = marks[id]
		a.log.Info("placement check marked ledger for re-placement", "ledger", id, "bookies", marks[id])
	}
	return res, nil
}

// shuffled returns a shuffled copy (placement plans prefer the earliest
// candidate; shuffling spreads the moves over the bookies).
func shuffled(bs []metadata.BookieID) []metadata.BookieID {
	out := slices.Clone(bs)
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
