package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Action is the kind of one safety-phase step: a workload action or a
// fault. Its details (which writer, which bookie, how many entries) are
// drawn at run time from the step's own random stream, against the state
// the run is in then.
type Action string

// The actions. A fault action does nothing when its fault kind is not
// injected in the run (Config.Faults, the seed's intensity).
const (
	ActWriter  Action = "writer"  // create a ledger and its writer
	ActAppend  Action = "append"  // a writer appends up to its window
	ActRace    Action = "race"    // a racing recovery (raceRecovery)
	ActStorm   Action = "storm"   // a recovery storm (recoveryStorm)
	ActDelete  Action = "delete"  // delete a closed ledger
	ActRecover Action = "recover" // one or two recoveries of an open ledger
	ActReader  Action = "reader"  // a tailing reader
	ActClose   Action = "close"   // a writer closes its ledger

	ActCrash       Action = "crash"        // FaultCrash: a bookie crashes
	ActRestart     Action = "restart"      // FaultCrash: a crashed bookie restarts
	ActPause       Action = "pause"        // FaultPause
	ActResume      Action = "resume"       // FaultPause
	ActPartition   Action = "partition"    // FaultPartition: a cut or an isolated bookie
	ActHeal        Action = "heal"         // FaultPartition: every partition heals
	ActReset       Action = "reset"        // FaultReset: a connection reset
	ActConflict    Action = "conflict"     // FaultConflict: a foreign metadata write
	ActCongest     Action = "congest"      // FaultDelay: a congested link
	ActClientCrash Action = "client-crash" // FaultClient: a writer dies
)

// faultOf is the fault kind of a fault action ("" for workload actions).
func faultOf(a Action) Fault {
	switch a {
	case ActCrash, ActRestart:
		return FaultCrash
	case ActPause, ActResume:
		return FaultPause
	case ActPartition, ActHeal:
		return FaultPartition
	case ActReset:
		return FaultReset
	case ActConflict:
		return FaultConflict
	case ActCongest:
		return FaultDelay
	case ActClientCrash:
		return FaultClient
	}
	return ""
}

// faultAction maps a fault draw y in [0, 345) to its action, in the
// proportions the mixed and recovery-race workloads draw them ("" for the
// draws that do nothing).
func faultAction(y int) Action {
	switch {
	case y < 30:
		return ActCrash
	case y < 90:
		return ActRestart
	case y < 115:
		return ActPause
	case y < 160:
		return ActResume
	case y < 185:
		return ActPartition
	case y < 230:
		return ActHeal
	case y < 270:
		return ActReset
	case y < 300:
		return ActConflict
	case y < 330:
		return ActCongest
	case y < 335:
		return ActClientCrash
	}
	return ""
}

// Step is one action of a run's safety phase.
type Step struct {
	// N is the step's number in the run generated from the seed (from 1);
	// a violation names it. Dropping steps keeps the others' numbers.
	N int
	// At is the virtual time at which the action runs.
	At time.Duration
	// Action is what it does.
	Action Action
	// Seed seeds the random stream the action draws its details from.
	Seed uint64
}

func (s Step) String() string {
	return fmt.Sprintf("%d %s %s %#x", s.N, s.At, s.Action, s.Seed)
}

// Schedule is the explicit safety phase of a run: the steps, in time order,
// and when the phase ends. Generate derives it from a Config; Run replays
// Config.Schedule when it is set, so a schedule with steps removed is a
// smaller run of the same world (same bookies, same per-link and
// per-client random streams). Minimize shrinks one.
type Schedule struct {
	Steps []Step
	// End: the safety phase ends once every step ran and no event is due
	// at or before End; the liveness phase starts then.
	End time.Duration
}

// Len is the number of steps.
func (s *Schedule) Len() int { return len(s.Steps) }

