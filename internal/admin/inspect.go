package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/wire"
)

// LedgerInspection is what InspectLedger found: the metadata, what every
// bookie of every fragment holds, and what a recovery would conclude. It is
// read without fencing or changing anything, so it is a snapshot: a live
// writer may have moved on by the time it is printed.
type LedgerInspection struct {
	LedgerID        int64  `json:"ledgerId"`
	State           string `json:"state"`
	EnsembleSize    int    `json:"ensembleSize"`
	WriteQuorumSize int    `json:"writeQuorumSize"`
	AckQuorumSize   int    `json:"ackQuorumSize"`
	// LastEntryID is the metadata's (-1 while the ledger is open).
	LastEntryID int64 `json:"lastEntryId"`
	// Bookies are every bookie of any ensemble, in first-appearance order.
	Bookies   []BookieLedgerView `json:"bookies"`
	Fragments []FragmentView     `json:"fragments"`
	Recovery  RecoveryPrediction `json:"recovery"`
}

// BookieLedgerView is one bookie's view of the ledger, from
// GET_LIST_OF_ENTRIES_OF_LEDGER and READ_LAC (neither fences).
type BookieLedgerView struct {
	ID string `json:"id"`
	// Reachable is false when the bookie did not answer; Error says why.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// HasLedger is false when the bookie answered "no such ledger".
	HasLedger bool `json:"hasLedger"`
	// Entries are the entry ids the bookie holds, as runs.
	Entries    []Run `json:"entries"`
	EntryCount int64 `json:"entryCount"`
	// LAC is the highest LAC the bookie knows (explicit LAC or the one
	// piggybacked on its last entry), -1 if none.
	LAC int64 `json:"lac"`
	// Fenced is the bookie's fence bit of the ledger, null when unknown:
	// the BookKeeper protocol offers no request that reports it without
	// setting it (a fencing read would change the ledger), so it comes from
	// the bookie's admin HTTP server (FillFenceState), when known.
	Fenced *bool `json:"fenced"`
	// FenceSource is the admin HTTP server Fenced came from.
	FenceSource string `json:"fenceSource,omitempty"`
}

// FragmentView is one ensemble segment and, for each of its bookies, the
// entries of the segment that bookie should hold and is missing.
type FragmentView struct {
	FirstEntryID int64 `json:"firstEntryId"`
	// LastEntryID is the segment's last entry: the next segment's first
	// minus one, or for the last segment the ledger's end (closed) or the
	// highest entry any bookie holds or any LAC names (open). -1 when the
	// segment is empty.
	LastEntryID int64                `json:"lastEntryId"`
	Bookies     []FragmentBookieView `json:"bookies"`
}

// FragmentBookieView is one bookie of a fragment.
type FragmentBookieView struct {
	ID string `json:"id"`
	// Expected is how many of the fragment's entries fall in this bookie's
	// write sets; Held how many of those it holds.
	Expected int64 `json:"expected"`
	Held     int64 `json:"held"`
	// Missing are the expected entries it lacks (first maxMissingListed),
	// MissingCount all of them; both unknown (0) when the bookie did not
	// answer.
	Missing      []int64 `json:"missing"`
	MissingCount int64   `json:"missingCount"`
	Reachable    bool    `json:"reachable"`
}

// RecoveryPrediction is what a ledger recovery would conclude from the
// bookies' answers (spec/protocol.md §4): it starts after
// max(LAC, first entry of the last fragment − 1), recovers every entry some
// bookie of its write set holds, and ends before the first entry that
// Qw − Qa + 1 bookies of its write set explicitly lack.
type RecoveryPrediction struct {
	// Outcome is "closed" (nothing to recover: the metadata is CLOSED),
	// "end" (recovery would close the ledger at LastEntryID) or
	// "undecided" (too few bookies answered to prove where the ledger
	// ends; recovery would fail until they are back).
	Outcome string `json:"outcome"`
	// LAC is the highest LAC any bookie reported.
	LAC int64 `json:"lac"`
	// StartEntryID is the first entry recovery would read.
	StartEntryID int64 `json:"startEntryId"`
	// LastEntryID is where the ledger ends ("closed", "end"), or the last
	// entry that could be decided ("undecided").
	LastEntryID int64 `json:"lastEntryId"`
	// UndecidedEntryID is the entry that could not be decided, for
	// "undecided"; -1 otherwise.
	UndecidedEntryID int64  `json:"undecidedEntryId"`
	Reason           string `json:"reason"`
}

