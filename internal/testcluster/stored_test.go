package testcluster

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// failureOf runs check with a testing.TB whose Fatalf records the message
// and ends the goroutine, and returns that message ("" if check passed).
func failureOf(t *testing.T, check func(tb testing.TB)) string {
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec.msg
}

type recordingTB struct {
	testing.TB
	msg string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestCheckStored: a ledger written by the client passes; a wrong expected
// payload and a stopped bookie of the write sets each fail, naming the
// ledger, entry and bookie.
func TestCheckStored(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pw := []byte("pw")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	want := func(e int64) []byte { return fmt.Appendf(nil, "entry %d", e) }
	for e := range int64(6) {
		if _, err := w.Append(ctx, want(e)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	id := w.ID()

	if msg := failureOf(t, func(tb testing.TB) { CheckStored(ctx, tb, cl.MD, id, pw, want) }); msg != "" {
		t.Fatalf("intact ledger: %s", msg)
	}
	wrong := func(e int64) []byte {
		if e == 5 {
			return []byte("something else")
		}
		return want(e)
	}
	if msg := failureOf(t, func(tb testing.TB) { CheckStored(ctx, tb, cl.MD, id, pw, wrong) }); !strings.Contains(msg, "entry 5") {
		t.Fatalf("wrong payload of entry 5: failure %q", msg)
	}
	cl.Bookies[0].Kill()
	msg := failureOf(t, func(tb testing.TB) { CheckStored(ctx, tb, cl.MD, id, pw, want) })
	if !strings.Contains(msg, string(cl.Bookies[0].ID)) {
		t.Fatalf("with bookie %s stopped: failure %q", cl.Bookies[0].ID, msg)
	}
}
