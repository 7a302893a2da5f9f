package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/wire"
)

// PrometheusMetrics are one bookie's Prometheus collectors. Names follow BookKeeper's
// Prometheus provider where BookKeeper has the measurement, so existing
// dashboards work:
//
//   - bookkeeper_server_<REQUEST> (summary in milliseconds, label
//     success="true|false"): per request kind, e.g. ADD_ENTRY_REQUEST,
//     READ_ENTRY_REQUEST, READ_ENTRY_FENCE_REQUEST (bookie.RequestKind);
//   - bookkeeper_server_ADD_ENTRY and bookkeeper_server_READ_ENTRY: the same
//     add and read observations under BookKeeper's processing-latency names;
//   - bookie_SERVER_STATUS: 1 writable, 0 read-only;
//   - bookie_journal_JOURNAL_QUEUE_SIZE, bookie_journal_JOURNAL_SYNC
//     (fsync latency, ms), bookie_journal_JOURNAL_ADD_ENTRY: fed by the
//     storage engine through JournalObserver;
//   - bookie_DELETED_LEDGER_COUNT: ledgers dropped by garbage collection.
//
// Folio's own: bookkeeper_server_REQUESTS_IN_PROGRESS and
// bookkeeper_server_LONG_POLL_READS_IN_PROGRESS (bookie.InFlight),
// bookie_gc_PASSES{outcome}, bookie_READ_ONLY_CAUSE{cause},
// bookkeeper_server_READS_PAUSED (connections at their in-flight limit).
//
// It implements bookie.Metrics. In `folio standalone` every bookie's
// collectors carry the constant label bookie="<bookie id>".
type PrometheusMetrics struct {
	requests     [numRequestKinds]*prometheus.SummaryVec
	addEntry     *prometheus.SummaryVec
	readEntry    *prometheus.SummaryVec
	serverStatus prometheus.Gauge

	journalQueue prometheus.Gauge
	journalSync  prometheus.Summary
	journalAdd   prometheus.Summary

	deletedLedgers prometheus.Counter
	gcPasses       *prometheus.CounterVec
	readOnlyCause  *prometheus.GaugeVec
	conn           connMetrics

	collectors []prometheus.Collector
}

// numRequestKinds is how many bookie.RequestKind values exist
// (KindOther is the last).
const numRequestKinds = int(bookie.KindOther) + 1

var summaryObjectives = map[float64]float64{0.5: 0.05, 0.75: 0.01, 0.95: 0.005, 0.99: 0.001, 0.999: 0.0001, 0.9999: 0.00001}

