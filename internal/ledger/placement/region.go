package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// DefaultMinRegionsForDurability is BookKeeper's
// reppMinimumRegionsForDurability default.
const DefaultMinRegionsForDurability = 2

// RegionAware places ensembles over regions (BookKeeper's
// RegionAwareEnsemblePlacementPolicy). Locations are "/region/rack";
// unknown bookies are in DefaultRack (region "default-region").
//
// NewEnsemble spreads members as evenly as the bookies allow over the
// regions that have writable bookies, and within a region over its racks.
// When RegionsToWrite is set (reppRegionsToWrite) and MinRegionsForDurability
// m > 1, durability is enforced: no m−1 regions may hold an ack quorum of
// any write set, so every acknowledged entry survives the loss of any m−1
// regions. Then:
//   - Qa < m, or Qa ≤ Qw − Qw/m, is ErrInvalidQuorum (as BookKeeper's
//     IllegalArgumentException: no degraded mode could meet durability);
//   - when no ensemble meets durability: with EnableValidation
//     (reppEnableValidation, default true) ErrNotEnoughBookies, without it
//     the evenly spread ensemble is returned (the fallback).
//
// ReplaceBookie prefers a bookie of the replaced one's rack, then region,
// then any; with durability enforced and EnforceDurabilityInReplace
// (reppEnableDurabilityEnforcementInReplace, default true) it keeps the
// write sets of the index durable or fails with ErrNotEnoughBookies, unless
// the rest of the ensemble already breaks durability (BookKeeper's
// "anomalous ensemble"), when it places without the constraint.
type RegionAware struct {
	rand      *rand.Rand
	locations map[metadata.BookieID]string
	// WriteQuorum and AckQuorum are the ledger's (Qw ≤ 0: E; Qa ≤ 0: Qw).
	WriteQuorum, AckQuorum     int
	RegionsToWrite             []string
	MinRegionsForDurability    int
	EnforceDurabilityInReplace bool
	EnableValidation           bool
	// MinRacksPerWriteQuorum is the number of distinct locations an
	// acknowledgement must span under enforceMinNumFaultDomainsForWrite
	// (AckedAdhering; BookKeeper's minNumRacksPerWriteQuorum, capped at
	// Qw); ≤ 0 means DefaultMinRacksPerWriteQuorum. Placement does not
	// read it.
	MinRacksPerWriteQuorum int

	// steps counts the search nodes of the last placement (tests bound
	// the work with it).
	steps int
}

// NewRegionAware returns a RegionAware policy for a ledger of the given
// quorums, drawing from src, with BookKeeper's defaults for the rest
// (m = 2, durability enforced in replace, validation on); locations is
// copied.
func NewRegionAware(src rand.Source, locations map[metadata.BookieID]string, writeQuorum, ackQuorum int, regionsToWrite []string) *RegionAware {
	return &RegionAware{rand: rand.New(src), locations: maps.Clone(locations), WriteQuorum: writeQuorum, AckQuorum: ackQuorum,
		RegionsToWrite: slices.Clone(regionsToWrite), MinRegionsForDurability: DefaultMinRegionsForDurability,
		EnforceDurabilityInReplace: true, EnableValidation: true}
}

// Location returns b's "/region/rack", DefaultRack when it has no valid one.
func (p *RegionAware) Location(b metadata.BookieID) string {
	if loc, ok := p.locations[b]; ok {
		if _, _, ok := pathParts(loc); ok {
			return loc
		}
	}
	return DefaultRack
}

// Region returns b's region.
func (p *RegionAware) Region(b metadata.BookieID) string {
	r, _, _ := pathParts(p.Location(b))
	return r
}

// durabilityRegions is the m in force: 0 without RegionsToWrite.
func (p *RegionAware) durabilityRegions() int {
	if len(p.RegionsToWrite) == 0 {
		return 0
	}
	return p.MinRegionsForDurability
}

func (p *RegionAware) quorums(size int) (wq, aq int) {
	wq, aq = p.WriteQuorum, p.AckQuorum
	if wq <= 0 {
		wq = size
	}
	if aq <= 0 {
		aq = wq
	}
	return wq, aq
}

