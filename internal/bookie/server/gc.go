package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage"
)

// gcListPage is how many ledger ids one ListLedgers call fetches.
const gcListPage = 1000

// GC is the garbage collection of deleted ledgers, BookKeeper's
// ScanAndCompareGarbageCollector: it compares the ledgers this bookie holds
// with the ledgers of the cluster's metadata and drops from storage those
// whose metadata is gone.
//
// Safety rules (a wrongly deleted ledger is lost data):
//   - the set of candidates is taken from the store *before* the listing
//     starts, so a ledger whose first entry arrives during the pass is not
//     a candidate (clients create metadata before writing entries);
//   - a pass whose listing fails for any reason (store unreachable, a
//     corrupt key in the ledger range) deletes nothing;
//   - each candidate absent from the listing is re-read from the metadata
//     store just before deletion, and deleted only when that read says
//     ErrNoSuchLedger (never on another error), as Java's
//     verifyMetadataOnGC does: the listing is not a snapshot, so a ledger
//     created or recreated while it ran may be missing from it;
//   - the first pass runs one GCWaitTime after start, never at boot.
//
// A fenced ledger's fence survives its deletion (storage.Store keeps the
// fenced-and-deleted marker).
type GC struct {
	store storage.Store
	md    metadata.LedgerManager
	wait  time.Duration
	clock clock.Clock
	log   *slog.Logger
	// onPass observes each finished pass (metrics); may be nil.
	onPass func(GCResult)

	trigger chan struct{} // capacity 1: run a pass now

	mu struct {
		sync.Mutex
		running bool // a pass is in progress
		last    GCResult
		passes  int64
	}
}

// GCResult describes one pass.
type GCResult struct {
	Start, End time.Time
	// Held is how many ledgers the store held when the pass began.
	Held int
	// Listed is how many ledgers the metadata store listed.
	Listed int
	// Deleted are the ids dropped from storage.
	Deleted []int64
	// Kept are candidates found alive by the re-read before deletion.
	Kept []int64
	// Err is the pass's failure (nothing, or only part, was deleted).
	Err error
}

// NewGC returns a collector; Run starts its loop, RunOnce steps it.
func NewGC(store storage.Store, md metadata.LedgerManager, wait time.Duration, clk clock.Clock, log *slog.Logger) *GC {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &GC{store: store, md: md, wait: wait, clock: clk, log: log, trigger: make(chan struct{}, 1)}
}

// Trigger asks the loop for a pass now (the admin `PUT /api/v1/bookie/gc`).
func (g *GC) Trigger() {
	select {
	case g.trigger <- struct{}{}:
	default:
	}
}

// Running reports whether a pass is in progress.
func (g *GC) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.running
}

// Last returns the last pass's result and the number of passes so far.
func (g *GC) Last() (GCResult, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.last, g.mu.passes
}

// Run runs a pass every wait (the first one wait after the call) or when
// triggered, until ctx is cancelled.
func (g *GC) Run(ctx context.Context) {
	t := g.clock.NewTimer(g.wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-g.trigger:
		}
		res := g.RunOnce(ctx)
		if res.Err != nil && ctx.Err() == nil {
			g.log.Warn("garbage collection pass failed", "deleted", len(res.Deleted), "err", res.Err)
		}
		t.Reset(g.wait)
	}
}

// RunOnce is one pass: the loop's body, called directly by tests and the
// simulator.
func (g *GC) RunOnce(ctx context.Context) GCResult {
	g.mu.Lock()
	g.mu.running = true
	g.mu.Unlock()
	res := g.pass(ctx)
	res.End = g.clock.Now()
	g.mu.Lock()
	g.mu.running = false
	g.mu.last = res
	g.mu.passes++
	g.mu.Unlock()
	if g.onPass != nil {
		g.onPass(res)
	}
	if len(res.Deleted) > 0 {
		g.log.Info("garbage collection deleted ledgers", "ledgers", res.Deleted)
	}
	return res
}

func (g *GC) pass(ctx context.Context) GCResult {
	res := GCResult{Start: g.clock.Now()}
	// 1. What the store holds now. Only these may be deleted.
	var held []int64
	if err := g.store.Ledgers(func(id int64) bool {
		held = append(held, id)
		return true
	}); err != nil {
		res.Err = fmt.Errorf("gc: list the bookie's ledgers: %w", err)
		return res
	}
	res.Held = len(held)
	if len(held) == 0 {
		return res
	}
	// 2. The complete listing of the cluster's ledgers.
	live := map[int64]bool{}
	for start := int64(0); ; {
		ids, err := g.md.ListLedgers(ctx, start, gcListPage)
		if err != nil {
			res.Err = fmt.Errorf("gc: list the cluster's ledgers (nothing deleted): %w", err)
			return res
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			live[id] = true
		}
		res.Listed += len(ids)
		start = ids[len(ids)-1] + 1
		if start <= 0 || start > metadata.MaxLedgerID {
			break
		}
	}
	// 3. Candidates: held before the listing and absent from it; each is
	// re-read before it is deleted.
	var errs []error
	for _, id := range held {
		if live[id] {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		_, _, err := g.md.ReadLedger(ctx, id)
		switch {
		case err == nil:
			res.Kept = append(res.Kept, id)
			continue
		case !errors.Is(err, metadata.ErrNoSuchLedger):
			errs = append(errs, fmt.Errorf("gc: re-read ledger %d (kept): %w", id, err))
			continue
		}
		if err := g.store.DeleteLedger(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("gc: delete ledger %d: %w", id, err))
			continue
		}
		res.Deleted = append(res.Deleted, id)
	}
	res.Err = errors.Join(errs...)
	return res
}
