package sim

import (
	"slices"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// runRecoveryRace runs WorkloadRecoveryRace: one ledger (Qa ≥ 2, so that a
// copy short of the ack quorum matters) whose writer appends while faults
// are drawn, until, at a random step, recoveryStorm stages the race; a
// tailing reader starts at another random step (Generate places both).
// Steps are 5–50 ms apart, so the safety phase spans the recoveries'
// timeouts.
// The liveness phase and the end checks are those of every workload.
func (w *world) runRecoveryRace(sched *Schedule) {
	nb := len(w.bookies)
	e := 2 + w.rng.IntN(min(nb-2, 3))
	qw := 2 + w.rng.IntN(e-1)
	qa := 2 + w.rng.IntN(qw-1)
	a := w.createLedger(e, qw, qa, 1+w.rng.IntN(4), writerOpts{})
	if a == nil {
		return
	}
	w.runSchedule(sched, func(act Action) {
		switch act {
		case ActStorm:
			w.recoveryStorm(a.led)
		case ActReader:
			w.startReader(a.led) // a tailing reader, polling or long-polling
		case ActAppend:
			w.topUp(a)
		default:
			w.maybeFault(act)
		}
	})
}

// recoveryStorm stages, on ledger l, the interleaving of issue 16 item 1
// and leaves its details to the schedule:
//
//  1. the writer's next two to five adds reach a single bookie h of its
//     ensemble, and the writer usually dies there;
//  2. recovery r1 starts, usually reading one entry ahead; every rewrite it
//     sends to x, a bookie of the first staged entry's write set other than
//     h, fails at once, while x's answers to reads are slow (so h's copy is
//     found before x's "no such entry" counts): r1 replaces x by a bookie
//     only r1 knows of (spec §4.6) while it still reads, and that bookie's
//     acks count toward r1's LAC; r1 often dies right before its close CAS;
//  3. one or two more recoveries start at random moments, racing r1 or
//     after its death, some of them losing their close too.
//
// Without the fix (MutationPiggybackRecoveryLAC), r1's next rewrite carries a
// LAC that counts x's replacement: NoDirtyReads sees it the moment a bookie
// stores it, and a later recovery starting from that LAC closes over an
// entry held by h alone of its write set.
func (w *world) recoveryStorm(l *ledgerRec) {
	md, _ := w.meta.read(l.id)
	if md == nil {
		return
	}
	ens := md.LastEnsemble().Ensemble
	h := ens[w.rng.IntN(len(ens))]
	first := int64(-1)
	if a := l.writer; a != nil && a.live() && md.State == metadata.LedgerOpen {
		k := 2 + w.rng.IntN(4)
		for _, b := range ens {
			if b != h {
				w.net.conn(a.name, b).dropAdds += k
			}
		}
		w.logf("storm: ledger %d: %s's next %d adds reach %s only", l.id, a.name, k, h)
		first = a.writer.LastAddPushed() + 1
		for range k {
			w.appendOne(a)
		}
		if w.chance(800) {
			w.logf("%s: client crashes (%d requests in flight)", a.name, len(a.pending))
			w.rec.kill(a)
			a.crashed = true
		}
	}
	readAhead := 1
	if w.chance(300) {
		readAhead = 2 + w.rng.IntN(2)
	}
	r1 := w.startRecoveryReadAhead(l, readAhead)
	if r1 == nil {
		return
	}
	var others []metadata.BookieID
	for _, b := range ens {
		if b != h && (first < 0 || slices.Contains(writeSet(md, first), b)) {
			others = append(others, b)
		}
	}
	if len(others) > 0 {
		x := others[w.rng.IntN(len(others))]
		c := w.net.conn(r1.name, x)
		c.failAdds, c.slow = true, w.between(5*time.Millisecond, 40*time.Millisecond)
		w.logf("storm: every rewrite %s sends to %s fails, its reads take +%s", r1.name, x, fmtTime(c.slow))
	}
	r1.loseClose = w.chance(600)
	for range 1 + w.rng.IntN(2) {
		lose := w.chance(300)
		w.afterOn(w.between(0, 1500*time.Millisecond), func() {
			if r := w.startRecovery(l); r != nil {
				r.loseClose = lose
			}
		})
	}
}
