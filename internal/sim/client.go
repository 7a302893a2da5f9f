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

// machine is the Step/Ready face every ledger machine shares.
type machine interface {
	Step(ledger.Event)
	Ready() []ledger.Effect
}

// actor is a client: the shell around one ledger machine (a writer, a
// recovery, or a tailing reader's LAC reads and entry reads). It plays the
// part of client/ and internal/transport: builds wire requests, matches
// answers by txn id, times requests out and carries metadata operations.
type actor struct {
	w    *world
	name string
	kind actorKind
	led  *ledgerRec
	m    machine

	// rng is the client's own random stream (think times, its metadata
	// operations' delays and faults, its reader's choices).
	rng *rand.Rand

	pending map[uint64]*pendingReq
	nextTxn uint64
	// crashed: the client process died; nothing reaches its machine any
	// more, but what it sent is still on the wire.
	crashed bool
	// finished: the machine has nothing more to do.
	finished bool

	// Writer.
	writer     *ledger.Writer
	window     int // adds in flight at most (1: a synchronous writer)
	inflight   int
	closeAsked bool

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
}

// pendingReq is one request in flight from an actor to a bookie.
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
	payload  []byte        // adds: the entry's payload
	lac      int64         // adds: the piggybacked LAC
	desc     string
}

func (a *actor) live() bool { return !a.crashed && !a.finished }

func (w *world) newActor(kind actorKind, prefix string, l *ledgerRec) *actor {
	name := w.newName(prefix)
	key := w.newKey("actor")
	w.actorKeys[name] = key
	a := &actor{w: w, name: name, kind: kind, led: l, rng: w.stream("actor/" + key), pending: map[uint64]*pendingReq{}, snapshotKey: -1, lac: -1}
	w.actors = append(w.actors, a)
	return a
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
func (a *actor) drain() {
	w := a.w
	for _, eff := range a.m.Ready() {
		if !a.live() {
			return
		}
		switch eff := eff.(type) {
		case ledger.SendAdd:
			w.logf("%s: %s", a.name, eff)
			if eff.Recovery {
				w.check.recoveryAdd(a, eff.EntryID)
			}
			for _, b := range eff.Bookies {
				a.sendAdd(b, eff)
			}
		case ledger.SendRead:
			w.logf("%s: %s", a.name, eff)
			if eff.Fence && eff.EntryID == -1 && a.kind == kindRecoverer && a.snapshotKey < 0 && a.mdSeen != nil {
				a.snapshotKey = a.mdSeen.LastEnsemble().FirstEntryID
			}
			for _, b := range eff.Bookies {
				a.sendRead(b, eff)
			}
		case ledger.SendReadLAC:
			w.logf("%s: %s", a.name, eff)
			for _, b := range eff.Bookies {
				a.sendReadLAC(b)
			}
		case ledger.SendLongPoll:
			w.logf("%s: %s", a.name, eff)
			for _, b := range eff.Bookies {
				a.sendLongPoll(b, eff)
			}
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
			w.meta.submit(a, eff)
		case ledger.ReadMetadata:
			w.logf("%s: %s", a.name, eff)
			w.meta.submit(a, eff)
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
		default:
			panic(fmt.Sprintf("sim: unknown effect %T", eff))
		}
	}
}

func (a *actor) newPending(b metadata.BookieID, op wire.Op, entryID int64, desc string) *pendingReq {
	a.nextTxn++
	return &pendingReq{txn: a.nextTxn, ledgerID: a.led.id, bookie: b, op: op, entryID: entryID, desc: desc}
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
			a.stepMachine(p.failure(ledger.ErrTimeout))
		}
	})
	w.net.sendRequest(a, n, p, req)
}

func (a *actor) sendAdd(b metadata.BookieID, eff ledger.SendAdd) {
	l := a.led
	kind := "add"
	if eff.Recovery {
		kind = "recovery-add"
	}
	p := a.newPending(b, wire.OpAddEntry, eff.EntryID, fmt.Sprintf("%s L%d e%d", kind, l.id, eff.EntryID))
	p.recovery, p.payload, p.lac = eff.Recovery, eff.Payload, eff.LAC
	body := l.dig.AppendEntry(nil, l.id, eff.EntryID, eff.LAC, eff.Length, eff.Payload)
	req := &wire.Request{Protocol: wire.ProtocolV3, Header: wire.Header{Version: wire.VersionThree, Op: wire.OpAddEntry, TxnID: p.txn}, Has: wire.BodyAdd}
	req.Add = wire.AddRequest{LedgerID: l.id, EntryID: eff.EntryID, MasterKey: l.key, Body: body}
	if eff.Recovery {
		req.Add.Flag = wire.AddFlagRecoveryAdd
		req.Header.Priority, req.Header.HasPriority = wire.HighPriority, true
	}
	a.send(p, req)
}

func (a *actor) sendRead(b metadata.BookieID, eff ledger.SendRead) {
	l := a.led
	kind := "read"
	if eff.Fence {
		kind = "fence-read"
	}
	p := a.newPending(b, wire.OpReadEntry, eff.EntryID, fmt.Sprintf("%s L%d e%d", kind, l.id, eff.EntryID))
	p.fence = eff.Fence
	req := &wire.Request{Protocol: wire.ProtocolV3, Header: wire.Header{Version: wire.VersionThree, Op: wire.OpReadEntry, TxnID: p.txn}, Has: wire.BodyRead}
	req.Read = wire.ReadRequest{LedgerID: l.id, EntryID: eff.EntryID}
	if eff.Fence {
		req.Read.Flag = wire.ReadFlagFenceLedger
		req.Read.MasterKey, req.Read.HasMasterKey = l.key, true
		req.Header.Priority, req.Header.HasPriority = wire.HighPriority, true
	}
	a.send(p, req)
}

