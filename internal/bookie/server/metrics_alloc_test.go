package server

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/wire"
)

// TestMetricsAllocs: the per-request and per-entry measurements allocate
// nothing (make allocs; the race detector changes allocation, so it is
// skipped there).
func TestMetricsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	m, err := NewPrometheusMetrics(prometheus.NewRegistry(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("x")
	n := testing.AllocsPerRun(10000, func() {
		m.RequestCompleted(bookie.KindAdd, wire.StatusOK, time.Millisecond)
		m.RequestCompleted(bookie.KindRead, wire.StatusNoEntry, time.Millisecond)
		m.EntryBytes(true, 100)
		m.EntryBytes(false, 100)
		m.JournalAdded(time.Millisecond, nil)
		m.JournalAdded(time.Millisecond, failed)
		m.JournalSynced(time.Millisecond)
	})
	if n > 0.01 {
		t.Errorf("%.3f allocations per add's measurements, want 0", n)
	}
}
