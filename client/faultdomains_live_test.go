package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/topologyscript"
)

// The write handle's fault-domain rule is pure: it judges by the locations
// its policy took when the handle was made, so its answer for the same
// acks never changes (the writer asks it only when an ack arrives). A
// handle made after the script resolved a bookie judges it by its rack.
// And with a script that has resolved nothing yet, the default policy
// stays rack-aware (the rule stays on).
func TestFaultDomainRuleSnapshot(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "topo.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor h in \"$@\"; do case $h in e*) echo /r3;; *) echo /r1;; esac; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, d, e := metadata.BookieID("a:1"), metadata.BookieID("d:1"), metadata.BookieID("e:1")
	c := &Client{
		cfg:    Config{EnforceMinNumFaultDomainsForWrite: true, NetworkTopologyScript: script},
		script: &topologyscript.Resolver{Script: script, Timeout: DefaultNetworkTopologyScriptTimeout, FailureTTL: DefaultNetworkTopologyScriptFailureCacheTime},
	}
	// No static locations and nothing resolved: still rack-aware.
	if c.ackRule(c.newPolicy(3, 2), 3, 2) == nil {
		t.Fatal("script configured, nothing resolved yet: no fault-domain rule (the default policy turned random)")
	}

	c.racks = map[metadata.BookieID]string{a: "/r1"}
	before := c.ackRule(c.newPolicy(3, 2), 3, 2)
	if before == nil {
		t.Fatal("no fault-domain rule")
	}
	answer := before([]metadata.BookieID{a, d})
	c.script.Locations(context.Background(), []metadata.BookieID{d, e})
	if before([]metadata.BookieID{a, d}) != answer {
		t.Fatal("the rule of a handle changed its answer for the same acks after the script resolved a bookie")
	}
	after := c.ackRule(c.newPolicy(3, 2), 3, 2)
	if after([]metadata.BookieID{a, d}) {
		t.Fatal("a and d, both /r1, adhere for a handle made after d was resolved")
	}
	if !after([]metadata.BookieID{a, e}) {
		t.Fatal("a (/r1) and e (/r3): not adhering for a handle made after e was resolved")
	}
}
