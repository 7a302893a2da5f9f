package ledger

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/foliodb/folio/internal/metadata"
)

// TestInteraction runs the scenario scripts in testdata/*.txt against env
// (etcd-io/raft's interaction tests). The expected output is the trace of
// deliveries and effects; regenerate with -rewrite and review the diff.
//
// Commands:
//
//	bookies b1 b2 …                      create bookies (all writable)
//	writable b1 b2 …                     set the writable set, tell every machine
//	create E=3 Qw=2 Qa=2 ensemble=(b1,b2,b3)   OPEN ledger metadata in the store
//	writer w1 [quorum-timeout=S] [delay] [max-changes=N] [fault-domains]
//	                                     a Writer over the stored metadata; AddQuorumTimeout S
//	                                     seconds (ticks S/4 s apart), DelayEnsembleChange,
//	                                     MaxEnsembleChanges (-1: none), AckedAdhering with the
//	                                     rack rule of the racks command
//	racks b1=/r/a b2=/r/a … [min=N]      bookie racks (after create); the rack-aware
//	                                     fault-domain rule asks min(Qw, N) racks (default 2)
//	tick w1 [n=N]                        step N Ticks
//	append w1 [n=1] [sync] [quiet]       append n entries (payload "w1:<id>"); sync: stabilize after each; quiet: no trace
//	writer w1 explicit                   … taking explicit entry ids (WriteAt; Append fails)
//	write-at w1 ids=(3,0,1)              WriteAt each id in turn (payload "w1:<id>")
//	close w1
//	deliver [from=w1] [to=b1] [e=3] [kind=add|read|read-lac] [n=N] [err=EIO|EFENCED|ENOENTRY|timeout|…] [drop-reply] [corrupt] [hold]
//	                                     deliver matching in-flight requests, FIFO; hold: the
//	                                     bookie acts now, its answer waits for reply
//	reply [from=w1] [to=b1] [e=3] [kind=…] [n=N] [err=timeout|…]
//	                                     hand held answers to their machines, FIFO; err: the
//	                                     answer is lost (or replaced) on its way
//	crash b1 / revive b1                 a down bookie answers nothing (timeouts)
//	meta [n=N] [from=r1] [hold] [err=unavailable|ambiguous]
//	                                     run queued metadata operations, FIFO; hold: the result
//	                                     waits for meta-reply; err: the store fails before the
//	                                     operation, or after a write took effect
//	meta-reply [from=r1] [n=N]           hand held metadata results to their machines, FIFO
//	place b4                             the next replacement placement chooses is b4
//	store-set state=IN_RECOVERY|CLOSED [last=N] [len=N]   a foreign metadata write
//	store-bump                           a foreign write changing nothing we care about
//	store                                print the stored metadata
//	read-lac c1 [fence] [rpc]            a ReadLAC over the stored metadata
//	read c1 first=0 last=3               a Read
//	recover r1 [read-ahead=N] [no-fence-reads] [start-at-lac] [piggyback-recovery-lac] [fault-domains]
//	kill r1 [drop] [drop-meta]           the machine dies: answers to it are lost; drop: so are
//	                                     its requests still in flight and its queued metadata
//	                                     operations; drop-meta: only the latter
//	stabilize                            deliver everything until quiet
//	status w1                            writer state
//	bookie-state                         what each bookie stores
//	check                                invariants of a closed ledger
//	lacs                                 no stored entry carries a LAC past what reached ack quorum
//	fragments                            no recovery rewrote an entry below the stored last fragment
//	inflight                             list requests in flight
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := newEnv(1, true)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			e.out.Reset()
			e.run(t, d)
			return e.out.String()
		})
	})
}

