package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// env is a small deterministic world for the machines: simulated bookies
// with real add/read/fence semantics, a metadata store with CAS, and a
// network that holds every request until the test delivers it. The
// datadriven interaction tests and the randomized property test both drive
// it; it plays the part of the client shell and the servers.
type env struct {
	ledgerID int64
	// records recycles the writers' add records (a free list shared by
	// every writer of the env, as the client shares one pool), so the
	// scripted and property tests run with recycling on.
	records  freeList
	dig      *digest.Digester
	bookies  map[metadata.BookieID]*simBookie
	order    []metadata.BookieID
	writable []metadata.BookieID
	policy   placement.Policy

	store struct {
		md      *metadata.LedgerMetadata
		version metadata.Version
	}

	machines map[string]machine
	names    []string
	inflight []*message
	metaQ    []*metaReq
	// held are answers given by bookies and not yet handed to their
	// machines; metaHeld the same for metadata operations.
	held     []*heldReply
	metaHeld []*heldMeta
	// placed are the bookies the next ReplaceBookie calls return (place).
	placed *scriptedPolicy

	// acked records, per writer, the entries it acknowledged; violations
	// collects broken invariants found on the way.
	acked      map[string][]int64
	violations []string
	// badRewrites are recovery rewrites below the stored last fragment
	// (NoInvalidFragments, TLA+ defect 2), printed by the fragments
	// command only.
	badRewrites []string

	out *strings.Builder // trace; nil: no trace

	// Fault domains (racks command; WriterConfig.AckedAdhering): rule is
	// the rack-aware AckedAdhering over racks, ruled the machines built
	// with it, okAcks the bookies whose OK answer each machine was handed,
	// per entry. checkAck checks the rule independently of the writer.
	racks  map[metadata.BookieID]string
	rule   func([]metadata.BookieID) bool
	ruled  map[string]bool
	okAcks map[string]map[int64][]metadata.BookieID
}

type machine interface {
	Step(Event)
	Ready() []Effect
}

// message is one request to one bookie.
type message struct {
	from string
	to   metadata.BookieID
	eff  Effect // SendAdd, SendRead or SendReadLAC, with Bookies = [to]
}

type metaReq struct {
	from string
	eff  Effect // WriteMetadata or ReadMetadata
}

type simBookie struct {
	entries map[int64][]byte
	fenced  bool
	down    bool
}

func newEnv(seed uint64, trace bool) *env {
	dig, err := digest.New(digest.CRC32C, []byte("pw"))
	if err != nil {
		panic(err)
	}
	e := &env{
		ledgerID: 7,
		dig:      dig,
		bookies:  map[metadata.BookieID]*simBookie{},
		machines: map[string]machine{},
		acked:    map[string][]int64{},
		ruled:    map[string]bool{},
		okAcks:   map[string]map[int64][]metadata.BookieID{},
	}
	e.placed = &scriptedPolicy{Policy: placement.NewRandom(rand.NewPCG(seed, seed))}
	e.policy = e.placed
	if trace {
		e.out = &strings.Builder{}
	}
	return e
}

func (e *env) printf(format string, args ...any) {
	if e.out != nil {
		fmt.Fprintf(e.out, format, args...)
	}
}

func (e *env) addBookies(ids ...metadata.BookieID) {
	for _, id := range ids {
		e.bookies[id] = &simBookie{entries: map[int64][]byte{}}
		e.order = append(e.order, id)
		e.writable = append(e.writable, id)
	}
}

func (e *env) create(ensembleSize, qw, qa int, ensemble []metadata.BookieID) {
	e.store.md = &metadata.LedgerMetadata{
		EnsembleSize: ensembleSize, WriteQuorum: qw, AckQuorum: qa,
		State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: ensemble}},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte("pw"),
	}
	e.store.version = 1
}

func (e *env) add(name string, m machine) {
	e.machines[name] = m
	e.names = append(e.names, name)
}

