package ledgerexec

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// recorder is a Bookies and Store that records what it is asked and fails
// every request at once with errNoBookie: the tests look at the requests
// built and the events that come back, not at a bookie.
type recorder struct {
	reqs   []wire.Request
	to     []string
	writes int
	reads  int
}

var errNoBookie = errors.New("no bookie")

func (r *recorder) Send(bookie string, _ int64, req *wire.Request, cb func(*wire.Response, error)) {
	cp := *req
	cp.Add.Body = append([]byte(nil), req.Add.Body...)
	r.reqs, r.to = append(r.reqs, cp), append(r.to, bookie)
	cb(nil, errNoBookie)
}

func (r *recorder) WriteLedger(_ int64, _ *metadata.LedgerMetadata, _ metadata.Version, done func(metadata.Version, error)) {
	r.writes++
	done(7, nil)
}

func (r *recorder) ReadLedger(_ int64, done func(*metadata.LedgerMetadata, metadata.Version, error)) {
	r.reads++
	done(nil, 0, metadata.ErrNoSuchLedger)
}

func newTestExecutor(t *testing.T) (*Executor, *recorder, *[]ledger.Event) {
	t.Helper()
	dig, err := digest.New(digest.CRC32C, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	mk := digest.MasterKey([]byte("pw"))
	rec := &recorder{}
	var evs []ledger.Event
	x := New(Config{LedgerID: 9, Digester: dig, MasterKey: mk[:], Bookies: rec, Store: rec,
		Emit: func(ev ledger.Event) { evs = append(evs, ev) }})
	return x, rec, &evs
}

// TestEveryEffectHandled: Do either carries out or hands back every Effect
// type the ledger package declares (ledger.Effects is complete: its own
// test checks that), so no effect can reach Do's panic at run time.
func TestEveryEffectHandled(t *testing.T) {
	x, _, _ := newTestExecutor(t)
	for _, eff := range ledger.Effects() {
		name := reflect.TypeOf(eff).Name()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: %v", name, p)
				}
			}()
			io := x.Do(eff)
			if want := !isCompletion(name); io != want {
				t.Errorf("%s: Do reported I/O=%v, want %v", name, io, want)
			}
		}()
	}
}

func isCompletion(typeName string) bool {
	n := len("Complete")
	return len(typeName) > n && typeName[len(typeName)-n:] == "Complete"
}

