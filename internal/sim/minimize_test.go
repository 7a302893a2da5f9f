package sim

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateScripts = flag.Bool("sim.update-scripts", false, "TestMinimize writes the scripts it emits to internal/ledger/testdata (then fill them with go test ./internal/ledger -run TestInteraction -rewrite)")

// TestMinimize reduces real violations, found with a protocol fix switched
// off, and replays them in internal/ledger's datadriven driver:
//
//   - the reduced run breaks the same invariant, and replaying its
//     schedule does again;
//   - it has fewer steps;
//   - the same input gives the same reduction;
//   - the script it emits is the one checked in under
//     internal/ledger/testdata, whose expected output (kept by the ledger
//     package's TestInteraction, with the same unsafe knob) shows the
//     violation in the driver's own checks.
func TestMinimize(t *testing.T) {
	cases := []struct {
		name      string
		cfg       Config
		invariant string
		script    string
		// violation is what the driver's checks print in the script.
		violation string
	}{
		{
			name:      "piggyback-recovery-lac",
			cfg:       Config{Seed: 42, Workload: WorkloadRecoveryRace, Faults: allFaults(t), Mutation: MutationPiggybackRecoveryLAC},
			invariant: NoDirtyReads,
			script:    "sim_min_piggyback_recovery_lac.txt",
			violation: "lacs\n----\nviolation: ",
		},
		{
			name:      "no-fence-reads",
			cfg:       Config{Seed: 32, Workload: WorkloadMixed, Faults: allFaults(t), Mutation: MutationNoFenceReads},
			invariant: NoDivergenceBetweenClientAndMetaData,
			script:    "sim_min_no_fence_reads.txt",
			violation: "check\n----\nviolation: w1 acknowledged e0, ledger closed at -1 (truncation)",
		},
		{
			name:      "start-at-lac",
			cfg:       Config{Seed: 134, Workload: WorkloadMixed, Faults: allFaults(t), Mutation: MutationStartAtLAC},
			invariant: NoInvalidFragments,
			script:    "sim_min_start_at_lac.txt",
			violation: "fragments\n----\nviolation: ",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if raceEnabled && tc.cfg.Workload == WorkloadMixed {
				t.Skip("too slow under -race; runs in the normal build")
			}
			orig := Run(tc.cfg)
			if !orig.Failed() || orig.Violations[0].Invariant != tc.invariant {
				t.Fatalf("seed %d no longer breaks %s (the simulator changed?): %s; pick a failing seed and rerun with -sim.update-scripts", tc.cfg.Seed, tc.invariant, orig.Summary())
			}
			start := time.Now()
			m, err := Minimize(tc.cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%sin %v; reduced schedule:\n%s", m.Summary(), time.Since(start), m.Config.Schedule)

			// (a) The same invariant, found again when the schedule replays.
			if v := m.Result.Violations; len(v) == 0 || v[0].Invariant != tc.invariant {
				t.Fatalf("reduced run: %s", m.Result.Summary())
			}
			again := Run(m.Config)
			if again.TraceHash != m.Result.TraceHash {
				t.Fatalf("replaying the reduced schedule gives another run: %s vs %s", again.TraceHash, m.Result.TraceHash)
			}
			// Through its text form too.
			parsed, err := ParseSchedule(m.Config.Schedule.String())
			if err != nil {
				t.Fatal(err)
			}
			c := m.Config
			c.Schedule = parsed
			if r := Run(c); r.TraceHash != m.Result.TraceHash {
				t.Fatalf("the parsed schedule gives another run")
			}
			// (b) Strictly shorter.
			if m.StepsAfter >= m.StepsBefore {
				t.Fatalf("not reduced: %d steps -> %d", m.StepsBefore, m.StepsAfter)
			}
			// (d) Deterministic.
			m2, err := Minimize(tc.cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			if m2.Config.Schedule.String() != m.Config.Schedule.String() || FormatFaults(m2.Config.Faults) != FormatFaults(m.Config.Faults) ||
				m2.Result.TraceHash != m.Result.TraceHash || m2.Runs != m.Runs {
				t.Fatalf("two reductions differ:\n%s%s\nvs\n%s%s", m.Summary(), m.Config.Schedule, m2.Summary(), m2.Config.Schedule)
			}
			// (c) The emitted script is the checked-in one, whose expected
			// output shows the violation.
			script, recorded := Script(m.Config)
			if recorded.TraceHash != m.Result.TraceHash {
				t.Fatalf("recording the script changed the run")
			}
			path := filepath.Join("..", "ledger", "testdata", tc.script)
			if *updateScripts {
				if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s: fill it with go test ./internal/ledger -run TestInteraction -rewrite", path)
				return
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := withoutOutputs(string(golden)); strings.TrimRight(got, "\n") != strings.TrimRight(script, "\n") {
				t.Fatalf("the emitted script differs from %s (regenerate with -sim.update-scripts, then go test ./internal/ledger -run TestInteraction -rewrite):\n%s", path, script)
			}
			if !strings.Contains(string(golden), tc.violation) {
				t.Fatalf("%s does not show %q in the driver's checks", path, tc.violation)
			}
		})
	}
}

// withoutOutputs strips a datadriven file's expected outputs (each from
// its "----" line to the next blank line).
func withoutOutputs(text string) string {
	var b strings.Builder
	skip := false
	for _, line := range strings.SplitAfter(text, "\n") {
		switch {
		case skip && strings.TrimSpace(line) == "":
			skip = false
		case skip:
			continue
		case strings.TrimRight(line, "\n") == "----":
			skip = true
		}
		b.WriteString(line)
	}
	return b.String()
}
