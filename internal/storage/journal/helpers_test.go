package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
)

// wallClock is the production clock; manual clocks are clock.Manual.
type wallClock = clock.Real

func newManualClock() *clock.Manual { return clock.NewManual(time.Unix(1_000_000, 0)) }

const testDir = "/journal"

// smallOpts keeps files and chunks small so that in-memory syncs (which
// copy whole files) stay cheap and rotation and preallocation happen often.
func smallOpts() Options {
	return Options{
		Clock:         wallClock{},
		MaxGroupBytes: 8 << 10,
		PreallocBytes: 16 << 10,
		MaxFileBytes:  64 << 10,
	}
}

// body returns the deterministic body of entry (ledger, entry).
func body(ledger, entry int64) []byte {
	n := int((ledger*31+entry*7)%300) + 8
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(int64(i)*13 + ledger*3 + entry)
	}
	binary.LittleEndian.PutUint64(b, uint64(entry))
	return b
}

// ack records the outcome of one append.
type ack struct {
	pos Position
	err error
}

// recorder is a Callback collecting outcomes by a key the test chooses.
type recorder struct {
	mu    sync.Mutex
	acks  map[[2]int64]ack
	order []Position // positions of successful acks, in callback order
	wg    sync.WaitGroup
}

func newRecorder() *recorder { return &recorder{acks: map[[2]int64]ack{}} }

// cb returns the Callback for the append keyed (ledger, entry).
func (r *recorder) cb(ledger, entry int64) Callback {
	r.wg.Add(1)
	return &keyedCB{r: r, key: [2]int64{ledger, entry}}
}

type keyedCB struct {
	r   *recorder
	key [2]int64
}

func (c *keyedCB) AppendDone(pos Position, err error) {
	c.r.mu.Lock()
	if _, dup := c.r.acks[c.key]; dup {
		panic(fmt.Sprintf("callback for %v ran twice", c.key))
	}
	c.r.acks[c.key] = ack{pos, err}
	if err == nil {
		c.r.order = append(c.r.order, pos)
	}
	c.r.mu.Unlock()
	c.r.wg.Done()
}

// acked returns a snapshot of the successful acks.
func (r *recorder) acked() map[[2]int64]Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[[2]int64]Position, len(r.acks))
	for k, a := range r.acks {
		if a.err == nil {
			m[k] = a.pos
		}
	}
	return m
}

type replayed struct {
	pos Position
	rec Record
}

// replayAll replays dir from `from` with copies of the bodies.
func replayAll(t testing.TB, fs vfs.FS, from Position) ([]replayed, error) {
	t.Helper()
	var out []replayed
	err := Replay(fs, testDir, from, func(pos Position, rec Record) error {
		rec.Body = bytes.Clone(rec.Body)
		out = append(out, replayed{pos, rec})
		return nil
	})
	return out, err
}

// checkReplay verifies the crash-safety contract: every acknowledged entry
// is present, byte-exact, at its acknowledged position; every replayed
// record is a whole record that was appended; positions strictly increase;
// each ledger's entries come in append (entry id) order.
func checkReplay(t testing.TB, got []replayed, acked map[[2]int64]Position) {
	t.Helper()
	seen := map[[2]int64]Position{}
	lastEntry := map[int64]int64{}
	var prev Position
	for _, r := range got {
		if r.pos.Compare(prev) <= 0 {
			t.Fatalf("positions not increasing: %v after %v", r.pos, prev)
		}
		prev = r.pos
		if r.rec.Type != TypeAddEntry {
			continue
		}
		k := [2]int64{r.rec.LedgerID, r.rec.EntryID}
		if !bytes.Equal(r.rec.Body, body(k[0], k[1])) {
			t.Fatalf("entry %v at %v: body differs from what was appended", k, r.pos)
		}
		if _, dup := seen[k]; dup {
			t.Fatalf("entry %v replayed twice", k)
		}
		if last, ok := lastEntry[k[0]]; ok && k[1] <= last {
			t.Fatalf("ledger %d: entry %d replayed after entry %d", k[0], k[1], last)
		}
		lastEntry[k[0]] = k[1]
		seen[k] = r.pos
	}
	for k, pos := range acked {
		at, ok := seen[k]
		if !ok {
			t.Fatalf("acknowledged entry %v (at %v) lost; %d entries replayed", k, pos, len(seen))
		}
		if at != pos {
			t.Fatalf("acknowledged entry %v: acked at %v, replayed at %v", k, pos, at)
		}
	}
}
