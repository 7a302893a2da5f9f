package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

func TestWriteOptionsValidate(t *testing.T) {
	good := WriteOptions{Ledgers: 1, Ledger: client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2},
		EntrySize: 1, MaxOutstanding: 1, Duration: time.Millisecond}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(*WriteOptions)
		want   string
	}{
		{func(o *WriteOptions) { o.Ledgers = 0 }, "ledgers 0"},
		{func(o *WriteOptions) { o.Ledger.AckQuorumSize = 0 }, "at least 1"},
		{func(o *WriteOptions) { o.Ledger.WriteQuorumSize = 4 }, "write quorum 4 is larger than the ensemble 3"},
		{func(o *WriteOptions) { o.Ledger.AckQuorumSize = 3 }, "ack quorum 3 is larger than the write quorum 2"},
		{func(o *WriteOptions) { o.EntrySize = 0 }, "entry size 0"},
		{func(o *WriteOptions) { o.MaxOutstanding = 0 }, "max outstanding 0"},
		{func(o *WriteOptions) { o.Rate = -1 }, "rate -1"},
		{func(o *WriteOptions) { o.Duration = 0 }, "duration 0s"},
	} {
		o := good
		tc.change(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
}

func TestReadOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    ReadOptions
		want string
	}{
		{ReadOptions{Batch: 1}, "no ledger"},
		{ReadOptions{Ledgers: []int64{1}}, "batch 0"},
		{ReadOptions{Ledgers: []int64{1, -2}, Batch: 1}, "ledger id -2"},
		{ReadOptions{Ledgers: []int64{1}, Batch: 1, Duration: -time.Second}, "duration -1s"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	if err := (ReadOptions{Ledgers: []int64{0}, Batch: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// Percentiles come from the histogram (three significant digits); values
// outside 1 µs – 1 h are clamped, not dropped.
func TestHistogramSummary(t *testing.T) {
	h := newHistogram()
	if s := h.Summary(); s != (Latency{}) {
		t.Fatalf("empty: %+v", s)
	}
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	h.Record(0)
	h.Record(2 * maxLatency)
	s := h.Summary()
	near := func(got, want time.Duration) bool { return got >= want && got <= want+want/500 }
	if s.Count != 1002 || !near(s.P50, 500*time.Microsecond) || !near(s.P95, 950*time.Microsecond) ||
		!near(s.P99, 990*time.Microsecond) || !near(s.P999, 1000*time.Microsecond) || !near(s.Max, maxLatency) {
		t.Fatalf("summary %+v", s)
	}
}

func TestResultRates(t *testing.T) {
	r := Result{Entries: 3000, Bytes: 3_000_000, Elapsed: 1500 * time.Millisecond}
	if r.EntriesPerSecond() != 2000 || r.MBPerSecond() != 2 {
		t.Fatalf("%v entries/s, %v MB/s", r.EntriesPerSecond(), r.MBPerSecond())
	}
	if (Result{Entries: 5}).EntriesPerSecond() != 0 || (Result{Bytes: 5}).MBPerSecond() != 0 {
		t.Fatal("an empty span must give 0, not Inf")
	}
}
