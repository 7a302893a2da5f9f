package sim

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var (
	simSeed   = flag.Uint64("sim.seed", 0, "run only this seed of TestSeeds")
	simSeeds  = flag.Int("sim.seeds", 0, "number of seeds TestSeeds runs (default 200; 20 with -short or -race)")
	raceSeeds = flag.Int("sim.race-seeds", 0, "number of seeds TestRecoveryRace runs (default 5000; 50 with -short or -race)")
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
	logMinimized(t, cfg)
	t.Fatalf("seed %d: %s\n%s\nreplay: go run ./cmd/folio sim -seed %d -workload %s -steps %d -faults %s -v",
		cfg.Seed, r.Summary(), tail, cfg.Seed, cfg.Workload, cfg.Steps, FormatFaults(cfg.Faults))
}

// logMinimized minimizes a failing run and logs the reduced schedule and
// its ledger datadriven script.
func logMinimized(t *testing.T, cfg Config) {
	t.Helper()
	m, err := Minimize(cfg, 0)
	if err != nil {
		t.Logf("minimize: %v", err)
		return
	}
	script, _ := Script(m.Config)
	t.Logf("%sreduced schedule:\n%s\nledger script (internal/ledger/testdata; fill with -rewrite):\n%s", m.Summary(), m.Config.Schedule, script)
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

// TestSeeds runs many seeds of the mixed workload with every fault kind: no
// invariant may break.
func TestSeeds(t *testing.T) {
	runSeeds(t, Config{Workload: WorkloadMixed, Faults: allFaults(t), Steps: 300}, *simSeeds, 200)
}

// TestRecoveryRace is the property test of issue 16: one writer that dies
// with entries on a single bookie, two or three racing recoveries (one
// forced to replace a bookie in memory, some losing their close), message
// loss, bookie crashes, metadata faults and CAS conflicts. Every invariant
// is checked as the run goes (acknowledgements, LACs stored and read,
// closes) and on the final stored metadata: every committed entry and
// every acknowledged one on Qa bookies of its write set, readable.
func TestRecoveryRace(t *testing.T) {
	runSeeds(t, Config{Workload: WorkloadRecoveryRace, Faults: allFaults(t)}, *raceSeeds, 5000)
}

// runSeeds runs n seeds (def when n is 0; 1/100 of it, at least 20, with
// -short or -race) of cfg, or only -sim.seed.
func runSeeds(t *testing.T, cfg Config, n, def int) {
	t.Helper()
	if n == 0 {
		n = def
		if testing.Short() || raceEnabled {
			n = max(def/100, 20)
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
		cfg.Seed = seed
		r := Run(cfg)
		ops += r.Stats.Requests
		if r.Failed() {
			failWith(t, r, cfg)
		}
	}
	el := time.Since(start)
	t.Logf("%s: %d seeds in %v: %.1f seeds/s, %.0f bookie requests/s", cfg.Workload, len(seeds), el, float64(len(seeds))/el.Seconds(), float64(ops)/el.Seconds())
}

// findMutation runs seeds 1..200 of the mixed workload with a fix switched
// off and returns the first failing run. The bound is a number of seeds,
// never a time: a slow machine must not try fewer.
func findMutation(t *testing.T, m Mutation, full bool) (*Result, Config) {
	t.Helper()
	return findMutationIn(t, WorkloadMixed, m, full)
}

// findMutationIn is findMutation for workload wl.
func findMutationIn(t *testing.T, wl Workload, m Mutation, full bool) (*Result, Config) {
	t.Helper()
	start := time.Now()
	for seed := uint64(1); seed <= 200; seed++ {
		cfg := Config{Seed: seed, Workload: wl, Faults: allFaults(t), Mutation: m, FullIntensity: full}
		if r := Run(cfg); r.Failed() {
			t.Logf("mutation %s found with seed %d after %v: %s", m, seed, time.Since(start), r.Violations[0])
			logMinimized(t, cfg)
			return r, cfg
		}
	}
	t.Fatalf("mutation %s: no violation in 200 seeds", m)
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

// TestMutationPiggybackRecoveryLAC: recovery rewrites that piggyback a LAC
// counting a recovery-local replacement's acks (Apache BookKeeper 4.17's
// behaviour; issue 16 item 1) are caught by the recovery-race workload: a
// bookie stores a LAC above what reached Qa bookies of the stored write
// sets (NoDirtyReads), or a tailing reader is handed a LAC the recovery's
// rewrites carried above what the writer acknowledged, before any close
// (LACNeverAhead, which sees the same defect earlier on some seeds).
func TestMutationPiggybackRecoveryLAC(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race; runs in the normal build")
	}
	r, _ := findMutationIn(t, WorkloadRecoveryRace, MutationPiggybackRecoveryLAC, false)
	if v := r.Violations[0]; v.Invariant != NoDirtyReads && v.Invariant != LACNeverAhead {
		t.Fatalf("expected %s or %s, got %s", NoDirtyReads, LACNeverAhead, v)
	}
}
