package cli_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// AutoRecovery inside bookies configured zone-aware in bk_server.conf
// (ensemblePlacementPolicy=ZoneawareEnsemblePlacementPolicy, locations from
// networkTopologyScriptFileName) re-replicates a lost bookie's ledgers
// onto the bookie that keeps every write set on three zones. Zones z1 and
// z2 have two bookies each, z3 one (C1), so every ledger's ensemble
// (E=Qw=3) holds C1; then C2 joins z3 and C1 dies. Of the writable
// bookies outside each ensemble only C2 keeps three zones: a random
// choice would take one of z1's or z2's spares for some ledger.
func TestAutoRecoveryZoneAwareFromBookieConf(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "locations")
	if err := os.WriteFile(mapFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "topology.sh")
	body := "#!/bin/sh\nfor h in \"$@\"; do\n  l=$(awk -v h=\"$h\" '$1 == h { print $2 }' " + mapFile + ")\n" +
		"  [ -n \"$l\" ] || l=/default-zone/default-upgradedomain\n  echo \"$l\"\ndone\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := append(slices.Clone(autoRecoveryBookieSettings), "autoRecoveryDaemonEnabled=true",
		"ensemblePlacementPolicy=org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy",
		"reppDnsResolverClass=org.apache.bookkeeper.net.ScriptBasedMapping",
		"networkTopologyScriptFileName="+script)
	cl := testcluster.Start(t, 0, testcluster.WithCustomBookieIDs(), testcluster.WithSettings(settings...))
	zones := []string{"/z1/u1", "/z1/u2", "/z2/u1", "/z2/u2", "/z3/u1", "/z3/u2"}
	var bookies []*testcluster.Bookie
	locs := map[metadata.BookieID]string{}
	var lines strings.Builder
	for _, z := range zones {
		b := cl.NewBookie()
		bookies = append(bookies, b)
		locs[b.ID] = z
		fmt.Fprintf(&lines, "%s %s\n", b.ID, z)
	}
	if err := os.WriteFile(mapFile, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c1, c2 := bookies[4], bookies[5]
	for _, b := range bookies[:5] {
		b.Start()
		b.WaitRegistered(false)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends := writeZoneLedgers(ctx, t, cl, locs, c1)

	c2.Start()
	c2.WaitRegistered(false)
	c1.Kill()
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	waitUntil(ctx, t, "re-replication off "+string(c1.ID), func() bool {
		on, err := admin.LedgersOnBookie(ctx, cl.MD, c1.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(on) == 0 && len(ur) == 0
	})
	checkZoneReplaced(ctx, t, cl, ends, locs, c1, c2)
}

// writeZoneLedgers writes four closed ledgers (E=Qw=3, Qa=2, ten entries)
// with a zone-aware client over locs; each ensemble holds c1, z3's only
// bookie.
func writeZoneLedgers(ctx context.Context, t *testing.T, cl *testcluster.Cluster, locs map[metadata.BookieID]string, c1 *testcluster.Bookie) map[int64]int64 {
	t.Helper()
	racks := map[string]string{}
	for b, z := range locs {
		racks[string(b)] = z
	}
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, BookieRacks: racks,
		PlacementPolicy: "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := map[int64]int64{}
	for range 4 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		if ens := w.Metadata().Ensembles()[0].Bookies; !slices.Contains(ens, string(c1.ID)) {
			t.Fatalf("ensemble %v without z3's only bookie %s", ens, c1.ID)
		}
		for e := range int64(10) {
			if _, err := w.Append(ctx, entryPayload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ends[w.ID()] = 9
	}
	return ends
}

// checkZoneReplaced checks that the ledgers are re-replicated off c1,
// with c2 in its place in every fragment, each on three zones.
func checkZoneReplaced(ctx context.Context, t *testing.T, cl *testcluster.Cluster, ends map[int64]int64, locs map[metadata.BookieID]string, c1, c2 *testcluster.Bookie) {
	t.Helper()
	checkReplicated(ctx, t, cl.MD, ends, c1.ID)
	judge := placement.NewZoneAware(rand.NewPCG(1, 1), locs, 3, 2, 0, 0, true)
	for id := range ends {
		m, _, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Ensembles {
			if !slices.Contains(s.Ensemble, c2.ID) || judge.Adheres(s.Ensemble, 3, 2) != placement.MeetsStrict {
				t.Errorf("ledger %d: fragment %v after re-replication: want %s (z3) in place of %s, on three zones", id, s.Ensemble, c2.ID, c1.ID)
			}
		}
	}
}

// The shell's recover chooses replacements with the placement flags: with
// --placement-policy zoneaware and a location file, the lost z3 bookie's
// fragments go to the other z3 bookie (as TestAutoRecoveryZoneAwareFromBookieConf).
func TestShellRecoverZoneAware(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 0)
	zones := []string{"/z1/u1", "/z1/u2", "/z2/u1", "/z2/u2", "/z3/u1", "/z3/u2"}
	var bookies []*testcluster.Bookie
	locs := map[metadata.BookieID]string{}
	var lines strings.Builder
	for _, z := range zones {
		b := cl.NewBookie()
		bookies = append(bookies, b)
		locs[b.ID] = z
		fmt.Fprintf(&lines, "%s %s\n", b.ID, z)
	}
	locFile := filepath.Join(t.TempDir(), "locations")
	if err := os.WriteFile(locFile, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c1, c2 := bookies[4], bookies[5]
	for _, b := range bookies[:5] {
		b.Start()
		b.WaitRegistered(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends := writeZoneLedgers(ctx, t, cl, locs, c1)
	c2.Start()
	c2.WaitRegistered(false)
	c1.Kill()
	mustShell(t, cl.URI, "recover", string(c1.ID), "--placement-policy", "zoneaware", "--rack-locations", locFile, "-o", "json")
	checkZoneReplaced(ctx, t, cl, ends, locs, c1, c2)
}
