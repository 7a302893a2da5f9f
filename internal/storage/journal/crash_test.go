package journal

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

var crashSeed = flag.Uint64("crash-seed", 0, "seed of the crash tests (0: derive from the clock and print it)")

func seedFor(t *testing.T) uint64 {
	s := *crashSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash-seed=%d)", s, s)
	return s
}

// crashPoint is a crash clone with the acks that had been delivered when
// it was taken.
type crashPoint struct {
	fs      *vfs.MemFS
	acked   map[[2]int64]Position
	pct     int
	atSync  bool
	comment string
}

// crasher takes crash clones of mem, keeping a random share (0, 30 or 100
// percent) of the unsynced data, chosen by a seeded source.
type crasher struct {
	mu     sync.Mutex
	mem    *vfs.MemFS
	rng    *rand.Rand
	rec    *recorder
	points []crashPoint
}

func (c *crasher) crash(atSync bool, comment string) { c.crashSynced(atSync, comment, nil) }

// crashSynced is crash where the records in synced (synced, not yet
// acknowledged) must survive too.
func (c *crasher) crashSynced(atSync bool, comment string, synced map[[2]int64]Position) {
	// Snapshot the acks first: everything acknowledged before the clone
	// must be in it.
	acked := c.rec.acked()
	maps.Copy(acked, synced)
	c.mu.Lock()
	defer c.mu.Unlock()
	pct := []int{0, 30, 100}[c.rng.IntN(3)]
	clone := c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: c.rng})
	c.points = append(c.points, crashPoint{clone, acked, pct, atSync, comment})
}

// syncInjector crashes just before every sync of the journal's files and
// directory: the moment at which the most unsynced data is at stake.
func (c *crasher) syncInjector() errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) && strings.HasPrefix(op.Path, testDir) {
			c.crash(true, op.Path)
		}
		return nil
	})
}

// TestCrashAtEverySyncPoint appends from several goroutines, crash-clones
// the file system before every sync (and at random moments), and checks
// that each clone reopens and replays every acknowledged entry byte-exact,
// in order per ledger, with nothing half-visible. Every fourth clone is
// then written to and crashed again, to check a second incarnation too.
func TestCrashAtEverySyncPoint(t *testing.T) {
	seed := seedFor(t)
	mem := vfs.NewCrashableMem()
	rec := newRecorder()
	c := &crasher{mem: mem, rng: rand.New(rand.NewPCG(seed, 1)), rec: rec}
	j, err := Open(errorfs.Wrap(mem, c.syncInjector()), testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // crashes at random moments, between syncs
		defer bg.Done()
		rng := rand.New(rand.NewPCG(seed, 2))
		for i := 0; i < 40; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(rng.IntN(300)) * time.Microsecond):
			}
			c.crash(false, "random")
		}
	}()
	appendLedgersMode(t, j, rec, 4, 150, true)
	close(stop)
	bg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	c.crash(false, "after close")
	syncs := 0
	for _, p := range c.points {
		if p.atSync {
			syncs++
		}
	}
	t.Logf("%d crash points (%d at syncs), %d acks", len(c.points), syncs, len(rec.acked()))
	if syncs < 20 {
		t.Fatalf("only %d sync points: the test is not exercising group commit", syncs)
	}
	for i, p := range c.points {
		checkCrashPoint(t, i, p, i%4 == 0, seed)
	}
}

func checkCrashPoint(t *testing.T, i int, p crashPoint, again bool, seed uint64) {
	t.Helper()
	opts := smallOpts()
	j, err := Open(p.fs, testDir, opts)
	if err != nil {
		t.Fatalf("crash point %d (%s, keep %d%% unsynced): reopen: %v", i, p.comment, p.pct, err)
	}
	var got []replayed
	err = j.Replay(Position{}, func(pos Position, r Record) error {
		r.Body = append([]byte(nil), r.Body...)
		got = append(got, replayed{pos, r})
		return nil
	})
	if err != nil {
		t.Fatalf("crash point %d (%s, keep %d%%): replay: %v", i, p.comment, p.pct, err)
	}
	checkReplay(t, got, p.acked)
	if !again {
		j.Close()
		return
	}
	// Second incarnation: append a new ledger and crash again before a
	// random sync (or after the last one).
	mem := p.fs
	rec := newRecorder()
	c := &crasher{mem: mem, rng: rand.New(rand.NewPCG(seed, uint64(i)+3)), rec: rec}
	j.Close()
	crashAt := c.rng.IntN(12)
	var syncs atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) && strings.HasPrefix(op.Path, testDir) {
			if syncs.Add(1)-1 == int64(crashAt) {
				c.crash(true, "second incarnation")
			}
		}
		return nil
	})
	j2, err := Open(errorfs.Wrap(mem, inj), testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 30; e++ {
		if _, err := j2.AppendSync(Record{Type: TypeAddEntry, LedgerID: 100, EntryID: e, Body: body(100, e)}); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		rec.acks[[2]int64{100, e}] = ack{} // position checked below via replay order only
		rec.mu.Unlock()
	}
	j2.Close()
	if len(c.points) == 0 {
		c.crash(false, "second incarnation, after close")
	}
	q := c.points[0]
	j3, err := Open(q.fs, testDir, opts)
	if err != nil {
		t.Fatalf("crash point %d, second crash: reopen: %v", i, err)
	}
	defer j3.Close()
	got = got[:0]
	if err := j3.Replay(Position{}, func(pos Position, r Record) error {
		r.Body = append([]byte(nil), r.Body...)
		got = append(got, replayed{pos, r})
		return nil
	}); err != nil {
		t.Fatalf("crash point %d, second crash: replay: %v", i, err)
	}
	// Everything acked in the first incarnation survives both crashes; of
	// the second, every entry acked before the second crash.
	checkReplay(t, got, p.acked)
	n := 0
	for _, r := range got {
		if r.rec.LedgerID == 100 {
			n++
		}
	}
	if want := len(q.acked); n < want {
		t.Fatalf("crash point %d, second crash: %d entries of ledger 100 replayed, %d were acked", i, n, want)
	}
}

