package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// maxSteps is the most nodes any placement may visit: the bound that keeps
// its worst case to milliseconds.
const maxSteps = searchRestarts * searchBudget

// largeTopology adds, for each location, n bookies named after it.
func largeTopology(t *topology, loc string, n int) {
	if t.locs == nil {
		t.locs = map[metadata.BookieID]string{}
	}
	for i := range n {
		b := metadata.BookieID(fmt.Sprintf("%s-%d:3181", loc[1:], i))
		t.bookies = append(t.bookies, b)
		t.locs[b] = loc
	}
}

// Region-aware with regions to write [r1 r2] and every bookie in r1: no
// write set can be durable, and the policy says so at once instead of
// searching every rack (8.5 s with 100 bookies, 35 s with 300, before).
func TestRegionAwareOneRegionFailsAtOnce(t *testing.T) {
	for _, n := range []int{100, 300} {
		var top topology
		for i := range n {
			largeTopology(&top, fmt.Sprintf("/r1/rack%d", i), 1)
		}
		p := NewRegionAware(rand.NewPCG(1, 2), top.locs, 5, 5, []string{"r1", "r2"})
		_, err := p.NewEnsemble(5, top.bookies)
		if !errors.Is(err, ErrNotEnoughBookies) {
			t.Fatalf("%d bookies: %v, want ErrNotEnoughBookies", n, err)
		}
		if p.steps != 0 {
			t.Fatalf("%d bookies: %d search steps, want none (one region cannot be durable)", n, p.steps)
		}
	}
}

// Region-aware durability over a large region and a small one: Qa 4 of
// Qw 5 over two regions needs at least two members of every write set in
// each region's complement, so r2 must give two per write set. With two
// bookies in r2 it places (E = Qw), with one it proves it cannot; both in
// a bounded number of steps.
func TestRegionAwareLargeBounded(t *testing.T) {
	for _, small := range []int{1, 2} {
		var top topology
		for i := range 300 {
			largeTopology(&top, fmt.Sprintf("/r1/rack%d", i), 1)
		}
		largeTopology(&top, "/r2/rack0", small)
		for seed := range uint64(5) {
			p := NewRegionAware(rand.NewPCG(seed, 3), top.locs, 5, 4, []string{"r1", "r2"})
			ens, err := p.NewEnsemble(5, top.bookies)
			switch {
			case small == 2 && err != nil:
				t.Fatalf("r2 with 2 bookies: %v", err)
			case small == 2 && !p.DurableEnsemble(ens):
				t.Fatalf("ensemble %v is not durable", ens)
			case small == 1 && !errors.Is(err, ErrNotEnoughBookies):
				t.Fatalf("r2 with 1 bookie: %v, %v: want ErrNotEnoughBookies", ens, err)
			}
			if p.steps > 100 {
				t.Fatalf("r2 with %d bookies: %d search steps", small, p.steps)
			}
		}
	}
}

// Zone-aware strict, 3 zones of 50 upgrade domains with zone C down to
// one bookie (14-35 s before): every quorum Java accepts places an
// adhering ensemble, in a bounded number of steps.
func TestZoneAwareLostZoneBounded(t *testing.T) {
	var top topology
	for _, z := range []string{"zA", "zB"} {
		for u := range 50 {
			largeTopology(&top, fmt.Sprintf("/%s/ud%d", z, u), 1)
		}
	}
	largeTopology(&top, "/zC/ud0", 1)
	for _, q := range [][2]int{{3, 3}, {6, 3}, {9, 3}, {4, 4}, {8, 4}, {5, 5}, {10, 5}, {12, 6}} {
		e, wq := q[0], q[1]
		for seed := range uint64(3) {
			p := NewZoneAware(rand.NewPCG(seed, 4), top.locs, wq, 2, 0, 0, true)
			ens, err := p.NewEnsemble(e, top.bookies)
			if err != nil {
				t.Fatalf("E/Qw %d/%d: %v", e, wq, err)
			}
			if a := p.Adheres(ens, wq, 2); a < MeetsSoft {
				t.Fatalf("E/Qw %d/%d: ensemble %v is %v", e, wq, ens, a)
			}
			if p.steps > maxSteps {
				t.Fatalf("E/Qw %d/%d: %d search steps", e, wq, p.steps)
			}
		}
	}
}

