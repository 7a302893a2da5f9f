package autorecovery

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
)

// Tests of the periodic checks' schedule across elections
// (BookKeeper's checkallledgersctime / placementpolicycheckctime): the
// last completion time is kept in the metadata store, and a newly elected
// auditor waits only for what is left of the interval.
//
// The env has no registered bookies, so the ledger check finds every copy
// bad without a read (no network); its runs are counted by the auditor's
// Metrics (auditor_CHECK_ALL_LEDGERS_TIME_count), its stored time read
// from the store. The clock is manual: a run happens only when the test
// advances it past the check's timer.

func TestFirstCheckWait(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const interval = 2 * time.Hour
	for _, tc := range []struct {
		name string
		last time.Time
		want time.Duration
	}{
		{"never ran: at once (BookKeeper)", time.Time{}, 0},
		{"ran 1h ago", now.Add(-time.Hour), time.Hour},
		{"ran just now", now, interval},
		{"due exactly now", now.Add(-interval), 0},
		{"overdue", now.Add(-3 * interval), 0},
		{"in the future (clock skew): a full interval", now.Add(time.Hour), interval},
	} {
		if got := firstCheckWait(now, tc.last, interval); got != tc.want {
			t.Errorf("%s: firstCheckWait = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// checkEnv is an env with an auditor's Metrics to count ledger checks.
type checkEnv struct {
	*env
	start time.Time // the clock when the env was made
}

func newCheckEnv(t *testing.T) *checkEnv {
	e := newEnv(t, 0)
	return &checkEnv{env: e, start: e.clk.Now()}
}

// auditor starts a candidate on its own driver (its own process) with a
// ledger check every interval; it returns its metrics and a stop func.
func (e *checkEnv) checkAuditor(id string, interval time.Duration) (*Metrics, context.CancelFunc) {
	d := e.st.Open()
	e.t.Cleanup(func() { d.Close() })
	m := NewMetrics(nil)
	_, cancel := e.startAuditor(AuditorConfig{Driver: d, ID: metadata.BookieID(id), BookieCheckInterval: -1,
		LedgerCheckInterval: interval, Metrics: m})
	e.waitAuditor(id)
	return m, cancel
}

// ledgerChecks is how many ledger checks m's auditor completed.
func (e *checkEnv) ledgerChecks(m *Metrics) int {
	e.t.Helper()
	return e.counter(m, "auditor_CHECK_ALL_LEDGERS_TIME_count")
}

func (e *checkEnv) counter(m *Metrics, name string) int {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return int(mf.GetMetric()[0].GetCounter().GetValue())
		}
		if mf.GetName()+"_count" == name { // a summary: its success="true" count
			return int(successCount(mf))
		}
	}
	e.t.Fatalf("no %s", name)
	return 0
}

func (e *checkEnv) lastCheck() time.Time {
	e.t.Helper()
	last, err := e.md.LastCheckTime(e.ctx, metadata.LedgerCheck)
	if err != nil {
		e.t.Fatal(err)
	}
	return last
}

func (e *checkEnv) setLastCheck(at time.Time) {
	e.t.Helper()
	if err := e.md.SetLastCheckTime(e.ctx, metadata.LedgerCheck, at); err != nil {
		e.t.Fatal(err)
	}
}

// waitTimers waits until n timers are set on the clock: the ledger
// checks' (nothing else in these auditors sets one). A stopped auditor's
// timer is stopped with it.
func (e *checkEnv) waitTimers(n int) {
	e.t.Helper()
	e.eventually("the ledger check's timer", func() bool { return e.clk.Waiters() == n })
}

// waitChecks waits until m's auditor has completed n ledger checks and
// stored the last one's time, at.
func (e *checkEnv) waitChecks(m *Metrics, n int, at time.Time) {
	e.t.Helper()
	e.eventually("ledger check stored", func() bool {
		return e.ledgerChecks(m) == n && e.lastCheck().Equal(at)
	})
	if got := e.ledgerChecks(m); got != n {
		e.t.Fatalf("%d ledger checks, want %d", got, n)
	}
}

// (a) A check that completed 1 h before the election, with a 2 h interval,
// runs 1 h after the election, not 2 h; then every 2 h from its run.
func TestLedgerCheckResumesStoredSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCheckEnv(t)
		e.setLastCheck(e.start.Add(-time.Hour))
		m, _ := e.checkAuditor("10.0.0.100:1", 2*time.Hour)
		e.waitTimers(1)
		e.clk.Advance(time.Hour - time.Second)
		e.never("a ledger check before the stored schedule", func() bool { return e.ledgerChecks(m) > 0 })
		e.clk.Advance(time.Second)
		e.waitChecks(m, 1, e.start.Add(time.Hour))

		e.waitTimers(1)
		e.clk.Advance(2*time.Hour - time.Second)
		e.never("a second ledger check before the interval", func() bool { return e.ledgerChecks(m) > 1 })
		e.clk.Advance(time.Second)
		e.waitChecks(m, 2, e.start.Add(3*time.Hour))
	})
}

// (b) An overdue check runs at once on election, as does one that never
// ran (BookKeeper's rule when nothing is stored); (c) its completion time
// is stored either way.
func TestLedgerCheckOverdueOrNeverRunsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		last time.Time // zero: nothing stored
	}{
		{"overdue", time.Unix(1_700_000_000, 0).Add(-5 * time.Hour)},
		{"never ran", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newCheckEnv(t)
				if !tc.last.IsZero() {
					e.setLastCheck(tc.last)
				}
				m, _ := e.checkAuditor("10.0.0.100:1", 2*time.Hour)
				e.waitChecks(m, 1, e.start) // with the clock not moved
				e.waitTimers(1)             // the next one, 2 h on
			})
		})
	}
}