// String renders the schedule as ParseSchedule reads it: a line "end T"
// and one line per step "N T action seed".
func (s *Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "end %s\n", s.End)
	for _, st := range s.Steps {
		b.WriteString(st.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseSchedule reads what Schedule.String writes; blank lines and lines
// starting with # are skipped.
func ParseSchedule(text string) (*Schedule, error) {
	s := &Schedule{}
	seenEnd := false
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if f[0] == "end" {
			if len(f) != 2 {
				return nil, fmt.Errorf("schedule line %d: want \"end T\", got %q", i+1, line)
			}
			d, err := parseTime(f[1])
			if err != nil {
				return nil, fmt.Errorf("schedule line %d: %v", i+1, err)
			}
			s.End, seenEnd = d, true
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("schedule line %d: want \"N T action seed\", got %q", i+1, line)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("schedule line %d: step number %q", i+1, f[0])
		}
		at, err := parseTime(f[1])
		if err != nil {
			return nil, fmt.Errorf("schedule line %d: %v", i+1, err)
		}
		a := Action(f[2])
		if !knownAction(a) {
			return nil, fmt.Errorf("schedule line %d: unknown action %q", i+1, f[2])
		}
		seed, err := strconv.ParseUint(f[3], 0, 64)
		if err != nil {
			return nil, fmt.Errorf("schedule line %d: seed %q: %v", i+1, f[3], err)
		}
		if k := len(s.Steps); k > 0 && (s.Steps[k-1].At > at || s.Steps[k-1].N >= n) {
			return nil, fmt.Errorf("schedule line %d: steps out of order", i+1)
		}
		s.Steps = append(s.Steps, Step{N: n, At: at, Action: a, Seed: seed})
	}
	if !seenEnd {
		return nil, fmt.Errorf("schedule: no \"end\" line")
	}
	if k := len(s.Steps); k > 0 && s.Steps[k-1].At > s.End {
		return nil, fmt.Errorf("schedule: a step runs after the end %s", fmtTime(s.End))
	}
	return s, nil
}

func knownAction(a Action) bool {
	switch a {
	case ActWriter, ActAppend, ActRace, ActStorm, ActDelete, ActRecover, ActReader, ActClose:
		return true
	}
	return faultOf(a) != ""
}

// parseTime reads a time as Schedule.String writes it (time.Duration's
// form, exact to the nanosecond).
func parseTime(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("time %q: want a duration such as 12.345678ms", s)
	}
	return d, nil
}

// Generate derives the schedule of cfg's safety phase from its seed: the
// actions, their times and their streams. It draws from its own random
// stream, so the steps do not depend on what happens during the run.
// Draws that do nothing (a fault kind not injected) take a step number and
// time but no step.
func Generate(cfg Config) *Schedule {
	cfg = cfg.withDefaults()
	r := newStream(cfg.Seed, "schedule")
	enabled := map[Fault]bool{}
	for _, f := range cfg.Faults {
		enabled[f] = true
	}
	s := &Schedule{}
	add := func(n int, at time.Duration, a Action, seed uint64) {
		if f := faultOf(a); a == "" || f != "" && !enabled[f] {
			return
		}
		s.Steps = append(s.Steps, Step{N: n, At: at, Action: a, Seed: seed})
	}
	at := time.Duration(0)
	if cfg.Workload == WorkloadRecoveryRace {
		stormAt := 2 + r.IntN(max(cfg.Steps/2, 1))
		readerAt := 1 + r.IntN(cfg.Steps)
		for n := 1; n <= cfg.Steps; n++ {
			if n > 1 {
				at += between(r, 5*time.Millisecond, 50*time.Millisecond)
			}
			seed := r.Uint64()
			switch {
			case n == stormAt:
				add(n, at, ActStorm, seed)
			case n == readerAt:
				add(n, at, ActReader, seed)
			case r.IntN(1000) < 550:
				add(n, at, ActAppend, seed)
			default:
				add(n, at, faultAction(r.IntN(345)), seed)
			}
		}
		s.End = at
		return s
	}
	for n := 1; n <= cfg.Steps; n++ {
		if n > 1 {
			at += between(r, 200*time.Microsecond, 6*time.Millisecond)
		}
		seed := r.Uint64()
		x := r.IntN(1000)
		var a Action
		switch {
		case x < 60:
			a = ActWriter
		case x < 410:
			a = ActAppend
		case x < 435:
			a = ActRace
			if r.IntN(1000) < 250 {
				a = ActStorm
			}
		case x < 450:
			a = ActDelete
		case x < 480:
			a = ActRecover
		case x < 520:
			a = ActReader
		case x < 527:
			a = ActClose
		default:
			a = faultAction(x - 527)
		}
		add(n, at, a, seed)
	}
	s.End = at
	return s
}

// newStream is the random stream of one named part of a run (the
// schedule, a client, a link, a bookie, a step): separate streams keep a
// part's draws the same when steps it does not take part in are removed.
func newStream(seed uint64, name string) *rand.Rand {
	return rand.New(rand.NewPCG(seed, streamID(name)))
}

// streamID is the PCG stream number of a named part.
func streamID(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// between returns a duration drawn uniformly from [lo, hi].
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
