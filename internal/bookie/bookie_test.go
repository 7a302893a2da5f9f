package bookie

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/wire"
)

func TestAddAndRead(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for i, proto := range bothProtocols {
			ledger := int64(10 + i)
			t.Run(proto.String(), func(t *testing.T) {
				h.mustAdd(proto, ledger, 0, 2)

				resp := h.do(proto, readRequest(ledger, 1))
				if st := responseStatus(resp); st != wire.StatusOK {
					t.Fatalf("read 1: %v", st)
				}
				if !bytes.Equal(resp.Read.Body, h.entry(ledger, 1, 0, "payload")) {
					t.Fatalf("read 1 body differs")
				}
				if resp.Read.LedgerID != ledger || resp.Read.EntryID != 1 {
					t.Fatalf("read 1 ids: %d/%d", resp.Read.LedgerID, resp.Read.EntryID)
				}
				if proto == wire.ProtocolV3 && (!resp.Read.HasMaxLAC || resp.Read.MaxLAC != 1) {
					t.Fatalf("read 1 maxLAC = %d (has %v), want 1 (entry 2 carries LAC 1)", resp.Read.MaxLAC, resp.Read.HasMaxLAC)
				}

				// Entry -1: the highest stored entry; the response echoes -1.
				resp = h.do(proto, readRequest(ledger, -1))
				if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != -1 {
					t.Fatalf("read -1: %v entry %d", st, resp.Read.EntryID)
				}
				if !bytes.Equal(resp.Read.Body, h.entry(ledger, 2, 1, "payload")) {
					t.Fatalf("read -1 is not entry 2")
				}

				if st := responseStatus(h.do(proto, readRequest(ledger, 7))); st != wire.StatusNoEntry {
					t.Fatalf("missing entry: %v, want ENOENTRY", st)
				}
				if st := responseStatus(h.do(proto, readRequest(999, 0))); st != wire.StatusNoLedger {
					t.Fatalf("unknown ledger: %v, want ENOLEDGER", st)
				}
				// Re-adding an existing entry succeeds (client retries).
				if st := h.add(proto, ledger, 1, 0, testKey, false); st != wire.StatusOK {
					t.Fatalf("re-add: %v", st)
				}
			})
		}
	})
}

func TestAddWrongKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for i, proto := range bothProtocols {
			ledger := int64(20 + i)
			h.mustAdd(proto, ledger, 0, 0)
			if st := h.add(proto, ledger, 1, 0, wrongKey, false); st != wire.StatusUnauthorized {
				t.Fatalf("%v: add with wrong key: %v, want EUA", proto, st)
			}
			if st := h.add(proto, ledger, 1, 0, wrongKey, true); st != wire.StatusUnauthorized {
				t.Fatalf("%v: recovery add with wrong key: %v, want EUA", proto, st)
			}
		}
	})
}

func TestFence(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for i, proto := range bothProtocols {
			ledger := int64(30 + i)
			t.Run(proto.String(), func(t *testing.T) {
				h.mustAdd(proto, ledger, 0, 1)

				// A fence with the wrong key is refused and does not fence.
				if st := responseStatus(h.do(proto, fenceRequest(ledger, -1, wrongKey))); st != wire.StatusUnauthorized {
					t.Fatalf("fence with wrong key: %v, want EUA", st)
				}
				if st := h.add(proto, ledger, 2, 1, testKey, false); st != wire.StatusOK {
					t.Fatalf("add after refused fence: %v", st)
				}

				resp := h.do(proto, fenceRequest(ledger, -1, testKey))
				if st := responseStatus(resp); st != wire.StatusOK {
					t.Fatalf("fence read: %v", st)
				}
				if !bytes.Equal(resp.Read.Body, h.entry(ledger, 2, 1, "payload")) {
					t.Fatalf("fence read of -1 is not the last entry")
				}
				if st := h.add(proto, ledger, 3, 2, testKey, false); st != wire.StatusFenced {
					t.Fatalf("normal add after fence: %v, want EFENCED", st)
				}
				if st := h.add(proto, ledger, 3, 2, wrongKey, false); st != wire.StatusUnauthorized {
					t.Fatalf("wrong-key add after fence: %v, want EUA (key checked first)", st)
				}
				if st := h.add(proto, ledger, 3, 2, testKey, true); st != wire.StatusOK {
					t.Fatalf("recovery add after fence: %v, want EOK", st)
				}
				// Fencing again is idempotent; reads keep working.
				if st := responseStatus(h.do(proto, fenceRequest(ledger, 3, testKey))); st != wire.StatusOK {
					t.Fatalf("second fence read: %v", st)
				}
				if st := responseStatus(h.do(proto, readRequest(ledger, 3))); st != wire.StatusOK {
					t.Fatalf("read after fence: %v", st)
				}
			})
		}
	})
}

func TestFenceWithoutKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.mustAdd(wire.ProtocolV3, 40, 0, 0)
		if st := responseStatus(h.do(wire.ProtocolV3, fenceRequest(40, -1, nil))); st != wire.StatusUnauthorized {
			t.Fatalf("v3 fence without key: %v, want EUA", st)
		}
		// v2 version 1 carries no key on a fence read.
		req := fenceRequest(40, -1, nil)
		req.Header.Version = 1
		resp := h.do(wire.ProtocolV2, req)
		if st := responseStatus(resp); st != wire.StatusUnauthorized {
			t.Fatalf("v2 version-1 fence: %v, want EUA", st)
		}
		if resp.Header.Version != 1 {
			t.Fatalf("v2 response version %d, want the request's 1", resp.Header.Version)
		}
		// Not fenced: a normal add still works.
		if st := h.add(wire.ProtocolV3, 40, 1, 0, testKey, false); st != wire.StatusOK {
			t.Fatalf("add after keyless fence attempts: %v", st)
		}
	})
}

// A fence of a ledger the bookie never saw creates it fenced: the read is
// a negative, and the old writer's first add here is refused.
func TestFenceUnknownLedger(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for i, proto := range bothProtocols {
			ledger := int64(50 + i)
			st := responseStatus(h.do(proto, fenceRequest(ledger, -1, testKey)))
			if st != wire.StatusNoEntry && st != wire.StatusNoLedger {
				t.Fatalf("%v: fence of unknown ledger: %v, want ENOENTRY/ENOLEDGER", proto, st)
			}
			if st := h.add(proto, ledger, 0, -1, testKey, false); st != wire.StatusFenced {
				t.Fatalf("%v: add to ledger created by fence: %v, want EFENCED", proto, st)
			}
			if st := h.add(proto, ledger, 0, -1, wrongKey, false); st != wire.StatusUnauthorized {
				t.Fatalf("%v: add with another key: %v, want EUA", proto, st)
			}
		}
	})
}

func longPollRequest(ledgerID, previous, timeoutMs int64, piggyback bool) wire.Request {
	req := readRequest(ledgerID, -1)
	req.Read.PreviousLAC, req.Read.HasPreviousLAC = previous, true
	if timeoutMs >= 0 {
		req.Read.TimeoutMs, req.Read.HasTimeout = timeoutMs, true
	}
	if piggyback {
		req.Read.Flag = wire.ReadFlagEntryPiggyback
	}
	return req
}

