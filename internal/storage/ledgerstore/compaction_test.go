package ledgerstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// compactionStore opens a store on real files with one ledger directory,
// a manual clock and the given policy, and fills it: ledgers 1-4
// interleaved (flushed every two rounds, so every sealed log holds them in
// about equal shares), then ledger 9 alone in logs of its own. Ledgers 2,
// 4 and 9 are then deleted: the interleaved logs are about half live, and
// ledger 9's logs are wholly dead.
func compactionStore(t *testing.T, p *CompactionPolicy, opts ...func(*Config)) (*Store, Config, *clock.Manual) {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	cfg := testConfig()
	cfg.JournalDirs = []string{filepath.Join(dir, "j0")}
	cfg.LedgerDirs = []string{filepath.Join(dir, "l0")}
	cfg.Clock = clk
	cfg.MaxEntryLogBytes = 64 << 10
	cfg.CompactionBytesPerSecond = -1
	cfg.Compaction = p
	for _, o := range opts {
		o(&cfg)
	}
	s := mustOpen(t, vfs.Default, cfg)
	for e := int64(0); e < 120; e++ {
		for l := int64(1); l <= 4; l++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 700))
		}
		if e%2 == 1 {
			if err := s.FlushWriteCache(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for e := int64(0); e < 250; e++ {
		mustAdd(t, s, 9, e, entryBody(9, e, e-1, 0, 700))
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []int64{2, 4, 9} {
		if err := s.DeleteLedger(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return s, cfg, clk
}

// halfLive counts sealed logs between the minor (0.3) and major (0.7)
// thresholds.
func halfLive(s *Store) int {
	n := 0
	for _, u := range s.shards[0].el.Usage(func(l int64) bool { return l%2 == 1 && l != 9 }) {
		if f := u.LiveFraction(); u.Sealed && f >= 0.3 && f < 0.7 {
			n++
		}
	}
	return n
}

func checkLive(t *testing.T, s *Store) {
	t.Helper()
	for e := int64(0); e < 120; e++ {
		for l := int64(1); l <= 4; l++ {
			if l%2 == 1 {
				mustRead(t, s, l, e, entryBody(l, e, e-1, 0, 700))
			} else if _, err := s.ReadEntry(l, e); !errors.Is(err, storage.ErrNoLedger) {
				t.Fatalf("deleted ledger %d entry %d: %v", l, e, err)
			}
		}
	}
}

// TestCompactionPolicyIntervals: BookKeeper's schedule. Every tick removes
// wholly dead logs; the minor compaction (threshold 0.3) leaves half-live
// logs alone; the major one (0.7), due a day after Open, compacts them; the
// intervals are counted on the store's clock; everything live still reads
// back, also after reopening the files.
func TestCompactionPolicyIntervals(t *testing.T) {
	s, cfg, clk := compactionStore(t, &CompactionPolicy{MinorThreshold: 0.3, MinorInterval: time.Hour, MajorThreshold: 0.7, MajorInterval: 24 * time.Hour})
	clk.Advance(10 * time.Minute)
	st, kind, err := s.GCTick(false)
	if err != nil || kind != CompactionNone || st.LogsRemoved == 0 || st.EntriesMoved != 0 || st.LogsWritten != 0 {
		t.Fatalf("first tick: kind %s, %+v, %v; want dead logs removed and nothing compacted", kind, st, err)
	}
	checkLive(t, s)
	clk.Advance(time.Hour)
	half := halfLive(s)
	if half == 0 {
		t.Fatal("no half-live sealed logs to test with")
	}
	st, kind, err = s.GCTick(false)
	if err != nil || kind != CompactionMinor || halfLive(s) != half {
		t.Fatalf("tick after the minor interval: kind %s, %+v, %v, half-live logs %d → %d; want a minor compaction that leaves half-live logs", kind, st, err, half, halfLive(s))
	}
	// The minor interval restarts from the minor compaction.
	clk.Advance(30 * time.Minute)
	if _, kind, err = s.GCTick(false); err != nil || kind != CompactionNone {
		t.Fatalf("tick within the minor interval: kind %s, %v", kind, err)
	}
	clk.Advance(23 * time.Hour)
	st, kind, err = s.GCTick(false)
	if err != nil || kind != CompactionMajor || st.EntriesMoved == 0 || halfLive(s) != 0 {
		t.Fatalf("tick after the major interval: kind %s, %+v, %v, %d half-live logs left; want them compacted", kind, st, err, halfLive(s))
	}
	checkLive(t, s)
	// A major compaction also counts as the minor one.
	clk.Advance(30 * time.Minute)
	if _, kind, err = s.GCTick(false); err != nil || kind != CompactionNone {
		t.Fatalf("tick 30 min after a major compaction: kind %s, %v", kind, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, vfs.Default, cfg)
	defer s2.Close()
	checkLive(t, s2)
}

// TestCompactionNoSpaceAndForce: a full disk suspends compaction unless
// ForceWhenNoSpace, which then compacts at once; a manual trigger compacts
// a disabled kind only with ForceAllowed.
func TestCompactionNoSpaceAndForce(t *testing.T) {
	t.Run("suspended", func(t *testing.T) {
		s, _, clk := compactionStore(t, &CompactionPolicy{MinorThreshold: 0.3, MinorInterval: time.Hour, MajorThreshold: 0.7, MajorInterval: 24 * time.Hour})
		defer s.Close()
		s.SetNoSpace(true)
		clk.Advance(25 * time.Hour)
		st, kind, err := s.GCTick(true)
		if err != nil || kind != CompactionSuspended || st.EntriesMoved != 0 || st.LogsRemoved == 0 {
			t.Fatalf("full disk: kind %s, %+v, %v; want compaction suspended, dead logs still removed", kind, st, err)
		}
		s.SetNoSpace(false)
		if st, kind, err = s.GCTick(false); err != nil || kind != CompactionMajor || st.EntriesMoved == 0 {
			t.Fatalf("disk no longer full: kind %s, %+v, %v", kind, st, err)
		}
		checkLive(t, s)
	})
	t.Run("forced when full", func(t *testing.T) {
		s, _, _ := compactionStore(t, &CompactionPolicy{MinorThreshold: 0.3, MinorInterval: time.Hour, MajorThreshold: 0.7, MajorInterval: 24 * time.Hour, ForceWhenNoSpace: true})
		defer s.Close()
		s.SetNoSpace(true)
		select {
		case <-s.gcTrigger:
		default:
			t.Fatal("SetNoSpace(true) with ForceWhenNoSpace did not trigger a GC tick")
		}
		st, kind, err := s.GCTick(false)
		if err != nil || kind != CompactionMajor || st.EntriesMoved == 0 {
			t.Fatalf("full disk, forced: kind %s, %+v, %v; want a major compaction before its interval", kind, st, err)
		}
		checkLive(t, s)
	})
	t.Run("disabled, manual trigger", func(t *testing.T) {
		off := CompactionPolicy{MinorThreshold: 0.3, MajorThreshold: 0.7} // intervals 0: disabled
		s, _, clk := compactionStore(t, &off)
		defer s.Close()
		clk.Advance(100 * 24 * time.Hour)
		if st, kind, err := s.GCTick(true); err != nil || kind != CompactionNone || st.EntriesMoved != 0 {
			t.Fatalf("compaction disabled, forced without forceAllowCompaction: kind %s, %+v, %v", kind, st, err)
		}
		s.cfg.Compaction.ForceAllowed = true
		if _, kind, err := s.GCTick(false); err != nil || kind != CompactionNone {
			t.Fatalf("compaction disabled, unforced tick with forceAllowCompaction: kind %s, %v", kind, err)
		}
		st, kind, err := s.GCTick(true)
		if err != nil || kind != CompactionMajor || st.EntriesMoved == 0 {
			t.Fatalf("compaction disabled, forced with forceAllowCompaction: kind %s, %+v, %v", kind, st, err)
		}
		checkLive(t, s)
	})
}

func TestCompactionPolicyRefusesThresholdAboveOne(t *testing.T) {
	cfg := testConfig()
	cfg.Compaction = &CompactionPolicy{MajorThreshold: 1.5, MajorInterval: time.Hour}
	if _, err := cfg.withDefaults(); err == nil {
		t.Fatal("a major threshold of 1.5 was accepted")
	}
}

// TestReadsDuringCompaction: readers of the live ledgers never see an
// error or "no such entry" while major compactions move their entries and
// remove the old logs (the index points at the old copy until the new one
// is durable, and a read that lost the race with the removal looks the
// entry up again).
func TestReadsDuringCompaction(t *testing.T) {
	// Without a read cache every read goes to the entry logs.
	s, _, _ := compactionStore(t, &CompactionPolicy{MajorThreshold: 0.7, MajorInterval: time.Hour},
		func(c *Config) { c.ReadCacheBytes, c.ReadAheadBytes = -1, -1 })
	defer s.Close()
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				l, e := int64(1+2*(i%2)), int64((i*7+r)%120)
				got, err := s.ReadEntry(l, e)
				if err != nil {
					errs <- err
					return
				}
				if want := entryBody(l, e, e-1, 0, 700); string(got) != string(want) {
					errs <- errors.New("wrong body")
					return
				}
			}
		}()
	}
	st, kind, err := s.GCTick(true)
	close(stop)
	for range 4 {
		if rerr := <-errs; rerr != nil {
			t.Fatalf("read during compaction: %v", rerr)
		}
	}
	if err != nil || kind != CompactionMajor || st.EntriesMoved == 0 {
		t.Fatalf("forced tick: kind %s, %+v, %v", kind, st, err)
	}
	checkLive(t, s)
}

// TestSuspendCompaction: the admin's suspension of major compaction lets a
// due minor one run and holds the major one back until resumed; the status
// reports counts, times and suspensions.
func TestSuspendCompaction(t *testing.T) {
	s, _, clk := compactionStore(t, &CompactionPolicy{MinorThreshold: 0.3, MinorInterval: time.Hour, MajorThreshold: 0.7, MajorInterval: 24 * time.Hour})
	defer s.Close()
	s.SuspendCompaction(true, false)
	clk.Advance(25 * time.Hour)
	if _, kind, err := s.GCTick(false); err != nil || kind != CompactionMinor {
		t.Fatalf("major suspended, both due: kind %s, %v; want minor", kind, err)
	}
	s.SuspendCompaction(false, true)
	clk.Advance(2 * time.Hour)
	if st, kind, err := s.GCTick(false); err != nil || kind != CompactionSuspended || st.EntriesMoved != 0 {
		t.Fatalf("both suspended: kind %s, %+v, %v", kind, st, err)
	}
	if cs := s.CompactionStatus(); !cs.MajorSuspended || !cs.MinorSuspended || cs.MinorCount != 1 || cs.MajorCount != 0 || cs.Running != "" {
		t.Fatalf("status while suspended: %+v", cs)
	}
	s.ResumeCompaction(true, true)
	st, kind, err := s.GCTick(false)
	if err != nil || kind != CompactionMajor || st.EntriesMoved == 0 {
		t.Fatalf("resumed: kind %s, %+v, %v", kind, st, err)
	}
	if cs := s.CompactionStatus(); cs.MajorSuspended || cs.MinorSuspended || cs.MajorCount != 1 || !cs.LastMajor.Equal(clk.Now()) || !cs.LastMinor.Equal(clk.Now()) {
		t.Fatalf("status after the major compaction: %+v", cs)
	}
	checkLive(t, s)
}
