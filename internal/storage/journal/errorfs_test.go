package journal

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// faultAfter injects one error into the first matching operation after
// `after` matching operations have passed, then records every operation on
// the file that failed once the journal has recorded the failure (known,
// set from OnFailure). I/O that another goroutine had started before the
// journal recorded it (a write of the next group while a sync fails) may
// still complete; none may start after.
type faultAfter struct {
	match func(op errorfs.Op) bool
	after int64

	seen     atomic.Int64
	known    atomic.Bool
	mu       sync.Mutex
	failed   string // path of the failed operation's file
	afterOps []errorfs.Op
}

func (f *faultAfter) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed != "" {
		if f.known.Load() && samePath(op.Path, f.failed) && op.Kind != errorfs.OpFileClose {
			f.afterOps = append(f.afterOps, op)
		}
		return nil
	}
	if !f.match(op) {
		return nil
	}
	if f.seen.Add(1) <= f.after {
		return nil
	}
	f.failed = op.Path
	return errorfs.ErrInjected
}

func (f *faultAfter) String() string { return "faultAfter" }

// samePath reports whether two operation paths name the same journal
// file: errorfs names a file by the path it was opened with, and a file is
// created as .tmp, renamed, and opened again by the preallocator.
func samePath(a, b string) bool {
	return strings.TrimSuffix(a, ".tmp") == strings.TrimSuffix(b, ".tmp")
}

func isJournalFile(op errorfs.Op) bool { return strings.Contains(op.Path, ".jnl") }

func TestIOErrorFailsJournal(t *testing.T) {
	cases := []struct {
		name  string
		match func(op errorfs.Op) bool
		after int64
		// idle: the fault hits work off the add path (creating the next
		// file ahead), so no append in flight need fail with it.
		idle bool
	}{
		// Group I/O: file 1 only, with one file and its zeros written at
		// Open (onePrealloc), so that the preallocator (which syncs zeros,
		// and creates file 2 ahead) never does a matching operation.
		{"fdatasync", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpFileSyncData && strings.Contains(op.Path, fileName(1))
		}, 40, false},
		{"write", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpFileWriteAt && strings.Contains(op.Path, fileName(1)) && op.Offset >= FirstGroupOffset
		}, 40, false},
		{"rotate-create", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpCreate && isJournalFile(op)
		}, 2, true},
		{"preallocate", func(op errorfs.Op) bool {
			// Zero-filling beyond the first chunk of a file.
			chunk := smallOpts().PreallocBytes
			return op.Kind == errorfs.OpFileWriteAt && isJournalFile(op) &&
				op.Offset > FirstGroupOffset && (op.Offset-FirstGroupOffset)%chunk == 0
		}, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			fault := &faultAfter{match: c.match, after: c.after}
			var failures atomic.Int32
			var failure atomic.Pointer[error]
			failed := make(chan struct{})
			opts := smallOpts()
			if !c.idle {
				opts.PreallocBytes, opts.MaxFileBytes = 1<<20, 1<<20 // onePrealloc
			}
			// OnFailure runs on whichever goroutine met the error (the
			// preallocator's, for the idle cases), concurrently with the
			// test.
			opts.OnFailure = func(err error) {
				if failures.Add(1) == 1 {
					failure.Store(&err)
					fault.known.Store(true)
					close(failed)
				}
			}
			j, err := Open(errorfs.Wrap(mem, fault), testDir, opts)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			appendLedgersMode(t, j, rec, 4, 150, true)
			select { // the idle cases' failure may come after the last append
			case <-failed:
			case <-time.After(time.Minute):
				t.Fatal("the injected fault was never reported through OnFailure")
			}
			checkFailed(t, j, rec, fault, &failures, *failure.Load(), c.idle)

			// Nothing unsynced was acknowledged: a crash that keeps none of
			// the unsynced data still holds every ack; one that keeps all of
			// it shows the failed group whole or not at all.
			for _, pct := range []int{0, 100} {
				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, 2))})
				j2, err := Open(crashed, testDir, smallOpts())
				if err != nil {
					t.Fatalf("reopen after the failure (keep %d%%): %v", pct, err)
				}
				var got []replayed
				if err := j2.Replay(Position{}, func(pos Position, r Record) error {
					r.Body = append([]byte(nil), r.Body...)
					got = append(got, replayed{pos, r})
					return nil
				}); err != nil {
					t.Fatalf("replay after the failure (keep %d%%): %v", pct, err)
				}
				checkReplay(t, got, rec.acked())
				// The reopened journal writes to a new file.
				if _, err := j2.AppendSync(Record{Type: TypeFence, LedgerID: 1}); err != nil {
					t.Fatal(err)
				}
				j2.Close()
			}
			j.Close()
		})
	}
}

