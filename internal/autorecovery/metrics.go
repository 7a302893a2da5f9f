package autorecovery

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/internal/metadata"
)

// Metrics are AutoRecovery's Prometheus collectors (the auditor's and the
// replication workers' of one process). A nil *Metrics records nothing.
// Metrics implements prometheus.Collector; register it once.
//
// Where BookKeeper measures the same thing the name, type and labels are
// its (AuditorStats and ReplicationWorker under the scopes "auditor" and
// "replication_worker"; an OpStatsLogger is a summary in milliseconds, or
// in its own unit for value distributions, with success="true|false"):
//
//   - auditor_AUDIT_BOOKIES_TIME, auditor_CHECK_ALL_LEDGERS_TIME,
//     auditor_PLACEMENT_POLICY_CHECK_TIME: durations of the bookie audit,
//     the check of all ledgers and the placement policy check (their
//     _count per success value counts them);
//   - auditor_NUM_UNDER_REPLICATED_LEDGERS: ledgers marked per bookie
//     audit (a value distribution);
//   - auditor_NUM_LEDGERS_CHECKED (counter);
//   - auditor_NUM_LEDGERS_NOT_ADHERING_TO_PLACEMENT_POLICY and
//     auditor_NUM_LEDGERS_SOFTLY_ADHERING_TO_PLACEMENT_POLICY (gauges, at
//     the last placement check);
//   - replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED,
//     replication_worker_NUM_ENTRIES_READ and _NUM_ENTRIES_WRITTEN
//     (counters), replication_worker_NUM_BYTES_READ and _NUM_BYTES_WRITTEN
//     (bytes per copied fragment, summaries: _sum is the bytes copied).
//
// Folio's own, folio_autorecovery_*: is_auditor, ledgers_marked_total (by
// every check), fragments_replicated_total, rereplication_failures_total,
// open_ledgers_fenced_total, ledger_check_ledgers_marked_total,
// placement_ledgers_marked_total, and under_replicated_ledgers: the
// ledgers marked under-replicated in the store as counted after this
// process's auditor's last check (never listed at scrape time; 0 in a
// process whose auditor never ran a check).
type Metrics struct {
	isAuditor       prometheus.Gauge
	ledgersMarked   prometheus.Counter
	fragments       prometheus.Counter
	failures        prometheus.Counter
	openFenced      prometheus.Counter
	underReplicated prometheus.Gauge

	auditTime            [2]prometheus.Observer // by success: 0 false, 1 true
	numUnderReplicated   prometheus.Observer
	checkAllLedgersTime  [2]prometheus.Observer
	ledgersChecked       prometheus.Counter
	ledgerCheckMarked    prometheus.Counter
	placementTime        [2]prometheus.Observer
	placementNotAdhering prometheus.Gauge
	placementSoftly      prometheus.Gauge
	placementMarked      prometheus.Counter

	ledgersReplicated prometheus.Counter
	entriesRead       prometheus.Counter
	entriesWritten    prometheus.Counter
	bytesRead         prometheus.Observer
	bytesWritten      prometheus.Observer

	collectors []prometheus.Collector
}

var summaryObjectives = map[float64]float64{0.5: 0.05, 0.75: 0.01, 0.95: 0.005, 0.99: 0.001, 0.999: 0.0001}