// drain collects a machine's effects: requests go in flight, metadata
// operations are queued, completions are printed and checked.
func (e *env) drain(name string) {
	m := e.machines[name]
	for _, eff := range m.Ready() {
		e.printf("  %s: %s\n", name, eff)
		switch eff := eff.(type) {
		case SendAdd:
			if first := e.store.md.LastEnsemble().FirstEntryID; eff.Recovery && eff.EntryID < first {
				bad := fmt.Sprintf("%s rewrites e%d below the last fragment (first entry %d) of the stored metadata", name, eff.EntryID, first)
				if !slices.Contains(e.badRewrites, bad) {
					e.badRewrites = append(e.badRewrites, bad)
				}
			}
			for _, b := range eff.Bookies {
				one := eff
				one.Bookies = []metadata.BookieID{b}
				e.inflight = append(e.inflight, &message{from: name, to: b, eff: one})
			}
		case SendRead:
			for _, b := range eff.Bookies {
				one := eff
				one.Bookies = []metadata.BookieID{b}
				e.inflight = append(e.inflight, &message{from: name, to: b, eff: one})
			}
		case SendReadLAC:
			for _, b := range eff.Bookies {
				e.inflight = append(e.inflight, &message{from: name, to: b, eff: SendReadLAC{Bookies: []metadata.BookieID{b}}})
			}
		case WriteMetadata, ReadMetadata:
			e.metaQ = append(e.metaQ, &metaReq{from: name, eff: eff})
		case AddComplete:
			if eff.Err == nil {
				e.checkAck(name, eff.EntryID)
			}
		}
	}
}

// checkAck checks DESIGN.md §6 invariant 5 at the moment of the
// acknowledgement: contiguous from 0, and stored on Qa bookies of the
// entry's write set in the metadata the store holds.
func (e *env) checkAck(name string, id int64) {
	prev := e.acked[name]
	if want := int64(len(prev)); id != want {
		e.violate("%s acknowledged e%d, expected e%d next", name, id, want)
	}
	e.acked[name] = append(prev, id)
	if n := e.copiesInWriteSet(e.store.md, id, name); n < e.store.md.AckQuorum {
		e.violate("%s acknowledged e%d with %d copies in its write set %v of the stored metadata", name, id, n, e.writeSet(e.store.md, id))
	}
	if e.ruled[name] {
		// The bookies of the stored write set that answered OK to this
		// machine and hold its copy must meet the fault-domain rule.
		var acked []metadata.BookieID
		for _, b := range e.writeSet(e.store.md, id) {
			if slices.Contains(e.okAcks[name][id], b) && e.holds(b, id, name) {
				acked = append(acked, b)
			}
		}
		if len(acked) < e.store.md.AckQuorum || !e.rule(acked) {
			e.violate("%s acknowledged e%d with acks from %v, racks %v: short of Qa=%d or the fault-domain rule", name, id, acked, e.rackList(acked), e.store.md.AckQuorum)
		}
	}
}

// setRacks places bookies in racks and builds the rack-aware fault-domain
// rule with min(Qw, minRacks) racks per acknowledgement.
func (e *env) setRacks(racks map[metadata.BookieID]string, minRacks int) {
	e.racks = racks
	p := placement.NewRackAware(rand.NewPCG(1, 1), racks, false)
	p.MinRacksPerWriteQuorum = minRacks
	e.rule = func(acked []metadata.BookieID) bool {
		return p.AckedAdhering(acked, e.store.md.WriteQuorum, e.store.md.AckQuorum)
	}
}

func (e *env) rackList(bs []metadata.BookieID) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = e.racks[b]
	}
	return out
}

// holds reports whether bookie b stores entry id written by writer.
func (e *env) holds(b metadata.BookieID, id int64, writer string) bool {
	body, ok := e.bookies[b].entries[id]
	if !ok {
		return false
	}
	ent, err := e.dig.VerifyEntry(body, e.ledgerID, id)
	return err == nil && strings.HasPrefix(string(ent.Payload), writer+":")
}

func (e *env) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	e.violations = append(e.violations, v)
	e.printf("  VIOLATION: %s\n", v)
}

func (e *env) writeSet(md *metadata.LedgerMetadata, id int64) []metadata.BookieID {
	q := quorum.Params{EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum}
	ens := md.EnsembleAt(id)
	var out []metadata.BookieID
	for _, idx := range q.WriteSet(id) {
		out = append(out, ens[idx])
	}
	return out
}

// copiesInWriteSet counts the bookies of id's write set holding entry id;
// with writer != "", only copies that writer's payload.
func (e *env) copiesInWriteSet(md *metadata.LedgerMetadata, id int64, writer string) int {
	n := 0
	for _, b := range e.writeSet(md, id) {
		body, ok := e.bookies[b].entries[id]
		if !ok {
			continue
		}
		ent, err := e.dig.VerifyEntry(body, e.ledgerID, id)
		if err != nil {
			continue
		}
		if writer == "" || strings.HasPrefix(string(ent.Payload), writer+":") {
			n++
		}
	}
	return n
}

