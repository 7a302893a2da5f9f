package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
)

// Workload limits: enough concurrency to interleave, few enough ledgers for
// the end checks to stay cheap.
const (
	maxLedgers       = 10
	maxLiveWriters   = 3
	maxDownBookies   = 2
	maxEntriesLedger = 60
)

// action runs one step of the mixed workload.
func (w *world) action(act Action) {
	switch act {
	case ActWriter:
		w.startWriter()
	case ActAppend:
		if a := w.pickActor(kindWriter); a != nil {
			w.topUp(a)
		}
	case ActStorm:
		if l := w.pickOpenLedger(); l != nil {
			w.recoveryStorm(l)
		}
	case ActRace:
		w.raceRecovery()
	case ActDelete:
		w.deleteLedger()
	case ActRecover:
		if l := w.pickOpenLedger(); l != nil {
			w.startRecovery(l)
			if w.chance(300) {
				w.startRecovery(l) // concurrent recoverers
			}
		}
	case ActReader:
		if l := w.pickLedger(); l != nil {
			w.startReader(l)
		}
	case ActClose:
		if a := w.pickActor(kindWriter); a != nil && !a.closeAsked {
			a.closeAsked = true
			w.logf("%s: close", a.name)
			w.rec.closeWriter(a)
			a.writer.Close()
			a.drain()
		}
	default:
		w.maybeFault(act)
	}
}

// maybeFault runs fault action act, with its kind's intensity.
func (w *world) maybeFault(act Action) {
	if f := faultOf(act); f != "" && w.faults[f] && w.rng.IntN(8) < w.intensity[f] {
		w.fault(act)
	}
}

// fault runs fault action act.
func (w *world) fault(act Action) {
	switch act {
	case ActCrash:
		if n := w.pickBookie(func(n *bookieNode) bool { return n.up }); n != nil && w.down() < maxDownBookies {
			n.crash()
		}
	case ActRestart:
		if n := w.pickBookie(func(n *bookieNode) bool { return !n.up }); n != nil {
			n.restart()
		}
	case ActPause:
		if n := w.pickBookie(func(n *bookieNode) bool { return n.up && !n.paused }); n != nil && w.down() < maxDownBookies {
			n.pause()
		}
	case ActResume:
		if n := w.pickBookie(func(n *bookieNode) bool { return n.paused }); n != nil {
			n.resume()
		}
	case ActPartition:
		w.partition()
	case ActHeal:
		if len(w.net.cut) > 0 || len(w.net.isolated) > 0 {
			w.logf("network: partitions healed")
			w.net.heal()
		}
	case ActReset:
		if a := w.pickLiveActor(); a != nil {
			if n := w.pickBookie(func(*bookieNode) bool { return true }); n != nil {
				w.logf("network: connection %s-%s reset", a.name, n.id)
				w.net.reset(a, n.id)
			}
		}
	case ActConflict:
		if l := w.pickLedger(); l != nil {
			w.meta.foreignWrite(l)
		}
	case ActCongest:
		// A congested link for a while: its messages queue behind each
		// other (FIFO), while other links are fast.
		if a := w.pickLiveActor(); a != nil {
			if n := w.pickBookie(func(*bookieNode) bool { return true }); n != nil {
				c := w.net.conn(a.name, n.id)
				c.slow = w.between(20*time.Millisecond, 150*time.Millisecond)
				w.logf("network: link %s-%s congested (+%s)", a.name, n.id, fmtTime(c.slow))
				w.after(w.between(50*time.Millisecond, 400*time.Millisecond), func() { c.slow = 0 })
			}
		}
	case ActClientCrash:
		if a := w.pickActor(kindWriter); a != nil {
			w.logf("%s: client crashes (%d requests in flight)", a.name, len(a.pending))
			w.rec.kill(a)
			a.crashed = true
		}
	}
}

// down counts bookies crashed or paused.
func (w *world) down() int {
	k := 0
	for _, n := range w.bookies {
		if !n.up || n.paused {
			k++
		}
	}
	return k
}

func (w *world) partition() {
	if w.chance(300) {
		n := w.pickBookie(func(n *bookieNode) bool { return !w.net.isolated[n.id] })
		if n != nil && len(w.net.isolated) < 1 {
			w.net.isolated[n.id] = true
			w.logf("network: %s isolated", n.id)
		}
		return
	}
	a := w.pickLiveActor()
	n := w.pickBookie(func(*bookieNode) bool { return true })
	if a != nil && n != nil {
		w.net.cut[connKey{a.name, n.id}] = true
		w.logf("network: %s cut from %s", a.name, n.id)
	}
}

