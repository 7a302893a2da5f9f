package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// Minimized is a failing run reduced by Minimize.
type Minimized struct {
	// Config replays the reduced run: the original configuration with the
	// fault kinds that were not needed removed and Schedule set.
	Config Config
	// Result is the reduced run's outcome: the same invariant broken.
	Result *Result
	// Invariant is the invariant the original run broke.
	Invariant string
	// StepsBefore is the original schedule's length (its steps that do
	// something), StepsAfter the reduced one's.
	StepsBefore, StepsAfter int
	// FaultsBefore and FaultsAfter are the fault kinds injected.
	FaultsBefore, FaultsAfter []Fault
	// Runs counts the simulator runs the reduction took.
	Runs int
}

// DefaultMinimizeRuns bounds Minimize's simulator runs when maxRuns is 0.
const DefaultMinimizeRuns = 400

// Minimize reduces a failing run, as pebble's metamorphic test reducer
// does: it keeps removing parts of the run while the first violation
// stays one of the same invariant, and returns the smallest run found.
// In order:
//
//  1. the steps after the violation are cut and the safety phase ends at
//     the violation's time (after every reduction that keeps it: what
//     follows the violation never runs, so this changes nothing before it);
//  2. each injected fault kind is removed (with its fault steps and its
//     random faults: lost, slow messages, metadata errors) if the violation
//     persists without it;
//  3. steps are removed in chunks, halving the chunk size down to single
//     steps (delta debugging). Fewer writer, reader, recovery and append
//     steps are fewer writers, readers, recoveries and entries;
//  4. 2 and 3 repeat until neither removes anything.
//
// Every run is a pure function of its Config, so Minimize is too: the same
// failing Config gives the same reduced run. maxRuns bounds the number of
// simulator runs (0: DefaultMinimizeRuns); the reduction stops early, with
// what it has, when they are used up.
func Minimize(cfg Config, maxRuns int) (*Minimized, error) {
	cfg = cfg.withDefaults()
	if maxRuns <= 0 {
		maxRuns = DefaultMinimizeRuns
	}
	if cfg.Schedule == nil {
		cfg.Schedule = Generate(cfg)
	}
	first := Run(cfg)
	if !first.Failed() {
		return nil, fmt.Errorf("sim: seed %d does not fail: nothing to minimize", cfg.Seed)
	}
	m := &Minimized{
		Config: cfg, Result: first, Invariant: first.Violations[0].Invariant,
		StepsBefore: cfg.Schedule.Len(), FaultsBefore: slices.Clone(cfg.Faults), Runs: 1,
	}
	// try runs c and keeps it if it breaks the same invariant.
	try := func(c Config) bool {
		if m.Runs >= maxRuns {
			return false
		}
		m.Runs++
		r := Run(c)
		if !r.Failed() || r.Violations[0].Invariant != m.Invariant {
			return false
		}
		m.Config, m.Result = c, r
		m.Config.Schedule = shortenEnd(c.Schedule, r)
		return true
	}

	m.Config.Schedule = shortenEnd(cfg.Schedule, first)
	// dropFaults removes the fault kinds the violation does not need.
	dropFaults := func() (changed bool) {
		for _, f := range slices.Clone(m.Config.Faults) {
			c := m.Config
			c.Faults = slices.DeleteFunc(slices.Clone(c.Faults), func(g Fault) bool { return g == f })
			c.Schedule = &Schedule{End: c.Schedule.End, Steps: slices.DeleteFunc(slices.Clone(c.Schedule.Steps), func(s Step) bool { return faultOf(s.Action) == f })}
			changed = try(c) || changed
		}
		return changed
	}
	// dropSteps removes chunks of steps, halving the chunk size.
	dropSteps := func() (changed bool) {
		for k := max(m.Config.Schedule.Len()/2, 1); k >= 1 && m.Runs < maxRuns; k /= 2 {
			for i := 0; i < m.Config.Schedule.Len() && m.Runs < maxRuns; {
				s := m.Config.Schedule
				cand := &Schedule{End: s.End, Steps: slices.Delete(slices.Clone(s.Steps), i, min(i+k, len(s.Steps)))}
				if try(withSchedule(m.Config, cand)) {
					changed = true
					continue // the next chunk moved to i
				}
				i += k
			}
		}
		return changed
	}
	for dropFaults() || dropSteps() {
		// Once nothing more can go: neither pass changed anything (or the
		// runs are used up, and try refuses everything).
	}
	// The reduced run, once more: the cut after the violation is checked.
	m.Result = Run(m.Config)
	m.Runs++
	if !m.Result.Failed() || m.Result.Violations[0].Invariant != m.Invariant {
		return nil, fmt.Errorf("sim: seed %d: the reduced schedule does not reproduce %s:\n%s", cfg.Seed, m.Invariant, m.Config.Schedule)
	}
	m.StepsAfter = m.Config.Schedule.Len()
	m.FaultsAfter = slices.Clone(m.Config.Faults)
	return m, nil
}