// sendLongPoll sends a long-poll read with entry piggyback (v3 only): the
// client's timeout for it is its timeOut plus the usual request timeout.
func (a *actor) sendLongPoll(b metadata.BookieID, eff ledger.SendLongPoll) {
	l := a.led
	p := a.newPending(b, wire.OpReadEntry, -1, fmt.Sprintf("long-poll L%d prev=%d", l.id, eff.PreviousLAC))
	p.longPoll, p.wait = true, time.Duration(eff.TimeoutMs)*time.Millisecond
	req := &wire.Request{Protocol: wire.ProtocolV3, Header: wire.Header{Version: wire.VersionThree, Op: wire.OpReadEntry, TxnID: p.txn}, Has: wire.BodyRead}
	req.Read = wire.ReadRequest{
		LedgerID: l.id, EntryID: -1, Flag: wire.ReadFlagEntryPiggyback,
		PreviousLAC: eff.PreviousLAC, HasPreviousLAC: true,
		TimeoutMs: eff.TimeoutMs, HasTimeout: true,
	}
	a.send(p, req)
}

func (a *actor) sendReadLAC(b metadata.BookieID) {
	l := a.led
	p := a.newPending(b, wire.OpReadLAC, -1, fmt.Sprintf("read-lac L%d", l.id))
	req := &wire.Request{Protocol: wire.ProtocolV3, Header: wire.Header{Version: wire.VersionThree, Op: wire.OpReadLAC, TxnID: p.txn}, Has: wire.BodyReadLAC}
	req.ReadLACLedgerID = l.id
	a.send(p, req)
}

// receive is an answer's arrival; answers to requests already timed out
// or failed are dropped, as a transport drops unmatched txn ids.
func (a *actor) receive(txn uint64, ev ledger.Event) {
	p := a.pending[txn]
	if p == nil {
		return
	}
	delete(a.pending, txn)
	a.w.rec.answer(a, p)
	a.stepMachine(ev)
}

// refused fails request p at once, as a refused connection does (the
// bookie never saw it).
func (a *actor) refused(p *pendingReq) {
	if a.pending[p.txn] != p {
		return
	}
	delete(a.pending, p.txn)
	a.w.rec.fail(a, p, p.desc+" to "+string(p.bookie)+": connection refused")
	a.stepMachine(p.failure(errConnectionLost))
}

// connectionLost fails every request pending on bookie b, in txn order,
// as soon as the loop gets to it.
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
			a.stepMachine(p.failure(errConnectionLost))
		}
	})
}

// failure is the event for p failing with err (no answer).
func (p *pendingReq) failure(err error) ledger.Event {
	switch p.op {
	case wire.OpAddEntry:
		return ledger.AddResponse{Bookie: p.bookie, EntryID: p.entryID, Err: err}
	case wire.OpReadLAC:
		return ledger.ReadLACResponse{Bookie: p.bookie, Err: err}
	}
	if p.longPoll {
		return ledger.LongPollResponse{Bookie: p.bookie, EntryID: -1, Err: err}
	}
	return ledger.ReadResponse{Bookie: p.bookie, EntryID: p.entryID, Err: err}
}

// toEvent turns a bookie's answer into the machine's event (copying the
// bodies: the bookie reuses its response) and a trace word.
func (p *pendingReq) toEvent(b metadata.BookieID, resp *wire.Response) (ledger.Event, string) {
	st := statusOfResponse(resp)
	err := st.Err()
	desc := st.String()
	switch p.op {
	case wire.OpAddEntry:
		return ledger.AddResponse{Bookie: b, EntryID: p.entryID, Err: err}, desc
	case wire.OpReadLAC:
		ev := ledger.ReadLACResponse{Bookie: b, Err: err}
		if err == nil {
			if resp.ReadLAC.HasLACBody {
				ev.LACBody = slices.Clone(resp.ReadLAC.LACBody)
			}
			if resp.ReadLAC.HasLastEntryBody {
				ev.LastEntryBody = slices.Clone(resp.ReadLAC.LastEntryBody)
			}
		}
		return ev, desc
	}
	if p.longPoll {
		ev := ledger.LongPollResponse{Bookie: b, EntryID: -1, Err: err}
		if err == nil {
			ev.MaxLAC, ev.HasMaxLAC = resp.Read.MaxLAC, resp.Read.HasMaxLAC
			if resp.Read.HasBody && resp.Read.EntryID >= 0 {
				ev.EntryID, ev.Body = resp.Read.EntryID, slices.Clone(resp.Read.Body)
				desc = fmt.Sprintf("%s (lac=%d, e%d)", desc, ev.MaxLAC, ev.EntryID)
			} else {
				desc = fmt.Sprintf("%s (lac=%d)", desc, ev.MaxLAC)
			}
		}
		return ev, desc
	}
	ev := ledger.ReadResponse{Bookie: b, EntryID: p.entryID, Err: err}
	if err == nil && resp.Read.HasBody {
		ev.Body = slices.Clone(resp.Read.Body)
		if _, id, _, _, perr := digest.ParseEntryHeader(ev.Body); perr == nil {
			desc = fmt.Sprintf("%s (e%d)", desc, id)
		}
	}
	return ev, desc
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