// Durable reports whether no m−1 regions hold aq members of members.
func (p *RegionAware) durable(members []metadata.BookieID, aq int) bool {
	m := p.durabilityRegions()
	if m <= 1 {
		return true
	}
	count := map[string]int{}
	for _, b := range members {
		count[p.Region(b)]++
	}
	ns := slices.Sorted(maps.Values(count))
	slices.Reverse(ns)
	sum := 0
	for i := 0; i < m-1 && i < len(ns); i++ {
		sum += ns[i]
	}
	return sum <= aq-1
}

// CheckQuorum reports ErrInvalidQuorum for quorums durability can never
// hold (BookKeeper's checks at newEnsemble).
func (p *RegionAware) CheckQuorum(wq, aq int) error {
	m := p.durabilityRegions()
	if m <= 0 {
		return nil
	}
	if aq < m {
		return fmt.Errorf("%w: ack quorum %d below reppMinimumRegionsForDurability %d", ErrInvalidQuorum, aq, m)
	}
	if aq <= wq-wq/m {
		return fmt.Errorf("%w: ack quorum %d cannot stay durable over %d regions in degraded mode (needs > %d for write quorum %d)", ErrInvalidQuorum, aq, m, wq-wq/m, wq)
	}
	return nil
}

// NewEnsemble implements Policy.
func (p *RegionAware) NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	wq, aq := p.quorums(size)
	if err := p.CheckQuorum(wq, aq); err != nil {
		return nil, err
	}
	cands := distinct(writable, nil)
	if len(cands) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable", ErrNotEnoughBookies, size, len(cands))
	}
	// Durability depends on regions only: search the regions of the
	// positions (regions no member uses are interchangeable), then spread
	// each region's members over its racks.
	pref := func(ens []metadata.BookieID, idx int, b metadata.BookieID) int {
		r, n := p.Region(b), 0
		for _, e := range ens {
			if e != "" && p.Region(e) == r {
				n++
			}
		}
		return 8*n + nearSame(ens, idx, wq, b, p.Region)
	}
	sp := searchSpec{qw: wq, class: p.Region, group: func(metadata.BookieID) string { return "" }, pref: pref,
		ok: func([]metadata.BookieID, int) bool { return true }}
	p.steps = 0
	ens := make([]metadata.BookieID, size)
	if m := p.durabilityRegions(); m > 1 {
		res := impossible
		// A write set in fewer than m regions has all its members in
		// m−1 of them: fewer than m regions cannot be durable.
		if countDistinct(cands, p.Region) >= m {
			// Placed members only add to their regions' counts: a write
			// set not durable now never becomes durable.
			sp.ok = func(members []metadata.BookieID, _ int) bool { return p.durable(members, aq) }
			res, p.steps = search(p.rand, ens, cands, sp)
			if res == found {
				return p.spreadRacks(ens, cands, wq), nil
			}
		}
		if p.EnableValidation {
			if res == exhausted {
				return nil, fmt.Errorf("%w: no ensemble of %d keeping every ack quorum of %d out of any %d regions found within the placement search bound (%d steps)", ErrNotEnoughBookies, size, aq, m-1, p.steps)
			}
			return nil, fmt.Errorf("%w: no ensemble of %d keeps every ack quorum of %d out of any %d regions", ErrNotEnoughBookies, size, aq, m-1)
		}
		sp.ok = func([]metadata.BookieID, int) bool { return true }
		clear(ens)
	}
	_, steps := search(p.rand, ens, cands, sp) // no constraint: the first path
	p.steps += steps
	return p.spreadRacks(ens, cands, wq), nil
}

