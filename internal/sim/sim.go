package sim

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
)

// Fault is one kind of fault the simulator can inject.
type Fault string

// The fault kinds. AllFaults lists them in a fixed order.
const (
	FaultLoss      Fault = "loss"      // single messages lost on a link
	FaultDelay     Fault = "delay"     // slow links: delays up to 200 ms instead of a few ms
	FaultPartition Fault = "partition" // client–bookie and bookie-wide partitions
	FaultReset     Fault = "reset"     // connection resets dropping in-flight requests
	FaultCrash     Fault = "crash"     // bookie crash (losing unsynced data) and restart
	FaultPause     Fault = "pause"     // bookie pause (SIGSTOP-like) and resume
	FaultMeta      Fault = "meta"      // metadata store errors, ambiguous commits and delays
	FaultConflict  Fault = "conflict"  // foreign metadata writes: CAS conflicts
	FaultClient    Fault = "client"    // writer crash: its in-flight adds still arrive
)

// AllFaults is every fault kind, in the order they are printed.
var AllFaults = []Fault{FaultLoss, FaultDelay, FaultPartition, FaultReset, FaultCrash, FaultPause, FaultMeta, FaultConflict, FaultClient}

// ParseFaults parses a comma-separated fault list: "all", "none", or kinds
// of AllFaults.
func ParseFaults(s string) ([]Fault, error) {
	switch s {
	case "", "all":
		return slices.Clone(AllFaults), nil
	case "none":
		return nil, nil
	}
	var out []Fault
	for _, part := range strings.Split(s, ",") {
		f := Fault(strings.TrimSpace(part))
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("unknown fault %q (known: all, none, %s)", f, FormatFaults(AllFaults))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// FormatFaults renders a fault list as ParseFaults reads it.
func FormatFaults(fs []Fault) string {
	if len(fs) == 0 {
		return "none"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = string(f)
	}
	return strings.Join(parts, ",")
}

// Mutation names a known protocol fix that a run switches off, to show the
// simulator finds the defect the fix prevents.
type Mutation string

const (
	// MutationNone runs the protocol as shipped.
	MutationNone Mutation = ""
	// MutationNoFenceReads: recovery entry reads do not fence (issue #2614).
	MutationNoFenceReads Mutation = "no-fence-reads"
	// MutationStartAtLAC: recovery starts at the LAC even below the last
	// fragment (issue #2615).
	MutationStartAtLAC Mutation = "start-at-lac"
	// MutationPiggybackRecoveryLAC: recovery rewrites carry a LAC that counts
	// acks from a recovery-local replacement bookie, as Apache BookKeeper
	// 4.17's do (issue 16 item 1).
	MutationPiggybackRecoveryLAC Mutation = "piggyback-recovery-lac"
)

// Mutations lists every mutation, for flag parsing and help.
var Mutations = []Mutation{MutationNoFenceReads, MutationStartAtLAC, MutationPiggybackRecoveryLAC}

// Workload names what the simulated clients do.
type Workload string

const (
	// WorkloadMixed: up to ten ledgers, writers, readers, recoveries,
	// deletions and every fault drawn at random (the default).
	WorkloadMixed Workload = "mixed"
	// WorkloadRecoveryRace: one ledger whose writer dies with entries on
	// a single bookie, then two or three racing recoveries, the first with
	// a forced rewrite failure (a recovery-local replacement), some losing
	// their close, amid message loss, bookie crashes, metadata faults and
	// CAS conflicts. Built to reach the interleaving of issue 16 item 1.
	WorkloadRecoveryRace Workload = "recovery-race"
)

// Workloads lists every workload.
var Workloads = []Workload{WorkloadMixed, WorkloadRecoveryRace}

// Config configures one run.
type Config struct {
	// Seed decides everything.
	Seed uint64
	// Workload is what the clients do; "" is WorkloadMixed.
	Workload Workload
	// Steps is the number of workload and fault actions of the safety
	// phase. Default 300 (mixed), 40 (recovery-race).
	Steps int
	// Faults are the fault kinds injected; nil means none (ParseFaults("all")
	// gives every kind).
	Faults []Fault
	// Mutation switches off one protocol fix (test and demonstration only).
	Mutation Mutation
	// LivenessTimeout bounds the liveness phase in virtual time. Default 60 s.
	LivenessTimeout time.Duration
	// FullIntensity injects every fault kind at its highest intensity
	// instead of drawing a per-seed mix (swarm testing), for longer
	// soaks (make sim-long).
	FullIntensity bool
	// Schedule, if set, is the safety phase to run instead of
	// Generate(cfg): the seed still decides the world (bookies, fault
	// intensities) and every random stream other than the steps'.
	Schedule *Schedule
	// record, if set, collects what the protocol machines of the run did
	// and met, for Script (nil: nothing is recorded).
	record *recorder
}

// withDefaults fills in the defaults of the zero fields.
func (cfg Config) withDefaults() Config {
	if cfg.Workload == "" {
		cfg.Workload = WorkloadMixed
	}
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps(cfg.Workload)
	}
	if cfg.LivenessTimeout <= 0 {
		cfg.LivenessTimeout = 60 * time.Second
	}
	return cfg
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	// Ledger is the ledger it is about (-1: none, a bookie that does not
	// restart).
	Ledger int64
	Detail string
	// Step is the workload step during which it was found (Steps+1 for the
	// liveness phase and the end checks).
	Step int
	At   time.Duration
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at step %d (t=%s): %s", v.Invariant, v.Step, fmtTime(v.At), v.Detail)
}

// Stats counts what a run did.
type Stats struct {
	Events         int // loop events processed
	Requests       int // bookie requests delivered and handled
	Acked          int // entries acknowledged to writers
	Ledgers        int
	Closed         int
	Deleted        int // ledgers deleted (closed ones)
	Recoveries     int // recoveries started
	RecoveriesOK   int
	BookieCrashes  int
	EntriesRead    int // entries delivered to readers
	VirtualElapsed time.Duration

	// The paths of issue 21: explicit ids, writer options, reads.
	ExplicitWrites    int // WriteAt calls that wrote an entry
	OutOfOrderWrites  int // of those, below an id written earlier
	DuplicatesRefused int // WriteAt of an id written already (refused)
	QuorumTimeouts    int // adds failed by AddQuorumTimeout
	TooManyChanges    int // adds failed by MaxEnsembleChanges
	Ticks             int // Ticks stepped into machines
	Speculative       int // BookieSlow: a read asked the next replica on a Tick
	TryReads          int // TryReadLastAddConfirmed answers
	BatchReads        int // batch reads answered with entries
	BatchEntries      int // entries they returned
	BatchFallbacks    int // batch reads that fell back to single reads
	StickyMoves       int // sticky readers that moved to the next bookie
}

// Result is the outcome of a run.
type Result struct {
	Seed       uint64
	Violations []Violation
	Stats      Stats
	// Trace is the full event trace; TraceHash its SHA-256 (hex).
	Trace     string
	TraceHash string

	steps   int // Config.Steps
	bookies int // how many bookies the world had
}

// Failed reports whether the run broke an invariant.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Summary is the short, deterministic report `folio sim` prints.
func (r *Result) Summary() string {
	s := r.Stats
	var b strings.Builder
	fmt.Fprintf(&b, "ledgers=%d closed=%d deleted=%d acked=%d read=%d recoveries=%d/%d bookie-crashes=%d requests=%d events=%d virtual=%s\n",
		s.Ledgers, s.Closed, s.Deleted, s.Acked, s.EntriesRead, s.RecoveriesOK, s.Recoveries, s.BookieCrashes, s.Requests, s.Events, fmtTime(s.VirtualElapsed))
	fmt.Fprintf(&b, "explicit-writes=%d out-of-order=%d duplicates-refused=%d quorum-timeouts=%d too-many-changes=%d ticks=%d speculative=%d try-reads=%d batch-reads=%d/%d entries fallbacks=%d sticky-moves=%d\n",
		s.ExplicitWrites, s.OutOfOrderWrites, s.DuplicatesRefused, s.QuorumTimeouts, s.TooManyChanges, s.Ticks, s.Speculative, s.TryReads, s.BatchReads, s.BatchEntries, s.BatchFallbacks, s.StickyMoves)
	fmt.Fprintf(&b, "trace-hash=%s\n", r.TraceHash[:16])
	if !r.Failed() {
		b.WriteString("result: ok\n")
		return b.String()
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	return b.String()
}

// Run runs one simulation. It is a pure function of cfg.
func Run(cfg Config) *Result {
	cfg = cfg.withDefaults()
	sched := cfg.Schedule
	if sched == nil {
		sched = Generate(cfg)
	}
	w := newWorld(cfg)
	defer w.shutdown()
	if cfg.Workload == WorkloadRecoveryRace {
		w.runRecoveryRace(sched)
	} else {
		w.runSchedule(sched, w.action)
	}
	if len(w.violations) == 0 {
		w.runLiveness()
		// The end checks run even when a ledger could not be closed:
		// what was acknowledged must be stored, whatever the state.
		w.checkEnd()
	}
	w.stats.VirtualElapsed = w.now
	if w.rec != nil {
		for _, l := range w.ledgers {
			if w.closed(l) {
				w.rec.closedAtEnd[l.id] = true
			}
		}
	}
	trace := w.trace.String()
	sum := sha256.Sum256([]byte(trace))
	return &Result{Seed: cfg.Seed, Violations: w.violations, Stats: w.stats, Trace: trace, TraceHash: hex.EncodeToString(sum[:]), steps: cfg.Steps, bookies: len(w.bookies)}
}

// DefaultSteps is the safety phase's length of a workload.
func DefaultSteps(wl Workload) int {
	if wl == WorkloadRecoveryRace {
		return 40
	}
	return 300
}

// event is one scheduled action of the loop.
type event struct {
	at  time.Duration
	seq uint64
	fn  func()
	idx int // position in the queue (for a timer's Stop)
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *eventQueue) Push(x any) {
	e := x.(*event)
	e.idx = len(*q)
	*q = append(*q, e)
}
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.idx = -1
	return e
}

// simEpoch is the virtual time zero on the components' clocks.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// world is the whole simulated system. Every field is touched only by the
// loop goroutine.
type world struct {
	// records recycles the writers' per-entry records (addRecords).
	records *ledger.AddRecords

	cfg    Config
	faults map[Fault]bool
	// intensity scales each fault kind's probabilities for this seed
	// (swarm testing: seeds differ in which faults dominate, which finds
	// more than one fixed mix).
	intensity map[Fault]int
	// rng is the stream the world draws from now: a step's own stream
	// while its action runs (and in the events it schedules to act for
	// it), env otherwise. Clients, links and bookies draw from their own
	// streams (actor.rng, conn.rng, bookieNode.rng).
	rng *rand.Rand
	env *rand.Rand
	// rngName names rng ("env", or "step/N"); keys counts the clients and
	// ledgers created under each name. A client's streams and a ledger's
	// placement are keyed by where they were created (rngName and the
	// count), not by their names, which shift when steps are removed.
	rngName string
	keys    map[string]int
	// policy is placement for the ledgers' ensembles; each ledger draws
	// from its own source (ledgerRec.policy) made by newPolicy.
	policy placement.Policy
	unsafe ledger.UnsafeKnobs
	rec    *recorder

	now   time.Duration
	clock worldClock
	q     eventQueue
	seq   uint64
	step  int
	// phase is "safety" or "liveness".
	phase string

	trace strings.Builder
	stats Stats

	bookies []*bookieNode
	net     *network
	meta    *metaService
	actors  []*actor
	ledgers []*ledgerRec
	check   *checker

	nextActor map[string]int
	// actorKeys are the clients' stable keys (newKey) by name.
	actorKeys  map[string]string
	violations []Violation
}

func newWorld(cfg Config) *world {
	w := &world{
		cfg:       cfg,
		faults:    map[Fault]bool{},
		env:       rand.New(rand.NewPCG(cfg.Seed, 0x51a7e)),
		rec:       cfg.record,
		rngName:   "env",
		keys:      map[string]int{},
		actorKeys: map[string]string{},
		phase:     "safety",
		nextActor: map[string]int{},
	}
	w.rng = w.env
	w.clock = worldClock{w}
	w.intensity = map[Fault]int{}
	for _, f := range AllFaults {
		w.intensity[f] = []int{0, 1, 2, 4, 8}[w.rng.IntN(5)] // in quarters
		if cfg.FullIntensity {
			w.intensity[f] = 8
		}
	}
	for _, f := range cfg.Faults {
		w.faults[f] = w.intensity[f] > 0
	}
	switch cfg.Mutation {
	case MutationNoFenceReads:
		w.unsafe.NoFenceOnRecoveryReads = true
	case MutationStartAtLAC:
		w.unsafe.StartAtLACOnly = true
	case MutationPiggybackRecoveryLAC:
		w.unsafe.PiggybackRecoveryLAC = true
	}
	w.check = newChecker(w)
	w.net = newNetwork(w)
	w.meta = newMetaService(w)
	nb := 4 + w.rng.IntN(4)
	var mix []string
	for _, f := range AllFaults {
		if w.faults[f] {
			mix = append(mix, fmt.Sprintf("%s*%d/4", f, w.intensity[f]))
		}
	}
	w.logf("world seed=%d workload=%s bookies=%d faults=%s mutation=%q", cfg.Seed, cfg.Workload, nb, strings.Join(mix, ","), cfg.Mutation)
	for i := range nb {
		n := newBookieNode(w, metadata.BookieID(fmt.Sprintf("b%d", i+1)))
		w.bookies = append(w.bookies, n)
		n.start()
	}
	return w
}

// shutdown closes every store (releasing Pebble's goroutines).
func (w *world) shutdown() {
	for _, n := range w.bookies {
		n.stop()
	}
}

// after schedules fn at now+d and returns its event.
func (w *world) after(d time.Duration, fn func()) *event {
	w.seq++
	ev := &event{at: w.now + max(d, 0), seq: w.seq, fn: fn}
	heap.Push(&w.q, ev)
	return ev
}

// runUntil processes events until stop returns true, the queue empties or
// an invariant breaks.
func (w *world) runUntil(stop func() bool) {
	for len(w.q) > 0 && len(w.violations) == 0 && !stop() {
		ev := heap.Pop(&w.q).(*event)
		w.now = max(w.now, ev.at)
		w.stats.Events++
		ev.fn()
	}
}

func (w *world) logf(format string, args ...any) {
	fmt.Fprintf(&w.trace, "%s ", fmtTime(w.now))
	fmt.Fprintf(&w.trace, format, args...)
	w.trace.WriteByte('\n')
}

// violate records a broken invariant about ledger ledgerID (-1: none);
// the loop stops after the current event.
func (w *world) violate(invariant string, ledgerID int64, format string, args ...any) {
	v := Violation{Invariant: invariant, Ledger: ledgerID, Detail: fmt.Sprintf(format, args...), Step: w.step, At: w.now}
	w.violations = append(w.violations, v)
	w.logf("VIOLATION %s: %s", invariant, v.Detail)
}

// chance reports true with probability permille/1000.
func (w *world) chance(permille int) bool { return w.rng.IntN(1000) < permille }

// faultChance is chance for a fault of kind f, scaled by its intensity
// and false unless f is injected in this phase.
func (w *world) faultChance(f Fault, permille int) bool { return w.faultChanceOn(w.rng, f, permille) }

// faultChanceOn is faultChance drawing from r.
func (w *world) faultChanceOn(r *rand.Rand, f Fault, permille int) bool {
	if !w.faults[f] || w.phase != "safety" {
		return false
	}
	return r.IntN(4000) < permille*w.intensity[f]
}

// between returns a duration uniformly in [lo, hi].
func (w *world) between(lo, hi time.Duration) time.Duration { return between(w.rng, lo, hi) }

// stream is the random stream of the part of this run called name.
func (w *world) stream(name string) *rand.Rand { return newStream(w.cfg.Seed, name) }

// afterOn is after, with fn drawing from the stream that is current now
// (the step's that schedules it) instead of env.
func (w *world) afterOn(d time.Duration, fn func()) {
	r, name := w.rng, w.rngName
	w.after(d, func() {
		prevR, prevName := w.rng, w.rngName
		w.rng, w.rngName = r, name
		fn()
		w.rng, w.rngName = prevR, prevName
	})
}

// newKey is a stable key for the next thing of kind created under the
// current stream ("step/12/actor/2"): the same when steps that do not
// create it are removed.
func (w *world) newKey(kind string) string {
	k := w.rngName + "/" + kind
	w.keys[k]++
	return fmt.Sprintf("%s/%d", k, w.keys[k])
}

// newPolicy is the placement of a new ledger: its own random source, keyed
// by where the ledger was created.
func (w *world) newPolicy() placement.Policy {
	var p placement.Policy = placement.NewRandom(rand.NewPCG(w.cfg.Seed, streamID("placement/"+w.newKey("ledger"))))
	if w.rec != nil {
		p = &recordingPolicy{Policy: p, w: w}
	}
	return p
}

// runSchedule runs the steps of s, each at its time with its own stream,
// and the events between them, until the safety phase's end.
func (w *world) runSchedule(s *Schedule, do func(Action)) {
	i := 0
	var tick func()
	tick = func() {
		st := s.Steps[i]
		i++
		w.step = st.N
		w.rng, w.rngName = rand.New(rand.NewPCG(st.Seed, 0x57e9)), fmt.Sprintf("step/%d", st.N)
		w.rec.step(st)
		do(st.Action)
		w.rng, w.rngName = w.env, "env"
		if i < len(s.Steps) {
			w.after(s.Steps[i].At-w.now, tick)
		}
	}
	if len(s.Steps) > 0 {
		w.after(s.Steps[0].At-w.now, tick)
	}
	w.runUntil(func() bool {
		return i == len(s.Steps) && (len(w.q) == 0 || w.q[0].at > s.End)
	})
	w.step = w.cfg.Steps
}

func (w *world) newName(prefix string) string {
	w.nextActor[prefix]++
	return fmt.Sprintf("%s%d", prefix, w.nextActor[prefix])
}

func (w *world) bookie(id metadata.BookieID) *bookieNode {
	for _, n := range w.bookies {
		if n.id == id {
			return n
		}
	}
	return nil
}

// writable is the set of registered writable bookies, in id order: those
// up. A down or crashed bookie loses its registration at once (its session
// is taken to expire immediately).
func (w *world) writable() []metadata.BookieID {
	var out []metadata.BookieID
	for _, n := range w.bookies {
		if n.up {
			out = append(out, n.id)
		}
	}
	return out
}

// writableChanged tells every live actor the new writable set.
func (w *world) writableChanged() {
	ev := ledger.WritableBookies{Bookies: w.writable()}
	w.rec.writable(ev.Bookies)
	for _, a := range w.actors {
		if a.live() && a.kind != kindReader {
			a.stepMachine(ev)
		}
	}
}

func fmtTime(d time.Duration) string {
	return fmt.Sprintf("%d.%03dms", d/time.Millisecond, (d%time.Millisecond)/time.Microsecond)
}
