package placement

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// ErrInvalidQuorum: the ledger's quorum sizes cannot be placed under the
// policy's configuration at all, whatever the bookies (BookKeeper throws
// IllegalArgumentException from newEnsemble for these). It is a
// configuration error, not a shortage of bookies.
var ErrInvalidQuorum = errors.New("quorum sizes not allowed by the placement policy")

// DefaultFaultDomain is the location of a bookie the zone-aware policy
// cannot resolve to "/zone/upgradeDomain" (BookKeeper's
// NetworkTopology.DEFAULT_ZONE_AND_UPGRADEDOMAIN).
const DefaultFaultDomain = "/default-zone/default-upgradedomain"

// Defaults of BookKeeper's zone-aware placement settings.
const (
	DefaultMinZonesPerWriteQuorum     = 2 // minNumZonesPerWriteQuorum
	DefaultDesiredZonesPerWriteQuorum = 3 // desiredNumZonesPerWriteQuorum
)

// ZoneAware places ensembles over zones and upgrade domains (BookKeeper's
// ZoneawareEnsemblePlacementPolicy). Locations are "/zone/upgradeDomain";
// a bookie without one, or with a location not of that form, is in
// DefaultFaultDomain.
//
// With Strict (enforceStrictZoneawarePlacement, BookKeeper's default):
//   - E must be a multiple of Qw and Qw must exceed MinZones, else
//     ErrInvalidQuorum (so that no wrapped write set falls back to fewer
//     zones and a lost zone can always be replaced);
//   - bookies in DefaultFaultDomain are never chosen;
//   - every write set spans min(Qw, DesiredZones) zones when the bookies
//     allow, else at least MinZones zones (the documented fallback; the
//     ensemble then adheres MeetsSoft); several members of one zone in a
//     write set are in at least two upgrade domains;
//   - when no ensemble meets MinZones, ErrNotEnoughBookies.
//
// ReplaceBookie keeps the same rules for the write sets of the replaced
// index (desired zones first, then MinZones), or fails with
// ErrNotEnoughBookies.
//
// Without Strict placement is random over all writable bookies, as
// BookKeeper's createNewEnsembleRandomly and selectBookieRandomly.
type ZoneAware struct {
	rand      *rand.Rand
	locations map[metadata.BookieID]string
	// WriteQuorum and AckQuorum are the ledger's (Qw ≤ 0: E).
	WriteQuorum, AckQuorum int
	MinZones, DesiredZones int
	Strict                 bool

	// steps counts the search nodes of the last placement (tests bound
	// the work with it).
	steps int
}

// NewZoneAware returns a ZoneAware policy for a ledger of the given write
// and ack quorums, drawing from src; locations is copied. minZones and
// desiredZones ≤ 0 take BookKeeper's defaults.
func NewZoneAware(src rand.Source, locations map[metadata.BookieID]string, writeQuorum, ackQuorum, minZones, desiredZones int, strict bool) *ZoneAware {
	if minZones <= 0 {
		minZones = DefaultMinZonesPerWriteQuorum
	}
	if desiredZones <= 0 {
		desiredZones = DefaultDesiredZonesPerWriteQuorum
	}
	return &ZoneAware{rand: rand.New(src), locations: maps.Clone(locations), WriteQuorum: writeQuorum, AckQuorum: ackQuorum,
		MinZones: minZones, DesiredZones: desiredZones, Strict: strict}
}

// Location returns b's "/zone/upgradeDomain", DefaultFaultDomain when it
// has no valid one.
func (p *ZoneAware) Location(b metadata.BookieID) string {
	if loc, ok := p.locations[b]; ok {
		if _, _, ok := pathParts(loc); ok {
			return loc
		}
	}
	return DefaultFaultDomain
}

func (p *ZoneAware) zone(b metadata.BookieID) string {
	z, _, _ := pathParts(p.Location(b))
	return z
}

func (p *ZoneAware) wq(size int) int {
	if p.WriteQuorum <= 0 {
		return size
	}
	return p.WriteQuorum
}