// Zone A of 298 bookies each in its own upgrade domain, zones B and C of
// one bookie each, E 10 Qw 5: no write set can span three zones (counting
// proves it), and [zB, zA×4, zC, zA×4] spans two in every one: the policy
// must find such an ensemble, not report ErrNotEnoughBookies after running
// out of budget (2 min 23 s, then ErrNotEnoughBookies, before).
func TestZoneAwareSkewedFindsValid(t *testing.T) {
	var top topology
	for u := range 298 {
		largeTopology(&top, fmt.Sprintf("/zA/ud%d", u), 1)
	}
	largeTopology(&top, "/zB/ud0", 1)
	largeTopology(&top, "/zC/ud0", 1)
	for seed := range uint64(10) {
		p := NewZoneAware(rand.NewPCG(seed, 5), top.locs, 5, 3, 0, 0, true)
		ens, err := p.NewEnsemble(10, top.bookies)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if a := p.Adheres(ens, 5, 3); a != MeetsSoft {
			t.Fatalf("seed %d: ensemble %v is %v, want meets-soft", seed, ens, a)
		}
		if p.steps > 1000 {
			t.Fatalf("seed %d: %d search steps", seed, p.steps)
		}
	}
}

// Rack-aware enforced over one big rack and four single-bookie racks:
// E 10 Qw 5 with 5 racks per write set is impossible by counting and is
// refused without a search; 5 racks of 2 place [r0..r4, r0..r4].
func TestRackAwareLargeBounded(t *testing.T) {
	var imp topology
	largeTopology(&imp, "/default/big", 200)
	for r := range 4 {
		largeTopology(&imp, fmt.Sprintf("/default/r%d", r), 1)
	}
	p := NewRackAware(rand.NewPCG(1, 6), imp.locs, true)
	p.WriteQuorum, p.MinRacksPerWriteQuorum = 5, 5
	if _, err := p.NewEnsemble(10, imp.bookies); !errors.Is(err, ErrNotEnoughBookies) || p.steps != 0 {
		t.Fatalf("one big rack: %v after %d steps, want ErrNotEnoughBookies at once", err, p.steps)
	}
	var ok topology
	for r := range 5 {
		largeTopology(&ok, fmt.Sprintf("/default/r%d", r), 2)
	}
	largeTopology(&ok, "/default/big", 200)
	for seed := range uint64(10) {
		p := NewRackAware(rand.NewPCG(seed, 7), ok.locs, true)
		p.WriteQuorum, p.MinRacksPerWriteQuorum = 5, 5
		ens, err := p.NewEnsemble(10, ok.bookies)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if a := p.Adheres(ens, 5, 3); a != MeetsStrict {
			t.Fatalf("seed %d: ensemble %v is %v", seed, ens, a)
		}
		if p.steps > maxSteps {
			t.Fatalf("seed %d: %d search steps", seed, p.steps)
		}
	}
}

// inflate returns top with many more bookies: each location gets up to 20
// more, and each top-level domain up to 40 more sub-domains of one bookie.
// Adding bookies never removes an adhering ensemble.
func inflate(r *rand.Rand, top topology) topology {
	out := topology{bookies: slices.Clone(top.bookies), locs: map[metadata.BookieID]string{}}
	for b, l := range top.locs {
		out.locs[b] = l
	}
	tops := map[string]bool{}
	for _, l := range top.locs {
		a, _, _ := pathParts(l)
		tops[a] = true
	}
	for b := range top.locs {
		l := top.locs[b]
		for i := range r.IntN(20) {
			nb := metadata.BookieID(fmt.Sprintf("%s-more%d:3181", b, i))
			out.bookies = append(out.bookies, nb)
			out.locs[nb] = l
		}
	}
	for a := range tops {
		for s := range r.IntN(40) {
			largeTopology(&out, fmt.Sprintf("/%s/extra%d", a, s), 1)
		}
	}
	r.Shuffle(len(out.bookies), func(i, j int) { out.bookies[i], out.bookies[j] = out.bookies[j], out.bookies[i] })
	return out
}

