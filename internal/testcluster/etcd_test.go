package testcluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
)

// TestEtcdClusterKillLeader: the members are processes; after the leader
// is SIGKILLed the others elect another one, a driver on the
// multi-endpoint URI keeps reading and writing, and the killed member
// restarted on its data catches up with what was written meanwhile.
func TestEtcdClusterKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	start := time.Now()
	ec := StartEtcdCluster(t, EtcdOptions{})
	t.Logf("3 members up in %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	md, err := metadata.Open(ctx, ec.URI(etcdtest.Scope(t)), metadata.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	old := ec.Leader()
	old.Kill()
	killed := time.Now()
	id, _, err := md.CreateLedger(ctx, testMetadata())
	if err != nil {
		t.Fatalf("create ledger after the leader's death: %v", err)
	}
	now := ec.Leader()
	t.Logf("leader %s killed; %s leads; a create succeeded %v after the kill", old.Name, now.Name, time.Since(killed).Round(time.Millisecond))
	if now == old {
		t.Fatalf("the killed member %s still leads", old.Name)
	}
	old.Start()
	old.WaitReady()
	only, err := metadata.Open(ctx, "etcd://"+old.Addr()+md.(interface{ Scope() string }).Scope(), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if _, _, err := only.ReadLedger(ctx, id); err != nil {
		t.Fatalf("the restarted member does not serve the ledger created while it was dead: %v", err)
	}
}

func testMetadata() *metadata.LedgerMetadata {
	return &metadata.LedgerMetadata{
		EnsembleSize: 1, WriteQuorum: 1, AckQuorum: 1,
		State: metadata.LedgerOpen, LastEntryID: -1, Ctime: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"127.0.0.1:3181"}}},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte("pw"),
	}
}

// testLogger logs through t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
