package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
)

// placementTopologies is how many generated topologies PlacementVerdicts
// gives each of the two policies.
const placementTopologies = 150

// PlacementVerdicts (TestPlacementVerdicts) runs Apache BookKeeper's own
// ZoneawareEnsemblePlacementPolicy and RackawareEnsemblePlacementPolicy
// (java/.../PlacementCheck.java, one JVM for all) on generated topologies
// next to Folio's ZoneAware and RackAware with the same settings, and
// checks that they agree:
//   - on random ensembles, isEnsembleAdheringToPlacementPolicy and Folio's
//     Adheres give the same verdict (FAIL, MEETS_SOFT, MEETS_STRICT);
//   - Java refuses quorums as illegal exactly when Folio gives
//     ErrInvalidQuorum;
//   - when Java's (greedy) newEnsemble finds an ensemble, so does Folio's,
//     under enforcement; Folio's ensembles are never FAIL for Java.
func PlacementVerdicts(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	r := rand.New(rand.NewPCG(2117, 21))
	var in strings.Builder
	// expect maps a command id to the check of Java's answer (the words
	// after the id).
	expect := map[string]func(ans []string) error{}
	var order []string
	add := func(id, cmd string, check func(ans []string) error) {
		in.WriteString(cmd + "\n")
		expect[id] = check
		order = append(order, id)
	}
	verdict := map[string]placement.Adherence{"FAIL": placement.NotAdhering, "MEETS_SOFT": placement.MeetsSoft, "MEETS_STRICT": placement.MeetsStrict}
	for n := range 2 * placementTopologies {
		zone := n%2 == 0
		// Rack-aware topologies have no unresolved bookie: Java's
		// RackawareEnsemblePlacementPolicy puts one in /default-rack, one
		// level above "/region/rack", which its NetworkTopologyImpl refuses
		// (InvalidTopologyException): the bookie, or every bookie added
		// after it, is then unknown to the policy. Folio places it in
		// /default-region/default-rack instead.
		bookies, locs := placementTopology(r, zone)
		in.WriteString("reset\n")
		var judge placement.AdherenceChecker
		var newFolio func(e, wq, aq int) ([]metadata.BookieID, error)
		enforced := false
		desc := ""
		if zone {
			minZ := 1 + r.IntN(2)
			desZ := minZ + r.IntN(3-minZ+1)
			in.WriteString("policy zoneaware\n")
			fmt.Fprintf(&in, "set minNumZonesPerWriteQuorum %d\nset desiredNumZonesPerWriteQuorum %d\n", minZ, desZ)
			judge = placement.NewZoneAware(rand.NewPCG(uint64(n), 1), locs, 0, 0, minZ, desZ, true)
			newFolio = func(e, wq, aq int) ([]metadata.BookieID, error) {
				return placement.NewZoneAware(rand.NewPCG(uint64(n), 2), locs, wq, aq, minZ, desZ, true).NewEnsemble(e, bookies)
			}
			enforced = true
			desc = fmt.Sprintf("zoneaware min %d desired %d", minZ, desZ)
		} else {
			minR := 1 + r.IntN(3)
			enforced = r.IntN(2) == 0
			in.WriteString("policy rackaware\n")
			fmt.Fprintf(&in, "set minNumRacksPerWriteQuorum %d\nset enforceMinNumRacksPerWriteQuorum %v\n", minR, enforced)
			rp := placement.NewRackAware(rand.NewPCG(uint64(n), 1), locs, enforced)
			rp.MinRacksPerWriteQuorum = minR
			judge = rp
			newFolio = func(e, wq, aq int) ([]metadata.BookieID, error) {
				p := placement.NewRackAware(rand.NewPCG(uint64(n), 2), locs, enforced)
				p.MinRacksPerWriteQuorum, p.WriteQuorum = minR, wq
				return p.NewEnsemble(e, bookies)
			}
			desc = fmt.Sprintf("rackaware min racks %d enforce %v", minR, enforced)
		}
		for _, b := range bookies {
			loc, ok := locs[b]
			if !ok {
				loc = "-"
			}
			fmt.Fprintf(&in, "bookie %s %s\n", b, loc)
		}
		in.WriteString("init\n")
		where := fmt.Sprintf("topology %d (%s, %v)", n, desc, locs)
		for k := range 12 {
			e, wq, aq := placementQuorums(r)
			if e > len(bookies) {
				continue
			}
			ens := slices.Clone(bookies)
			r.Shuffle(len(ens), func(i, j int) { ens[i], ens[j] = ens[j], ens[i] })
			ens = ens[:e]
			want := judge.Adheres(ens, wq, aq)
			id := fmt.Sprintf("c%d.%d", n, k)
			add(id, fmt.Sprintf("check %s %d %d %d %s", id, e, wq, aq, joinIDs(ens)), func(ans []string) error {
				if got, ok := verdict[ans[0]]; !ok || got != want {
					return fmt.Errorf("%s: ensemble %v (Qw %d Qa %d): Java %s, Folio %v", where, ens, wq, aq, ans[0], want)
				}
				return nil
			})
		}
		for k := range 4 {
			e, wq, aq := placementQuorums(r)
			mine, err := newFolio(e, wq, aq)
			id := fmt.Sprintf("n%d.%d", n, k)
			add(id, fmt.Sprintf("new %s %d %d %d", id, e, wq, aq), func(ans []string) error {
				switch {
				case ans[0] == "illegal" != errors.Is(err, placement.ErrInvalidQuorum):
					return fmt.Errorf("%s: E/Qw/Qa %d/%d/%d: Java %s, Folio %v", where, e, wq, aq, ans[0], err)
				case ans[0] == "ok" && enforced && err != nil:
					return fmt.Errorf("%s: E/Qw/Qa %d/%d/%d: Java placed %v, Folio refused: %v", where, e, wq, aq, ans[1:], err)
				case ans[0] == "ok" && enforced:
					javaEns := make([]metadata.BookieID, len(ans)-1)
					for i, a := range ans[1:] {
						javaEns[i] = metadata.BookieID(a)
					}
					if v := judge.Adheres(javaEns, wq, aq); v == placement.NotAdhering {
						return fmt.Errorf("%s: Java's ensemble %v (Qw %d Qa %d) is %v for Folio", where, javaEns, wq, aq, v)
					}
				}
				return nil
			})
			if err == nil && enforced {
				cid := id + "f"
				add(cid, fmt.Sprintf("check %s %d %d %d %s", cid, e, wq, aq, joinIDs(mine)), func(ans []string) error {
					if ans[0] == "FAIL" {
						return fmt.Errorf("%s: Folio's ensemble %v (Qw %d Qa %d) is FAIL for Java", where, mine, wq, aq)
					}
					return nil
				})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), javaCmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", javaArgs("-cp", classpath, "org.foliodb.compat.PlacementCheck")...)
	cmd.Stdin = strings.NewReader(in.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("compat: java PlacementCheck: %v\n--- stderr (tail) ---\n%s", err, tail(stderr.String(), 30))
	}
	answers := map[string][]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[0] == "check" || f[0] == "new") {
			answers[f[1]] = f[2:]
		}
	}
	counts := map[string]int{}
	for _, id := range order {
		ans, ok := answers[id]
		if !ok {
			t.Fatalf("compat: PlacementCheck gave no answer to %s\n--- stderr (tail) ---\n%s", id, tail(stderr.String(), 30))
		}
		if err := expect[id](ans); err != nil {
			t.Error(err)
		}
		counts[id[:1]+" "+ans[0]]++
	}
	t.Logf("answers compared: %v", counts)
}

