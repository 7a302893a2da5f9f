package ledgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

// evictConfig is testConfig on real directories under t.TempDir(), one
// journal and one ledger directory, background loops off.
func evictConfig(t *testing.T) Config {
	cfg := testConfig()
	dir := t.TempDir()
	cfg.JournalDirs = []string{filepath.Join(dir, "journal")}
	cfg.LedgerDirs = []string{filepath.Join(dir, "ledgers")}
	cfg.LedgerIdleTime = -1
	return cfg
}

// cached says whether ledger id has an in-memory object.
func cached(s *Store, id int64) bool {
	sh := s.ledgers.shard(id)
	sh.Lock()
	defer sh.Unlock()
	return sh.m[id] != nil
}

// checkShards checks the ledger map's invariants: every object in its
// shard's list at its pos, the list and the map holding the same objects.
func checkShards(t *testing.T, s *Store) {
	t.Helper()
	for i := range s.ledgers.shards {
		sh := &s.ledgers.shards[i]
		sh.Lock()
		if len(sh.list) != len(sh.m) {
			t.Errorf("shard %d: %d objects listed, %d mapped", i, len(sh.list), len(sh.m))
		}
		for pos, l := range sh.list {
			if l.pos != pos || sh.m[l.id] != l {
				t.Errorf("shard %d: ledger %d listed at %d, pos %d, mapped %v", i, l.id, pos, l.pos, sh.m[l.id] == l)
			}
		}
		sh.Unlock()
	}
}

// sweepIdle runs the two sweeps after which a ledger not used since is idle.
func sweepIdle(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	for range 2 {
		k, err := s.EvictIdleLedgers()
		if err != nil {
			t.Fatalf("EvictIdleLedgers: %v", err)
		}
		n += k
	}
	return n
}

func mustFlush(t *testing.T, s *Store) {
	t.Helper()
	if err := s.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
}

// explicitBody is a WRITE_LAC body: ledgerId, lac, then a digest stand-in.
func explicitBody(ledgerID, lac int64) []byte {
	b := make([]byte, 16, 24)
	binary.BigEndian.PutUint64(b[0:], uint64(ledgerID))
	binary.BigEndian.PutUint64(b[8:], uint64(lac))
	return append(b, "digest.."...)
}

// TestEvictReloadKeepsState: fence, master key, explicit LAC, LAC and last
// entry come back exactly after eviction, and the sweep needs a full idle
// period (one sweep after a use keeps the ledger).
func TestEvictReloadKeepsState(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	for l := int64(1); l <= 2; l++ {
		for e := int64(0); e < 5; e++ {
			mustAdd(t, s, l, e, entryBody(l, e, e-1, 0, 50))
		}
	}
	if err := fence(t, s, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetExplicitLAC(context.Background(), 2, masterKey(2), explicitBody(2, 3)); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, s)
	if k, err := s.EvictIdleLedgers(); err != nil || k != 0 {
		t.Fatalf("first sweep after use: evicted %d, %v; want 0 (not idle for a full period)", k, err)
	}
	if k := sweepIdle(t, s); k != 2 || cached(s, 1) || cached(s, 2) || s.CachedLedgers() != 0 {
		t.Fatalf("evicted %d, cached %d; want both ledgers evicted", k, s.CachedLedgers())
	}

	// Fenced stays fenced: a normal add is refused, a recovery add is not,
	// and a second fence is already durable.
	if err := addSync(t, s, 1, 5, entryBody(1, 5, 4, 0, 50), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced ledger after eviction: %v, want ErrFenced", err)
	}
	sweepIdle(t, s)
	if err := fence(t, s, 1); err != nil {
		t.Fatal(err)
	}
	if info, err := s.LedgerInfo(1); err != nil || !info.Fenced || info.LastEntryID != 4 || info.LastAddConfirmed != 3 {
		t.Fatalf("ledger 1 after eviction: %+v, %v", info, err)
	}
	if err := addSync(t, s, 1, 5, entryBody(1, 5, 4, 0, 50), storage.AddOptions{Recovery: true}); err != nil {
		t.Fatalf("recovery add after eviction: %v", err)
	}

	// A wrong master key is still refused, for adds, fences and explicit
	// LACs; the right one is accepted.
	sweepIdle(t, s)
	mustFlush(t, s)
	sweepIdle(t, s)
	if cached(s, 1) || cached(s, 2) {
		t.Fatal("ledgers not evicted")
	}
	r := newResult()
	s.AddEntry(2, 5, []byte("wrong"), entryBody(2, 5, 4, 0, 50), storage.AddOptions{}, r)
	if err := r.wait(t); !errors.Is(err, storage.ErrUnauthorized) {
		t.Fatalf("wrong key after eviction: %v, want ErrUnauthorized", err)
	}
	sweepIdle(t, s)
	if err := s.Fence(context.Background(), 2, []byte("wrong")); !errors.Is(err, storage.ErrUnauthorized) {
		t.Fatalf("fence with wrong key after eviction: %v, want ErrUnauthorized", err)
	}
	sweepIdle(t, s)
	if err := s.SetExplicitLAC(context.Background(), 2, []byte("wrong"), explicitBody(2, 4)); !errors.Is(err, storage.ErrUnauthorized) {
		t.Fatalf("explicit LAC with wrong key after eviction: %v, want ErrUnauthorized", err)
	}
	sweepIdle(t, s)
	if lac, err := s.LastAddConfirmed(2); err != nil || lac != 3 {
		t.Fatalf("LAC after eviction: %d, %v; want 3", lac, err)
	}
	sweepIdle(t, s)
	if b, err := s.ExplicitLAC(2); err != nil || string(b) != string(explicitBody(2, 3)) {
		t.Fatalf("explicit LAC after eviction: %x, %v", b, err)
	}
	sweepIdle(t, s)
	mustRead(t, s, 2, -1, entryBody(2, 4, 3, 0, 50))
	mustRead(t, s, 1, -1, entryBody(1, 5, 4, 0, 50))
	mustAdd(t, s, 2, 5, entryBody(2, 5, 4, 0, 50))
	if lac, err := s.LastAddConfirmed(2); err != nil || lac != 4 {
		t.Fatalf("LAC after add: %d, %v; want 4", lac, err)
	}
}

