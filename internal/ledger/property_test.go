package ledger

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

var (
	propSeed  = flag.Uint64("prop.seed", 0, "run only this seed of TestWriterProperty")
	propSeeds = flag.Int("prop.seeds", 300, "number of seeds TestWriterProperty runs")
)

// TestWriterProperty drives a Writer through random schedules: responses in
// random order, bookie errors and crashes, ensemble changes, foreign metadata
// writes that make CASes conflict, and sometimes a recovery racing the
// writer. After every acknowledgement env.checkAck checks DESIGN.md §6
// invariant 5 (contiguous from 0, on Qa bookies of the entry's write set in
// the stored metadata) and, in the schedules with a fault-domain rule
// (EnforceMinNumFaultDomainsForWrite), that the bookies that acked it meet
// the rule; at the end every acknowledged entry must still be on
// Qa bookies of its write set in the final metadata and, once closed, at or
// below the end. A failure prints the seed; rerun with -prop.seed=N.
func TestWriterProperty(t *testing.T) {
	seeds := make([]uint64, 0, *propSeeds)
	if *propSeed != 0 {
		seeds = append(seeds, *propSeed)
	} else {
		for i := range *propSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		if msg := runWriterSchedule(seed); msg != "" {
			t.Fatalf("seed %d: %s\nrerun: go test ./internal/ledger -run TestWriterProperty -prop.seed=%d", seed, msg, seed)
		}
	}
}

func runWriterSchedule(seed uint64) string { return runWriterScheduleMode(seed, false) }

// runWriterScheduleMode runs one schedule; explicit: the writer takes
// explicit entry ids (WriteAt, property_adv_test.go) instead of Append.
func runWriterScheduleMode(seed uint64, explicit bool) string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	e := newEnv(seed, false)
	nb := 4 + r.IntN(4)
	for i := range nb {
		e.addBookies(metadata.BookieID(fmt.Sprintf("b%d", i+1)))
	}
	size := 1 + r.IntN(min(nb-1, 5))
	qw := 1 + r.IntN(size)
	qa := 1 + r.IntN(qw)
	e.create(size, qw, qa, append([]metadata.BookieID(nil), e.order[:size]...))
	// The writer options (writer_options.go) vary too: they must keep
	// every safety property.
	cfg := WriterConfig{LedgerID: e.ledgerID, Metadata: e.store.md, Version: e.store.version, Placement: e.policy, Writable: e.writable,
		DelayEnsembleChange: r.IntN(2) == 0, ExplicitIDs: explicit, AddRecords: e.records.records()}
	if r.IntN(3) == 0 {
		cfg.AddQuorumTimeout = time.Duration(4+r.IntN(20)) * time.Second
	}
	if r.IntN(4) == 0 {
		cfg.MaxEnsembleChanges = NoEnsembleChanges + r.IntN(4)
	}
	// EnforceMinNumFaultDomainsForWrite over a random rack map (placement
	// stays random, so some write sets cannot meet the rule and their adds
	// wait): env.checkAck checks every acknowledgement against the rule.
	var rule func([]metadata.BookieID) bool
	if r.IntN(2) == 0 {
		racks := map[metadata.BookieID]string{}
		nr := 1 + r.IntN(3)
		for _, b := range e.order {
			racks[b] = fmt.Sprintf("/r/%d", r.IntN(nr))
		}
		e.setRacks(racks, 1+r.IntN(3))
		rule = e.rule
		e.ruled["w"] = true
		cfg.AckedAdhering = rule
	}
	w, err := NewWriter(cfg)
	if err != nil {
		return err.Error()
	}
	e.add("w", w)
	ids := newExplicitIDs()
	crashes := 0
	recovering := false
	for step := 0; step < 400; step++ {
		switch x := r.IntN(100); {
		case x < 25 && explicit:
			if msg := ids.writeOne(r, e, w); msg != "" {
				return msg
			}
		case x < 25:
			if _, err := w.Append([]byte(fmt.Sprintf("w:%d", w.LastAddPushed()+1))); err == nil {
				e.drain("w")
			}
		case x < 75 && len(e.inflight) > 0:
			i := r.IntN(len(e.inflight))
			m := e.inflight[i]
			e.inflight = append(e.inflight[:i], e.inflight[i+1:]...)
			var injected error
			if r.IntN(100) < 8 {
				injected = []error{errInjected["EIO"], errInjected["timeout"], errInjected["EREADONLY"]}[r.IntN(3)]
			}
			e.deliver(m, injected, r.IntN(100) < 3)
		case x < 88 && len(e.metaQ) > 0:
			req := e.metaQ[0]
			e.metaQ = e.metaQ[1:]
			e.processMeta(req)
		case x < 89:
			w.Step(Tick{})
			e.drain("w")
		case x < 91:
			// A foreign metadata write (say AutoRecovery): the next CAS conflicts.
			e.store.version++
		case x < 93 && crashes < nb-size:
			b := e.order[r.IntN(nb)]
			if !e.bookies[b].down {
				e.bookies[b].down = true
				crashes++
			}
		case x < 94 && !recovering && step > 100 && r.IntN(3) == 0:
			recovering = true
			rec := NewRecovery(RecoveryConfig{LedgerID: e.ledgerID, Metadata: e.store.md, Version: e.store.version,
				Verifier: e.dig, Placement: e.policy, Writable: e.writable, ReadAhead: 1 + r.IntN(3), AckedAdhering: rule})
			e.add("r", rec)
			rec.Start()
			e.drain("r")
		}
		if len(e.violations) > 0 {
			return e.violations[0]
		}
	}
	// Liveness is not the point here; settle, close, and check safety.
	for _, b := range e.bookies {
		b.down = false
	}
	e.stabilize()
	w.Close()
	e.drain("w")
	e.stabilize()
	if len(e.violations) > 0 {
		return e.violations[0]
	}
	for _, id := range e.acked["w"] {
		if n := e.copiesInWriteSet(e.store.md, id, "w"); n < qa {
			return fmt.Sprintf("acknowledged e%d has %d copies in its final write set %v (Qa=%d), metadata %s",
				id, n, e.writeSet(e.store.md, id), qa, FormatMetadata(e.store.md))
		}
	}
	if e.store.md.State == metadata.LedgerClosed {
		if bad := e.checkClosed(); len(bad) > 0 && !(recovering && e.store.md.State != metadata.LedgerClosed) {
			return fmt.Sprintf("E=%d Qw=%d Qa=%d: %v (metadata %s)", size, qw, qa, bad, FormatMetadata(e.store.md))
		}
	}
	return ""
}