// TestLongPoll runs in a synctest bubble: synctest.Wait returns once the
// long poll's spawned work has armed its watch and timer and every
// goroutine is idle, so "not answered yet" is checked at a point where
// nothing but the test can answer it (the clock is manual).
func TestLongPoll(t *testing.T) {
	forEachStoreInBubble(t, func(t *testing.T, h *harness) {
		const ledger = 60
		h.mustAdd(wire.ProtocolV3, ledger, 0, 1) // known LAC 0

		// The LAC is already past previousLAC: answered at once, with entry
		// previousLAC+1 piggybacked.
		resp := h.do(wire.ProtocolV3, longPollRequest(ledger, -1, 5000, true))
		if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != 0 || resp.Read.MaxLAC != 0 || !resp.Read.HasMaxLAC {
			t.Fatalf("immediate long poll: %v entry %d maxLAC %d", st, resp.Read.EntryID, resp.Read.MaxLAC)
		}
		if !bytes.Equal(resp.Read.Body, h.entry(ledger, 0, -1, "payload")) {
			t.Fatal("piggybacked body is not entry 0")
		}

		// Waits while LAC ≤ previousLAC; a new entry that raises it answers.
		p := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 5000, true))
		synctest.Wait()
		if n := h.clock.Waiters(); n != 1 {
			t.Fatalf("%d timers once the long poll waits, want its own", n)
		}
		if p.answered() {
			t.Fatal("long poll answered before the LAC moved")
		}
		h.mustAdd(wire.ProtocolV3, ledger, 2, 2) // carries LAC 1
		resp = p.wait()
		if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != 1 || resp.Read.MaxLAC != 1 {
			t.Fatalf("woken long poll: %v entry %d maxLAC %d", st, resp.Read.EntryID, resp.Read.MaxLAC)
		}
		if !bytes.Equal(resp.Read.Body, h.entry(ledger, 1, 0, "payload")) {
			t.Fatal("piggybacked body is not entry 1")
		}
		if n := h.clock.Waiters(); n != 0 {
			t.Fatalf("%d timers after the poll was woken, want none (stopped)", n)
		}

		// No new entry: it expires on the bookie's clock, EOK, entry -1.
		p = h.start(wire.ProtocolV3, longPollRequest(ledger, 1, 1000, true))
		synctest.Wait()
		if n := h.clock.Waiters(); n != 1 {
			t.Fatalf("%d timers once the long poll waits, want its own", n)
		}
		h.clock.Advance(999 * time.Millisecond)
		synctest.Wait()
		if p.answered() {
			t.Fatal("long poll answered before its timeout")
		}
		h.clock.Advance(time.Millisecond)
		resp = p.wait()
		if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != -1 || resp.Read.HasBody || resp.Read.MaxLAC != 1 {
			t.Fatalf("expired long poll: %v entry %d body %v maxLAC %d", st, resp.Read.EntryID, resp.Read.HasBody, resp.Read.MaxLAC)
		}

		// Without timeOut: answered at once.
		resp = h.do(wire.ProtocolV3, longPollRequest(ledger, 5, -1, true))
		if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != -1 || resp.Read.MaxLAC != 1 {
			t.Fatalf("long poll without timeout: %v entry %d maxLAC %d", st, resp.Read.EntryID, resp.Read.MaxLAC)
		}
		// Unknown ledger.
		if st := responseStatus(h.do(wire.ProtocolV3, longPollRequest(999, 0, 1000, true))); st != wire.StatusNoLedger {
			t.Fatalf("long poll of unknown ledger: %v", st)
		}
		// Piggyback with a real entry id is a bad request.
		req := longPollRequest(ledger, 0, 1000, true)
		req.Read.EntryID = 3
		if st := responseStatus(h.do(wire.ProtocolV3, req)); st != wire.StatusBadRequest {
			t.Fatalf("piggyback with entry 3: %v, want EBADREQ", st)
		}
		// Without piggyback: a normal read of entryId once the wait ends.
		req = longPollRequest(ledger, 0, 1000, false)
		req.Read.EntryID = 2
		resp = h.do(wire.ProtocolV3, req)
		if st := responseStatus(resp); st != wire.StatusOK || resp.Read.EntryID != 2 || resp.Read.MaxLAC != 1 {
			t.Fatalf("plain long poll: %v entry %d maxLAC %d", st, resp.Read.EntryID, resp.Read.MaxLAC)
		}
	})
}

// Close answers waiting long polls at once.
func TestLongPollAnsweredOnClose(t *testing.T) {
	h := newHarness(t, newMemStore(), Config{})
	h.mustAdd(wire.ProtocolV3, 1, 0, 0)
	p := h.start(wire.ProtocolV3, longPollRequest(1, 5, 5000, true))
	waitFor(t, "the long poll to arm its timer", func() bool { return h.clock.Waiters() == 1 })
	h.b.Close()
	if resp := p.wait(); resp.Read.EntryID != -1 {
		t.Fatalf("long poll answered on close with entry %d", resp.Read.EntryID)
	}
	if st := h.add(wire.ProtocolV3, 1, 1, 0, testKey, false); st != wire.StatusIOError {
		t.Fatalf("add after close: %v, want EIO", st)
	}
}

func TestReadOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		var changes []bool
		h.b.cfg.OnReadOnlyChange = func(ro bool) { changes = append(changes, ro) }
		for i, proto := range bothProtocols {
			ledger := int64(70 + i)
			h.mustAdd(proto, ledger, 0, 0)
			h.b.SetReadOnly(true)
			if !h.b.ReadOnly() {
				t.Fatal("ReadOnly() false after SetReadOnly(true)")
			}
			if st := h.add(proto, ledger, 1, 0, testKey, false); st != wire.StatusReadOnly {
				t.Fatalf("%v: normal add in read-only mode: %v, want EREADONLY", proto, st)
			}
			if st := h.add(proto, ledger, 1, 0, testKey, true); st != wire.StatusOK {
				t.Fatalf("%v: recovery add in read-only mode: %v, want EOK", proto, st)
			}
			if st := responseStatus(h.do(proto, readRequest(ledger, 1))); st != wire.StatusOK {
				t.Fatalf("%v: read in read-only mode: %v", proto, st)
			}
			if st := responseStatus(h.do(proto, fenceRequest(ledger, 1, testKey))); st != wire.StatusOK {
				t.Fatalf("%v: fence in read-only mode: %v", proto, st)
			}
			h.b.SetReadOnly(false)
			if st := h.add(proto, ledger+100, 0, -1, testKey, false); st != wire.StatusOK {
				t.Fatalf("%v: add after leaving read-only mode: %v", proto, st)
			}
		}
		h.b.SetReadOnly(true)
		resp := h.do(wire.ProtocolV3, writeLACRequest(70, 0, testKey, h.dig.AppendLAC(nil, 70, 0)))
		if st := responseStatus(resp); st != wire.StatusReadOnly {
			t.Fatalf("WRITE_LAC in read-only mode: %v", st)
		}
		if fmt.Sprint(changes) != "[true false true false true]" {
			t.Fatalf("read-only callbacks %v", changes)
		}
	})
}

// A store failure is noticed by the next request, without a goroutine of
// the bookie's own: the add after it is refused and the change is reported
// once.
func TestStoreFailureMakesReadOnly(t *testing.T) {
	store := newMemStore()
	var changes []bool
	h := newHarness(t, store, Config{OnReadOnlyChange: func(ro bool) { changes = append(changes, ro) }})
	store.fail()
	if st := h.add(wire.ProtocolV3, 1, 0, -1, testKey, false); st != wire.StatusReadOnly {
		t.Fatalf("add on failed store: %v", st)
	}
	h.b.SetReadOnly(false)
	if !h.b.ReadOnly() || !h.b.StoreFailed() {
		t.Fatal("a failed store must keep the bookie read-only")
	}
	if st := h.add(wire.ProtocolV3, 1, 0, -1, testKey, false); st != wire.StatusReadOnly {
		t.Fatalf("add on failed store: %v", st)
	}
	if fmt.Sprint(changes) != "[true]" {
		t.Fatalf("read-only callbacks %v, want [true]", changes)
	}
}

func writeLACRequest(ledgerID, lac int64, key, body []byte) wire.Request {
	req := wire.Request{Header: wire.Header{Op: wire.OpWriteLAC}, Has: wire.BodyWriteLAC}
	req.WriteLAC = wire.WriteLACRequest{LedgerID: ledgerID, LAC: lac, MasterKey: key, Body: body}
	return req
}

func readLACRequest(ledgerID int64) wire.Request {
	return wire.Request{Header: wire.Header{Op: wire.OpReadLAC}, Has: wire.BodyReadLAC, ReadLACLedgerID: ledgerID}
}

func TestReadAndWriteLAC(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const ledger = 80
		resp := h.do(wire.ProtocolV3, readLACRequest(ledger))
		if st := responseStatus(resp); st != wire.StatusNoLedger && st != wire.StatusNoEntry {
			t.Fatalf("READ_LAC of unknown ledger: %v", st)
		}
		h.mustAdd(wire.ProtocolV3, ledger, 0, 1)
		resp = h.do(wire.ProtocolV3, readLACRequest(ledger))
		if st := responseStatus(resp); st != wire.StatusOK || resp.ReadLAC.HasLACBody || !bytes.Equal(resp.ReadLAC.LastEntryBody, h.entry(ledger, 1, 0, "payload")) {
			t.Fatalf("READ_LAC after adds: %v lacBody %v lastEntry %x", st, resp.ReadLAC.HasLACBody, resp.ReadLAC.LastEntryBody)
		}

		lacBody := h.dig.AppendLAC(nil, ledger, 1)
		if st := responseStatus(h.do(wire.ProtocolV3, writeLACRequest(ledger, 1, wrongKey, lacBody))); st != wire.StatusUnauthorized {
			t.Fatalf("WRITE_LAC with wrong key: %v", st)
		}
		// A long poll waiting at LAC 0 is woken by WRITE_LAC.
		p := h.start(wire.ProtocolV3, longPollRequest(ledger, 0, 5000, true))
		waitFor(t, "the long poll to arm its timer", func() bool { return h.clock.Waiters() == 1 })
		resp = h.do(wire.ProtocolV3, writeLACRequest(ledger, 1, testKey, lacBody))
		if st := responseStatus(resp); st != wire.StatusOK || resp.WriteLAC.LedgerID != ledger {
			t.Fatalf("WRITE_LAC: %v ledger %d", st, resp.WriteLAC.LedgerID)
		}
		if resp := p.wait(); resp.Read.MaxLAC != 1 || resp.Read.EntryID != 1 {
			t.Fatalf("long poll after WRITE_LAC: maxLAC %d entry %d", resp.Read.MaxLAC, resp.Read.EntryID)
		}
		resp = h.do(wire.ProtocolV3, readLACRequest(ledger))
		if st := responseStatus(resp); st != wire.StatusOK || !bytes.Equal(resp.ReadLAC.LACBody, lacBody) || !resp.ReadLAC.HasLastEntryBody {
			t.Fatalf("READ_LAC after WRITE_LAC: %v lacBody %x", st, resp.ReadLAC.LACBody)
		}
		// WRITE_LAC on a fenced ledger is accepted, as in Java.
		h.do(wire.ProtocolV3, fenceRequest(ledger, -1, testKey))
		if st := responseStatus(h.do(wire.ProtocolV3, writeLACRequest(ledger, 1, testKey, lacBody))); st != wire.StatusOK {
			t.Fatalf("WRITE_LAC on fenced ledger: %v", st)
		}
	})
}

