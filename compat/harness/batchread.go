package harness

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// folioBatchReads writes a ledger of E = Qw = 3 with the Folio client on
// e's bookies and reads it back with BatchRead: over v2 one
// BATCH_READ_ENTRY per call (a Java 4.17 bookie serves it), over v3 single
// reads. Each call returns entries consecutive from its first, at least
// one, never past the LAC.
func folioBatchReads(t *testing.T, e interopEnv, seed int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 30
	w, err := e.fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte(password)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(n) {
		if _, err := w.Append(ctx, payload(seed, i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A reader whose log shows whether a batch read fell back to single
	// reads: over v2 a Java 4.17 bookie must serve them.
	logs := &fallbackLog{}
	rc, err := client.New(ctx, client.Config{MetadataServiceURI: e.uri, UseV2WireProtocol: e.mode == "v2",
		Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := rc.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte(password)})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for next := int64(0); next < n; calls++ {
		es, err := r.BatchRead(ctx, next, 7, 0)
		if err != nil {
			t.Fatalf("%s: BatchRead(%d, 7): %v", e.mode, next, err)
		}
		if len(es) == 0 || len(es) > 7 {
			t.Fatalf("%s: BatchRead(%d, 7) returned %d entries", e.mode, next, len(es))
		}
		for _, en := range es {
			if en.ID != next || !bytes.Equal(en.Payload, payload(seed, en.ID)) {
				t.Fatalf("%s: entry %d (expected %d) differs", e.mode, en.ID, next)
			}
			next++
		}
	}
	if calls != (n+6)/7 {
		t.Errorf("%s: %d calls to read %d entries 7 at a time", e.mode, calls, n)
	}
	if es, err := r.BatchRead(ctx, n-2, 100, 0); err != nil || len(es) != 2 {
		t.Fatalf("%s: BatchRead past the end: %d entries, %v; want the last 2", e.mode, len(es), err)
	}
	if n := logs.fallbacks.Load(); n != 0 {
		t.Fatalf("%s: %d batch reads fell back to single reads", e.mode, n)
	}
}

// fallbackLog is a slog.Handler counting the client's "reading single
// entries" fallback messages.
type fallbackLog struct{ fallbacks atomic.Int64 }

func (l *fallbackLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *fallbackLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "reading single entries") {
		l.fallbacks.Add(1)
	}
	return nil
}
func (l *fallbackLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *fallbackLog) WithGroup(string) slog.Handler      { return l }
