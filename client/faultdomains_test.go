package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// EnforceMinNumFaultDomainsForWrite against real bookies: b0 and b1 are in
// rack /r/a, b2 in /r/b; E=Qw=3, Qa=2. While b2 is paused an append has two
// acks, from one rack: with the option it is not acknowledged (it fails by
// AddEntryQuorumTimeout, saying the fault domains were short, or completes
// once b2 answers); without it, two acks suffice.
func TestEnforceMinNumFaultDomainsForWrite(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	racks := map[string]string{string(cl.Bookies[0].ID): "/r/a", string(cl.Bookies[1].ID): "/r/a", string(cl.Bookies[2].ID): "/r/b"}
	opts := client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")}
	newRackClient := func(enforce bool, quorumTimeout time.Duration) *client.Client {
		return newClient(t, cl, func(cfg *client.Config) {
			cfg.PlacementPolicy = "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy"
			cfg.BookieRacks = racks
			cfg.EnforceMinNumFaultDomainsForWrite = enforce
			cfg.AddEntryQuorumTimeout = quorumTimeout
			// The paused bookie must not time out (that would start an
			// ensemble change, with no bookie to change to).
			cfg.AddEntryTimeout = 10 * time.Minute
		})
	}
	timing, waiting, plain := newRackClient(true, 3*time.Second), newRackClient(true, 0), newRackClient(false, 0)
	var handles []*client.WriteHandle
	for _, c := range []*client.Client{timing, waiting, plain} {
		w, err := c.CreateLedger(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, w)
	}
	wTiming, wWaiting, wPlain := handles[0], handles[1], handles[2]

	cl.Bookies[2].Pause()
	resumed := false
	defer func() {
		if !resumed {
			cl.Bookies[2].Resume()
		}
	}()

	// Without the option two acks from /r/a suffice.
	appendAll(t, ctx, wPlain, 0, 5)

	// With it the add has Qa acks but not two racks: it times out.
	_, err := wTiming.Append(ctx, []byte("e0"))
	if !errors.Is(err, client.ErrAddQuorumTimeout) || !strings.Contains(err.Error(), "too few fault domains") {
		t.Fatalf("append with acks from one rack: %v, want ErrAddQuorumTimeout for too few fault domains", err)
	}

	// Without a quorum timeout it waits for b2, and completes once b2
	// answers; the entry is then on all three bookies.
	f := wWaiting.AppendAsync(payloadOf(wWaiting.ID(), 0))
	cl.Bookies[2].Resume()
	resumed = true
	checkAcks(t, ctx, []*client.AppendFuture{f}, 0)
	appendAll(t, ctx, wWaiting, 1, 20)
	if err := wWaiting.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testcluster.CheckStored(ctx, t, cl.MD, wWaiting.ID(), opts.Password, func(e int64) []byte { return payloadOf(wWaiting.ID(), e) })
	if err := wPlain.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// EnforceMinNumFaultDomainsForWrite with a domain-aware policy and no
// location source is refused: every bookie would be in the default rack and
// no append could ever meet the rule. Any one source, the random policy or
// the default policy without locations (random placement: no rule) is
// accepted.
func TestFaultDomainConfigNeedsLocations(t *testing.T) {
	base := client.Config{MetadataServiceURI: "etcd://127.0.0.1:1/ledgers", EnforceMinNumFaultDomainsForWrite: true}
	for _, policy := range []string{"rackaware", "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy", "zoneaware"} {
		cfg := base
		cfg.PlacementPolicy = policy
		err := cfg.Validate()
		if !errors.Is(err, client.ErrInvalidConfig) || !strings.Contains(err.Error(), "EnforceMinNumFaultDomainsForWrite") {
			t.Errorf("policy %q without locations: %v, want ErrInvalidConfig naming EnforceMinNumFaultDomainsForWrite", policy, err)
		}
	}
	for name, set := range map[string]func(*client.Config){
		"racks":   func(c *client.Config) { c.BookieRacks = map[string]string{"b:1": "/r/a"} },
		"file":    func(c *client.Config) { c.BookieRackFile = "/etc/racks" },
		"script":  func(c *client.Config) { c.NetworkTopologyScript = "/bin/true" },
		"random":  func(c *client.Config) { c.PlacementPolicy = "random" },
		"default": func(c *client.Config) { c.PlacementPolicy = "" },
	} {
		cfg := base
		set(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