// READ_LAC must not turn a failed lookup into "no entry" (Java does).
func TestReadLACNeverFalseNegative(t *testing.T) {
	store := newMemStore()
	h := newHarness(t, store, Config{})
	h.mustAdd(wire.ProtocolV3, 1, 0, 0)
	store.readErr = errors.New("injected: entry log unreadable")
	if st := responseStatus(h.do(wire.ProtocolV3, readLACRequest(1))); st != wire.StatusIOError {
		t.Fatalf("READ_LAC with a failing read: %v, want EIO", st)
	}
	store.readErr = nil
	store.lacErr = storage.ErrUnknownLedgerState
	if st := responseStatus(h.do(wire.ProtocolV3, readLACRequest(1))); st != wire.StatusUnknownLedgerState {
		t.Fatalf("READ_LAC in limbo: %v, want EUNKNOWNLEDGERSTATE", st)
	}
}

// A storage failure is EIO, never ENOENTRY; EUNKNOWNLEDGERSTATE becomes EIO
// for v2 clients, which do not know 107.
func TestReadErrorsNeverNegative(t *testing.T) {
	store := newMemStore()
	h := newHarness(t, store, Config{})
	h.mustAdd(wire.ProtocolV3, 1, 0, 0)
	store.readErr = errors.New("injected: checksum mismatch in entry log")
	for _, proto := range bothProtocols {
		if st := responseStatus(h.do(proto, readRequest(1, 0))); st != wire.StatusIOError {
			t.Fatalf("%v: read with I/O error: %v, want EIO", proto, st)
		}
		if st := responseStatus(h.do(proto, fenceRequest(1, 0, testKey))); st != wire.StatusIOError {
			t.Fatalf("%v: fence read with I/O error: %v, want EIO", proto, st)
		}
	}
	store.readErr = fmt.Errorf("ledger 1: %w", storage.ErrUnknownLedgerState)
	if st := responseStatus(h.do(wire.ProtocolV3, readRequest(1, 0))); st != wire.StatusUnknownLedgerState {
		t.Fatalf("v3 limbo read: %v", st)
	}
	p := h.start(wire.ProtocolV2, readRequest(1, 0))
	frame := <-p.ch
	// header(2,2,0) rc=101
	if got := hex.EncodeToString(frame[4:12]); got != "0202000000000065" {
		t.Fatalf("v2 limbo read header+rc = %s, want rc 101 (EIO)", got)
	}
}

func batchReadRequest(ledgerID, start int64, maxCount int32, maxSize int64) wire.Request {
	req := wire.Request{Header: wire.Header{Op: wire.OpBatchReadEntry, TxnID: 77}, Has: wire.BodyBatchRead}
	req.BatchRead = wire.BatchReadRequest{LedgerID: ledgerID, StartEntryID: start, MaxCount: maxCount, MaxSize: maxSize}
	return req
}