// NewPrometheusMetrics creates the collectors with constLabels (nil for a lone
// bookie) and registers them with reg.
func NewPrometheusMetrics(reg prometheus.Registerer, constLabels prometheus.Labels) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{}
	summary := func(name, help string, labels ...string) *prometheus.SummaryVec {
		v := prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: name, Help: help, ConstLabels: constLabels,
			Objectives: summaryObjectives, MaxAge: time.Minute,
		}, labels)
		m.collectors = append(m.collectors, v)
		return v
	}
	for k := 0; k < numRequestKinds; k++ {
		kind := bookie.RequestKind(k)
		m.requests[k] = summary("bookkeeper_server_"+kind.String(),
			"Latency of "+kind.String()+" from receipt to response, in milliseconds.", "success")
	}
	m.addEntry = summary("bookkeeper_server_ADD_ENTRY", "Latency of adds, in milliseconds.", "success")
	m.readEntry = summary("bookkeeper_server_READ_ENTRY", "Latency of reads, in milliseconds.", "success")
	m.serverStatus = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bookie_SERVER_STATUS", Help: "1 when the bookie is writable, 0 when read-only.", ConstLabels: constLabels,
	})
	m.journalQueue = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bookie_journal_JOURNAL_QUEUE_SIZE", Help: "Entries waiting in the journal queue.", ConstLabels: constLabels,
	})
	m.journalSync = prometheus.NewSummary(prometheus.SummaryOpts{
		Name: "bookie_journal_JOURNAL_SYNC", Help: "Latency of journal fsyncs, in milliseconds.", ConstLabels: constLabels,
		Objectives: summaryObjectives, MaxAge: time.Minute,
	})
	m.journalAdd = prometheus.NewSummary(prometheus.SummaryOpts{
		Name: "bookie_journal_JOURNAL_ADD_ENTRY", Help: "Latency from journal enqueue to durable, in milliseconds.", ConstLabels: constLabels,
		Objectives: summaryObjectives, MaxAge: time.Minute,
	})
	m.deletedLedgers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_DELETED_LEDGER_COUNT", Help: "Ledgers deleted by garbage collection.", ConstLabels: constLabels,
	})
	m.gcPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bookie_gc_PASSES", Help: "Garbage collection passes by outcome (ok, failed).", ConstLabels: constLabels,
	}, []string{"outcome"})
	m.readOnlyCause = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bookie_READ_ONLY_CAUSE", Help: "1 for each cause currently holding the bookie read-only (forced, disk_full, storage_failed).", ConstLabels: constLabels,
	}, []string{"cause"})
	m.initConnMetrics(constLabels)
	m.collectors = append(m.collectors, m.serverStatus, m.journalQueue, m.journalSync, m.journalAdd,
		m.deletedLedgers, m.gcPasses, m.readOnlyCause)
	// Make the labelled series exist before the first observation, so a
	// scrape shows every name from the start.
	for k := range m.requests {
		m.requests[k].WithLabelValues("true")
	}
	m.addEntry.WithLabelValues("true")
	m.readEntry.WithLabelValues("true")
	m.gcPasses.WithLabelValues("ok")
	m.gcPasses.WithLabelValues("failed")
	for _, c := range []string{"forced", "disk_full", "storage_failed"} {
		m.readOnlyCause.WithLabelValues(c)
	}
	for _, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			m.Unregister(reg)
			return nil, err
		}
	}
	return m, nil
}