func (e *env) run(t *testing.T, d *datadriven.TestData) {
	name := ""
	if len(d.CmdArgs) > 0 && len(d.CmdArgs[0].Vals) == 0 {
		name = d.CmdArgs[0].Key
	}
	switch d.Cmd {
	case "bookies":
		for _, a := range d.CmdArgs {
			e.addBookies(metadata.BookieID(a.Key))
		}
	case "writable":
		e.writable = nil
		for _, a := range d.CmdArgs {
			e.writable = append(e.writable, metadata.BookieID(a.Key))
		}
		for _, n := range e.names {
			if m, ok := e.machines[n]; ok { // not killed
				m.Step(WritableBookies{Bookies: e.writable})
				e.drain(n)
			}
		}
	case "create":
		var ens []metadata.BookieID
		for _, v := range argVals(d, "ensemble") {
			ens = append(ens, metadata.BookieID(v))
		}
		e.create(argInt(t, d, "E", 3), argInt(t, d, "Qw", 2), argInt(t, d, "Qa", 2), ens)
		e.printf("%s\n", FormatMetadata(e.store.md))
	case "writer":
		w, err := NewWriter(WriterConfig{LedgerID: e.ledgerID, Metadata: e.store.md, Version: e.store.version, Placement: e.policy, Writable: e.writable,
			AddQuorumTimeout: time.Duration(argInt(t, d, "quorum-timeout", 0)) * time.Second, DelayEnsembleChange: d.HasArg("delay"),
			MaxEnsembleChanges: argInt(t, d, "max-changes", 0), ExplicitIDs: d.HasArg("explicit"), AckedAdhering: e.ruleArg(t, d, name),
			AddRecords: e.records.records()})
		if err != nil {
			t.Fatal(err)
		}
		e.add(name, w)
	case "racks":
		racks := map[metadata.BookieID]string{}
		for _, a := range d.CmdArgs {
			if a.Key != "min" {
				racks[metadata.BookieID(a.Key)] = a.Vals[0]
			}
		}
		e.setRacks(racks, argInt(t, d, "min", 0))
	case "append":
		w := e.machines[name].(*Writer)
		out := e.out
		if d.HasArg("quiet") {
			e.out = nil
		}
		for range argInt(t, d, "n", 1) {
			id, err := w.Append([]byte(fmt.Sprintf("%s:%d", name, w.LastAddPushed()+1)))
			if err != nil {
				e.printf("append: %v\n", err)
				continue
			}
			e.printf("append e%d\n", id)
			if d.HasArg("sync") {
				e.drain(name)
				e.stabilize()
			}
		}
		e.drain(name)
		e.out = out
		if d.HasArg("quiet") {
			e.printf("lac=%d\n", w.LastAddConfirmed())
		}
	case "write-at":
		e.runWriteAt(t, d, name)
	case "close":
		e.machines[name].(*Writer).Close()
		e.drain(name)
	case "tick":
		for i := range argInt(t, d, "n", 1) {
			e.printf("%s <- tick %d\n", name, i+1)
			e.machines[name].Step(Tick{})
			e.drain(name)
		}
	case "deliver":
		e.runDeliver(t, d)
	case "crash", "revive":
		e.bookies[metadata.BookieID(name)].down = d.Cmd == "crash"
	case "meta":
		e.runMeta(t, d)
	case "meta-reply":
		from, n := argStr(d, "from", ""), argInt(t, d, "n", 0)
		var got, rest []*heldMeta
		for _, h := range e.metaHeld {
			if (n <= 0 || len(got) < n) && (from == "" || h.from == from) {
				got = append(got, h)
			} else {
				rest = append(rest, h)
			}
		}
		e.metaHeld = rest
		if len(got) == 0 {
			e.printf("nothing to hand over\n")
		}
		for _, h := range got {
			e.printf("%s <- metadata result\n", h.from)
			e.handMeta(h.from, h.ev)
		}
	case "reply":
		e.runReply(t, d)
	case "place":
		e.placed.queue = append(e.placed.queue, metadata.BookieID(name))
	case "fragments":
		if len(e.badRewrites) == 0 {
			e.printf("ok\n")
		}
		for _, b := range e.badRewrites {
			e.printf("violation: %s\n", b)
		}
	case "lacs":
		bad := e.checkLACs()
		if len(bad) == 0 {
			e.printf("ok\n")
		}
		for _, b := range bad {
			e.printf("violation: %s\n", b)
		}
	case "store-set":
		md := e.store.md.Clone()
		switch s := argStr(d, "state", ""); s {
		case "IN_RECOVERY":
			md.State = metadata.LedgerInRecovery
		case "CLOSED":
			md.State = metadata.LedgerClosed
			md.LastEntryID = int64(argInt(t, d, "last", -1))
			md.Length = int64(argInt(t, d, "len", 0))
		default:
			t.Fatalf("store-set: state %q", s)
		}
		e.store.md, e.store.version = md, e.store.version+1
		e.printf("store v%d: %s\n", e.store.version, FormatMetadata(md))
	case "store-bump":
		e.store.version++
		e.printf("store v%d: %s\n", e.store.version, FormatMetadata(e.store.md))
	case "store":
		e.printf("store v%d: %s\n", e.store.version, FormatMetadata(e.store.md))
	case "read-lac":
		r := NewReadLAC(ReadLACConfig{LedgerID: e.ledgerID, Metadata: e.store.md, Verifier: e.dig, Fence: d.HasArg("fence"), UseReadLAC: d.HasArg("rpc")})
		e.add(name, r)
		r.Start()
		e.drain(name)
	case "read":
		r, err := NewRead(ReadConfig{LedgerID: e.ledgerID, Metadata: e.store.md, Verifier: e.dig,
			First: int64(argInt(t, d, "first", 0)), Last: int64(argInt(t, d, "last", 0))})
		if err != nil {
			t.Fatal(err)
		}
		e.add(name, r)
		r.Start()
		e.drain(name)
	case "recover":
		r := NewRecovery(RecoveryConfig{LedgerID: e.ledgerID, Metadata: e.store.md, Version: e.store.version, Verifier: e.dig,
			Placement: e.policy, Writable: e.writable, ReadAhead: argInt(t, d, "read-ahead", 1), AckedAdhering: e.ruleArg(t, d, name),
			Unsafe: UnsafeKnobs{NoFenceOnRecoveryReads: d.HasArg("no-fence-reads"), StartAtLACOnly: d.HasArg("start-at-lac"),
				PiggybackRecoveryLAC: d.HasArg("piggyback-recovery-lac")}})
		e.add(name, r)
		r.Start()
		e.drain(name)
	case "kill":
		e.kill(name, d.HasArg("drop"), d.HasArg("drop-meta"))
	case "stabilize":
		e.stabilize()
	case "status":
		w := e.machines[name].(*Writer)
		md, v := w.Metadata()
		e.printf("lac=%d pushed=%d len=%d err=%s pending=%s\n", w.LastAddConfirmed(), w.LastAddPushed(), w.Length(), errString(w.Err()), w.pendingString())
		e.printf("metadata v%d: %s\n", v, FormatMetadata(md))
	case "bookie-state":
		e.printf("%s", e.bookieState())
	case "check":
		bad := append(e.checkClosed(), e.violations...)
		if len(bad) == 0 {
			e.printf("ok\n")
		}
		for _, b := range bad {
			e.printf("violation: %s\n", b)
		}
	case "inflight":
		for _, m := range e.inflight {
			e.printf("%s -> %s: %s\n", m.from, m.to, m.eff)
		}
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
}

func (e *env) runDeliver(t *testing.T, d *datadriven.TestData) {
	match := messageFilter(t, d)
	injected := injectedErr(t, d)
	msgs := e.take(match, argInt(t, d, "n", 0))
	if len(msgs) == 0 {
		e.printf("nothing to deliver\n")
	}
	for _, m := range msgs {
		if d.HasArg("hold") {
			e.hold(m, injected)
			continue
		}
		e.deliverOpt(m, injected, d.HasArg("drop-reply"), d.HasArg("corrupt"))
	}
}

// runReply hands held answers matching the command's filter to their
// machines; err= replaces the answer (lost on its way back: timeout).
func (e *env) runReply(t *testing.T, d *datadriven.TestData) {
	match := messageFilter(t, d)
	injected := injectedErr(t, d)
	n := argInt(t, d, "n", 0)
	var got, rest []*heldReply
	for _, h := range e.held {
		if (n <= 0 || len(got) < n) && match(h.msg) {
			got = append(got, h)
		} else {
			rest = append(rest, h)
		}
	}
	e.held = rest
	if len(got) == 0 {
		e.printf("nothing to hand over\n")
	}
	for _, h := range got {
		ev := h.ev
		if injected != nil {
			ev = withErr(ev, injected)
		}
		e.printf("%s <- %s %s: %s\n", h.msg.from, h.msg.to, h.what, errString(errOf(ev)))
		e.hand(h.msg.from, ev)
	}
}

// runMeta runs queued metadata operations matching from=, FIFO, with an
// injected fault (err=unavailable|ambiguous); hold keeps their results
// for meta-reply.
func (e *env) runMeta(t *testing.T, d *datadriven.TestData) {
	from := argStr(d, "from", "")
	var fault error
	switch s := argStr(d, "err", ""); s {
	case "":
	case "unavailable":
		fault = errMetaUnavailable
	case "ambiguous":
		fault = errMetaAmbiguous
	default:
		t.Fatalf("meta: unknown err %q (unavailable, ambiguous)", s)
	}
	n := argInt(t, d, "n", len(e.metaQ))
	var got, rest []*metaReq
	for _, r := range e.metaQ {
		if len(got) < n && (from == "" || r.from == from) {
			got = append(got, r)
		} else {
			rest = append(rest, r)
		}
	}
	e.metaQ = rest
	if len(got) == 0 && from != "" {
		e.printf("no metadata operation of %s queued\n", from)
	}
	for _, r := range got {
		ev := e.applyMeta(r, fault)
		if d.HasArg("hold") {
			e.metaHeld = append(e.metaHeld, &heldMeta{from: r.from, ev: ev})
			continue
		}
		e.handMeta(r.from, ev)
	}
}

// messageFilter is the from=, to=, kind= and e= filter of deliver and
// reply.
func messageFilter(t *testing.T, d *datadriven.TestData) func(*message) bool {
	from, to, kind := argStr(d, "from", ""), argStr(d, "to", ""), argStr(d, "kind", "")
	entry, hasEntry := int64(0), d.HasArg("e")
	if hasEntry {
		entry = int64(argInt(t, d, "e", 0))
	}
	return func(m *message) bool {
		if from != "" && m.from != from || to != "" && string(m.to) != to {
			return false
		}
		var k string
		var id int64
		switch eff := m.eff.(type) {
		case SendAdd:
			k, id = "add", eff.EntryID
		case SendRead:
			k, id = "read", eff.EntryID
		case SendReadLAC:
			k, id = "read-lac", -1
		}
		return (kind == "" || kind == k) && (!hasEntry || id == entry)
	}
}

// injectedErr is the err= of deliver and reply (nil without one).
func injectedErr(t *testing.T, d *datadriven.TestData) error {
	s := argStr(d, "err", "")
	if s == "" {
		return nil
	}
	err, ok := errInjected[s]
	if !ok {
		t.Fatalf("unknown err %q", s)
	}
	return err
}

func (w *Writer) pendingString() string {
	var parts []string
	for _, op := range w.p.pending {
		var acked []string
		for pos, ok := range op.acked {
			if ok {
				acked = append(acked, string(w.p.ensemble[w.q.WriteSetIndex(op.entryID, pos)]))
			}
		}
		parts = append(parts, fmt.Sprintf("e%d{%s}", op.entryID, strings.Join(acked, ",")))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ruleArg is the fault-domain rule when d has fault-domains (and marks
// machine name as ruled), else nil.
func (e *env) ruleArg(t *testing.T, d *datadriven.TestData, name string) func([]metadata.BookieID) bool {
	if !d.HasArg("fault-domains") {
		return nil
	}
	if e.rule == nil {
		t.Fatal("fault-domains needs a racks command first")
	}
	e.ruled[name] = true
	return e.rule
}

func argVals(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

func argStr(d *datadriven.TestData, key, def string) string {
	if v := argVals(d, key); len(v) > 0 {
		return v[0]
	}
	return def
}

func argInt(t *testing.T, d *datadriven.TestData, key string, def int) int {
	v := argVals(d, key)
	if len(v) == 0 {
		return def
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return n
}
