//go:build scalebench

package ledgerstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// TestScaleManyLedgers is the "Many ledgers" benchmark of docs/performance.md
// (issue 22 §2, scale): on the real disk, for each count in
// FOLIO_SCALE_LEDGERS (default 10000,100000) it creates that many ledgers
// of 3 entries of 100 bytes (256 adds outstanding, journal fsync on), reads
// each one's LAC (a reader's first request), and reports the Go heap in use
// and the RSS per 10k ledgers before and after an eviction sweep, the
// start-up time after a clean close and after a crash (every ledger's
// records replayed from the journal), and one GC pass after deleting 1% of
// the ledgers. Reported, never asserted (DESIGN.md §7); behind the build
// tag so that `go test ./...` does not run it:
//
//	make bench-scale
//	go test -tags scalebench -count=1 -v -run TestScaleManyLedgers -timeout 30m ./internal/storage/ledgerstore/
func TestScaleManyLedgers(t *testing.T) {
	counts := []int{10_000, 100_000}
	if v := os.Getenv("FOLIO_SCALE_LEDGERS"); v != "" {
		counts = counts[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 100 {
				t.Fatalf("FOLIO_SCALE_LEDGERS: want counts of at least 100, comma-separated: %q", v)
			}
			counts = append(counts, n)
		}
	}
	loadavg, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average at start: %s", strings.TrimSpace(string(loadavg)))
	var rows []string
	for _, n := range counts {
		rows = append(rows, scaleRun(t, n))
	}
	t.Logf("\n| ledgers | create | Go heap: resident / after sweep (per 10k) | freed per ledger | RSS: resident / after sweep | sweep (2 passes) | objects left | start-up after crash (replay) | heap after replay / + sweep | GC pass (1%% deleted) | start-up, clean |\n|---|---|---|---|---|---|---|---|---|---|---|\n%s",
		strings.Join(rows, "\n"))
}

// heapProfile writes a heap profile to $FOLIO_SCALE_HEAP_PROFILES/name.pb.gz
// if that variable names a directory (go tool pprof -sample_index=inuse_space).
func heapProfile(t *testing.T, name string) {
	dir := os.Getenv("FOLIO_SCALE_HEAP_PROFILES")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name+".pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

type memSample struct{ heap, rss int64 }

func sampleMem(t *testing.T) memSample {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: int64(ms.HeapInuse), rss: readRSS(t)}
}

// readRSS returns the process's resident set (VmRSS) in bytes.
func readRSS(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("reading RSS: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("parsing VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// per10k formats the growth from base to s per 10,000 ledgers.
func per10k(base, s int64, n int) string {
	return fmt.Sprintf("%.1f MiB", float64(s-base)*10_000/float64(n)/(1<<20))
}

type scaleDone struct{ ch chan error }

func (d scaleDone) AddComplete(err error) { d.ch <- err }

func scaleRun(t *testing.T, n int) string {
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("scale-%d", n))
	cfg := Config{
		JournalDirs: []string{filepath.Join(dir, "journal")},
		LedgerDirs:  []string{filepath.Join(dir, "ledgers")},
		Clock:       clock.Real{},
		// Sweeps are run by hand; no checkpoint during the run, so a crash
		// replays every ledger's records.
		LedgerIdleTime:     -1,
		CheckpointInterval: time.Hour,
		GCInterval:         time.Hour,
		MaxEntryLogBytes:   4 << 20,
	}
	base := sampleMem(t)
	s, err := Open(vfs.Default, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Create: 256 adds outstanding, 3 entries per ledger (LAC -1, 0, 1).
	start := time.Now()
	done := make(chan error, 256)
	outstanding := 0
	wait := func() {
		if err := <-done; err != nil {
			t.Fatalf("add: %v", err)
		}
		outstanding--
	}
	for e := int64(0); e < 3; e++ {
		for id := int64(1); id <= int64(n); id++ {
			if outstanding == cap(done) {
				wait()
			}
			outstanding++
			s.AddEntry(id, e, masterKey(id), entryBody(id, e, e-1, 0, 100), storage.AddOptions{}, scaleDone{done})
		}
	}
	for outstanding > 0 {
		wait()
	}
	created := time.Since(start)
	for id := int64(1); id <= int64(n); id++ {
		if lac, err := s.LastAddConfirmed(id); err != nil || lac != 1 {
			t.Fatalf("ledger %d: LAC %d, %v", id, lac, err)
		}
	}
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	before := sampleMem(t)
	heapProfile(t, fmt.Sprintf("before-sweep-%d", n))
	start = time.Now()
	evicted := 0
	for range 2 {
		k, err := s.EvictIdleLedgers()
		if err != nil {
			t.Fatal(err)
		}
		evicted += k
	}
	sweep := time.Since(start)
	after := sampleMem(t)
	left := s.CachedLedgers()
	heapProfile(t, fmt.Sprintf("after-sweep-%d", n))

	// Crash: Close without a checkpoint (failed store), so Open replays
	// every ledger's records from the journal.
	s.fail(errors.New("scale benchmark: simulated crash"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	base2 := sampleMem(t)
	start = time.Now()
	if s, err = Open(vfs.Default, cfg); err != nil {
		t.Fatal(err)
	}
	openReplay := time.Since(start)
	replayed := sampleMem(t)
	for range 2 {
		if _, err := s.EvictIdleLedgers(); err != nil {
			t.Fatal(err)
		}
	}
	replayedSwept := sampleMem(t)

	// GC: delete 1% of the ledgers (each deletion checkpoints), one pass.
	for id := int64(1); id <= int64(n/100); id++ {
		if err := s.DeleteLedger(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	st, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	gcTime := time.Since(start)

	// Clean restart: nothing to replay.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if s, err = Open(vfs.Default, cfg); err != nil {
		t.Fatal(err)
	}
	openClean := time.Since(start)
	t.Logf("%d ledgers: created in %v; %d objects evicted; GC pass %+v", n, created, evicted, st)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf("| %d | %.1f s | %s / %s (%s / %s) | %d B | %s / %s | %.2f s | %d | %.2f s | %s / %s | %.2f s | %.2f s |",
		n, created.Seconds(), mib(before.heap-base.heap), mib(after.heap-base.heap), per10k(base.heap, before.heap, n), per10k(base.heap, after.heap, n),
		(before.heap-after.heap)/int64(n), mib(before.rss-base.rss), mib(after.rss-base.rss), sweep.Seconds(), left,
		openReplay.Seconds(), mib(replayed.heap-base2.heap), mib(replayedSwept.heap-base2.heap), gcTime.Seconds(), openClean.Seconds())
}
