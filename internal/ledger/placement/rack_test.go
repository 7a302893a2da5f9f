package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

func rackSetup(racks, perRack int) ([]metadata.BookieID, map[metadata.BookieID]string) {
	var bs []metadata.BookieID
	loc := map[metadata.BookieID]string{}
	for r := range racks {
		for i := range perRack {
			b := metadata.BookieID(fmt.Sprintf("10.0.%d.%d:3181", r, i))
			bs = append(bs, b)
			loc[b] = fmt.Sprintf("/region/rack%d", r)
		}
	}
	return bs, loc
}

func TestRackAwareThreeRacks(t *testing.T) {
	bs, loc := rackSetup(3, 3)
	for seed := range uint64(200) {
		p := NewRackAware(rand.NewPCG(seed, 1), loc, true)
		ens, err := p.NewEnsemble(3, bs)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, b := range ens {
			seen[p.Rack(b)] = true
		}
		if len(seen) != 3 {
			t.Fatalf("seed %d: ensemble %v spans %d racks", seed, ens, len(seen))
		}
		// Replacing a member keeps 3 racks.
		nb, err := p.ReplaceBookie(ens, 1, bs, []metadata.BookieID{ens[1]})
		if err != nil {
			t.Fatal(err)
		}
		if p.Rack(nb) != p.Rack(ens[1]) {
			t.Fatalf("seed %d: replacement %s in %s, want %s", seed, nb, p.Rack(nb), p.Rack(ens[1]))
		}
	}
}

// Two racks, E=3: the documented fallback alternates racks (2 + 1, never
// two consecutive members in one rack except around the wrap), and
// EnforceMinNumRacks refuses.
func TestRackAwareTwoRacksFallback(t *testing.T) {
	bs, loc := rackSetup(2, 3)
	for seed := range uint64(200) {
		p := NewRackAware(rand.NewPCG(seed, 2), loc, false)
		ens, err := p.NewEnsemble(3, bs)
		if err != nil {
			t.Fatal(err)
		}
		if p.Rack(ens[0]) == p.Rack(ens[1]) || p.Rack(ens[1]) == p.Rack(ens[2]) {
			t.Fatalf("seed %d: ensemble %v does not alternate racks", seed, ens)
		}
	}
	p := NewRackAware(rand.NewPCG(1, 2), loc, true)
	if _, err := p.NewEnsemble(3, bs); !errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("enforced placement over 2 racks: %v", err)
	}
	if _, err := p.NewEnsemble(2, bs); err != nil {
		t.Fatalf("enforced E=2 over 2 racks: %v", err)
	}
}

func TestParseLocations(t *testing.T) {
	m, err := ParseLocations(strings.NewReader("# racks\n10.0.0.1:3181 /r1/a\n\n10.0.0.2:3181 /r1/b\n"))
	if err != nil || len(m) != 2 || m["10.0.0.2:3181"] != "/r1/b" {
		t.Fatalf("%v, %v", m, err)
	}
	if _, err := ParseLocations(strings.NewReader("10.0.0.1:3181 rack\n")); err == nil {
		t.Fatal("bad line accepted")
	}
}
