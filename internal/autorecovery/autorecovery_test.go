package autorecovery_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/testcluster"
)

func payload(id, e int64) []byte { return fmt.Appendf(nil, "ledger %d entry %d", id, e) }

// startAutoRecovery runs an auditor and n workers in this process until the
// test ends.
func startAutoRecovery(t *testing.T, cl *testcluster.Cluster, n int, grace time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, n+1)
	t.Cleanup(func() {
		cancel()
		for range n + 1 {
			<-done
		}
	})
	md := func() metadata.Driver {
		d, err := metadata.Open(ctx, cl.URI, metadata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	a, err := autorecovery.NewAuditor(autorecovery.AuditorConfig{Driver: md(), ID: "127.0.0.1:1", SessionTTL: 2 * time.Second, RetryInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { a.Run(ctx); done <- struct{}{} }()
	for i := range n {
		c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, ReadEntryTimeout: 2 * time.Second, AddEntryTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bks := rereplication.NewBookies(2*time.Second, nil)
		t.Cleanup(func() { bks.Close() })
		w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{
			Driver: md(), Client: c, Bookies: bks, ID: metadata.BookieID(fmt.Sprintf("127.0.0.1:%d", 100+i)),
			SessionTTL: 2 * time.Second, PollInterval: 100 * time.Millisecond, FailureBackoff: 500 * time.Millisecond,
			OpenLedgerRereplicationGracePeriod: grace,
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.Run(ctx); done <- struct{}{} }()
	}
}

// #19: 5 bookies, 50 closed ledgers (E=3, Qw=2, Qa=2), one bookie killed
// for good: within a bounded time no ledger references it, nothing is
// under-replicated, every entry is on Qw bookies, ends unchanged.
func TestClosedLedgersReReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pw := []byte("pw")
	const ledgers, entries = 50, 20
	type end struct{ last, length int64 }
	ends := map[int64]end{}
	for range ledgers {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(entries) {
			if _, err := w.Append(ctx, payload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		m, _, err := cl.MD.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		ends[w.ID()] = end{m.LastEntryID, m.Length}
	}

	dead := cl.Bookies[2]
	dead.Kill()
	dead.WaitUnregistered()
	start := time.Now()
	startAutoRecovery(t, cl, 2, time.Second)

	ar := cl.MD.(metadata.AutoRecoveryDriver)
	for {
		refs := 0
		for id := range ends {
			m, _, err := cl.MD.ReadLedger(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range m.Ensembles {
				if slices.Contains(s.Ensemble, dead.ID) {
					refs++
				}
			}
		}
		ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if refs == 0 && len(ur) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %v: %d segments still reference %s, %d ledgers under-replicated", time.Since(start), refs, dead.ID, len(ur))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("re-replicated %d ledgers off %s in %v", ledgers, dead.ID, time.Since(start))

	for id, want := range ends {
		m, _, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !m.IsClosed() || m.LastEntryID != want.last || m.Length != want.length {
			t.Fatalf("ledger %d: state %v end %d length %d, want closed at %d, %d", id, m.State, m.LastEntryID, m.Length, want.last, want.length)
		}
		testcluster.CheckStored(ctx, t, cl.MD, id, pw, func(e int64) []byte { return payload(id, e) })
	}
}

// #20: an idle OPEN ledger whose writer is alive but silent loses a bookie of
// its ensemble: after the grace period it is fenced and closed at ≥ its last
// acknowledged entry and re-replicated; the writer's next add fails.
func TestIdleOpenLedgerFencedAndReReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, AddEntryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	for e := range int64(10) {
		if _, err := w.Append(ctx, payload(w.ID(), e)); err != nil {
			t.Fatal(err)
		}
	}
	m, _, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	var dead *testcluster.Bookie
	for _, b := range cl.Bookies {
		if b.ID == m.Ensembles[0].Ensemble[1] {
			dead = b
		}
	}
	dead.Kill()
	dead.WaitUnregistered()
	const grace = 2 * time.Second
	start := time.Now()
	startAutoRecovery(t, cl, 1, grace)
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	for {
		m, _, err = cl.MD.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		refs := slices.ContainsFunc(m.Ensembles, func(s metadata.Segment) bool { return slices.Contains(s.Ensemble, dead.ID) })
		ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if m.IsClosed() && !refs && len(ur) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %v: state %v, references dead bookie %v, %d under-replicated", time.Since(start), m.State, refs, len(ur))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("fenced, closed and re-replicated in %v", took)
	if took < grace {
		t.Fatalf("closed after %v, before the %v grace period", took, grace)
	}
	if m.LastEntryID < 9 {
		t.Fatalf("closed at %d, below the last acknowledged entry 9", m.LastEntryID)
	}
	_, err = w.Append(ctx, []byte("late"))
	if !errors.Is(err, client.ErrLedgerFenced) && !errors.Is(err, client.ErrLedgerClosed) {
		t.Fatalf("append after recovery: %v, want fenced or closed", err)
	}
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, 0, m.LastEntryID)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if !bytes.Equal(e.Payload, payload(w.ID(), int64(i))) {
			t.Fatalf("entry %d differs", i)
		}
	}
}
