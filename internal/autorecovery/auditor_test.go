package autorecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

// env is a memory store with registered bookies and ledgers on them.
type env struct {
	t     *testing.T
	st    *memory.Store
	md    *memory.Driver
	clk   *clock.Manual
	bks   map[metadata.BookieID]metadata.Session
	ctx   context.Context
	ledgs []int64
}

func newEnv(t *testing.T, bookies int) *env {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st := memory.NewStore(memory.Options{})
	md := st.Open()
	t.Cleanup(func() { md.Close() })
	e := &env{t: t, st: st, md: md, clk: clock.NewManual(time.Unix(1_700_000_000, 0)), bks: map[metadata.BookieID]metadata.Session{}, ctx: ctx}
	for i := range bookies {
		e.up(metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", i+1)), false)
	}
	// Ledgers over bookies 1..3 (metadatatest's default ensemble).
	for range 3 {
		m := metadatatest.NewLedgerMetadata(3, 2, 2)
		m.State, m.LastEntryID, m.Length = metadata.LedgerClosed, 10, 100
		id, _, err := md.CreateLedger(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		e.ledgs = append(e.ledgs, id)
	}
	return e
}

func (e *env) up(b metadata.BookieID, ro bool) {
	s := e.bks[b]
	if s == nil {
		var err error
		if s, err = e.md.OpenSession(e.ctx, metadata.SessionOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.bks[b] = s
	}
	if err := s.RegisterBookie(e.ctx, b, ro); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) down(b metadata.BookieID) {
	_ = e.bks[b].Close(e.ctx)
	delete(e.bks, b)
}

// auditor runs a bookie-audit-only auditor (its bookies are not reachable,
// so a ledger check would find every copy bad).
func (e *env) auditor(id string, drv metadata.Driver) (*Auditor, context.CancelFunc) {
	return e.startAuditor(AuditorConfig{Driver: drv, ID: metadata.BookieID(id), BookieCheckInterval: -1, LedgerCheckInterval: -1})
}

// startAuditor runs an auditor with cfg on the env's clock until the test
// ends or the returned cancel is called.
func (e *env) startAuditor(cfg AuditorConfig) (*Auditor, context.CancelFunc) {
	cfg.Clock = e.clk
	a, err := NewAuditor(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return a, cancel
}

func (e *env) marked() map[int64][]metadata.BookieID {
	rs, err := e.md.ListUnderReplicatedLedgers(e.ctx, 0, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int64][]metadata.BookieID{}
	for _, r := range rs {
		out[r.LedgerID] = r.MissingReplicas
	}
	return out
}

// The env's tests run in a synctest bubble: the auditors, their sessions
// and the store's watchers are goroutines of the bubble, and nothing in it
// moves on by itself once they are all blocked (the auditors' clock is
// manual, the store has no timers). So instead of polling, a test waits
// for that quiet point and looks: a condition that does not hold then
// never will without the test's next step, and one that must not hold is
// checked exactly, not for a while.

// eventually waits until the bubble is quiet and fails the test unless
// cond holds.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	synctest.Wait()
	if !cond() {
		e.t.Fatalf("not so once the auditors are idle: %s", what)
	}
}

// never waits until the bubble is quiet and fails the test if cond holds.
func (e *env) never(what string, cond func() bool) {
	e.t.Helper()
	synctest.Wait()
	if cond() {
		e.t.Fatalf("unexpected: %s", what)
	}
}

func (e *env) waitAuditor(want string) {
	e.t.Helper()
	e.eventually("auditor "+want, func() bool {
		a, err := e.md.Auditor(e.ctx)
		return err == nil && string(a) == want
	})
}

func TestAuditorMarksLostBookieAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		e.auditor("10.0.0.100:1", e.md)
		e.waitAuditor("10.0.0.100:1")
		e.down("10.0.0.2:3181")
		e.eventually("all ledgers marked", func() bool {
			m := e.marked()
			for _, id := range e.ledgs {
				if !slices.Equal(m[id], []metadata.BookieID{"10.0.0.2:3181"}) {
					return false
				}
			}
			return true
		})
	})
}

func TestAuditorReadOnlyIsNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		e.auditor("10.0.0.100:1", e.md)
		e.waitAuditor("10.0.0.100:1")
		e.up("10.0.0.2:3181", true) // switches to read-only
		e.never("a read-only bookie marked lost", func() bool { return len(e.marked()) > 0 })
		// A read-only bookie that shuts down is lost like any other.
		e.down("10.0.0.2:3181")
		e.eventually("marked after the read-only bookie stopped", func() bool { return len(e.marked()) == len(e.ledgs) })
	})
}

// #21 at the unit level, on an injected clock.
func TestAuditorLostBookieRecoveryDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 5)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(e.md.SetLostBookieRecoveryDelay(e.ctx, 60*time.Second))
		e.auditor("10.0.0.100:1", e.md)
		e.waitAuditor("10.0.0.100:1")
		// A new auditor waits the delay before its first audit.
		e.clk.Advance(61 * time.Second)

		// Rolling restart within the delay: nothing is marked.
		e.down("10.0.0.3:3181")
		synctest.Wait() // the auditor has seen it go
		e.clk.Advance(20 * time.Second)
		e.up("10.0.0.3:3181", false)
		synctest.Wait() // and come back
		e.clk.Advance(60 * time.Second)
		e.never("marked after a restart within the delay", func() bool { return len(e.marked()) > 0 })

		// Lost for good: marked once the delay has passed, not before.
		e.down("10.0.0.3:3181")
		synctest.Wait()
		e.clk.Advance(59 * time.Second)
		e.never("marked before the delay", func() bool { return len(e.marked()) > 0 })
		e.clk.Advance(2 * time.Second)
		e.eventually("marked after the delay", func() bool { return len(e.marked()) == len(e.ledgs) })
		for _, id := range e.ledgs {
			r, err := e.md.ReadUnderReplicatedLedger(e.ctx, id)
			must(err)
			must(e.md.MarkLedgerReplicated(e.ctx, id, r.Version))
		}
		e.up("10.0.0.3:3181", false)

		// Two lost bookies: at once.
		e.down("10.0.0.1:3181")
		e.down("10.0.0.2:3181")
		e.eventually("two lost bookies marked at once", func() bool {
			m := e.marked()
			return len(m) == len(e.ledgs) && len(m[e.ledgs[0]]) == 2
		})
		for _, id := range e.ledgs {
			r, err := e.md.ReadUnderReplicatedLedger(e.ctx, id)
			must(err)
			must(e.md.MarkLedgerReplicated(e.ctx, id, r.Version))
		}

		// Setting the delay to its current value audits now (triggeraudit):
		// bookies 1 and 2 are still gone.
		must(e.md.SetLostBookieRecoveryDelay(e.ctx, 60*time.Second))
		e.eventually("audit on re-setting the delay", func() bool { return len(e.marked()) == len(e.ledgs) })
	})
}

func TestAuditorDisabledMarksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		if err := e.md.SetReplicationEnabled(e.ctx, false); err != nil {
			t.Fatal(err)
		}
		a, _ := e.auditor("10.0.0.100:1", e.md)
		e.waitAuditor("10.0.0.100:1")
		e.down("10.0.0.1:3181")
		e.never("marked while disabled", func() bool { return len(e.marked()) > 0 })
		if err := e.md.SetReplicationEnabled(e.ctx, true); err != nil {
			t.Fatal(err)
		}
		res, err := a.Audit(e.ctx)
		if err != nil || res.Skipped || !slices.Equal(res.Lost, []metadata.BookieID{"10.0.0.1:3181"}) || len(res.Marked) != len(e.ledgs) {
			t.Fatalf("audit %+v, %v", res, err)
		}
	})
}

func TestAuditorFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		d1, d2 := e.st.Open(), e.st.Open()
		t.Cleanup(func() { d1.Close(); d2.Close() })
		e.auditor("10.0.0.101:1", d1)
		e.waitAuditor("10.0.0.101:1")
		e.auditor("10.0.0.102:1", d2)
		e.never("two auditors", func() bool {
			a, _ := e.md.Auditor(e.ctx)
			return a != "10.0.0.101:1"
		})
		// The first auditor's process dies: its session ends with its driver.
		d1.Close()
		e.waitAuditor("10.0.0.102:1")
		e.down("10.0.0.3:3181")
		e.eventually("the new auditor marks", func() bool { return len(e.marked()) == len(e.ledgs) })
		if _, err := e.md.Auditor(e.ctx); err != nil && !errors.Is(err, metadata.ErrNotFound) {
			t.Fatal(err)
		}
	})
}