// spreadRacks returns ens with each member replaced by a bookie of its
// region from cands, chosen in index order to share racks least with the
// members near it, then with the whole ensemble (ties at random). The
// regions of the positions, which decide durability, are unchanged.
func (p *RegionAware) spreadRacks(ens, cands []metadata.BookieID, wq int) []metadata.BookieID {
	pools := map[string][]metadata.BookieID{}
	for _, b := range cands {
		pools[p.Region(b)] = append(pools[p.Region(b)], b)
	}
	for _, bs := range pools {
		p.rand.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	}
	out := make([]metadata.BookieID, len(ens))
	racks := map[string]int{}
	for idx, b := range ens {
		pool := pools[p.Region(b)]
		best, bestP := -1, 0
		for i, c := range pool {
			if pr := 64*nearSame(out, idx, wq, c, p.Location) + racks[p.Location(c)]; best < 0 || pr < bestP {
				best, bestP = i, pr
			}
		}
		out[idx] = pool[best]
		racks[p.Location(pool[best])]++
		pools[p.Region(b)] = slices.Delete(pool, best, best+1)
	}
	return out
}

// ReplaceBookie implements Policy.
func (p *RegionAware) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	wq, aq := p.quorums(len(ensemble))
	cands := distinct(writable, func(b metadata.BookieID) bool { return slices.Contains(ensemble, b) || slices.Contains(exclude, b) })
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: no writable bookie outside the ensemble to replace index %d (%s)", ErrNotEnoughBookies, idx, ensemble[idx])
	}
	old := ensemble[idx]
	pref := func(_ []metadata.BookieID, _ int, b metadata.BookieID) int {
		switch {
		case p.Location(b) == p.Location(old):
			return 0
		case p.Region(b) == p.Region(old):
			return 1
		}
		return 2
	}
	enforce := p.durabilityRegions() > 1 && p.EnforceDurabilityInReplace
	if enforce {
		// The rest of the ensemble must be durable already (write sets not
		// holding idx); else BookKeeper's anomalous ensemble: no constraint.
		e := len(ensemble)
		for s := range e {
			holds := false
			members := make([]metadata.BookieID, 0, wq)
			for k := range wq {
				j := (s + k) % e
				holds = holds || j == idx
				members = append(members, ensemble[j])
			}
			if !holds && !p.durable(members, aq) {
				enforce = false
				break
			}
		}
	}
	ens := slices.Clone(ensemble)
	ens[idx] = ""
	sp := searchSpec{qw: wq, class: p.Location, pref: pref, ok: func([]metadata.BookieID, int) bool { return true }}
	if enforce {
		sp.ok = func(m []metadata.BookieID, _ int) bool { return p.durable(m, aq) }
	}
	res, steps := search(p.rand, ens, cands, sp)
	p.steps = steps
	if res != found {
		return "", fmt.Errorf("%w: no writable bookie keeps the write sets of index %d (%s) durable over %d regions", ErrNotEnoughBookies, idx, old, p.durabilityRegions())
	}
	return ens[idx], nil
}

// Adheres implements AdherenceChecker as BookKeeper's region-aware policy
// does today: any ensemble of distinct bookies with valid sizes is
// MeetsStrict (its isEnsembleAdheringToPlacementPolicy is not implemented,
// apache/bookkeeper#1898), so the auditor flags nothing a Java auditor
// would not.
func (p *RegionAware) Adheres(ensemble []metadata.BookieID, writeQuorum, ackQuorum int) Adherence {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) || duplicates(ensemble) > 0 {
		return NotAdhering
	}
	return MeetsStrict
}

// PlanRepair implements AdherenceChecker: it replaces repeated bookies.
func (p *RegionAware) PlanRepair(ensemble []metadata.BookieID, writeQuorum, ackQuorum int, writable []metadata.BookieID) (map[int]metadata.BookieID, bool) {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) {
		return nil, false
	}
	return planGreedy(ensemble, writable, duplicates)
}

// DurableEnsemble reports whether every write set of ensemble keeps its
// ack quorum out of any m−1 regions (true when durability is not
// enforced): the rule NewEnsemble enforces.
func (p *RegionAware) DurableEnsemble(ensemble []metadata.BookieID) bool {
	wq, aq := p.quorums(len(ensemble))
	return writeSetsOf(ensemble, wq, func(m []metadata.BookieID) bool { return p.durable(m, aq) })
}

var _ AdherenceChecker = (*RegionAware)(nil)
