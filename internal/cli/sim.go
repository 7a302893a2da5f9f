package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/sim"
)

// newSimCommand is `folio sim`: it only parses flags and prints; the
// simulator is internal/sim. It uses the standard flag package (cobra's
// parser rejects single-dash long flags), so -seed N, --seed N and
// -seed=N all work.
func newSimCommand(env Env) *cobra.Command {
	return &cobra.Command{
		Use:                "sim [-seed N] [-steps M] [-faults LIST] [-seeds K] [-minimize] [-schedule FILE] [-trace FILE] [-v]",
		Short:              "Run the deterministic simulator (same seed, same run)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSim(cmd, args, env.Stdout)
		},
	}
}

func runSim(cmd *cobra.Command, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("folio sim", flag.ContinueOnError)
	fs.SetOutput(stdout)
	seed := fs.Uint64("seed", 1, "first seed to run")
	seeds := fs.Int("seeds", 1, "number of consecutive seeds to run")
	steps := fs.Int("steps", 0, "workload and fault actions in the safety phase (0: the workload's default, 300 mixed, 40 recovery-race)")
	faults := fs.String("faults", "all", "fault kinds: all, none, or a comma list of "+sim.FormatFaults(sim.AllFaults))
	full := fs.Bool("full-intensity", false, "every fault kind at its highest intensity (no per-seed mix)")
	mutation := fs.String("mutation", "", "switch a protocol fix off to show the simulator finds the defect: "+joinNames(sim.Mutations))
	workload := fs.String("workload", string(sim.WorkloadMixed), "what the clients do: "+joinNames(sim.Workloads))
	tracePath := fs.String("trace", "", "write the trace of a failing seed to this file instead of stdout (with -minimize: the ledger datadriven script)")
	verbose := fs.Bool("v", false, "print the whole trace of every seed")
	minimize := fs.Bool("minimize", false, "reduce a failing seed to a short schedule and print it with its trace and a datadriven script for internal/ledger/testdata")
	maxRuns := fs.Int("max-runs", sim.DefaultMinimizeRuns, "with -minimize: the most simulator runs the reduction may take")
	schedulePath := fs.String("schedule", "", "replay the schedule in this file (as -minimize prints it) instead of the seed's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return Usagef(cmd, "%v", err)
	}
	if fs.NArg() > 0 {
		return Usagef(cmd, "unexpected argument %q", fs.Arg(0))
	}
	fl, err := sim.ParseFaults(*faults)
	if err != nil {
		return Usagef(cmd, "-faults: %v", err)
	}
	m := sim.Mutation(*mutation)
	if m != sim.MutationNone && !slices.Contains(sim.Mutations, m) {
		return Usagef(cmd, "-mutation: unknown %q (%s)", *mutation, joinNames(sim.Mutations))
	}
	wl := sim.Workload(*workload)
	if !slices.Contains(sim.Workloads, wl) {
		return Usagef(cmd, "-workload: unknown %q (%s)", *workload, joinNames(sim.Workloads))
	}
	if *steps == 0 {
		*steps = sim.DefaultSteps(wl)
	}
	if *seeds < 1 || *steps < 1 || *maxRuns < 1 {
		return Usagef(cmd, "-seeds, -steps and -max-runs must be positive")
	}
	var sched *sim.Schedule
	if *schedulePath != "" {
		if *seeds != 1 {
			return Usagef(cmd, "-schedule replays one seed's schedule: -seeds must be 1")
		}
		text, err := os.ReadFile(*schedulePath)
		if err != nil {
			return fmt.Errorf("reading the schedule: %w", err)
		}
		if sched, err = sim.ParseSchedule(string(text)); err != nil {
			return fmt.Errorf("%s: %w", *schedulePath, err)
		}
		if k := sched.Len(); k > 0 && sched.Steps[k-1].N > *steps {
			return Usagef(cmd, "-schedule %s: step %d is past -steps %d", *schedulePath, sched.Steps[k-1].N, *steps)
		}
	}
	start := time.Now() // wall clock: only for the final elapsed line
	failed := 0
	var requests int
	for i := range *seeds {
		cfg := sim.Config{Seed: *seed + uint64(i), Workload: wl, Steps: *steps, Faults: fl, Mutation: m, FullIntensity: *full, Schedule: sched}
		fmt.Fprintf(stdout, "folio sim: seed=%d workload=%s steps=%d faults=%s", cfg.Seed, wl, cfg.Steps, sim.FormatFaults(fl))
		if m != sim.MutationNone {
			fmt.Fprintf(stdout, " mutation=%s", m)
		}
		fmt.Fprintln(stdout)
		r := sim.Run(cfg)
		requests += r.Stats.Requests
		if *verbose {
			io.WriteString(stdout, r.Trace)
		}
		io.WriteString(stdout, r.Summary())
		if !r.Failed() {
			continue
		}
		failed++
		if *minimize {
			if err := printMinimized(stdout, cfg, *maxRuns, *tracePath, *full); err != nil {
				return err
			}
			continue
		}
		switch {
		case *verbose:
		case *tracePath != "":
			if err := os.WriteFile(*tracePath, []byte(r.Trace), 0o644); err != nil {
				return fmt.Errorf("writing the trace: %w", err)
			}
			fmt.Fprintf(stdout, "trace written to %s\n", *tracePath)
		default:
			fmt.Fprintf(stdout, "--- trace of seed %d ---\n%s--- end of trace ---\n", cfg.Seed, r.Trace)
		}
		fmt.Fprintf(stdout, "replay: folio sim -seed %d -workload %s -steps %d -faults %s", cfg.Seed, wl, cfg.Steps, sim.FormatFaults(fl))
		if *full {
			io.WriteString(stdout, " -full-intensity")
		}
		if m != sim.MutationNone {
			fmt.Fprintf(stdout, " -mutation %s", m)
		}
		fmt.Fprintln(stdout)
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "elapsed %s (%.1f seeds/s, %.0f bookie requests/s)\n", el.Round(time.Millisecond), float64(*seeds)/el.Seconds(), float64(requests)/el.Seconds())
	if failed > 0 {
		return fmt.Errorf("simulation: %d of %d seeds broke an invariant", failed, *seeds)
	}
	return nil
}