// TestEvictPendingFencePins: a fence whose journal record is not durable
// yet pins its ledger (a reload would take the fence for durable and
// answer a second fence before the first is on disk).
func TestEvictPendingFencePins(t *testing.T) {
	cfg := evictConfig(t)
	cfg.ManualJournal = true
	s := mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	r := newResult()
	s.AddEntry(1, 0, masterKey(1), entryBody(1, 0, -1, 0, 50), storage.AddOptions{}, r)
	stepUntil(t, s, func() bool { return len(r.ch) == 1 })
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, s)
	// The fencer gives up waiting (its context ends) while the record is
	// still queued: nothing holds the ledger but its pending fence.
	ctx, cancel := context.WithCancel(context.Background())
	fenced := make(chan error, 1)
	go func() { fenced <- s.Fence(ctx, 1, masterKey(1)) }()
	waitFor(t, "the fence record queued", func() bool { return s.JournalQueuedRecords() == 1 })
	cancel()
	if err := <-fenced; !errors.Is(err, context.Canceled) {
		t.Fatalf("fence with its context cancelled: %v", err)
	}
	if k := sweepIdle(t, s); k != 0 || !cached(s, 1) {
		t.Fatalf("a ledger with a fence not yet durable was evicted (%d)", k)
	}
	stepUntil(t, s, func() bool { return s.JournalQueuedRecords() == 0 })
	if k := sweepIdle(t, s); k != 1 || cached(s, 1) {
		t.Fatalf("durable fence: evicted %d, want 1", k)
	}
	// Reloaded: durable, so a second fence needs no journal step.
	if err := s.Fence(context.Background(), 1, masterKey(1)); err != nil {
		t.Fatal(err)
	}
	r = newResult()
	s.AddEntry(1, 1, masterKey(1), entryBody(1, 1, 0, 0, 50), storage.AddOptions{}, r)
	if err := r.wait(t); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add after fence and eviction: %v, want ErrFenced", err)
	}
}

// TestEvictUnflushedEntriesPin: entries still in the write cache pin their
// ledger (the index does not know its last entry yet). The unflushed
// entries carry the LAC the indexed last entry has, so only the last-entry
// rule keeps the ledger.
func TestEvictUnflushedEntriesPin(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	for e := int64(0); e < 3; e++ {
		mustAdd(t, s, 7, e, entryBody(7, e, e-1, 0, 50))
	}
	if k := sweepIdle(t, s); k != 0 || !cached(s, 7) {
		t.Fatalf("a ledger with no entry indexed was evicted (%d)", k)
	}
	mustFlush(t, s)
	for e := int64(3); e < 5; e++ {
		mustAdd(t, s, 7, e, entryBody(7, e, 1, 0, 50))
	}
	if k := sweepIdle(t, s); k != 0 || !cached(s, 7) {
		t.Fatalf("a ledger with unflushed entries was evicted (%d)", k)
	}
	mustRead(t, s, 7, -1, entryBody(7, 4, 1, 0, 50))
	mustFlush(t, s)
	if k := sweepIdle(t, s); k != 1 {
		t.Fatalf("flushed ledger: evicted %d, want 1", k)
	}
	mustRead(t, s, 7, -1, entryBody(7, 4, 1, 0, 50))
	if lac, err := s.LastAddConfirmed(7); err != nil || lac != 1 {
		t.Fatalf("LAC %d, %v; want 1", lac, err)
	}
}

