package placement

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/foliodb/folio/internal/metadata"
)

// DefaultRack is the network location of a bookie the configuration does
// not place (BookKeeper's /default-region/default-rack).
const DefaultRack = "/default-region/default-rack"

// RackAware spreads ensembles over racks (BookKeeper's
// RackawareEnsemblePlacementPolicy). Locations map bookie ids to
// "/region/rack" paths; unknown bookies are in DefaultRack.
//
// NewEnsemble takes at most one bookie per rack while racks remain, so
// with at least as many racks as the ensemble size no two members share a
// rack, and the ensemble order alternates racks, so that every write set
// (consecutive indexes) spans as many racks as it can. With fewer racks:
//   - by default (the documented fallback, as Java's default) it goes on
//     round-robin over the racks, so members spread as evenly as possible
//     and consecutive members are in different racks whenever two racks
//     exist;
//   - with EnforceMinNumRacks it fails with ErrNotEnoughBookies.
//
// ReplaceBookie prefers a bookie in a rack no other member uses, then
// (fallback, unless EnforceMinNumRacks) any eligible bookie, preferring
// racks used least.
type RackAware struct {
	rand      *rand.Rand
	locations map[metadata.BookieID]string
	// EnforceMinNumRacks makes a placement that cannot give every member
	// its own rack fail instead of falling back (Folio's form of
	// EnforceMinNumRacksPerWriteQuorum: the policy does not know Qw, so it
	// enforces distinct racks over the whole ensemble, which implies it
	// for every write quorum).
	EnforceMinNumRacks bool
	// MinRacksPerWriteQuorum is how many racks every write set must span
	// for an existing ensemble to adhere (Adheres; BookKeeper's
	// minNumRacksPerWriteQuorum, capped at Qw); ≤ 0 means
	// DefaultMinRacksPerWriteQuorum. Bound policies (WriteQuorum > 0)
	// place by it too; unbound ones spread as far as the racks allow
	// without reading it.
	MinRacksPerWriteQuorum int
	// WriteQuorum is the ledger's Qw when the policy is bound to a ledger
	// (Config.ForLedger); then placement follows BookKeeper's contract:
	// every write set spans min(Qw, MinRacksPerWriteQuorum) racks when
	// the bookies allow, and with EnforceMinNumRacks bookies in
	// DefaultRack are never chosen and a placement that cannot meet it
	// fails with ErrNotEnoughBookies. Zero (NewRackAware): the policy
	// does not know Qw and EnforceMinNumRacks asks distinct racks over the
	// whole ensemble.
	WriteQuorum int

	// steps counts the search nodes of the last placement (tests bound
	// the work with it).
	steps int
}

// NewRackAware returns a RackAware policy drawing from src; locations is
// copied.
func NewRackAware(src rand.Source, locations map[metadata.BookieID]string, enforce bool) *RackAware {
	return &RackAware{rand: rand.New(src), locations: maps.Clone(locations), EnforceMinNumRacks: enforce}
}

// ParseLocations reads a bookie location file: one "bookie-id /region/rack"
// per line; blank lines and lines starting with # are skipped.
func ParseLocations(r io.Reader) (map[metadata.BookieID]string, error) {
	out := map[metadata.BookieID]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[1], "/") {
			return nil, fmt.Errorf("placement: line %d: want \"bookie-id /region/rack\", got %q", n, line)
		}
		out[metadata.BookieID(f[0])] = f[1]
	}
	return out, sc.Err()
}

// Rack returns b's network location.
func (p *RackAware) Rack(b metadata.BookieID) string {
	if loc, ok := p.locations[b]; ok {
		return loc
	}
	return DefaultRack
}

// NewEnsemble implements Policy.
func (p *RackAware) NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	if p.WriteQuorum > 0 {
		return p.newBound(size, writable)
	}
	return p.spread(size, distinct(writable, nil), p.EnforceMinNumRacks)
}

// spread is the ensemble of size taking one bookie per rack in turn over
// candidates; with enforce it fails unless every member has its own rack.
func (p *RackAware) spread(size int, candidates []metadata.BookieID, enforce bool) ([]metadata.BookieID, error) {
	if len(candidates) < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable", ErrNotEnoughBookies, size, len(candidates))
	}
	byRack := map[string][]metadata.BookieID{}
	for _, b := range candidates {
		byRack[p.Rack(b)] = append(byRack[p.Rack(b)], b)
	}
	racks := slices.Sorted(maps.Keys(byRack))
	if enforce && len(racks) < size {
		return nil, fmt.Errorf("%w: ensemble of %d needs %d racks, writable bookies are in %d", ErrNotEnoughBookies, size, size, len(racks))
	}
	p.rand.Shuffle(len(racks), func(i, j int) { racks[i], racks[j] = racks[j], racks[i] })
	for _, r := range racks {
		bs := byRack[r]
		p.rand.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
	}
	out := make([]metadata.BookieID, 0, size)
	for len(out) < size {
		for _, r := range racks {
			if len(out) == size {
				break
			}
			if bs := byRack[r]; len(bs) > 0 {
				out = append(out, bs[0])
				byRack[r] = bs[1:]
			}
		}
	}
	return out, nil
}