// writeSetZones reports whether members span at least need zones and keep
// several members of one zone in at least two upgrade domains.
func (p *ZoneAware) writeSetOK(members []metadata.BookieID, need int) bool {
	uds := map[string]map[string]bool{}
	count := map[string]int{}
	for _, b := range members {
		z, u, _ := pathParts(p.Location(b))
		if uds[z] == nil {
			uds[z] = map[string]bool{}
		}
		uds[z][u] = true
		count[z]++
	}
	if len(count) < need {
		return false
	}
	for z, n := range count {
		if n > 1 && len(uds[z]) < 2 {
			return false
		}
	}
	return true
}

// canMeet reports whether a write set with members placed and missing
// members to come can still meet writeSetOK(need): every zone holding
// several members in one upgrade domain needs one more member of its own,
// and the rest must bring the zones up to need.
func (p *ZoneAware) canMeet(members []metadata.BookieID, missing, need int) bool {
	if missing == 0 {
		return p.writeSetOK(members, need)
	}
	type zoneUDs struct {
		n     int
		first string
		mixed bool
	}
	zs := make(map[string]*zoneUDs, len(members))
	for _, b := range members {
		z, u, _ := pathParts(p.Location(b))
		switch s := zs[z]; {
		case s == nil:
			zs[z] = &zoneUDs{n: 1, first: u}
		default:
			s.n++
			s.mixed = s.mixed || s.first != u
		}
	}
	bad := 0
	for _, s := range zs {
		if s.n > 1 && !s.mixed {
			bad++
		}
	}
	return bad <= missing && len(zs)+missing-bad >= need
}

func (p *ZoneAware) checkQuorum(size, wq int) error {
	if size%wq != 0 {
		return fmt.Errorf("%w: zone-aware strict placement needs the ensemble size (%d) to be a multiple of the write quorum (%d)", ErrInvalidQuorum, size, wq)
	}
	if wq <= p.MinZones {
		return fmt.Errorf("%w: zone-aware strict placement needs the write quorum (%d) above minNumZonesPerWriteQuorum (%d)", ErrInvalidQuorum, wq, p.MinZones)
	}
	return nil
}

func (p *ZoneAware) pref(ens []metadata.BookieID, idx int, b metadata.BookieID) int {
	wq := p.wq(len(ens))
	return 8*nearSame(ens, idx, wq, b, p.zone) + nearSame(ens, idx, wq, b, p.Location)
}

// NewEnsemble implements Policy.
func (p *ZoneAware) NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	if !p.Strict {
		return NewRandom(p.rand).NewEnsemble(size, writable)
	}
	wq := p.wq(size)
	if err := p.checkQuorum(size, wq); err != nil {
		return nil, err
	}
	cands := distinct(writable, func(b metadata.BookieID) bool { return p.Location(b) == DefaultFaultDomain })
	if len(cands) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable bookies with a zone", ErrNotEnoughBookies, size, len(cands))
	}
	p.steps = 0
	gaveUp := false
	for _, need := range []int{min(wq, p.DesiredZones), p.MinZones} {
		if !spanBound(size, wq, need, cands, p.zone) {
			continue // counting proves no ensemble spans need zones everywhere
		}
		ens := make([]metadata.BookieID, size)
		res, steps := search(p.rand, ens, cands, p.spec(wq, need, true))
		p.steps += steps
		switch res {
		case found:
			return ens, nil
		case exhausted:
			gaveUp = true
		}
	}
	if gaveUp {
		return nil, fmt.Errorf("%w: no ensemble of %d (Qw %d) spanning %d zones per write quorum found within the placement search bound (%d steps)", ErrNotEnoughBookies, size, wq, p.MinZones, p.steps)
	}
	return nil, fmt.Errorf("%w: no ensemble of %d (Qw %d) spans %d zones per write quorum over the writable bookies", ErrNotEnoughBookies, size, wq, p.MinZones)
}

