package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// requestTimeout is how long a client waits for a bookie's answer before
// reporting ledger.ErrTimeout to its machine (Java's addEntryTimeout and
// readTimeout are seconds; the simulated network is fast).
const requestTimeout = 500 * time.Millisecond

// errConnectionLost is what a client's machine sees for a request whose
// connection was reset: an unknown outcome, never a negative.
var errConnectionLost = errors.New("sim: connection to bookie lost")

// ledgerRec is what the simulator knows about one ledger: its identity and
// what its writer asked and was told (the checkers' ground truth).
type ledgerRec struct {
	id       int64
	password []byte
	key      []byte
	dig      *digest.Digester
	q        quorumParams
	// policy is the ledger's placement (its ensembles, ensemble changes and
	// recovery replacements draw from it alone).
	policy placement.Policy
	writer *actor
	// payloads are the writer's payloads by entry id; acked the ids it
	// acknowledged, in order.
	payloads map[int64][]byte
	acked    []int64
	// readMax is the highest entry any reader was handed (-1: none).
	readMax int64
	// deleted: the ledger's metadata was deleted when it was closed at
	// deletedEnd, as deletedMD (the checks go on against those).
	deleted    bool
	deletedEnd int64
	deletedMD  *metadata.LedgerMetadata
	// recovering counts live recoverers (the liveness phase starts one when
	// none runs).
	recovering int
}

type quorumParams struct{ e, qw, qa int }

type actorKind uint8

const (
	kindWriter actorKind = iota
	kindRecoverer
	kindReader
)

// actor is a client: the shell around one ledger machine (a writer, a
// recovery, or a tailing reader's LAC reads and entry reads). Its machine's
// effects are carried out by the production executor (internal/ledgerexec),
// which builds the wire requests and turns the answers into events; the
// actor plays the part of internal/transport (it is the executor's
// Bookies: txn ids, answer matching, timeouts) and of the client's
// metadata driver (its Store, over the simulated metadata service).
type actor struct {
	w    *world
	name string
	kind actorKind
	led  *ledgerRec
	m    ledger.Machine
	x    *ledgerexec.Executor

	// rng is the client's own random stream (think times, its metadata
	// operations' delays and faults, its reader's choices).
	rng *rand.Rand

	pending map[uint64]*pendingReq
	nextTxn uint64
	// gen counts the machines the actor has run (setMachine): a request
	// carries the gen of the machine that sent it, and a failure delivered
	// after the actor moved to another machine (a reader's next round) is
	// dropped, never stepped into a machine that did not send it.
	gen uint64
	// crashed: the client process died; nothing reaches its machine any
	// more, but what it sent is still on the wire.
	crashed bool
	// finished: the machine has nothing more to do.
	finished bool
	// ticks steps the machine's Ticks on the world's clock (through
	// ledgerexec, as the client's loops do); nil when it wants none.
	ticks *ledgerexec.TickFunc

	// Writer.
	writer     *ledger.Writer
	window     int // adds in flight at most (1: a synchronous writer)
	inflight   int
	closeAsked bool
	// explicit: the writer names its entry ids (WriteAt), out of order
	// within its window (writerOpts); submitted are the ids it wrote.
	explicit  bool
	submitted map[int64]bool

	// Recovery: the metadata the shell last handed the machine, and the
	// first entry of the last fragment when the fence started (-1 before).
	rec    *ledger.Recovery
	mdSeen *metadata.LedgerMetadata
	// loseClose: the recovery dies right before its close CAS (a crash
	// between its last rewrite and the metadata write).
	loseClose   bool
	proposed    *metadata.LedgerMetadata
	snapshotKey int64

	// Reader.
	longPoll bool  // tails by long polls (else by polling the LAC)
	next     int64 // next entry to read
	rounds   int
	lac      int64
	// ropts is how the reader reads (readerOpts); sticky its sticky
	// ensemble index, moved on when that bookie fails a read.
	ropts  readerOpts
	sticky int
}

