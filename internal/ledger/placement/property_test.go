package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// topology is a generated cluster: bookies with two-level locations, some
// without one (they fall in the policy's default location).
type topology struct {
	bookies []metadata.BookieID
	locs    map[metadata.BookieID]string
}

// genTopology draws up to maxTop top-level domains (zones or regions) of
// up to maxSub sub-domains (upgrade domains or racks) of 0..2 bookies, and
// 0..1 bookies without a location.
func genTopology(r *rand.Rand, maxTop, maxSub int) topology {
	t := topology{locs: map[metadata.BookieID]string{}}
	n := 0
	add := func(loc string) {
		b := metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", n))
		n++
		t.bookies = append(t.bookies, b)
		if loc != "" {
			t.locs[b] = loc
		}
	}
	for z := range 1 + r.IntN(maxTop) {
		for u := range 1 + r.IntN(maxSub) {
			for range r.IntN(3) {
				add(fmt.Sprintf("/d%d/s%d", z, u))
			}
		}
	}
	for range r.IntN(2) {
		add("")
	}
	r.Shuffle(len(t.bookies), func(i, j int) { t.bookies[i], t.bookies[j] = t.bookies[j], t.bookies[i] })
	return t
}

// exists reports whether some ensemble of size distinct bookies of cands
// (with fixed non-empty positions of base kept) satisfies pred. It
// enumerates every assignment of locations (bookies of one location are
// interchangeable for every policy), independently of the policies'
// search.
func exists(base []metadata.BookieID, cands []metadata.BookieID, class func(metadata.BookieID) string, pred func([]metadata.BookieID) bool) bool {
	byClass := map[string][]metadata.BookieID{}
	var classes []string
	for _, b := range cands {
		c := class(b)
		if _, ok := byClass[c]; !ok {
			classes = append(classes, c)
		}
		byClass[c] = append(byClass[c], b)
	}
	ens := slices.Clone(base)
	taken := map[string]int{}
	var rec func(i int) bool
	rec = func(i int) bool {
		if i == len(ens) {
			return pred(ens)
		}
		if base[i] != "" {
			return rec(i + 1)
		}
		for _, c := range classes {
			if taken[c] == len(byClass[c]) {
				continue
			}
			ens[i] = byClass[c][taken[c]]
			taken[c]++
			ok := rec(i + 1)
			taken[c]--
			if ok {
				return true
			}
		}
		ens[i] = ""
		return false
	}
	return rec(0)
}

// quorums draws E in 1..maxE, Qw in 1..E, Qa in 1..Qw.
func quorums(r *rand.Rand, maxE int) (e, wq, aq int) {
	e = 1 + r.IntN(maxE)
	wq = 1 + r.IntN(e)
	aq = 1 + r.IntN(wq)
	return
}

func checkMembers(t *testing.T, what string, ens, writable []metadata.BookieID, size int) {
	t.Helper()
	if len(ens) != size || duplicates(ens) > 0 {
		t.Fatalf("%s: ensemble %v: want %d distinct bookies", what, ens, size)
	}
	for _, b := range ens {
		if !slices.Contains(writable, b) {
			t.Fatalf("%s: ensemble %v holds %s, not writable", what, ens, b)
		}
	}
}

const propTopologies = 2000