func TestBatchRead(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const ledger = 90
		h.mustAdd(wire.ProtocolV2, ledger, 0, 9)
		h.mustAdd(wire.ProtocolV2, ledger, 11, 11) // a gap at 10
		entrySize := int64(len(h.entry(ledger, 0, -1, "payload")))

		check := func(name string, req wire.Request, wantStatus wire.Status, wantFirst int64, wantCount int) {
			t.Helper()
			resp := h.do(wire.ProtocolV2, req)
			if st := responseStatus(resp); st != wantStatus {
				t.Fatalf("%s: %v, want %v", name, st, wantStatus)
			}
			if resp.Header.TxnID != 77 || resp.BatchRead.LedgerID != req.BatchRead.LedgerID || resp.BatchRead.StartEntryID != req.BatchRead.StartEntryID {
				t.Fatalf("%s: ids not echoed: %+v", name, resp.Header)
			}
			if len(resp.BatchRead.Entries) != wantCount {
				t.Fatalf("%s: %d entries, want %d", name, len(resp.BatchRead.Entries), wantCount)
			}
			for i, e := range resp.BatchRead.Entries {
				id := wantFirst + int64(i)
				if !bytes.Equal(e, h.entry(ledger, id, id-1, "payload")) {
					t.Fatalf("%s: entry %d differs", name, id)
				}
			}
		}
		check("count 3", batchReadRequest(ledger, 2, 3, 1<<20), wire.StatusOK, 2, 3)
		check("unlimited count stops at the gap", batchReadRequest(ledger, 4, 0, 1<<20), wire.StatusOK, 4, 6)
		check("tiny size still returns the first", batchReadRequest(ledger, 0, 10, 1), wire.StatusOK, 0, 1)
		// 36 + 3*(4+size) fits exactly; one byte less fits two.
		exact := 36 + 3*(4+entrySize)
		check("size fits 3 exactly", batchReadRequest(ledger, 0, 10, exact), wire.StatusOK, 0, 3)
		check("size one short of 3", batchReadRequest(ledger, 0, 10, exact-1), wire.StatusOK, 0, 2)
		check("missing first entry", batchReadRequest(ledger, 10, 5, 1<<20), wire.StatusNoEntry, 0, 0)
		check("unknown ledger", batchReadRequest(999, 0, 5, 1<<20), wire.StatusNoLedger, 0, 0)

		// Over v3, BATCH_READ is EBADREQ with the header echoed.
		req := wire.Request{Header: wire.Header{Op: wire.OpBatchReadEntry, TxnID: 5, Priority: 100, HasPriority: true}}
		resp := h.do(wire.ProtocolV3, req)
		if resp.Status != wire.StatusBadRequest || resp.Header.TxnID != 5 || resp.Header.Op != wire.OpBatchReadEntry || resp.Header.Priority != 100 {
			t.Fatalf("v3 BATCH_READ: %+v", resp)
		}
	})
}

func TestGetListOfEntries(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const ledger = 100
		for _, id := range []int64{0, 1, 3, 4, 6, 7, 10, 12} {
			h.mustAdd(wire.ProtocolV3, ledger, id, id)
		}
		req := wire.Request{Header: wire.Header{Op: wire.OpGetListOfEntriesOfLedger}, Has: wire.BodyGetListOfEntries, ListEntriesLedgerID: ledger}
		resp := h.do(wire.ProtocolV3, req)
		if st := responseStatus(resp); st != wire.StatusOK || resp.ListEntries.LedgerID != ledger {
			t.Fatalf("list entries: %v", st)
		}
		// Runs {0,1} {3,4} {6,7}: one group, size 2 period 3. {10} and {12}:
		// size 1 period 2.
		want := "00000000" + "00000002" + strings.Repeat("00", 56) +
			"0000000000000000" + "0000000000000006" + "00000002" + "00000003" +
			"000000000000000a" + "000000000000000c" + "00000001" + "00000002"
		if got := hex.EncodeToString(resp.ListEntries.Availability); got != want {
			t.Fatalf("availability\n got %s\nwant %s", got, want)
		}
		req.ListEntriesLedgerID = 999
		if st := responseStatus(h.do(wire.ProtocolV3, req)); st != wire.StatusNoLedger {
			t.Fatalf("list entries of unknown ledger: %v", st)
		}
	})
}

