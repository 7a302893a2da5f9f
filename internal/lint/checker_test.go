package lint

import (
	"os"
	"path/filepath"
	"testing"
)

// The checks must be able to fail: these cases exercise the checker itself.

func TestCheckerCatchesViolations(t *testing.T) {
	if r, _ := ruleFor("internal/bookie/server"); r != "internal/bookie/server" {
		t.Fatalf("longest rule for bookie/server = %q", r)
	}
	if r, _ := ruleFor("internal/bookie/something"); r != "internal/bookie" {
		t.Fatalf("rule for bookie/something = %q", r)
	}
	if _, ok := ruleFor("internal/newthing"); ok {
		t.Fatal("a package without a rule must be reported")
	}
	if permits(layers["internal/storage"], "internal/bookie") {
		t.Fatal("storage must not import bookie")
	}
	if permits(layers["internal/wire"], "internal/metadata") {
		t.Fatal("wire must not import metadata")
	}
	if !isPure("internal/bookie") || isPure("internal/bookie/server") || !isPure("internal/storage/journal") {
		t.Fatal("purity classification is wrong")
	}
}

func TestWallClockCallsFound(t *testing.T) {
	src := `package p
import clock "time"
func f() { _ = clock.Now(); clock.Sleep(1); _ = clock.Duration(3) }
`
	file := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := wallClockCalls(t, file)
	if len(got) != 2 || got[0].fn != "Now" || got[1].fn != "Sleep" {
		t.Fatalf("found %+v, want Now and Sleep", got)
	}
}