func checkFailed(t *testing.T, j *Journal, rec *recorder, fault *faultAfter, failures *atomic.Int32, failure error, idle bool) {
	t.Helper()
	if fault.failed == "" {
		t.Fatal("no fault was injected")
	}
	nFailed, nAcked := 0, 0
	var lastGood Position
	for _, a := range rec.acks {
		if a.err == nil {
			nAcked++
			if a.pos.Compare(lastGood) > 0 {
				lastGood = a.pos
			}
			continue
		}
		nFailed++
		if !errors.Is(a.err, ErrFailed) || !errors.Is(a.err, errorfs.ErrInjected) {
			t.Fatalf("failed append: %v, want ErrFailed wrapping the injected error", a.err)
		}
	}
	t.Logf("%d acked, %d failed, journal error: %v", nAcked, nFailed, j.Err())
	if nFailed == 0 && !idle {
		t.Fatal("no append failed")
	}
	if !errors.Is(j.Err(), ErrFailed) {
		t.Fatalf("Err() = %v", j.Err())
	}
	if failures.Load() != 1 || !errors.Is(failure, ErrFailed) {
		t.Fatalf("OnFailure called %d times with %v", failures.Load(), failure)
	}
	if err := j.AppendFence(1, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure: %v", err)
	}
	if n, err := j.Flush(); n != 0 || err != nil {
		t.Fatalf("flush after the failure: %d %v", n, err)
	}
	// A failed file is abandoned: never written or synced again.
	fault.mu.Lock()
	defer fault.mu.Unlock()
	for _, op := range fault.afterOps {
		if op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpFileWrite {
			t.Fatalf("operation %v on %s after its failure", op.Kind, op.Path)
		}
	}
}

func TestReadErrorIsNotCorruption(t *testing.T) {
	mem := vfs.NewMem()
	j := manualJournal(t, mem)
	writeGroups(t, j, 3, 3)
	j.Close()
	fault := &faultAfter{match: func(op errorfs.Op) bool { return op.Kind == errorfs.OpFileReadAt && isJournalFile(op) }}
	err := Replay(errorfs.Wrap(mem, fault), testDir, Position{}, func(Position, Record) error { return nil })
	if !errors.Is(err, errorfs.ErrInjected) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("replay with a read error: %v", err)
	}
	fault = &faultAfter{match: func(op errorfs.Op) bool { return op.Kind == errorfs.OpFileReadAt && isJournalFile(op) }}
	if _, err := Open(errorfs.Wrap(mem, fault), testDir, smallOpts()); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("open with a read error: %v", err)
	}
}

func TestOpenFailsIfLastFileCannotBeSynced(t *testing.T) {
	mem := vfs.NewMem()
	j := manualJournal(t, mem)
	writeGroups(t, j, 1, 1)
	j.Close()
	fault := &faultAfter{match: func(op errorfs.Op) bool { return op.Kind == errorfs.OpFileSync && isJournalFile(op) }}
	if _, err := Open(errorfs.Wrap(mem, fault), testDir, smallOpts()); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("open with a sync error: %v", err)
	}
	if ids, _ := listFiles(mem, testDir, false); len(ids) != 1 {
		t.Fatalf("failed Open left files %v", ids)
	}
}
