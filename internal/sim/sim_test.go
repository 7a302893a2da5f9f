package sim

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var (
	simSeed  = flag.Uint64("sim.seed", 0, "run only this seed of TestSeeds")
	simSeeds = flag.Int("sim.seeds", 0, "number of seeds TestSeeds runs (default 200; 20 with -short or -race)")
)

func allFaults(t *testing.T) []Fault {
	t.Helper()
	f, err := ParseFaults("all")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// failWith reports a failing run with the end of its trace and the command
// that replays it; the whole trace goes to a file under t.TempDir.
func failWith(t *testing.T, r *Result, cfg Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.txt")
	_ = os.WriteFile(path, []byte(r.Trace), 0o644)
	tail := r.Trace
	if len(tail) > 8000 {
		tail = "…" + tail[len(tail)-8000:]
	}
	t.Fatalf("seed %d: %s\n%s\nreplay: go run ./cmd/folio sim -seed %d -steps %d -faults %s -v",
		cfg.Seed, r.Summary(), tail, cfg.Seed, cfg.Steps, FormatFaults(cfg.Faults))
}

// TestDeterminism: the same seed gives the same trace, byte for byte.
func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		cfg := Config{Seed: seed, Faults: allFaults(t), Steps: 300}
		a, b := Run(cfg), Run(cfg)
		if a.TraceHash != b.TraceHash || a.Summary() != b.Summary() {
			t.Fatalf("seed %d: two runs differ: %s vs %s", seed, a.TraceHash, b.TraceHash)
		}
		if a.Stats.Requests == 0 || a.Stats.Acked == 0 {
			t.Fatalf("seed %d did nothing: %s", seed, a.Summary())
		}
	}
}

// TestSeeds runs many seeds with every fault kind: no invariant may break.
func TestSeeds(t *testing.T) {
	n := *simSeeds
	if n == 0 {
		n = 200
		if testing.Short() || raceEnabled {
			n = 20
		}
	}
	seeds := make([]uint64, 0, n)
	if *simSeed != 0 {
		seeds = append(seeds, *simSeed)
	} else {
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	start := time.Now()
	ops := 0
	for _, seed := range seeds {
		cfg := Config{Seed: seed, Faults: allFaults(t), Steps: 300}
		r := Run(cfg)
		ops += r.Stats.Requests
		if r.Failed() {
			failWith(t, r, cfg)
		}
	}
	el := time.Since(start)
	t.Logf("%d seeds in %v: %.1f seeds/s, %.0f bookie requests/s", len(seeds), el, float64(len(seeds))/el.Seconds(), float64(ops)/el.Seconds())
}

// findMutation runs seeds 1..200 (at most 60 s) with a fix switched off and
// returns the first failing run.
func findMutation(t *testing.T, m Mutation, full bool) (*Result, Config) {
	t.Helper()
	start := time.Now()
	for seed := uint64(1); seed <= 200 && time.Since(start) < 60*time.Second; seed++ {
		cfg := Config{Seed: seed, Faults: allFaults(t), Steps: 300, Mutation: m, FullIntensity: full}
		if r := Run(cfg); r.Failed() {
			t.Logf("mutation %s found with seed %d after %v: %s", m, seed, time.Since(start), r.Violations[0])
			return r, cfg
		}
	}
	t.Fatalf("mutation %s: no violation in 200 seeds / 60 s", m)
	return nil, Config{}
}

// TestMutationStartAtLAC: recovery starting at the LAC below the last
// fragment (issue #2615) is caught.
func TestMutationStartAtLAC(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race; runs in the normal build")
	}
	r, _ := findMutation(t, MutationStartAtLAC, false)
	if v := r.Violations[0]; v.Invariant != NoInvalidFragments {
		t.Fatalf("expected %s, got %s", NoInvalidFragments, v)
	}
}

// TestMutationNoFenceReads: recovery reads without the fence flag (issue
// #2614) let the old writer acknowledge an entry above the recovered end.
func TestMutationNoFenceReads(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race; runs in the normal build")
	}
	r, _ := findMutation(t, MutationNoFenceReads, false)
	if v := r.Violations[0]; v.Invariant != NoDivergenceBetweenClientAndMetaData {
		t.Fatalf("expected %s, got %s", NoDivergenceBetweenClientAndMetaData, v)
	}
}
