package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// recorder collects, while a run goes, the commands of a datadriven script
// for internal/ledger's interaction driver (internal/ledger/
// interaction_test.go) that replays the run's protocol-level interleaving
// on one ledger: what each machine was told, and when each bookie acted,
// in the order the simulator had them happen. Things the driver has no
// command for are kept as comments. A nil *recorder records nothing (the
// normal run: its methods cost a nil check).
type recorder struct {
	cmds []scriptCmd
	// arrived holds the requests a bookie acted on whose answer has not
	// reached the client: their outcome is a `reply`, not a `deliver`.
	arrived map[*pendingReq]bool
	// lastLedger is the ledger of the latest protocol record (the script's
	// ledger when the run broke nothing, or nothing about one ledger).
	lastLedger int64
	// current is the actor whose machine is taking an event.
	current *actor
	// closedAtEnd: the ledgers closed when the run ended.
	closedAtEnd map[int64]bool
}

// scriptCmd is one command (or comment) of the script, tagged with the
// ledger it is about (-1: every ledger).
type scriptCmd struct {
	ledger  int64
	text    string
	comment bool
}

func newRecorder() *recorder {
	return &recorder{arrived: map[*pendingReq]bool{}, lastLedger: -1, closedAtEnd: map[int64]bool{}}
}

func (r *recorder) add(ledgerID int64, format string, args ...any) {
	r.cmds = append(r.cmds, scriptCmd{ledger: ledgerID, text: fmt.Sprintf(format, args...)})
	if ledgerID >= 0 {
		r.lastLedger = ledgerID
	}
}

func (r *recorder) note(ledgerID int64, format string, args ...any) {
	r.cmds = append(r.cmds, scriptCmd{ledger: ledgerID, text: fmt.Sprintf(format, args...), comment: true})
}

func (r *recorder) step(st Step) {
	if r == nil {
		return
	}
	r.note(-1, "step %d at %s: %s", st.N, fmtTime(st.At), st.Action)
}

// createLedger: the ledger's metadata and its writer.
// The driver's writer counts a quorum timeout in Ticks, as the Writer
// does (AddQuorumTimeout cut into four without an explicit LAC interval),
// so `quorum-timeout=1` (seconds, the driver's unit) with the recorded
// `tick`s is the simulated writer's timeout, whatever its length.
func (r *recorder) createLedger(a *actor, md *metadata.LedgerMetadata, o writerOpts) {
	if r == nil {
		return
	}
	ens := md.Ensembles[0].Ensemble
	parts := make([]string, len(ens))
	for i, b := range ens {
		parts[i] = string(b)
	}
	r.add(a.led.id, "create E=%d Qw=%d Qa=%d ensemble=(%s)", md.EnsembleSize, md.WriteQuorum, md.AckQuorum, strings.Join(parts, ","))
	opts := ""
	if o.explicit {
		opts += " explicit"
	}
	if o.quorumTimeout > 0 {
		r.note(a.led.id, "%s: AddQuorumTimeout %s (the driver counts it in ticks: four)", a.name, fmtTime(o.quorumTimeout))
		opts += " quorum-timeout=1"
	}
	if o.delay {
		opts += " delay"
	}
	if o.maxChanges != 0 {
		opts += fmt.Sprintf(" max-changes=%d", o.maxChanges)
	}
	r.add(a.led.id, "writer %s%s", a.name, opts)
}

func (r *recorder) append(a *actor) {
	if r == nil {
		return
	}
	r.add(a.led.id, "append %s", a.name)
}

// writeAt: an explicit-id writer's WriteAt of entry id (a duplicate too:
// the driver prints the refusal).
func (r *recorder) writeAt(a *actor, id int64) {
	if r == nil {
		return
	}
	r.add(a.led.id, "write-at %s ids=%d", a.name, id)
}

// tick: a Tick stepped into a writer.
func (r *recorder) tick(a *actor) {
	if r == nil {
		return
	}
	r.add(a.led.id, "tick %s", a.name)
}