// Outcomes of RecoveryPrediction.
const (
	OutcomeClosed    = "closed"
	OutcomeEnd       = "end"
	OutcomeUndecided = "undecided"
)

// maxMissingListed bounds FragmentBookieView.Missing.
const maxMissingListed = 100

// maxScan bounds the entries one fragment's check walks, so an inspection
// of a huge ledger stays quick; beyond it the counts are of the first
// maxScan entries and the reason says so.
const maxScan = 50_000_000

// InspectLedger reads the ledger's metadata and asks each of its bookies
// which entries it holds and its LAC. It changes nothing: no fencing read,
// no metadata write.
func InspectLedger(ctx context.Context, md metadata.LedgerManager, bk *rereplication.Bookies, id int64) (*LedgerInspection, error) {
	m, _, err := md.ReadLedger(ctx, id)
	if err != nil {
		return nil, err
	}
	var dig *digest.Digester
	if m.HasPassword {
		dig, _ = digest.New(digest.Type(m.DigestType), m.Password) // nil: LACs are parsed unverified
	}
	ins := &LedgerInspection{
		LedgerID: id, State: m.State.String(), EnsembleSize: m.EnsembleSize,
		WriteQuorumSize: m.WriteQuorum, AckQuorumSize: m.AckQuorum, LastEntryID: m.LastEntryID,
		Bookies: []BookieLedgerView{}, Fragments: []FragmentView{},
	}
	index := map[metadata.BookieID]int{}
	for _, s := range m.Ensembles {
		for _, b := range s.Ensemble {
			if _, ok := index[b]; !ok {
				index[b] = len(ins.Bookies)
				ins.Bookies = append(ins.Bookies, BookieLedgerView{ID: string(b), LAC: -1, Entries: []Run{}})
			}
		}
	}
	avail := make([]Availability, len(ins.Bookies))
	var wg sync.WaitGroup
	for i := range ins.Bookies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			avail[i] = inspectBookie(ctx, bk, &ins.Bookies[i], id, dig)
		}()
	}
	wg.Wait()

	maxSeen := int64(-1)
	lac := int64(-1)
	for i, v := range ins.Bookies {
		maxSeen = max(maxSeen, avail[i].Max())
		lac = max(lac, v.LAC)
	}
	p := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}
	for si, s := range m.Ensembles {
		f := FragmentView{FirstEntryID: s.FirstEntryID, Bookies: []FragmentBookieView{}}
		switch {
		case si+1 < len(m.Ensembles):
			f.LastEntryID = m.Ensembles[si+1].FirstEntryID - 1
		case m.IsClosed():
			f.LastEntryID = m.LastEntryID
		default:
			f.LastEntryID = max(maxSeen, lac)
		}
		if f.LastEntryID < f.FirstEntryID {
			f.LastEntryID = -1
		}
		for bi, b := range s.Ensemble {
			k := index[b]
			fb := FragmentBookieView{ID: string(b), Missing: []int64{}, Reachable: ins.Bookies[k].Reachable}
			if f.LastEntryID >= 0 {
				last := min(f.LastEntryID, f.FirstEntryID+maxScan-1)
				for e := f.FirstEntryID; e <= last; e++ {
					if p.WriteSetPosition(e, bi) < 0 {
						continue
					}
					fb.Expected++
					switch {
					case avail[k].Has(e):
						fb.Held++
					case fb.Reachable:
						fb.MissingCount++
						if len(fb.Missing) < maxMissingListed {
							fb.Missing = append(fb.Missing, e)
						}
					}
				}
			}
			f.Bookies = append(f.Bookies, fb)
		}
		ins.Fragments = append(ins.Fragments, f)
	}
	ins.Recovery = predictRecovery(m, p, ins.Bookies, avail, index, lac)
	return ins, nil
}

