package placement

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

func ids(s ...string) []metadata.BookieID {
	out := make([]metadata.BookieID, len(s))
	for i, x := range s {
		out[i] = metadata.BookieID(x)
	}
	return out
}

func TestRandomNewEnsemble(t *testing.T) {
	p := NewRandom(rand.NewPCG(1, 2))
	writable := ids("b1", "b2", "b3", "b4", "b2")
	for range 100 {
		ens, err := p.NewEnsemble(3, writable)
		if err != nil {
			t.Fatal(err)
		}
		if len(ens) != 3 || ens[0] == ens[1] || ens[1] == ens[2] || ens[0] == ens[2] {
			t.Fatalf("bad ensemble %v", ens)
		}
	}
	if _, err := p.NewEnsemble(5, writable); !errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("want ErrNotEnoughBookies, got %v", err)
	}
}

func TestRandomReplaceBookie(t *testing.T) {
	p := NewRandom(rand.NewPCG(3, 4))
	ens := ids("b1", "b2", "b3")
	seen := map[metadata.BookieID]bool{}
	for range 200 {
		b, err := p.ReplaceBookie(ens, 0, ids("b1", "b2", "b3", "b4", "b5", "b6"), ids("b5"))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ens, b) || b == "b5" {
			t.Fatalf("picked %s", b)
		}
		seen[b] = true
	}
	if !seen["b4"] || !seen["b6"] {
		t.Fatalf("choice not spread: %v", seen)
	}
	if _, err := p.ReplaceBookie(ens, 1, ids("b1", "b2", "b3", "b5"), ids("b5")); !errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("want ErrNotEnoughBookies, got %v", err)
	}
}

// TestRandomDeterministic: the same seed gives the same choices.
func TestRandomDeterministic(t *testing.T) {
	run := func() []metadata.BookieID {
		p := NewRandom(rand.NewPCG(7, 7))
		var out []metadata.BookieID
		for range 20 {
			b, _ := p.ReplaceBookie(ids("b1"), 0, ids("b1", "b2", "b3", "b4", "b5"), nil)
			out = append(out, b)
		}
		return out
	}
	if a, b := run(), run(); !slices.Equal(a, b) {
		t.Fatalf("%v != %v", a, b)
	}
}