func withSchedule(cfg Config, s *Schedule) Config {
	cfg.Schedule = s
	return cfg
}

// cutAfter keeps the steps up to step n and ends the safety phase at at.
func cutAfter(s *Schedule, n int, at time.Duration) *Schedule {
	out := &Schedule{End: at}
	for _, st := range s.Steps {
		if st.N <= n {
			out.Steps = append(out.Steps, st)
		}
	}
	return out
}

// shortenEnd cuts the steps of s after a violation that came in the
// safety phase of r, and ends the phase at its time: what follows it never
// ran, so the run is the same.
func shortenEnd(s *Schedule, r *Result) *Schedule {
	if v := r.Violations[0]; v.Step <= r.steps && v.At <= s.End {
		return cutAfter(s, v.Step, v.At)
	}
	return s
}

// Summary describes the reduction in a few lines.
func (m *Minimized) Summary() string {
	return fmt.Sprintf("minimized %s in %d runs: %d steps -> %d, faults %s -> %s\n",
		m.Invariant, m.Runs, m.StepsBefore, m.StepsAfter, FormatFaults(m.FaultsBefore), FormatFaults(m.FaultsAfter))
}

// Script runs cfg recording what the protocol machines did, and renders
// the ledger the first violation is about as a datadriven script for
// internal/ledger's interaction driver (see recorder). The second result
// is the run.
func Script(cfg Config) (string, *Result) {
	cfg = cfg.withDefaults()
	rec := newRecorder()
	cfg.record = rec
	r := Run(cfg)
	var bookies []metadata.BookieID
	for i := range r.bookies {
		bookies = append(bookies, metadata.BookieID(fmt.Sprintf("b%d", i+1)))
	}
	header := []string{
		fmt.Sprintf("Generated by folio sim -seed %d -workload %s -faults %s%s -minimize.", cfg.Seed, cfg.Workload, FormatFaults(cfg.Faults), mutationFlag(cfg.Mutation)),
	}
	if r.Failed() {
		v := r.Violations[0]
		header = append(header, "The simulator found: "+v.String())
		if note := driverCheck[v.Invariant]; note != "" {
			header = append(header, note)
		}
	}
	header = append(header,
		"Bookies act when the simulator's did (deliver … hold) and answers reach the",
		"machines when the simulator's did (reply …); metadata operations likewise",
		"(meta … hold, meta-reply). Fill the expected output with",
		"go test ./internal/ledger -run TestInteraction -rewrite.")
	l := rec.lastLedger
	if r.Failed() && r.Violations[0].Ledger >= 0 {
		l = r.Violations[0].Ledger
	}
	return rec.script(header, bookies, l), r
}

// driverCheck says how the ledger driver shows each invariant.
var driverCheck = map[string]string{
	NoDirtyReads: "Driver: lacs shows a LAC a bookie stores past ack quorum; a LAC only a reader was " +
		"handed has no equivalent (the script leaves readers out).",
	NoDivergenceBetweenClientAndMetaData: "Driver: check shows an acknowledged entry past the closed end; " +
		"an entry handed to a reader has no equivalent (the script leaves readers out).",
	AllCommittedEntriesReachAckQuorum: "Driver: a VIOLATION at the acknowledgement, or check on the closed ledger.",
	FencedMeansFenced: "Driver: no equivalent: the driver's bookies refuse every normal add once fenced " +
		"(the simulator runs the real bookie and store).",
	NoInvalidFragments:       "Driver: fragments shows a rewrite below the stored last fragment.",
	MetadataOnlyMovesForward: "Driver: no check for it; the metadata writes are in the script (store prints them).",
	NoOutOfOrderEntries:      "Driver: a VIOLATION at an out-of-order acknowledgement; reads have no equivalent.",
	LedgerIsClosed:           "Driver: check reports the ledger not closed, once the script's events ran.",
	AppendsComplete:          "Driver: the script's last events leave the adds pending (no add complete line for them before the close).",
	AllAckedEntriesAreReadable: "Driver: no equivalent: the driver's bookies lose nothing in a crash " +
		"(storage defects belong in a storage test).",
	LACNeverAhead: "Driver: no equivalent for the reader's LAC (the script leaves readers out); lacs shows " +
		"the LACs the bookies store.",
	ExplicitIDsRefuseOnlyDuplicates: "Driver: the write-at command prints each WriteAt's outcome and the effects it queued.",
}

func mutationFlag(m Mutation) string {
	if m == MutationNone {
		return ""
	}
	return " -mutation " + string(m)
}
