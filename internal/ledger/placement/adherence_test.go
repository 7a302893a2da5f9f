package placement

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

func bookies(s ...string) []metadata.BookieID {
	out := make([]metadata.BookieID, len(s))
	for i, x := range s {
		out[i] = metadata.BookieID(x + ":3181")
	}
	return out
}

func TestRandomAdheres(t *testing.T) {
	p := NewRandom(rand.NewPCG(1, 1))
	if got := p.Adheres(bookies("a", "b", "c"), 2, 2); got != MeetsStrict {
		t.Fatalf("distinct bookies: %v", got)
	}
	if got := p.Adheres(bookies("a", "b", "a"), 2, 2); got != NotAdhering {
		t.Fatalf("a repeated bookie: %v", got)
	}
	if got := p.Adheres(bookies("a", "b"), 3, 2); got != NotAdhering {
		t.Fatalf("Qw > E: %v", got)
	}
	plan, ok := p.PlanRepair(bookies("a", "b", "a"), 2, 2, bookies("a", "b", "c", "d"))
	if !ok || len(plan) != 1 || plan[2] != bookies("c")[0] && plan[0] != bookies("c")[0] {
		t.Fatalf("plan %v, %v", plan, ok)
	}
}

// BookKeeper's rack-aware rule: every write set spans min(Qw, minRacks)
// racks; only strict or failing.
func TestRackAwareAdheres(t *testing.T) {
	loc := map[metadata.BookieID]string{}
	for i, b := range bookies("a1", "a2", "a3", "b1", "b2", "c1") {
		loc[b] = []string{"/r/a", "/r/a", "/r/a", "/r/b", "/r/b", "/r/c"}[i]
	}
	p := NewRackAware(rand.NewPCG(1, 1), loc, false)
	for _, tc := range []struct {
		ens      []metadata.BookieID
		qw, minR int
		want     Adherence
		why      string
	}{
		{bookies("a1", "a2"), 2, 0, NotAdhering, "one rack"},
		{bookies("a1", "b1"), 2, 0, MeetsStrict, "two racks"},
		{bookies("a1", "a2", "b1"), 3, 0, MeetsStrict, "E=Qw=3 over two racks meets the default 2"},
		{bookies("a1", "a2", "b1"), 3, 3, NotAdhering, "needs 3 racks"},
		{bookies("a1", "b1", "c1"), 3, 3, MeetsStrict, "three racks"},
		// E=4, Qw=2: write sets {0,1} {1,2} {2,3} {3,0}.
		{bookies("a1", "b1", "a2", "b2"), 2, 0, MeetsStrict, "alternating"},
		{bookies("a1", "a2", "b1", "b2"), 2, 0, NotAdhering, "write set {0,1} in one rack"},
		{bookies("a1", "a2", "b1"), 1, 0, MeetsStrict, "Qw=1 needs one rack"},
		{bookies("a1", "x9", "b1"), 2, 0, MeetsStrict, "an unplaced bookie is in the default rack"},
	} {
		p.MinRacksPerWriteQuorum = tc.minR
		if got := p.Adheres(tc.ens, tc.qw, 1); got != tc.want {
			t.Errorf("%s: %v Qw=%d min=%d: %v, want %v", tc.why, tc.ens, tc.qw, tc.minR, got, tc.want)
		}
	}
}

// A plan moves few bookies, only to writable non-members, and its result
// adheres; with one rack available there is no plan.
func TestRackAwarePlanRepair(t *testing.T) {
	loc := map[metadata.BookieID]string{}
	var writable []metadata.BookieID
	for _, r := range []string{"a", "b", "c"} {
		for i := range 3 {
			b := metadata.BookieID("10." + r + "." + string(rune('0'+i)) + ":3181")
			loc[b] = "/r/" + r
			writable = append(writable, b)
		}
	}
	p := NewRackAware(rand.NewPCG(1, 1), loc, false)
	rackA := writable[:3]
	for _, tc := range []struct {
		ens      []metadata.BookieID
		qw, minR int
		moves    int
	}{
		{rackA[:2], 2, 0, 1},
		{rackA, 3, 0, 1},
		{rackA, 3, 3, 2},
		{rackA, 2, 0, 2}, // E=3 Qw=2: each of 3 write sets; one move fixes two
		{[]metadata.BookieID{writable[0], writable[3]}, 2, 0, 0},
	} {
		p.MinRacksPerWriteQuorum = tc.minR
		plan, ok := p.PlanRepair(tc.ens, tc.qw, 1, writable)
		if !ok || len(plan) != tc.moves {
			t.Fatalf("%v Qw=%d min=%d: plan %v ok %v, want %d moves", tc.ens, tc.qw, tc.minR, plan, ok, tc.moves)
		}
		fixed := slices.Clone(tc.ens)
		for i, b := range plan {
			if slices.Contains(tc.ens, b) {
				t.Fatalf("plan %v moves a member", plan)
			}
			fixed[i] = b
		}
		if got := p.Adheres(fixed, tc.qw, 1); got != MeetsStrict {
			t.Fatalf("%v after plan %v: %v", fixed, plan, got)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(fixed)))) != len(fixed) {
			t.Fatalf("plan %v repeats a bookie: %v", plan, fixed)
		}
	}
	// Only rack a is writable: nothing to move to.
	if plan, ok := p.PlanRepair(rackA[:2], 2, 2, rackA); ok || plan != nil {
		t.Fatalf("plan %v ok %v with one writable rack", plan, ok)
	}
}
