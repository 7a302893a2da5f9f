package ledgerstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/benchbase"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// BenchmarkCatchUpRead is spec/performance.md W7 on one store: it writes
// FOLIO_CATCHUP_MIB (default 512) MiB of 1 KiB entries round-robin over 8
// ledgers (so each flush lays every ledger's entries down in its own run
// and the runs of the ledgers alternate in the entry logs, as on a bookie
// with concurrent writers), then for each reading mode closes the store,
// empties the page cache (benchbase.DropCache: drop_caches, else fadvise,
// else it says "warm"), reopens it, empties the page cache again (Open
// scans every entry log) and reads every entry back:
//   - sequential: one ledger after the other, entry by entry (ReadEntry), as
//     one catch-up reader does;
//   - concurrent: the 8 ledgers at once, one reader each.
//
// It reports entries/s, MB/s and the bytes read from the disks per payload
// byte (/proc/vmstat pgpgin, machine-wide), and in the same run the
// disk's raw cold sequential and random read rates (benchbase.MeasureRead).
// Run it once per invocation:
//
//	go test -run '^$' -bench BenchmarkCatchUpRead -benchtime 1x -timeout 30m ./internal/storage/ledgerstore/
func BenchmarkCatchUpRead(b *testing.B) {
	mib := int64(512)
	if v := os.Getenv("FOLIO_CATCHUP_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("FOLIO_CATCHUP_MIB=%q: want a positive number of MiB", v)
		}
		mib = n
	}
	const ledgers = 8
	const entryBytes = 1024
	perLedger := mib << 20 / entryBytes / ledgers
	dir := b.TempDir()
	raw, err := benchbase.MeasureRead(dir, 256<<20, 2000)
	if err != nil {
		b.Fatal(err)
	}
	b.Log(raw)
	cfg := Config{
		JournalDirs: []string{filepath.Join(dir, "journal")},
		LedgerDirs:  []string{filepath.Join(dir, "ledgers")},
		Clock:       clock.Real{},
	}
	t0 := time.Now()
	catchUpWrite(b, cfg, ledgers, perLedger, entryBytes)
	b.Logf("wrote %d ledgers x %d entries of %d B interleaved in %v", ledgers, perLedger, entryBytes, time.Since(t0).Round(time.Millisecond))
	for _, mode := range []string{"sequential", "concurrent"} {
		b.Run(mode, func(b *testing.B) {
			var elapsed time.Duration
			var diskBytes int64
			var cache benchbase.Cache
			var cpu time.Duration
			for range b.N {
				benchbase.DropCache(dir)
				io0, t0 := diskReadBytes(b), time.Now()
				s, err := Open(vfs.Default, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("open took %v and read %d MiB from disk", time.Since(t0).Round(time.Millisecond), (diskReadBytes(b)-io0)>>20)
				// Open scans every entry log (entrylog rebuilds per-ledger
				// usage), which warms the page cache: empty it again so
				// the reads below find nothing cached.
				cache = benchbase.DropCache(dir)
				io0 = diskReadBytes(b)
				cpu0 := processCPU(b)
				start := time.Now()
				if mode == "sequential" {
					for l := range int64(ledgers) {
						catchUpReadLedger(b, s, l+1, perLedger, entryBytes)
					}
				} else {
					var wg sync.WaitGroup
					for l := range int64(ledgers) {
						wg.Go(func() { catchUpReadLedger(b, s, l+1, perLedger, entryBytes) })
					}
					wg.Wait()
				}
				elapsed += time.Since(start)
				cpu += processCPU(b) - cpu0
				diskBytes += diskReadBytes(b) - io0
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			entries := float64(int64(b.N) * ledgers * perLedger)
			rate := entries / elapsed.Seconds()
			mbps := rate * entryBytes / 1e6
			amp := float64(diskBytes) / (entries * entryBytes)
			b.ReportMetric(rate, "entries/s")
			b.ReportMetric(mbps, "MB/s")
			b.ReportMetric(amp, "disk-B/payload-B")
			b.ReportMetric(mbps/raw.SeqMBps, "x-raw-seq")
			cpuPer := float64(cpu.Microseconds()) / entries
			b.ReportMetric(cpuPer, "cpu-µs/entry")
			b.Logf("%s: %.0f entries/s, %.1f MB/s (%.2fx raw sequential %.0f MB/s), %.2f CPU-µs per entry, disk read %.2f B per payload B, cache %s; %s",
				mode, rate, mbps, mbps/raw.SeqMBps, raw.SeqMBps, cpuPer, amp, cache, raw)
		})
	}
}

// catchUpWrite adds ledgers x perLedger entries round-robin (entry e of
// every ledger before entry e+1 of any), up to 512 outstanding, then closes
// the store. Each body starts with its ledger and entry ids so a read can
// check it got the right one.
func catchUpWrite(b *testing.B, cfg Config, ledgers, perLedger int64, entryBytes int) {
	s, err := Open(vfs.Default, cfg)
	if err != nil {
		b.Fatal(err)
	}
	key := []byte("bench-master-key")
	sem := make(chan struct{}, 512)
	var failed sync.Once
	done := &catchUpDone{sem: sem, fail: func(err error) { failed.Do(func() { b.Error(err) }) }}
	body := make([]byte, entryBytes)
	for e := range perLedger {
		for l := range ledgers {
			sem <- struct{}{}
			binary.BigEndian.PutUint64(body[0:], uint64(l+1))
			binary.BigEndian.PutUint64(body[8:], uint64(e))
			s.AddEntry(l+1, e, key, body, storage.AddOptions{}, done)
		}
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if b.Failed() {
		b.FailNow()
	}
}

type catchUpDone struct {
	sem  chan struct{}
	fail func(error)
}

func (d *catchUpDone) AddComplete(err error) {
	if err != nil {
		d.fail(err)
	}
	<-d.sem
}

func catchUpReadLedger(b *testing.B, s *Store, ledgerID, entries int64, entryBytes int) {
	var want [16]byte
	for e := range entries {
		body, err := s.ReadEntry(ledgerID, e)
		if err != nil {
			b.Errorf("ledger %d entry %d: %v", ledgerID, e, err)
			return
		}
		binary.BigEndian.PutUint64(want[0:], uint64(ledgerID))
		binary.BigEndian.PutUint64(want[8:], uint64(e))
		if len(body) != entryBytes || !bytes.Equal(body[:16], want[:]) {
			b.Errorf("ledger %d entry %d: wrong body (%d bytes)", ledgerID, e, len(body))
			return
		}
	}
}

// processCPU is the user+system CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// diskReadBytes is the machine's pgpgin from /proc/vmstat in bytes: what
// all block devices delivered (other processes' reads included, so it is
// an upper bound; /proc/self/io's read_bytes misses readahead done on this
// kernel).
func diskReadBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/vmstat")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "pgpgin "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n << 10
		}
	}
	b.Fatal(fmt.Errorf("/proc/vmstat has no pgpgin"))
	return 0
}
