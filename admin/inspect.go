package admin

import (
	"context"
	"fmt"
	"net/http"

	iadmin "github.com/foliodb/folio/internal/admin"
)

// InspectLedgerOptions configure InspectLedger. The zero value reads no
// fence state.
type InspectLedgerOptions struct {
	// AdminHTTP maps bookie ids to their admin HTTP servers ("host:port",
	// or "https://host:port" for one serving TLS), from which each
	// bookie's fence bit of the ledger is read (GET
	// /api/v1/bookie/ledger/info, which never fences): the BookKeeper
	// protocol has no request that reports the bit without setting it.
	AdminHTTP map[string]string
	// SharedAdminHTTP are admin HTTP servers serving several bookies
	// (folio standalone's), asked for every bookie AdminHTTP does not name.
	SharedAdminHTTP []string
	// HTTPClient makes those requests (with the TLS configuration an
	// https server needs); nil means a client with a 5 s timeout.
	HTTPClient *http.Client
	// HTTPToken, when set, is sent as a bearer token (a bookie with
	// httpServerAuthTokenPath requires it).
	HTTPToken string
}

// LedgerInspection is what InspectLedger found: the ledger's metadata,
// what each of its bookies holds, what each fragment's bookies miss, and
// what a recovery would conclude. It is a snapshot: a live writer may have
// moved on since.
type LedgerInspection struct {
	// LedgerID is the ledger inspected.
	LedgerID int64 `json:"ledgerId"`
	// State is the metadata's state: OPEN, IN_RECOVERY or CLOSED.
	State string `json:"state"`
	// EnsembleSize, WriteQuorumSize and AckQuorumSize are the metadata's.
	EnsembleSize    int `json:"ensembleSize"`
	WriteQuorumSize int `json:"writeQuorumSize"`
	AckQuorumSize   int `json:"ackQuorumSize"`
	// LastEntryID is the metadata's (-1 while the ledger is open).
	LastEntryID int64 `json:"lastEntryId"`
	// Bookies are every bookie of any ensemble, in first-appearance order.
	Bookies []BookieLedgerView `json:"bookies"`
	// Fragments are the ensemble segments, in entry order.
	Fragments []FragmentView `json:"fragments"`
	// Recovery is what a ledger recovery would conclude now.
	Recovery RecoveryPrediction `json:"recovery"`
}

// EntryRange is the entries First … Last, inclusive.
type EntryRange struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// BookieLedgerView is one bookie's view of the ledger, from its answers to
// GET_LIST_OF_ENTRIES_OF_LEDGER and READ_LAC (neither fences).
type BookieLedgerView struct {
	// ID is the bookie's id.
	ID string `json:"id"`
	// Reachable is false when the bookie did not answer; Error says why.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// HasLedger is false when the bookie answered "no such ledger".
	HasLedger bool `json:"hasLedger"`
	// Entries are the entry ids the bookie holds, as ascending ranges, and
	// EntryCount how many.
	Entries    []EntryRange `json:"entries"`
	EntryCount int64        `json:"entryCount"`
	// LAC is the highest last-add-confirmed the bookie knows, -1 if none.
	LAC int64 `json:"lac"`
	// Fenced is the bookie's fence bit of the ledger, nil when unknown: it
	// is read only from the admin HTTP servers InspectLedgerOptions names.
	// FenceSource is the server it came from.
	Fenced      *bool  `json:"fenced"`
	FenceSource string `json:"fenceSource,omitempty"`
}

// FragmentView is one ensemble segment and, for each of its bookies, the
// entries of the segment it should hold and misses.
type FragmentView struct {
	// FirstEntryID is the segment's first entry.
	FirstEntryID int64 `json:"firstEntryId"`
	// LastEntryID is the segment's last entry: the next segment's first
	// minus one, or for the last segment the ledger's end (closed) or the
	// highest entry any bookie holds or any LAC names (open); -1 when the
	// segment is empty.
	LastEntryID int64 `json:"lastEntryId"`
	// Bookies are the segment's ensemble, in ensemble order.
	Bookies []FragmentBookieView `json:"bookies"`
}

// FragmentBookieView is one bookie of a fragment: of the Expected entries
// in its write sets it holds Held; Missing lists the first 100 it lacks
// and MissingCount counts them all (both 0 when it did not answer).
type FragmentBookieView struct {
	// ID is the bookie's id.
	ID string `json:"id"`
	// Expected is how many of the fragment's entries fall in this
	// bookie's write sets, and Held how many of those it holds.
	Expected int64 `json:"expected"`
	Held     int64 `json:"held"`
	// Missing are the first 100 expected entries it lacks, and
	// MissingCount how many it lacks in all.
	Missing      []int64 `json:"missing"`
	MissingCount int64   `json:"missingCount"`
	// Reachable is false when the bookie did not answer.
	Reachable bool `json:"reachable"`
}

// RecoveryOutcome is what a recovery of the ledger would conclude.
type RecoveryOutcome string

