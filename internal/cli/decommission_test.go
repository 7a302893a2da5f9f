package cli_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// writeLedgers writes n closed ledgers (E=3, Qw=2, Qa=2) of entries
// entries each and returns their ends.
func writeLedgers(ctx context.Context, t *testing.T, c *client.Client, md metadata.Driver, n, entries int) map[int64]int64 {
	t.Helper()
	ends := map[int64]int64{}
	for range n {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(entries) {
			if _, err := w.Append(ctx, entryPayload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ends[w.ID()] = int64(entries - 1)
	}
	return ends
}

func entryPayload(id, e int64) []byte { return fmt.Appendf(nil, "ledger %d entry %d", id, e) }

// checkReplicated checks that no ensemble of the ledgers names gone, each
// ledger is closed at its end, and every entry is stored, verified, on each
// bookie of its write set.
func checkReplicated(ctx context.Context, t *testing.T, md metadata.Driver, ends map[int64]int64, gone metadata.BookieID) {
	t.Helper()
	for id, last := range ends {
		m, _, err := md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !m.IsClosed() || m.LastEntryID != last {
			t.Fatalf("ledger %d: state %v end %d, want closed at %d", id, m.State, m.LastEntryID, last)
		}
		for _, s := range m.Ensembles {
			if slices.Contains(s.Ensemble, gone) {
				t.Fatalf("ledger %d still names %s: %v", id, gone, m.Ensembles)
			}
		}
		testcluster.CheckStored(ctx, t, md, id, []byte("pw"), func(e int64) []byte { return entryPayload(id, e) })
	}
}

// #22: decommissionbookie refuses while the bookie is registered (and
// without an auditor); once it is stopped and AutoRecovery runs, it returns
// when no ledger references the bookie, and its cookie is gone.
func TestDecommissionBookie(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeLedgers(ctx, t, c, cl.MD, 12, 15)
	victim := cl.Bookies[1]

	code, _, errOut := shell(t, cl.URI, "decommissionbookie", "--bookie-id", victim.Addr())
	if code != 1 || !strings.Contains(errOut, "still registered") {
		t.Fatalf("decommission of a registered bookie: exit %d, %q", code, errOut)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, victim.ID); err != nil {
		t.Fatalf("cookie after refusal: %v", err)
	}
	victim.Kill()
	victim.WaitUnregistered()
	// Disable AutoRecovery so that nothing moves before decommission asks.
	mustShell(t, cl.URI, "autorecovery", "--disable")
	if code, _, errOut := shell(t, cl.URI, "decommissionbookie", "--bookie-id", victim.Addr()); code != 1 || !strings.Contains(errOut, "disabled") {
		t.Fatalf("decommission while AutoRecovery is disabled: exit %d, %q", code, errOut)
	}
	mustShell(t, cl.URI, "autorecovery", "--enable")
	if code, _, errOut := shell(t, cl.URI, "decommissionbookie", "--bookie-id", victim.Addr()); code != 1 || !strings.Contains(errOut, "no auditor") {
		t.Fatalf("decommission without an auditor: exit %d, %q", code, errOut)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, victim.ID); err != nil {
		t.Fatalf("cookie after refusals: %v", err)
	}

	cl.StartAutoRecovery("127.0.0.1:1", "--workers", "2")
	for {
		if code, _, _ := shell(t, cl.URI, "whoisauditor"); code == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no auditor elected")
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	out := mustShell(t, cl.URI, "decommissionbookie", "--bookie-id", victim.Addr(), "--poll-interval", "200ms")
	if !strings.Contains(out, "decommissioned "+victim.Addr()) {
		t.Fatalf("decommission output: %q", out)
	}
	t.Logf("decommissioned in %v", time.Since(start))
	if ids, err := admin.LedgersOnBookie(ctx, cl.MD, victim.ID, true); err != nil || len(ids) != 0 {
		t.Fatalf("ledgers still naming %s: %v %v", victim.ID, ids, err)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, victim.ID); !errors.Is(err, metadata.ErrNoSuchCookie) {
		t.Fatalf("cookie after decommission: %v, want none", err)
	}
	checkReplicated(ctx, t, cl.MD, ends, victim.ID)
}

// `folio shell recover <bookie-id>` moves a dead bookie's data to the
// others without AutoRecovery: closed ledgers are copied, an open ledger is
// fenced and closed first (its writer is fenced); piped output shows no
// progress.
func TestRecoverBookieCommand(t *testing.T) {
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
	ends := writeLedgers(ctx, t, c, cl.MD, 8, 12)
	// An open ledger, its writer alive and idle.
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	for e := range int64(5) {
		if _, err := w.Append(ctx, entryPayload(w.ID(), e)); err != nil {
			t.Fatal(err)
		}
	}
	m, _, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	var victim *testcluster.Bookie
	for _, b := range cl.Bookies {
		if b.ID == m.Ensembles[0].Ensemble[0] {
			victim = b
		}
	}
	victim.Kill()
	victim.WaitUnregistered()

	start := time.Now()
	code, out, errOut := shell(t, cl.URI, "recover", victim.Addr(), "-o", "json")
	if code != 0 {
		t.Fatalf("recover: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("recovered in %v", time.Since(start))
	if strings.Contains(errOut, "\r") || strings.Contains(errOut, "recovering:") {
		t.Fatalf("progress printed while piped: %q", errOut)
	}
	var view struct {
		LedgersRecovered int
		EntriesCopied    int
		Failed           []string
	}
	mustJSON(t, out, &view)
	want := len(ends) + 1 // with the open ledger
	if len(view.Failed) != 0 || view.EntriesCopied == 0 {
		t.Fatalf("recover result: %s", out)
	}
	// Ledgers not naming the victim are not counted; at least the open one is.
	if view.LedgersRecovered == 0 || view.LedgersRecovered > want {
		t.Fatalf("recovered %d ledgers, want 1..%d: %s", view.LedgersRecovered, want, out)
	}
	ends[w.ID()] = 4
	checkReplicated(ctx, t, cl.MD, ends, victim.ID)
	if _, err := w.Append(ctx, []byte("late")); !errors.Is(err, client.ErrLedgerFenced) && !errors.Is(err, client.ErrLedgerClosed) {
		t.Fatalf("append after recover: %v, want fenced", err)
	}
	// Running it again finds nothing to do.
	mustJSON(t, mustShell(t, cl.URI, "recover", victim.Addr(), "-o", "json"), &view)
	if view.LedgersRecovered != 0 || view.EntriesCopied != 0 {
		t.Fatalf("second recover: %+v", view)
	}
}