// deliver hands one request to its bookie and the answer to its machine.
// injected, if not nil, is the error the request meets instead of the
// bookie; dropReply loses the answer after the bookie acted.
func (e *env) deliver(msg *message, injected error, dropReply bool) {
	e.deliverOpt(msg, injected, dropReply, false)
}

// deliverOpt is deliver; corrupt flips a byte of a read answer's body.
func (e *env) deliverOpt(msg *message, injected error, dropReply, corrupt bool) {
	ev, what := e.bookieAct(msg, injected, dropReply, corrupt)
	e.printf("%s <- %s %s: %s\n", msg.from, msg.to, what, errString(errOf(ev)))
	e.hand(msg.from, ev)
}

// hand steps a machine with an answer (lost if the machine was killed).
func (e *env) hand(name string, ev Event) {
	m, ok := e.machines[name]
	if !ok {
		return
	}
	if a, ok := ev.(AddResponse); ok && a.Err == nil {
		if e.okAcks[name] == nil {
			e.okAcks[name] = map[int64][]metadata.BookieID{}
		}
		if !slices.Contains(e.okAcks[name][a.EntryID], a.Bookie) {
			e.okAcks[name][a.EntryID] = append(e.okAcks[name][a.EntryID], a.Bookie)
		}
	}
	m.Step(ev)
	e.drain(name)
}

// heldReply is an answer a bookie gave that has not reached its machine
// (deliver … hold); reply hands it over.
type heldReply struct {
	msg  *message
	ev   Event
	what string
}

// hold lets msg's bookie act now and keeps its answer until a reply
// command hands it to the machine.
func (e *env) hold(msg *message, injected error) {
	ev, what := e.bookieAct(msg, injected, false, false)
	e.printf("%s -> %s %s: %s (answer held)\n", msg.from, msg.to, what, errString(errOf(ev)))
	e.held = append(e.held, &heldReply{msg: msg, ev: ev, what: what})
}

// bookieAct has msg's bookie act on it and returns the answer.
func (e *env) bookieAct(msg *message, injected error, dropReply, corrupt bool) (Event, string) {
	b := e.bookies[msg.to]
	var ev Event
	var what string
	switch eff := msg.eff.(type) {
	case SendAdd:
		what = fmt.Sprintf("add e%d", eff.EntryID)
		if eff.Recovery {
			what = fmt.Sprintf("recovery-add e%d", eff.EntryID)
		}
		err := injected
		if err == nil {
			err = e.bookieAdd(b, eff)
		}
		ev = AddResponse{Bookie: msg.to, EntryID: eff.EntryID, Err: err}
	case SendRead:
		what = fmt.Sprintf("read e%d", eff.EntryID)
		if eff.Fence {
			what = fmt.Sprintf("fence-read e%d", eff.EntryID)
		}
		resp := ReadResponse{Bookie: msg.to, EntryID: eff.EntryID, Err: injected}
		if injected == nil {
			resp.Body, resp.Err = e.bookieRead(b, eff)
			if corrupt && resp.Body != nil {
				resp.Body = append([]byte(nil), resp.Body...)
				resp.Body[len(resp.Body)-1] ^= 0xff
			}
		}
		ev = resp
	case SendReadLAC:
		what = "read-lac"
		resp := ReadLACResponse{Bookie: msg.to, Err: injected}
		if injected == nil {
			resp.LastEntryBody, resp.Err = e.bookieRead(b, SendRead{EntryID: -1})
		}
		ev = resp
	}
	if injected == nil && b.down {
		ev = withErr(ev, ErrTimeout)
	} else if dropReply {
		ev = withErr(ev, ErrTimeout)
	}
	if corrupt {
		what += " (body corrupted)"
	}
	return ev, what
}

func (e *env) bookieAdd(b *simBookie, eff SendAdd) error {
	if b.down {
		return nil // the caller turns this into a timeout
	}
	if b.fenced && !eff.Recovery {
		return wire.StatusFenced.Err()
	}
	b.entries[eff.EntryID] = e.dig.AppendEntry(nil, e.ledgerID, eff.EntryID, eff.LAC, eff.Length, eff.Payload)
	return nil
}

func (e *env) bookieRead(b *simBookie, eff SendRead) ([]byte, error) {
	if b.down {
		return nil, nil
	}
	if eff.Fence {
		b.fenced = true
	}
	id := eff.EntryID
	if id == -1 {
		id = -1
		for k := range b.entries {
			id = max(id, k)
		}
	}
	body, ok := b.entries[id]
	if !ok {
		return nil, wire.StatusNoEntry.Err()
	}
	return body, nil
}

