package opstats

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func gather(t *testing.T, s *OpStats) map[string]*dto.Summary {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Summary{}
	for _, m := range mfs[0].GetMetric() {
		out[m.GetLabel()[0].GetValue()] = m.GetSummary()
	}
	return out
}

func quantile(s *dto.Summary, q float64) float64 {
	for _, x := range s.GetQuantile() {
		if x.GetQuantile() == q {
			return x.GetValue()
		}
	}
	return -1
}

func TestWindowsAndTotals(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	s := New(Opts{Name: "bookie_journal_JOURNAL_SYNC", Help: "h", Rollover: 10 * time.Second, Now: clk.now})
	obs := s.Observers()
	for i := 1; i <= 100; i++ {
		obs[1].Observe(float64(i)) // 1..100 ms
	}
	obs[0].Observe(7)

	// Before the first window ends: totals, but no quantiles yet.
	g := gather(t, s)
	if g["true"].GetSampleCount() != 100 || g["true"].GetSampleSum() != 5050 {
		t.Fatalf("count/sum = %d/%v, want 100/5050", g["true"].GetSampleCount(), g["true"].GetSampleSum())
	}
	if !math.IsNaN(quantile(g["true"], 0.5)) {
		t.Fatalf("p50 before the first rollover = %v, want NaN", quantile(g["true"], 0.5))
	}

	// The window ended: its quantiles are reported (2 significant digits).
	clk.add(10 * time.Second)
	g = gather(t, s)
	for _, c := range []struct{ q, want float64 }{{0.5, 50}, {0.99, 99}, {1.0, 100}} {
		if got := quantile(g["true"], c.q); math.Abs(got-c.want)/c.want > 0.01 {
			t.Errorf("q%v = %v, want %v within 1%%", c.q, got, c.want)
		}
	}
	if got := quantile(g["false"], 0.5); math.Abs(got-7) > 0.07 {
		t.Errorf("failed p50 = %v, want 7", got)
	}
	if len(g["true"].GetQuantile()) != len(Quantiles) {
		t.Errorf("%d quantiles, want %d", len(g["true"].GetQuantile()), len(Quantiles))
	}

	// Observations of the next window do not show until it ends.
	obs[1].Observe(1000)
	if got := quantile(gather(t, s)["true"], 1.0); math.Abs(got-100) > 1 {
		t.Errorf("max while the next window is open = %v, want the last window's 100", got)
	}
	clk.add(10 * time.Second)
	if got := quantile(gather(t, s)["true"], 0.5); math.Abs(got-1000)/1000 > 0.01 {
		t.Errorf("p50 of the second window = %v, want 1000", got)
	}

	// A whole window without observations reports NaN; totals stay.
	clk.add(25 * time.Second)
	g = gather(t, s)
	if !math.IsNaN(quantile(g["true"], 0.5)) {
		t.Errorf("p50 after an empty window = %v, want NaN", quantile(g["true"], 0.5))
	}
	if g["true"].GetSampleCount() != 101 {
		t.Errorf("count = %d, want 101 (cumulative)", g["true"].GetSampleCount())
	}
	// An observation late in a window that began after a gap lands in the
	// window of its time, not in a stale one.
	obs[1].Observe(3)
	clk.add(5 * time.Second) // now 50 s after start: that window ended
	if got := quantile(gather(t, s)["true"], 0.5); math.Abs(got-3) > 0.03 {
		t.Errorf("p50 = %v, want 3", got)
	}
}

func TestClampAndTextFormat(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	s := New(Opts{Name: "bookkeeper_server_ADD_ENTRY", Help: "Latency of adds, in milliseconds.", Now: clk.now,
		ConstLabels: prometheus.Labels{"bookie": "b1"}})
	o := s.Observers()[1]
	o.Observe(0)    // below the range: clamped to 1 µs
	o.Observe(-5)   // a clock step back: clamped
	o.Observe(1e12) // above: clamped to an hour
	clk.add(DefaultRollover)
	want := `
# HELP bookkeeper_server_ADD_ENTRY Latency of adds, in milliseconds.
# TYPE bookkeeper_server_ADD_ENTRY summary
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want+expectedText()), "bookkeeper_server_ADD_ENTRY"); err != nil {
		t.Fatal(err)
	}
}

func expectedText() string {
	var b strings.Builder
	for _, succ := range []string{"false", "true"} {
		for _, q := range []string{"0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1"} {
			v := "NaN"
			if succ == "true" {
				// Two of three values at 1 µs, one at the hour clamp, which
				// the histogram reports as the top of its 1 % bucket.
				v = "0.001"
				if q != "0.5" && q != "0.75" {
					v = "3.607101439e+06"
				}
			}
			b.WriteString(`bookkeeper_server_ADD_ENTRY{bookie="b1",success="` + succ + `",quantile="` + q + `"} ` + v + "\n")
		}
		if succ == "true" {
			b.WriteString(`bookkeeper_server_ADD_ENTRY_sum{bookie="b1",success="true"} 9.99999999995e+11` + "\n")
			b.WriteString(`bookkeeper_server_ADD_ENTRY_count{bookie="b1",success="true"} 3` + "\n")
		} else {
			b.WriteString(`bookkeeper_server_ADD_ENTRY_sum{bookie="b1",success="false"} 0` + "\n")
			b.WriteString(`bookkeeper_server_ADD_ENTRY_count{bookie="b1",success="false"} 0` + "\n")
		}
	}
	return b.String()
}

func TestObserveAllocs(t *testing.T) {
	s := New(Opts{Name: "x", Help: "h", Rollover: time.Nanosecond})
	o := s.Observers()[1]
	if n := testing.AllocsPerRun(10000, func() { o.Observe(1.5) }); n > 0 {
		t.Errorf("%.2f allocations per observation (with a rollover each time), want 0", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	s := New(Opts{Name: "x", Help: "h"})
	o := s.Observers()[1]
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Observe(1.5)
		}
	})
}

func BenchmarkPrometheusSummary(b *testing.B) {
	v := prometheus.NewSummary(prometheus.SummaryOpts{Name: "x", Help: "h",
		Objectives: map[float64]float64{0.5: 0.05, 0.75: 0.01, 0.95: 0.005, 0.99: 0.001, 0.999: 0.0001, 0.9999: 0.00001},
		MaxAge:     time.Minute})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			v.Observe(1.5)
		}
	})
}