// placementTopology draws up to 4 zones (or regions) of up to 2 upgrade
// domains (or racks) of 0..2 bookies each, and, if unresolved, sometimes
// one bookie without a location; hosts are distinct (Java's resolver maps
// hosts).
func placementTopology(r *rand.Rand, unresolved bool) ([]metadata.BookieID, map[metadata.BookieID]string) {
	var bookies []metadata.BookieID
	locs := map[metadata.BookieID]string{}
	n := 1
	for z := range 1 + r.IntN(4) {
		for u := range 1 + r.IntN(2) {
			for range r.IntN(3) {
				b := metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", n))
				n++
				bookies = append(bookies, b)
				locs[b] = fmt.Sprintf("/z%d/u%d", z, u)
			}
		}
	}
	if unresolved && r.IntN(3) == 0 {
		bookies = append(bookies, metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", n)))
	}
	return bookies, locs
}

// placementQuorums draws E/Qw/Qa with E ≤ 6, half the time a multiple of Qw.
func placementQuorums(r *rand.Rand) (e, wq, aq int) {
	wq = 1 + r.IntN(4)
	e = wq + r.IntN(3)
	if r.IntN(2) == 0 {
		e = wq * (1 + r.IntN(2))
	}
	aq = 1 + r.IntN(wq)
	return e, wq, aq
}

func joinIDs(bs []metadata.BookieID) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = string(b)
	}
	return strings.Join(s, " ")
}