func TestAvailabilityEncoder(t *testing.T) {
	for _, tc := range []struct {
		ids  []int64
		want [][4]int64 // first, last, size, period
	}{
		{nil, nil},
		{[]int64{5}, [][4]int64{{5, 5, 1, 0}}},
		{[]int64{0, 1, 2, 3}, [][4]int64{{0, 0, 4, 0}}},
		{[]int64{0, 2, 4, 7}, [][4]int64{{0, 4, 1, 2}, {7, 7, 1, 0}}},
		{[]int64{0, 1, 5, 6, 7}, [][4]int64{{0, 0, 2, 0}, {5, 5, 3, 0}}},
	} {
		var e availabilityEncoder
		for _, id := range tc.ids {
			e.add(id)
		}
		out := e.encode()
		if len(out) != 64+24*len(tc.want) {
			t.Fatalf("%v: %d bytes", tc.ids, len(out))
		}
		for i, g := range e.groups {
			if got := [4]int64{g.first, g.last, g.size, g.period}; got != tc.want[i] {
				t.Fatalf("%v: group %d = %v, want %v", tc.ids, i, got, tc.want[i])
			}
		}
	}
}

func TestAuthGolden(t *testing.T) {
	h := newHarness(t, newMemStore(), Config{})
	// spec §4: v3 reply for txnId 1.
	p := h.start(wire.ProtocolV3, wire.Request{Header: wire.Header{Op: wire.OpAuth, TxnID: 1}, Has: wire.BodyAuth,
		Auth: wire.AuthMessage{PluginName: "SASL", Payload: []byte("hello")}})
	if got, want := hex.EncodeToString(<-p.ch), "000000230a060803100518011000b206160a124175746844697361626c6564506c7567696e1200"; got != want {
		t.Fatalf("v3 AUTH reply\n got %s\nwant %s", got, want)
	}
	// spec §1: v2 reply.
	p = h.start(wire.ProtocolV2, wire.Request{Header: wire.Header{Op: wire.OpAuth}, Has: wire.BodyAuth,
		Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}})
	if got, want := hex.EncodeToString(<-p.ch), "0000001a020300000a124175746844697361626c6564506c7567696e1200"; got != want {
		t.Fatalf("v2 AUTH reply\n got %s\nwant %s", got, want)
	}
}

func TestStartTLSAndUnsupported(t *testing.T) {
	h := newHarness(t, newMemStore(), Config{})
	req := wire.Request{Header: wire.Header{Op: wire.OpStartTLS, TxnID: 9}, Has: wire.BodyStartTLS}
	resp := h.do(wire.ProtocolV3, req)
	if resp.Status != wire.StatusBadRequest || resp.Header.TxnID != 9 || resp.Header.Op != wire.OpStartTLS || resp.Has != 0 {
		t.Fatalf("START_TLS: %+v", resp)
	}
	for _, op := range []wire.Op{wire.OpRangeReadEntry, wire.OpRangeAddEntry} {
		resp := h.do(wire.ProtocolV3, wire.Request{Header: wire.Header{Op: op, TxnID: 11}})
		if resp.Status != wire.StatusBadRequest || resp.Header.TxnID != 11 || resp.Header.Op != op {
			t.Fatalf("%v: %+v", op, resp)
		}
	}
	// A v3 request without its sub-message.
	resp = h.do(wire.ProtocolV3, wire.Request{Header: wire.Header{Op: wire.OpReadEntry, TxnID: 12}})
	if resp.Status != wire.StatusBadRequest || resp.Header.TxnID != 12 {
		t.Fatalf("READ without readRequest: %+v", resp)
	}
	// An add whose body is too short for its ids.
	if st := responseStatus(h.do(wire.ProtocolV3, addRequest(1, 0, testKey, []byte{1, 2, 3}, false))); st != wire.StatusBadRequest {
		t.Fatalf("short add body: %v", st)
	}
}

func TestBadVersion(t *testing.T) {
	h := newHarness(t, newMemStore(), Config{})
	// v2: versions outside 0..2 get EBADVERSION with the version echoed.
	req := readRequest(3, 4)
	req.Header.Version = 7
	p := h.start(wire.ProtocolV2, req)
	frame := <-p.ch
	if got, want := hex.EncodeToString(frame), "00000018"+"07020000"+"00000067"+"0000000000000003"+"0000000000000004"; got != want {
		t.Fatalf("v2 bad version\n got %s\nwant %s", got, want)
	}
	// v3: header version other than THREE.
	req = readRequest(3, 4)
	req.Header.Version = wire.VersionTwo
	resp := h.do(wire.ProtocolV3, req)
	if resp.Status != wire.StatusBadVersion || resp.Read.Status != wire.StatusBadVersion || resp.Header.Version != wire.VersionThree {
		t.Fatalf("v3 bad version: %+v", resp)
	}
}

