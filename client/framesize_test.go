package client_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/wire"
)

// TestLargeEntriesWithRaisedFrameLimit: Pulsar's configurations raise
// nettyMaxFrameSizeBytes to 5253120 on bookies and clients so that a 5 MiB
// message plus its headers fits one entry. Bookie processes configured so
// and a client with the same MaxFrameSize write and read back such an
// entry, in v2 and v3; a client with the default limit refuses the append
// before sending it (ErrEntryTooLarge; the ledger goes on, with no
// ensemble change), and an invalid limit is a configuration error.
func TestLargeEntriesWithRaisedFrameLimit(t *testing.T) {
	const pulsarFrame = 5253120
	cl := testcluster.Start(t, 3, testcluster.WithSettings("nettyMaxFrameSizeBytes=5253120"))
	ctx := testCtx(t)
	payload := bytes.Repeat([]byte("pulsar-batch|"), 5245000/13) // over 5 MiB of payload
	if len(payload) <= wire.MaxFrameSize-4096 || len(payload) >= pulsarFrame-1024 {
		t.Fatalf("payload of %d bytes is not between the two limits", len(payload))
	}
	for _, v2 := range []bool{false, true} {
		c := newClient(t, cl, func(cfg *client.Config) { cfg.MaxFrameSize = pulsarFrame; cfg.UseV2WireProtocol = v2 })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, []byte("small")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, payload); err != nil {
			t.Fatalf("v2=%v: append of %d bytes with a raised frame limit: %v", v2, len(payload), err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Read(ctx, 1, 1)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0].Payload, payload) {
			t.Fatalf("v2=%v: read back the large entry: %v", v2, err)
		}
		r.Close()

		// The default limit: refused before sending; the ledger goes on.
		d := newClient(t, cl, func(cfg *client.Config) { cfg.UseV2WireProtocol = v2 })
		w2, err := d.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w2.Append(ctx, payload); !errors.Is(err, client.ErrEntryTooLarge) || client.Code(err) != -100 {
			t.Fatalf("v2=%v: append over the default frame limit: %v, want ErrEntryTooLarge", v2, err)
		}
		// Nothing was sent and nothing failed: the ledger takes entries,
		// on its first ensemble.
		if id, err := w2.Append(ctx, []byte("after")); err != nil || id != 0 {
			t.Fatalf("v2=%v: append after the refused one: %d %v", v2, id, err)
		}
		if md, _, err := cl.MD.ReadLedger(ctx, w2.ID()); err != nil || len(md.Ensembles) != 1 {
			t.Fatalf("v2=%v: ensembles after a refused append: %+v %v, want the first only", v2, md, err)
		}
	}
	if _, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, MaxFrameSize: 1000}); !errors.Is(err, client.ErrInvalidConfig) {
		t.Errorf("MaxFrameSize 1000: %v, want ErrInvalidConfig", err)
	}
	if err := (client.Config{MetadataServiceURI: cl.URI, MaxFrameSize: 1000}).Validate(); !errors.Is(err, client.ErrInvalidConfig) {
		t.Errorf("Validate with MaxFrameSize 1000: %v, want ErrInvalidConfig", err)
	}
	if err := (client.Config{MetadataServiceURI: cl.URI}).Validate(); err != nil {
		t.Errorf("Validate of a good configuration: %v", err)
	}
}
