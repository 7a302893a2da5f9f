package transport

import (
	"errors"
	"testing"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/wire"
)

// batchCall sends a BATCH_READ_ENTRY of ledger 1 from entry 0 and waits
// for its answer: the entries, the status, or the error.
func batchCall(t *testing.T, tr *Transport, addr string) ([][]byte, wire.Status, error) {
	t.Helper()
	type answer struct {
		entries [][]byte
		status  wire.Status
		err     error
	}
	ch := make(chan answer, 1)
	req := &wire.Request{Header: wire.Header{Op: wire.OpBatchReadEntry}, Has: wire.BodyBatchRead,
		BatchRead: wire.BatchReadRequest{LedgerID: 1, StartEntryID: 0, MaxCount: 10, MaxSize: 1 << 20}}
	tr.Send(addr, 1, req, func(resp *wire.Response, err error) {
		if err != nil {
			ch <- answer{err: err}
			return
		}
		st := resp.Status
		if st == wire.StatusOK {
			st = resp.BatchRead.Status
		}
		var es [][]byte
		for _, e := range resp.BatchRead.Entries {
			es = append(es, append([]byte(nil), e...))
		}
		ch <- answer{es, st, nil}
	})
	a := <-ch
	return a.entries, a.status, a.err
}

func v2Transport(t *testing.T) *Transport {
	t.Helper()
	tr, err := New(Config{Protocol: wire.ProtocolV2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// A real Folio bookie serves batch reads over v2.
func TestBatchReadServed(t *testing.T) {
	rb := startRealBookie(t, server.Options{})
	tr := v2Transport(t)
	for e := range int64(3) {
		if st, err := call(t, tr, rb.addr, tlsAdd(1, e)); err != nil || st != wire.StatusOK {
			t.Fatalf("add %d: %v %v", e, st, err)
		}
	}
	es, st, err := batchCall(t, tr, rb.addr)
	if err != nil || st != wire.StatusOK || len(es) != 3 {
		t.Fatalf("batch read: %d entries, %v, %v", len(es), st, err)
	}
}

// A bookie that answers EBADREQ to a batch read: later batch reads on the
// same connection fail at once without reaching it (matching
// wire.ErrBadRequest), other requests still go; a new connection asks
// again.
func TestBatchReadRefusedOncePerConnection(t *testing.T) {
	rb := startRealBookieWith(t, server.Options{}, func(c *bookie.Config) { c.RejectBatchRead = true })
	tr := v2Transport(t)
	if st, err := call(t, tr, rb.addr, tlsAdd(1, 0)); err != nil || st != wire.StatusOK {
		t.Fatalf("add: %v %v", st, err)
	}
	if _, st, err := batchCall(t, tr, rb.addr); err != nil || st != wire.StatusBadRequest {
		t.Fatalf("first batch read: %v, %v; want EBADREQ from the bookie", st, err)
	}
	served := rb.served.Load()
	_, _, err := batchCall(t, tr, rb.addr)
	if !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("second batch read: %v, want a local EBADREQ", err)
	}
	if n := rb.served.Load(); n != served {
		t.Fatalf("the bookie served %d more requests: the refused batch read was sent", n-served)
	}
	read := &wire.Request{Header: wire.Header{Op: wire.OpReadEntry}, Has: wire.BodyRead, Read: wire.ReadRequest{LedgerID: 1, EntryID: 0}}
	if st, err := call(t, tr, rb.addr, read); err != nil || st != wire.StatusOK {
		t.Fatalf("single read on the same connection: %v %v", st, err)
	}
	// Another transport's connection asks the bookie again.
	if _, st, err := batchCall(t, v2Transport(t), rb.addr); err != nil || st != wire.StatusBadRequest {
		t.Fatalf("batch read on a new connection: %v, %v", st, err)
	}
}
