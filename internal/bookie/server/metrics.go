package server

import (
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/opstats"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/wire"
)

// PrometheusMetrics are one bookie's Prometheus collectors. Names, types
// and labels follow BookKeeper's Prometheus provider (scope names joined
// with "_"; an OpStatsLogger is a summary in milliseconds with the label
// success="true|false", both present from start-up; a Counter has no
// _total suffix) where BookKeeper has the measurement, so existing
// dashboards and alerts work:
//
//   - bookkeeper_server_<REQUEST> (summary): per request kind, e.g.
//     ADD_ENTRY_REQUEST, READ_ENTRY_REQUEST, READ_ENTRY_FENCE_REQUEST
//     (bookie.RequestKind);
//   - bookkeeper_server_ADD_ENTRY and bookkeeper_server_READ_ENTRY: the same
//     add and read observations under BookKeeper's processing-latency names;
//   - bookie_WRITE_BYTES, bookie_READ_BYTES (counters): entry bytes added
//     and read;
//   - bookie_SERVER_STATUS: 1 writable, 0 read-only;
//   - bookie_journal_JOURNAL_SYNC (fsync latency, summary) and
//     bookie_journal_JOURNAL_ADD_ENTRY (append to durable, summary): fed by
//     the storage engine (ledgerstore.Observer);
//   - bookie_DELETED_LEDGER_TOTAL (4.17's name) and bookie_DELETED_LEDGER_COUNT
//     (the name before 4.13, which older dashboards query): ledgers dropped
//     by garbage collection;
//   - storageCollector's, read at scrape time: bookie_ledgers_count,
//     bookie_MINOR_COMPACTION_TOTAL, bookie_MAJOR_COMPACTION_TOTAL,
//     bookie_RECLAIMED_COMPACTION_SPACE_BYTES, bookie_ledger_writable_dirs,
//     bookie_ledger_num_dirs, bookie_ledger_dir_<path>_usage (per ledger
//     directory, from the StateManager's last disk check),
//     bookie_journal_JOURNAL_QUEUE_SIZE.
//
// Folio's own (no BookKeeper equivalent): bookkeeper_server_REQUESTS_IN_PROGRESS and
// bookkeeper_server_LONG_POLL_READS_IN_PROGRESS (bookie.InFlight),
// bookie_gc_PASSES{outcome}, bookie_READ_ONLY_CAUSE{cause},
// bookkeeper_server_READS_PAUSED (connections at their in-flight limit),
// folio_bookie_dir_full{kind,dir} and folio_bookie_dir_usage{kind,dir}
// (storageCollector: the per-directory disk verdicts).
//
// It implements bookie.Metrics. In `folio standalone` every bookie's
// collectors carry the constant label bookie="<bookie id>". The
// per-request methods do not allocate: every labelled child is resolved
// once, here.
type PrometheusMetrics struct {
	// requests, addEntry and readEntry are indexed by success (0 false,
	// 1 true).
	requests  [numRequestKinds][2]prometheus.Observer
	addEntry  [2]prometheus.Observer
	readEntry [2]prometheus.Observer
	// processing are BookKeeper's processing-latency names of the other
	// request kinds (WRITE_LAC, READ_LAC, FORCE_LEDGER, GET_BOOKIE_INFO,
	// GET_LIST_OF_ENTRIES_OF_LEDGER), by kind; unset for kinds without one.
	processing   [numRequestKinds]*[2]prometheus.Observer
	serverStatus prometheus.Gauge
	writeBytes   prometheus.Counter
	readBytes    prometheus.Counter

	journalSync prometheus.Observer
	journalAdd  [2]prometheus.Observer

	deletedLedgers    prometheus.Counter
	deletedLedgersOld prometheus.Counter
	deletedLedgersGC  prometheus.Counter
	gcPasses          *prometheus.CounterVec
	readOnlyCause     *prometheus.GaugeVec
	conn              connMetrics

	collectors []prometheus.Collector
}

// numRequestKinds is how many bookie.RequestKind values exist
// (KindOther is the last).
const numRequestKinds = int(bookie.KindOther) + 1