// (c) The time stored is the completion time on the auditor's clock, in
// milliseconds (the other tests check it too); a check skipped because
// replication is disabled stores nothing (as in BookKeeper); a metadata
// error reading or storing the time is not fatal: the auditor runs the
// check at once, then on schedule.
func TestLedgerCheckStoresCompletionTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCheckEnv(t)
		e.clk.Advance(1500 * time.Microsecond) // sub-millisecond part dropped
		if err := e.md.SetReplicationEnabled(e.ctx, false); err != nil {
			t.Fatal(err)
		}
		m, stop := e.checkAuditor("10.0.0.100:1", 2*time.Hour)
		e.waitTimers(1) // the skipped run happened: its successor is scheduled
		if last := e.lastCheck(); !last.IsZero() || e.ledgerChecks(m) != 0 {
			t.Fatalf("after a skipped check: stored %v, %d checks; want nothing", last, e.ledgerChecks(m))
		}
		stop()
		if err := e.md.SetReplicationEnabled(e.ctx, true); err != nil {
			t.Fatal(err)
		}

		// The store fails: the auditor's read of the last time at election
		// (taken for "never": the check runs at once, as in BookKeeper) and
		// its store after the check. It goes on checking on schedule.
		var failing atomic.Bool
		failing.Store(true)
		e.st.SetHook(func(_ context.Context, op memory.Op, key string, _ memory.Phase) error {
			if failing.Load() && op == memory.OpUnderReplication && key == "/ledgers/underreplication/checkallledgersctime" {
				return errors.New("injected: store unreachable")
			}
			return nil
		})
		m, _ = e.checkAuditor("10.0.0.101:1", time.Hour)
		e.eventually("a ledger check", func() bool { return e.ledgerChecks(m) == 1 })
		e.waitTimers(1) // the store was tried; the next check is set (the stopped auditor's is gone)
		failing.Store(false)
		if last := e.lastCheck(); !last.IsZero() {
			t.Fatalf("stored %v through a failing store", last)
		}
		e.clk.Advance(time.Hour)
		at := e.start.Add(time.Hour + 1500*time.Microsecond).Truncate(time.Millisecond)
		e.waitChecks(m, 2, at)
	})
}

// (d) Failover: auditor A runs the check and stops; B, elected 30 min
// later, runs the next one at A's completion + interval, not an interval
// after its own election (nor at once).
func TestLedgerCheckScheduleSurvivesFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCheckEnv(t)
		const interval = 2 * time.Hour
		mA, stopA := e.checkAuditor("10.0.0.101:1", interval)
		e.waitChecks(mA, 1, e.start) // never ran: A runs it at once
		e.waitTimers(1)
		stopA()
		e.eventually("A resigned", func() bool {
			_, err := e.md.Auditor(e.ctx)
			return errors.Is(err, metadata.ErrNotFound)
		})

		e.clk.Advance(30 * time.Minute)
		mB, _ := e.checkAuditor("10.0.0.102:1", interval)
		e.waitTimers(1) // B's (A's was stopped with A)
		e.clk.Advance(interval - 30*time.Minute - time.Second)
		e.never("B's ledger check before A's time + interval", func() bool { return e.ledgerChecks(mB) > 0 })
		e.clk.Advance(time.Second)
		e.waitChecks(mB, 1, e.start.Add(interval))
		if n := e.ledgerChecks(mA); n != 1 {
			t.Fatalf("A ran %d ledger checks, want 1", n)
		}
	})
}

// The placement check keeps its own time (placementpolicycheckctime) and
// resumes from it the same way.
func TestPlacementCheckResumesStoredSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCheckEnv(t)
		if err := e.md.SetLastCheckTime(e.ctx, metadata.PlacementPolicyCheck, e.start.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		m := NewMetrics(nil)
		e.startAuditor(AuditorConfig{Driver: e.md, ID: "10.0.0.100:1", BookieCheckInterval: -1, LedgerCheckInterval: -1,
			PlacementPolicyCheckInterval: 2 * time.Hour, Metrics: m})
		e.waitAuditor("10.0.0.100:1")
		e.waitTimers(1)
		e.clk.Advance(time.Hour - time.Second)
		e.never("a placement check before the stored schedule", func() bool { return e.counter(m, "auditor_PLACEMENT_POLICY_CHECK_TIME_count") > 0 })
		e.clk.Advance(time.Second)
		e.eventually("the placement check stored", func() bool {
			last, err := e.md.LastCheckTime(e.ctx, metadata.PlacementPolicyCheck)
			return err == nil && last.Equal(e.start.Add(time.Hour))
		})
		if n := e.counter(m, "auditor_PLACEMENT_POLICY_CHECK_TIME_count"); n != 1 {
			t.Fatalf("%d placement checks, want 1", n)
		}
		if last := e.lastCheck(); !last.IsZero() {
			t.Fatalf("the ledger check's time is %v; only the placement check ran", last)
		}
	})
}

// successCount is a BookKeeper OpStatsLogger summary's count of successful
// observations.
func successCount(mf *dto.MetricFamily) uint64 {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "success" && l.GetValue() == "true" {
				return m.GetSummary().GetSampleCount()
			}
		}
	}
	return 0
}