func (r *recorder) closeWriter(a *actor) {
	if r == nil {
		return
	}
	r.add(a.led.id, "close %s", a.name)
}

func (r *recorder) recover(a *actor, readAhead int) {
	if r == nil {
		return
	}
	knobs := ""
	u := a.w.unsafe
	if u.NoFenceOnRecoveryReads {
		knobs += " no-fence-reads"
	}
	if u.StartAtLACOnly {
		knobs += " start-at-lac"
	}
	if u.PiggybackRecoveryLAC {
		knobs += " piggyback-recovery-lac"
	}
	r.add(a.led.id, "recover %s read-ahead=%d%s", a.name, readAhead, knobs)
}

func (r *recorder) reader(a *actor) {
	if r == nil {
		return
	}
	r.note(a.led.id, "%s: a tailing reader (no equivalent: the driver has no long polls or reader rounds; its requests are left out)", a.name)
}

// kill: the client process died; its requests in flight still arrive.
// A recovery that dies before its close CAS never submitted the close:
// drop-meta removes it from the driver's metadata queue.
func (r *recorder) kill(a *actor) {
	if r == nil || a.kind == kindReader {
		return
	}
	r.add(a.led.id, "kill %s", a.name)
}

func (r *recorder) killBeforeClose(a *actor) {
	if r == nil {
		return
	}
	r.add(a.led.id, "kill %s drop-meta", a.name)
}

// reqFilter is the driver's deliver/reply filter matching request p.
func reqFilter(a *actor, p *pendingReq) string {
	kind := "read"
	switch p.op {
	case wire.OpAddEntry:
		kind = "add"
	case wire.OpReadLAC:
		kind = "read-lac"
	}
	return fmt.Sprintf("from=%s to=%s kind=%s e=%d n=1", a.name, p.bookie, kind, p.entryID)
}

// arrive: the bookie acted on request p (stored or refused an add, read or
// fenced); its answer goes back later.
func (r *recorder) arrive(a *actor, p *pendingReq) {
	if r == nil || a.kind == kindReader {
		return
	}
	r.arrived[p] = true
	r.add(a.led.id, "deliver %s hold", reqFilter(a, p))
}

// answer: the bookie's answer to p reaches a's machine.
func (r *recorder) answer(a *actor, p *pendingReq) {
	if r == nil || a.kind == kindReader || !a.live() {
		return
	}
	delete(r.arrived, p)
	r.add(a.led.id, "reply %s", reqFilter(a, p))
}

// fail: p failed without an answer (timeout, lost or refused connection):
// an unknown outcome, which the machines treat as a timeout.
func (r *recorder) fail(a *actor, p *pendingReq, why string) {
	if r == nil || a.kind == kindReader || !a.live() {
		return
	}
	r.note(a.led.id, "%s: %s", a.name, why)
	if r.arrived[p] {
		delete(r.arrived, p)
		r.add(a.led.id, "reply %s err=timeout", reqFilter(a, p))
		return
	}
	r.add(a.led.id, "deliver %s err=timeout", reqFilter(a, p))
}

// metaApplied: the store ran a's metadata operation (err: the fault the
// client meets: unavailable before, ambiguous after the write).
func (r *recorder) metaApplied(a *actor, err error) {
	if r == nil || a.kind == kindReader {
		return
	}
	switch {
	case errors.Is(err, errMetaUnavailable):
		r.add(a.led.id, "meta from=%s n=1 hold err=unavailable", a.name)
	case errors.Is(err, errMetaAmbiguous):
		r.add(a.led.id, "meta from=%s n=1 hold err=ambiguous", a.name)
	default:
		r.add(a.led.id, "meta from=%s n=1 hold", a.name)
	}
}

func (r *recorder) metaResult(a *actor) {
	if r == nil || a.kind == kindReader || !a.live() {
		return
	}
	r.add(a.led.id, "meta-reply from=%s n=1", a.name)
}