// NewPrometheusMetrics creates the collectors with constLabels (nil for a lone
// bookie) and registers them with reg. rollover is the window of the
// latency quantiles (prometheusStatsLatencyRolloverSeconds; zero: 60 s).
func NewPrometheusMetrics(reg prometheus.Registerer, constLabels prometheus.Labels, rollover time.Duration) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{}
	// opStats is a BookKeeper OpStatsLogger: both success children exist
	// from the start.
	opStats := func(name, help string) [2]prometheus.Observer {
		s := opstats.New(opstats.Opts{Name: name, Help: help, ConstLabels: constLabels, Rollover: rollover})
		m.collectors = append(m.collectors, s)
		return s.Observers()
	}
	for k := 0; k < numRequestKinds; k++ {
		kind := bookie.RequestKind(k)
		m.requests[k] = opStats("bookkeeper_server_"+kind.String(),
			"Latency of "+kind.String()+" from receipt to response, in milliseconds.")
	}
	m.addEntry = opStats("bookkeeper_server_ADD_ENTRY", "Latency of adds, in milliseconds.")
	m.readEntry = opStats("bookkeeper_server_READ_ENTRY", "Latency of reads, in milliseconds.")
	for kind, name := range map[bookie.RequestKind]string{
		bookie.KindWriteLAC: "WRITE_LAC", bookie.KindReadLAC: "READ_LAC", bookie.KindForceLedger: "FORCE_LEDGER",
		bookie.KindGetBookieInfo: "GET_BOOKIE_INFO", bookie.KindGetListOfEntries: "GET_LIST_OF_ENTRIES_OF_LEDGER",
	} {
		o := opStats("bookkeeper_server_"+name, "Latency of "+name+" processing, in milliseconds.")
		m.processing[kind] = &o
	}
	m.serverStatus = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bookie_SERVER_STATUS", Help: "1 when the bookie is writable, 0 when read-only.", ConstLabels: constLabels,
	})
	m.writeBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_WRITE_BYTES", Help: "Bytes of entry bodies added.", ConstLabels: constLabels,
	})
	m.readBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_READ_BYTES", Help: "Bytes of entry bodies read.", ConstLabels: constLabels,
	})
	m.journalSync = opStats("bookie_journal_JOURNAL_SYNC", "Latency of journal fsyncs, in milliseconds.")[1]
	m.journalAdd = opStats("bookie_journal_JOURNAL_ADD_ENTRY", "Latency from journal enqueue to durable, in milliseconds.")
	m.deletedLedgers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_DELETED_LEDGER_TOTAL", Help: "Ledgers deleted by garbage collection.", ConstLabels: constLabels,
	})
	m.deletedLedgersGC = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_gc_DELETED_LEDGER_TOTAL", Help: "Ledgers deleted by garbage collection (4.17's name, under the gc scope; the same as bookie_DELETED_LEDGER_TOTAL).", ConstLabels: constLabels,
	})
	m.deletedLedgersOld = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_DELETED_LEDGER_COUNT", Help: "Ledgers deleted by garbage collection (BookKeeper's name before 4.13; the same as bookie_DELETED_LEDGER_TOTAL).", ConstLabels: constLabels,
	})
	m.gcPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bookie_gc_PASSES", Help: "Garbage collection passes by outcome (ok, failed).", ConstLabels: constLabels,
	}, []string{"outcome"})
	m.readOnlyCause = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bookie_READ_ONLY_CAUSE", Help: "1 for each cause currently holding the bookie read-only (forced, disk_full, storage_failed).", ConstLabels: constLabels,
	}, []string{"cause"})
	m.initConnMetrics(constLabels)
	m.collectors = append(m.collectors, m.serverStatus, m.writeBytes, m.readBytes,
		m.deletedLedgers, m.deletedLedgersOld, m.deletedLedgersGC, m.gcPasses, m.readOnlyCause)
	// Make the labelled series exist before the first observation, so a
	// scrape shows every name from the start.
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
	success := 0
	if status == wire.StatusOK || status == wire.StatusNoEntry || status == wire.StatusNoLedger {
		success = 1
	}
	v := ms(latency)
	m.requests[kind][success].Observe(v)
	switch kind {
	case bookie.KindAdd, bookie.KindRecoveryAdd:
		m.addEntry[success].Observe(v)
	case bookie.KindRead, bookie.KindFenceRead, bookie.KindLongPollRead, bookie.KindBatchRead:
		m.readEntry[success].Observe(v)
	default:
		if o := m.processing[kind]; o != nil {
			o[success].Observe(v)
		}
	}
}