// ReplaceBookie implements Policy.
func (p *RackAware) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	if p.WriteQuorum > 0 {
		return p.replaceBound(ensemble, idx, writable, exclude)
	}
	candidates := distinct(writable, func(b metadata.BookieID) bool {
		return slices.Contains(ensemble, b) || slices.Contains(exclude, b)
	})
	if len(candidates) == 0 {
		return "", fmt.Errorf("%w: no writable bookie outside the ensemble to replace index %d (%s)", ErrNotEnoughBookies, idx, ensemble[idx])
	}
	used := map[string]int{}
	for i, b := range ensemble {
		if i != idx {
			used[p.Rack(b)]++
		}
	}
	least := -1
	var best []metadata.BookieID
	for _, b := range candidates {
		switch n := used[p.Rack(b)]; {
		case least < 0 || n < least:
			least, best = n, []metadata.BookieID{b}
		case n == least:
			best = append(best, b)
		}
	}
	if least > 0 && p.EnforceMinNumRacks {
		return "", fmt.Errorf("%w: no writable bookie in a rack the ensemble does not use to replace index %d (%s)", ErrNotEnoughBookies, idx, ensemble[idx])
	}
	return best[p.rand.IntN(len(best))], nil
}

// racksOK reports whether members span need racks.
func (p *RackAware) racksOK(members []metadata.BookieID, need int) bool {
	racks := make([]string, 0, len(members))
	for _, b := range members {
		if r := p.Rack(b); !slices.Contains(racks, r) {
			racks = append(racks, r)
		}
	}
	return len(racks) >= need
}

// racksCanMeet reports whether a write set with members placed and
// missing more to come can still span need racks.
func (p *RackAware) racksCanMeet(members []metadata.BookieID, missing, need int) bool {
	return p.racksOK(members, need-missing)
}

func (p *RackAware) ensembleOK(ens []metadata.BookieID, wq, need int) bool {
	return writeSetsOf(ens, wq, func(m []metadata.BookieID) bool { return p.racksOK(m, need) })
}

// eligible is the candidates of a bound policy: without DefaultRack
// bookies when enforced (BookKeeper's
// addDefaultRackBookiesIfMinNumRacksIsEnforced).
func (p *RackAware) eligible(writable []metadata.BookieID, skip func(metadata.BookieID) bool) []metadata.BookieID {
	return distinct(writable, func(b metadata.BookieID) bool {
		return (skip != nil && skip(b)) || (p.EnforceMinNumRacks && p.Rack(b) == DefaultRack)
	})
}

func (p *RackAware) newBound(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	wq := min(p.WriteQuorum, size)
	need := p.minRacks(wq)
	cands := p.eligible(writable, nil)
	if len(cands) < size {
		if p.EnforceMinNumRacks {
			return nil, fmt.Errorf("%w: need %d, have %d writable bookies outside %s", ErrNotEnoughBookies, size, len(cands), DefaultRack)
		}
		return nil, fmt.Errorf("%w: need %d, have %d writable", ErrNotEnoughBookies, size, len(cands))
	}
	// The one-per-rack spread first: it spans the most racks.
	if ens, err := p.spread(size, cands, false); err == nil && p.ensembleOK(ens, wq, need) {
		return ens, nil
	}
	p.steps = 0
	res := impossible
	if spanBound(size, wq, need, cands, p.Rack) {
		ens := make([]metadata.BookieID, size)
		// Racks no member uses are interchangeable: one group.
		sp := searchSpec{qw: wq, class: p.Rack, group: func(metadata.BookieID) string { return "" },
			ok:   func(m []metadata.BookieID, missing int) bool { return p.racksCanMeet(m, missing, need) },
			pref: func(e []metadata.BookieID, idx int, b metadata.BookieID) int { return nearSame(e, idx, wq, b, p.Rack) }}
		res, p.steps = search(p.rand, ens, cands, sp)
		if res == found {
			return ens, nil
		}
	}
	if p.EnforceMinNumRacks {
		if res == exhausted {
			return nil, fmt.Errorf("%w: no ensemble of %d giving every write quorum of %d bookies %d racks found within the placement search bound (%d steps)", ErrNotEnoughBookies, size, wq, need, p.steps)
		}
		return nil, fmt.Errorf("%w: no ensemble of %d gives every write quorum of %d bookies %d racks", ErrNotEnoughBookies, size, wq, need)
	}
	return p.spread(size, cands, false)
}

func (p *RackAware) replaceBound(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	wq := min(p.WriteQuorum, len(ensemble))
	need := p.minRacks(wq)
	cands := p.eligible(writable, func(b metadata.BookieID) bool { return slices.Contains(ensemble, b) || slices.Contains(exclude, b) })
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: no eligible writable bookie outside the ensemble to replace index %d (%s)", ErrNotEnoughBookies, idx, ensemble[idx])
	}
	// Prefer racks the rest of the ensemble uses least.
	used := map[string]int{}
	for i, b := range ensemble {
		if i != idx {
			used[p.Rack(b)]++
		}
	}
	pref := func(_ []metadata.BookieID, _ int, b metadata.BookieID) int { return used[p.Rack(b)] }
	ens := slices.Clone(ensemble)
	ens[idx] = ""
	sp := searchSpec{qw: wq, class: p.Rack, pref: pref,
		ok: func(m []metadata.BookieID, missing int) bool { return p.racksCanMeet(m, missing, need) }}
	res, steps := search(p.rand, ens, cands, sp)
	p.steps = steps
	if res == found {
		return ens[idx], nil
	}
	if p.EnforceMinNumRacks {
		return "", fmt.Errorf("%w: no eligible writable bookie keeps %d racks in the write sets of index %d (%s)", ErrNotEnoughBookies, need, idx, ensemble[idx])
	}
	ens[idx] = ""
	sp.ok = func([]metadata.BookieID, int) bool { return true }
	search(p.rand, ens, cands, sp)
	return ens[idx], nil
}
