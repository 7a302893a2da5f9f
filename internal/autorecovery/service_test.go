package autorecovery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/metadata"
)

// A Service runs an auditor candidate and its workers under one id until
// Stop: it is elected, its workers clear records, Stop resigns and is
// idempotent; Workers < 0 runs the candidate only.
func TestServiceStartStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, _ := newMemorySessionStore(t)
	registerFakeBookies(ctx, t, st.md, 3)
	ledgers := createFakeLedgers(ctx, t, st.md, 2)
	ar := st.md.(metadata.AutoRecoveryDriver)

	if _, err := autorecovery.StartService(ctx, autorecovery.ServiceConfig{MetadataServiceURI: st.uri, ID: "127.0.0.1:1"}); err == nil {
		t.Fatal("started without a Driver")
	}
	const id = metadata.BookieID("127.0.0.1:1")
	svc, err := autorecovery.StartService(ctx, autorecovery.ServiceConfig{
		Driver: st.open(id), MetadataServiceURI: st.uri, ID: id, Workers: 2,
		// No ledger check: it would run at once (no time stored) and find
		// the fake bookies' copies bad.
		Auditor: autorecovery.AuditorConfig{BookieCheckInterval: -1, LedgerCheckInterval: -1, ID: "ignored"},
		Worker:  autorecovery.WorkerConfig{PollInterval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if svc.ID() != id || svc.Workers() != 2 {
		t.Fatalf("ID %s workers %d", svc.ID(), svc.Workers())
	}
	eventually(ctx, t, "the service elected", func() bool {
		a, err := ar.Auditor(ctx)
		return err == nil && a == id
	})
	// Nothing is lost: the workers clear the records.
	for _, l := range ledgers {
		if err := ar.MarkLedgerUnderReplicated(ctx, l, []metadata.BookieID{"10.0.0.9:3181"}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(ctx, t, "the records cleared", func() bool { return len(underReplicated(ctx, t, st.md)) == 0 })
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.Auditor(ctx); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("auditor after Stop: %v, want none", err)
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	select {
	case err := <-svc.Failed():
		t.Fatalf("Failed after a clean Stop: %v", err)
	default:
	}

	only, err := autorecovery.StartService(ctx, autorecovery.ServiceConfig{Driver: st.open("127.0.0.1:2"), MetadataServiceURI: st.uri,
		ID: "127.0.0.1:2", Workers: -1, Auditor: autorecovery.AuditorConfig{LedgerCheckInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer only.Stop(ctx)
	if only.Workers() != 0 {
		t.Fatalf("Workers -1: %d workers", only.Workers())
	}
}
