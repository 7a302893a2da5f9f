package rereplication_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/topologyscript"
)

// A PlacementSource binds the policy to the ledger's quorums and knows the
// locations of the static map and of the script (for the bookies the map
// does not place): zone-aware, the replacement of z3's bookie is the other
// z3 bookie, which only the script places.
func TestPlacementSourceZoneAwareWithScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "topology.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor h in \"$@\"; do case $h in c*) echo /z3/u$h;; *) echo /zz/unknown;; esac; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := func(s string) metadata.BookieID { return metadata.BookieID(s + ":3181") }
	src := &rereplication.PlacementSource{
		Config: placement.Config{Kind: placement.KindZoneAware, EnforceStrictZoneaware: true, Locations: map[metadata.BookieID]string{
			id("a1"): "/z1/u1", id("a2"): "/z1/u2", id("b1"): "/z2/u1", id("b2"): "/z2/u2",
		}},
		Script: &topologyscript.Resolver{Script: script, Default: placement.DefaultFaultDomain},
	}
	ensemble := []metadata.BookieID{id("a1"), id("b1"), id("c1")}
	writable := []metadata.BookieID{id("a1"), id("a2"), id("b1"), id("b2"), id("c2")}
	for range 20 {
		pol := src.Policy(context.Background(), 3, 2, append(ensemble, writable...))
		got, err := pol.ReplaceBookie(ensemble, 2, writable, []metadata.BookieID{id("c1")})
		if err != nil {
			t.Fatal(err)
		}
		if got != id("c2") {
			t.Fatalf("replacement of z3's c1: %s, want c2 (the only other z3 bookie)", got)
		}
	}
	// Bound to the quorums: E=3 with Qw=2 is no valid zone-aware ledger.
	if _, err := src.Policy(context.Background(), 2, 2, writable).NewEnsemble(3, writable); err == nil {
		t.Fatal("zone-aware E=3 Qw=2: want an error")
	}
}

// The script's answers for bookies no call asks about any more are
// forgotten once the resolver holds more than twice a call's bookies.
func TestPlacementSourcePrunesResolver(t *testing.T) {
	script := filepath.Join(t.TempDir(), "topology.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor h in \"$@\"; do echo /r/$h; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := &rereplication.PlacementSource{Config: placement.Config{Kind: placement.KindRackAware},
		Script: &topologyscript.Resolver{Script: script, Default: placement.DefaultRack}}
	var old []metadata.BookieID
	for i := range 10 {
		old = append(old, metadata.BookieID(fmt.Sprintf("old%d:3181", i)))
	}
	src.Policy(context.Background(), 2, 2, old)
	if n := src.Script.Len(); n != 10 {
		t.Fatalf("resolver holds %d bookies, want 10", n)
	}
	now := []metadata.BookieID{"new0:3181", "new1:3181", "old0:3181"}
	src.Policy(context.Background(), 2, 2, now)
	if n := src.Script.Len(); n != 3 {
		t.Fatalf("after a call for %v the resolver holds %d bookies, want 3", now, n)
	}
	cached := src.Script.Cached()
	for _, b := range now {
		if _, ok := cached[b]; !ok {
			t.Fatalf("%s forgotten", b)
		}
	}
}
