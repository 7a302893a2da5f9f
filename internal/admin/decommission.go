package admin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// Manual bookie recovery and decommissioning (spec/protocol.md §6.7, §6.8).

// ErrStillRegistered: decommissioning refuses a bookie that is still
// registered (writable or read-only); stop it first.
var ErrStillRegistered = errors.New("bookie is still registered")

// ErrAutoRecoveryDisabled: triggerAudit refuses while re-replication is
// switched off cluster-wide.
var ErrAutoRecoveryDisabled = errors.New("AutoRecovery is disabled")

// ErrNoAuditor: triggerAudit found no elected auditor.
var ErrNoAuditor = errors.New("no auditor is elected")

// StoresEntriesOn reports whether the metadata places stored entries on
// bookie (BookKeeper's areEntriesOfLedgerStoredInTheBookie): a segment
// counts if its range holds an entry whose write set includes the bookie's
// index. The last segment of a ledger that is not CLOSED always counts (its
// end is unknown), as does any segment of it naming the bookie.
func StoresEntriesOn(m *metadata.LedgerMetadata, bookie metadata.BookieID) bool {
	p := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}
	var ws []int
	for i, seg := range m.Ensembles {
		idx := slices.Index(seg.Ensemble, bookie)
		if idx < 0 {
			continue
		}
		var last int64
		switch {
		case i+1 < len(m.Ensembles):
			last = m.Ensembles[i+1].FirstEntryID - 1
		case m.IsClosed():
			last = m.LastEntryID
		default:
			return true
		}
		// A write set is a window of the ensemble: within E consecutive
		// entries every index is reached if it is reached at all.
		for e := seg.FirstEntryID; e <= last && e < seg.FirstEntryID+int64(m.EnsembleSize); e++ {
			ws = p.AppendWriteSet(ws[:0], e)
			if slices.Contains(ws, idx) {
				return true
			}
		}
	}
	return false
}

// LedgersOnBookie scans every ledger's metadata and returns the ids of the
// ledgers that store entries on bookie (StoresEntriesOn), ascending. With
// anySegment, every ledger naming the bookie in any ensemble is returned.
func LedgersOnBookie(ctx context.Context, md metadata.LedgerManager, bookie metadata.BookieID, anySegment bool) ([]int64, error) {
	var out []int64
	for start := int64(0); ; {
		ids, err := md.ListLedgers(ctx, start, 1000)
		if err != nil {
			return nil, fmt.Errorf("listing ledgers: %w", err)
		}
		if len(ids) == 0 {
			return out, nil
		}
		for _, id := range ids {
			m, _, err := md.ReadLedger(ctx, id)
			if errors.Is(err, metadata.ErrNoSuchLedger) {
				continue // deleted meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("reading ledger %d: %w", id, err)
			}
			named := slices.ContainsFunc(m.Ensembles, func(s metadata.Segment) bool { return slices.Contains(s.Ensemble, bookie) })
			if anySegment && named || StoresEntriesOn(m, bookie) {
				out = append(out, id)
			}
		}
		start = ids[len(ids)-1] + 1
	}
}

// RecoverBookieOptions configure RecoverBookie.
type RecoverBookieOptions struct {
	// SkipOpenLedgers leaves ledgers that are not CLOSED alone instead of
	// fencing and closing them first.
	SkipOpenLedgers bool
	// RateLimitBytesPerSecond bounds the copied bytes (0: unlimited).
	RateLimitBytesPerSecond int
	// Progress, if not nil, is called after each ledger with the number of
	// ledgers done, their total, and the entries copied so far.
	Progress func(ledgersDone, ledgers, entries int)
	// Ledgers, if not empty, restricts the recovery to these ledgers
	// (BookKeeper's recover -ledger); the others are not looked at.
	Ledgers []int64
	// DryRun changes nothing: the result's Plan says, per ledger, which
	// fragments name the failed bookies (BookKeeper's recover -dryrun).
	DryRun bool
	// Placement chooses each replacement bookie, as a client's ensemble
	// change does (placement.New with the cluster's rack locations); nil:
	// the policy of a client without rack locations (any writable bookie
	// outside the ensemble, at random).
	Placement placement.Policy
	// PlacementSource, if not nil, builds the policy of each ledger's
	// replacements from the cluster's placement configuration, bound to the
	// ledger's quorums (rereplication.PlacementSource); Placement is then
	// not used.
	PlacementSource *rereplication.PlacementSource
}