// pendingReq is one request in flight from an actor to a bookie: what the
// network, the bookie node, the checkers and the trace need to know of it,
// read off the request the executor built.
type pendingReq struct {
	txn      uint64
	ledgerID int64
	bookie   metadata.BookieID
	epoch    int
	op       wire.Op
	entryID  int64
	recovery bool
	fence    bool
	longPoll bool          // a long-poll read (entry -1, previousLAC, piggyback)
	wait     time.Duration // long polls: the timeOut the bookie may wait
	gen      uint64        // the actor's machine when it was sent
	payload  []byte        // adds: the entry's payload
	lac      int64         // adds: the piggybacked LAC
	desc     string
	// cb is the executor's callback: the answer, or the error standing
	// for it.
	cb func(*wire.Response, error)
}

func (a *actor) live() bool { return !a.crashed && !a.finished }

// setMachine makes m the actor's machine. Requests the previous machine
// sent are forgotten: answers to them are dropped, as are failures
// already scheduled for delivery (connectionLost).
//
// Its Ticks are stepped as the client's loops step them
// (ledgerexec.NewTickFunc on the world's clock: each one an event of the
// loop, the interval read again after each): a writer's quorum timeout, a
// read's speculative requests. Machines that want none (TickInterval 0,
// as every machine of the workloads before the writer options and
// speculative reads) arm nothing.
func (a *actor) setMachine(m ledger.Machine) {
	clear(a.pending)
	a.gen++
	a.m = m
	if a.ticks != nil {
		a.ticks.Stop()
		a.ticks = nil
	}
	if m.TickInterval() > 0 {
		a.ticks = ledgerexec.NewTickFunc(a.w.clock, m, a.tick)
	}
}

// tick steps one Tick into the machine.
func (a *actor) tick() {
	if !a.live() {
		a.ticks.Stop()
		return
	}
	a.w.stats.Ticks++
	if a.kind == kindWriter {
		a.w.logf("%s: tick", a.name)
		a.w.rec.tick(a)
	}
	a.stepMachine(ledger.Tick{})
}

func (w *world) newActor(kind actorKind, prefix string, l *ledgerRec) *actor {
	name := w.newName(prefix)
	key := w.newKey("actor")
	w.actorKeys[name] = key
	a := &actor{w: w, name: name, kind: kind, led: l, rng: w.stream("actor/" + key), pending: map[uint64]*pendingReq{}, snapshotKey: -1, lac: -1, sticky: -1}
	a.x = ledgerexec.New(ledgerexec.Config{LedgerID: l.id, Digester: l.dig, MasterKey: l.key, Bookies: a, Store: actorStore{a}, Emit: a.emit})
	w.actors = append(w.actors, a)
	return a
}

// emit takes an event from the executor: a metadata result goes through
// metadataResult, a bookie's answer straight to the machine.
func (a *actor) emit(ev ledger.Event) {
	switch ev.(type) {
	case ledger.MetadataRead, ledger.MetadataWritten:
		a.metadataResult(ev)
	default:
		a.stepMachine(ev)
	}
}

// stepMachine feeds ev to the machine and carries out its effects.
func (a *actor) stepMachine(ev ledger.Event) {
	if !a.live() {
		return
	}
	if r := a.w.rec; r != nil {
		prev := r.current
		r.current = a
		defer func() { r.current = prev }()
	}
	a.m.Step(ev)
	a.drain()
}

// drain carries out the machine's effects in order.
func (a *actor) drain() { a.carryOut(a.m.Ready()) }

