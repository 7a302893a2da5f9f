package foliotest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
)

// TestMain: a closed cluster leaves no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStart: a cluster of one bookie takes a ledger of ensemble 1, and the
// ledger reads back; a second cluster in the same test is independent.
func TestStart(t *testing.T) {
	ctx := context.Background()
	uri := foliotest.Start(t, foliotest.Bookies(1))
	other := foliotest.Start(t, foliotest.Bookies(1))
	if uri == other || !strings.HasPrefix(uri, "etcd://127.0.0.1:") {
		t.Fatalf("cluster URIs %q and %q: want two distinct etcd://127.0.0.1:<port> URIs", uri, other)
	}
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	password := []byte("p")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := w.Append(ctx, fmt.Appendf(nil, "entry %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A bookie too few for the default ensemble of 3.
	if _, err := c.CreateLedger(ctx, client.LedgerOptions{Password: password}); !errors.Is(err, client.ErrNotEnoughBookies) {
		t.Errorf("ensemble of 3 on one bookie: %v, want ErrNotEnoughBookies", err)
	}
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: password})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	entries, err := r.Read(ctx, 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if want := fmt.Sprintf("entry %d", i); string(e.Payload) != want {
			t.Errorf("entry %d: %q, want %q", i, e.Payload, want)
		}
	}
}

// TestCloseTwice: Close is idempotent.
func TestCloseTwice(t *testing.T) {
	cl, err := foliotest.New(foliotest.Bookies(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestBadBookies: a cluster without bookies is refused before anything
// starts.
func TestBadBookies(t *testing.T) {
	if _, err := foliotest.New(foliotest.Bookies(0)); err == nil || !strings.Contains(err.Error(), "Bookies(0)") {
		t.Errorf("Bookies(0): %v, want an error naming the option", err)
	}
}