// TestEvictHeldReferencePins: an object an operation holds is never
// evicted, however many sweeps pass (one object per ledger: its lock is
// the ledger's lock).
func TestEvictHeldReferencePins(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	mustAdd(t, s, 9, 0, entryBody(9, 0, -1, 0, 50))
	mustFlush(t, s)
	l := s.ledgers.acquire(9)
	for range 5 {
		if _, err := s.EvictIdleLedgers(); err != nil {
			t.Fatal(err)
		}
	}
	if !cached(s, 9) || s.ledgers.acquireExisting(9) != l {
		t.Fatal("a held ledger object was evicted")
	}
	// An operation that acquires the object after the sweeper picked it
	// (between collection and removal) keeps it too.
	s.ledgers.release(l)
	sh := s.ledgers.shard(9)
	sh.Lock()
	l.refs++ // the sweeper's reference, as EvictIdleLedgers takes it
	sh.Unlock()
	held := s.ledgers.acquire(9)
	// An epoch under which the object counts as idle: only the
	// operation's reference keeps it.
	if ok, err := s.evictOne(l, s.ledgers.epoch.Load()+2); ok || err != nil || !cached(s, 9) {
		t.Fatalf("evictOne with an operation holding the object: %v, %v", ok, err)
	}
	s.ledgers.release(held)
	s.ledgers.release(l)
	if k := sweepIdle(t, s); k != 1 || cached(s, 9) {
		t.Fatalf("released: evicted %d, want 1", k)
	}
	if l2 := s.ledgers.acquire(9); l2 == l {
		t.Fatal("an evicted object came back")
	} else {
		s.ledgers.release(l2)
	}
}

// TestEvictLACNeverBackwards: a known LAC above what a reload computes
// (entries whose LAC fields came out of order) pins the ledger; an explicit
// LAC, which the index keeps, does not.
func TestEvictLACNeverBackwards(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	mustAdd(t, s, 3, 0, entryBody(3, 0, 5, 0, 50))
	mustAdd(t, s, 3, 1, entryBody(3, 1, 0, 0, 50))
	mustFlush(t, s)
	if k := sweepIdle(t, s); k != 0 || !cached(s, 3) {
		t.Fatalf("evicted %d: a reload would lower the LAC from 5 to 0", k)
	}
	if lac, err := s.LastAddConfirmed(3); err != nil || lac != 5 {
		t.Fatalf("LAC %d, %v; want 5", lac, err)
	}
	if err := s.SetExplicitLAC(context.Background(), 3, masterKey(3), explicitBody(3, 7)); err != nil {
		t.Fatal(err)
	}
	if k := sweepIdle(t, s); k != 1 {
		t.Fatalf("explicit LAC 7 covers the known LAC: evicted %d, want 1", k)
	}
	if lac, err := s.LastAddConfirmed(3); err != nil || lac != 7 {
		t.Fatalf("LAC after reload %d, %v; want 7", lac, err)
	}
}

// TestEvictUnseenLastEntryLAC: a LAC raised by a recovery add rewriting an
// earlier entry, with no LAC read since (so the object did not see the
// last indexed entry's body): the sweep reads that entry's LAC field, finds
// it lower, and keeps the ledger.
func TestEvictUnseenLastEntryLAC(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	for e := int64(0); e <= 5; e++ {
		mustAdd(t, s, 3, e, entryBody(3, e, 2, 0, 50))
	}
	mustFlush(t, s)
	if k := sweepIdle(t, s); k != 1 {
		t.Fatalf("evicted %d, want 1", k)
	}
	if err := addSync(t, s, 3, 3, entryBody(3, 3, 4, 1, 50), storage.AddOptions{Recovery: true}); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, s)
	if k := sweepIdle(t, s); k != 0 || !cached(s, 3) {
		t.Fatalf("evicted %d: a reload would lower the LAC from 4 to 2", k)
	}
	if lac, err := s.LastAddConfirmed(3); err != nil || lac != 4 {
		t.Fatalf("LAC %d, %v; want 4", lac, err)
	}
}