// carryOut carries out effects, which the machine queued, in order.
func (a *actor) carryOut(effects []ledger.Effect) {
	w := a.w
	for _, eff := range effects {
		if !a.live() {
			return
		}
		switch eff := eff.(type) {
		case ledger.SendAdd:
			w.logf("%s: %s", a.name, eff)
			if eff.Recovery {
				w.check.recoveryAdd(a, eff.EntryID)
			}
			a.x.Do(eff)
		case ledger.SendRead:
			w.logf("%s: %s", a.name, eff)
			if eff.Fence && eff.EntryID == -1 && a.kind == kindRecoverer && a.snapshotKey < 0 && a.mdSeen != nil {
				a.snapshotKey = a.mdSeen.LastEnsemble().FirstEntryID
			}
			a.x.Do(eff)
		case ledger.SendReadLAC:
			w.logf("%s: %s", a.name, eff)
			a.x.Do(eff)
		case ledger.SendLongPoll:
			w.logf("%s: %s", a.name, eff)
			a.x.Do(eff)
		case ledger.LongPollComplete:
			w.logf("%s: %s", a.name, eff)
			a.readerLongPoll(eff)
		case ledger.WriteMetadata:
			if a.loseClose && eff.Metadata.State == metadata.LedgerClosed {
				w.logf("%s: crashes before its close CAS %s", a.name, ledger.FormatMetadata(eff.Metadata))
				w.rec.killBeforeClose(a)
				a.crashed = true
				a.led.recovering--
				return
			}
			w.logf("%s: %s", a.name, eff)
			a.proposed = eff.Metadata
			a.x.Do(eff)
		case ledger.ReadMetadata:
			w.logf("%s: %s", a.name, eff)
			a.x.Do(eff)
		case ledger.AddComplete:
			w.logf("%s: %s", a.name, eff)
			a.addComplete(eff)
		case ledger.CloseComplete:
			w.logf("%s: %s", a.name, eff)
			w.check.writerClosed(a, eff)
			a.finished = true
		case ledger.RecoveryComplete:
			w.logf("%s: %s", a.name, eff)
			a.led.recovering--
			a.finished = true
			if eff.Err == nil {
				w.stats.RecoveriesOK++
				w.check.recovered(a, eff)
			}
		case ledger.LACComplete:
			w.logf("%s: %s", a.name, eff)
			a.readerLAC(eff)
		case ledger.EntryComplete:
			a.readerEntry(eff)
		case ledger.ReadComplete:
			w.logf("%s: %s", a.name, eff)
			a.readerDone(eff)
		case ledger.SendBatchRead:
			w.logf("%s: %s", a.name, eff)
			a.x.Do(eff)
		case ledger.BatchReadComplete:
			w.logf("%s: %s", a.name, eff)
			a.readerBatchDone(eff)
		case ledger.BookieSlow:
			w.logf("%s: %s", a.name, eff)
			w.stats.Speculative++
			a.x.Do(eff)
		default:
			// Effects no simulated workload asks for (forces, explicit LAC).
			w.logf("%s: %s", a.name, eff)
			if !a.x.Do(eff) {
				panic(fmt.Sprintf("sim: completion %T has no simulated application", eff))
			}
		}
	}
}

// Send is the actor's side of ledgerexec.Bookies: it reads what the
// network, the bookies and the checkers need off req into a pendingReq,
// stamps a txn id, and sends a copy of req (the executor reuses its own)
// as v3, except BATCH_READ_ENTRY, which exists only in v2: a client with
// UseV2WireProtocol sends it (and the simulated readers that batch-read
// play such a client; its other requests are v3 here, which the bookie
// serves the same way, as it handles each request on its own).
func (a *actor) Send(bookie string, _ int64, req *wire.Request, cb func(*wire.Response, error)) {
	r := *req
	r.Add.Body = slices.Clone(req.Add.Body)
	a.nextTxn++
	p := describe(a.led, metadata.BookieID(bookie), &r)
	p.txn, p.cb, p.gen = a.nextTxn, cb, a.gen
	r.Protocol = wire.ProtocolV3
	r.Header.Version, r.Header.TxnID = wire.VersionThree, p.txn
	if r.Header.Op == wire.OpBatchReadEntry {
		r.Protocol, r.Header.Version = wire.ProtocolV2, 2
	}
	r.Header.HasPriority = r.Header.Priority != 0
	a.send(p, &r)
}

