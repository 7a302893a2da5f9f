package sim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/wire"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// bookieNode is one simulated bookie: the real bookie.Bookie over a real
// ledgerstore.Store on an in-memory file system that can crash.
type bookieNode struct {
	w  *world
	id metadata.BookieID
	fs *vfs.MemFS

	store *ledgerstore.Store
	b     *bookie.Bookie
	// incarnation counts starts; work queued by an earlier incarnation is
	// dropped (the process it belonged to is gone).
	incarnation int
	up          bool
	paused      bool
	// held is the work that arrived while paused, run in order on resume.
	held []func()
	// collected are the deleted ledgers the garbage collector dropped.
	collected map[int64]bool
	// rng is the bookie's own random stream (its spawned work's delays,
	// its background work's periods).
	rng *rand.Rand
	// rejectBatch: the bookie answers BATCH_READ_ENTRY with EBADREQ
	// (bookie.Config.RejectBatchRead: one that does not serve batch
	// reads), so that batch readers fall back to single reads. Drawn from
	// a stream of its own, one bookie in six.
	rejectBatch bool
}

func newBookieNode(w *world, id metadata.BookieID) *bookieNode {
	return &bookieNode{w: w, id: id, fs: vfs.NewCrashableMem(), collected: map[int64]bool{}, rng: w.stream("bookie/" + string(id)),
		rejectBatch: w.stream("bookie-opts/"+string(id)).IntN(6) == 0}
}

// start opens the store (replaying the journal) and the bookie, and
// schedules the store's background work as loop events.
func (n *bookieNode) start() {
	w := n.w
	n.incarnation++
	inc := n.incarnation
	goFn := func(fn func()) {
		// Spawned work runs a little later, as a goroutine of a busy
		// bookie would: reads and fences overtake each other, and adds
		// (served on the caller's goroutine) overtake them.
		d := between(n.rng, 0, 500*time.Microsecond)
		if w.faultChanceOn(n.rng, FaultDelay, 100) {
			d += between(n.rng, time.Millisecond, 20*time.Millisecond)
		}
		w.after(d, func() { n.run(inc, fn) })
	}
	st, err := ledgerstore.Open(n.fs, ledgerstore.Config{
		JournalDirs:             []string{"/journal"},
		LedgerDirs:              []string{"/ledgers"},
		Clock:                   w.clock,
		WriteCacheBytes:         4 << 20,
		MaxAddWait:              -1,
		ReadCacheBytes:          -1,
		IndexCacheBytes:         256 << 10,
		MaxEntryLogBytes:        256 << 10,
		JournalPreallocBytes:    16 << 10,
		JournalMaxFileBytes:     128 << 10,
		JournalQueueWait:        -1,
		Manual:                  true,
		ManualJournal:           true,
		Go:                      goFn,
		DisableIndexCompactions: true,
		// A new store's id comes from the seed too (determinism rules).
		Entropy: rand.NewChaCha8(storeIDSeed(w.cfg.Seed, n.id)),
	})
	if err != nil {
		w.violate("BookieRestarts", -1, "bookie %s: the store does not open after a crash: %v", n.id, err)
		return
	}
	b, err := bookie.New(&fenceStore{Store: st}, bookie.Config{Clock: w.clock, Logger: quietLog, Go: goFn, RejectBatchRead: n.rejectBatch})
	if err != nil {
		st.Close()
		w.violate("BookieRestarts", -1, "bookie %s: %v", n.id, err)
		return
	}
	n.store, n.b = st, b
	n.up, n.paused, n.held = true, false, nil
	if n.rejectBatch {
		w.logf("bookie %s started (incarnation %d), refusing batch reads", n.id, inc)
	} else {
		w.logf("bookie %s started (incarnation %d)", n.id, inc)
	}
	n.schedule(inc, "journal", 500*time.Microsecond, 3*time.Millisecond, func() { n.stepJournals() })
	n.schedule(inc, "flush", 5*time.Millisecond, 40*time.Millisecond, func() {
		if err := st.FlushWriteCache(); err != nil {
			w.logf("bookie %s: flush: %v", n.id, err)
		}
	})
	n.schedule(inc, "checkpoint", 50*time.Millisecond, 400*time.Millisecond, func() {
		if err := st.Checkpoint(); err != nil {
			w.logf("bookie %s: checkpoint: %v", n.id, err)
		}
		// An eviction sweep on the same tick (no draw of its own, so the
		// schedules stay those of the seed): ledgers idle for two ticks
		// lose their in-memory state and reload it on next use, under
		// every fault the run injects.
		if _, err := st.EvictIdleLedgers(); err != nil {
			w.logf("bookie %s: evict: %v", n.id, err)
		}
	})
	n.schedule(inc, "gc", 20*time.Millisecond, 200*time.Millisecond, func() { n.gc() })
}