// Unregister removes the collectors from reg (a stopped bookie of a
// standalone process).
func (m *PrometheusMetrics) Unregister(reg prometheus.Registerer) {
	for _, c := range m.collectors {
		reg.Unregister(c)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// RequestCompleted implements bookie.Metrics. A request counts as
// successful when answered EOK, or with the negative answers that are
// normal outcomes (no such entry/ledger), as Java counts them.
func (m *PrometheusMetrics) RequestCompleted(kind bookie.RequestKind, status wire.Status, latency time.Duration) {
	if int(kind) >= numRequestKinds {
		kind = bookie.KindOther
	}
	success := "false"
	if status == wire.StatusOK || status == wire.StatusNoEntry || status == wire.StatusNoLedger {
		success = "true"
	}
	v := ms(latency)
	m.requests[kind].WithLabelValues(success).Observe(v)
	switch kind {
	case bookie.KindAdd, bookie.KindRecoveryAdd:
		m.addEntry.WithLabelValues(success).Observe(v)
	case bookie.KindRead, bookie.KindFenceRead, bookie.KindLongPollRead, bookie.KindBatchRead:
		m.readEntry.WithLabelValues(success).Observe(v)
	}
}

// ReadOnlyChanged implements bookie.Metrics.
func (m *PrometheusMetrics) ReadOnlyChanged(readOnly bool) {
	if readOnly {
		m.serverStatus.Set(0)
	} else {
		m.serverStatus.Set(1)
	}
}

// setReadOnlyCauses publishes the state manager's causes.
func (m *PrometheusMetrics) setReadOnlyCauses(forced, diskFull, failed bool) {
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	m.readOnlyCause.WithLabelValues("forced").Set(b(forced))
	m.readOnlyCause.WithLabelValues("disk_full").Set(b(diskFull))
	m.readOnlyCause.WithLabelValues("storage_failed").Set(b(failed))
}

// gcPass records a garbage collection pass.
func (m *PrometheusMetrics) gcPass(r GCResult) {
	m.deletedLedgers.Add(float64(len(r.Deleted)))
	if r.Err != nil {
		m.gcPasses.WithLabelValues("failed").Inc()
	} else {
		m.gcPasses.WithLabelValues("ok").Inc()
	}
}

// JournalQueued, JournalSynced and JournalAdded are the storage engine's
// measurements (queue depth, one fsync's latency, one entry's time from
// enqueue to durable).
func (m *PrometheusMetrics) JournalQueued(depth int)             { m.journalQueue.Set(float64(depth)) }
func (m *PrometheusMetrics) JournalSynced(latency time.Duration) { m.journalSync.Observe(ms(latency)) }
func (m *PrometheusMetrics) JournalAdded(latency time.Duration)  { m.journalAdd.Observe(ms(latency)) }

// inFlightCollector exports a bookie's in-flight gauges, read at scrape
// time.
type inFlightCollector struct {
	b                  *bookie.Bookie
	requests, longPoll *prometheus.Desc
}

func newInFlightCollector(b *bookie.Bookie, constLabels prometheus.Labels) *inFlightCollector {
	return &inFlightCollector{
		b: b,
		requests: prometheus.NewDesc("bookkeeper_server_REQUESTS_IN_PROGRESS",
			"Requests being worked on (long polls excluded).", nil, constLabels),
		longPoll: prometheus.NewDesc("bookkeeper_server_LONG_POLL_READS_IN_PROGRESS",
			"Long-poll reads waiting for a new LAC.", nil, constLabels),
	}
}

func (c *inFlightCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.requests; ch <- c.longPoll }

func (c *inFlightCollector) Collect(ch chan<- prometheus.Metric) {
	req, lp := c.b.InFlight()
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.GaugeValue, float64(req))
	ch <- prometheus.MustNewConstMetric(c.longPoll, prometheus.GaugeValue, float64(lp))
}

var _ bookie.Metrics = (*PrometheusMetrics)(nil)

// connMetrics are the listener's measurements (server.Metrics), Folio's own
// names.
type connMetrics struct {
	open      prometheus.Gauge
	malformed prometheus.Counter
	batches   prometheus.Summary
	paused    prometheus.Counter
}

func (m *PrometheusMetrics) initConnMetrics(constLabels prometheus.Labels) {
	m.conn.open = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bookkeeper_server_CONNECTIONS", Help: "Open client connections.", ConstLabels: constLabels,
	})
	m.conn.malformed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookkeeper_server_MALFORMED_FRAMES", Help: "Connections closed for undecodable input.", ConstLabels: constLabels,
	})
	m.conn.batches = prometheus.NewSummary(prometheus.SummaryOpts{
		Name: "bookkeeper_server_RESPONSES_PER_WRITE", Help: "Responses written per socket write.", ConstLabels: constLabels,
		Objectives: map[float64]float64{0.5: 0.05, 0.99: 0.001}, MaxAge: time.Minute,
	})
	m.conn.paused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookkeeper_server_READS_PAUSED", Help: "Times a connection stopped reading because its in-flight request limit was reached (back-pressure).", ConstLabels: constLabels,
	})
	m.collectors = append(m.collectors, m.conn.open, m.conn.malformed, m.conn.batches, m.conn.paused)
}

// ConnectionOpened implements Metrics (the listener's).
func (m *PrometheusMetrics) ConnectionOpened() { m.conn.open.Inc() }

// ConnectionClosed implements Metrics.
func (m *PrometheusMetrics) ConnectionClosed() { m.conn.open.Dec() }

// MalformedFrame implements Metrics.
func (m *PrometheusMetrics) MalformedFrame() { m.conn.malformed.Inc() }

// ResponsesWritten implements Metrics.
func (m *PrometheusMetrics) ResponsesWritten(responses int, _ int) {
	m.conn.batches.Observe(float64(responses))
}

// ReadPaused implements Metrics.
func (m *PrometheusMetrics) ReadPaused() { m.conn.paused.Inc() }

var _ Metrics = (*PrometheusMetrics)(nil)
