package ledgerstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/foliodb/folio/internal/storage"
)

// crasher takes crash clones of a MemFS at chosen moments, each paired with
// the acknowledgements made before it.
type crasher struct {
	mem    *vfs.MemFS
	acks   *ackLog
	pct    int // UnsyncedDataPercent of each clone
	max    int
	on     atomic.Bool
	mu     sync.Mutex
	rng    *rand.Rand
	prob   float64
	clones []crashPoint
}

type crashPoint struct {
	where string
	fs    *vfs.MemFS
	acks  *ackLog
}

// maybe crash-clones with probability p (from the seeded rng).
func (c *crasher) maybe(where string, p float64) {
	if !c.on.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.clones) >= c.max || c.rng.Float64() >= p {
		return
	}
	// Acknowledgements first, then the clone: every ack in the snapshot
	// was durable before the instant the clone captures.
	acks := c.acks.snapshot()
	fs := c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.pct, RNG: c.rng})
	c.clones = append(c.clones, crashPoint{where: where, fs: fs, acks: acks})
}

// completion records an add's outcome in the ack log.
type completion struct {
	acks    *ackLog
	l, e    int64
	body    []byte
	fenced  *atomic.Bool
	release func()
}

func (c *completion) AddComplete(err error) {
	if err == nil {
		c.acks.ack(c.l, c.e, c.body)
	} else if errors.Is(err, storage.ErrFenced) {
		c.fenced.Store(true)
	}
	c.release()
}

