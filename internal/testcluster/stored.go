package testcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// CheckStored fails t unless every entry 0..LastEntryID of ledger id (as
// its metadata in md says now) is stored on each bookie of its write set,
// read from that bookie alone, with a valid digest under password and the
// payload want(e). It is how re-replication tests prove that no copy is
// missing, not merely that a quorum read succeeds.
func CheckStored(ctx context.Context, t testing.TB, md metadata.LedgerManager, id int64, password []byte, want func(e int64) []byte) {
	t.Helper()
	CheckStoredTLS(ctx, t, md, id, password, want, nil)
}

// CheckStoredTLS is CheckStored over bookie connections secured with
// tlsConfig (nil: plaintext).
func CheckStoredTLS(ctx context.Context, t testing.TB, md metadata.LedgerManager, id int64, password []byte, want func(e int64) []byte, tlsConfig *tls.Config) {
	t.Helper()
	m, _, err := md.ReadLedger(ctx, id)
	if err != nil {
		t.Fatalf("testcluster: ledger %d: %v", id, err)
	}
	dig, err := digest.New(digest.Type(m.DigestType), password)
	if err != nil {
		t.Fatalf("testcluster: ledger %d: %v", id, err)
	}
	bks := rereplication.NewBookiesTLS(5*time.Second, nil, tlsConfig)
	defer bks.Close()
	if reg, ok := md.(metadata.Registration); ok {
		bks.ResolveWith(reg) // custom bookie ids (WithCustomBookieIDs)
	}
	p := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}
	for e := int64(0); e <= m.LastEntryID; e++ {
		ensemble := m.EnsembleAt(e)
		for _, i := range p.WriteSet(e) {
			b := ensemble[i]
			body, err := bks.ReadStoredEntry(ctx, b, id, e)
			if err != nil {
				t.Fatalf("testcluster: ledger %d entry %d on %s: %v", id, e, b, err)
			}
			got, err := dig.VerifyEntry(body, id, e)
			if err != nil {
				t.Fatalf("testcluster: ledger %d entry %d on %s: %v", id, e, b, err)
			}
			if w := want(e); !bytes.Equal(got.Payload, w) {
				t.Fatalf("testcluster: ledger %d entry %d on %s: %d bytes differ from the %d written", id, e, b, len(got.Payload), len(w))
			}
		}
	}
}