// spec is the search of write sets spanning need zones; symmetric: upgrade
// domains of a zone no member uses are interchangeable (a new ensemble;
// a replacement's preference is not symmetric in them).
func (p *ZoneAware) spec(wq, need int, symmetric bool) searchSpec {
	sp := searchSpec{qw: wq, class: p.Location,
		ok:   func(m []metadata.BookieID, missing int) bool { return p.canMeet(m, missing, need) },
		pref: p.pref}
	if symmetric {
		sp.group = p.zone
	}
	return sp
}

// ReplaceBookie implements Policy.
func (p *ZoneAware) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	if !p.Strict {
		return NewRandom(p.rand).ReplaceBookie(ensemble, idx, writable, exclude)
	}
	wq := p.wq(len(ensemble))
	cands := distinct(writable, func(b metadata.BookieID) bool {
		return slices.Contains(ensemble, b) || slices.Contains(exclude, b) || p.Location(b) == DefaultFaultDomain
	})
	p.steps = 0
	zones := countDistinct(append(slices.Clone(cands), ensemble...), p.zone)
	for _, need := range []int{min(wq, p.DesiredZones), p.MinZones} {
		if zones < need {
			continue
		}
		ens := slices.Clone(ensemble)
		ens[idx] = ""
		res, steps := search(p.rand, ens, cands, p.spec(wq, need, false))
		p.steps += steps
		if res == found {
			return ens[idx], nil
		}
	}
	return "", fmt.Errorf("%w: no writable bookie keeps %d zones in the write sets of index %d (%s)", ErrNotEnoughBookies, p.MinZones, idx, ensemble[idx])
}

// Adheres implements AdherenceChecker as BookKeeper's
// ZoneawareEnsemblePlacementPolicyImpl.isEnsembleAdheringToPlacementPolicy:
// NotAdhering when E is not a multiple of Qw, when Qw ≤ MinZones, when a
// member is in DefaultFaultDomain, when a write set spans fewer than
// MinZones zones or has several members of one zone in a single upgrade
// domain (and, in Folio, when a bookie repeats); MeetsSoft when some write
// set spans fewer than min(Qw, DesiredZones) zones; else MeetsStrict.
func (p *ZoneAware) Adheres(ensemble []metadata.BookieID, writeQuorum, ackQuorum int) Adherence {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) || duplicates(ensemble) > 0 ||
		len(ensemble)%writeQuorum != 0 || writeQuorum <= p.MinZones {
		return NotAdhering
	}
	for _, b := range ensemble {
		if p.Location(b) == DefaultFaultDomain {
			return NotAdhering
		}
	}
	res := MeetsStrict
	desired := min(writeQuorum, p.DesiredZones)
	writeSetsOf(ensemble, writeQuorum, func(m []metadata.BookieID) bool {
		switch {
		case !p.writeSetOK(m, p.MinZones):
			res = NotAdhering
			return false
		case !p.writeSetOK(m, desired):
			res = MeetsSoft
		}
		return true
	})
	return res
}

// PlanRepair implements AdherenceChecker: moves towards desired zones in
// every write set.
func (p *ZoneAware) PlanRepair(ensemble []metadata.BookieID, writeQuorum, ackQuorum int, writable []metadata.BookieID) (map[int]metadata.BookieID, bool) {
	if !validSizes(len(ensemble), writeQuorum, ackQuorum) || len(ensemble)%writeQuorum != 0 || writeQuorum <= p.MinZones {
		return nil, false
	}
	desired := min(writeQuorum, p.DesiredZones)
	var usable []metadata.BookieID
	for _, b := range writable {
		if p.Location(b) != DefaultFaultDomain {
			usable = append(usable, b)
		}
	}
	deficit := func(e []metadata.BookieID) int {
		d := duplicates(e)
		for _, b := range e {
			if p.Location(b) == DefaultFaultDomain {
				d += desired
			}
		}
		writeSetsOf(e, writeQuorum, func(m []metadata.BookieID) bool {
			zones := map[string]bool{}
			for _, b := range m {
				zones[p.zone(b)] = true
			}
			d += max(0, desired-len(zones))
			if !p.writeSetOK(m, 0) {
				d++
			}
			return true
		})
		return d
	}
	return planGreedy(ensemble, usable, deficit)
}

var _ AdherenceChecker = (*ZoneAware)(nil)
