package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// Zone-aware placement through the write path (Java's class name as the
// policy): ensembles span three zones, quorums Java refuses are
// ErrInvalidConfig, and the ensemble change after a bookie dies takes the
// bookie of the same zone that keeps every write quorum on three zones.
func TestZoneAwareWritePath(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 6)
	ctx := testCtx(t)
	racks := map[string]string{}
	locs := map[metadata.BookieID]string{}
	for i, b := range cl.Bookies {
		loc := fmt.Sprintf("/zone%d/ud%d", i%3, i/3)
		racks[string(b.ID)] = loc
		locs[b.ID] = loc
	}
	c := newClient(t, cl, func(cfg *client.Config) {
		cfg.PlacementPolicy = "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy"
		cfg.BookieRacks = racks
	})
	judge := placement.NewZoneAware(rand.NewPCG(1, 1), locs, 3, 2, 0, 0, true)

	if _, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 4, WriteQuorumSize: 2, AckQuorumSize: 2}); !errors.Is(err, client.ErrInvalidConfig) {
		t.Fatalf("E/Qw 4/2 (Qw ≤ minNumZonesPerWriteQuorum): %v, want ErrInvalidConfig", err)
	}
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	ens := w.Metadata().Ensembles()[0].Bookies
	if got := judge.Adheres(toIDs(ens), 3, 2); got != placement.MeetsStrict {
		t.Fatalf("ensemble %v: %v", ens, got)
	}
	appendAll(t, ctx, w, 0, 100)
	victim := metadata.BookieID(ens[1])
	for _, b := range cl.Bookies {
		if b.ID == victim {
			b.Kill()
		}
	}
	// With Qa 2 of Qw 3 the two live bookies may acknowledge every
	// append before the victim's failure reaches the handle, which
	// replaces a bookie only once it knows of the failure (then, or at
	// the next append). Append until the change is in the metadata, then
	// a hundred more on the new ensemble: every append goes to the victim
	// (E = Qw), so its failure is seen and the loop ends.
	next := int64(100)
	for len(w.Metadata().Ensembles()) < 2 {
		appendAll(t, ctx, w, next, 1)
		next++
	}
	appendAll(t, ctx, w, next, 100)
	lastEntry := next + 99
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md, _, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	last := md.LastEnsemble().Ensemble
	if len(md.Ensembles) < 2 || slices.Contains(last, victim) {
		t.Fatalf("want a new fragment without %s: %s", victim, ledgerState(md))
	}
	if got := judge.Adheres(last, 3, 2); got != placement.MeetsStrict {
		t.Fatalf("ensemble after the change %v: %v", last, got)
	}
	readBack(t, ctx, newClient(t, cl, nil), w.ID(), lastEntry)
}

func toIDs(ss []string) []metadata.BookieID {
	out := make([]metadata.BookieID, len(ss))
	for i, s := range ss {
		out[i] = metadata.BookieID(s)
	}
	return out
}

// A topology script gives the locations (here one rack per argument, by
// position); enforced rack-aware placement uses them. A failing script
// puts every bookie in the default rack, which enforcement never uses:
// ErrNotEnoughBookies.
func TestTopologyScript(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sh")
	bad := filepath.Join(dir, "bad.sh")
	if err := os.WriteFile(good, []byte("#!/bin/sh\ni=0\nfor h in \"$@\"; do i=$((i+1)); echo \"/region/rack$i\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho not-a-location\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2}
	for _, c := range []struct {
		script string
		ok     bool
	}{{good, true}, {bad, false}} {
		cli := newClient(t, cl, func(cfg *client.Config) {
			cfg.PlacementPolicy = "rackaware"
			cfg.MinNumRacksPerWriteQuorum = 3
			cfg.EnforceMinNumRacksPerWriteQuorum = true
			cfg.NetworkTopologyScript = c.script
		})
		w, err := cli.CreateLedger(ctx, opts)
		if c.ok {
			if err != nil {
				t.Fatalf("%s: %v", c.script, err)
			}
			appendAll(t, ctx, w, 0, 10)
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(err, client.ErrNotEnoughBookies) {
			t.Fatalf("%s: %v, want ErrNotEnoughBookies", c.script, err)
		}
	}
}

// Bookie health check through the write path: a paused bookie's adds time
// out, which quarantines it (threshold 1); new ledgers leave it out while
// the other bookies suffice.
func TestQuarantineWritePath(t *testing.T) {
	t.Parallel()
	cl := testcluster.Start(t, 4)
	ctx := testCtx(t)
	quarantined := make(chan string, 16)
	c := newClient(t, cl, func(cfg *client.Config) {
		cfg.Logger = slog.New(&msgHandler{Handler: slog.Default().Handler(), msgs: quarantined})
		cfg.EnableBookieHealthCheck = true
		cfg.BookieErrorThresholdPerInterval = 1
		cfg.AddEntryTimeout = time.Second
	})
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	victimID := metadata.BookieID(w.Metadata().Ensembles()[0].Bookies[0])
	var victim *testcluster.Bookie
	for _, b := range cl.Bookies {
		if b.ID == victimID {
			victim = b
		}
	}
	victim.Pause()
	defer victim.Resume()
	appendAll(t, ctx, w, 0, 20)
	// The victim's adds time out: an error the health check counts.
	select {
	case <-quarantined:
	case <-ctx.Done():
		t.Fatal("no bookie quarantined")
	}
	for range 20 {
		l, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if ens := l.Metadata().Ensembles()[0].Bookies; slices.Contains(ens, string(victimID)) {
			t.Fatalf("new ensemble %v holds the quarantined %s", ens, victimID)
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// msgHandler passes the messages of quarantines to msgs (never blocking).
type msgHandler struct {
	slog.Handler
	msgs chan string
}

func (h *msgHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "bookie quarantined") {
		select {
		case h.msgs <- r.Message:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *msgHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &msgHandler{Handler: h.Handler.WithAttrs(as), msgs: h.msgs}
}

func (h *msgHandler) WithGroup(g string) slog.Handler {
	return &msgHandler{Handler: h.Handler.WithGroup(g), msgs: h.msgs}
}