// EntryBytes implements bookie.Metrics.
func (m *PrometheusMetrics) EntryBytes(written bool, n int) {
	if written {
		m.writeBytes.Add(float64(n))
	} else {
		m.readBytes.Add(float64(n))
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
	m.deletedLedgersOld.Add(float64(len(r.Deleted)))
	m.deletedLedgersGC.Add(float64(len(r.Deleted)))
	if r.Err != nil {
		m.gcPasses.WithLabelValues("failed").Inc()
	} else {
		m.gcPasses.WithLabelValues("ok").Inc()
	}
}

// JournalSynced and JournalAdded implement ledgerstore.Observer: one
// journal fdatasync, and one entry's time from journal append to durable.
func (m *PrometheusMetrics) JournalSynced(took time.Duration) { m.journalSync.Observe(ms(took)) }

func (m *PrometheusMetrics) JournalAdded(took time.Duration, err error) {
	i := 1
	if err != nil {
		i = 0
	}
	m.journalAdd[i].Observe(ms(took))
}

var _ ledgerstore.Observer = (*PrometheusMetrics)(nil)

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
	security  [numSecurityEvents]prometheus.Counter
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
	security := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bookkeeper_server_CONNECTION_SECURITY_EVENTS", ConstLabels: constLabels,
		Help: "TLS and authorisation events of client connections: tls (handshake done), tls_handshake_failed, authz_failed (certificate role refused), unauthenticated_request (answered EUA or closed).",
	}, []string{"event"})
	for e := range m.conn.security {
		m.conn.security[e] = security.WithLabelValues(SecurityEvent(e).String())
	}
	m.collectors = append(m.collectors, security)
}

// ConnectionSecurity implements Metrics.
func (m *PrometheusMetrics) ConnectionSecurity(e SecurityEvent) {
	if e < numSecurityEvents {
		m.conn.security[e].Inc()
	}
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

// storageCollector exports the storage's figures at scrape time, under
// BookKeeper's names: bookie_ledgers_count (DbLedgerStorage's ledgers-count;
// counted from the store's index at most once per ledgerCountTTL, so that
// frequent scrapes do not walk the index each time), the compaction
// counters (Folio's one compaction level counts as minor; major stays 0) and
// bookie_ledger_writable_dirs.
type storageCollector struct {
	p                                                  *Process
	ledgers, minor, major, reclaimed, writable, jqueue *prometheus.Desc
	// gcMinor, gcMajor, gcReclaimed: the same counters under the gc
	// scope, as BookKeeper 4.17 names them (bookie_gc_…); the unscoped
	// names are the ones stock dashboards query.
	gcMinor, gcMajor, gcReclaimed, numDirs *prometheus.Desc
	// dirFull and dirUsage are Folio's per-directory verdicts
	// (folio_bookie_dir_full, folio_bookie_dir_usage{kind,dir});
	// javaUsage[i] is BookKeeper's bookie_ledger_dir_<path>_usage of ledger
	// directory i (nil when its name repeats an earlier one's).
	dirFull, dirUsage *prometheus.Desc
	javaUsage         []*prometheus.Desc
	mu                sync.Mutex
	ledgerCount       int
	countedAt         time.Time
}

// ledgerCountTTL bounds how often a scrape counts the store's ledgers.
const ledgerCountTTL = 10 * time.Second

func newStorageCollector(p *Process, constLabels prometheus.Labels) *storageCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, constLabels) }
	c := &storageCollector{
		p:         p,
		ledgers:   d("bookie_ledgers_count", "Ledgers held by this bookie's storage (recounted at most every 10 s; DbLedgerStorage's, without its ledgerDir/indexDir labels)."),
		minor:     d("bookie_MINOR_COMPACTION_TOTAL", "Compaction passes of entry logs (Folio's single compaction level)."),
		major:     d("bookie_MAJOR_COMPACTION_TOTAL", "Major compaction passes (always 0: Folio has one compaction level, counted as minor)."),
		reclaimed: d("bookie_RECLAIMED_COMPACTION_SPACE_BYTES", "Bytes reclaimed by compaction (read from old entry logs minus rewritten)."),
		writable:  d("bookie_ledger_writable_dirs", "Ledger directories that take new entry logs (not above diskUsageThreshold)."),
		jqueue:    d("bookie_journal_JOURNAL_QUEUE_SIZE", "Journal records queued or being written, not yet durable."),

		gcMinor:     d("bookie_gc_MINOR_COMPACTION_TOTAL", "As bookie_MINOR_COMPACTION_TOTAL (BookKeeper 4.17's gc-scoped name)."),
		gcMajor:     d("bookie_gc_MAJOR_COMPACTION_TOTAL", "As bookie_MAJOR_COMPACTION_TOTAL (BookKeeper 4.17's gc-scoped name)."),
		gcReclaimed: d("bookie_gc_RECLAIMED_COMPACTION_SPACE_BYTES", "As bookie_RECLAIMED_COMPACTION_SPACE_BYTES (BookKeeper 4.17's gc-scoped name)."),
		numDirs:     d("bookie_ledger_num_dirs", "Ledger directories configured."),

		dirFull: prometheus.NewDesc("folio_bookie_dir_full", "1 for a ledger or journal directory above diskUsageThreshold (until it falls below diskUsageLwmThreshold): a full ledger directory takes no new entry logs.",
			[]string{"kind", "dir"}, constLabels),
		dirUsage: prometheus.NewDesc("folio_bookie_dir_usage", "Used fraction of the volume of a ledger or journal directory, at the last disk check.",
			[]string{"kind", "dir"}, constLabels),
	}
	seen := map[string]bool{}
	for _, dir := range p.cfg.LedgerDirs {
		name := javaDirUsageName(dir)
		if seen[name] {
			c.javaUsage = append(c.javaUsage, nil)
			continue
		}
		seen[name] = true
		c.javaUsage = append(c.javaUsage, d(name, "Used percentage of the volume of ledger directory "+dir+" (BookKeeper's LedgerDirsManager gauge)."))
	}
	return c
}