// SendTagged is the actor's side of ledgerexec.TaggedBookies: Send, with
// the answer handed to h with tag, so the simulator runs the executor's
// tagged add path as the client does.
func (a *actor) SendTagged(bookie string, ledgerID int64, req *wire.Request, h ledgerexec.ResponseHandler, tag int64) {
	a.Send(bookie, ledgerID, req, func(resp *wire.Response, err error) { h.HandleResponse(bookie, tag, resp, err) })
}

// describe returns the pendingReq of req, sent to b about ledger l.
func describe(l *ledgerRec, b metadata.BookieID, req *wire.Request) *pendingReq {
	p := &pendingReq{ledgerID: l.id, bookie: b, op: req.Header.Op, entryID: -1}
	switch req.Header.Op {
	case wire.OpAddEntry:
		p.entryID = req.Add.EntryID
		p.recovery = req.Add.Flag == wire.AddFlagRecoveryAdd
		kind := "add"
		if p.recovery {
			kind = "recovery-add"
		}
		p.desc = fmt.Sprintf("%s L%d e%d", kind, l.id, p.entryID)
		e, err := l.dig.VerifyEntry(req.Add.Body, l.id, p.entryID)
		if err != nil {
			panic(fmt.Sprintf("sim: the executor built an add body that does not verify: %v", err))
		}
		p.payload, p.lac = e.Payload, e.LAC
	case wire.OpReadEntry:
		p.entryID = req.Read.EntryID
		if req.Read.HasPreviousLAC {
			// A long poll (v3 only): the client's timeout for it is its
			// timeOut plus the usual request timeout.
			p.longPoll, p.wait = true, time.Duration(req.Read.TimeoutMs)*time.Millisecond
			p.desc = fmt.Sprintf("long-poll L%d prev=%d", l.id, req.Read.PreviousLAC)
			break
		}
		p.fence = req.Read.Flag == wire.ReadFlagFenceLedger
		kind := "read"
		if p.fence {
			kind = "fence-read"
		}
		p.desc = fmt.Sprintf("%s L%d e%d", kind, l.id, p.entryID)
	case wire.OpReadLAC:
		p.desc = fmt.Sprintf("read-lac L%d", l.id)
	case wire.OpBatchReadEntry:
		p.entryID = req.BatchRead.StartEntryID
		p.desc = fmt.Sprintf("batch-read L%d e%d n=%d", l.id, p.entryID, req.BatchRead.MaxCount)
	default:
		p.desc = fmt.Sprintf("%s L%d", req.Header.Op, l.id)
	}
	return p
}

// send registers p, times it out, and puts req on the network.
func (a *actor) send(p *pendingReq, req *wire.Request) {
	w := a.w
	a.pending[p.txn] = p
	n := w.bookie(p.bookie)
	w.after(requestTimeout+p.wait, func() {
		if a.pending[p.txn] == p {
			delete(a.pending, p.txn)
			w.logf("%s: %s to %s timed out", a.name, p.desc, p.bookie)
			w.rec.fail(a, p, p.desc+" to "+string(p.bookie)+" timed out")
			p.cb(nil, ledger.ErrTimeout)
		}
	})
	w.net.sendRequest(a, n, p, req)
}

// receive is an answer's arrival; answers to requests already timed out
// or failed are dropped, as a transport drops unmatched txn ids.
func (a *actor) receive(txn uint64, resp *wire.Response) {
	p := a.pending[txn]
	if p == nil {
		return
	}
	delete(a.pending, txn)
	a.w.rec.answer(a, p)
	p.cb(resp, nil)
}

// refused fails request p at once, as a refused connection does (the
// bookie never saw it).
func (a *actor) refused(p *pendingReq) {
	if a.pending[p.txn] != p {
		return
	}
	delete(a.pending, p.txn)
	a.w.rec.fail(a, p, p.desc+" to "+string(p.bookie)+": connection refused")
	p.cb(nil, errConnectionLost)
}