func (r *recorder) foreignWrite(l *ledgerRec) {
	if r == nil {
		return
	}
	r.add(l.id, "store-bump")
}

func (r *recorder) writable(ids []metadata.BookieID) {
	if r == nil {
		return
	}
	parts := make([]string, len(ids))
	for i, b := range ids {
		parts[i] = string(b)
	}
	r.add(-1, "writable %s", strings.Join(parts, " "))
}

func (r *recorder) bookieCrash(n *bookieNode, keep int) {
	if r == nil {
		return
	}
	r.note(-1, "bookie %s crashes keeping %d%% of its unsynced blocks (no equivalent: the driver's bookies lose nothing; its answers in flight are lost, which the replies below show)", n.id, keep)
}

func (r *recorder) deleted(l *ledgerRec) {
	if r == nil {
		return
	}
	r.note(l.id, "ledger deleted (no equivalent in the driver)")
}

// recordingPolicy records the bookies placement chooses for ensemble
// changes and recovery replacements, as `place` commands that make the
// driver's placement choose the same. The machines call it only while
// they take an event (recorder.current is the actor taking it).
type recordingPolicy struct {
	placement.Policy
	w *world
}

func (p *recordingPolicy) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	b, err := p.Policy.ReplaceBookie(ensemble, idx, writable, exclude)
	if r := p.w.rec; err == nil && r.current != nil && r.current.kind != kindReader {
		r.placed(r.current.led.id, b)
	}
	return b, err
}

// placed inserts `place b` before the latest command of the ledger: the
// one whose event made the machine choose.
func (r *recorder) placed(ledgerID int64, b metadata.BookieID) {
	cmd := scriptCmd{ledger: ledgerID, text: "place " + string(b)}
	for i := len(r.cmds) - 1; i >= 0; i-- {
		if c := r.cmds[i]; !c.comment && (c.ledger == ledgerID || c.ledger == -1) {
			r.cmds = append(r.cmds[:i], append([]scriptCmd{cmd}, r.cmds[i:]...)...)
			return
		}
	}
	r.cmds = append(r.cmds, cmd)
}

// Script renders the recorded run as a datadriven script on ledger l (the
// ledger the violation is about), ending in the driver's checks. The
// expected outputs are left empty: paste the script into
// internal/ledger/testdata and fill them with
// `go test ./internal/ledger -run TestInteraction -rewrite`.
func (r *recorder) script(header []string, bookies []metadata.BookieID, l int64) string {
	var b strings.Builder
	for _, h := range header {
		fmt.Fprintf(&b, "# %s\n", h)
	}
	b.WriteString("\n")
	cmd := func(text string) { fmt.Fprintf(&b, "%s\n----\n\n", text) }
	ids := make([]string, len(bookies))
	for i, id := range bookies {
		ids[i] = string(id)
	}
	cmd("bookies " + strings.Join(ids, " "))
	started := false
	for _, c := range r.cmds {
		if c.ledger != l && c.ledger != -1 {
			continue
		}
		if strings.HasPrefix(c.text, "create ") {
			started = true
		}
		if !started && (c.comment || c.ledger != -1) {
			continue // before the ledger exists, only the writable set matters
		}
		if c.comment {
			fmt.Fprintf(&b, "# %s\n", c.text)
			continue
		}
		cmd(c.text)
	}
	b.WriteString("# The driver's checks: lacs is NoDirtyReads on the bookies' stored entries,\n")
	b.WriteString("# fragments NoInvalidFragments on the recoveries' rewrites;\n")
	if r.closedAtEnd[l] {
		b.WriteString("# check: no acknowledged entry past the end, every entry up to it on Qa bookies.\n\n")
	} else {
		b.WriteString("# the ledger was not closed when the run stopped, so check (closed-ledger\n# invariants) is left out.\n\n")
	}
	cmd("bookie-state")
	cmd("store")
	cmd("lacs")
	cmd("fragments")
	if r.closedAtEnd[l] {
		cmd("check")
	}
	return b.String()
}
