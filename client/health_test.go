package client

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

func healthClient(t *testing.T, mod func(*Config)) (*Client, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1000, 0))
	cfg := Config{MetadataServiceURI: "etcd://127.0.0.1:1/ledgers", EnableBookieHealthCheck: true, clock: clk, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	c := &Client{cfg: cfg, clock: clk, health: newBookieHealth(cfg)}
	return c, clk
}

func quarantined(c *Client, b metadata.BookieID) bool { return c.health.quarantined(b) }

// Java's defaults: 5 errors within one 60 s interval quarantine a bookie
// for 1800 s, on the client's clock; errors of different intervals do not
// add up.
func TestQuarantineOnClock(t *testing.T) {
	c, clk := healthClient(t, nil)
	const b = metadata.BookieID("10.0.0.1:3181")
	for i := range 4 {
		c.health.recordError(b)
		if quarantined(c, b) {
			t.Fatalf("quarantined after %d errors", i+1)
		}
	}
	clk.Advance(60 * time.Second) // next interval: the count starts again
	for range 4 {
		c.health.recordError(b)
	}
	if quarantined(c, b) {
		t.Fatal("errors of two intervals added up")
	}
	c.health.recordError(b)
	if !quarantined(c, b) {
		t.Fatal("5 errors within an interval: not quarantined")
	}
	clk.Advance(1800*time.Second - time.Nanosecond)
	if !quarantined(c, b) {
		t.Fatal("released before the quarantine time")
	}
	clk.Advance(time.Nanosecond)
	if quarantined(c, b) {
		t.Fatal("still quarantined after the quarantine time")
	}
}

func TestQuarantineDisabled(t *testing.T) {
	c, _ := healthClient(t, func(cfg *Config) { cfg.EnableBookieHealthCheck = false })
	for range 100 {
		c.health.recordError("10.0.0.1:3181")
	}
	if quarantined(c, "10.0.0.1:3181") {
		t.Fatal("quarantined with the health check off")
	}
}

// Placement leaves quarantined bookies out of new ensembles and
// replacements while others fit, for every policy, and takes them when
// nothing else fits.
func TestPlacementAvoidsQuarantined(t *testing.T) {
	for _, policy := range []string{"", "random", "rackaware", "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy", "regionaware"} {
		t.Run(policy, func(t *testing.T) {
			c, _ := healthClient(t, func(cfg *Config) {
				cfg.PlacementPolicy, cfg.BookieErrorThresholdPerInterval, cfg.MinNumZonesPerWriteQuorum = policy, 1, 1
			})
			var all []metadata.BookieID
			c.racks = map[metadata.BookieID]string{}
			for i := range 5 {
				b := metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", i))
				all = append(all, b)
				c.racks[b] = fmt.Sprintf("/z%d/u0", i)
			}
			if policy == "" || policy == "random" {
				c.racks = nil
			}
			bad := all[:2]
			p := c.newPolicy(3, 2) // made before the quarantine: it sees it all the same
			for _, b := range bad {
				c.health.recordError(b)
			}
			if ens, err := p.NewEnsemble(3, all); err != nil || slices.ContainsFunc(ens, func(b metadata.BookieID) bool { return slices.Contains(bad, b) }) {
				t.Fatalf("policy made before the quarantine: %v, %v", ens, err)
			}
			for range 50 {
				ens, err := c.newPolicy(3, 2).NewEnsemble(3, all)
				if err != nil {
					t.Fatal(err)
				}
				if slices.ContainsFunc(ens, func(b metadata.BookieID) bool { return slices.Contains(bad, b) }) {
					t.Fatalf("ensemble %v holds a quarantined bookie of %v", ens, bad)
				}
				nb, err := c.newPolicy(3, 2).ReplaceBookie(ens, 0, all, []metadata.BookieID{ens[0]})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(bad, nb) {
					// The only healthy bookies are the ensemble's: the
					// replacement must be quarantined.
					t.Fatalf("replacement %s: want one of the quarantined %v", nb, bad)
				}
			}
			ens, err := c.newPolicy(5, 3).NewEnsemble(5, all)
			if err != nil || len(ens) != 5 {
				t.Fatalf("E=5 over 5 bookies, 2 quarantined: %v, %v", ens, err)
			}
		})
	}
}

func TestCountsAsError(t *testing.T) {
	for _, c := range []struct {
		status wire.Status
		err    error
		want   bool
	}{
		{wire.StatusOK, nil, false},
		{wire.StatusNoEntry, nil, false},
		{wire.StatusNoLedger, nil, false},
		{wire.StatusFenced, nil, false},
		{wire.StatusReadOnly, nil, false},
		{wire.StatusIOError, nil, true},
		{wire.StatusTooManyRequests, nil, true},
		{wire.StatusUnauthorized, nil, true},
		{0, fmt.Errorf("x: %w", transport.ErrTimeout), true},
		{0, fmt.Errorf("x: %w", transport.ErrBookieUnavailable), false},
		{0, errors.New("connection reset"), true},
	} {
		var resp *wire.Response
		if c.err == nil {
			resp = &wire.Response{Status: c.status}
		}
		if got := countsAsError(resp, c.err); got != c.want {
			t.Errorf("status %v err %v: %v, want %v", c.status, c.err, got, c.want)
		}
	}
}

func TestPlacementConfigValidate(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.PlacementPolicy = "com.example.Custom" },
		func(c *Config) { c.MinNumZonesPerWriteQuorum, c.DesiredNumZonesPerWriteQuorum = 4, 3 },
		func(c *Config) { c.RegionsToWrite = []string{"r1"} },
		func(c *Config) { c.MinNumRacksPerWriteQuorum = -1 },
		func(c *Config) { c.BookieErrorThresholdPerInterval = -1 },
	} {
		cfg := Config{MetadataServiceURI: "etcd://127.0.0.1:1/ledgers"}
		mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
	cfg := Config{MetadataServiceURI: "etcd://127.0.0.1:1/ledgers", PlacementPolicy: "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy", RegionsToWrite: []string{"r1", "r2"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
