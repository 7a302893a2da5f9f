package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/benchbase"
)

// The targets table judges each target from the rows, and a target whose
// rows are missing is never reported as met.
func TestCmpTargets(t *testing.T) {
	w := func(name string) cmpWorkload {
		for _, x := range cmpWorkloads {
			if x.name == name {
				return x
			}
		}
		t.Fatalf("no workload %s", name)
		return cmpWorkload{}
	}
	row := func(work, driver, cluster string, perSec float64, p50, p99 time.Duration, driverCores float64) cmpRow {
		return cmpRow{workload: w(work), driver: driver, cluster: cluster, entries: int64(perSec * 10), elapsed: 10 * time.Second,
			p50: p50, p99: p99, driverCPU: time.Duration(driverCores * float64(10*time.Second))}
	}
	ms := time.Millisecond
	rows := []cmpRow{
		row("one-o1", "Go", "folio", 4000, 150*time.Microsecond, 2*ms, 0.2),
		row("one-o256", "Go", "java-default", 10000, 10*ms, 40*ms, 0.5),
		row("one-o256", "Go", "java-tuned", 20000, 8*ms, 30*ms, 0.5),
		row("one-o256", "Go", "folio", 70000, 2*ms, 7*ms, 0.95),
		row("e3w2a2-100b", "Go", "java-tuned", 50000, 8*ms, 40*ms, 0.6),
		row("e3w2a2-100b", "Go", "folio", 60000, 8*ms, 20*ms, 0.6),
		row("e3w2a2-100b", "Java", "folio", 30000, 8*ms, 20*ms, 0.6),
		row("tail", "Go", "folio", 1000, ms, 3*ms, 0.1),
	}
	disk := benchbase.Disk{OpsPerSec: 8000, P50: 100 * time.Microsecond, P99: 400 * time.Microsecond}
	out := cmpTargets(rows, disk, 20*time.Microsecond)
	for _, want := range []string{
		"| one bookie, 1 outstanding: p50 ≤ fdatasync p50 + RTT p50 + 40 µs | Go | 150 µs vs 160 µs | met |",
		"| one bookie, 1 outstanding: p99 ≤ 3 × fdatasync p99 | Go | 2.00 ms vs 1.20 ms | **not met** |",
		"| one bookie, 1 outstanding (physical) | Java | no Folio row | not measured |",
		"| one-o256: entries/s ≥ 3 × better Java | Go | 3.50× (driver-bound) | met |",
		"| one-o256: p99 ≤ ¼ of better Java | Go | 0.23 of Java's (driver-bound) | met |",
		"| e3w2a2-100b: entries/s ≥ 3 × better Java | Go | 1.20× | **not met** |",
		"| tailing lag p99 ≤ 2 ms at the tail rate | Go | 3.00 ms | **not met** |",
		"| e3w2a2-100b: Go client ≥ 1.5 × Java client on Folio bookies | both | 2.00× (Go driver 10.0 CPU-µs/entry, test process) | met |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing line %q in:\n%s", want, out)
		}
	}
}
