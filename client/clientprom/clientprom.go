// Package clientprom records a Folio client's metrics in Prometheus, under
// the names, types and labels BookKeeper's Java client exports through its
// Prometheus provider, so dashboards built for BookKeeper work unchanged:
//
//   - bookkeeper_client_ADD_ENTRY, bookkeeper_client_READ_ENTRY,
//     bookkeeper_client_LEDGER_CREATE, bookkeeper_client_LEDGER_OPEN and
//     bookkeeper_client_LEDGER_DELETE: summaries (an OpStatsLogger) of the
//     operations' latencies in milliseconds, labelled success="true|false",
//     both present from the start (client.Op says what each measures),
//     with Java's quantiles (0.5 to 0.9999 and 1.0) over the last complete
//     60-second window (package internal/opstats);
//   - folio_client_read_entries_total (Folio's own): a counter of the
//     entries read and verified.
//
// Use it as the client's Config.Metrics:
//
//	c, err := client.New(ctx, client.Config{
//		MetadataServiceURI: uri,
//		Metrics:            clientprom.New(prometheus.DefaultRegisterer),
//	})
package clientprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/opstats"
)

// Metrics implements client.Metrics with Prometheus collectors; it is
// itself a prometheus.Collector of them all.
type Metrics struct {
	ops         [client.OpLedgerDelete + 1][2]prometheus.Observer // by op, then success: 0 false, 1 true
	entriesRead prometheus.Counter
	collectors  []prometheus.Collector
}

var help = [...]string{
	client.OpAddEntry:     "Latency of appends, from AppendAsync to acknowledgement, in milliseconds.",
	client.OpReadEntry:    "Latency of read operations, in milliseconds.",
	client.OpLedgerCreate: "Latency of ledger creation, in milliseconds.",
	client.OpLedgerOpen:   "Latency of ledger opens (with recovery when asked), in milliseconds.",
	client.OpLedgerDelete: "Latency of ledger deletion, in milliseconds.",
}

// New returns a client's Prometheus metrics, registered on reg (as
// promauto does, it panics if reg refuses them: a second client's metrics
// on the same registry need a prometheus.WrapRegistererWith label). With a
// nil reg nothing is registered; register the returned Metrics (a
// prometheus.Collector) yourself.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	for op := range m.ops {
		s := opstats.New(opstats.Opts{Name: "bookkeeper_client_" + client.Op(op).String(), Help: help[op]})
		m.collectors = append(m.collectors, s)
		m.ops[op] = s.Observers()
	}
	m.entriesRead = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "folio", Subsystem: "client", Name: "read_entries_total",
		Help: "Entries read and verified.",
	})
	m.collectors = append(m.collectors, m.entriesRead)
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

// Operation implements client.Metrics. An op the client does not define
// (a later version's) is dropped.
func (m *Metrics) Operation(op client.Op, latency time.Duration, err error) {
	if op < 0 || int(op) >= len(m.ops) {
		return
	}
	i := 1
	if err != nil {
		i = 0
	}
	m.ops[op][i].Observe(float64(latency) / float64(time.Millisecond))
}

// EntriesRead implements client.Metrics.
func (m *Metrics) EntriesRead(n int) { m.entriesRead.Add(float64(n)) }

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

var (
	_ client.Metrics       = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)