// TestRequests checks the request each I/O effect builds and the event its
// failure comes back as.
func TestRequests(t *testing.T) {
	bs := []metadata.BookieID{"b1", "b2"}
	cases := []struct {
		eff   ledger.Effect
		check func(*wire.Request) error
		event ledger.Event
	}{
		{ledger.SendAdd{Bookies: bs, EntryID: 3, LAC: 2, Length: 10, Payload: []byte("x"), Recovery: true},
			func(r *wire.Request) error {
				e, err := mustDigester().VerifyEntry(r.Add.Body, 9, 3)
				if r.Header.Op != wire.OpAddEntry || r.Add.Flag != wire.AddFlagRecoveryAdd || r.Header.Priority != wire.HighPriority ||
					err != nil || e.LAC != 2 || e.Length != 10 || string(e.Payload) != "x" || len(r.Add.MasterKey) != digest.MasterKeySize {
					return fmt.Errorf("add %+v (%v)", r.Add, err)
				}
				return nil
			}, ledger.AddResponse{Bookie: "b2", EntryID: 3, Err: errNoBookie}},
		{ledger.SendRead{Bookies: bs, EntryID: -1, Fence: true},
			func(r *wire.Request) error {
				if r.Header.Op != wire.OpReadEntry || r.Read.Flag != wire.ReadFlagFenceLedger || !r.Read.HasMasterKey || r.Read.EntryID != -1 {
					return fmt.Errorf("fence read %+v", r.Read)
				}
				return nil
			}, ledger.ReadResponse{Bookie: "b2", EntryID: -1, Err: errNoBookie}},
		{ledger.SendReadLAC{Bookies: bs},
			func(r *wire.Request) error {
				if r.Header.Op != wire.OpReadLAC || r.ReadLACLedgerID != 9 {
					return fmt.Errorf("read lac %+v", r)
				}
				return nil
			}, ledger.ReadLACResponse{Bookie: "b2", Err: errNoBookie}},
		{ledger.SendLongPoll{Bookies: bs, PreviousLAC: 4, TimeoutMs: 100},
			func(r *wire.Request) error {
				if r.Header.Op != wire.OpReadEntry || r.Read.Flag != wire.ReadFlagEntryPiggyback || r.Read.PreviousLAC != 4 || r.Read.TimeoutMs != 100 {
					return fmt.Errorf("long poll %+v", r.Read)
				}
				return nil
			}, ledger.LongPollResponse{Bookie: "b2", EntryID: -1, Err: errNoBookie}},
		{ledger.SendForce{ID: 5, Bookies: bs},
			func(r *wire.Request) error {
				if r.Header.Op != wire.OpForceLedger || r.ForceLedgerID != 9 {
					return fmt.Errorf("force %+v", r)
				}
				return nil
			}, ledger.ForceResponse{ID: 5, Bookie: "b2", Err: errNoBookie}},
	}
	for _, c := range cases {
		x, rec, evs := newTestExecutor(t)
		x.Do(c.eff)
		if len(rec.reqs) != 2 || rec.to[0] != "b1" || rec.to[1] != "b2" {
			t.Fatalf("%T: sent to %v", c.eff, rec.to)
		}
		if err := c.check(&rec.reqs[1]); err != nil {
			t.Errorf("%T: %v", c.eff, err)
		}
		if len(*evs) != 2 || !reflect.DeepEqual((*evs)[1], c.event) {
			t.Errorf("%T: events %v, want last %v", c.eff, *evs, c.event)
		}
	}

	x, rec, evs := newTestExecutor(t)
	x.Do(ledger.SendWriteLAC{Bookies: bs, LAC: 4})
	if len(rec.reqs) != 2 || rec.reqs[0].Header.Op != wire.OpWriteLAC || rec.reqs[0].WriteLAC.LAC != 4 || len(*evs) != 0 {
		t.Errorf("write LAC: %v, events %v", rec.reqs, *evs)
	}
	x.Do(ledger.WriteMetadata{})
	x.Do(ledger.ReadMetadata{})
	if want := []ledger.Event{ledger.MetadataWritten{Version: 7}, ledger.MetadataRead{Err: metadata.ErrNoSuchLedger}}; !reflect.DeepEqual(*evs, want) {
		t.Errorf("metadata events %v, want %v", *evs, want)
	}
}

func mustDigester() *digest.Digester {
	d, err := digest.New(digest.CRC32C, []byte("pw"))
	if err != nil {
		panic(err)
	}
	return d
}

// scripted is a Machine for the executor's tests: on each event it looks
// up the effects to emit next in react; it is Done once done says so.
type scripted struct {
	start []ledger.Effect
	react func(ledger.Event) []ledger.Effect
	ready []ledger.Effect
	done  bool
	steps []ledger.Event
}

func (m *scripted) Start() { m.ready = append(m.ready, m.start...) }
func (m *scripted) Step(ev ledger.Event) {
	m.steps = append(m.steps, ev)
	m.ready = append(m.ready, m.react(ev)...)
}
func (m *scripted) Ready() []ledger.Effect {
	out := m.ready
	m.ready = nil
	return out
}
func (m *scripted) Done() bool                  { return m.done }
func (m *scripted) TickInterval() time.Duration { return 0 }

