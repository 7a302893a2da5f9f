package ledgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// testConfig keeps files small so in-memory syncs (which copy whole
// files) stay cheap; background loops are off unless a test turns them on.
func testConfig() Config {
	return Config{
		JournalDirs:          []string{"/j0", "/j1"},
		LedgerDirs:           []string{"/l0", "/l1"},
		Clock:                clock.Real{},
		WriteCacheBytes:      2 << 20,
		MaxAddWait:           -1,
		ReadCacheBytes:       256 << 10,
		ReadAheadBytes:       4 << 10,
		IndexCacheBytes:      1 << 20,
		MaxEntryLogBytes:     256 << 10,
		JournalPreallocBytes: 64 << 10,
		JournalMaxFileBytes:  256 << 10,
		JournalMaxGroupBytes: 32 << 10,
		Manual:               true,
	}
}

func mustOpen(t testing.TB, fs vfs.FS, cfg Config) *Store {
	t.Helper()
	s, err := Open(fs, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// masterKey is the test ledgers' key.
func masterKey(ledgerID int64) []byte { return []byte(fmt.Sprintf("key-%d", ledgerID)) }

// entryBody builds a BookKeeper-shaped body: ledgerId, entryId, LAC, then
// a payload derived from the ids and a salt, so a read-back proves which
// write it came from.
func entryBody(ledgerID, entryID, lac int64, salt int, size int) []byte {
	b := make([]byte, 24, 24+size)
	binary.BigEndian.PutUint64(b[0:], uint64(ledgerID))
	binary.BigEndian.PutUint64(b[8:], uint64(entryID))
	binary.BigEndian.PutUint64(b[16:], uint64(lac))
	for i := 0; i < size; i++ {
		b = append(b, byte(int(ledgerID)*31+int(entryID)*7+salt+i))
	}
	return b
}

// result is an AddCompletion that records its outcome.
type result struct {
	ch chan error
}

func newResult() *result                { return &result{ch: make(chan error, 1)} }
func (r *result) AddComplete(err error) { r.ch <- err }

func (r *result) wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("add did not complete within 30s")
		return nil
	}
}

// addSync adds and waits for the outcome.
func addSync(t testing.TB, s *Store, ledgerID, entryID int64, body []byte, opts storage.AddOptions) error {
	t.Helper()
	r := newResult()
	s.AddEntry(ledgerID, entryID, masterKey(ledgerID), body, opts, r)
	return r.wait(t)
}

func mustAdd(t testing.TB, s *Store, ledgerID, entryID int64, body []byte) {
	t.Helper()
	if err := addSync(t, s, ledgerID, entryID, body, storage.AddOptions{}); err != nil {
		t.Fatalf("add ledger %d entry %d: %v", ledgerID, entryID, err)
	}
}

func mustRead(t testing.TB, s *Store, ledgerID, entryID int64, want []byte) {
	t.Helper()
	got, err := s.ReadEntry(ledgerID, entryID)
	if err != nil {
		t.Fatalf("read ledger %d entry %d: %v", ledgerID, entryID, err)
	}
	if string(got) != string(want) {
		t.Fatalf("read ledger %d entry %d: got %d bytes, want %d bytes (content differs)", ledgerID, entryID, len(got), len(want))
	}
}

func fence(t testing.TB, s *Store, ledgerID int64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Fence(ctx, ledgerID, masterKey(ledgerID))
}

// ackLog records what the store acknowledged, for checks after a crash.
type ackLog struct {
	mu      sync.Mutex
	entries map[[2]int64][]byte // acknowledged (ledger, entry) → body
	fenced  map[int64]bool      // acknowledged fences
	deleted map[int64]bool      // ledgers DeleteLedger was called for
	tried   map[[2]int64][][]byte
}

func newAckLog() *ackLog {
	return &ackLog{entries: map[[2]int64][]byte{}, fenced: map[int64]bool{}, deleted: map[int64]bool{}, tried: map[[2]int64][][]byte{}}
}

func (a *ackLog) try(l, e int64, body []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tried[[2]int64{l, e}] = append(a.tried[[2]int64{l, e}], body)
}

func (a *ackLog) ack(l, e int64, body []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries[[2]int64{l, e}] = body
}

func (a *ackLog) fence(l int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fenced[l] = true
}

// snapshot copies the log (taken at the crash instant: later acks do not
// count).
func (a *ackLog) snapshot() *ackLog {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := newAckLog()
	for k, v := range a.entries {
		c.entries[k] = v
	}
	for k, v := range a.fenced {
		c.fenced[k] = v
	}
	for k, v := range a.tried {
		c.tried[k] = append([][]byte(nil), v...)
	}
	for k, v := range a.deleted {
		c.deleted[k] = v
	}
	return c
}

// verify checks a reopened store against an ack snapshot: every
// acknowledged entry reads back byte-exact; every other tried entry reads
// back as one of the bodies tried or as ErrNoEntry/ErrNoLedger (never half,
// never an error); acknowledged fences hold; master keys are enforced.
func (a *ackLog) verify(t testing.TB, s *Store) {
	t.Helper()
	for k, bodies := range a.tried {
		if a.deleted[k[0]] {
			// Deleted (or being deleted) at the crash: either answer is
			// right, but never a half entry.
			got, err := s.ReadEntry(k[0], k[1])
			if err == nil && !oneOf(got, bodies) {
				t.Fatalf("deleted ledger %d entry %d: half-visible", k[0], k[1])
			}
			continue
		}
		got, err := s.ReadEntry(k[0], k[1])
		want, acked := a.entries[k]
		switch {
		case acked && err != nil:
			t.Fatalf("acknowledged ledger %d entry %d: read error %v", k[0], k[1], err)
		case acked && string(got) != string(want):
			// A later unacknowledged overwrite of the same id may have won.
			if !oneOf(got, bodies) {
				t.Fatalf("acknowledged ledger %d entry %d: read back different bytes", k[0], k[1])
			}
		case !acked && err != nil:
			if !errors.Is(err, storage.ErrNoEntry) && !errors.Is(err, storage.ErrNoLedger) {
				t.Fatalf("unacknowledged ledger %d entry %d: read error %v (want whole entry or no entry)", k[0], k[1], err)
			}
		case !acked && !oneOf(got, bodies):
			t.Fatalf("unacknowledged ledger %d entry %d: half-visible (%d bytes matching no write)", k[0], k[1], len(got))
		}
	}
	for l := range a.fenced {
		err := addSync(t, s, l, 1<<40, entryBody(l, 1<<40, -1, 0, 8), storage.AddOptions{})
		if !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("acknowledged fence of ledger %d lost: add after reopen gave %v", l, err)
		}
	}
	for k := range a.entries {
		if a.deleted[k[0]] {
			continue
		}
		r := newResult()
		s.AddEntry(k[0], 1<<41, []byte("wrong key"), entryBody(k[0], 1<<41, -1, 0, 8), storage.AddOptions{Recovery: true}, r)
		if err := r.wait(t); !errors.Is(err, storage.ErrUnauthorized) {
			t.Fatalf("ledger %d: add with a wrong master key after reopen gave %v", k[0], err)
		}
		break
	}
}

func oneOf(got []byte, bodies [][]byte) bool {
	for _, b := range bodies {
		if string(got) == string(b) {
			return true
		}
	}
	return false
}

func contextBackground() context.Context { return context.Background() }
