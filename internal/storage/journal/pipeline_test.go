package journal

import (
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// hookFS wraps a file system to run hooks around the operations of the
// files it creates or opens for writing: errorfs injects only before an
// operation, and some pipeline orders can only be pinned down after an
// fdatasync has reached the (in-memory) disk and before the journal sees
// it return. Paths are as opened (a file is created as .tmp).
type hookFS struct {
	vfs.FS
	beforeSyncData func(path string)
	afterSyncData  func(path string)
	beforeWrite    func(path string, off int64) error
}

func (h *hookFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := h.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, path: name}, nil
}

func (h *hookFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := h.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, path: name}, nil
}

type hookFile struct {
	vfs.File
	fs   *hookFS
	path string
}

func (f *hookFile) SyncData() error {
	if f.fs.beforeSyncData != nil {
		f.fs.beforeSyncData(f.path)
	}
	err := f.File.SyncData()
	if err == nil && f.fs.afterSyncData != nil {
		f.fs.afterSyncData(f.path)
	}
	return err
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.beforeWrite != nil {
		if err := f.fs.beforeWrite(f.path, off); err != nil {
			return 0, err
		}
	}
	return f.File.WriteAt(p, off)
}

// onePreallocOpts has one file whose zeros are all written at Open: the
// preallocator never writes or syncs the first file, so every fdatasync of
// it is a group's.
func onePreallocOpts() Options {
	opts := smallOpts()
	opts.PreallocBytes, opts.MaxFileBytes = 1<<20, 1<<20
	return opts
}

// replayClone reopens a crash clone and replays it whole.
func replayClone(t *testing.T, fs vfs.FS) []replayed {
	t.Helper()
	j, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer j.Close()
	var got []replayed
	if err := j.Replay(Position{}, func(pos Position, r Record) error {
		r.Body = append([]byte(nil), r.Body...)
		got = append(got, replayed{pos, r})
		return nil
	}); err != nil {
		t.Fatalf("replay after the crash: %v", err)
	}
	return got
}

func powerLoss(mem *vfs.MemFS) *vfs.MemFS {
	return mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(1, 1))})
}

