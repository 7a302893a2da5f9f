package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
)

// TestLinkedDrivers checks that importing client alone, as a program
// outside the module must, is enough for etcd:// and zk:// URIs, and that
// the test-only memory:// is not among them (docs/design/layout.md). No
// test file of this package registers a driver.
func TestLinkedDrivers(t *testing.T) {
	_, err := client.New(t.Context(), client.Config{MetadataServiceURI: "memory://linked/ledgers"})
	if !errors.Is(err, metadata.ErrBadURI) {
		t.Fatalf("memory:// through the public client: got %v, want %v", err, metadata.ErrBadURI)
	}
	for _, want := range []string{"etcd", "zk"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("scheme %s not linked into the client: %v", want, err)
		}
	}
}