// TestReentrantDo: a Send that fails at once (as internal/transport does
// when closed or backing off a connect) into an Emit that steps the
// machine on the same stack, as the simulator's does, runs a nested Do in
// the middle of the outer add's loop over its bookies. Every bookie must
// still be sent its own entry's request and body.
func TestReentrantDo(t *testing.T) {
	dig := mustDigester()
	mk := digest.MasterKey([]byte("pw"))
	rec := &recorder{}
	bs := []metadata.BookieID{"b1", "b2", "b3"}
	nested := false
	m := &scripted{react: func(ev ledger.Event) []ledger.Effect {
		if r, ok := ev.(ledger.AddResponse); ok && r.EntryID == 3 && !nested {
			// The machine moves on while entry 3 is still being sent: it
			// sends entry 7 (and a read) from inside the add of entry 3.
			nested = true
			return []ledger.Effect{
				ledger.SendAdd{Bookies: bs, EntryID: 7, LAC: 6, Length: 70, Payload: []byte("seven")},
				ledger.SendRead{Bookies: bs[:1], EntryID: 5},
			}
		}
		return nil
	}}
	var x *Executor
	x = New(Config{LedgerID: 9, Digester: dig, MasterKey: mk[:], Bookies: rec, Store: rec,
		Emit: func(ev ledger.Event) {
			m.Step(ev)
			for _, eff := range m.Ready() {
				x.Do(eff)
			}
		}})
	x.Do(ledger.SendAdd{Bookies: bs, EntryID: 3, LAC: 2, Length: 30, Payload: []byte("three")})
	if !nested {
		t.Fatal("the machine never stepped re-entrantly")
	}
	want := map[int64]string{3: "three", 7: "seven"}
	sent := map[int64][]string{}
	for i, r := range rec.reqs {
		if r.Header.Op != wire.OpAddEntry {
			continue
		}
		e, err := dig.VerifyEntry(r.Add.Body, 9, r.Add.EntryID)
		if err != nil {
			t.Errorf("add of entry %d to %s: %v", r.Add.EntryID, rec.to[i], err)
			continue
		}
		if string(e.Payload) != want[r.Add.EntryID] {
			t.Errorf("add of entry %d to %s carries payload %q", r.Add.EntryID, rec.to[i], e.Payload)
		}
		sent[r.Add.EntryID] = append(sent[r.Add.EntryID], rec.to[i])
	}
	for id := range want {
		if len(sent[id]) != len(bs) {
			t.Errorf("entry %d sent to %v, want every bookie of %v", id, sent[id], bs)
		}
	}
	// Once the nesting unwound, the scratch space works for the next add.
	rec.reqs, rec.to = nil, nil
	x.Do(ledger.SendAdd{Bookies: bs[:1], EntryID: 8, LAC: 7, Length: 80, Payload: []byte("eight")})
	if e, err := dig.VerifyEntry(rec.reqs[0].Add.Body, 9, 8); err != nil || string(e.Payload) != "eight" {
		t.Errorf("add after the nested one: %v %q", err, e.Payload)
	}
}

// holder is a Bookies that keeps each callback for the test to call (an
// answer still on the wire), or calls it at once when answerNow is set.
type holder struct {
	answerNow bool
	held      []func(*wire.Response, error)
}

func (h *holder) Send(_ string, _ int64, _ *wire.Request, cb func(*wire.Response, error)) {
	if h.answerNow {
		cb(nil, errNoBookie)
		return
	}
	h.held = append(h.held, cb)
}

// readLACMachine sends one READ_LAC to b1 and is Done at its answer.
func readLACMachine() *scripted {
	m := &scripted{start: []ledger.Effect{ledger.SendReadLAC{Bookies: []metadata.BookieID{"b1"}}}}
	m.react = func(ev ledger.Event) []ledger.Effect {
		if _, ok := ev.(ledger.ReadLACResponse); ok {
			m.done = true
		}
		return nil
	}
	return m
}

