package client

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus collectors. The client updates them;
// the application may register them (Metrics implements
// prometheus.Collector) on any registry, once.
//
// Names, types and labels are BookKeeper's client stats as its Prometheus
// provider exports them (scope bookkeeper_client; an OpStatsLogger is a
// summary in milliseconds with success="true|false", both present from
// the start):
//
//   - bookkeeper_client_ADD_ENTRY: appends, from AppendAsync to
//     acknowledgement (or failure);
//   - bookkeeper_client_READ_ENTRY: read operations (one per chunk of a
//     Read, as Java counts one per readEntries call);
//   - bookkeeper_client_LEDGER_CREATE, _LEDGER_OPEN, _LEDGER_DELETE:
//     the metadata operations.
//
// Folio's own: folio_client_read_entries_total (entries read and
// verified).
type Metrics struct {
	add         [2]prometheus.Observer // by success: 0 false, 1 true
	read        [2]prometheus.Observer
	create      [2]prometheus.Observer
	open        [2]prometheus.Observer
	del         [2]prometheus.Observer
	entriesRead prometheus.Counter

	collectors []prometheus.Collector
}

var summaryObjectives = map[float64]float64{0.5: 0.05, 0.75: 0.01, 0.95: 0.005, 0.99: 0.001, 0.999: 0.0001}

func newMetrics() *Metrics {
	m := &Metrics{}
	opStats := func(name, help string) [2]prometheus.Observer {
		v := prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "bookkeeper_client_" + name, Help: help,
			Objectives: summaryObjectives, MaxAge: time.Minute}, []string{"success"})
		m.collectors = append(m.collectors, v)
		return [2]prometheus.Observer{v.WithLabelValues("false"), v.WithLabelValues("true")}
	}
	m.add = opStats("ADD_ENTRY", "Latency of appends, from AppendAsync to acknowledgement, in milliseconds.")
	m.read = opStats("READ_ENTRY", "Latency of read operations, in milliseconds.")
	m.create = opStats("LEDGER_CREATE", "Latency of ledger creation, in milliseconds.")
	m.open = opStats("LEDGER_OPEN", "Latency of ledger opens (with recovery when asked), in milliseconds.")
	m.del = opStats("LEDGER_DELETE", "Latency of ledger deletion, in milliseconds.")
	m.entriesRead = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "folio", Subsystem: "client", Name: "read_entries_total",
		Help: "Entries read and verified.",
	})
	m.collectors = append(m.collectors, m.entriesRead)
	return m
}

// observe records one operation that started at start.
func observe(o [2]prometheus.Observer, start time.Time, err error) {
	i := 1
	if err != nil {
		i = 0
	}
	o[i].Observe(float64(time.Since(start)) / float64(time.Millisecond))
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
