package autorecovery

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/internal/metadata"
)

// Metrics are AutoRecovery's Prometheus collectors (the auditor's and the
// replication workers' of one process). A nil *Metrics records nothing.
// Metrics implements prometheus.Collector; register it once.
type Metrics struct {
	isAuditor         prometheus.Gauge
	audits            prometheus.Counter
	auditFailures     prometheus.Counter
	ledgersMarked     prometheus.Counter
	fragments         prometheus.Counter
	entries           prometheus.Counter
	ledgersReplicated prometheus.Counter
	failures          prometheus.Counter
	openFenced        prometheus.Counter
	underReplicated   prometheus.Collector // nil without a store

	ledgerChecks          prometheus.Counter
	ledgerCheckFailures   prometheus.Counter
	ledgersChecked        prometheus.Counter
	ledgerCheckMarked     prometheus.Counter
	ledgerCheckDuration   prometheus.Gauge
	placementChecks       prometheus.Counter
	placementNotAdhering  prometheus.Gauge
	placementSoftAdhering prometheus.Gauge
	placementMarked       prometheus.Counter
	placementDuration     prometheus.Gauge
}

// NewMetrics returns the collectors. With ar not nil, each scrape also
// counts the under-replicated ledgers in the store
// (folio_autorecovery_under_replicated_ledgers).
func NewMetrics(ar metadata.UnderReplication) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "folio", Subsystem: "autorecovery", Name: name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "folio", Subsystem: "autorecovery", Name: name, Help: help})
	}
	m := &Metrics{
		isAuditor: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "folio", Subsystem: "autorecovery", Name: "is_auditor",
			Help: "1 while this process is the elected auditor."}),
		audits:            c("audits_total", "Bookie audits completed by this process's auditor."),
		auditFailures:     c("audit_failures_total", "Bookie audits that failed (retried)."),
		ledgersMarked:     c("ledgers_marked_total", "Ledgers this process's auditor marked under-replicated."),
		fragments:         c("fragments_replicated_total", "Ledger fragments re-replicated (ensemble updated)."),
		entries:           c("entries_replicated_total", "Entries copied to replacement bookies."),
		ledgersReplicated: c("ledgers_replicated_total", "Under-replication records cleared after repair."),
		failures:          c("rereplication_failures_total", "Ledger repairs that failed (retried later)."),
		openFenced:        c("open_ledgers_fenced_total", "OPEN ledgers fenced and closed after the grace period."),

		ledgerChecks:        c("ledger_checks_total", "Checks of all ledgers' entries on their bookies completed by this process's auditor."),
		ledgerCheckFailures: c("ledger_check_failures_total", "Checks of all ledgers that failed (retried)."),
		ledgersChecked:      c("ledgers_checked_total", "Ledgers whose entries the ledger check read on their bookies."),
		ledgerCheckMarked:   c("ledger_check_ledgers_marked_total", "Ledgers the ledger check marked under-replicated (bad fragments); also in ledgers_marked_total."),
		ledgerCheckDuration: g("ledger_check_duration_seconds", "Duration of the last completed check of all ledgers."),
		placementChecks:     c("placement_checks_total", "Placement policy checks completed by this process's auditor."),
		placementNotAdhering: g("placement_not_adhering_ledgers",
			"Closed ledgers with an ensemble that does not adhere to the placement policy, at the last placement check."),
		placementSoftAdhering: g("placement_softly_adhering_ledgers",
			"Closed ledgers whose ensembles adhere to the placement policy only softly, at the last placement check."),
		placementMarked:   c("placement_ledgers_marked_total", "Ledgers the placement check marked for re-placement (RepairPlacement); also in ledgers_marked_total."),
		placementDuration: g("placement_check_duration_seconds", "Duration of the last completed placement policy check."),
	}
	if ar != nil {
		m.underReplicated = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "folio", Subsystem: "autorecovery",
			Name: "under_replicated_ledgers", Help: "Ledgers marked under-replicated in the metadata store (-1 if it cannot be read)."},
			func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				n := 0
				for start := int64(0); ; {
					page, err := ar.ListUnderReplicatedLedgers(ctx, start, 1000)
					if err != nil {
						return -1
					}
					if len(page) == 0 {
						return float64(n)
					}
					n += len(page)
					start = page[len(page)-1].LedgerID + 1
				}
			})
	}
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{m.isAuditor, m.audits, m.auditFailures, m.ledgersMarked, m.fragments, m.entries,
		m.ledgersReplicated, m.failures, m.openFenced,
		m.ledgerChecks, m.ledgerCheckFailures, m.ledgersChecked, m.ledgerCheckMarked, m.ledgerCheckDuration,
		m.placementChecks, m.placementNotAdhering, m.placementSoftAdhering, m.placementMarked, m.placementDuration}
	if m.underReplicated != nil {
		cs = append(cs, m.underReplicated)
	}
	return cs
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) setAuditor(on bool) {
	if m == nil {
		return
	}
	if on {
		m.isAuditor.Set(1)
	} else {
		m.isAuditor.Set(0)
	}
}

func (m *Metrics) audited(marked int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.auditFailures.Inc()
		return
	}
	m.audits.Inc()
	m.ledgersMarked.Add(float64(marked))
}

func (m *Metrics) fragment(entries int) {
	if m == nil {
		return
	}
	m.fragments.Inc()
	m.entries.Add(float64(entries))
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
	if err != nil {
		m.ledgerCheckFailures.Inc()
		return
	}
	m.ledgerChecks.Inc()
	m.ledgerCheckDuration.Set(r.Duration.Seconds())
}

func (m *Metrics) placementChecked(r PlacementCheckResult, err error) {
	if m == nil {
		return
	}
	m.placementMarked.Add(float64(len(r.Marked)))
	m.ledgersMarked.Add(float64(len(r.Marked)))
	if err != nil {
		return
	}
	m.placementChecks.Inc()
	m.placementNotAdhering.Set(float64(len(r.NotAdhering)))
	m.placementSoftAdhering.Set(float64(len(r.SoftlyAdhering)))
	m.placementDuration.Set(r.Duration.Seconds())
}