func withErr(ev Event, err error) Event {
	switch ev := ev.(type) {
	case AddResponse:
		ev.Err = err
		return ev
	case ReadResponse:
		ev.Err, ev.Body = err, nil
		return ev
	case ReadLACResponse:
		ev.Err, ev.LastEntryBody = err, nil
		return ev
	}
	return ev
}

func errOf(ev Event) error {
	switch ev := ev.(type) {
	case AddResponse:
		return ev.Err
	case ReadResponse:
		return ev.Err
	case ReadLACResponse:
		return ev.Err
	}
	return nil
}

// processMeta runs one queued metadata operation against the store.
func (e *env) processMeta(req *metaReq) {
	e.handMeta(req.from, e.applyMeta(req, nil))
}

// heldMeta is the result of a metadata operation the store ran that has
// not reached its machine (meta … hold); meta-reply hands it over.
type heldMeta struct {
	from string
	ev   Event
}

// Injected metadata store faults (meta err=…): unavailable fails an
// operation before it runs; ambiguous fails a write after it took effect
// (a lost reply).
var (
	errMetaUnavailable = errors.New("metadata store unavailable")
	errMetaAmbiguous   = errors.New("metadata store reply lost after commit")
)

// handMeta steps a machine with a metadata result.
func (e *env) handMeta(name string, ev Event) {
	if m, ok := e.machines[name]; ok {
		m.Step(ev)
		e.drain(name)
	}
}

// applyMeta runs req against the store and returns the machine's event;
// fault is errMetaUnavailable, errMetaAmbiguous or nil.
func (e *env) applyMeta(req *metaReq, fault error) Event {
	if fault == errMetaUnavailable {
		e.printf("%s <- metadata: %v\n", req.from, fault)
		if _, ok := req.eff.(WriteMetadata); ok {
			return MetadataWritten{Err: fault}
		}
		return MetadataRead{Err: fault}
	}
	var ev Event
	switch eff := req.eff.(type) {
	case WriteMetadata:
		if eff.Expected != e.store.version {
			e.printf("%s <- metadata write expected=v%d: version conflict (store v%d)\n", req.from, eff.Expected, e.store.version)
			ev = MetadataWritten{Err: metadata.ErrBadVersion}
			break
		}
		e.store.md, e.store.version = eff.Metadata.Clone(), e.store.version+1
		if fault == errMetaAmbiguous {
			e.printf("%s <- metadata write: stored v%d, reply lost\n", req.from, e.store.version)
			ev = MetadataWritten{Err: fault}
			break
		}
		e.printf("%s <- metadata write: ok v%d\n", req.from, e.store.version)
		ev = MetadataWritten{Version: e.store.version}
	case ReadMetadata:
		e.printf("%s <- metadata read: v%d %s\n", req.from, e.store.version, FormatMetadata(e.store.md))
		ev = MetadataRead{Metadata: e.store.md.Clone(), Version: e.store.version}
	}
	return ev
}

// scriptedPolicy is the placement policy of the driver: ReplaceBookie
// returns the bookies queued by place commands, in order, and asks the
// random policy when none is queued. A queued bookie the machine may not
// take is an error the machine sees.
type scriptedPolicy struct {
	placement.Policy
	queue []metadata.BookieID
}

func (p *scriptedPolicy) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	if len(p.queue) == 0 {
		return p.Policy.ReplaceBookie(ensemble, idx, writable, exclude)
	}
	b := p.queue[0]
	p.queue = p.queue[1:]
	if !slices.Contains(writable, b) || slices.Contains(ensemble, b) || slices.Contains(exclude, b) {
		return "", fmt.Errorf("%w: placed bookie %s is not writable, or in the ensemble %v, or failed %v", placement.ErrNotEnoughBookies, b, ensemble, exclude)
	}
	return b, nil
}

// quorumLAC is the highest entry up to which every entry is on Qa bookies
// of its write set in the stored metadata (no further than a closed
// ledger's end).
func (e *env) quorumLAC() int64 {
	md := e.store.md
	id := int64(-1)
	for {
		if md.State == metadata.LedgerClosed && id >= md.LastEntryID {
			return md.LastEntryID
		}
		if e.copiesInWriteSet(md, id+1, "") < md.AckQuorum {
			return id
		}
		id++
	}
}

