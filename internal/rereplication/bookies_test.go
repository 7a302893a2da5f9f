package rereplication

import (
	"context"
	"errors"
	"testing"

	"github.com/foliodb/folio/internal/wire"
)

// A transport configuration error is every request's answer, not a panic.
// NewBookiesTLS never makes one (its settings are fixed or defaulted); the
// state is built by hand.
func TestBookiesConfigErrorIsEveryAnswer(t *testing.T) {
	cfgErr := errors.New("transport: Config.Protocol 7: want v2 or v3")
	b := &Bookies{err: cfgErr}
	req := &wire.Request{Header: wire.Header{Op: wire.OpReadEntry}, Has: wire.BodyRead, Read: wire.ReadRequest{LedgerID: 1}}
	for _, bk := range []string{"b1:3181", "b2:3181"} {
		err := b.Call(context.Background(), bk, 1, req, func(*wire.Response) error { return nil })
		if !errors.Is(err, cfgErr) {
			t.Fatalf("Call to %s: %v, want the configuration error", bk, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close without a transport: %v", err)
	}
	if b := NewBookies(0, nil); b.err != nil {
		t.Fatalf("NewBookies: %v", b.err)
	} else if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
