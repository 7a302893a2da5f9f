package lint

import (
	"os"
	"strings"
	"testing"
)

// TestMakeTestEnablesInvariants keeps `make test` (what CI runs) building
// the unit tests and the simulator's seeds with the invariants tag
// (internal/ledger/invariants.go).
func TestMakeTestEnablesInvariants(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	if !strings.Contains(mk, "\nTAGS ?= invariants\n") {
		t.Error("Makefile: TAGS must default to invariants")
	}
	for _, target := range []string{"unit", "sim"} {
		i := strings.Index(mk, "\n"+target+":\n")
		if i < 0 {
			t.Fatalf("Makefile: no %s target", target)
		}
		recipe := mk[i+len(target)+3:]
		if j := strings.Index(recipe, "\n\n"); j >= 0 {
			recipe = recipe[:j]
		}
		if !strings.Contains(recipe, "-tags '$(TAGS)'") {
			t.Errorf("Makefile: %s does not build with -tags '$(TAGS)': %q", target, recipe)
		}
	}
	if !strings.Contains(mk, "\ntest: vet unit") {
		t.Error("Makefile: test no longer starts with vet and unit")
	}
}