// Zone-aware, strict (Java's default): every ensemble adheres at least
// MeetsSoft, strictly whenever a strict one exists, never holds a bookie
// without a zone; ErrNotEnoughBookies only when no adhering ensemble
// exists; ErrInvalidQuorum exactly for the quorums Java refuses.
// Replacements keep adherence and never take the excluded bookie, or fail
// only when no candidate keeps it.
func TestPropertyZoneAware(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1))
	placed, refused := 0, 0
	for n := range propTopologies {
		top := genTopology(r, 4, 2)
		e, wq, aq := quorums(r, 6)
		minZ := 1 + r.IntN(2)
		desZ := minZ + r.IntN(2)
		// Three in four draws are quorums Java accepts.
		for try := 0; n%4 != 0 && (e%wq != 0 || wq <= minZ) && try < 50; try++ {
			e, wq, aq = quorums(r, 6)
		}
		p := NewZoneAware(rand.NewPCG(uint64(n), 2), top.locs, wq, aq, minZ, desZ, true)
		what := fmt.Sprintf("topology %d (E/Qw/Qa %d/%d/%d, zones min %d desired %d, %v)", n, e, wq, aq, minZ, desZ, top.locs)
		ens, err := p.NewEnsemble(e, top.bookies)
		if e%wq != 0 || wq <= minZ {
			if !errors.Is(err, ErrInvalidQuorum) {
				t.Fatalf("%s: %v, %v: want ErrInvalidQuorum", what, ens, err)
			}
			continue
		}
		zoned := slices.DeleteFunc(slices.Clone(top.bookies), func(b metadata.BookieID) bool { return p.Location(b) == DefaultFaultDomain })
		adheres := func(ens []metadata.BookieID) bool { return p.Adheres(ens, wq, aq) >= MeetsSoft }
		strict := func(ens []metadata.BookieID) bool { return p.Adheres(ens, wq, aq) == MeetsStrict }
		if err != nil {
			if !errors.Is(err, ErrNotEnoughBookies) {
				t.Fatalf("%s: %v", what, err)
			}
			if exists(make([]metadata.BookieID, e), zoned, p.Location, adheres) {
				t.Fatalf("%s: refused (%v) though an adhering ensemble exists", what, err)
			}
			refused++
			continue
		}
		placed++
		checkMembers(t, what, ens, zoned, e)
		if !adheres(ens) {
			t.Fatalf("%s: ensemble %v is %v", what, ens, p.Adheres(ens, wq, aq))
		}
		if !strict(ens) && exists(make([]metadata.BookieID, e), zoned, p.Location, strict) {
			t.Fatalf("%s: ensemble %v meets soft though a strict one exists", what, ens)
		}
		idx := r.IntN(e)
		nb, err := p.ReplaceBookie(ens, idx, top.bookies, []metadata.BookieID{ens[idx]})
		rest := slices.DeleteFunc(slices.Clone(zoned), func(b metadata.BookieID) bool { return slices.Contains(ens, b) })
		base := slices.Clone(ens)
		base[idx] = ""
		if err != nil {
			if !errors.Is(err, ErrNotEnoughBookies) || exists(base, rest, p.Location, adheres) {
				t.Fatalf("%s: replacing %d of %v: %v", what, idx, ens, err)
			}
			continue
		}
		after := slices.Clone(ens)
		after[idx] = nb
		if slices.Contains(ens, nb) || !adheres(after) {
			t.Fatalf("%s: replacing %d of %v by %s gives %v", what, idx, ens, nb, p.Adheres(after, wq, aq))
		}
	}
	t.Logf("%d placed, %d refused", placed, refused)
	if placed < propTopologies/10 || refused == 0 {
		t.Fatalf("generator too one-sided: %d placed, %d refused", placed, refused)
	}
}

