package scenario_test

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/foliodb/folio/internal/testcluster"
)

func runtimeYield() { runtime.Gosched() }

// TestRandomizedRace repeats the writer-vs-recoverer race (spec §8.2 #5)
// with random timing, quorums and numbers of recoverers, checking U1–U4
// and the writer's log each time. FOLIO_SCENARIO_RACE_RUNS sets the number
// of runs (default 10, for CI); FOLIO_SCENARIO_SEED replays one run.
func TestRandomizedRace(t *testing.T) {
	runs := 10
	if v := os.Getenv("FOLIO_SCENARIO_RACE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("FOLIO_SCENARIO_RACE_RUNS=%q", v)
		}
		runs = n
	}
	var seeds []uint64
	if v := os.Getenv("FOLIO_SCENARIO_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FOLIO_SCENARIO_SEED=%q", v)
		}
		seeds = []uint64{s}
	} else {
		for range runs {
			seeds = append(seeds, rand.Uint64())
		}
	}
	cl := testcluster.Start(t, 3)
	checker := newClient(t, cl, nil)
	for _, seed := range seeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			raceOnce(t, cl, checker, seed, -1)
		})
	}
}