// TestAckNeedsSyncStartedAfterWrite pins P2: group 1's fdatasync has
// reached the disk but not yet returned when group 2 is written; group 2
// must not be acknowledged by that fdatasync. After group 2's ack, a power
// loss that keeps nothing unsynced must still hold it.
func TestAckNeedsSyncStartedAfterWrite(t *testing.T) {
	mem := vfs.NewCrashableMem()
	synced1, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hfs := &hookFS{FS: mem, afterSyncData: func(path string) {
		if strings.Contains(path, fileName(1)) {
			once.Do(func() { close(synced1); <-release })
		}
	}}
	handedOff := make(chan int, 4)
	opts := onePreallocOpts()
	opts.hooks = &testHooks{beforeHandOff: func(_ *group, unsynced int) { handedOff <- unsynced }}
	j, err := Open(hfs, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	defer unblock() // before Close, if the test fails while blocked
	rec := newRecorder()
	if err := j.AppendEntry(1, 0, body(1, 0), rec.cb(1, 0)); err != nil {
		t.Fatal(err)
	}
	<-handedOff
	<-synced1 // group 1 is on disk; its fdatasync has not returned
	if err := j.AppendEntry(1, 1, body(1, 1), rec.cb(1, 1)); err != nil {
		t.Fatal(err)
	}
	if u := <-handedOff; u != 1 {
		t.Fatalf("group 2 handed off with %d unsynced groups before it, want 1", u)
	}
	unblock()
	rec.wg.Wait()
	acked := rec.acked()
	if len(acked) != 2 {
		t.Fatalf("acks: %v", rec.acks)
	}
	checkReplay(t, replayClone(t, powerLoss(mem)), acked)
}

// TestPipelineDepthOne pins P1: while group 1's fdatasync runs, group 2 may
// be written, group 3 may not.
func TestPipelineDepthOne(t *testing.T) {
	mem := vfs.NewCrashableMem()
	syncing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hfs := &hookFS{FS: mem, beforeSyncData: func(path string) {
		if strings.Contains(path, fileName(1)) {
			once.Do(func() { close(syncing); <-release })
		}
	}}
	handedOff := make(chan int, 4)
	writerWaits := make(chan int, 4)
	opts := onePreallocOpts()
	opts.hooks = &testHooks{
		beforeHandOff: func(_ *group, unsynced int) { handedOff <- unsynced },
		waiting: func(who string, unsynced int) {
			if who == "writer" {
				select {
				case writerWaits <- unsynced:
				default:
				}
			}
		},
	}
	j, err := Open(hfs, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	defer unblock() // before Close, if the test fails while blocked
	rec := newRecorder()
	for e := int64(0); e < 3; e++ {
		if err := j.AppendEntry(1, e, body(1, e), rec.cb(1, e)); err != nil {
			t.Fatal(err)
		}
		switch e {
		case 0:
			<-handedOff
			<-syncing
		case 1:
			if u := <-handedOff; u != 1 {
				t.Fatalf("group 2 handed off with %d unsynced before it, want 1", u)
			}
		case 2:
			select {
			case u := <-handedOff:
				t.Fatalf("group 3 written with %d groups unsynced (P1: at most one before it)", u)
			case u := <-writerWaits:
				if u != 2 {
					t.Fatalf("writer waits with %d unsynced, want 2", u)
				}
			}
		}
	}
	unblock()
	rec.wg.Wait()
	if n := len(rec.acked()); n != 3 {
		t.Fatalf("%d acks, want 3", n)
	}
}

// TestFailureCallbacksAfterAcks pins the callback order after a failure:
// group 1 is synced and its callbacks have not run yet when the write of
// group 2 fails. Group 1 is still acknowledged, before (never concurrently
// with) the failure of group 2 and of what is queued behind it.
func TestFailureCallbacksAfterAcks(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var armed atomic.Bool
	hfs := &hookFS{FS: mem, beforeWrite: func(path string, off int64) error {
		if armed.Load() && strings.Contains(path, fileName(1)) {
			return errorfs.ErrInjected
		}
		return nil
	}}
	synced1, release := make(chan struct{}), make(chan struct{})
	failRestWaits := make(chan struct{}, 1)
	var once sync.Once
	opts := onePreallocOpts()
	opts.hooks = &testHooks{
		afterSync: func([]*group) { once.Do(func() { close(synced1); <-release }) },
		waiting: func(who string, _ int) {
			if who == "failRest" {
				select {
				case failRestWaits <- struct{}{}:
				default:
				}
			}
		},
	}
	j, err := Open(hfs, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	defer unblock() // before Close, if the test fails while blocked

	var mu sync.Mutex
	var events []string // "ack e" / "fail e", in callback order
	inCallback := 0
	var overlap bool
	firstFail := make(chan struct{})
	var failOnce sync.Once
	var wg sync.WaitGroup
	cb := func(e int64) Callback {
		wg.Add(1)
		return funcCB(func(_ Position, err error) {
			mu.Lock()
			inCallback++
			overlap = overlap || inCallback > 1
			if err == nil {
				events = append(events, "ack "+string(rune('0'+e)))
			} else {
				events = append(events, "fail "+string(rune('0'+e)))
			}
			mu.Unlock()
			if err != nil {
				failOnce.Do(func() { close(firstFail) })
			}
			mu.Lock()
			inCallback--
			mu.Unlock()
			wg.Done()
		})
	}
	if err := j.AppendEntry(1, 0, body(1, 0), cb(0)); err != nil {
		t.Fatal(err)
	}
	<-synced1
	armed.Store(true)
	for e := int64(1); e < 4; e++ {
		if err := j.AppendEntry(1, e, body(1, e), cb(e)); err != nil && !errors.Is(err, ErrFailed) {
			t.Fatal(err)
		} else if err != nil {
			wg.Done()
		}
	}
	// The writer's failure is known; it must wait for the syncer.
	select {
	case <-firstFail:
	case <-failRestWaits:
	}
	unblock()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatalf("callbacks ran concurrently: %v", events)
	}
	if len(events) < 2 || events[0] != "ack 0" {
		t.Fatalf("callbacks %v: group 1 (synced) must be acknowledged first", events)
	}
	for i, ev := range events[1:] {
		if want := "fail " + string(rune('0'+i+1)); ev != want {
			t.Fatalf("callbacks %v: #%d is %q, want %q", events, i+1, ev, want)
		}
	}
}

// TestAheadFileOnlyAfterPinned pins P5: after rotating to file 2, the
// file after it is created only once a group of file 2 is synced. The
// crash is taken while file 2's first group is written and its fdatasync
// not yet started, once the preallocator has decided; the clone must
// reopen and replay (a file 3 created ahead would leave file 2 recording
// nothing in the middle of the directory, and replay would report
// corruption of a legitimate torn tail).
func TestAheadFileOnlyAfterPinned(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var handedOffB, file2Synced atomic.Bool
	decided := make(chan struct{}, 1)
	var badAhead atomic.Value
	opts := smallOpts()
	opts.hooks = &testHooks{
		beforeHandOff: func(g *group, _ int) {
			if g.fileID == 2 {
				handedOffB.Store(true)
			}
		},
		waiting: func(who string, _ int) {
			if who == "prealloc" && handedOffB.Load() {
				select {
				case decided <- struct{}{}:
				default:
				}
			}
		},
		createdAhead: func(id uint64) {
			if id == 3 && !file2Synced.Load() {
				badAhead.Store("file 3 created ahead before a group of file 2 was synced")
			}
			if id == 3 {
				select {
				case decided <- struct{}{}:
				default:
				}
			}
		},
	}
	var clone *vfs.MemFS
	var cloneAcked map[[2]int64]Position
	var mu sync.Mutex
	acked := map[[2]int64]Position{}
	var once sync.Once
	hfs := &hookFS{FS: mem,
		beforeSyncData: func(path string) {
			if strings.Contains(path, fileName(2)) && handedOffB.Load() {
				once.Do(func() {
					<-decided
					mu.Lock()
					cloneAcked = maps.Clone(acked)
					mu.Unlock()
					clone = powerLoss(mem)
				})
			}
		},
		afterSyncData: func(path string) {
			if strings.Contains(path, fileName(2)) && handedOffB.Load() {
				file2Synced.Store(true)
			}
		},
	}
	j, err := Open(hfs, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for e := int64(0); !handedOffB.Load(); e++ {
		if e > 10000 {
			t.Fatal("no rotation")
		}
		pos, err := j.AppendSync(Record{Type: TypeAddEntry, LedgerID: 1, EntryID: e, Body: body(1, e)})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		acked[[2]int64{1, e}] = pos
		mu.Unlock()
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if msg := badAhead.Load(); msg != nil {
		t.Error(msg)
	}
	if clone == nil {
		t.Fatal("no crash taken")
	}
	checkReplay(t, replayClone(t, clone), cloneAcked)
}

// funcCB is a Callback calling a function.
type funcCB func(Position, error)

func (f funcCB) AppendDone(pos Position, err error) { f(pos, err) }

// TestOpenSyncsLastTwoFiles: a process crash keeps the page cache, so the
// next Open sees groups that were written and never synced. Open must make
// them durable before it records where the log ends, or a later power
// loss leaves the new file recording an end beyond the log (R4: the bookie
// would not start). Second variant: the last file is an unused file
// created ahead and the unsynced groups are in the file before it.
func TestOpenSyncsLastTwoFiles(t *testing.T) {
	for _, ahead := range []bool{false, true} {
		name := "last file"
		if ahead {
			name = "file before an unused ahead file"
		}
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			j := manualJournal(t, mem)
			rec := newRecorder()
			if err := j.AppendEntry(1, 0, body(1, 0), rec.cb(1, 0)); err != nil {
				t.Fatal(err)
			}
			if n, err := j.Flush(); n != 1 || err != nil {
				t.Fatalf("flush: %d %v", n, err)
			}
			// Two groups written, not synced (what the pipeline can leave).
			for e := int64(1); e < 3; e++ {
				if err := j.AppendEntry(1, e, body(1, e), rec.cb(1, e)); err != nil {
					t.Fatal(err)
				}
				g := j.takeGroup()
				if err := j.writeGroup(g); err != nil {
					t.Fatal(err)
				}
			}
			if ahead {
				f, _, err := j.createFile(j.w.fileID+1, link{prevID: j.w.fileID})
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			// The process dies: handles closed, nothing synced.
			j.w.file.Close()
			j.dirFile.Close()
			j.lock.Close()

			j2, err := Open(mem, testDir, smallOpts())
			if err != nil {
				t.Fatal(err)
			}
			if err := j2.Close(); err != nil {
				t.Fatal(err)
			}
			// Power loss after the reopened journal recorded the end.
			got := replayClone(t, powerLoss(mem))
			checkReplay(t, got, rec.acked())
		})
	}
}