func TestGetBookieInfoAndForce(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		req := wire.Request{Header: wire.Header{Op: wire.OpGetBookieInfo}, Has: wire.BodyGetBookieInfo,
			GetBookieInfo: wire.GetBookieInfoRequest{Requested: 3, HasRequested: true}}
		resp := h.do(wire.ProtocolV3, req)
		switch st := responseStatus(resp); {
		case st == wire.StatusIOError && resp.GetBookieInfo == (wire.GetBookieInfoResponse{Status: wire.StatusIOError}):
			// pebble's MemFS has no disk usage: the store's error is EIO.
		case st != wire.StatusOK || !resp.GetBookieInfo.HasFreeDiskSpace || !resp.GetBookieInfo.HasTotalDiskCapacity ||
			resp.GetBookieInfo.TotalDiskCapacity < resp.GetBookieInfo.FreeDiskSpace:
			t.Fatalf("GET_BOOKIE_INFO: %v %+v", st, resp.GetBookieInfo)
		}
		h.mustAdd(wire.ProtocolV3, 5, 0, 0)
		req = wire.Request{Header: wire.Header{Op: wire.OpForceLedger}, Has: wire.BodyForceLedger, ForceLedgerID: 5}
		resp = h.do(wire.ProtocolV3, req)
		if st := responseStatus(resp); st != wire.StatusOK || resp.ForceLedger.LedgerID != 5 {
			t.Fatalf("FORCE_LEDGER: %v", st)
		}
	})
}

// Adds beyond MaxInFlight are refused with ETOOMANYREQUESTS at once.
func TestTooManyRequests(t *testing.T) {
	store := newMemStore()
	store.holdAdds = true
	h := newHarness(t, store, Config{MaxInFlight: 2})
	p1 := h.start(wire.ProtocolV3, addRequest(1, 0, testKey, h.entry(1, 0, -1, "x"), false))
	p2 := h.start(wire.ProtocolV3, addRequest(1, 1, testKey, h.entry(1, 1, -1, "x"), false))
	if st := responseStatus(h.do(wire.ProtocolV3, addRequest(1, 2, testKey, h.entry(1, 2, -1, "x"), false))); st != wire.StatusTooManyRequests {
		t.Fatalf("third add: %v, want ETOOMANYREQUESTS", st)
	}
	// Not acknowledged before the store says durable. Exact without
	// waiting: the bookie hands an add to the store on the caller's
	// goroutine, and the store holds its completion.
	if p1.answered() {
		t.Fatal("add answered before the store completed it")
	}
	store.release()
	for _, p := range []*pending{p1, p2} {
		if st := responseStatus(p.wait()); st != wire.StatusOK {
			t.Fatalf("held add: %v", st)
		}
	}
	if r, _ := h.b.InFlight(); r != 0 {
		t.Fatalf("%d requests still in flight", r)
	}
}

// nopStore completes adds inline: it isolates the bookie's own allocations.
type nopStore struct{ memStore }

func (s *nopStore) AddEntry(ledgerID, entryID int64, masterKey, body []byte, opts storage.AddOptions, done storage.AddCompletion) {
	done.AddComplete(nil)
}

type nopResponder struct{ n int }

func (r *nopResponder) Respond(*wire.Response) { r.n++ }

func TestAddAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	store := &nopStore{memStore: *newMemStore()}
	h := newHarness(t, store, Config{})
	for _, proto := range bothProtocols {
		req := encodeDecode(t, proto, &wire.Request{Header: wire.Header{Version: 3, Op: wire.OpAddEntry, TxnID: 1},
			Has: wire.BodyAdd, Add: wire.AddRequest{LedgerID: 1, EntryID: 0, MasterKey: testKey, Body: h.entry(1, 0, -1, strings.Repeat("x", 1024))}})
		if proto == wire.ProtocolV2 {
			req.Header.Version = 2
		}
		var r nopResponder
		allocs := testing.AllocsPerRun(1000, func() { h.b.Handle(req, &r) })
		if allocs > 0 {
			t.Errorf("%v: %.1f allocations per add in the bookie, want 0", proto, allocs)
		}
	}
}

// A bookie without a clock or a store is a configuration error, not a
// panic.
func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(newMemStore(), Config{}); err == nil || !strings.Contains(err.Error(), "Config.Clock") {
		t.Fatalf("New without a clock: %v, want an error naming Config.Clock", err)
	}
	if _, err := New(nil, Config{Clock: clock.NewManual(time.Unix(0, 0))}); err == nil {
		t.Fatal("New without a store: no error")
	}
}
