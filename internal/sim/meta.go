package sim

import (
	"context"
	"errors"
	"time"

	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
)

// metaService is the metadata store as the simulated clients see it: the
// real memory driver (synchronous, no goroutines on the ledger path),
// reached with a delay each way. Faults go through the driver's Hook: a
// failure before an operation (nothing changes), or after a write took
// effect (an ambiguous commit: the client sees an error although the write
// is stored, as when an etcd reply is lost).
type metaService struct {
	w     *world
	store *memory.Store
	drv   *memory.Driver
	// fault is what the Hook does to the operation being run: set by the
	// loop right before it calls the driver.
	fault struct {
		before, after error
	}
}

var (
	errMetaUnavailable = errors.New("sim: metadata store unavailable")
	errMetaAmbiguous   = errors.New("sim: metadata store reply lost after commit")
)

func newMetaService(w *world) *metaService {
	ms := &metaService{w: w}
	ms.store = memory.NewStore(memory.Options{Clock: w.clock, Rand: zeroReader{}})
	ms.store.SetHook(func(_ context.Context, op memory.Op, _ string, phase memory.Phase) error {
		if phase == memory.Before {
			return ms.fault.before
		}
		return ms.fault.after
	})
	ms.drv = ms.store.Open()
	return ms
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// do runs fn against the driver with no fault (the simulator's own
// operations: creating ledgers, reading for checks).
func (ms *metaService) do(fn func(ctx context.Context)) {
	ms.fault.before, ms.fault.after = nil, nil
	fn(context.Background())
}

// delay draws a one-way delay to the store for client a.
func (ms *metaService) delay(a *actor) time.Duration {
	w := ms.w
	d := between(a.rng, 200*time.Microsecond, 3*time.Millisecond)
	if w.faultChanceOn(a.rng, FaultMeta, 40) {
		d += between(a.rng, 20*time.Millisecond, 300*time.Millisecond)
	}
	return d
}

// drawFault decides the fault of one operation of client a.
func (ms *metaService) drawFault(a *actor, write bool) {
	w := ms.w
	ms.fault.before, ms.fault.after = nil, nil
	switch {
	case w.faultChanceOn(a.rng, FaultMeta, 30):
		ms.fault.before = errMetaUnavailable
	case write && w.faultChanceOn(a.rng, FaultMeta, 20):
		ms.fault.after = errMetaAmbiguous
	}
}

// write carries client a's compare-and-set to the store and its result
// back to a.
func (ms *metaService) write(a *actor, md *metadata.LedgerMetadata, expected metadata.Version, done func(metadata.Version, error)) {
	w := ms.w
	id := a.led.id
	w.after(ms.delay(a), func() {
		prev, prevVer := ms.read(id)
		ms.drawFault(a, true)
		v, err := ms.drv.WriteLedger(context.Background(), id, md, expected)
		if err == nil || errors.Is(err, errMetaAmbiguous) {
			cur, curVer := ms.read(id)
			if curVer != prevVer {
				w.check.metadataWritten(a.led, prev, cur, a.name)
			}
		}
		w.logf("meta: %s write expected=v%d %s: v%d %s", a.name, expected, ledger.FormatMetadata(md), v, errText(err))
		w.rec.metaApplied(a, err)
		ms.fault.before, ms.fault.after = nil, nil
		w.after(ms.delay(a), func() { done(v, err) })
	})
}

// readFor carries client a's metadata read to the store and its result
// back to a.
func (ms *metaService) readFor(a *actor, done func(*metadata.LedgerMetadata, metadata.Version, error)) {
	w := ms.w
	id := a.led.id
	w.after(ms.delay(a), func() {
		ms.drawFault(a, false)
		md, v, err := ms.drv.ReadLedger(context.Background(), id)
		w.logf("meta: %s read: v%d %s %s", a.name, v, ledger.FormatMetadata(md), errText(err))
		w.rec.metaApplied(a, err)
		ms.fault.before, ms.fault.after = nil, nil
		w.after(ms.delay(a), func() { done(md, v, err) })
	})
}

// read returns the stored metadata of ledger id (nil if none).
func (ms *metaService) read(id int64) (*metadata.LedgerMetadata, metadata.Version) {
	var md *metadata.LedgerMetadata
	var v metadata.Version
	ms.do(func(ctx context.Context) {
		md, v, _ = ms.drv.ReadLedger(ctx, id)
	})
	return md, v
}

// foreignWrite rewrites a ledger's metadata unchanged, as another client
// (say AutoRecovery touching custom metadata) might: the version moves, so
// the next CAS of every client holding the old version conflicts.
func (ms *metaService) foreignWrite(l *ledgerRec) {
	md, v := ms.read(l.id)
	if md == nil {
		return
	}
	var nv metadata.Version
	var err error
	ms.do(func(ctx context.Context) { nv, err = ms.drv.WriteLedger(ctx, l.id, md, v) })
	ms.w.logf("meta: foreign write of ledger %d: v%d -> v%d %s", l.id, v, nv, errText(err))
	if err == nil {
		ms.w.rec.foreignWrite(l)
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
