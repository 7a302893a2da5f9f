package quorum

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/quick"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs testdata/*.txt. Commands:
//
//	write-sets E=4 Qw=3 entries=0..5     prints each entry's write set
//	covered E=5 Qw=2 Qa=2 known=(0,2,4)  prints whether coverage holds
//	min-covers E=3 Qw=2 Qa=1             prints every minimal covering set
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			p := Params{EnsembleSize: intArg(t, d, "E", 0), WriteQuorum: intArg(t, d, "Qw", 0), AckQuorum: intArg(t, d, "Qa", 1)}
			switch d.Cmd {
			case "write-sets":
				var from, to int64
				var s string
				d.ScanArgs(t, "entries", &s)
				if _, err := fmt.Sscanf(s, "%d..%d", &from, &to); err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				for e := from; e <= to; e++ {
					fmt.Fprintf(&b, "e%d -> %v\n", e, p.WriteSet(e))
				}
				return b.String()
			case "covered":
				known := make([]bool, p.EnsembleSize)
				var idx []string
				d.ScanArgs(t, "known", &idx)
				for _, s := range idx {
					i, err := strconv.Atoi(s)
					if err != nil {
						t.Fatal(err)
					}
					known[i] = true
				}
				return fmt.Sprintf("%v\n", Covered(p, known))
			case "min-covers":
				var b strings.Builder
				for _, set := range minimalCovers(p) {
					fmt.Fprintf(&b, "%v\n", set)
				}
				return b.String()
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		})
	})
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

// minimalCovers lists the covering sets of bookie indexes none of whose
// proper subsets covers, smallest first.
func minimalCovers(p Params) [][]int {
	var out [][]int
	n := p.EnsembleSize
	for size := 0; size <= n; size++ {
		for mask := 0; mask < 1<<n; mask++ {
			if popcount(mask) != size || !Covered(p, maskToKnown(mask, n)) {
				continue
			}
			minimal := true
			for _, prev := range out {
				pm := 0
				for _, i := range prev {
					pm |= 1 << i
				}
				if pm&mask == pm {
					minimal = false
				}
			}
			if minimal {
				var set []int
				for i := range n {
					if mask&(1<<i) != 0 {
						set = append(set, i)
					}
				}
				out = append(out, set)
			}
		}
	}
	return out
}

func popcount(m int) int {
	c := 0
	for ; m != 0; m &= m - 1 {
		c++
	}
	return c
}

func maskToKnown(mask, n int) []bool {
	k := make([]bool, n)
	for i := range n {
		k[i] = mask&(1<<i) != 0
	}
	return k
}

// naiveCovered is the rule restated from its purpose: coverage fails iff
// some entry's write set still holds Qa bookies that have not answered, so
// an ack quorum could still form without any answering bookie.
func naiveCovered(p Params, known []bool) bool {
	for e := int64(0); e < int64(p.EnsembleSize); e++ {
		unknown := 0
		for _, idx := range p.WriteSet(e) {
			if !known[idx] {
				unknown++
			}
		}
		if unknown >= p.AckQuorum {
			return false
		}
	}
	return true
}

// TestCoveredQuick checks Covered against naiveCovered for random sizes
// (E ≤ 12) and answer sets, and WriteSetPosition against WriteSet.
func TestCoveredQuick(t *testing.T) {
	f := func(seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 1))
		e := 1 + r.IntN(12)
		qw := 1 + r.IntN(e)
		qa := 1 + r.IntN(qw)
		p := Params{EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa}
		known := make([]bool, e)
		for i := range known {
			known[i] = r.IntN(2) == 0
		}
		if Covered(p, known) != naiveCovered(p, known) {
			t.Logf("E=%d Qw=%d Qa=%d known=%v", e, qw, qa, known)
			return false
		}
		entry := r.Int64N(1 << 62)
		ws := p.WriteSet(entry)
		for idx := range e {
			pos := p.WriteSetPosition(entry, idx)
			want := -1
			for i, w := range ws {
				if w == idx {
					want = i
				}
			}
			if pos != want {
				t.Logf("entry %d idx %d: position %d, want %d", entry, idx, pos, want)
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
}

// TestCoverageSmall walks every (E, Qw, Qa) with E ≤ 6 (spec §7.16: test
// coverage against all small combinations): the full set always covers, the
// empty set never does, and adding an answer never breaks coverage.
func TestCoverageSmall(t *testing.T) {
	for e := 1; e <= 6; e++ {
		for qw := 1; qw <= e; qw++ {
			for qa := 1; qa <= qw; qa++ {
				p := Params{EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa}
				if !Covered(p, maskToKnown(1<<e-1, e)) {
					t.Errorf("%+v: all answered but not covered", p)
				}
				if Covered(p, maskToKnown(0, e)) {
					t.Errorf("%+v: nobody answered but covered", p)
				}
				for mask := 0; mask < 1<<e; mask++ {
					if !Covered(p, maskToKnown(mask, e)) {
						continue
					}
					for i := range e {
						if !Covered(p, maskToKnown(mask|1<<i, e)) {
							t.Errorf("%+v: %b covers but %b does not", p, mask, mask|1<<i)
						}
					}
				}
			}
		}
	}
}

// TestWriteSetLargeEntryID pins the 64-bit arithmetic for ids ≥ 2^31.
func TestWriteSetLargeEntryID(t *testing.T) {
	p := Params{EnsembleSize: 5, WriteQuorum: 3, AckQuorum: 2}
	got := p.WriteSet(1<<31 + 1) // 2147483649 mod 5 = 4
	if fmt.Sprint(got) != "[4 0 1]" {
		t.Fatalf("write set of 2^31+1: %v", got)
	}
}

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{{3, 2, 0}, {3, 1, 2}, {2, 3, 2}, {0, 0, 0}} {
		if err := p.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", p)
		}
	}
	for _, p := range []Params{{1, 1, 1}, {3, 3, 2}, {5, 3, 3}} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", p, err)
		}
	}
}
