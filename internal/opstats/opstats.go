// Package opstats is BookKeeper's OpStatsLogger for Prometheus: a latency
// metric exported as a summary with a "success" label, the quantiles
// 0.5, 0.75, 0.95, 0.99, 0.999, 0.9999 and 1.0 (the maximum), a _count and
// a _sum, in milliseconds: the series names and shapes a Java bookie's
// Prometheus provider exports, so dashboards built for it keep working.
//
// Like the Java provider (prometheusStatsLatencyRolloverSeconds, 60 by
// default), quantiles describe the last complete rollover window, not a
// sliding one: observations go into the current window's histogram, and
// at the end of each window it becomes the reported one. Before the first
// window ends, and after a window without observations, the quantiles are
// NaN. _count and _sum are cumulative, as Prometheus expects.
//
// Why not prometheus.Summary: its streaming quantile estimator (one
// insertion into a sorted stream per objective, with the tight error bounds
// these quantiles need) took a third of a bookie's CPU at 10k adds/s, three
// observations per add. An HdrHistogram insertion is an index computation
// and an increment; precision is two significant digits (1 %), finer than
// the Java provider's KLL sketch.
package opstats

import (
	"math"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
)

// Quantiles are the quantiles exported, BookKeeper's.
var Quantiles = []float64{0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0}

// DefaultRollover is BookKeeper's default prometheusStatsLatencyRolloverSeconds.
const DefaultRollover = 60 * time.Second

// Range of recorded values, in microseconds: 1 µs to one hour. A value
// outside is clamped (it still counts, and the maximum shows the clamp).
const (
	lowestMicros  = 1
	highestMicros = int64(time.Hour / time.Microsecond)
	sigFigs       = 2
)

// Opts describes one OpStats.
type Opts struct {
	Name        string
	Help        string
	ConstLabels prometheus.Labels
	// Rollover is the window the quantiles describe; zero means
	// DefaultRollover.
	Rollover time.Duration
	// Now is the clock; nil means time.Now. Tests step their own.
	Now func() time.Time
}

// OpStats is one latency metric with its two children, success="false" and
// success="true". It is a prometheus.Collector.
type OpStats struct {
	desc     *prometheus.Desc
	children [2]*child // [failed, succeeded]
}

// New returns an OpStats; register it (it is a prometheus.Collector).
func New(o Opts) *OpStats {
	if o.Rollover <= 0 {
		o.Rollover = DefaultRollover
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &OpStats{desc: prometheus.NewDesc(o.Name, o.Help, []string{"success"}, o.ConstLabels)}
	start := o.Now()
	for i := range s.children {
		s.children[i] = &child{
			now:       o.Now,
			rollover:  o.Rollover,
			windowEnd: start.Add(o.Rollover),
			cur:       hdrhistogram.New(lowestMicros, highestMicros, sigFigs),
			last:      hdrhistogram.New(lowestMicros, highestMicros, sigFigs),
		}
	}
	return s
}

// Observers returns the children as observers of milliseconds, indexed by
// success: [0] failed, [1] succeeded (BookKeeper's registerFailedEvent and
// registerSuccessfulEvent).
func (s *OpStats) Observers() [2]prometheus.Observer {
	return [2]prometheus.Observer{s.children[0], s.children[1]}
}

// Describe implements prometheus.Collector.
func (s *OpStats) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

// Collect implements prometheus.Collector.
func (s *OpStats) Collect(ch chan<- prometheus.Metric) {
	for i, c := range s.children {
		count, sum, q := c.snapshot()
		label := "false"
		if i == 1 {
			label = "true"
		}
		ch <- prometheus.MustNewConstSummary(s.desc, count, sum, q, label)
	}
}

// child is one label value's window histograms and totals.
type child struct {
	now      func() time.Time
	rollover time.Duration

	mu        sync.Mutex
	windowEnd time.Time // end of the window cur collects
	cur       *hdrhistogram.Histogram
	last      *hdrhistogram.Histogram // the last complete window; empty if none
	count     uint64
	sumMillis float64
	// sinceClock counts observations since the clock was last read.
	sinceClock int
}

// clockEvery is how many observations share one reading of the clock: a
// window's end is noticed at the first observation after it among every
// clockEvery, or at the next scrape, whichever comes first. Reading the
// clock at every observation cost a bookie 3 % of its CPU (three
// observations an add; the clock is slow on some VMs); up to clockEvery-1
// observations may land in the window before theirs.
const clockEvery = 64

// Observe records a latency in milliseconds.
func (c *child) Observe(millis float64) {
	micros := int64(millis * 1000)
	micros = min(max(micros, lowestMicros), highestMicros)
	c.mu.Lock()
	if c.sinceClock++; c.sinceClock >= clockEvery {
		c.sinceClock = 0
		c.rollLocked(c.now())
	}
	_ = c.cur.RecordValue(micros) // in range by the clamp above
	c.count++
	c.sumMillis += millis
	c.mu.Unlock()
}

// rollLocked ends the windows that have passed by now: the window cur
// collected becomes the reported one if it is the latest complete window,
// otherwise (a whole window passed with no observation) the reported window
// is empty.
func (c *child) rollLocked(now time.Time) {
	if now.Before(c.windowEnd) {
		return
	}
	passed := now.Sub(c.windowEnd)/c.rollover + 1 // windows ended since cur began
	c.last, c.cur = c.cur, c.last
	c.cur.Reset()
	if passed > 1 {
		c.last.Reset()
	}
	c.windowEnd = c.windowEnd.Add(passed * c.rollover)
}

// snapshot returns the totals and the reported window's quantiles.
func (c *child) snapshot() (count uint64, sum float64, q map[float64]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rollLocked(c.now())
	q = make(map[float64]float64, len(Quantiles))
	empty := c.last.TotalCount() == 0
	for _, quantile := range Quantiles {
		switch {
		case empty:
			q[quantile] = math.NaN()
		case quantile == 1:
			q[quantile] = float64(c.last.Max()) / 1000
		default:
			q[quantile] = float64(c.last.ValueAtQuantile(quantile*100)) / 1000
		}
	}
	return c.count, c.sumMillis, q
}