// NewMetrics returns the collectors. The argument is unused (the
// under-replicated count is refreshed by the auditor's checks); it is kept
// so that callers need not change.
func NewMetrics(metadata.UnderReplication) *Metrics {
	m := &Metrics{}
	add := func(c prometheus.Collector) { m.collectors = append(m.collectors, c) }
	folioC := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "folio", Subsystem: "autorecovery", Name: name, Help: help})
		add(c)
		return c
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		add(c)
		return c
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		add(g)
		return g
	}
	opStats := func(name, help string) [2]prometheus.Observer {
		v := prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: name, Help: help, Objectives: summaryObjectives, MaxAge: time.Minute},
			[]string{"success"})
		add(v)
		return [2]prometheus.Observer{v.WithLabelValues("false"), v.WithLabelValues("true")}
	}
	m.isAuditor = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "folio", Subsystem: "autorecovery", Name: "is_auditor",
		Help: "1 while this process is the elected auditor."})
	add(m.isAuditor)
	m.underReplicated = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "folio", Subsystem: "autorecovery", Name: "under_replicated_ledgers",
		Help: "Ledgers marked under-replicated in the metadata store, counted after this process's auditor's last check."})
	add(m.underReplicated)
	m.ledgersMarked = folioC("ledgers_marked_total", "Ledgers this process's auditor marked under-replicated (by any check).")
	m.fragments = folioC("fragments_replicated_total", "Ledger fragments re-replicated (ensemble updated).")
	m.failures = folioC("rereplication_failures_total", "Ledger repairs that failed (retried later).")
	m.openFenced = folioC("open_ledgers_fenced_total", "OPEN ledgers fenced and closed after the grace period.")
	m.ledgerCheckMarked = folioC("ledger_check_ledgers_marked_total", "Ledgers the ledger check marked under-replicated (bad fragments); also in ledgers_marked_total.")
	m.placementMarked = folioC("placement_ledgers_marked_total", "Ledgers the placement check marked for re-placement (RepairPlacement); also in ledgers_marked_total.")

	m.auditTime = opStats("auditor_AUDIT_BOOKIES_TIME", "Duration of the auditor's bookie audits, in milliseconds.")
	m.numUnderReplicated = opStats("auditor_NUM_UNDER_REPLICATED_LEDGERS", "Ledgers marked under-replicated per bookie audit.")[1]
	m.checkAllLedgersTime = opStats("auditor_CHECK_ALL_LEDGERS_TIME", "Duration of the checks of all ledgers, in milliseconds.")
	m.ledgersChecked = counter("auditor_NUM_LEDGERS_CHECKED", "Ledgers whose entries the ledger check read on their bookies.")
	m.placementTime = opStats("auditor_PLACEMENT_POLICY_CHECK_TIME", "Duration of the placement policy checks, in milliseconds.")
	m.placementNotAdhering = gauge("auditor_NUM_LEDGERS_NOT_ADHERING_TO_PLACEMENT_POLICY",
		"Closed ledgers with an ensemble that does not adhere to the placement policy, at the last placement check.")
	m.placementSoftly = gauge("auditor_NUM_LEDGERS_SOFTLY_ADHERING_TO_PLACEMENT_POLICY",
		"Closed ledgers whose ensembles adhere to the placement policy only softly, at the last placement check.")

	m.ledgersReplicated = counter("replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED", "Under-replicated ledgers repaired (record cleared).")
	m.entriesRead = counter("replication_worker_NUM_ENTRIES_READ", "Entries read from surviving bookies for re-replication.")
	m.entriesWritten = counter("replication_worker_NUM_ENTRIES_WRITTEN", "Entries written to replacement bookies.")
	m.bytesRead = opStats("replication_worker_NUM_BYTES_READ", "Bytes read for re-replication, per fragment copied.")[1]
	m.bytesWritten = opStats("replication_worker_NUM_BYTES_WRITTEN", "Bytes written to replacement bookies, per fragment copied.")[1]
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors {
		c.Collect(ch)
	}
}

func b2i(ok bool) int {
	if ok {
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (m *Metrics) setAuditor(on bool) {
	if m == nil {
		return
	}
	m.isAuditor.Set(float64(b2i(on)))
}

func (m *Metrics) setUnderReplicated(n int) {
	if m == nil {
		return
	}
	m.underReplicated.Set(float64(n))
}

func (m *Metrics) audited(marked int, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.auditTime[b2i(err == nil)].Observe(ms(took))
	if err != nil {
		return
	}
	m.numUnderReplicated.Observe(float64(marked))
	m.ledgersMarked.Add(float64(marked))
}

func (m *Metrics) fragment(entries int, bytes int64) {
	if m == nil {
		return
	}
	m.fragments.Inc()
	m.entriesRead.Add(float64(entries))
	m.entriesWritten.Add(float64(entries))
	m.bytesRead.Observe(float64(bytes))
	m.bytesWritten.Observe(float64(bytes))
}

func (m *Metrics) inc(c func(*Metrics) prometheus.Counter) {
	if m == nil {
		return
	}
	c(m).Inc()
}

func (m *Metrics) ledgerChecked(r LedgerCheckResult, err error) {
	if m == nil || r.Skipped && err == nil {
		return
	}
	m.ledgersChecked.Add(float64(r.Ledgers))
	m.ledgerCheckMarked.Add(float64(len(r.Marked)))
	m.ledgersMarked.Add(float64(len(r.Marked)))
	m.checkAllLedgersTime[b2i(err == nil)].Observe(ms(r.Duration))
}

func (m *Metrics) placementChecked(r PlacementCheckResult, err error) {
	if m == nil {
		return
	}
	m.placementMarked.Add(float64(len(r.Marked)))
	m.ledgersMarked.Add(float64(len(r.Marked)))
	m.placementTime[b2i(err == nil)].Observe(ms(r.Duration))
	if err != nil {
		return
	}
	m.placementNotAdhering.Set(float64(len(r.NotAdhering)))
	m.placementSoftly.Set(float64(len(r.SoftlyAdhering)))
}
