package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// closeWatch is a metadata driver that records ledger operations made
// after its Close: the fault of a client that uses its driver after
// Client.Close released it.
type closeWatch struct {
	metadata.Driver
	mu     sync.Mutex
	closed bool
	late   []string
}

func (d *closeWatch) use(op string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.late = append(d.late, op)
	}
}

func (d *closeWatch) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return d.Driver.Close()
}

func (d *closeWatch) WriteLedger(ctx context.Context, id int64, md *metadata.LedgerMetadata, expected metadata.Version) (metadata.Version, error) {
	d.use("WriteLedger")
	return d.Driver.WriteLedger(ctx, id, md, expected)
}

func (d *closeWatch) ReadLedger(ctx context.Context, id int64) (*metadata.LedgerMetadata, metadata.Version, error) {
	d.use("ReadLedger")
	return d.Driver.ReadLedger(ctx, id)
}

// TestStoreAfterClose: a ledger loop still running when Close returns (a
// recovery inside OpenLedger drains once more and asks for a metadata
// write or read) gets ErrClientClosed, and the metadata driver, which
// Close released, is not used.
func TestStoreAfterClose(t *testing.T) {
	// The client as New makes it, with what Close releases: its context,
	// a transport and the metadata driver (an in-memory one, opened
	// directly: the public client never accepts memory:// URIs).
	tr, err := transport.New(transport.Config{Protocol: wire.ProtocolV3})
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{cfg: Config{MetadataTimeout: time.Minute}, tr: tr,
		md: memory.NewStore(memory.Options{}).Open()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.writers = map[*WriteHandle]struct{}{}
	watch := &closeWatch{Driver: c.md}
	c.md = watch
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	s := store{c}
	wrote := make(chan error, 1)
	s.WriteLedger(1, &metadata.LedgerMetadata{}, 0, func(_ metadata.Version, err error) { wrote <- err })
	read := make(chan error, 1)
	s.ReadLedger(1, func(_ *metadata.LedgerMetadata, _ metadata.Version, err error) { read <- err })
	for op, ch := range map[string]chan error{"WriteLedger": wrote, "ReadLedger": read} {
		if err := <-ch; !errors.Is(err, ErrClientClosed) {
			t.Errorf("%s after Close: %v, want %v", op, err, ErrClientClosed)
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.late) > 0 {
		t.Errorf("the metadata driver was used after Close: %v", watch.late)
	}
}