// connectionLost fails every request pending on bookie b, in txn order,
// as soon as the loop gets to it; failures of requests whose machine the
// actor has replaced by then are dropped (setMachine).
func (a *actor) connectionLost(b metadata.BookieID) {
	var lost []*pendingReq
	for _, txn := range sortedKeys(a.pending) {
		if p := a.pending[txn]; p.bookie == b {
			lost = append(lost, p)
			delete(a.pending, txn)
		}
	}
	if len(lost) == 0 {
		return
	}
	a.w.after(0, func() {
		for _, p := range lost {
			a.w.logf("%s: %s to %s: connection lost", a.name, p.desc, p.bookie)
			a.w.rec.fail(a, p, p.desc+" to "+string(p.bookie)+": connection lost")
			if p.gen != a.gen {
				continue // its machine is gone: nothing waits for it
			}
			p.cb(nil, errConnectionLost)
		}
	})
}

// respDesc is the trace word of a bookie's answer to p.
func (p *pendingReq) respDesc(resp *wire.Response) string {
	st := statusOfResponse(resp)
	desc := st.String()
	switch {
	case st != wire.StatusOK || p.op != wire.OpReadEntry:
	case p.longPoll && resp.Read.HasBody && resp.Read.EntryID >= 0:
		desc = fmt.Sprintf("%s (lac=%d, e%d)", desc, resp.Read.MaxLAC, resp.Read.EntryID)
	case p.longPoll:
		desc = fmt.Sprintf("%s (lac=%d)", desc, resp.Read.MaxLAC)
	case resp.Read.HasBody:
		if _, id, _, _, err := digest.ParseEntryHeader(resp.Read.Body); err == nil {
			desc = fmt.Sprintf("%s (e%d)", desc, id)
		}
	}
	if st == wire.StatusOK && p.op == wire.OpBatchReadEntry {
		desc = fmt.Sprintf("%s (%d entries)", desc, len(resp.BatchRead.Entries))
	}
	return desc
}

// cloneResponse copies what the executor reads of a bookie's answer: the
// bookie reuses its response once Respond returns, and the answer is
// delivered later.
func cloneResponse(resp *wire.Response) *wire.Response {
	r := *resp
	r.Read.Body = slices.Clone(resp.Read.Body)
	r.ReadLAC.LACBody = slices.Clone(resp.ReadLAC.LACBody)
	r.ReadLAC.LastEntryBody = slices.Clone(resp.ReadLAC.LastEntryBody)
	r.BatchRead.Entries = make([][]byte, len(resp.BatchRead.Entries))
	for i, body := range resp.BatchRead.Entries {
		r.BatchRead.Entries[i] = slices.Clone(body)
	}
	return &r
}

// metadataResult delivers a metadata operation's result, keeping track of
// the metadata a recovery holds (for the NoInvalidFragments checker).
func (a *actor) metadataResult(ev ledger.Event) {
	switch ev := ev.(type) {
	case ledger.MetadataRead:
		if ev.Err == nil {
			a.mdSeen = ev.Metadata
		}
	case ledger.MetadataWritten:
		if ev.Err == nil {
			a.mdSeen = a.proposed
		}
	}
	a.w.rec.metaResult(a)
	a.stepMachine(ev)
}

func sortedKeys[K interface{ ~uint64 | ~int64 }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// actorStore is the actor's side of ledgerexec.Store: the simulated
// metadata service, with the actor's delays and faults.
type actorStore struct{ a *actor }

func (s actorStore) WriteLedger(_ int64, md *metadata.LedgerMetadata, expected metadata.Version, done func(metadata.Version, error)) {
	s.a.w.meta.write(s.a, md, expected, done)
}

func (s actorStore) ReadLedger(_ int64, done func(*metadata.LedgerMetadata, metadata.Version, error)) {
	s.a.w.meta.readFor(s.a, done)
}
