package placement

import (
	"slices"

	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// Adherence says how far an existing ensemble meets a placement policy
// (BookKeeper's PlacementPolicyAdherence). A larger value is better.
type Adherence int

const (
	// NotAdhering: some write set breaks the policy (FAIL).
	NotAdhering Adherence = iota + 1
	// MeetsSoft: every write set meets the policy's minimum but some miss
	// its desired spread (MEETS_SOFT). In BookKeeper only the zone-aware
	// policy reports it (desired vs minimum zones per write quorum);
	// Random and RackAware never do, exactly as BookKeeper's default and
	// rack-aware policies never do.
	MeetsSoft
	// MeetsStrict: the ensemble meets the policy (MEETS_STRICT).
	MeetsStrict
)

func (a Adherence) String() string {
	switch a {
	case NotAdhering:
		return "not-adhering"
	case MeetsSoft:
		return "meets-soft"
	case MeetsStrict:
		return "meets-strict"
	}
	return "unknown"
}

// AdherenceChecker judges existing ensembles against a placement policy
// and plans the moves that make one adhere: the AutoRecovery auditor's
// placement check and the replication worker's placement repair.
//
// Both methods read only the policy's configuration (never its random
// source), so they are safe for concurrent use and deterministic.
type AdherenceChecker interface {
	// Adheres judges ensemble (E = len(ensemble)) as written with the
	// given write and ack quorums (spec/protocol.md §1.2 write sets).
	// Sizes outside E ≥ Qw ≥ Qa ≥ 1 are NotAdhering.
	Adheres(ensemble []metadata.BookieID, writeQuorum, ackQuorum int) Adherence

	// PlanRepair proposes replacements, ensemble index → bookie taken from
	// writable, after which the ensemble meets the policy strictly. A
	// proposed bookie is never a member of ensemble and never proposed
	// twice. The plan is greedy: each move is the one that repairs the most
	// write sets, so few members move. ok is false (and replace nil) when
	// the writable bookies cannot make it adhere; then nothing should move.
	// Ties go to the bookie earliest in writable: callers shuffle writable
	// to spread the load.
	PlanRepair(ensemble []metadata.BookieID, writeQuorum, ackQuorum int, writable []metadata.BookieID) (replace map[int]metadata.BookieID, ok bool)
}

var (
	_ AdherenceChecker = (*Random)(nil)
	_ AdherenceChecker = (*RackAware)(nil)
)

// validSizes reports whether E ≥ Qw ≥ Qa ≥ 1, which quorum.Params needs.
func validSizes(ensembleSize, writeQuorum, ackQuorum int) bool {
	return ackQuorum >= 1 && writeQuorum >= ackQuorum && ensembleSize >= writeQuorum
}

// duplicates is the number of members beyond the first of each bookie.
func duplicates(ensemble []metadata.BookieID) int {
	u := slices.Clone(ensemble)
	slices.Sort(u)
	return len(ensemble) - len(slices.Compact(u))
}

// Adheres implements AdherenceChecker: an ensemble of distinct bookies
// meets Random strictly (BookKeeper's DefaultEnsemblePlacementPolicy has no
// topology to break).
func (r *Random) Adheres(ensemble []metadata.BookieID, writeQuorum, ackQuorum int) Adherence {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) || duplicates(ensemble) > 0 {
		return NotAdhering
	}
	return MeetsStrict
}

// PlanRepair implements AdherenceChecker: it replaces repeated bookies.
func (r *Random) PlanRepair(ensemble []metadata.BookieID, writeQuorum, ackQuorum int, writable []metadata.BookieID) (map[int]metadata.BookieID, bool) {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) {
		return nil, false
	}
	return planGreedy(ensemble, writable, duplicates)
}

// DefaultMinRacksPerWriteQuorum is BookKeeper's minNumRacksPerWriteQuorum
// default.
const DefaultMinRacksPerWriteQuorum = 2