// checkLACs is NoDirtyReads on the bookies: no stored entry carries a LAC
// past the entries that reached ack quorum.
func (e *env) checkLACs() []string {
	q := e.quorumLAC()
	var bad []string
	for _, id := range e.order {
		bk := e.bookies[id]
		for _, k := range slices.Sorted(mapsKeys(bk.entries)) {
			ent, err := e.dig.VerifyEntry(bk.entries[k], e.ledgerID, k)
			if err == nil && ent.LAC > q {
				bad = append(bad, fmt.Sprintf("%s stores e%d carrying LAC %d, but only entries up to %d reached ack quorum on their write sets", id, k, ent.LAC, q))
			}
		}
	}
	return bad
}

// kill removes a machine: answers to it are lost from now on, its requests
// in flight still reach their bookies unless drop loses them too, along with
// its queued metadata operations. Its acknowledgements stay recorded.
func (e *env) kill(name string, drop, dropMeta bool) {
	delete(e.machines, name)
	if drop {
		e.take(func(m *message) bool { return m.from == name }, 0)
	}
	if drop || dropMeta {
		e.metaQ = slices.DeleteFunc(e.metaQ, func(r *metaReq) bool { return r.from == name })
	}
}

// matching returns the in-flight messages selected by a filter, in FIFO
// order, and removes them.
func (e *env) take(match func(*message) bool, limit int) []*message {
	var got, rest []*message
	for _, m := range e.inflight {
		if (limit <= 0 || len(got) < limit) && match(m) {
			got = append(got, m)
		} else {
			rest = append(rest, m)
		}
	}
	e.inflight = rest
	return got
}

// stabilize delivers every request and metadata operation until none is
// left (bookies that are down answer with timeouts).
func (e *env) stabilize() {
	for steps := 0; len(e.inflight) > 0 || len(e.metaQ) > 0; steps++ {
		if steps > 100000 {
			panic("env: stabilize does not converge")
		}
		if len(e.inflight) > 0 {
			m := e.inflight[0]
			e.inflight = e.inflight[1:]
			e.deliver(m, nil, false)
			continue
		}
		req := e.metaQ[0]
		e.metaQ = e.metaQ[1:]
		e.processMeta(req)
	}
}

// checkClosed checks invariants 1 and 2 once the store says CLOSED: every
// entry any writer acknowledged is ≤ lastEntryId, and every entry ≤
// lastEntryId is on Qa bookies of its write set.
func (e *env) checkClosed() []string {
	md := e.store.md
	var bad []string
	if md.State != metadata.LedgerClosed {
		return []string{"ledger not closed: " + md.State.String()}
	}
	for _, name := range e.names {
		if acked := e.acked[name]; len(acked) > 0 && acked[len(acked)-1] > md.LastEntryID {
			bad = append(bad, fmt.Sprintf("%s acknowledged e%d, ledger closed at %d (truncation)", name, acked[len(acked)-1], md.LastEntryID))
		}
	}
	for id := int64(0); id <= md.LastEntryID; id++ {
		if n := e.copiesInWriteSet(md, id, ""); n < md.AckQuorum {
			bad = append(bad, fmt.Sprintf("e%d is on %d bookies of its write set %v, ack quorum %d", id, n, e.writeSet(md, id), md.AckQuorum))
		}
	}
	return bad
}

func (e *env) bookieState() string {
	var b strings.Builder
	for _, id := range e.order {
		bk := e.bookies[id]
		ids := slices.Sorted(mapsKeys(bk.entries))
		var parts []string
		for _, k := range ids {
			ent, err := e.dig.VerifyEntry(bk.entries[k], e.ledgerID, k)
			if err != nil {
				parts = append(parts, fmt.Sprintf("e%d(bad)", k))
				continue
			}
			parts = append(parts, fmt.Sprintf("e%d(lac=%d %s)", k, ent.LAC, ent.Payload))
		}
		flags := ""
		if bk.fenced {
			flags += " fenced"
		}
		if bk.down {
			flags += " down"
		}
		fmt.Fprintf(&b, "%s%s: %s\n", id, flags, strings.Join(parts, " "))
	}
	return b.String()
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var errInjected = map[string]error{
	"EIO":       wire.StatusIOError.Err(),
	"EFENCED":   wire.StatusFenced.Err(),
	"EUA":       wire.StatusUnauthorized.Err(),
	"ENOENTRY":  wire.StatusNoEntry.Err(),
	"ENOLEDGER": wire.StatusNoLedger.Err(),
	"EREADONLY": wire.StatusReadOnly.Err(),
	"timeout":   ErrTimeout,
}