// TestEvictLoweredExplicitLACPins: an explicit LAC written lower than an
// earlier one lowers the index's but not the known LAC (LACs only go up), so
// a reload would answer the lower one: the ledger stays.
func TestEvictLoweredExplicitLACPins(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	for _, v := range []int64{7, 3} {
		if err := s.SetExplicitLAC(context.Background(), 9, masterKey(9), explicitBody(9, v)); err != nil {
			t.Fatal(err)
		}
	}
	if lac, err := s.LastAddConfirmed(9); err != nil || lac != 7 {
		t.Fatalf("LAC %d, %v; want 7", lac, err)
	}
	if k := sweepIdle(t, s); k != 0 || !cached(s, 9) {
		t.Fatalf("evicted %d: a reload would lower the LAC from 7 to 3", k)
	}
	if lac, err := s.LastAddConfirmed(9); err != nil || lac != 7 {
		t.Fatalf("LAC after the sweeps %d, %v; want 7", lac, err)
	}
	// A higher explicit LAC covers it again.
	if err := s.SetExplicitLAC(context.Background(), 9, masterKey(9), explicitBody(9, 8)); err != nil {
		t.Fatal(err)
	}
	if k := sweepIdle(t, s); k != 1 {
		t.Fatalf("explicit LAC 8: evicted %d, want 1", k)
	}
	if lac, err := s.LastAddConfirmed(9); err != nil || lac != 8 {
		t.Fatalf("LAC after reload %d, %v; want 8", lac, err)
	}
}

// TestEvictUnwrittenExplicitLACPins: an explicit LAC whose index write
// failed is in memory only (the store turns read-only but keeps serving
// reads): the ledger stays, or a reload would answer the index's explicit
// LAC instead of the one readers were given. The entries' LAC covers the
// known LAC, so only the explicit-LAC comparison keeps the ledger.
func TestEvictUnwrittenExplicitLACPins(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	for e := int64(0); e < 6; e++ {
		mustAdd(t, s, 9, e, entryBody(9, e, 4, 0, 50))
	}
	mustFlush(t, s)
	injected := errors.New("test: index state write failed")
	s.stateFault.Store(&injected)
	if err := s.SetExplicitLAC(context.Background(), 9, masterKey(9), explicitBody(9, 3)); !errors.Is(err, injected) {
		t.Fatalf("SetExplicitLAC with a failing index: %v", err)
	}
	s.stateFault.Store(nil)
	if s.Err() == nil {
		t.Fatal("store not failed after a failed index write")
	}
	if k := sweepIdle(t, s); k != 0 || !cached(s, 9) {
		t.Fatalf("evicted %d: the explicit LAC is only in memory", k)
	}
	if b, err := s.ExplicitLAC(9); err != nil || string(b) != string(explicitBody(9, 3)) {
		t.Fatalf("explicit LAC after the sweeps: %x, %v", b, err)
	}
	if lac, err := s.LastAddConfirmed(9); err != nil || lac != 4 {
		t.Fatalf("LAC after the sweeps %d, %v; want 4", lac, err)
	}
}

// TestEvictWatchPins: a registered LAC watch (a waiting long poll) pins its
// ledger; once woken it does not, and its cancel after eviction is
// harmless.
func TestEvictWatchPins(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	mustAdd(t, s, 4, 0, entryBody(4, 0, -1, 0, 50))
	mustAdd(t, s, 4, 1, entryBody(4, 1, 0, 0, 50))
	mustFlush(t, s)
	woken := make(chan struct{}, 1)
	lac, cancel, err := s.WatchLAC(4, 0, func() { woken <- struct{}{} })
	if err != nil || lac != 0 {
		t.Fatalf("WatchLAC: %d, %v", lac, err)
	}
	if k := sweepIdle(t, s); k != 0 || !cached(s, 4) {
		t.Fatalf("a watched ledger was evicted (%d)", k)
	}
	mustAdd(t, s, 4, 2, entryBody(4, 2, 1, 0, 50))
	<-woken
	mustFlush(t, s)
	if k := sweepIdle(t, s); k != 1 {
		t.Fatalf("woken watch: evicted %d, want 1", k)
	}
	cancel()
	// A cancelled watch unpins too.
	_, cancel, err = s.WatchLAC(4, 1, func() { t.Error("cancelled watch woken") })
	if err != nil {
		t.Fatal(err)
	}
	sweepIdle(t, s)
	if !cached(s, 4) {
		t.Fatal("watched ledger evicted")
	}
	cancel()
	if k := sweepIdle(t, s); k != 1 {
		t.Fatalf("cancelled watch: evicted %d, want 1", k)
	}
	if lac, err := s.LastAddConfirmed(4); err != nil || lac != 1 {
		t.Fatalf("LAC %d, %v; want 1", lac, err)
	}
}

