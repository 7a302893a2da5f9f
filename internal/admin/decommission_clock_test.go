package admin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
)

// TestDecommissionWaitsOnClock: DecommissionBookie's initial wait and its
// pauses between checks are timed on DecommissionOptions.Clock: with a
// manual clock, each check comes when the clock reaches it, and not a
// nanosecond before; the cookie is deleted once no ledger stores entries
// on the bookie.
func TestDecommissionWaitsOnClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md := memory.NewStore(memory.Options{}).Open()
	defer md.Close()
	s, err := md.OpenSession(ctx, metadata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := md.CampaignAuditor(ctx, s, "10.0.0.2:3181"); err != nil {
		t.Fatal(err)
	}
	m := metadatatest.NewLedgerMetadata(1, 1, 1) // on 10.0.0.1:3181 alone
	m.State, m.LastEntryID, m.Length = metadata.LedgerClosed, 3, 40
	id, _, err := md.CreateLedger(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	const gone = metadata.BookieID("10.0.0.1:3181")
	if _, err := md.WriteCookie(ctx, gone, []byte("cookie"), metadata.VersionNew); err != nil {
		t.Fatal(err)
	}

	clk := clock.NewManual(time.Unix(1000, 0))
	checks := make(chan int, 4) // ledgers still on the bookie, per check
	done := make(chan error, 1)
	go func() {
		done <- DecommissionBookie(ctx, md, gone, DecommissionOptions{InitialWait: time.Hour, PollInterval: time.Minute,
			Clock: clk, Progress: func(ledgers, _ int) { checks <- ledgers }})
	}()
	step := func(wait time.Duration, want int) {
		t.Helper()
		waitArmed(t, clk)
		clk.Advance(wait - time.Nanosecond)
		select {
		case n := <-checks:
			t.Fatalf("checked (%d ledgers) before the %v wait passed", n, wait)
		default:
		}
		clk.Advance(time.Nanosecond)
		select {
		case n := <-checks:
			if n != want {
				t.Fatalf("check after %v: %d ledgers on the bookie, want %d", wait, n, want)
			}
		case <-ctx.Done():
			t.Fatalf("no check after the %v wait passed", wait)
		}
	}
	step(time.Hour, 1)
	if err := md.DeleteLedger(ctx, id, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	step(time.Minute, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, err := md.ReadCookie(ctx, gone); !errors.Is(err, metadata.ErrNoSuchCookie) {
		t.Fatalf("cookie after the decommission: %v, want ErrNoSuchCookie", err)
	}
}

// waitArmed polls until one timer is armed on clk (the wait the code under
// test sleeps on), or fails after 10 s.
func waitArmed(t *testing.T, clk *clock.Manual) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers armed on the clock, want 1", clk.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
}