// gc is a round of the bookie's garbage collector: every ledger whose
// metadata was deleted is dropped from the store (in ledger creation
// order). DeleteLedger syncs the index before it returns, so a ledger
// collected once stays collected across crashes.
func (n *bookieNode) gc() {
	w := n.w
	for _, l := range w.ledgers {
		if !l.deleted || n.collected[l.id] {
			continue
		}
		if err := n.store.DeleteLedger(context.Background(), l.id); err != nil {
			w.logf("bookie %s: gc ledger %d: %v", n.id, l.id, err)
			continue
		}
		n.collected[l.id] = true
		w.logf("bookie %s: gc ledger %d", n.id, l.id)
	}
}

// schedule runs fn every [lo, hi] of virtual time while incarnation inc
// lives; a paused bookie skips its turns.
func (n *bookieNode) schedule(inc int, _ string, lo, hi time.Duration, fn func()) {
	w := n.w
	var tick func()
	tick = func() {
		if n.incarnation != inc || !n.up {
			return
		}
		if !n.paused {
			fn()
		}
		w.after(between(n.rng, lo, hi), tick)
	}
	w.after(between(n.rng, lo, hi), tick)
}

// run runs spawned work of incarnation inc, held while paused.
func (n *bookieNode) run(inc int, fn func()) {
	if n.incarnation != inc || !n.up {
		return
	}
	if n.paused {
		n.held = append(n.held, fn)
		return
	}
	fn()
}

func (n *bookieNode) stepJournals() {
	for range 64 {
		k, err := n.store.StepJournals()
		if err != nil {
			n.w.logf("bookie %s: journal: %v", n.id, err)
			return
		}
		if k == 0 {
			return
		}
	}
}

// receive is a request's arrival.
func (n *bookieNode) receive(a *actor, p *pendingReq, req *wire.Request) {
	w := n.w
	if !n.up {
		w.logf("%s -> %s %s: bookie down", a.name, n.id, p.desc)
		return
	}
	inc := n.incarnation
	n.run(inc, func() {
		w.stats.Requests++
		if p.op == wire.OpAddEntry {
			// The bookie stores (or refuses) an add here; it answers once
			// the journal commits.
			w.rec.arrive(a, p)
		}
		// A long-poll read waits in the bookie's own code: on the store's
		// LAC watch and a timer of the world's clock, both of which end
		// in work the bookie spawns (an event of this loop).
		n.b.Handle(req, &responder{n: n, inc: inc, a: a, p: p})
	})
}

// responder carries one answer back over the network and lets the checker
// see what the bookie confirmed.
type responder struct {
	n   *bookieNode
	inc int
	a   *actor
	p   *pendingReq
}