// TestEvictUnjournaledMasterKeyPins: state only in memory is never evicted.
// A master key whose journal record could not be queued leaves the ledger
// unknown in memory while the index (unsynced) already has its state; a
// reload would take it as known and the next add would skip the master-key
// record that replay needs to keep the acknowledged entry after a crash.
func TestEvictUnjournaledMasterKeyPins(t *testing.T) {
	cfg := evictConfig(t)
	cfg.ManualJournal = true
	cfg.JournalMaxQueueRecords = 2
	cfg.JournalQueueWait = -1
	s := mustOpen(t, vfs.Default, cfg)
	ra := newResult()
	s.AddEntry(1, 0, masterKey(1), entryBody(1, 0, -1, 0, 50), storage.AddOptions{}, ra) // master key + entry: queue full
	rb := newResult()
	s.AddEntry(2, 0, masterKey(2), entryBody(2, 0, -1, 0, 50), storage.AddOptions{}, rb)
	if err := rb.wait(t); !errors.Is(err, storage.ErrTooManyRequests) {
		t.Fatalf("add with a full journal queue: %v, want ErrTooManyRequests", err)
	}
	stepUntil(t, s, func() bool { return len(ra.ch) == 1 })
	if err := ra.wait(t); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, s)
	sweepIdle(t, s)
	if !cached(s, 2) {
		t.Fatal("ledger 2 (unknown in memory, state in the index, no master-key record) was evicted")
	}
	rb = newResult()
	s.AddEntry(2, 0, masterKey(2), entryBody(2, 0, -1, 0, 50), storage.AddOptions{}, rb)
	stepUntil(t, s, func() bool { return len(rb.ch) == 1 })
	if err := rb.wait(t); err != nil {
		t.Fatal(err)
	}
	// Crash before any checkpoint: replay must bring the entry back.
	s.fail(errors.New("test: crash"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.ManualJournal = false
	s = mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	mustRead(t, s, 2, 0, entryBody(2, 0, -1, 0, 50))
}

// TestEvictDeletedLedgers: deleted ledgers' objects go, and a fenced and
// deleted ledger stays refused after its reload.
func TestEvictDeletedLedgers(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	defer s.Close()
	for l := int64(1); l <= 2; l++ {
		mustAdd(t, s, l, 0, entryBody(l, 0, -1, 0, 50))
	}
	if err := fence(t, s, 2); err != nil {
		t.Fatal(err)
	}
	for l := int64(1); l <= 2; l++ {
		if err := s.DeleteLedger(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	if k := sweepIdle(t, s); k != 2 || s.CachedLedgers() != 0 {
		t.Fatalf("deleted ledgers: evicted %d, %d cached", k, s.CachedLedgers())
	}
	if err := addSync(t, s, 2, 1, entryBody(2, 1, 0, 0, 50), storage.AddOptions{Recovery: true}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add to fenced-and-deleted ledger after eviction: %v, want ErrFenced", err)
	}
	if _, err := s.ReadEntry(1, 0); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("read deleted ledger: %v, want ErrNoLedger", err)
	}
	if info, err := s.LedgerInfo(2); err != nil || !info.Deleted || !info.Fenced {
		t.Fatalf("ledger 2: %+v, %v", info, err)
	}
}

// TestEvictConcurrent races sweeps against adds, fences, reads and watches
// on a few ledgers: after Fence returns, no normal add succeeds (one
// object per ledger, so one lock), every acknowledged entry reads back,
// and no reader sees a LAC go backwards. Readers block on their watch (a
// waiting long poll) until woken or a short timeout, so sweeps run while
// watches wait; every other ledger's entries carry LACs out of order (every
// third one lower than its predecessor's), so sweeps meet known LACs above
// what the last indexed entry says.
func TestEvictConcurrent(t *testing.T) {
	cfg := evictConfig(t)
	cfg.evictScanChunk = 1 // every object scanned under its own hold of the lock
	s := mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	const ledgers, entries = 8, 150
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sweeps, evictions atomic.Int64
	// progress paces the sweeper: one sweep and flush per acknowledged add
	// at most, so it races every step without starving the writers.
	progress := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			<-progress
			if err := s.FlushWriteCache(); err != nil {
				t.Error(err)
				return
			}
			// Two sweeps back to back: whatever was not used in between
			// is idle, so evictions race the operations.
			for range 2 {
				k, err := s.EvictIdleLedgers()
				if err != nil {
					t.Error(err)
					return
				}
				evictions.Add(int64(k))
			}
			if err := s.FlushWriteCache(); err != nil {
				t.Error(err)
				return
			}
			sweeps.Add(1)
		}
	}()
	// lacOf is the LAC field entry e of ledger id carries; the last entry's
	// is entries-2 either way.
	lacOf := func(id, e int64) int64 {
		if (id/64)%2 == 0 && e%3 == 1 {
			return max(e-3, -1)
		}
		return e - 1
	}
	acked := make([][]int64, ledgers)
	var work sync.WaitGroup
	for l := range int64(ledgers) {
		id := 64*l + 1 // one shard: the sweep's chunks interleave with every ledger
		work.Add(2)
		go func() { // writer, then fencer
			defer work.Done()
			for e := int64(0); e < entries; e++ {
				if err := addSync(t, s, id, e, entryBody(id, e, lacOf(id, e), 0, 30), storage.AddOptions{}); err != nil {
					t.Errorf("add %d/%d: %v", id, e, err)
					return
				}
				acked[l] = append(acked[l], e)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
			if err := fence(t, s, id); err != nil {
				t.Errorf("fence %d: %v", id, err)
				return
			}
			for e := int64(entries); e < entries+20; e++ {
				if err := addSync(t, s, id, e, entryBody(id, e, e-1, 0, 30), storage.AddOptions{}); !errors.Is(err, storage.ErrFenced) {
					t.Errorf("add %d/%d after fence: %v, want ErrFenced", id, e, err)
					return
				}
			}
		}()
		go func() { // reader: LAC never backwards
			defer work.Done()
			last := int64(-1)
			for last < entries-2 {
				lac, err := s.LastAddConfirmed(id)
				if errors.Is(err, storage.ErrNoLedger) {
					continue // not created yet
				}
				if err != nil {
					t.Errorf("LAC %d: %v", id, err)
					return
				}
				if lac < last {
					t.Errorf("ledger %d: LAC went back from %d to %d", id, last, lac)
					return
				}
				last = lac
				// Wait on the watch like a long poll, until woken or a
				// timeout (the writer may have finished: no wake comes).
				done := make(chan struct{})
				wlac, cancel, err := s.WatchLAC(id, lac, func() { close(done) })
				if err != nil {
					t.Errorf("WatchLAC %d: %v", id, err)
					return
				}
				if wlac < last {
					t.Errorf("ledger %d: watch LAC went back from %d to %d", id, last, wlac)
					return
				}
				if wlac == lac {
					select {
					case <-done:
					case <-time.After(2 * time.Millisecond):
					}
				}
				cancel()
			}
		}()
	}
	work.Wait()
	stop.Store(true)
	select {
	case progress <- struct{}{}:
	default: // one is pending already
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d sweep rounds, %d evictions during the run", sweeps.Load(), evictions.Load())
	mustFlush(t, s)
	sweepIdle(t, s)
	checkShards(t, s)
	for l := range int64(ledgers) {
		id := 64*l + 1 // one shard: the sweep's chunks interleave with every ledger
		for _, e := range acked[l] {
			mustRead(t, s, id, e, entryBody(id, e, lacOf(id, e), 0, 30))
		}
		if info, err := s.LedgerInfo(id); err != nil || !info.Fenced || info.LastAddConfirmed != entries-2 {
			t.Fatalf("ledger %d: %+v, %v", id, info, err)
		}
	}
}

// stepUntil runs group commits until cond holds (ManualJournal).
func stepUntil(t *testing.T, s *Store, cond func() bool) {
	t.Helper()
	waitFor(t, "the journal step's completion", func() bool {
		if _, err := s.StepJournals(); err != nil {
			t.Fatal(err)
		}
		return cond()
	})
}

// waitFor polls cond (a condition, not a timing assumption) for up to a
// minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(fmt.Sprintf("waiting for %s: not after a minute", what))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEvictChunks: a sweep scanning a shard a few objects per hold of its
// lock evicts exactly the idle unpinned ledgers, with uses and new ledgers
// arriving between its chunks (the hook runs while the lock is dropped),
// and the shard's list stays consistent with its map.
func TestEvictChunks(t *testing.T) {
	cfg := evictConfig(t)
	cfg.evictScanChunk = 3
	s := mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	// Ledgers 64*k+1 share one shard.
	const n = 40
	id := func(k int) int64 { return int64(64*k + 1) }
	for k := range n {
		mustAdd(t, s, id(k), 0, entryBody(id(k), 0, -1, 0, 10))
	}
	mustFlush(t, s)
	// Every fifth ledger held through the sweeps.
	var held []*ledger
	for k := 0; k < n; k += 5 {
		held = append(held, s.ledgers.acquire(id(k)))
	}
	if k := sweepIdle(t, s); k != n-len(held) {
		t.Fatalf("evicted %d, want %d", k, n-len(held))
	}
	checkShards(t, s)
	for k := range n {
		if want := k%5 == 0; cached(s, id(k)) != want {
			t.Fatalf("ledger %d cached %v, want %v", id(k), !want, want)
		}
	}
	for _, l := range held {
		s.ledgers.release(l)
	}
	// Evictions and new ledgers interleaved with the chunks: between any
	// two sweeps, a new ledger and an evicted one are used.
	for k := range n {
		mustAdd(t, s, id(k), 1, entryBody(id(k), 1, 0, 0, 10))
	}
	mustFlush(t, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := n; k < 2*n; k++ {
			mustAdd(t, s, id(k), 0, entryBody(id(k), 0, -1, 0, 10))
			mustRead(t, s, id(k-n), 1, entryBody(id(k-n), 1, 0, 0, 10))
		}
	}()
	for range 20 {
		if _, err := s.EvictIdleLedgers(); err != nil {
			t.Fatal(err)
		}
		checkShards(t, s)
	}
	<-done
	mustFlush(t, s)
	sweepIdle(t, s)
	checkShards(t, s)
	if c := s.CachedLedgers(); c != 0 {
		t.Fatalf("%d ledgers cached after idle sweeps", c)
	}
	for k := range 2 * n {
		mustRead(t, s, id(k), 0, entryBody(id(k), 0, -1, 0, 10))
	}
}

// TestEvictLoopPaced: the background sweep checks at most
// LedgerEvictionChecksPerSecond ledgers a second of the store's clock
// (here 10 a second in bursts of 1: a check every 100 ms after the
// first), and Close stops a sweep waiting for its pace.
func TestEvictLoopPaced(t *testing.T) {
	cfg := evictConfig(t)
	clk := clock.NewManual(time.Unix(1000, 0))
	cfg.Clock, cfg.Manual, cfg.LedgerIdleTime = clk, false, time.Minute
	cfg.LedgerEvictionChecksPerSecond = 10
	s := mustOpen(t, vfs.Default, cfg)
	const n = 5
	for l := int64(1); l <= n; l++ {
		mustAdd(t, s, l, 0, entryBody(l, 0, -1, 0, 10))
	}
	mustFlush(t, s)
	// The first sweep finds nothing idle yet; the second, a minute later,
	// evicts one ledger at once and then one per 100 ms.
	for range 2 {
		waitFor(t, "the loops' timers", func() bool { return clk.Waiters() == 3 })
		clk.Advance(time.Minute)
	}
	for left := n - 1; left > 0; left-- {
		// The sweep's pacing timer is the third waiter (checkpoint, GC).
		waitFor(t, "a paced check", func() bool { return s.CachedLedgers() == left && clk.Waiters() == 3 })
		if c := s.CachedLedgers(); c != left {
			t.Fatalf("%d cached before the pace allowed another check, want %d", c, left)
		}
		clk.Advance(100 * time.Millisecond)
	}
	waitFor(t, "the sweep's end", func() bool { return s.CachedLedgers() == 0 })
	// A sweep waiting for its pace when the store closes stops.
	for l := int64(1); l <= n; l++ {
		mustRead(t, s, l, 0, entryBody(l, 0, -1, 0, 10))
	}
	for range 2 {
		waitFor(t, "the loops' timers", func() bool { return clk.Waiters() == 3 })
		clk.Advance(time.Minute)
	}
	waitFor(t, "a paced check", func() bool { return s.CachedLedgers() == n-1 && clk.Waiters() == 3 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEvictAfterClose: a sweep on a closed store is refused, not run on
// closed indexes.
func TestEvictAfterClose(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	mustAdd(t, s, 1, 0, entryBody(1, 0, -1, 0, 10))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictIdleLedgers(); err == nil {
		t.Fatal("EvictIdleLedgers on a closed store: no error")
	}
}

// TestEvictCloseWaitsForSweep: Close waits for a sweep in progress before
// it closes the indexes the sweep reads (the sweep is held between its
// chunks by the test hook while Close starts), and the sweep completes.
func TestEvictCloseWaitsForSweep(t *testing.T) {
	s := mustOpen(t, vfs.Default, evictConfig(t))
	const n = 10
	for l := int64(1); l <= n; l++ {
		mustAdd(t, s, l, 0, entryBody(l, 0, -1, 0, 10))
	}
	mustFlush(t, s)
	if k, err := s.EvictIdleLedgers(); err != nil || k != 0 {
		t.Fatalf("first sweep: %d, %v", k, err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.setHook(func(point string) {
		if point == "evict:chunk" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	})
	type result struct {
		k   int
		err error
	}
	swept := make(chan result, 1)
	go func() {
		k, err := s.EvictIdleLedgers()
		swept <- result{k, err}
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, "Close to start", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mu.closing
	})
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) during a sweep", err)
	default:
	}
	close(release)
	if r := <-swept; r.err != nil || r.k != n {
		t.Fatalf("sweep during Close: evicted %d, %v; want %d, nil", r.k, r.err, n)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictIdleLedgers(); err == nil {
		t.Fatal("sweep after Close: no error")
	}
}

// TestSweepErr: a sweep reports its first failed check and how many more.
func TestSweepErr(t *testing.T) {
	first := errors.New("index read failed")
	if err := sweepErr(nil, 0); err != nil {
		t.Fatalf("no failure: %v", err)
	}
	if err := sweepErr(first, 1); err != first {
		t.Fatalf("one failure: %v", err)
	}
	err := sweepErr(first, 3)
	if !errors.Is(err, first) || !strings.Contains(err.Error(), "and 2 more") {
		t.Fatalf("three failures: %v", err)
	}
}

// TestEvictLoop: the background loop sweeps every LedgerIdleTime of the
// store's clock (a manual clock here): an idle ledger is gone after two
// periods.
func TestEvictLoop(t *testing.T) {
	cfg := evictConfig(t)
	clk := clock.NewManual(time.Unix(1000, 0))
	cfg.Clock, cfg.Manual, cfg.LedgerIdleTime = clk, false, time.Minute
	s := mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	mustAdd(t, s, 5, 0, entryBody(5, 0, -1, 0, 10))
	mustFlush(t, s)
	for i := 0; cached(s, 5); i++ {
		if i == 1000 {
			t.Fatal("ledger 5 still cached after 1000 idle periods")
		}
		// Every loop's timer armed (checkpoint, GC, eviction): each loop
		// is idle, so the advance fires the eviction sweep.
		waitFor(t, "the loops' timers", func() bool { return clk.Waiters() == 3 })
		epoch := s.ledgers.epoch.Load()
		clk.Advance(time.Minute)
		waitFor(t, "the sweep", func() bool { return s.ledgers.epoch.Load() > epoch })
	}
	mustRead(t, s, 5, 0, entryBody(5, 0, -1, 0, 10))
}

// A ledger used after a paced sweep picked it as a candidate, before the
// sweep reached it, stays (evict.go's contract: only ledgers unused since
// before the previous sweep are dropped).
func TestEvictSkipsCandidateUsedAfterPicking(t *testing.T) {
	cfg := evictConfig(t)
	cfg.evictScanChunk = 8
	s := mustOpen(t, vfs.Default, cfg)
	defer s.Close()
	id := func(k int) int64 { return int64(64*k + 1) } // one shard
	const n = 3
	for k := range n {
		mustAdd(t, s, id(k), 0, entryBody(id(k), 0, -1, 0, 10))
	}
	mustFlush(t, s)
	if _, err := s.EvictIdleLedgers(); err != nil { // the epoch in which they were used ends
		t.Fatal(err)
	}
	s.setHook(func(p string) {
		if p == "evict:chunk" { // the candidates are picked; none reached yet
			for k := range n {
				mustRead(t, s, id(k), 0, entryBody(id(k), 0, -1, 0, 10))
			}
		}
	})
	k, err := s.EvictIdleLedgers()
	s.setHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if k != 0 {
		t.Fatalf("evicted %d of %d ledgers used after the sweep picked them", k, n)
	}
	for i := range n {
		if !cached(s, id(i)) {
			t.Fatalf("ledger %d was evicted", id(i))
		}
	}
	checkShards(t, s)
}
