package admin

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	iadmin "github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
)

// underReplicatedPage is how many records one listing request fetches.
const underReplicatedPage = 1000

// UnderReplicatedLedger is a ledger the auditor marked under-replicated
// and the replication workers have not repaired yet.
type UnderReplicatedLedger struct {
	// LedgerID is the ledger marked.
	LedgerID int64 `json:"ledgerId"`
	// MissingReplicas are the bookies whose copies are missing, ascending.
	MissingReplicas []string `json:"missingReplicas"`
	// Marked is when the ledger was first marked (zero if unknown).
	Marked time.Time `json:"marked"`
	// ReplicationWorker is the worker re-replicating the ledger now, with
	// UnderReplicatedOptions.ReplicationWorker ("" when none holds it).
	ReplicationWorker string `json:"replicationWorker,omitempty"`
}

// UnderReplicatedOptions filter UnderReplicatedLedgers. The zero value
// lists every record.
type UnderReplicatedOptions struct {
	// MissingReplica keeps only ledgers missing this bookie;
	// ExcludingMissingReplica drops the ledgers missing that one (Java:
	// listunderreplicated -missingreplica / -excludingmissingreplica).
	MissingReplica, ExcludingMissingReplica string
	// ReplicationWorker fills each ledger's ReplicationWorker (Java:
	// getReplicationWorkerIdRereplicatingLedger; -printreplicationworkerid).
	ReplicationWorker bool
}

// UnderReplicatedLedgers streams the under-replicated ledgers in
// ascending id order, a page at a time (Java:
// LedgerUnderreplicationManager.listLedgersToRereplicate(predicate); the
// shell's listunderreplicated). An error is yielded once and
// ends the sequence; ErrNotSupported on a metadata store without
// AutoRecovery.
func (a *Admin) UnderReplicatedLedgers(ctx context.Context, o UnderReplicatedOptions) iter.Seq2[UnderReplicatedLedger, error] {
	return func(yield func(UnderReplicatedLedger, error) bool) {
		ar, err := a.autoRecovery()
		if err != nil {
			yield(UnderReplicatedLedger{}, err)
			return
		}
		var rw metadata.ReplicationWorkerReader
		if o.ReplicationWorker {
			var ok bool
			if rw, ok = a.md.(metadata.ReplicationWorkerReader); !ok {
				yield(UnderReplicatedLedger{}, &publicErr{public: ErrNotSupported,
					cause: fmt.Errorf("the replication worker of a ledger: %w", metadata.ErrNotSupported)})
				return
			}
		}
		for start := int64(0); ; {
			page, err := ar.ListUnderReplicatedLedgers(ctx, start, underReplicatedPage)
			if err != nil {
				yield(UnderReplicatedLedger{}, publicError(fmt.Errorf("listing under-replicated ledgers: %w", err)))
				return
			}
			if len(page) == 0 {
				return
			}
			for _, r := range page {
				has := func(b string) bool { return slices.Contains(r.MissingReplicas, metadata.BookieID(b)) }
				if o.MissingReplica != "" && !has(o.MissingReplica) || o.ExcludingMissingReplica != "" && has(o.ExcludingMissingReplica) {
					continue
				}
				u := underReplicated(r)
				if rw != nil {
					switch worker, err := rw.ReplicationWorker(ctx, r.LedgerID); {
					case err == nil:
						u.ReplicationWorker = string(worker)
					case !errors.Is(err, metadata.ErrNotFound):
						yield(UnderReplicatedLedger{}, publicError(fmt.Errorf("reading the lock of ledger %d: %w", r.LedgerID, err)))
						return
					}
				}
				if !yield(u, nil) {
					return
				}
			}
			start = page[len(page)-1].LedgerID + 1
		}
	}
}

func underReplicated(r metadata.UnderReplicatedLedger) UnderReplicatedLedger {
	u := UnderReplicatedLedger{LedgerID: r.LedgerID, MissingReplicas: make([]string, 0, len(r.MissingReplicas)), Marked: r.Ctime}
	for _, m := range r.MissingReplicas {
		u.MissingReplicas = append(u.MissingReplicas, string(m))
	}
	return u
}

// UnderReplication reports whether ledger id is marked under-replicated
// and, if so, its record (Java: LedgerUnderreplicationManager's
// getLedgerUnreplicationInfo). ErrInvalidLedgerID; a ledger that is not
// marked (or does not exist) gives ok false.
func (a *Admin) UnderReplication(ctx context.Context, id int64) (u UnderReplicatedLedger, ok bool, err error) {
	if err := validLedger(id); err != nil {
		return u, false, err
	}
	ar, err := a.autoRecovery()
	if err != nil {
		return u, false, err
	}
	r, err := ar.ReadUnderReplicatedLedger(ctx, id)
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return u, false, nil
	case err != nil:
		return u, false, publicError(fmt.Errorf("reading the under-replication record of ledger %d: %w", id, err))
	}
	return underReplicated(r), true, nil
}

// Auditor returns the id of the elected AutoRecovery auditor (Java:
// getCurrentAuditor; the shell's whoisauditor), or ErrNoAuditor.
func (a *Admin) Auditor(ctx context.Context) (string, error) {
	ar, err := a.autoRecovery()
	if err != nil {
		return "", err
	}
	id, err := ar.Auditor(ctx)
	if errors.Is(err, metadata.ErrNotFound) {
		return "", ErrNoAuditor
	}
	if err != nil {
		return "", publicError(err)
	}
	return string(id), nil
}