// runCrashWorkload runs concurrent adds, fences, recovery adds, deletes,
// checkpoints and GC on a crashable MemFS, crash-cloning at sync points and
// between checkpoint steps; then it reopens every clone and checks it
// against the acknowledgements made before that clone.
func runCrashWorkload(t *testing.T, seed uint64, pct int) {
	rng := rand.New(rand.NewPCG(seed, 0x1ed9e7))
	mem := vfs.NewCrashableMem()
	acks := newAckLog()
	cr := &crasher{mem: mem, acks: acks, pct: pct, max: 10, rng: rand.New(rand.NewPCG(seed, 2))}
	syncProb := 0.02
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			cr.maybe("before sync of "+op.Path, syncProb)
		}
		return nil
	}))
	cfg := testConfig()
	cfg.MaxAddWait = 5 * time.Second
	cfg.Manual = false
	cfg.CheckpointInterval = 15 * time.Millisecond
	cfg.GCInterval = 40 * time.Millisecond
	// Every tick of the loop compacts: minor at 0.5 each tick.
	cfg.Compaction = &CompactionPolicy{MinorThreshold: 0.5, MinorInterval: cfg.GCInterval}
	cfg.CompactionBytesPerSecond = -1
	began := time.Now()
	s := mustOpen(t, fs, cfg)
	s.setHook(func(point string) {
		switch point {
		case "checkpoint:flushed", "checkpoint:synced", "checkpoint:recorded", "delete:checkpointed":
			cr.maybe(point, 0.15)
		}
	})
	cr.on.Store(true)

	const writers = 6
	const ledgersPerWriter = 4
	const entriesPerLedger = 60
	var started sync.Map // ledger id → true once a writer began it
	var deleting sync.Map
	var writersWG, fencerWG sync.WaitGroup
	stopFencer := make(chan struct{})
	for w := 0; w < writers; w++ {
		writersWG.Add(1)
		wseed := rng.Uint64()
		go func() {
			defer writersWG.Done()
			r := rand.New(rand.NewPCG(wseed, 3))
			window := make(chan struct{}, 8)
			for k := 0; k < ledgersPerWriter; k++ {
				l := int64(w*100 + k + 1)
				started.Store(l, true)
				var fenced atomic.Bool
				for e := int64(0); e < entriesPerLedger && !fenced.Load(); e++ {
					body := entryBody(l, e, e-1, int(seed), r.IntN(1500)+1)
					acks.try(l, e, body)
					window <- struct{}{}
					s.AddEntry(l, e, masterKey(l), body, storage.AddOptions{},
						&completion{acks: acks, l: l, e: e, body: body, fenced: &fenced, release: func() { <-window }})
				}
				for range cap(window) {
					window <- struct{}{}
				}
				for range cap(window) {
					<-window
				}
				if fenced.Load() {
					// Recovery writes one more entry past the fence.
					e := int64(entriesPerLedger + 1)
					body := entryBody(l, e, e-1, int(seed)+1, 64)
					acks.try(l, e, body)
					if err := addSync(t, s, l, e, body, storage.AddOptions{Recovery: true}); err == nil {
						acks.ack(l, e, body)
					}
				}
				if r.IntN(6) == 0 {
					deleting.Store(l, true)
					acks.mu.Lock()
					acks.deleted[l] = true
					acks.mu.Unlock()
					_ = s.DeleteLedger(context.Background(), l)
				}
			}
		}()
	}
	fencerWG.Add(1)
	go func() {
		defer fencerWG.Done()
		r := rand.New(rand.NewPCG(seed, 4))
		for {
			select {
			case <-stopFencer:
				return
			case <-time.After(time.Duration(r.IntN(4000)+500) * time.Microsecond):
			}
			l := int64(r.IntN(writers)*100 + r.IntN(ledgersPerWriter) + 1)
			if _, ok := started.Load(l); !ok || r.IntN(3) != 0 {
				continue
			}
			if _, ok := deleting.Load(l); ok {
				continue
			}
			if err := fence(t, s, l); err == nil {
				acks.fence(l)
			}
		}
	}()
	writersWG.Wait()
	close(stopFencer)
	fencerWG.Wait()
	cr.on.Store(true)
	cr.maybe("end", 1) // always keep one clone of the final state
	cr.on.Store(false)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.Err() != nil {
		t.Fatalf("store failed during the workload: %v", s.Err())
	}
	if len(acks.entries) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("seed %d pct %d: %d acks, %d fences, %d crash points; workload took %v", seed, pct, len(acks.entries), len(acks.fenced), len(cr.clones), time.Since(began))
	for i, cp := range cr.clones {
		func() {
			ccfg := testConfig()
			t0 := time.Now()
			s2, err := Open(cp.fs, ccfg)
			t1 := time.Now()
			defer func() { t.Logf("crash %d: reopen %v, verify+reopen %v", i, t1.Sub(t0), time.Since(t1)) }()
			if err != nil {
				t.Fatalf("seed %d crash %d (%s): reopen: %v", seed, i, cp.where, err)
			}
			defer s2.Close()
			t.Run(fmt.Sprintf("crash%d", i), func(t *testing.T) { cp.acks.verify(t, s2) })
			// Crash again right after replay: replay must be idempotent.
			mem2 := cp.fs.CrashClone(vfs.CrashCloneCfg{})
			s3, err := Open(mem2, ccfg)
			if err != nil {
				t.Fatalf("seed %d crash %d (%s): second reopen: %v", seed, i, cp.where, err)
			}
			s3.Close()
		}()
	}
}

// TestCrashConcurrentAddsAndFences runs seeds 1-4; CRASH_SEEDS=N runs 1..N.
func TestCrashConcurrentAddsAndFences(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if v := os.Getenv("CRASH_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("CRASH_SEEDS=%q: %v", v, err)
		}
		seeds = seeds[:0]
		for i := 1; i <= n; i++ {
			seeds = append(seeds, uint64(i))
		}
	}
	for _, seed := range seeds {
		for _, pct := range []int{0, 50} {
			t.Run(fmt.Sprintf("seed=%d/unsynced=%d%%", seed, pct), func(t *testing.T) {
				t.Logf("rerun: go test -run 'TestCrashConcurrentAddsAndFences/seed=%d/unsynced=%d%%' ./internal/storage/ledgerstore/", seed, pct)
				runCrashWorkload(t, seed, pct)
			})
		}
	}
}
