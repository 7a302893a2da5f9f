package placement

import (
	"math/rand/v2"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// The rules of BookKeeper's areAckedBookiesAdheringToPlacementPolicy
// (TestRackawareEnsemblePlacementPolicy, TestZoneawareEnsemblePlacementPolicy
// testAreAckedBookiesAdheringToPlacementPolicy).
func TestAckedAdhering(t *testing.T) {
	loc := map[metadata.BookieID]string{}
	for i, b := range bookies("a1", "a2", "b1", "c1") {
		loc[b] = []string{"/r1/a", "/r1/a", "/r1/b", "/r2/c"}[i]
	}
	rack := NewRackAware(rand.NewPCG(1, 1), loc, false)
	region := NewRegionAware(rand.NewPCG(1, 1), loc, 3, 2, nil)
	zloc := map[metadata.BookieID]string{}
	for i, b := range bookies("z1u1", "z1u2", "z2u1", "z3u1", "bad") {
		zloc[b] = []string{"/z1/u1", "/z1/u2", "/z2/u1", "/z3/u1", "/no-ud"}[i]
	}
	zone := NewZoneAware(rand.NewPCG(1, 1), zloc, 3, 2, 2, 3, true)
	zone4 := NewZoneAware(rand.NewPCG(1, 1), zloc, 3, 2, 4, 4, true)
	for _, tc := range []struct {
		name   string
		c      AckChecker
		acked  []metadata.BookieID
		qw, qa int
		minR   int
		want   bool
	}{
		{"rack: one rack", rack, bookies("a1", "a2"), 3, 2, 0, false},
		{"rack: two racks", rack, bookies("a1", "b1"), 3, 2, 0, true},
		{"rack: min 3 racks, two acked", rack, bookies("a1", "b1"), 3, 2, 3, false},
		{"rack: min 3 racks, three racks", rack, bookies("a1", "b1", "c1"), 3, 2, 3, true},
		{"rack: min capped at Qw", rack, bookies("a1", "b1"), 2, 2, 3, true},
		{"rack: Qw=1 needs one rack", rack, bookies("a1"), 1, 1, 0, true},
		{"rack: unplaced bookies share the default rack", rack, bookies("x", "y"), 2, 2, 0, false},
		{"rack: an unplaced bookie is one more rack", rack, bookies("a1", "x"), 2, 2, 0, true},
		{"region: locations, not regions", region, bookies("a1", "b1"), 3, 2, 0, true},
		{"region: one location", region, bookies("a1", "a2"), 3, 2, 0, false},
		{"region: min 3", region, bookies("a1", "b1", "c1"), 3, 2, 3, true},
		{"zone: one zone, two upgrade domains", zone, bookies("z1u1", "z1u2"), 3, 2, 0, false},
		{"zone: two zones", zone, bookies("z1u1", "z2u1"), 3, 2, 0, true},
		{"zone: fewer than Qa", zone, bookies("z1u1", "z2u1"), 3, 3, 0, false},
		{"zone: invalid location is the default zone", zone, bookies("bad", "z2u1"), 3, 2, 0, true},
		{"zone: min 4 zones, three", zone4, bookies("z1u1", "z2u1", "z3u1"), 4, 3, 0, false},
		{"zone: min 4 capped at Qw=3", zone4, bookies("z1u1", "z2u1", "z3u1"), 3, 3, 0, true},
	} {
		rack.MinRacksPerWriteQuorum, region.MinRacksPerWriteQuorum = tc.minR, tc.minR
		if got := tc.c.AckedAdhering(tc.acked, tc.qw, tc.qa); got != tc.want {
			t.Errorf("%s: AckedAdhering(%v, Qw=%d, Qa=%d) = %v, want %v", tc.name, tc.acked, tc.qw, tc.qa, got, tc.want)
		}
	}
}

func TestAckedAdherence(t *testing.T) {
	loc := map[metadata.BookieID]string{bookies("a")[0]: "/r/a", bookies("a2")[0]: "/r/a", bookies("b")[0]: "/r/b"}
	src := rand.NewPCG(1, 1)
	if f := AckedAdherence(NewRandom(src), 2, 2); f != nil {
		t.Fatal("random placement has no fault-domain rule")
	}
	for _, c := range []Config{{Kind: KindRackAware, Locations: loc}, {Kind: KindRackAware, Locations: loc, Avoid: func(metadata.BookieID) bool { return false }},
		{Kind: KindRegionAware, Locations: loc}, {Kind: KindDefault, Locations: loc}} {
		f := AckedAdherence(c.ForLedger(src, 2, 2), 2, 2)
		if f == nil {
			t.Fatalf("%v: no rule", c.Kind)
		}
		if f(bookies("a", "a2")) || !f(bookies("a", "b")) {
			t.Fatalf("%v: wrong rule", c.Kind)
		}
	}
	if f := AckedAdherence((&Config{}).ForLedger(src, 2, 2), 2, 2); f != nil {
		t.Fatal("default placement without locations has no fault-domain rule")
	}
}
