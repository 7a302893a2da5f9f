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
		Use:                "sim [-seed N] [-steps M] [-faults LIST] [-seeds K] [-trace FILE] [-v]",
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
	tracePath := fs.String("trace", "", "write the trace of a failing seed to this file instead of stdout")
	verbose := fs.Bool("v", false, "print the whole trace of every seed")
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
	if *seeds < 1 || *steps < 1 {
		return Usagef(cmd, "-seeds and -steps must be positive")
	}
	start := time.Now() // wall clock: only for the final elapsed line
	failed := 0
	var requests int
	for i := range *seeds {
		cfg := sim.Config{Seed: *seed + uint64(i), Workload: wl, Steps: *steps, Faults: fl, Mutation: m, FullIntensity: *full}
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

// joinNames lists names for flag help and errors.
func joinNames[S ~string](names []S) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = string(n)
	}
	return strings.Join(parts, ", ")
}
