package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/foliodb/folio/client"
	iadmin "github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
)

// LedgerOnBookies is one ledger of LedgersContainingBookies.
type LedgerOnBookies struct {
	// LedgerID is the ledger.
	LedgerID int64 `json:"ledgerId"`
	// State is the ledger's state (OPEN, IN_RECOVERY, CLOSED).
	State string `json:"state"`
	// Ensembles are all its ensemble segments, not only those naming the
	// bookies.
	Ensembles []client.Ensemble `json:"ensembles"`
}

// LedgersContainingBookies returns, in ascending id order, the ledgers
// whose ensembles name any of the bookies, in any segment (Java:
// getLedgersContainBookies; the shell's recover -query). It reads the
// metadata only and changes nothing. ErrInvalidBookieID for a malformed id.
func (a *Admin) LedgersContainingBookies(ctx context.Context, bookies ...string) ([]LedgerOnBookies, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	var ids []int64
	for _, b := range bookies {
		if err := validBookie(b); err != nil {
			return nil, err
		}
		got, err := iadmin.LedgersOnBookie(ctx, a.md, metadata.BookieID(b), true)
		if err != nil {
			return nil, publicError(err)
		}
		ids = append(ids, got...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := []LedgerOnBookies{}
	for _, id := range ids {
		m, _, err := a.md.ReadLedger(ctx, id)
		if errors.Is(err, metadata.ErrNoSuchLedger) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, publicError(fmt.Errorf("reading ledger %d: %w", id, err))
		}
		out = append(out, LedgerOnBookies{LedgerID: id, State: m.State.String(), Ensembles: ensembles(m.Ensembles)})
	}
	return out, nil
}

func ensembles(segs []metadata.Segment) []client.Ensemble {
	out := make([]client.Ensemble, 0, len(segs))
	for _, s := range segs {
		e := client.Ensemble{FirstEntryID: s.FirstEntryID, Bookies: make([]string, 0, len(s.Ensemble))}
		for _, b := range s.Ensemble {
			e.Bookies = append(e.Bookies, string(b))
		}
		out = append(out, e)
	}
	return out
}

// RecoverBookieOptions configure RecoverBookie. The zero value recovers
// every ledger naming the bookies, fencing open ones, unthrottled.
type RecoverBookieOptions struct {
	// DryRun changes nothing: the result's Plan says, per ledger, which
	// fragments name the failed bookies and whether the ledger would be
	// fenced first (Java: the shell's recover -dryrun).
	DryRun bool
	// SkipOpenLedgers leaves ledgers that are not CLOSED and whose last
	// ensemble names a failed bookie alone, instead of fencing and closing
	// them first (Java: recoverBookieData's skipOpenLedgers).
	SkipOpenLedgers bool
	// Ledgers, if not empty, restricts the recovery to these ledgers
	// (Java: recoverBookieData(ledgerId, …); recover -ledger).
	Ledgers []int64
	// RateLimitBytesPerSecond bounds the bytes copied (0: unlimited; Java:
	// replicationRateByBytes).
	RateLimitBytesPerSecond int
	// DeleteCookies deletes the failed bookies' cookies once their data is
	// recovered (Java: recover -deleteCookie): when no ledger failed, or
	// with SkipUnrecoverableLedgers. Never with DryRun.
	DeleteCookies bool
	// SkipUnrecoverableLedgers makes DeleteCookies apply even though some
	// ledgers failed (Java: recover -skipUnrecoverableLedgers). The
	// failures are still in the result.
	SkipUnrecoverableLedgers bool
	// Progress, if not nil, is called after each ledger (Op "recover").
	Progress func(Progress)
}

// PlannedLedger is one ledger of a dry run: what RecoverBookie would do.
type PlannedLedger struct {
	// LedgerID is the ledger, State its state now.
	LedgerID int64  `json:"ledgerId"`
	State    string `json:"state"`
	// Fence: the ledger is not closed and its last ensemble names a failed
	// bookie, so it would be fenced and closed first; Skip: it would be
	// left alone instead (SkipOpenLedgers).
	Fence bool `json:"fence"`
	Skip  bool `json:"skip"`
	// Fragments are the segments naming a failed bookie, whose entries
	// would be copied.
	Fragments []PlannedFragment `json:"fragments"`
}

// PlannedFragment is a segment naming failed bookies. LastEntryID is -1
// while the ledger's last segment is open (its end comes with the fence).
type PlannedFragment struct {
	// FirstEntryID and LastEntryID bound the segment's entries.
	FirstEntryID int64 `json:"firstEntryId"`
	LastEntryID  int64 `json:"lastEntryId"`
	// Ensemble is the segment's ensemble.
	Ensemble []string `json:"ensemble"`
	// Replace are the failed bookies of Ensemble.
	Replace []string `json:"replace"`
}

// LedgerFailure is a ledger RecoverBookie could not recover, and why.
type LedgerFailure struct {
	// LedgerID is the ledger, Err why it could not be recovered.
	LedgerID int64 `json:"ledgerId"`
	Err      error `json:"-"`
}

// RecoverBookieResult says what RecoverBookie did, or would do (DryRun).
type RecoverBookieResult struct {
	// Ledgers recovered, Fragments replicated and Entries copied.
	Ledgers   int `json:"ledgersRecovered"`
	Fragments int `json:"fragmentsReplicated"`
	Entries   int `json:"entriesCopied"`
	// Skipped are the open ledgers left alone (SkipOpenLedgers),
	// ascending.
	Skipped []int64 `json:"skippedOpenLedgers"`
	// Failed are the ledgers that could not be recovered, ascending by id;
	// the others were. Running RecoverBookie again retries them.
	Failed []LedgerFailure `json:"-"`
	// DeletedCookies are the bookies whose cookie DeleteCookies deleted.
	DeletedCookies []string `json:"deletedCookies,omitempty"`
	// Plan is what a dry run found (nil without DryRun).
	Plan []PlannedLedger `json:"plan,omitempty"`
}

// RecoverBookie re-replicates the data of failed bookies to other
// writable bookies (Java: recoverBookieData): for each ledger whose
// ensembles name one of them, a ledger that is not CLOSED and has a failed
// bookie in its last ensemble is first fenced and closed so that no live
// writer races the copy; then every fragment naming a failed bookie is
// read from its surviving replicas (digests checked), written to a
// replacement with RECOVERY_ADD (chosen by the placement block of
// Config.Client, bound to the ledger's quorums, as that client would
// place an ensemble change; at random without one), and its ensemble
// updated by
// compare-and-set. The failed bookies are never read. A ledger that fails
// is reported in Failed and the others go on; the call is idempotent and
// may be re-run. ErrInvalidBookieID for a malformed id; an id no ledger
// names recovers nothing.
func (a *Admin) RecoverBookie(ctx context.Context, bookies []string, o RecoverBookieOptions) (RecoverBookieResult, error) {
	res := RecoverBookieResult{Skipped: []int64{}, Failed: []LedgerFailure{}}
	if err := a.check(); err != nil {
		return res, err
	}
	if len(bookies) == 0 {
		return res, fmt.Errorf("%w: no bookie to recover", ErrInvalidBookieID)
	}
	failed := make([]metadata.BookieID, 0, len(bookies))
	for _, b := range bookies {
		if err := validBookie(b); err != nil {
			return res, err
		}
		failed = append(failed, metadata.BookieID(b))
	}
	for _, id := range o.Ledgers {
		if err := validLedger(id); err != nil {
			return res, err
		}
	}
	var c *client.Client
	if !o.DryRun {
		var err error
		if c, err = a.client(ctx); err != nil {
			return res, err
		}
	}
	opts := iadmin.RecoverBookieOptions{SkipOpenLedgers: o.SkipOpenLedgers, RateLimitBytesPerSecond: o.RateLimitBytesPerSecond,
		Ledgers: o.Ledgers, DryRun: o.DryRun, PlacementSource: a.placement}
	if o.Progress != nil {
		opts.Progress = func(done, total, entries int) {
			o.Progress(Progress{Op: "recover", LedgersDone: done, Ledgers: total, EntriesCopied: entries})
		}
	}
	r, err := iadmin.RecoverBookie(ctx, c, a.bks, a.md, failed, opts)
	res.Ledgers, res.Fragments, res.Entries = r.Ledgers, r.Fragments, r.Entries
	res.Skipped = append(res.Skipped, r.Skipped...)
	ids := make([]int64, 0, len(r.Failed))
	for id := range r.Failed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		res.Failed = append(res.Failed, LedgerFailure{LedgerID: id, Err: errors.New(r.Failed[id])})
	}
	if err != nil {
		return res, publicError(err)
	}
	if o.DryRun {
		res.Plan = []PlannedLedger{}
		for _, p := range r.Plan {
			pl := PlannedLedger{LedgerID: p.LedgerID, State: p.State, Fence: p.Fence, Skip: p.Skip, Fragments: []PlannedFragment{}}
			for _, f := range p.Fragments {
				pl.Fragments = append(pl.Fragments, PlannedFragment(f))
			}
			res.Plan = append(res.Plan, pl)
		}
		return res, nil
	}
	if o.DeleteCookies && (len(res.Failed) == 0 || o.SkipUnrecoverableLedgers) {
		for _, b := range bookies {
			deleted, err := a.deleteCookie(ctx, b)
			if err != nil {
				return res, err
			}
			if deleted {
				res.DeletedCookies = append(res.DeletedCookies, b)
			}
		}
	}
	return res, nil
}

