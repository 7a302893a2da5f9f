package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// TestShippedDrivers checks the metadata URI schemes the binary accepts:
// this test binary links exactly the packages the shipped one does (plus
// this file, which registers nothing). etcd:// and zk:// open; the
// test-only memory:// does not (docs/design/layout.md).
func TestShippedDrivers(t *testing.T) {
	_, err := metadata.Open(t.Context(), "memory://shipped/ledgers", metadata.Options{})
	if !errors.Is(err, metadata.ErrBadURI) {
		t.Fatalf("memory:// in the shipped binary: got %v, want %v", err, metadata.ErrBadURI)
	}
	// The error lists the registered schemes.
	for _, want := range []string{"etcd", "zk"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("scheme %s not registered in the shipped binary: %v", want, err)
		}
	}
}