// Zone-aware without strict placement is random: any distinct writable
// bookies, never an excluded one.
func TestPropertyZoneAwareNotStrict(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 3))
	for n := range propTopologies {
		top := genTopology(r, 3, 2)
		e, wq, aq := quorums(r, 5)
		p := NewZoneAware(rand.NewPCG(uint64(n), 4), top.locs, wq, aq, 0, 0, false)
		ens, err := p.NewEnsemble(e, top.bookies)
		if len(top.bookies) < e {
			if !errors.Is(err, ErrNotEnoughBookies) {
				t.Fatalf("topology %d: %v", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("topology %d: %v", n, err)
		}
		checkMembers(t, fmt.Sprint("topology ", n), ens, top.bookies, e)
	}
}

// Rack-aware bound to a ledger: with enforcement every ensemble adheres
// (min(Qw, minRacks) racks per write set, no default-rack bookie) or none
// exists; without it placement always succeeds with enough bookies and
// adheres whenever an adhering ensemble exists. Replacements keep it.
func TestPropertyRackAware(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 5))
	counts := map[string]int{}
	for n := range propTopologies {
		top := genTopology(r, 4, 1)
		e, wq, aq := quorums(r, 6)
		enforce := n%2 == 0
		p := NewRackAware(rand.NewPCG(uint64(n), 6), top.locs, enforce)
		p.WriteQuorum, p.MinRacksPerWriteQuorum = wq, 1+r.IntN(3)
		what := fmt.Sprintf("topology %d (E/Qw/Qa %d/%d/%d, min racks %d, enforce %v, %v)", n, e, wq, aq, p.MinRacksPerWriteQuorum, enforce, top.locs)
		cands := top.bookies
		if enforce {
			cands = slices.DeleteFunc(slices.Clone(cands), func(b metadata.BookieID) bool { return p.Rack(b) == DefaultRack })
		}
		adheres := func(ens []metadata.BookieID) bool { return p.Adheres(ens, wq, aq) == MeetsStrict }
		possible := len(cands) >= e && exists(make([]metadata.BookieID, e), cands, p.Rack, adheres)
		ens, err := p.NewEnsemble(e, top.bookies)
		switch {
		case err != nil && !errors.Is(err, ErrNotEnoughBookies):
			t.Fatalf("%s: %v", what, err)
		case err != nil && possible:
			t.Fatalf("%s: refused (%v) though an adhering ensemble exists", what, err)
		case err != nil && !enforce && len(top.bookies) >= e:
			t.Fatalf("%s: refused without enforcement: %v", what, err)
		case err != nil:
			counts["refused"]++
			continue
		}
		checkMembers(t, what, ens, top.bookies, e)
		if possible && !adheres(ens) {
			t.Fatalf("%s: ensemble %v does not adhere though one exists", what, ens)
		}
		if enforce && !adheres(ens) {
			t.Fatalf("%s: enforced ensemble %v does not adhere", what, ens)
		}
		counts[fmt.Sprint("adheres ", adheres(ens))]++
		if !adheres(ens) {
			continue
		}
		idx := r.IntN(e)
		nb, err := p.ReplaceBookie(ens, idx, top.bookies, []metadata.BookieID{ens[idx]})
		base := slices.Clone(ens)
		base[idx] = ""
		rest := slices.DeleteFunc(slices.Clone(cands), func(b metadata.BookieID) bool { return slices.Contains(ens, b) })
		canKeep := exists(base, rest, p.Rack, adheres)
		if err != nil {
			if !errors.Is(err, ErrNotEnoughBookies) || canKeep {
				t.Fatalf("%s: replacing %d of %v: %v", what, idx, ens, err)
			}
			continue
		}
		after := slices.Clone(ens)
		after[idx] = nb
		if slices.Contains(ens, nb) || (canKeep && !adheres(after)) {
			t.Fatalf("%s: replacing %d of %v by %s breaks adherence", what, idx, ens, nb)
		}
	}
	t.Log(counts)
}