// Recovery outcomes.
const (
	// RecoveryClosed: the ledger is CLOSED; recovery changes nothing.
	RecoveryClosed RecoveryOutcome = "closed"
	// RecoveryEnd: recovery would close the ledger at LastEntryID.
	RecoveryEnd RecoveryOutcome = "end"
	// RecoveryUndecided: too few bookies answered to prove where the
	// ledger ends; recovery would fail until they are back.
	RecoveryUndecided RecoveryOutcome = "undecided"
)

// RecoveryPrediction applies ledger recovery's rules to the bookies'
// answers: it starts after max(LAC, first entry of the last fragment − 1),
// recovers every entry some bookie of its write set holds, and ends before
// the first entry that Qw − Qa + 1 bookies of its write set lack.
type RecoveryPrediction struct {
	// Outcome is what recovery would conclude.
	Outcome RecoveryOutcome `json:"outcome"`
	// LAC is the highest LAC any bookie reported.
	LAC int64 `json:"lac"`
	// StartEntryID is the first entry recovery would read.
	StartEntryID int64 `json:"startEntryId"`
	// LastEntryID is where the ledger ends (RecoveryClosed, RecoveryEnd)
	// or the last entry that could be decided (RecoveryUndecided).
	LastEntryID int64 `json:"lastEntryId"`
	// UndecidedEntryID is the entry that could not be decided, -1 unless
	// RecoveryUndecided.
	UndecidedEntryID int64 `json:"undecidedEntryId"`
	// Reason explains the outcome in words.
	Reason string `json:"reason"`
}

// InspectLedger reads the ledger's metadata and asks each of its bookies
// which entries it holds and its LAC (Java: getLedgerMetadata with
// getListOfEntriesOfLedger on each bookie, as the ledger checker reads
// them; the shell's inspectledger). It changes nothing: no fencing read, no metadata write.
// With o's admin HTTP servers, each bookie's fence bit is read too.
// ErrInvalidLedgerID, ErrNoSuchLedger; a malformed admin HTTP address is
// an error naming it. A bookie that does not answer is reported in its
// view, not as an error.
func (a *Admin) InspectLedger(ctx context.Context, id int64, o InspectLedgerOptions) (*LedgerInspection, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := validLedger(id); err != nil {
		return nil, err
	}
	eps := iadmin.HTTPEndpoints{Client: o.HTTPClient, Token: o.HTTPToken}
	for b, addr := range o.AdminHTTP {
		if err := validBookie(b); err != nil {
			return nil, fmt.Errorf("admin HTTP server of %w", err)
		}
		if err := eps.ParseHTTPEndpoint(b + "=" + addr); err != nil {
			return nil, fmt.Errorf("admin HTTP server of bookie %s: %w", b, err)
		}
	}
	for _, addr := range o.SharedAdminHTTP {
		if err := eps.ParseHTTPEndpoint(addr); err != nil {
			return nil, fmt.Errorf("admin HTTP server: %w", err)
		}
	}
	in, err := iadmin.InspectLedger(ctx, a.md, a.bks, id)
	if err != nil {
		return nil, publicError(err)
	}
	iadmin.FillFenceState(ctx, in, &eps)
	out := &LedgerInspection{LedgerID: in.LedgerID, State: in.State, EnsembleSize: in.EnsembleSize,
		WriteQuorumSize: in.WriteQuorumSize, AckQuorumSize: in.AckQuorumSize, LastEntryID: in.LastEntryID,
		Bookies: make([]BookieLedgerView, 0, len(in.Bookies)), Fragments: make([]FragmentView, 0, len(in.Fragments)),
		Recovery: RecoveryPrediction{Outcome: RecoveryOutcome(in.Recovery.Outcome), LAC: in.Recovery.LAC,
			StartEntryID: in.Recovery.StartEntryID, LastEntryID: in.Recovery.LastEntryID,
			UndecidedEntryID: in.Recovery.UndecidedEntryID, Reason: in.Recovery.Reason}}
	for _, b := range in.Bookies {
		v := BookieLedgerView{ID: b.ID, Reachable: b.Reachable, Error: b.Error, HasLedger: b.HasLedger,
			EntryCount: b.EntryCount, LAC: b.LAC, Entries: make([]EntryRange, 0, len(b.Entries)),
			Fenced: b.Fenced, FenceSource: b.FenceSource}
		for _, r := range b.Entries {
			v.Entries = append(v.Entries, EntryRange(r))
		}
		out.Bookies = append(out.Bookies, v)
	}
	for _, f := range in.Fragments {
		v := FragmentView{FirstEntryID: f.FirstEntryID, LastEntryID: f.LastEntryID, Bookies: make([]FragmentBookieView, 0, len(f.Bookies))}
		for _, b := range f.Bookies {
			v.Bookies = append(v.Bookies, FragmentBookieView(b))
		}
		out.Fragments = append(out.Fragments, v)
	}
	return out, nil
}