// PlannedLedger is one ledger of a dry run: what RecoverBookie would do.
type PlannedLedger struct {
	LedgerID int64  `json:"ledgerId"`
	State    string `json:"state"`
	// Fence: the ledger is not closed and its last ensemble names a failed
	// bookie, so it would be fenced and closed first (or skipped, with
	// SkipOpenLedgers).
	Fence     bool              `json:"fence"`
	Skip      bool              `json:"skip"`
	Fragments []PlannedFragment `json:"fragments"`
}

// PlannedFragment is a segment naming failed bookies. LastEntryID is -1
// while the ledger's last segment is open (its end comes with the fence).
type PlannedFragment struct {
	FirstEntryID int64    `json:"firstEntryId"`
	LastEntryID  int64    `json:"lastEntryId"`
	Ensemble     []string `json:"ensemble"`
	Replace      []string `json:"replace"`
}

// RecoverBookieResult says what RecoverBookie did.
type RecoverBookieResult struct {
	Ledgers   int              `json:"ledgers"`
	Fragments int              `json:"fragments"`
	Entries   int              `json:"entries"`
	Skipped   []int64          `json:"skippedOpenLedgers"`
	Failed    map[int64]string `json:"failed,omitempty"`
	// Plan is what a dry run found (nil otherwise).
	Plan []PlannedLedger `json:"plan,omitempty"`
}