// printMinimized reduces failing run cfg and prints the reduced schedule,
// its trace and its ledger script (the script to scriptPath if set).
func printMinimized(stdout io.Writer, cfg sim.Config, maxRuns int, scriptPath string, full bool) error {
	m, err := sim.Minimize(cfg, maxRuns)
	if err != nil {
		return err
	}
	script, r := sim.Script(m.Config)
	io.WriteString(stdout, m.Summary())
	fmt.Fprintf(stdout, "--- reduced schedule (save it to replay with -schedule FILE) ---\n%s", m.Config.Schedule)
	fmt.Fprintf(stdout, "--- trace of the reduced run ---\n%s", r.Trace)
	io.WriteString(stdout, r.Summary())
	if scriptPath != "" {
		if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
			return fmt.Errorf("writing the script: %w", err)
		}
		fmt.Fprintf(stdout, "ledger script written to %s (copy it to internal/ledger/testdata and fill it with go test ./internal/ledger -run TestInteraction -rewrite)\n", scriptPath)
	} else {
		fmt.Fprintf(stdout, "--- ledger script (internal/ledger/testdata; fill it with go test ./internal/ledger -run TestInteraction -rewrite) ---\n%s--- end of script ---\n", script)
	}
	fmt.Fprintf(stdout, "replay: folio sim -seed %d -workload %s -steps %d -faults %s", m.Config.Seed, m.Config.Workload, m.Config.Steps, sim.FormatFaults(m.Config.Faults))
	if full {
		io.WriteString(stdout, " -full-intensity")
	}
	if m.Config.Mutation != sim.MutationNone {
		fmt.Fprintf(stdout, " -mutation %s", m.Config.Mutation)
	}
	io.WriteString(stdout, " -schedule FILE (the reduced schedule above)\n")
	return nil
}

// joinNames lists names for flag help and errors.
func joinNames[S ~string](names []S) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = string(n)
	}
	return strings.Join(parts, ", ")
}