// RecoverLedgerOptions configure RecoverLedger.
type RecoverLedgerOptions struct {
	// Force re-runs recovery on a CLOSED ledger: its metadata is moved
	// CLOSED → IN_RECOVERY by compare-and-set and recovered again, which
	// may move its end. Only for repairing a ledger closed at a wrong
	// point; readers may have seen the old end.
	Force bool
	// Password is used only for legacy ledgers whose metadata stores no
	// password; otherwise the ledger's own is used.
	Password []byte
	// DigestType goes with Password (ignored without it).
	DigestType client.DigestType
}

// RecoverLedgerResult is the ledger after RecoverLedger, as stored.
type RecoverLedgerResult struct {
	// LedgerID is the ledger; State, LastEntryID and Length are its
	// state, last entry and length in bytes as stored after the call.
	LedgerID    int64  `json:"ledgerId"`
	State       string `json:"state"`
	LastEntryID int64  `json:"lastEntryId"`
	Length      int64  `json:"length"`
	// AlreadyClosed: the ledger was CLOSED and Force was not given;
	// nothing was changed.
	AlreadyClosed bool `json:"alreadyClosed"`
	// Forced: a CLOSED ledger was recovered again (Force), and
	// PreviousLastEntryID was its end before (-1 otherwise).
	Forced              bool  `json:"forced"`
	PreviousLastEntryID int64 `json:"previousLastEntryId"`
	// Ensembles are the ledger's ensemble segments as stored.
	Ensembles []client.Ensemble `json:"ensembles"`
	// Version is the metadata's version in the store.
	Version int64 `json:"version"`
}