// Large topologies (the property tests' promise at scale): a small
// topology where an adhering ensemble provably exists (enumerated) is
// inflated to hundreds of bookies; the policy must still place an adhering
// one (strict for zones when a strict one existed), within the step bound.
func TestPropertyLargeTopologies(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 13))
	counts := map[string]int{}
	for n := range 800 {
		small := genTopology(r, 4, 2)
		e, wq, aq := quorums(r, 6)
		// Zone-aware strict.
		if e%wq == 0 && wq > 2 {
			p := NewZoneAware(rand.NewPCG(uint64(n), 14), small.locs, wq, aq, 2, 3, true)
			zoned := slices.DeleteFunc(slices.Clone(small.bookies), func(b metadata.BookieID) bool { return p.Location(b) == DefaultFaultDomain })
			adheres := func(ens []metadata.BookieID) bool { return p.Adheres(ens, wq, aq) >= MeetsSoft }
			strict := func(ens []metadata.BookieID) bool { return p.Adheres(ens, wq, aq) == MeetsStrict }
			if len(zoned) >= e && exists(make([]metadata.BookieID, e), zoned, p.Location, adheres) {
				wantStrict := exists(make([]metadata.BookieID, e), zoned, p.Location, strict)
				big := inflate(r, small)
				p := NewZoneAware(rand.NewPCG(uint64(n), 15), big.locs, wq, aq, 2, 3, true)
				ens, err := p.NewEnsemble(e, big.bookies)
				what := fmt.Sprintf("zone topology %d (E/Qw/Qa %d/%d/%d, %d bookies, small %v)", n, e, wq, aq, len(big.bookies), small.locs)
				switch {
				case err != nil:
					t.Fatalf("%s: %v", what, err)
				case p.Adheres(ens, wq, aq) < MeetsSoft || (wantStrict && p.Adheres(ens, wq, aq) != MeetsStrict):
					t.Fatalf("%s: ensemble %v is %v (strict exists: %v)", what, ens, p.Adheres(ens, wq, aq), wantStrict)
				case p.steps > maxSteps:
					t.Fatalf("%s: %d steps", what, p.steps)
				}
				counts["zone"]++
			}
		}
		// Region-aware with durability.
		if m := 2; aq >= m && aq > wq-wq/m {
			p := NewRegionAware(rand.NewPCG(uint64(n), 16), small.locs, wq, aq, []string{"d0", "d1", "d2", "d3"})
			if len(small.bookies) >= e && exists(make([]metadata.BookieID, e), small.bookies, p.Location, p.DurableEnsemble) {
				big := inflate(r, small)
				p := NewRegionAware(rand.NewPCG(uint64(n), 17), big.locs, wq, aq, []string{"d0", "d1", "d2", "d3"})
				ens, err := p.NewEnsemble(e, big.bookies)
				what := fmt.Sprintf("region topology %d (E/Qw/Qa %d/%d/%d, %d bookies, small %v)", n, e, wq, aq, len(big.bookies), small.locs)
				switch {
				case err != nil:
					t.Fatalf("%s: %v", what, err)
				case !p.DurableEnsemble(ens):
					t.Fatalf("%s: ensemble %v not durable", what, ens)
				case p.steps > maxSteps:
					t.Fatalf("%s: %d steps", what, p.steps)
				}
				counts["region"]++
			}
		}
		// Rack-aware enforced.
		p := NewRackAware(rand.NewPCG(uint64(n), 18), small.locs, true)
		p.WriteQuorum, p.MinRacksPerWriteQuorum = wq, 1+r.IntN(3)
		cands := slices.DeleteFunc(slices.Clone(small.bookies), func(b metadata.BookieID) bool { return p.Rack(b) == DefaultRack })
		adheres := func(ens []metadata.BookieID) bool { return p.Adheres(ens, wq, aq) == MeetsStrict }
		if len(cands) >= e && exists(make([]metadata.BookieID, e), cands, p.Rack, adheres) {
			big := inflate(r, small)
			q := NewRackAware(rand.NewPCG(uint64(n), 19), big.locs, true)
			q.WriteQuorum, q.MinRacksPerWriteQuorum = wq, p.MinRacksPerWriteQuorum
			ens, err := q.NewEnsemble(e, big.bookies)
			what := fmt.Sprintf("rack topology %d (E/Qw/Qa %d/%d/%d, %d bookies, small %v)", n, e, wq, aq, len(big.bookies), small.locs)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", what, err)
			case q.Adheres(ens, wq, aq) != MeetsStrict:
				t.Fatalf("%s: ensemble %v does not adhere", what, ens)
			case q.steps > maxSteps:
				t.Fatalf("%s: %d steps", what, q.steps)
			}
			counts["rack"]++
		}
	}
	t.Log(counts)
	for _, k := range []string{"zone", "region", "rack"} {
		if counts[k] < 30 {
			t.Fatalf("generator too one-sided: %v", counts)
		}
	}
}