// inspectBookie fills v from one bookie's GET_LIST_OF_ENTRIES_OF_LEDGER and
// READ_LAC answers and returns what it holds.
func inspectBookie(ctx context.Context, b *rereplication.Bookies, v *BookieLedgerView, id int64, dig *digest.Digester) Availability {
	var a Availability
	list := &wire.Request{Header: wire.Header{Op: wire.OpGetListOfEntriesOfLedger}, Has: wire.BodyGetListOfEntries, ListEntriesLedgerID: id}
	err := b.Call(ctx, v.ID, id, list, func(r *wire.Response) error {
		if err := r.ListEntries.Status.Err(); err != nil {
			return err
		}
		var err error
		a, err = DecodeAvailability(r.ListEntries.Availability)
		return err
	})
	switch {
	case errors.Is(err, wire.ErrNoSuchLedger):
		v.Reachable = true
		return a
	case err != nil:
		v.Error = fmt.Sprintf("list of entries: %v", err)
		return a
	}
	v.Reachable, v.HasLedger = true, true
	v.Entries, v.EntryCount = append(v.Entries, a.Runs...), a.Count()

	readLAC := ledgerexec.ReadLACRequest(id)
	err = b.Call(ctx, v.ID, id, &readLAC, func(r *wire.Response) error {
		if err := r.ReadLAC.Status.Err(); err != nil {
			return err
		}
		if r.ReadLAC.HasLACBody {
			if lac, err := rereplication.ParseLAC(dig, r.ReadLAC.LACBody, id); err == nil {
				v.LAC = max(v.LAC, lac)
			}
		}
		if r.ReadLAC.HasLastEntryBody {
			if lac, err := rereplication.ParseEntryLAC(dig, r.ReadLAC.LastEntryBody, id); err == nil {
				v.LAC = max(v.LAC, lac)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, wire.ErrNoSuchEntry) && !errors.Is(err, wire.ErrNoSuchLedger) {
		v.Error = fmt.Sprintf("read LAC: %v", err)
	}
	return a
}

// predictRecovery applies recovery's rules to the answers.
func predictRecovery(m *metadata.LedgerMetadata, p quorum.Params, views []BookieLedgerView, avail []Availability,
	index map[metadata.BookieID]int, lac int64) RecoveryPrediction {
	r := RecoveryPrediction{LAC: lac, UndecidedEntryID: -1}
	if m.IsClosed() {
		r.Outcome, r.LastEntryID, r.StartEntryID = OutcomeClosed, m.LastEntryID, m.LastEntryID+1
		r.Reason = "the ledger is CLOSED; recovery changes nothing"
		return r
	}
	lastSeg := m.Ensembles[len(m.Ensembles)-1]
	start := max(lac, lastSeg.FirstEntryID-1)
	r.StartEntryID, r.LastEntryID = start+1, start
	// The loop ends: an entry past every bookie's highest has no holder.
	for e := start + 1; ; e++ {
		holders, negatives := 0, 0
		for _, bi := range p.WriteSet(e) {
			k := index[lastSeg.Ensemble[bi]]
			switch {
			case avail[k].Has(e):
				holders++
			case views[k].Reachable:
				negatives++ // the bookie answered and lacks it: an explicit "no such entry"
			}
		}
		switch {
		case holders > 0:
			r.LastEntryID = e
			continue
		case negatives >= p.NegativeThreshold():
			r.Outcome = OutcomeEnd
			r.Reason = fmt.Sprintf("entry %d is absent from %d bookies of its write set (≥ Qw−Qa+1 = %d): it was never acknowledged",
				e, negatives, p.NegativeThreshold())
		default:
			r.Outcome, r.UndecidedEntryID = OutcomeUndecided, e
			r.Reason = fmt.Sprintf("entry %d: no answering bookie holds it, but only %d of its write set answered (need %d negatives); recovery would fail until more bookies are back",
				e, negatives, p.NegativeThreshold())
		}
		return r
	}
}