// TestRunAgain: an executor with its own queue runs one machine after
// another; each Run gets the answers of its own requests, and a late
// answer to an abandoned Run reaches no later one.
func TestRunAgain(t *testing.T) {
	h := &holder{}
	rec := &recorder{}
	x := New(Config{LedgerID: 9, Digester: mustDigester(), Bookies: h, Store: rec})
	noDeliver := func(eff ledger.Effect) { t.Errorf("delivered %T", eff) }
	// The bound only turns a hang (the bug) into a failure; a correct Run
	// returns as soon as its answer is queued.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Run 1 is stopped with its request unanswered.
	stop := make(chan struct{})
	close(stop)
	m1 := readLACMachine()
	if err := x.Run(ctx, nil, stop, m1, m1.Start, noDeliver); !errors.Is(err, ErrStopped) {
		t.Fatalf("run 1: %v, want ErrStopped", err)
	}
	if len(h.held) != 1 {
		t.Fatalf("run 1 sent %d requests, want 1", len(h.held))
	}
	late := h.held[0]

	// Run 2 and 3 are answered at once and finish.
	h.answerNow = true
	for i := 2; i <= 3; i++ {
		m := readLACMachine()
		if err := x.Run(ctx, nil, nil, m, m.Start, noDeliver); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if len(m.steps) != 1 {
			t.Errorf("run %d stepped %v, want its one answer", i, m.steps)
		}
	}

	// Run 1's late answer arrives between runs: it is dropped, and run 4
	// steps its own answer alone.
	late(nil, errors.New("late answer to run 1"))
	m4 := readLACMachine()
	if err := x.Run(ctx, nil, nil, m4, m4.Start, noDeliver); err != nil {
		t.Fatalf("run 4: %v", err)
	}
	if want := []ledger.Event{ledger.ReadLACResponse{Bookie: "b1", Err: errNoBookie}}; !reflect.DeepEqual(m4.steps, want) {
		t.Errorf("run 4 stepped %v, want %v", m4.steps, want)
	}

	// Outside Run, the executor has no loop to answer to: Do says so.
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("Do outside Run on an executor with its own queue did not panic")
			}
		}()
		x.Do(ledger.SendReadLAC{Bookies: []metadata.BookieID{"b1"}})
	}()
}

// TestRequestConstructors: the constructors the tools outside a machine
// use set each option only when asked; a plain add or read carries no
// flag and no priority.
func TestRequestConstructors(t *testing.T) {
	mk, body := []byte("key"), []byte("body")
	plain := AddRequest(3, 4, mk, body, 0)
	if plain.Header.Op != wire.OpAddEntry || plain.Has != wire.BodyAdd || plain.Add.LedgerID != 3 || plain.Add.EntryID != 4 ||
		string(plain.Add.MasterKey) != "key" || string(plain.Add.Body) != "body" ||
		plain.Add.Flag != 0 || plain.Add.HasWriteFlags || plain.Header.Priority != 0 {
		t.Errorf("plain add %+v", plain)
	}
	both := AddRequest(3, 4, mk, body, AddRecovery|AddDeferredSync)
	if both.Add.Flag != wire.AddFlagRecoveryAdd || both.Header.Priority != 0 ||
		!both.Add.HasWriteFlags || both.Add.WriteFlags != wire.WriteFlagDeferredSync {
		t.Errorf("recovery deferred-sync add %+v", both)
	}
	// Re-replication's RECOVERY_ADD has no priority (Java's
	// LedgerFragmentReplicator); the recovery's write-back asks for it.
	high := AddRequest(3, 4, mk, body, AddRecovery|AddHighPriority)
	if high.Add.Flag != wire.AddFlagRecoveryAdd || high.Header.Priority != wire.HighPriority || high.Add.HasWriteFlags {
		t.Errorf("high-priority recovery add %+v", high)
	}
	read := ReadRequest(3, 4)
	if read.Header.Op != wire.OpReadEntry || read.Has != wire.BodyRead || read.Read.LedgerID != 3 || read.Read.EntryID != 4 ||
		read.Read.Flag != 0 || read.Read.HasMasterKey || read.Header.Priority != 0 || read.Read.HasPreviousLAC {
		t.Errorf("read %+v", read)
	}
	fence := FenceReadRequest(3, 4, mk)
	if fence.Read.Flag != wire.ReadFlagFenceLedger || !fence.Read.HasMasterKey || string(fence.Read.MasterKey) != "key" ||
		fence.Header.Priority != wire.HighPriority || fence.Read.EntryID != 4 {
		t.Errorf("fence read %+v", fence)
	}
	lac := ReadLACRequest(3)
	if lac.Header.Op != wire.OpReadLAC || lac.Has != wire.BodyReadLAC || lac.ReadLACLedgerID != 3 {
		t.Errorf("read LAC %+v", lac)
	}
}