// groupKeys returns the (ledger, entry) keys and positions of the records
// of groups appended by appendLedgers.
func groupKeys(batch []*group) map[[2]int64]Position {
	m := map[[2]int64]Position{}
	for _, g := range batch {
		for i, cb := range g.cbs {
			if w, ok := cb.(*waitCB); ok {
				m[w.key] = Position{File: g.fileID, Offset: g.ends[i]}
			}
		}
	}
	return m
}

// TestCrashAtPipelinePoints crash-clones the file system at each point of
// the write pipeline where a crash matters (the package comment's P1..P5),
// keeping a random share of the unsynced data, and checks that every clone
// reopens and replays every acknowledged entry (and, after an fdatasync
// returned, every entry it covered) byte-exact at its position:
//   - group N+1 written while group N's fdatasync has not completed;
//   - group N's fdatasync returned, group N+2 not yet written;
//   - zeros written by the preallocator, not yet synced;
//   - the next file just created ahead;
//   - rotation: switched to the file created ahead, nothing written to it.
func TestCrashAtPipelinePoints(t *testing.T) {
	seed := seedFor(t)
	mem := vfs.NewCrashableMem()
	rec := newRecorder()
	c := &crasher{mem: mem, rng: rand.New(rand.NewPCG(seed, 7)), rec: rec}
	const (
		writeWhileSyncing = iota
		afterSync
		zerosUnsynced
		createdAhead
		rotated
		kinds
	)
	names := [kinds]string{"group N+1 written before sync N completed", "sync N returned, N+2 not written",
		"preallocated zeros not yet synced", "next file created ahead", "rotated to the file created ahead"}
	var counts [kinds]atomic.Int64
	const perKind = 40 // crash clones per kind (each copies the file system)
	take := func(kind int, synced map[[2]int64]Position, detail string) {
		if counts[kind].Add(1) <= perKind {
			c.crashSynced(false, names[kind]+": "+detail, synced)
		}
	}
	var depthErr atomic.Value
	opts := smallOpts()
	opts.hooks = &testHooks{
		beforeHandOff: func(g *group, unsynced int) {
			if unsynced > 1 {
				depthErr.Store(fmt.Sprintf("file %d offset %d written with %d groups unsynced before it (P1)", g.fileID, g.base, unsynced))
			}
			if unsynced == 1 {
				take(writeWhileSyncing, nil, fmt.Sprintf("file %d offset %d", g.fileID, g.base))
			}
		},
		afterSync: func(batch []*group) {
			take(afterSync, groupKeys(batch), fmt.Sprintf("%d groups", len(batch)))
		},
		zerosWritten: func(id uint64, from, to int64) {
			take(zerosUnsynced, nil, fmt.Sprintf("file %d [%d, %d)", id, from, to))
		},
		createdAhead: func(id uint64) { take(createdAhead, nil, fmt.Sprintf("file %d", id)) },
		rotated:      func(id uint64) { take(rotated, nil, fmt.Sprintf("file %d", id)) },
	}
	j, err := Open(mem, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Many appends outstanding, so that a group is always queued while
	// another syncs.
	appendLedgers(t, j, rec, 8, 400)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if msg := depthErr.Load(); msg != nil {
		t.Fatal(msg)
	}
	for k := range kinds {
		t.Logf("%s: %d times", names[k], counts[k].Load())
		if counts[k].Load() == 0 {
			t.Errorf("the pipeline never reached %q", names[k])
		}
	}
	for i, p := range c.points {
		opts := smallOpts()
		j, err := Open(p.fs, testDir, opts)
		if err != nil {
			t.Fatalf("crash point %d (%s, keep %d%% unsynced): reopen: %v", i, p.comment, p.pct, err)
		}
		var got []replayed
		if err := j.Replay(Position{}, func(pos Position, r Record) error {
			r.Body = append([]byte(nil), r.Body...)
			got = append(got, replayed{pos, r})
			return nil
		}); err != nil {
			t.Fatalf("crash point %d (%s, keep %d%%): replay: %v", i, p.comment, p.pct, err)
		}
		checkReplay(t, got, p.acked)
		// The new incarnation writes on, and a replay of the whole
		// directory (old files and new) still holds everything.
		if _, err := j.AppendSync(Record{Type: TypeFence, LedgerID: 99}); err != nil {
			t.Fatalf("crash point %d: append after reopening: %v", i, err)
		}
		j.Close()
		all, err := replayAll(t, p.fs, Position{})
		if err != nil {
			t.Fatalf("crash point %d (%s): replay after a second incarnation: %v", i, p.comment, err)
		}
		checkReplay(t, all, p.acked)
	}
}