// Region-aware with durability (regions to write set): every ensemble
// keeps each ack quorum out of any m−1 regions, or none exists and
// placement fails with ErrNotEnoughBookies (validation on); quorums that
// can never be durable are ErrInvalidQuorum. Replacements keep durability.
func TestPropertyRegionAware(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 7))
	counts := map[string]int{}
	for n := range propTopologies {
		top := genTopology(r, 5, 2)
		e, wq, aq := quorums(r, 6)
		m := 2 + r.IntN(2)
		// Three in four draws are quorums durability allows.
		for try := 0; n%4 != 0 && (aq < m || aq <= wq-wq/m) && try < 50; try++ {
			e, wq, aq = quorums(r, 6)
		}
		p := NewRegionAware(rand.NewPCG(uint64(n), 8), top.locs, wq, aq, []string{"d0", "d1", "d2", "d3"})
		p.MinRegionsForDurability = m
		what := fmt.Sprintf("topology %d (E/Qw/Qa %d/%d/%d, m %d, %v)", n, e, wq, aq, m, top.locs)
		ens, err := p.NewEnsemble(e, top.bookies)
		if aq < m || aq <= wq-wq/m {
			if !errors.Is(err, ErrInvalidQuorum) {
				t.Fatalf("%s: %v, %v: want ErrInvalidQuorum", what, ens, err)
			}
			counts["invalid"]++
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrNotEnoughBookies) || (len(top.bookies) >= e && exists(make([]metadata.BookieID, e), top.bookies, p.Location, p.DurableEnsemble)) {
				t.Fatalf("%s: refused (%v)", what, err)
			}
			counts["refused"]++
			continue
		}
		counts["placed"]++
		checkMembers(t, what, ens, top.bookies, e)
		if !p.DurableEnsemble(ens) {
			t.Fatalf("%s: ensemble %v is not durable", what, ens)
		}
		idx := r.IntN(e)
		nb, err := p.ReplaceBookie(ens, idx, top.bookies, []metadata.BookieID{ens[idx]})
		base := slices.Clone(ens)
		base[idx] = ""
		rest := slices.DeleteFunc(slices.Clone(top.bookies), func(b metadata.BookieID) bool { return slices.Contains(ens, b) })
		if err != nil {
			if !errors.Is(err, ErrNotEnoughBookies) || exists(base, rest, p.Location, p.DurableEnsemble) {
				t.Fatalf("%s: replacing %d of %v: %v", what, idx, ens, err)
			}
			continue
		}
		after := slices.Clone(ens)
		after[idx] = nb
		if slices.Contains(ens, nb) || !p.DurableEnsemble(after) {
			t.Fatalf("%s: replacing %d of %v by %s breaks durability", what, idx, ens, nb)
		}
	}
	t.Log(counts)
	if counts["placed"] < propTopologies/10 || counts["refused"] == 0 {
		t.Fatalf("generator too one-sided: %v", counts)
	}
}

// Avoided (quarantined) bookies: never chosen when a placement without
// them exists, for every policy; used when nothing else fits.
func TestPropertyAvoidQuarantined(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 9))
	kinds := []Kind{KindRandom, KindRackAware, KindZoneAware, KindRegionAware}
	for n := range propTopologies {
		top := genTopology(r, 3, 2)
		avoided := map[metadata.BookieID]bool{}
		for _, b := range top.bookies {
			if r.IntN(3) == 0 {
				avoided[b] = true
			}
		}
		avoid := func(b metadata.BookieID) bool { return avoided[b] }
		healthy := slices.DeleteFunc(slices.Clone(top.bookies), avoid)
		e := 1 + r.IntN(4)
		wq := 1 + r.IntN(e)
		kind := kinds[n%len(kinds)]
		cfg := Config{Kind: kind, Locations: top.locs, EnforceStrictZoneaware: kind == KindZoneAware && n%2 == 0, MinZonesPerWriteQuorum: 1}
		plain := cfg.ForLedger(rand.NewPCG(uint64(n), 10), wq, wq)
		cfg.Avoid = avoid
		p := cfg.ForLedger(rand.NewPCG(uint64(n), 10), wq, wq)
		what := fmt.Sprintf("topology %d (%v, E/Qw %d/%d, avoided %v)", n, kind, e, wq, avoided)
		_, healthyErr := plain.NewEnsemble(e, healthy)
		ens, err := p.NewEnsemble(e, top.bookies)
		if healthyErr == nil {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for _, b := range ens {
				if avoided[b] {
					t.Fatalf("%s: ensemble %v holds avoided %s though the healthy bookies suffice", what, ens, b)
				}
			}
		} else if _, allErr := plain.NewEnsemble(e, top.bookies); (allErr == nil) != (err == nil) {
			t.Fatalf("%s: with avoided bookies as last resort: %v; policy over all: %v", what, err, allErr)
		}
		if err != nil {
			continue
		}
		idx := r.IntN(e)
		nb, err := p.ReplaceBookie(ens, idx, top.bookies, []metadata.BookieID{ens[idx]})
		if err != nil {
			continue
		}
		if nb == ens[idx] || slices.Contains(ens, nb) {
			t.Fatalf("%s: replacement %s of %v is excluded or a member", what, nb, ens)
		}
		if avoided[nb] {
			if _, err := plain.ReplaceBookie(ens, idx, healthy, []metadata.BookieID{ens[idx]}); err == nil {
				t.Fatalf("%s: replacement %s is avoided though a healthy one fits", what, nb)
			}
		}
	}
}

