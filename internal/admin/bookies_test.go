package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A transport configuration error is every request's answer, not a panic.
// NewBookiesTLS never makes one (its settings are fixed or defaulted); the
// state is built by hand.
func TestBookiesConfigErrorIsEveryAnswer(t *testing.T) {
	cfgErr := errors.New("transport: Config.Protocol 7: want v2 or v3")
	b := &Bookies{err: cfgErr}
	rows := b.Info(context.Background(), []string{"b1:3181", "b2:3181"})
	for _, r := range rows {
		if !strings.Contains(r.Error, "Config.Protocol") {
			t.Fatalf("row %+v: want the configuration error", r)
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
