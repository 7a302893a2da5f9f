package testcluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
)

// TestLedgerHistory: every value of the key from its creation, in order,
// with its version, and none written after the call; a compacted history is
// ErrHistoryCompacted, not a shorter history.
func TestLedgerHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	md, err := metadata.Open(ctx, etcdtest.URI(srv, etcdtest.Scope(t)), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	d := md.(*etcd.Driver)
	const id = 7
	m := &metadata.LedgerMetadata{
		EnsembleSize: 1, WriteQuorum: 1, AckQuorum: 1,
		State: metadata.LedgerOpen, LastEntryID: -1, Ctime: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"127.0.0.1:3181"}}},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte("pw"),
	}
	// Another ledger's writes interleave: they are not in ledger 7's history.
	if _, err := d.CreateLedgerMetadata(ctx, id+1, m); err != nil {
		t.Fatal(err)
	}
	var want []LedgerVersion
	v, err := d.CreateLedgerMetadata(ctx, id, m)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, LedgerVersion{v, m.Clone()})
	for _, st := range []metadata.LedgerState{metadata.LedgerInRecovery, metadata.LedgerClosed} {
		if _, _, err := d.ReadLedger(ctx, id+1); err != nil {
			t.Fatal(err)
		}
		m.State = st
		if st == metadata.LedgerClosed {
			m.LastEntryID, m.Length = 41, 420
		}
		if v, err = d.WriteLedger(ctx, id, m, v); err != nil {
			t.Fatal(err)
		}
		want = append(want, LedgerVersion{v, m.Clone()})
	}
	got, err := ledgerHistory(ctx, d, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("history %s, want %s", FormatHistory(got), FormatHistory(want))
	}
	for i := range want {
		if got[i].Version != want[i].Version || !got[i].Metadata.Equal(want[i].Metadata) {
			t.Fatalf("version %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if s, w := FormatHistory(got), fmt.Sprintf("OPEN@%d IN_RECOVERY@%d CLOSED@%d(end 41)", want[0].Version, want[1].Version, want[2].Version); s != w {
		t.Fatalf("FormatHistory: %q, want %q", s, w)
	}

	// Compact past the creation: the history is gone, and said so.
	if _, err := d.Client().Compact(ctx, int64(want[1].Version)); err != nil {
		t.Fatal(err)
	}
	h, err := ledgerHistory(ctx, d, id)
	if !errors.Is(err, ErrHistoryCompacted) {
		t.Fatalf("after compaction: %s, %v; want ErrHistoryCompacted", FormatHistory(h), err)
	}
	t.Log(err)
}