// RecoverLedger recovers one ledger: it marks it IN_RECOVERY, fences its
// bookies (its writer, if alive, can add nothing more), finds its last
// entry and closes it there (Java: BookKeeperAdmin.openLedger, which
// recovers; the shell's recoverledger). A CLOSED ledger is left as it is unless
// o.Force. ErrInvalidLedgerID, ErrNoSuchLedger, ErrNoPassword; a recovery
// that cannot finish leaves the ledger IN_RECOVERY
// (client.ErrLedgerRecovery) and may be retried.
func (a *Admin) RecoverLedger(ctx context.Context, id int64, o RecoverLedgerOptions) (RecoverLedgerResult, error) {
	res := RecoverLedgerResult{LedgerID: id, PreviousLastEntryID: -1, Ensembles: []client.Ensemble{}}
	if err := validLedger(id); err != nil {
		return res, err
	}
	c, err := a.client(ctx)
	if err != nil {
		return res, err
	}
	r, err := iadmin.RecoverLedger(ctx, c, a.md, id, iadmin.RecoverOptions{Force: o.Force, Password: o.Password, DigestType: o.DigestType})
	res.State, res.LastEntryID, res.Length, res.AlreadyClosed = r.State, r.LastEntryID, r.Length, r.AlreadyClosed
	res.Forced, res.PreviousLastEntryID, res.Version = r.Forced, r.PreviousLastEntryID, r.Version
	res.Ensembles = ensembles(r.Ensembles)
	return res, publicError(err)
}
