package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/transport"
)

// membershipStore is an embedded etcd with a session that registers
// bookies (no bookie processes: placement only needs registrations).
type membershipStore struct {
	uri string
	s   metadata.Session
}

func newMembershipStore(t *testing.T, ctx context.Context) *membershipStore {
	t.Helper()
	uri := etcdtest.URI(etcdtest.Start(t), etcdtest.Scope(t))
	d, err := metadata.Open(ctx, uri, metadata.Options{DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s, err := d.OpenSession(ctx, metadata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return &membershipStore{uri: uri, s: s}
}

func (m *membershipStore) register(t *testing.T, ctx context.Context, readOnly bool, ids ...metadata.BookieID) {
	t.Helper()
	for _, id := range ids {
		if err := m.s.RegisterBookie(ctx, id, readOnly); err != nil {
			t.Fatal(err)
		}
	}
}

func internalCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hookedPolicy checks, whenever the policy places, that the client lock
// is free.
type hookedPolicy struct {
	placement.Policy
	c      *Client
	places chan bool // lock free?
}

func (h *hookedPolicy) NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	free := h.c.mu.TryLock()
	if free {
		h.c.mu.Unlock()
	}
	h.places <- free
	return h.Policy.NewEnsemble(size, writable)
}

// A placement search runs without the client lock: membership changes,
// other creates and writers never wait for it (it used to run under c.mu
// for seconds on large topologies).
func TestPlacementRunsOutsideClientLock(t *testing.T) {
	ctx := internalCtx(t)
	m := newMembershipStore(t, ctx)
	m.register(t, ctx, false, "10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181")
	c, err := New(ctx, Config{MetadataServiceURI: m.uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	places := make(chan bool, 10)
	c.policyHook = func(p placement.Policy) placement.Policy { return &hookedPolicy{Policy: p, c: c, places: places} }
	w, err := c.CreateLedger(ctx, LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	if free := <-places; !free {
		t.Fatal("NewEnsemble ran with the client lock held")
	}
}

// writeScript writes an executable topology script: it answers
// "/region/rack-<host>" per argument, or, while the file hang exists,
// hangs (its runs are then cut by the timeout or the client's Close).
func writeScript(t *testing.T) (path, hang string) {
	t.Helper()
	dir := t.TempDir()
	path, hang = filepath.Join(dir, "topology.sh"), filepath.Join(dir, "hang")
	src := fmt.Sprintf("#!/bin/sh\nif [ -e '%s' ]; then exec sleep 3600; fi\nfor h in \"$@\"; do echo \"/region/rack-$h\"; done\n", hang)
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, hang
}

// waitFor waits until cond holds, or fails the test at ctx's end.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond): // poll interval, not a synchronisation
		}
	}
}

// A hanging topology script does not stall membership: a bookie that
// joins is writable for placement at once, while the script runs in the
// background; Close ends that run (goleak checks the goroutine is gone).
func TestHangingTopologyScriptDoesNotStallMembership(t *testing.T) {
	ctx := internalCtx(t)
	m := newMembershipStore(t, ctx)
	m.register(t, ctx, false, "10.0.0.1:3181", "10.0.0.2:3181")
	script, hang := writeScript(t)
	c, err := New(ctx, Config{MetadataServiceURI: m.uri, NetworkTopologyScript: script, NetworkTopologyScriptTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m.register(t, ctx, false, "10.0.0.3:3181")
	waitFor(t, ctx, "the new bookie never became writable", func() bool { return slices.Contains(c.writable(), "10.0.0.3:3181") })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Policies see every location the script resolved, not only the writable
// bookies': a read-only ensemble member keeps its rack (it used to fall in
// the default rack, misplacing its replacement).
func TestPolicySeesReadOnlyBookieRacks(t *testing.T) {
	ctx := internalCtx(t)
	m := newMembershipStore(t, ctx)
	m.register(t, ctx, false, "10.0.0.1:3181", "10.0.0.2:3181")
	m.register(t, ctx, true, "10.0.0.9:3181")
	script, _ := writeScript(t)
	c, err := New(ctx, Config{MetadataServiceURI: m.uri, NetworkTopologyScript: script, PlacementPolicy: "rackaware"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.newPolicy(2, 2).(*placement.RackAware)
	if got := p.Rack("10.0.0.9:3181"); got != "/region/rack-10.0.0.9" {
		t.Fatalf("read-only bookie's rack %q, want the script's", got)
	}
	// A bookie that joins is resolved in the background.
	m.register(t, ctx, false, "10.0.0.5:3181")
	waitFor(t, ctx, "joining bookie never resolved", func() bool {
		return c.newPolicy(2, 2).(*placement.RackAware).Rack("10.0.0.5:3181") == "/region/rack-10.0.0.5"
	})
	// A recovery resolves the members of the ensembles it may replace,
	// registered or not.
	c.resolveLocations(ctx, ensembleMembers(&metadata.LedgerMetadata{Ensembles: []metadata.Segment{{Ensemble: []metadata.BookieID{"10.0.0.1:3181", "10.0.0.7:3181"}}}}), nil)
	if got := c.newPolicy(2, 2).(*placement.RackAware).Rack("10.0.0.7:3181"); got != "/region/rack-10.0.0.7" {
		t.Fatalf("unregistered ensemble member's rack %q, want the script's", got)
	}
}

// Health state does not outlive the bookies: old error windows go when
// new errors are recorded, quarantines and counts of bookies that left go
// at the next membership change, and the client's own Close does not
// count as a bookie error.
func TestHealthStatePruned(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	h := newBookieHealth(Config{clock: clk, EnableBookieHealthCheck: true, BookieHealthCheckInterval: time.Minute,
		BookieErrorThresholdPerInterval: 2, BookieQuarantineTime: time.Hour})
	for range 2 {
		h.recordError("b1:1")
	}
	clk.Advance(time.Minute)
	h.recordError("b2:1")
	if errs, held, _ := h.size(); errs != 1 || held != 1 {
		t.Fatalf("errs %d held %d: want b2's count only and b1's quarantine", errs, held)
	}
	h.prune([]metadata.BookieID{"b2:1"}, nil)
	if errs, held, _ := h.size(); errs != 1 || held != 0 {
		t.Fatalf("errs %d held %d after b1 left: want b2's count only", errs, held)
	}
	h.prune(nil, nil)
	if errs, held, slow := h.size(); errs+held+slow != 0 {
		t.Fatalf("state of departed bookies kept: errs %d held %d slow %d", errs, held, slow)
	}
	if countsAsError(nil, fmt.Errorf("add: %w", transport.ErrClosed)) {
		t.Fatal("the client's own Close counted as a bookie error")
	}
}
