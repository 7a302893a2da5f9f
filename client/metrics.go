package client

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the client's Prometheus collectors. The client updates them;
// the application may register them (Metrics implements
// prometheus.Collector) on any registry, once.
type Metrics struct {
	addsOK      prometheus.Counter
	addsFailed  prometheus.Counter
	addLatency  prometheus.Histogram
	entriesRead prometheus.Counter
}

func newMetrics() *Metrics {
	return &Metrics{
		addsOK: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "folio", Subsystem: "client", Name: "add_entries_total",
			Help: "Appends acknowledged (stored on an ack quorum).",
		}),
		addsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "folio", Subsystem: "client", Name: "add_entries_failed_total",
			Help: "Appends that completed with an error.",
		}),
		addLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "folio", Subsystem: "client", Name: "add_entry_latency_seconds",
			Help:    "Time from AppendAsync to acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18),
		}),
		entriesRead: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "folio", Subsystem: "client", Name: "read_entries_total",
			Help: "Entries read and verified.",
		}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.addsOK, m.addsFailed, m.addLatency, m.entriesRead}
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
