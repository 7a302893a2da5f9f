package server

import (
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// TestCustomBookieID: bookieId is the id (registrations, cookies), and the
// address stays host:port, published in the registration's service info;
// an id BookKeeper would refuse is refused naming the key.
func TestCustomBookieID(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Load(strings.NewReader("bookieId=bookie-0.bookies.pulsar\nadvertisedAddress=10.1.2.3\nallowLoopback=true\n"), nil); err != nil {
		t.Fatal(err)
	}
	id, err := cfg.BookieID(3181)
	if err != nil || id != "bookie-0.bookies.pulsar" {
		t.Fatalf("BookieID = %q, %v", id, err)
	}
	addr, err := cfg.BookieAddress(3181)
	if err != nil || addr != "10.1.2.3:3181" {
		t.Fatalf("BookieAddress = %q, %v", addr, err)
	}
	info, err := serviceInfo(&cfg, addr, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := info.BookieAddress(); err != nil || got != addr {
		t.Fatalf("service info names %q (%v), want %s", got, err, addr)
	}
	master := MasterCookie(&cfg, id, "instance")
	if master.BookieID != id {
		t.Fatalf("the cookie carries %s, want the custom id", master.BookieID)
	}

	for _, bad := range []string{"readonly", "bookie 0", "bookie/0"} {
		cfg.CustomBookieID = bad
		if _, err := cfg.BookieID(3181); err == nil || !strings.Contains(err.Error(), "bookieId") {
			t.Errorf("bookieId=%q: %v", bad, err)
		}
	}
	cfg.CustomBookieID = ""
	if id, err := cfg.BookieID(3181); err != nil || id != metadata.BookieID("10.1.2.3:3181") {
		t.Fatalf("without bookieId: %q, %v", id, err)
	}
}