// RecoverBookie re-replicates the data of the failed bookies (BookKeeper's
// recoverBookieData, spec §6.7): for each ledger naming one of them, a
// ledger that is not CLOSED and has a failed bookie in its last ensemble is
// first fenced and closed (open with recovery) so that no live writer races
// the copy; then every fragment naming a failed bookie is copied to a
// writable bookie outside its ensemble that o.Placement chooses, and its
// ensemble is updated by CAS (rereplication.Replicator). A ledger that
// fails is reported in Failed and the others go on; the call is idempotent
// and may be re-run.
func RecoverBookie(ctx context.Context, c *client.Client, bks *rereplication.Bookies, md metadata.Driver, failed []metadata.BookieID, o RecoverBookieOptions) (RecoverBookieResult, error) {
	res := RecoverBookieResult{Skipped: []int64{}, Failed: map[int64]string{}}
	var ids []int64
	for _, b := range failed {
		got, err := LedgersOnBookie(ctx, md, b, true)
		if err != nil {
			return res, err
		}
		ids = append(ids, got...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(o.Ledgers) > 0 {
		ids = slices.DeleteFunc(ids, func(id int64) bool { return !slices.Contains(o.Ledgers, id) })
	}
	if o.DryRun {
		res.Plan = []PlannedLedger{}
		for _, id := range ids {
			m, _, err := md.ReadLedger(ctx, id)
			if errors.Is(err, metadata.ErrNoSuchLedger) {
				continue
			}
			if err != nil {
				return res, fmt.Errorf("reading ledger %d: %w", id, err)
			}
			p := planLedger(id, m, failed, o.SkipOpenLedgers)
			if p.Skip {
				res.Skipped = append(res.Skipped, id)
			}
			res.Plan = append(res.Plan, p)
		}
		return res, nil
	}
	rep := &rereplication.Replicator{Bookies: bks, Ledgers: md, Placement: o.Placement, Source: o.PlacementSource}
	if rep.Placement == nil && rep.Source == nil {
		rep.Placement = placement.New(rand.NewPCG(rand.Uint64(), rand.Uint64()), nil, false)
	}
	if o.RateLimitBytesPerSecond > 0 {
		rep.Limit = rate.NewLimiter(rate.Limit(o.RateLimitBytesPerSecond), o.RateLimitBytesPerSecond)
	}
	for n, id := range ids {
		frags, entries, skipped, err := recoverLedgerOff(ctx, c, rep, md, id, failed, o.SkipOpenLedgers)
		res.Fragments += frags
		res.Entries += entries
		switch {
		case ctx.Err() != nil:
			return res, ctx.Err()
		case err != nil:
			res.Failed[id] = err.Error()
		case skipped:
			res.Skipped = append(res.Skipped, id)
		default:
			res.Ledgers++
		}
		if o.Progress != nil {
			o.Progress(n+1, len(ids), res.Entries)
		}
	}
	return res, nil
}

// planLedger is the dry run of recoverLedgerOff on metadata m.
func planLedger(id int64, m *metadata.LedgerMetadata, failed []metadata.BookieID, skipOpen bool) PlannedLedger {
	isFailed := func(b metadata.BookieID) bool { return slices.Contains(failed, b) }
	p := PlannedLedger{LedgerID: id, State: m.State.String(), Fragments: []PlannedFragment{}}
	p.Fence = !m.IsClosed() && slices.ContainsFunc(m.LastEnsemble().Ensemble, isFailed)
	p.Skip = p.Fence && skipOpen
	for i, seg := range m.Ensembles {
		f := PlannedFragment{FirstEntryID: seg.FirstEntryID, LastEntryID: -1, Ensemble: []string{}, Replace: []string{}}
		switch {
		case i+1 < len(m.Ensembles):
			f.LastEntryID = m.Ensembles[i+1].FirstEntryID - 1
		case m.IsClosed():
			f.LastEntryID = m.LastEntryID
		}
		for _, b := range seg.Ensemble {
			f.Ensemble = append(f.Ensemble, string(b))
			if isFailed(b) {
				f.Replace = append(f.Replace, string(b))
			}
		}
		if len(f.Replace) > 0 {
			p.Fragments = append(p.Fragments, f)
		}
	}
	return p
}

// recoverLedgerOff moves ledger id's data off the failed bookies: the
// ledger is fenced and closed first if its open last fragment names one,
// then one fragment is repaired at a time until none names a failed bookie.
// The failed bookies are never read: one may still answer with stale data.
func recoverLedgerOff(ctx context.Context, c *client.Client, rep *rereplication.Replicator, md metadata.Driver, id int64,
	failed []metadata.BookieID, skipOpen bool) (frags, entries int, skipped bool, err error) {
	fenced := false
	for attempt := 0; attempt < 100; attempt++ {
		m, _, err := md.ReadLedger(ctx, id)
		if errors.Is(err, metadata.ErrNoSuchLedger) {
			return frags, entries, false, nil
		}
		if err != nil {
			return frags, entries, false, err
		}
		isFailed := func(b metadata.BookieID) bool { return slices.Contains(failed, b) }
		if !m.IsClosed() && slices.ContainsFunc(m.Ensembles[len(m.Ensembles)-1].Ensemble, isFailed) {
			if skipOpen {
				return frags, entries, true, nil
			}
			if fenced {
				return frags, entries, false, fmt.Errorf("ledger %d: still not closed after recovery", id)
			}
			if err := rereplication.FenceAndClose(ctx, c, md, id); err != nil {
				return frags, entries, false, fmt.Errorf("ledger %d: fencing and closing: %w", id, err)
			}
			fenced = true
			continue
		}
		writable, err := md.WritableBookies(ctx)
		if err != nil {
			return frags, entries, false, err
		}
		r, found, err := rep.ReplaceFirstLost(ctx, id, m, writable, failed)
		switch {
		case !found:
			return frags, entries, false, nil
		case errors.Is(err, rereplication.ErrFragmentChanged):
			continue
		case err != nil:
			return frags, entries, false, err
		}
		entries += r.Entries
		if !r.Skipped {
			frags++
		}
	}
	return frags, entries, false, fmt.Errorf("ledger %d: no progress", id)
}

// TriggerAudit asks the auditor to audit now (BookKeeper's triggerAudit):
// ErrAutoRecoveryDisabled or ErrNoAuditor, else the stored lost-bookie
// recovery delay is written again.
func TriggerAudit(ctx context.Context, ar metadata.AutoRecoveryDriver) error {
	if on, err := ar.ReplicationEnabled(ctx); err != nil {
		return err
	} else if !on {
		return ErrAutoRecoveryDisabled
	}
	if _, err := ar.Auditor(ctx); errors.Is(err, metadata.ErrNotFound) {
		return ErrNoAuditor
	} else if err != nil {
		return err
	}
	v, err := ar.LostBookieRecoveryDelay(ctx)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return err
	}
	return ar.SetLostBookieRecoveryDelay(ctx, v)
}

// DecommissionOptions configure DecommissionBookie.
type DecommissionOptions struct {
	// InitialWait is slept after triggering the audit (BookKeeper: 30 s).
	// The wait below polls the ledgers themselves, so 0 is safe.
	InitialWait time.Duration
	// PollInterval is the first pause between checks; it doubles up to
	// MaxPollInterval. Defaults 1 s and 5 min.
	PollInterval, MaxPollInterval time.Duration
	// Progress, if not nil, is called after each check with the number of
	// ledgers that still store entries on the bookie and the number of
	// under-replicated records that still list it.
	Progress func(ledgers, underReplicated int)
	// Clock times InitialWait and the pauses; nil means clock.Real.
	Clock clock.Clock
}

// DecommissionBookie drains bookie (BookKeeper's decommissionBookie, spec
// §6.8): it refuses with ErrStillRegistered while the bookie is registered,
// triggers an audit (so AutoRecovery marks its ledgers; ErrNoAuditor or
// ErrAutoRecoveryDisabled if it cannot), waits until no ledger stores
// entries on it and no under-replication record lists it, and then deletes
// its cookie so its identity may be reused. It does not copy anything
// itself: the replication workers do.
func DecommissionBookie(ctx context.Context, md metadata.Driver, bookie metadata.BookieID, o DecommissionOptions) error {
	ar, ok := md.(metadata.AutoRecoveryDriver)
	if !ok {
		return fmt.Errorf("decommission: %w", metadata.ErrNotSupported)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.MaxPollInterval <= 0 {
		o.MaxPollInterval = 5 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	reg, err := ListBookies(ctx, md, true, true)
	if err != nil {
		return err
	}
	for _, b := range reg {
		if b.ID == string(bookie) {
			return fmt.Errorf("%w: %s is %s; stop it first", ErrStillRegistered, bookie, b.State)
		}
	}
	if err := TriggerAudit(ctx, ar); err != nil {
		return fmt.Errorf("triggering an audit: %w", err)
	}
	if err := sleep(ctx, o.Clock, o.InitialWait); err != nil {
		return err
	}
	for pause := o.PollInterval; ; pause = min(2*pause, o.MaxPollInterval) {
		ids, err := LedgersOnBookie(ctx, md, bookie, false)
		if err != nil {
			return err
		}
		urs := 0
		if len(ids) == 0 {
			for start := int64(0); ; {
				page, err := ar.ListUnderReplicatedLedgers(ctx, start, 1000)
				if err != nil {
					return fmt.Errorf("listing under-replicated ledgers: %w", err)
				}
				if len(page) == 0 {
					break
				}
				for _, r := range page {
					if slices.Contains(r.MissingReplicas, bookie) {
						urs++
					}
				}
				start = page[len(page)-1].LedgerID + 1
			}
		}
		if o.Progress != nil {
			o.Progress(len(ids), urs)
		}
		if len(ids) == 0 && urs == 0 {
			break
		}
		if err := sleep(ctx, o.Clock, pause); err != nil {
			return err
		}
	}
	// Check again that it did not come back meanwhile before removing its
	// identity.
	reg, err = ListBookies(ctx, md, true, true)
	if err != nil {
		return err
	}
	for _, b := range reg {
		if b.ID == string(bookie) {
			return fmt.Errorf("%w: %s registered again as %s while draining", ErrStillRegistered, bookie, b.State)
		}
	}
	if err := md.DeleteCookie(ctx, bookie, metadata.VersionAny); err != nil && !errors.Is(err, metadata.ErrNoSuchCookie) {
		return fmt.Errorf("deleting the cookie of %s: %w", bookie, err)
	}
	return nil
}

// sleep waits d on c (clock.Sleep); a d ≤ 0 does not wait and returns
// ctx's error if it has ended.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return clock.Sleep(ctx, c, d)
}