// javaDirUsageName is BookKeeper's name of a ledger directory's usage
// gauge: "dir_" + the directory with "/" as "_" + "_usage" in the ledger
// scope, sanitised as its Prometheus provider does (every character other
// than a letter, digit, "_" or ":" becomes "_").
func javaDirUsageName(dir string) string {
	name := []byte("bookie_ledger_dir_" + strings.ReplaceAll(filepath.Clean(dir), "/", "_") + "_usage")
	for i, ch := range name {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == ':') {
			name[i] = '_'
		}
	}
	return string(name)
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ledgers
	ch <- c.minor
	ch <- c.major
	ch <- c.reclaimed
	ch <- c.writable
	ch <- c.jqueue
	ch <- c.gcMinor
	ch <- c.gcMajor
	ch <- c.gcReclaimed
	ch <- c.numDirs
	ch <- c.dirFull
	ch <- c.dirUsage
	for _, d := range c.javaUsage {
		if d != nil {
			ch <- d
		}
	}
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.countedAt.IsZero() || time.Since(c.countedAt) >= ledgerCountTTL {
		n := 0
		if err := c.p.store.Ledgers(func(int64) bool { n++; return true }); err == nil {
			c.ledgerCount, c.countedAt = n, time.Now()
		}
	}
	ch <- prometheus.MustNewConstMetric(c.ledgers, prometheus.GaugeValue, float64(c.ledgerCount))
	c.mu.Unlock()
	var cs ledgerstore.CompactionStatus
	queued := 0
	if cc, ok := c.p.store.(compactionControl); ok {
		cs = cc.CompactionStatus()
		queued = cc.JournalQueuedRecords()
	}
	// A counter, as Java's (incremented on enqueue, decremented on
	// completion): its value is a level, not a total.
	ch <- prometheus.MustNewConstMetric(c.jqueue, prometheus.CounterValue, float64(queued))
	reclaimed := float64(max(cs.BytesRead-cs.BytesWritten, 0))
	for _, d := range []*prometheus.Desc{c.minor, c.gcMinor} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(cs.MinorCount))
	}
	for _, d := range []*prometheus.Desc{c.major, c.gcMajor} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(cs.MajorCount))
	}
	for _, d := range []*prometheus.Desc{c.reclaimed, c.gcReclaimed} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, reclaimed)
	}
	ch <- prometheus.MustNewConstMetric(c.numDirs, prometheus.GaugeValue, float64(len(c.p.cfg.LedgerDirs)))
	ch <- prometheus.MustNewConstMetric(c.writable, prometheus.GaugeValue, float64(c.p.state.WritableLedgerDirs()))
	for _, d := range c.p.state.Dirs() {
		kind := "ledger"
		if d.Journal {
			kind = "journal"
		}
		full := 0.0
		if d.Full {
			full = 1
		}
		ch <- prometheus.MustNewConstMetric(c.dirFull, prometheus.GaugeValue, full, kind, d.Dir)
		ch <- prometheus.MustNewConstMetric(c.dirUsage, prometheus.GaugeValue, d.Usage, kind, d.Dir)
		if !d.Journal && d.Position < len(c.javaUsage) && c.javaUsage[d.Position] != nil && d.Dir == c.p.cfg.LedgerDirs[d.Position] {
			ch <- prometheus.MustNewConstMetric(c.javaUsage[d.Position], prometheus.GaugeValue, d.Usage*100)
		}
	}
}