// minRacks is the number of racks every write set of quorum writeQuorum
// must span: min(Qw, MinRacksPerWriteQuorum), as BookKeeper's rack-aware
// policy asks.
func (p *RackAware) minRacks(writeQuorum int) int {
	m := p.MinRacksPerWriteQuorum
	if m <= 0 {
		m = DefaultMinRacksPerWriteQuorum
	}
	return min(writeQuorum, m)
}

// rackDeficit sums, over the E write sets of ensemble, how many racks each
// lacks to span minRacks, plus the repeated bookies; zero iff the ensemble
// meets RackAware strictly.
func (p *RackAware) rackDeficit(ensemble []metadata.BookieID, q quorum.Params) int {
	need := p.minRacks(q.WriteQuorum)
	d := duplicates(ensemble)
	var ws []int
	racks := make([]string, 0, q.WriteQuorum)
	for first := range int64(q.EnsembleSize) {
		// Entries 0..E-1 have the E distinct write sets.
		ws = q.AppendWriteSet(ws[:0], first)
		racks = racks[:0]
		for _, i := range ws {
			if r := p.Rack(ensemble[i]); !slices.Contains(racks, r) {
				racks = append(racks, r)
			}
		}
		d += max(0, need-len(racks))
	}
	return d
}

// Adheres implements AdherenceChecker, as BookKeeper's
// RackawareEnsemblePlacementPolicyImpl.isEnsembleAdheringToPlacementPolicy
// judges: every write set must span at least min(Qw,
// MinRacksPerWriteQuorum) racks (bookies without a configured location
// count as DefaultRack) and, with EnforceMinNumRacks, hold no DefaultRack
// bookie. The result is MeetsStrict or NotAdhering, never MeetsSoft.
func (p *RackAware) Adheres(ensemble []metadata.BookieID, writeQuorum, ackQuorum int) Adherence {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) {
		return NotAdhering
	}
	q := quorum.Params{EnsembleSize: len(ensemble), WriteQuorum: writeQuorum, AckQuorum: ackQuorum}
	if p.rackDeficit(ensemble, q) > 0 {
		return NotAdhering
	}
	if p.EnforceMinNumRacks && slices.ContainsFunc(ensemble, func(b metadata.BookieID) bool { return p.Rack(b) == DefaultRack }) {
		return NotAdhering
	}
	return MeetsStrict
}

// PlanRepair implements AdherenceChecker: each move puts a bookie of a
// rack its write sets lack in place of one whose rack they repeat.
func (p *RackAware) PlanRepair(ensemble []metadata.BookieID, writeQuorum, ackQuorum int, writable []metadata.BookieID) (map[int]metadata.BookieID, bool) {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) {
		return nil, false
	}
	q := quorum.Params{EnsembleSize: len(ensemble), WriteQuorum: writeQuorum, AckQuorum: ackQuorum}
	return planGreedy(ensemble, writable, func(e []metadata.BookieID) int { return p.rackDeficit(e, q) })
}

// planGreedy lowers deficit (≥ 0; 0 means adhering) to zero by single
// replacements from writable: each round applies the move that lowers it
// most (ties: lowest index, then earliest in writable). It gives up when no
// move lowers it. Candidates are never members of the original ensemble,
// nor already placed. Each round costs E·|writable| deficit evaluations and
// there are at most deficit(ensemble) rounds.
func planGreedy(ensemble, writable []metadata.BookieID, deficit func([]metadata.BookieID) int) (map[int]metadata.BookieID, bool) {
	cur := slices.Clone(ensemble)
	d := deficit(cur)
	if d == 0 {
		return map[int]metadata.BookieID{}, true
	}
	plan := map[int]metadata.BookieID{}
	for d > 0 {
		bestD, bestI, bestB := d, -1, metadata.BookieID("")
		for i := range cur {
			old := cur[i]
			for _, b := range writable {
				if slices.Contains(ensemble, b) || slices.Contains(cur, b) {
					continue
				}
				cur[i] = b
				if nd := deficit(cur); nd < bestD {
					bestD, bestI, bestB = nd, i, b
				}
			}
			cur[i] = old
		}
		if bestI < 0 {
			return nil, false
		}
		cur[bestI], plan[bestI], d = bestB, bestB, bestD
	}
	return plan, true
}