// IsAutoRecoveryEnabled reports whether re-replication is enabled
// cluster-wide (Java: LedgerUnderreplicationManager.isLedgerReplicationEnabled;
// the shell's autorecovery); it is until disabled.
func (a *Admin) IsAutoRecoveryEnabled(ctx context.Context) (bool, error) {
	ar, err := a.autoRecovery()
	if err != nil {
		return false, err
	}
	on, err := ar.ReplicationEnabled(ctx)
	return on, publicError(err)
}

// EnableAutoRecovery resumes re-replication cluster-wide (Java:
// LedgerUnderreplicationManager.enableLedgerReplication; autorecovery
// -enable): the auditor marks ledgers again and the
// replication workers take them.
func (a *Admin) EnableAutoRecovery(ctx context.Context) error { return a.setAutoRecovery(ctx, true) }

// DisableAutoRecovery stops re-replication cluster-wide (Java:
// LedgerUnderreplicationManager.disableLedgerReplication; autorecovery
// -disable): the auditor stops marking ledgers and the
// replication workers stop taking them; work in progress finishes.
func (a *Admin) DisableAutoRecovery(ctx context.Context) error { return a.setAutoRecovery(ctx, false) }

func (a *Admin) setAutoRecovery(ctx context.Context, on bool) error {
	ar, err := a.autoRecovery()
	if err != nil {
		return err
	}
	if err := ar.SetReplicationEnabled(ctx, on); err != nil {
		return publicError(fmt.Errorf("switching AutoRecovery: %w", err))
	}
	return nil
}

// LostBookieRecoveryDelay returns the stored delay the auditor waits after
// a bookie disappears before marking its ledgers (Java:
// getLostBookieRecoveryDelay). stored is false when none is stored: the
// auditors then use their configured default.
func (a *Admin) LostBookieRecoveryDelay(ctx context.Context) (d time.Duration, stored bool, err error) {
	ar, err := a.autoRecovery()
	if err != nil {
		return 0, false, err
	}
	d, err = ar.LostBookieRecoveryDelay(ctx)
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, publicError(err)
	}
	return d, true, nil
}

// SetLostBookieRecoveryDelay stores the delay (Java:
// setLostBookieRecoveryDelay, which takes seconds). Storing the current
// value again makes the auditor audit now. A negative d is an error.
func (a *Admin) SetLostBookieRecoveryDelay(ctx context.Context, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("admin: lost bookie recovery delay %v: must not be negative", d)
	}
	ar, err := a.autoRecovery()
	if err != nil {
		return err
	}
	if err := ar.SetLostBookieRecoveryDelay(ctx, d); err != nil {
		return publicError(fmt.Errorf("setting the lost bookie recovery delay: %w", err))
	}
	return nil
}

// TriggerAudit asks the auditor to check every ledger against the
// available bookies now (Java: triggerAudit), by storing the lost-bookie
// recovery delay again. ErrAutoRecoveryDisabled, ErrNoAuditor.
func (a *Admin) TriggerAudit(ctx context.Context) error {
	ar, err := a.autoRecovery()
	if err != nil {
		return err
	}
	return publicError(iadmin.TriggerAudit(ctx, ar))
}

// DecommissionOptions configure DecommissionBookie.
type DecommissionOptions struct {
	// InitialWait is waited after triggering the audit, before the first
	// check (Java waits 30 s). The checks read the ledgers themselves, so
	// 0 is safe.
	InitialWait time.Duration
	// PollInterval is the first pause between checks; it doubles up to
	// MaxPollInterval. Defaults 1 s and 5 min.
	PollInterval, MaxPollInterval time.Duration
	// Progress, if not nil, is called after each check (Op
	// "decommission").
	Progress func(Progress)
}

// DecommissionBookie takes a stopped bookie out of the cluster for good
// (Java: decommissionBookie): it refuses with ErrStillRegistered while the
// bookie is registered, asks the auditor to audit now (ErrNoAuditor or
// ErrAutoRecoveryDisabled if it cannot), waits until no ledger stores
// entries on the bookie and no under-replication record names it, and
// deletes its cookie so its identity may be reused. The replication
// workers of AutoRecovery copy the data; this only waits for them, until
// done or ctx ends. ErrInvalidBookieID for a malformed id.
func (a *Admin) DecommissionBookie(ctx context.Context, bookie string, o DecommissionOptions) error {
	if err := validBookie(bookie); err != nil {
		return err
	}
	if _, err := a.autoRecovery(); err != nil {
		return err
	}
	opts := iadmin.DecommissionOptions{InitialWait: o.InitialWait, PollInterval: o.PollInterval,
		MaxPollInterval: o.MaxPollInterval, Clock: clock.Real{}}
	if o.Progress != nil {
		opts.Progress = func(ledgers, urs int) {
			o.Progress(Progress{Op: "decommission", LedgersRemaining: ledgers, UnderReplicated: urs})
		}
	}
	return publicError(iadmin.DecommissionBookie(ctx, a.md, metadata.BookieID(bookie), opts))
}
