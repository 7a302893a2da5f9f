package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
)

// recorder is a Metrics that keeps what it was given.
type recorder struct {
	mu          sync.Mutex
	ops         map[client.Op][2]int // by outcome: 0 failed, 1 succeeded
	entriesRead int
}

func (r *recorder) Operation(op client.Op, latency time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if latency < 0 {
		panic("negative latency")
	}
	n := r.ops[op]
	if err == nil {
		n[1]++
	} else {
		n[0]++
	}
	r.ops[op] = n
}

func (r *recorder) EntriesRead(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entriesRead += n
}

// TestConfigMetrics: the client records each operation, with its outcome,
// and the entries read into Config.Metrics; without one it records into
// NopMetrics.
func TestConfigMetrics(t *testing.T) {
	ctx := context.Background()
	uri := foliotest.Start(t)
	rec := &recorder{ops: map[client.Op][2]int{}}
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Metrics() != client.Metrics(rec) {
		t.Errorf("Metrics() = %v, want the configured one", c.Metrics())
	}
	password := []byte("p")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: password})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := w.Append(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: password})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenLedger(ctx, w.ID()+1000, client.OpenOptions{Password: password}); !errors.Is(err, client.ErrNoSuchLedger) {
		t.Fatalf("open of a missing ledger: %v", err)
	}
	if err := c.DeleteLedger(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for op, want := range map[client.Op][2]int{
		client.OpLedgerCreate: {0, 1}, client.OpAddEntry: {0, 3}, client.OpLedgerOpen: {1, 1},
		client.OpReadEntry: {0, 1}, client.OpLedgerDelete: {0, 1},
	} {
		if got := rec.ops[op]; got != want {
			t.Errorf("%v: %d failed, %d succeeded; want %d, %d", op, got[0], got[1], want[0], want[1])
		}
	}
	if rec.entriesRead != 3 {
		t.Errorf("entries read: %d, want 3", rec.entriesRead)
	}

	plain, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.Metrics().(client.NopMetrics); !ok {
		t.Errorf("Metrics() without Config.Metrics = %T, want NopMetrics", plain.Metrics())
	}
}

// TestOpNames: Op's String is BookKeeper's stat name.
func TestOpNames(t *testing.T) {
	for op, want := range map[client.Op]string{
		client.OpAddEntry: "ADD_ENTRY", client.OpReadEntry: "READ_ENTRY", client.OpLedgerCreate: "LEDGER_CREATE",
		client.OpLedgerOpen: "LEDGER_OPEN", client.OpLedgerDelete: "LEDGER_DELETE", client.Op(7): "Op(7)",
	} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", int(op), got, want)
		}
	}
}
