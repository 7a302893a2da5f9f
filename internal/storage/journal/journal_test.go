package journal

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// appendLedgers appends entries 0..perLedger-1 of ledgers 1..ledgers, one
// goroutine per ledger, and waits for every callback.
func appendLedgers(t *testing.T, j *Journal, rec *recorder, ledgers, perLedger int) {
	t.Helper()
	appendLedgersMode(t, j, rec, ledgers, perLedger, false)
}

// appendLedgersMode is appendLedgers; with waitEach, each goroutine waits
// for an append's callback before the next (small groups, many syncs).
func appendLedgersMode(t *testing.T, j *Journal, rec *recorder, ledgers, perLedger int, waitEach bool) {
	t.Helper()
	var wg sync.WaitGroup
	for l := 1; l <= ledgers; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := 0; e < perLedger; e++ {
				cb := &waitCB{keyedCB: rec.cb(int64(l), int64(e)).(*keyedCB), done: make(chan struct{})}
				if err := j.AppendEntry(int64(l), int64(e), body(int64(l), int64(e)), cb); err != nil {
					if !errors.Is(err, ErrFailed) { // expected once a fault is injected
						t.Errorf("append %d/%d: %v", l, e, err)
					}
					rec.wg.Done()
					return
				}
				if waitEach {
					<-cb.done
				}
			}
		}()
	}
	wg.Wait()
	rec.wg.Wait()
}

type waitCB struct {
	*keyedCB
	done chan struct{}
}

func (c *waitCB) AppendDone(pos Position, err error) {
	c.keyedCB.AppendDone(pos, err)
	close(c.done)
}

func TestAppendReplayRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	j, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Replay(Position{}, func(Position, Record) error { return errors.New("empty journal replayed a record") }); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	appendLedgers(t, j, rec, 4, 200)
	// The other record types.
	others := []Record{
		{Type: TypeMasterKey, LedgerID: 7, Body: []byte("master-key-of-7")},
		{Type: TypeFence, LedgerID: 7},
		{Type: TypeExplicitLAC, LedgerID: 7, Body: []byte("lac")},
		{Type: TypeMasterKey, LedgerID: -1, Body: nil},
	}
	var otherPos []Position
	for _, r := range others {
		pos, err := j.AppendSync(r)
		if err != nil {
			t.Fatal(err)
		}
		otherPos = append(otherPos, pos)
	}
	for i := 1; i < len(rec.order); i++ {
		if rec.order[i].Compare(rec.order[i-1]) <= 0 {
			t.Fatalf("callbacks out of position order: %v after %v", rec.order[i], rec.order[i-1])
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ids, _ := listFiles(fs, testDir, false)
	if len(ids) < 3 {
		t.Fatalf("expected rotation over several files, got %d", len(ids))
	}
	got, err := replayAll(t, fs, Position{})
	if err != nil {
		t.Fatal(err)
	}
	checkReplay(t, got, rec.acked())
	if len(got) != 4*200+len(others) {
		t.Fatalf("replayed %d records, want %d", len(got), 4*200+len(others))
	}
	tail := got[len(got)-len(others):]
	for i, r := range tail {
		want := others[i]
		if r.pos != otherPos[i] || r.rec.Type != want.Type || r.rec.LedgerID != want.LedgerID || !bytes.Equal(r.rec.Body, want.Body) {
			t.Fatalf("record %d: got %+v at %v, want %+v at %v", i, r.rec, r.pos, want, otherPos[i])
		}
	}

	// Reopening seals the old files and starts a new one; Journal.Replay
	// sees exactly what was written before.
	j2, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	n := 0
	if err := j2.Replay(Position{}, func(Position, Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != len(got) {
		t.Fatalf("Journal.Replay delivered %d records, want %d", n, len(got))
	}
}

func TestCheckpointAndMarkDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	j, err := Open(mem, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	appendLedgers(t, j, rec, 2, 600)
	acked := rec.acked()
	// Checkpoint in the middle of the log.
	ckpt := rec.order[len(rec.order)*3/4]
	before, _ := listFiles(mem, testDir, false)
	if ckpt.File <= before[0] {
		t.Fatalf("checkpoint %v should not be in the first file", ckpt)
	}

	// Crash after the checkpoint was persisted but before MarkDurable
	// deleted anything: replay from the checkpoint still works and delivers
	// exactly the records after it.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	j.Close()
	j2, err := Open(crashed, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	var got []replayed
	if err := j2.Replay(ckpt, func(pos Position, r Record) error {
		r.Body = bytes.Clone(r.Body)
		got = append(got, replayed{pos, r})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, pos := range acked {
		if pos.Compare(ckpt) > 0 {
			want++
		}
	}
	if len(got) != want {
		t.Fatalf("replay from %v delivered %d records, want %d", ckpt, len(got), want)
	}
	for _, r := range got {
		if r.pos.Compare(ckpt) <= 0 {
			t.Fatalf("replay from %v delivered %v", ckpt, r.pos)
		}
	}
	if err := j2.MarkDurable(ckpt); err != nil {
		t.Fatal(err)
	}
	after, _ := listFiles(crashed, testDir, false)
	if after[0] != ckpt.File {
		t.Fatalf("after MarkDurable(%v) the oldest file is %d", ckpt, after[0])
	}
	// Replay from the checkpoint is unchanged; from before it, the deleted
	// file is reported missing, not silently skipped.
	n := 0
	if err := j2.Replay(ckpt, func(Position, Record) error { n++; return nil }); err != nil || n != want {
		t.Fatalf("replay after MarkDurable: %d records, %v", n, err)
	}
	if err := j2.Replay(Position{File: before[0], Offset: FirstGroupOffset}, func(Position, Record) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "missing") {
		t.Fatalf("replay from a deleted file: %v", err)
	}
	// MarkDurable never deletes the file being written.
	if err := j2.MarkDurable(Position{File: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	if _, err := j2.AppendSync(Record{Type: TypeFence, LedgerID: 1}); err != nil {
		t.Fatal(err)
	}
	j2.Close()
}

func TestGroupWaitAndGroupBytes(t *testing.T) {
	clock := newManualClock()
	opts := smallOpts()
	opts.Clock = clock
	opts.Manual = true
	opts.MaxGroupWait = 10 * time.Millisecond
	opts.MaxGroupBytes = 1000
	j, err := Open(vfs.NewMem(), testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	for e := 0; e < 3; e++ {
		if err := j.AppendEntry(1, int64(e), make([]byte, 100), rec.cb(1, int64(e))); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := j.Flush(); n != 0 || err != nil {
		t.Fatalf("flushed %d (%v) before the group wait passed", n, err)
	}
	clock.Advance(10 * time.Millisecond)
	if n, err := j.Flush(); n != 3 || err != nil {
		t.Fatalf("after the group wait: flushed %d, %v; want one group of 3", n, err)
	}
	// MaxGroupBytes seals a group at once: 12 records of 126 bytes make
	// groups of 7 and 5; the full one is due without waiting.
	for e := 3; e < 15; e++ {
		if err := j.AppendEntry(1, int64(e), make([]byte, 100), rec.cb(1, int64(e))); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := j.Flush(); n != 7 {
		t.Fatalf("full group: flushed %d, want 7", n)
	}
	if n, _ := j.Flush(); n != 0 {
		t.Fatalf("open group flushed early: %d", n)
	}
	clock.Advance(10 * time.Millisecond)
	if n, _ := j.Flush(); n != 5 {
		t.Fatalf("second group: flushed %d, want 5", n)
	}
	rec.wg.Wait()
	// Close commits what is queued regardless of the wait.
	if err := j.AppendFence(1, rec.cb(1, -1)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	rec.wg.Wait()
	for k, a := range rec.acks {
		if a.err != nil {
			t.Fatalf("%v: %v", k, a.err)
		}
	}
}

func TestBackPressure(t *testing.T) {
	clock := newManualClock()
	opts := smallOpts()
	opts.Clock = clock
	opts.Manual = true
	opts.MaxQueueRecords = 2
	opts.QueueWait = -1
	j, err := Open(vfs.NewMem(), testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rec := newRecorder()
	for e := 0; e < 2; e++ {
		if err := j.AppendEntry(1, int64(e), body(1, int64(e)), rec.cb(1, int64(e))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.AppendEntry(1, 2, body(1, 2), nil); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third append with QueueWait<0: %v", err)
	}

	// With a bounded wait: blocks, then fails when the wait passes...
	j.opts.QueueWait = time.Second
	errc := make(chan error, 1)
	go func() { errc <- j.AppendEntry(1, 2, body(1, 2), nil) }()
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	clock.Advance(time.Second)
	if err := <-errc; !errors.Is(err, ErrQueueFull) {
		t.Fatalf("append after the queue wait: %v", err)
	}
	// ...or succeeds once a group commit frees space.
	go func() { errc <- j.AppendEntry(1, 2, body(1, 2), rec.cb(1, 2)) }()
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	if n, err := j.Flush(); n != 2 || err != nil {
		t.Fatalf("flush: %d %v", n, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("append after space freed: %v", err)
	}
	if n, err := j.Flush(); n != 1 || err != nil {
		t.Fatalf("flush: %d %v", n, err)
	}
	if err := j.AppendEntry(1, 3, make([]byte, 100<<20), nil); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("huge record: %v", err)
	}
}

func TestRecordValidation(t *testing.T) {
	j, err := Open(vfs.NewMem(), testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, r := range []Record{
		{Type: 0, LedgerID: 1},
		{Type: 99, LedgerID: 1},
		{Type: TypeFence, LedgerID: 1, Body: []byte("x")},
	} {
		if err := j.Append(r, nil); err == nil {
			t.Errorf("append %+v: no error", r)
		}
	}
	j.Close()
	if err := j.AppendFence(1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// countingCB is a reusable callback that allocates nothing.
type countingCB struct{ n, failed int }

func (c *countingCB) AppendDone(_ Position, err error) {
	c.n++
	if err != nil {
		c.failed++
	}
}

func TestAllocsPerAppend(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	opts := smallOpts()
	opts.Manual = true
	opts.MaxFileBytes = 1 << 30
	opts.PreallocBytes = 1 << 20
	j, err := Open(vfs.NewMem(), testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	cb := &countingCB{}
	b := make([]byte, 1024)
	const perGroup = 6
	e := int64(0)
	allocs := testing.AllocsPerRun(200, func() {
		for range perGroup {
			if err := j.AppendEntry(1, e, b, cb); err != nil {
				t.Fatal(err)
			}
			e++
		}
		if n, err := j.Flush(); n != perGroup || err != nil {
			t.Fatalf("flush: %d %v", n, err)
		}
	})
	perEntry := allocs / perGroup
	t.Logf("%.3f allocations per appended entry", perEntry)
	if perEntry > 1 {
		t.Fatalf("%.2f allocations per entry on the add path, want ≤ 1", perEntry)
	}
}

func TestOpenRejectsSecondOpenAndBadOptions(t *testing.T) {
	fs := vfs.NewMem()
	j, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := Open(fs, testDir, smallOpts()); err == nil {
		t.Fatal("second Open of the same directory succeeded")
	}
	if _, err := Open(vfs.NewMem(), testDir, Options{}); err == nil {
		t.Fatal("Open without a clock succeeded")
	}
	// A group's length is stored in 32 bits: no group may come near 4 GiB.
	big := smallOpts()
	big.MaxGroupBytes = 1<<30 + 1
	if _, err := Open(vfs.NewMem(), testDir, big); err == nil || !strings.Contains(err.Error(), "MaxGroupBytes") {
		t.Fatalf("Open with MaxGroupBytes %d: %v", big.MaxGroupBytes, err)
	}
	big.MaxGroupBytes = 1 << 30
	j2, err := Open(vfs.NewMem(), testDir, big)
	if err != nil {
		t.Fatalf("Open with MaxGroupBytes at the limit: %v", err)
	}
	j2.Close()
}

func TestPositionOrder(t *testing.T) {
	ps := []Position{{}, {1, 512}, {1, 600}, {2, 512}}
	for i := range ps {
		for k := range ps {
			want := 0
			if i < k {
				want = -1
			} else if i > k {
				want = 1
			}
			if got := ps[i].Compare(ps[k]); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", ps[i], ps[k], got, want)
			}
		}
	}
	if s := fmt.Sprint(Position{File: 10, Offset: 512}); s != "000000000000000a.jnl:512" {
		t.Errorf("String: %s", s)
	}
}
