package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/topologyscript"
)

// The write handle's fault-domain rule judges acks by the client's current
// locations, not the snapshot its policy took: bookie e (rack /r3 by the
// script) joined after the handle was made; before the script resolved it,
// it counts for no rack (not as one more, the default rack), after it
// counts as its own. And with a script that has resolved nothing yet, the
// default policy stays rack-aware (the rule stays on).
func TestFaultDomainRuleReadsLiveLocations(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "topo.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor h in \"$@\"; do case $h in e*) echo /r3;; *) echo /r1;; esac; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, b, d, e := metadata.BookieID("a:1"), metadata.BookieID("b:1"), metadata.BookieID("d:1"), metadata.BookieID("e:1")
	c := &Client{
		cfg:    Config{EnforceMinNumFaultDomainsForWrite: true, NetworkTopologyScript: script},
		script: &topologyscript.Resolver{Script: script, Timeout: DefaultNetworkTopologyScriptTimeout, FailureTTL: DefaultNetworkTopologyScriptFailureCacheTime},
	}
	// No static locations and nothing resolved: still rack-aware.
	if c.ackRule(c.newPolicy(3, 2), 3, 2) == nil {
		t.Fatal("script configured, nothing resolved yet: no fault-domain rule (the default policy turned random)")
	}

	c.racks = map[metadata.BookieID]string{a: "/r1", b: "/r2"}
	rule := c.ackRule(c.newPolicy(3, 2), 3, 2)
	if rule == nil {
		t.Fatal("no fault-domain rule")
	}
	if !rule([]metadata.BookieID{a, b}) {
		t.Fatal("a (/r1) and b (/r2): two racks, want adhering")
	}
	for _, x := range []metadata.BookieID{d, e} {
		if rule([]metadata.BookieID{a, x}) {
			t.Fatalf("a and %s (not resolved yet) adhere: an unknown bookie counted as a rack", x)
		}
	}
	c.script.Locations(context.Background(), []metadata.BookieID{d, e})
	if rule([]metadata.BookieID{a, d}) {
		t.Fatal("a and d, both /r1: adhering")
	}
	if !rule([]metadata.BookieID{a, e}) {
		t.Fatal("a (/r1) and e (/r3, resolved after the handle was made): not adhering, want the rule to read the live locations")
	}
}