func TestParseKind(t *testing.T) {
	for name, want := range map[string]Kind{
		"": KindDefault, "random": KindRandom, "ZoneAware": KindZoneAware, "rackaware": KindRackAware, "regionaware": KindRegionAware,
		"org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy":   KindZoneAware,
		"org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy":   KindRackAware,
		"org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy": KindRegionAware,
		"org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy":     KindRandom,
	} {
		if got, err := ParseKind(name); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ParseKind("com.example.MyPolicy"); err == nil {
		t.Error("unknown policy accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{MinZonesPerWriteQuorum: 3, DesiredZonesPerWriteQuorum: 2},
		{RegionsToWrite: []string{"r1"}},
		{RegionsToWrite: []string{"r1", "r/2"}},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	good := Config{RegionsToWrite: []string{"r1", "r2"}}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}

// A large topology with two zones cannot give any write quorum three
// zones: the search for desired zones gives up (or proves it) and the
// ensemble falls back to MinZones (MeetsSoft), as Java's.
func TestZoneAwareLargeFallsBackToMinZones(t *testing.T) {
	locs := map[metadata.BookieID]string{}
	var bs []metadata.BookieID
	for z := range 2 {
		for u := range 5 {
			for i := range 10 {
				b := metadata.BookieID(fmt.Sprintf("10.%d.%d.%d:3181", z, u, i))
				bs = append(bs, b)
				locs[b] = fmt.Sprintf("/z%d/u%d", z, u)
			}
		}
	}
	for seed := range uint64(5) {
		p := NewZoneAware(rand.NewPCG(seed, 11), locs, 4, 3, 2, 3, true)
		ens, err := p.NewEnsemble(12, bs)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Adheres(ens, 4, 3); got != MeetsSoft {
			t.Fatalf("ensemble %v: %v, want meets-soft", ens, got)
		}
	}
}

// Without durability (no regions to write) region-aware placement spreads
// members evenly over the regions that have bookies.
func TestRegionAwareSpreadsEvenly(t *testing.T) {
	top := topology{locs: map[metadata.BookieID]string{}}
	for r := range 3 {
		for i := range 6 {
			b := metadata.BookieID(fmt.Sprintf("10.0.%d.%d:3181", r, i))
			top.bookies = append(top.bookies, b)
			top.locs[b] = fmt.Sprintf("/region%d/rack%d", r, i%2)
		}
	}
	for seed := range uint64(50) {
		p := NewRegionAware(rand.NewPCG(seed, 12), top.locs, 3, 2, nil)
		for e := 1; e <= 9; e++ {
			ens, err := p.NewEnsemble(e, top.bookies)
			if err != nil {
				t.Fatal(err)
			}
			count := map[string]int{}
			for _, b := range ens {
				count[p.Region(b)]++
			}
			lo, hi := e, 0
			for r := range 3 {
				n := count[fmt.Sprintf("region%d", r)]
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Fatalf("E=%d: ensemble %v spreads %v over the regions", e, ens, count)
			}
		}
	}
}