func (r *responder) Respond(resp *wire.Response) {
	n, w := r.n, r.n.w
	if n.incarnation != r.inc || !n.up {
		return // the process that would have sent it is gone
	}
	desc := r.p.respDesc(resp)
	if r.p.op != wire.OpAddEntry {
		// A read (and its fence) runs in work the bookie spawns, right
		// before this answer.
		w.rec.arrive(r.a, r.p)
	}
	w.check.bookieAnswered(n.id, r.p, resp)
	w.logf("%s: %s %s -> %s", n.id, r.p.desc, r.a.name, desc)
	w.net.sendReply(r.a, n.id, r.p.epoch, r.p.txn, cloneResponse(resp), r.p.desc)
}

// fenceStore is the store the simulated bookie programs against: the real
// one, except that Fence, which waits for its journal record to be durable,
// makes the (manual) journal commit at once instead of blocking the loop.
type fenceStore struct {
	*ledgerstore.Store
}

var errFenceNotDurable = errors.New("sim: fence record not durable after a journal commit")

// Fence sets the fence and queues its record with a context that is
// already done (ledgerstore.Store.Fence then returns at once with the
// context's error, the record queued), commits the journal, and asks
// again: the fence is then durable and Fence answers without waiting.
func (f *fenceStore) Fence(ctx context.Context, ledgerID int64, masterKey []byte) error {
	done, cancel := context.WithCancel(ctx)
	cancel()
	err := f.Store.Fence(done, ledgerID, masterKey)
	if !errors.Is(err, context.Canceled) {
		return err
	}
	for range 64 {
		if k, err := f.Store.StepJournals(); err != nil || k == 0 {
			break
		}
	}
	if err := f.Store.Fence(done, ledgerID, masterKey); err != nil {
		if errors.Is(err, context.Canceled) {
			return errFenceNotDurable
		}
		return err
	}
	return nil
}

// crash kills the bookie: connections reset, the file system keeps what
// was synced and a seeded share of the rest.
func (n *bookieNode) crash() {
	w := n.w
	keep := w.rng.IntN(101)
	w.logf("bookie %s crashes (keeping %d%% of unsynced blocks)", n.id, keep)
	w.rec.bookieCrash(n, keep)
	w.stats.BookieCrashes++
	n.up = false
	n.incarnation++ // late completions of the old process are dropped
	image := crashImage(n.fs, w.rng, keep)
	n.stop()
	n.fs = image
	w.net.resetBookie(n.id)
	w.writableChanged()
}

// stop closes the bookie and its store (what Close writes goes to a file
// system that is being discarded or whose image was already taken).
func (n *bookieNode) stop() {
	if n.b != nil {
		n.b.Close()
		n.b = nil
	}
	if n.store != nil {
		_ = n.store.Close()
		n.store = nil
	}
	n.up = false
}

func (n *bookieNode) restart() {
	n.w.logf("bookie %s restarts", n.id)
	n.start()
	n.w.writableChanged()
}

func (n *bookieNode) pause() {
	n.paused = true
	n.w.logf("bookie %s paused", n.id)
}

func (n *bookieNode) resume() {
	n.paused = false
	held := n.held
	n.held = nil
	n.w.logf("bookie %s resumed (%d held)", n.id, len(held))
	for _, fn := range held {
		if n.up && !n.paused {
			fn()
		}
	}
}

func (n *bookieNode) String() string { return fmt.Sprintf("%s(up=%v paused=%v)", n.id, n.up, n.paused) }

// The events a bookie answer turns into, and their trace form.
func statusOfResponse(resp *wire.Response) wire.Status {
	if resp.Status != wire.StatusOK {
		return resp.Status
	}
	switch {
	case resp.Has&wire.BodyRead != 0:
		return resp.Read.Status
	case resp.Has&wire.BodyAdd != 0:
		return resp.Add.Status
	case resp.Has&wire.BodyReadLAC != 0:
		return resp.ReadLAC.Status
	case resp.Has&wire.BodyBatchRead != 0:
		return resp.BatchRead.Status
	}
	return resp.Status
}

// storeIDSeed derives the seed of bookie id's store-id entropy from the
// run's seed.
func storeIDSeed(seed uint64, id metadata.BookieID) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%d/%s", seed, id))
}