func (w *world) pickBookie(ok func(*bookieNode) bool) *bookieNode {
	var c []*bookieNode
	for _, n := range w.bookies {
		if ok(n) {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

func (w *world) pickActor(kind actorKind) *actor {
	var c []*actor
	for _, a := range w.actors {
		if a.kind == kind && a.live() {
			c = append(c, a)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

func (w *world) pickLiveActor() *actor {
	var c []*actor
	for _, a := range w.actors {
		if a.live() {
			c = append(c, a)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

// pickOpenLedger prefers ledgers not yet closed (a recovery of a closed
// ledger has nothing to do).
//
// Most of all it prefers ledgers whose writer is alive with adds in flight:
// the recoverer that wrongly decides the writer has crashed (issue 7) is
// the race the fencing protocol exists for.
func (w *world) pickOpenLedger() *ledgerRec {
	var racing []*ledgerRec
	for _, l := range w.ledgers {
		if a := l.writer; a != nil && a.live() && len(a.pending) > 0 && a.writer.Err() == nil {
			racing = append(racing, l)
		}
	}
	if len(racing) > 0 && w.chance(800) {
		return racing[w.rng.IntN(len(racing))]
	}
	var c []*ledgerRec
	for _, l := range w.ledgers {
		if !w.closed(l) {
			c = append(c, l)
		}
	}
	if len(c) == 0 || w.chance(100) {
		return w.pickLedger()
	}
	return c[w.rng.IntN(len(c))]
}

func (w *world) pickLedger() *ledgerRec {
	if len(w.ledgers) == 0 {
		return nil
	}
	return w.ledgers[w.rng.IntN(len(w.ledgers))]
}

// startWriter creates a ledger (E, Qw, Qa drawn; the ensemble from the
// writable bookies) and a writer for it, synchronous or pipelined.
func (w *world) startWriter() {
	if len(w.ledgers) >= maxLedgers {
		return
	}
	live := 0
	for _, a := range w.actors {
		if a.kind == kindWriter && a.live() {
			live++
		}
	}
	if live >= maxLiveWriters {
		return
	}
	nb := len(w.bookies)
	e := 2 + w.rng.IntN(min(nb-2, 4))
	if w.chance(80) {
		e = 1
	}
	qw := 1 + w.rng.IntN(e)
	if qw == 1 && e > 1 && w.chance(600) {
		qw = e // replication is the interesting case
	}
	qa := 1 + w.rng.IntN(qw)
	if qa == 1 && qw > 1 && w.chance(700) {
		qa = 2 // Qa=1 ledgers need every bookie to recover; keep them rarer
	}
	window := 1
	if w.chance(400) {
		window = 2 + w.rng.IntN(3) // pipelined
	}
	// The writer's options come from a stream of their own, so that the
	// step's draws, and every other stream, are those of a run without
	// them.
	w.createLedger(e, qw, qa, window, drawWriterOpts(w.stream("wopts/"+w.newKey("wopts"))))
}

// writerOpts are a writer's choices beyond its quorums and window: the
// explicit entry ids and the writer options of issue 21.
type writerOpts struct {
	// explicit: the writer names its entry ids (WriteAt), in random order
	// within its window, now and then naming one again (refused).
	explicit bool
	// window replaces the drawn window when positive (explicit writers are
	// mostly pipelined: out of order needs room).
	window int
	// quorumTimeout is WriterConfig.AddQuorumTimeout (0: off).
	quorumTimeout time.Duration
	// delay is WriterConfig.DelayEnsembleChange.
	delay bool
	// maxChanges is WriterConfig.MaxEnsembleChanges.
	maxChanges int
}

// drawWriterOpts draws a mixed-workload writer's options from r: about a
// third of the writers name their ids, and each option is on for about a
// quarter of them.
func drawWriterOpts(r *rand.Rand) writerOpts {
	var o writerOpts
	if r.IntN(1000) < 300 {
		o.explicit = true
		if r.IntN(1000) < 750 {
			o.window = 2 + r.IntN(4)
		}
	}
	if r.IntN(1000) < 250 {
		// Around the request timeout (500 ms), so that slow links,
		// pauses and partitions make it fire.
		o.quorumTimeout = between(r, 100*time.Millisecond, time.Second)
	}
	o.delay = r.IntN(1000) < 250
	if r.IntN(1000) < 200 {
		o.maxChanges = []int{ledger.NoEnsembleChanges, 1, 2, 3}[r.IntN(4)]
	}
	return o
}

// String is the trace's form of the options ("" for none).
func (o writerOpts) String() string {
	var s string
	if o.explicit {
		s += " explicit-ids"
	}
	if o.quorumTimeout > 0 {
		s += " quorum-timeout=" + fmtTime(o.quorumTimeout)
	}
	if o.delay {
		s += " delay-ensemble-change"
	}
	if o.maxChanges != 0 {
		s += fmt.Sprintf(" max-ensemble-changes=%d", o.maxChanges)
	}
	return s
}

// createLedger creates a ledger with an ensemble of the writable bookies
// and a writer for it with window adds in flight at most and options o;
// nil if the ensemble or the metadata cannot be had.
func (w *world) createLedger(e, qw, qa, window int, o writerOpts) *actor {
	writable := w.writable()
	policy := w.newPolicy()
	ensemble, err := policy.NewEnsemble(e, writable)
	if err != nil {
		w.logf("create ledger: %v", err)
		return nil
	}
	password := []byte(fmt.Sprintf("pw-%d", len(w.ledgers)))
	md := &metadata.LedgerMetadata{
		EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa,
		State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: ensemble}},
		HasPassword: true, Password: password, DigestType: metadata.DigestCRC32C,
	}
	var id int64
	var v metadata.Version
	w.meta.do(func(ctx context.Context) { id, v, err = w.meta.drv.CreateLedger(ctx, md) })
	if err != nil {
		w.logf("create ledger: %v", err)
		return nil
	}
	dig, err := digest.New(digest.CRC32C, password)
	if err != nil {
		panic(err)
	}
	key := digest.MasterKey(password)
	l := &ledgerRec{id: id, policy: policy, password: password, key: key[:], dig: dig, q: quorumParams{e, qw, qa}, payloads: map[int64][]byte{}, readMax: -1}
	w.ledgers = append(w.ledgers, l)
	w.stats.Ledgers++
	wr, err := ledger.NewWriter(ledger.WriterConfig{LedgerID: id, Metadata: md, Version: v, Placement: policy, Writable: writable,
		ExplicitIDs: o.explicit, AddQuorumTimeout: o.quorumTimeout, DelayEnsembleChange: o.delay, MaxEnsembleChanges: o.maxChanges,
		AddRecords: w.addRecords()})
	if err != nil {
		panic(err)
	}
	a := w.newActor(kindWriter, "w", l)
	a.writer = wr
	a.window = window
	if o.window > 0 {
		a.window = o.window
	}
	a.explicit = o.explicit
	a.submitted = map[int64]bool{}
	l.writer = a
	w.logf("%s: ledger %d E=%d Qw=%d Qa=%d %s window=%d%s", a.name, id, e, qw, qa, ledger.FormatMetadata(md), a.window, o)
	w.rec.createLedger(a, md, o)
	a.setMachine(wr) // after the log line: it arms the first Tick
	return a
}

// topUp appends until the writer has window adds in flight.
func (w *world) topUp(a *actor) {
	for a.inflight < a.window && w.appendOne(a) {
	}
}

// appendOne appends one entry if the writer can take it, whatever its
// window; it reports whether it did.
func (w *world) appendOne(a *actor) bool {
	if a.explicit {
		return w.writeAtOne(a)
	}
	if !a.live() || a.writer.Err() != nil || a.closeAsked || a.writer.LastAddPushed() >= maxEntriesLedger || w.phase == "liveness" {
		return false
	}
	id := a.writer.LastAddPushed() + 1
	payload := []byte(fmt.Sprintf("%s:L%d:e%d:%d", a.name, a.led.id, id, a.rng.Uint32()))
	got, err := a.writer.Append(payload)
	if err != nil {
		return false
	}
	if got != id {
		panic(fmt.Sprintf("sim: writer assigned e%d, expected e%d", got, id))
	}
	a.led.payloads[id] = payload
	a.inflight++
	w.logf("%s: append e%d", a.name, id)
	w.rec.append(a)
	a.drain()
	return true
}

// writeAtOne writes one entry of an explicit-id writer: an id not yet
// written, drawn among those of (LAC, LAC+window] (every pending id is in
// that range, so with fewer than window adds pending one is free, and the
// LAC+1 gap is always eventually written). Now and then it first names an
// id again (a pending or acknowledged one): WriteAt must refuse it with
// ErrDuplicateEntryID and queue nothing. It reports whether it wrote one.
func (w *world) writeAtOne(a *actor) bool {
	wr := a.writer
	if !a.live() || wr.Err() != nil || a.closeAsked {
		return false
	}
	lac := wr.LastAddConfirmed()
	if len(a.submitted) > 0 && a.rng.IntN(8) == 0 {
		w.duplicateWriteAt(a)
		if !a.live() || wr.Err() != nil {
			return false
		}
	}
	var free []int64
	for id := lac + 1; id <= min(lac+int64(a.window), maxEntriesLedger); id++ {
		if !a.submitted[id] {
			free = append(free, id)
		}
	}
	if len(free) == 0 {
		return false
	}
	id := free[a.rng.IntN(len(free))]
	payload := []byte(fmt.Sprintf("%s:L%d:e%d:%d", a.name, a.led.id, id, a.rng.Uint32()))
	if err := wr.WriteAt(id, payload); err != nil {
		w.violate(ExplicitIDsRefuseOnlyDuplicates, a.led.id, "%s: WriteAt(e%d) with LAC %d, the id never written, refused: %v", a.name, id, lac, err)
		return false
	}
	if id < wr.LastAddPushed() {
		w.stats.OutOfOrderWrites++
	}
	w.stats.ExplicitWrites++
	a.submitted[id] = true
	a.led.payloads[id] = payload
	a.inflight++
	w.logf("%s: write-at e%d (lac=%d)", a.name, id, lac)
	w.rec.writeAt(a, id)
	a.drain()
	return true
}

// duplicateWriteAt names an id the writer wrote already and checks the
// refusal: ErrDuplicateEntryID, nothing queued (no request sent), the
// entry's payload unchanged.
func (w *world) duplicateWriteAt(a *actor) {
	ids := sortedKeys(a.submitted)
	id := ids[a.rng.IntN(len(ids))]
	a.drain() // nothing is queued before the call
	err := a.writer.WriteAt(id, []byte(fmt.Sprintf("%s:L%d:e%d:duplicate", a.name, a.led.id, id)))
	queued := a.writer.Ready()
	w.logf("%s: write-at e%d again: %s (%d effects)", a.name, id, errText(err), len(queued))
	w.rec.writeAt(a, id)
	if !errors.Is(err, ledger.ErrDuplicateEntryID) || len(queued) > 0 {
		w.violate(ExplicitIDsRefuseOnlyDuplicates, a.led.id, "%s: WriteAt(e%d), an id written already (LAC %d), returned %v and queued %v; want ErrDuplicateEntryID and nothing",
			a.name, id, a.writer.LastAddConfirmed(), err, queued)
	}
	w.stats.DuplicatesRefused++
	a.carryOut(queued)
}

// addComplete: a writer's add finished; a synchronous writer goes on after
// a think time.
func (a *actor) addComplete(eff ledger.AddComplete) {
	w := a.w
	a.inflight--
	if eff.Err != nil {
		switch {
		case errors.Is(eff.Err, ledger.ErrAddQuorumTimeout):
			w.stats.QuorumTimeouts++
		case errors.Is(eff.Err, ledger.ErrTooManyEnsembleChanges):
			w.stats.TooManyChanges++
		}
		return
	}
	w.stats.Acked++
	w.check.acked(a, eff.EntryID)
	if a.window == 1 && w.phase == "safety" {
		w.after(between(a.rng, 0, 2*time.Millisecond), func() { w.topUp(a) })
	}
}

// startRecovery opens ledger l with recovery (the metadata read is the
// open's; the password is right), reading one to three entries ahead.
func (w *world) startRecovery(l *ledgerRec) *actor {
	return w.startRecoveryReadAhead(l, 1+w.rng.IntN(3))
}

// startRecoveryReadAhead is startRecovery reading readAhead entries ahead.
func (w *world) startRecoveryReadAhead(l *ledgerRec, readAhead int) *actor {
	md, v := w.meta.read(l.id)
	if md == nil {
		return nil
	}
	a := w.newActor(kindRecoverer, "r", l)
	a.mdSeen = md
	rec := ledger.NewRecovery(ledger.RecoveryConfig{
		LedgerID: l.id, Metadata: md, Version: v, Verifier: l.dig,
		Placement: l.policy, Writable: w.writable(), ReadAhead: readAhead,
		Unsafe: w.unsafe,
	})
	a.rec = rec
	a.setMachine(rec)
	l.recovering++
	w.stats.Recoveries++
	w.logf("%s: recover ledger %d from v%d %s", a.name, l.id, v, ledger.FormatMetadata(md))
	w.rec.recover(a, readAhead)
	rec.Start()
	a.drain()
	return a
}

// readerOpts are how a tailing reader reads (issue 21's read paths), drawn
// from a stream of their own (drawReaderOpts).
type readerOpts struct {
	// try reads the LAC with TryReadLastAddConfirmed's rule (the first
	// verified answer) instead of the coverage rule; polling readers only.
	try bool
	// batch reads entries with BATCH_READ_ENTRY (v2, as a client with
	// UseV2WireProtocol) on fragments with E == Qw, falling back to single
	// reads as the client does; single reads otherwise.
	batch bool
	// batchBytes bounds a batch read's answer (small ones cut batches).
	batchBytes int64
	// sticky: reads go to one bookie of E == Qw fragments until it fails.
	sticky bool
	// spec is the speculative-read schedule (First zero: none).
	spec ledger.Speculation
}

// drawReaderOpts draws a reader's options from r.
func drawReaderOpts(r *rand.Rand) readerOpts {
	var o readerOpts
	o.try = r.IntN(1000) < 300
	if r.IntN(1000) < 350 {
		o.batch = true
		o.batchBytes = 1 << 20
		if r.IntN(2) == 0 {
			o.batchBytes = int64(80 + r.IntN(400))
		}
	}
	o.sticky = r.IntN(1000) < 300
	if r.IntN(1000) < 400 {
		first := between(r, 3*time.Millisecond, 40*time.Millisecond)
		o.spec = ledger.Speculation{First: first, Max: first * time.Duration(1+r.IntN(8)), Multiplier: []float64{1, 1.5, 2}[r.IntN(3)]}
	}
	return o
}

func (o readerOpts) String() string {
	var s string
	if o.try {
		s += " try-lac"
	}
	if o.batch {
		s += fmt.Sprintf(" batch(max %dB)", o.batchBytes)
	}
	if o.sticky {
		s += " sticky"
	}
	if o.spec.First > 0 {
		s += fmt.Sprintf(" speculative(%s..%s x%g)", fmtTime(o.spec.First), fmtTime(o.spec.Max), o.spec.Multiplier)
	}
	return s
}

// startReader starts a tailing reader: it reads the LAC (fence-free, by
// READ_ENTRY(-1) or READ_LAC, with the coverage rule or as
// TryReadLastAddConfirmed), then the entries up to it (single reads,
// sticky or speculative, or batch reads), and again.
func (w *world) startReader(l *ledgerRec) {
	a := w.newActor(kindReader, "t", l)
	a.next = 0
	a.longPoll = w.chance(500)
	a.ropts = drawReaderOpts(w.stream("ropts/" + w.newKey("ropts")))
	if a.longPoll {
		a.ropts.try = false
	}
	if a.longPoll {
		w.logf("%s: tail ledger %d by long polls%s", a.name, l.id, a.ropts)
	} else {
		w.logf("%s: tail ledger %d%s", a.name, l.id, a.ropts)
	}
	w.rec.reader(a)
	w.readerRound(a)
}

func (w *world) readerRound(a *actor) {
	if !a.live() {
		return
	}
	if a.rounds >= 8 && !a.longPoll || a.rounds >= 16 || w.phase != "safety" {
		a.finished = true
		return
	}
	a.rounds++
	md, _ := w.meta.read(a.led.id)
	if md == nil {
		a.finished = true
		return
	}
	a.mdSeen = md
	if a.longPoll {
		lp := ledger.NewLongPollLAC(ledger.LongPollConfig{
			LedgerID: a.led.id, Metadata: md, Verifier: a.led.dig,
			PreviousLAC: a.next - 1, TimeoutMs: int64(20 + a.rng.IntN(280)),
		})
		a.setMachine(lp) // answers to the previous round are dropped
		lp.Start()
		a.drain()
		return
	}
	r := ledger.NewReadLAC(ledger.ReadLACConfig{LedgerID: a.led.id, Metadata: md, Verifier: a.led.dig, UseReadLAC: a.rng.IntN(1000) < 500, Try: a.ropts.try})
	a.setMachine(r) // answers to the previous round are dropped
	a.mdSeen = md
	r.Start()
	a.drain()
}

func (a *actor) readerLAC(eff ledger.LACComplete) {
	w := a.w
	if eff.Err != nil {
		w.after(between(a.rng, 5*time.Millisecond, 30*time.Millisecond), func() { w.readerRound(a) })
		return
	}
	how := "LAC"
	if a.ropts.try {
		how = "try LAC"
		w.stats.TryReads++
	}
	w.check.observedLAC(a, eff.LAC, how)
	a.lac = eff.LAC
	if eff.LAC < a.next {
		w.after(between(a.rng, 5*time.Millisecond, 30*time.Millisecond), func() { w.readerRound(a) })
		return
	}
	a.readEntries(min(eff.LAC, a.next+7), a.ropts.batch)
}

// readEntries reads a.next … last, as the client's ReadHandle does: one
// BATCH_READ_ENTRY when batch and the fragment of a.next has E == Qw (the
// count cut at the fragment's end, as BatchRead does), else single reads;
// sticky and speculative as the reader's options say.
func (a *actor) readEntries(last int64, batch bool) {
	md := a.mdSeen
	sticky := a.ropts.sticky && md.EnsembleSize == md.WriteQuorum
	if sticky && a.sticky < 0 {
		a.sticky = a.rng.IntN(md.EnsembleSize)
	}
	if batch && md.EnsembleSize == md.WriteQuorum {
		last = min(last, fragmentEnd(md, a.next))
		b, err := ledger.NewBatchRead(ledger.BatchReadConfig{LedgerID: a.led.id, Metadata: md, Verifier: a.led.dig,
			First: a.next, MaxCount: int(last - a.next + 1), MaxSize: a.ropts.batchBytes,
			Sticky: sticky, StickyIndex: a.sticky, Speculation: a.ropts.spec})
		if err != nil {
			panic(err)
		}
		a.setMachine(b)
		b.Start()
		a.drain()
		return
	}
	r, err := ledger.NewRead(ledger.ReadConfig{LedgerID: a.led.id, Metadata: md, Verifier: a.led.dig, First: a.next, Last: last,
		Sticky: sticky, StickyIndex: a.sticky,
		SpeculativeTimeout: a.ropts.spec.First, SpeculativeMax: a.ropts.spec.Max, SpeculativeMultiplier: a.ropts.spec.Multiplier})
	if err != nil {
		panic(err)
	}
	a.setMachine(r)
	r.Start()
	a.drain()
}

// fragmentEnd is the last entry of the fragment holding entry id
// (math.MaxInt64 in the last fragment).
func fragmentEnd(md *metadata.LedgerMetadata, id int64) int64 {
	end := int64(math.MaxInt64)
	for i := len(md.Ensembles) - 1; i >= 0; i-- {
		if md.Ensembles[i].FirstEntryID <= id {
			return end
		}
		end = md.Ensembles[i].FirstEntryID - 1
	}
	return end
}

// stickyFailed moves the sticky bookie on when it is among the bookies
// that failed a read of entry id (the client's rule).
func (a *actor) stickyFailed(id int64, failed []metadata.BookieID) {
	md := a.mdSeen
	if a.sticky < 0 || md.EnsembleSize != md.WriteQuorum {
		return
	}
	if ens := md.EnsembleAt(id); a.sticky < len(ens) && slices.Contains(failed, ens[a.sticky]) {
		a.sticky = (a.sticky + 1) % md.EnsembleSize
		a.w.stats.StickyMoves++
		a.w.logf("%s: sticky reads move to ensemble index %d", a.name, a.sticky)
	}
}

// readerBatchDone: a batch read finished. Its entries are checked as
// single reads' are; a batch no replica could serve is read again with
// single reads (the client's fallback).
func (a *actor) readerBatchDone(eff ledger.BatchReadComplete) {
	w := a.w
	first := a.next
	a.stickyFailed(first, eff.Failed)
	if eff.Err == nil {
		w.stats.BatchReads++
		w.stats.BatchEntries += len(eff.Entries)
		for _, e := range eff.Entries {
			if !a.live() {
				return
			}
			a.readerEntry(ledger.EntryComplete{Entry: e})
		}
		w.after(between(a.rng, 2*time.Millisecond, 20*time.Millisecond), func() { w.readerRound(a) })
		return
	}
	if eff.Fallback && a.lac >= first {
		w.stats.BatchFallbacks++
		a.readEntries(min(a.lac, first+7), false)
		return
	}
	w.after(between(a.rng, 2*time.Millisecond, 20*time.Millisecond), func() { w.readerRound(a) })
}

// readerLongPoll: a long poll finished. Its LAC is checked like a polled
// one; a piggybacked entry is the next one to read; entries up to the LAC
// not yet read are read as by a polling reader, and the reader polls again.
func (a *actor) readerLongPoll(eff ledger.LongPollComplete) {
	w := a.w
	if eff.Err != nil {
		w.after(between(a.rng, 5*time.Millisecond, 30*time.Millisecond), func() { w.readerRound(a) })
		return
	}
	w.check.observedLAC(a, eff.LAC, "long-poll LAC")
	a.lac = max(a.lac, eff.LAC)
	if e := eff.Entry; e != nil && e.EntryID == a.next {
		a.readerEntry(ledger.EntryComplete{Entry: *e})
	}
	if eff.LAC < a.next {
		w.after(between(a.rng, 0, 3*time.Millisecond), func() { w.readerRound(a) })
		return
	}
	a.readEntries(min(eff.LAC, a.next+7), a.ropts.batch)
}

func (a *actor) readerEntry(eff ledger.EntryComplete) {
	w := a.w
	w.stats.EntriesRead++
	w.logf("%s: read e%d %q", a.name, eff.Entry.EntryID, eff.Entry.Payload)
	w.check.readEntry(a, eff.Entry)
	a.next = eff.Entry.EntryID + 1
}

func (a *actor) readerDone(ledger.ReadComplete) {
	w := a.w
	if r, ok := a.m.(*ledger.Read); ok {
		a.stickyFailed(a.next, r.Failed())
	}
	w.after(between(a.rng, 2*time.Millisecond, 20*time.Millisecond), func() { w.readerRound(a) })
}

// runLiveness heals every fault and requires every ledger to be closed
// within Config.LivenessTimeout of virtual time: writers that can close
// do; other ledgers are recovered, again and again until it succeeds.
func (w *world) runLiveness() {
	w.phase = "liveness"
	w.step = w.cfg.Steps + 1
	w.logf("liveness: healing every fault")
	w.net.heal()
	for _, n := range w.bookies {
		switch {
		case !n.up:
			n.restart()
		case n.paused:
			n.resume()
		}
	}
	// AppendsComplete: the writers take no new append (appendOne), and
	// those still in flight complete before the writers are closed (a
	// close fails the pending ones, which would hide a hung add).
	drainEnd := w.now + w.cfg.LivenessTimeout
	w.runUntil(func() bool { return !w.appendsInFlight() || w.now > drainEnd })
	for _, a := range w.actors {
		if a.kind == kindWriter && !a.explicit && a.live() && !a.closeAsked && a.inflight > 0 {
			w.violate(AppendsComplete, a.led.id, "%s: %d appends (up to e%d, LAC %d) still in flight %s after healing every fault",
				a.name, a.inflight, a.writer.LastAddPushed(), a.writer.LastAddConfirmed(), fmtTime(w.cfg.LivenessTimeout))
		}
	}
	for _, a := range w.actors {
		if a.kind == kindWriter && a.live() && !a.closeAsked {
			a.closeAsked = true
			w.logf("%s: close", a.name)
			w.rec.closeWriter(a)
			a.writer.Close()
			a.drain()
		}
	}
	deadline := w.now + w.cfg.LivenessTimeout
	var watch func()
	watch = func() {
		for _, l := range w.ledgers {
			if w.closed(l) || l.recovering > 0 {
				continue
			}
			if wa := l.writer; wa != nil && wa.live() {
				continue // its close is still running
			}
			w.startRecovery(l)
		}
		w.after(200*time.Millisecond, watch)
	}
	w.after(50*time.Millisecond, watch)
	w.runUntil(func() bool { return w.allClosed() || w.now > deadline })
	for _, l := range w.ledgers {
		if !w.closed(l) {
			md, _ := w.meta.read(l.id)
			w.violate("LedgerIsClosed", l.id, "ledger %d is not closed %s after healing every fault: %s", l.id, fmtTime(w.cfg.LivenessTimeout), ledger.FormatMetadata(md))
		}
	}
}

// appendsInFlight reports whether a live writer (explicit-id ones left
// out, see AppendsComplete) has appends in flight.
func (w *world) appendsInFlight() bool {
	for _, a := range w.actors {
		if a.kind == kindWriter && !a.explicit && a.live() && !a.closeAsked && a.inflight > 0 {
			return true
		}
	}
	return false
}

func (w *world) closed(l *ledgerRec) bool {
	md, _ := w.meta.read(l.id)
	return md == nil || md.State == metadata.LedgerClosed
}

func (w *world) allClosed() bool {
	for _, l := range w.ledgers {
		if !w.closed(l) {
			return false
		}
	}
	return true
}

// raceRecovery stages the race the fencing protocol exists for (issue
// #2614, defect 1 of the TLA+ model): a live writer's next adds are slow on
// Qw-Qa+1 links of their write set (enough that the ack quorum needs one of
// them), and a recoverer that wrongly believes the writer dead starts a few
// milliseconds later. With delay faults the links are congested; with loss
// or reset faults the recoverer's first request to the least slow of those
// bookies (its fence of the LAC read) is lost, so only the fence carried by
// the recovery's entry reads stops the late add from completing a quorum
// above the end the recovery settles on.
func (w *world) raceRecovery() {
	var c []*actor
	for _, a := range w.actors {
		if a.kind == kindWriter && a.live() && a.writer.Err() == nil && !a.closeAsked &&
			a.inflight < a.window && a.writer.LastAddPushed() < maxEntriesLedger {
			c = append(c, a)
		}
	}
	if len(c) == 0 {
		return
	}
	a := c[w.rng.IntN(len(c))]
	l := a.led
	md, _ := w.meta.read(l.id)
	if md == nil || md.State != metadata.LedgerOpen {
		return
	}
	e := a.writer.LastAddPushed() + 1
	ws := writeSet(md, e)
	k := min(md.WriteQuorum-md.AckQuorum+1, len(ws))
	perm := w.rng.Perm(len(ws))
	var target metadata.BookieID
	if w.faults[FaultDelay] {
		least := time.Duration(-1)
		for _, i := range perm[:k] {
			cn := w.net.conn(a.name, ws[i])
			cn.slow = w.between(25*time.Millisecond, 150*time.Millisecond)
			if least < 0 || cn.slow < least {
				least, target = cn.slow, ws[i]
			}
			w.logf("network: link %s-%s congested (+%s)", a.name, ws[i], fmtTime(cn.slow))
			w.after(w.between(150*time.Millisecond, 500*time.Millisecond), func() { cn.slow = 0 })
		}
	} else {
		target = ws[perm[0]]
	}
	w.topUp(a)
	w.afterOn(w.between(0, 4*time.Millisecond), func() {
		// The recovery's first request to target (its LAC fence read:
		// Start only writes IN_RECOVERY) is the one lost.
		if r := w.startRecovery(l); r != nil && (w.faults[FaultLoss] || w.faults[FaultReset]) {
			w.net.conn(r.name, target).loseNext = true
		}
	})
}

// deleteLedger deletes a closed ledger, as an application would: its
// metadata goes at once; each bookie's garbage collector drops it from the
// store on its next round (bookieNode.gc). A fenced ledger stays fenced and
// deleted on the bookies, so FencedMeansFenced still holds for it.
func (w *world) deleteLedger() {
	var c []*ledgerRec
	for _, l := range w.ledgers {
		if !l.deleted && l.recovering == 0 {
			if md, _ := w.meta.read(l.id); md != nil && md.State == metadata.LedgerClosed {
				c = append(c, l)
			}
		}
	}
	if len(c) == 0 {
		return
	}
	l := c[w.rng.IntN(len(c))]
	md, v := w.meta.read(l.id)
	var err error
	w.meta.do(func(ctx context.Context) { err = w.meta.drv.DeleteLedger(ctx, l.id, v) })
	w.logf("delete ledger %d (closed at %d): %s", l.id, md.LastEntryID, errText(err))
	if err != nil {
		return
	}
	l.deleted, l.deletedEnd, l.deletedMD = true, md.LastEntryID, md
	w.rec.deleted(l)
	w.stats.Deleted++
}

// addRecords is the world's recycler of writer records
// (ledger.AddRecords), shared by its writers as the client shares one
// over a sync.Pool, so the simulator runs the writers' recycling; a
// plain free list, the world being single-threaded.
func (w *world) addRecords() *ledger.AddRecords {
	if w.records == nil {
		var free []any
		w.records = &ledger.AddRecords{
			Get: func() any {
				if len(free) == 0 {
					return nil
				}
				r := free[len(free)-1]
				free[len(free)-1] = nil
				free = free[:len(free)-1]
				return r
			},
			Put: func(r any) { free = append(free, r) },
		}
	}
	return w.records
}
