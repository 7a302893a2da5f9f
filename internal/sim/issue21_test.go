package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIssue21Paths: the mixed workload's seeds reach every path issue 21
// added to the machines: explicit ids written out of order and named
// twice (refused), the writer options' failures (AddQuorumTimeout,
// MaxEnsembleChanges) with Ticks stepped, TryReadLastAddConfirmed, batch
// reads answered by the bookies (and the fallback to single reads), sticky
// reads moving on and speculative reads; no invariant breaks on the way.
func TestIssue21Paths(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 30
	}
	var tot Stats
	for seed := uint64(1); seed <= uint64(n); seed++ {
		cfg := Config{Seed: seed, Faults: allFaults(t)}
		r := Run(cfg)
		if r.Failed() {
			failWith(t, r, cfg)
		}
		s := r.Stats
		tot.ExplicitWrites += s.ExplicitWrites
		tot.OutOfOrderWrites += s.OutOfOrderWrites
		tot.DuplicatesRefused += s.DuplicatesRefused
		tot.QuorumTimeouts += s.QuorumTimeouts
		tot.TooManyChanges += s.TooManyChanges
		tot.Ticks += s.Ticks
		tot.Speculative += s.Speculative
		tot.TryReads += s.TryReads
		tot.BatchReads += s.BatchReads
		tot.BatchEntries += s.BatchEntries
		tot.BatchFallbacks += s.BatchFallbacks
		tot.StickyMoves += s.StickyMoves
	}
	t.Logf("%d seeds: %+v", n, tot)
	for name, v := range map[string]int{
		"explicit writes": tot.ExplicitWrites, "out-of-order writes": tot.OutOfOrderWrites, "duplicates refused": tot.DuplicatesRefused,
		"quorum timeouts": tot.QuorumTimeouts, "too many ensemble changes": tot.TooManyChanges, "ticks": tot.Ticks,
		"speculative reads": tot.Speculative, "try LAC reads": tot.TryReads, "batch reads": tot.BatchReads,
		"batch read entries": tot.BatchEntries, "batch fallbacks": tot.BatchFallbacks, "sticky moves": tot.StickyMoves,
	} {
		if v == 0 {
			t.Errorf("no %s in %d seeds", name, n)
		}
	}
	if tot.BatchEntries <= tot.BatchReads {
		t.Errorf("batch reads returned %d entries in %d answers: never more than one", tot.BatchEntries, tot.BatchReads)
	}
}

// TestLACNeverAhead: a LAC handed to a reader above what the writer
// acknowledged breaks LACNeverAhead, even when the entries up to it are
// on Qa bookies (which NoDirtyReads allows): here the writer dies after
// its bookies stored entry 3 and before their answers came.
func TestLACNeverAhead(t *testing.T) {
	w := newWorld(Config{Seed: 1}.withDefaults())
	defer w.shutdown()
	wr := w.createLedger(3, 3, 2, 3, writerOpts{})
	if wr == nil {
		t.Fatal("no ledger")
	}
	w.topUp(wr) // entries 0-2
	w.runUntil(func() bool { return len(wr.led.acked) == 3 })
	if !w.appendOne(wr) {
		t.Fatal("entry 3 not appended")
	}
	wr.crashed = true // its adds still arrive; no answer reaches it
	w.runUntil(func() bool { return w.check.quorumLAC(wr.led) == 3 })
	if got := w.check.quorumLAC(wr.led); got != 3 || len(wr.led.acked) != 3 {
		t.Fatalf("entry 3 on Qa bookies: quorum LAC %d, acknowledged %v", got, wr.led.acked)
	}
	a := w.newActor(kindReader, "t", wr.led)
	w.check.observedLAC(a, 2, "try LAC")
	if len(w.violations) > 0 {
		t.Fatalf("LAC 2 (acknowledged) broke %v", w.violations)
	}
	w.check.observedLAC(a, 3, "try LAC")
	if len(w.violations) != 1 || w.violations[0].Invariant != LACNeverAhead {
		t.Fatalf("LAC 3 (on Qa bookies, never acknowledged): violations %v, want %s", w.violations, LACNeverAhead)
	}
}

// TestScriptExplicitIDs: the script of a clean run whose ledger has an
// explicit-id writer with a quorum timeout (seed 11: ids written out of
// order, duplicates refused, Ticks) is the one checked in as
// internal/ledger/testdata/sim_explicit_ids.txt, which the driver replays
// to the same end: write-at, tick and the writer's options are recorded
// as the driver reads them, and its checks pass.
func TestScriptExplicitIDs(t *testing.T) {
	script, r := Script(Config{Seed: 11, Faults: allFaults(t)})
	if r.Failed() {
		t.Fatalf("seed 11: %s", r.Summary())
	}
	for _, want := range []string{"writer w6 explicit quorum-timeout=1", "write-at w6 ids=", "tick w6"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the script has no %q (the simulator changed? pick another seed and rerun with -sim.update-scripts):\n%s", want, script)
		}
	}
	path := filepath.Join("..", "ledger", "testdata", "sim_explicit_ids.txt")
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
	for _, want := range []string{"duplicate entry id", "check\n----\nok", "lacs\n----\nok"} {
		if !strings.Contains(string(golden), want) {
			t.Errorf("%s does not show %q", path, want)
		}
	}
}
