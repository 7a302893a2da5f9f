package zk

import (
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// FuzzParseLayout: no LAYOUT value panics, and what parses is a manager
// whose own LAYOUT parses back to it.
func FuzzParseLayout(f *testing.F) {
	for _, m := range []Manager{Hierarchical, LongHierarchical, LegacyHierarchical, Flat} {
		f.Add([]byte(m.LayoutValue()))
	}
	f.Add([]byte("1\nflat:1"))
	f.Add([]byte("2\norg.apache.bookkeeper.meta.MSLedgerManagerFactory:1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseLayout(b)
		if err != nil {
			return
		}
		if back, err := ParseLayout([]byte(m.LayoutValue())); err != nil || back != m {
			t.Fatalf("%q parsed as %v, whose LAYOUT parses as %v, %v", b, m, back, err)
		}
	})
}

// FuzzStoredValues: the other values the driver reads from znodes (the
// lost-bookie recovery delay, sequence-node names, BookieServiceInfo) never
// panic, and a delay that parses can be stored and reads back the same.
func FuzzStoredValues(f *testing.F) {
	f.Add([]byte("60"), "/r/idgen/ID-0000000042")
	f.Add([]byte("-1"), "/r/idgen/ID--2147483648")
	info, _ := metadata.EncodeBookieServiceInfo(metadata.BookieServiceInfo{Endpoints: []metadata.BookieEndpoint{{ID: "bookie", Host: "h", Port: 3181, Protocol: "bookie-rpc"}}})
	f.Add(info, "/r/idgen/ID-")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		if d, err := DecodeDelay(string(b)); err == nil {
			text, err := EncodeDelay(d)
			if err != nil {
				t.Fatalf("delay %q parsed as %v, which cannot be stored: %v", b, d, err)
			}
			if back, err := DecodeDelay(text); err != nil || back != d {
				t.Fatalf("delay %q: %v stored as %q reads %v, %v", b, d, text, back, err)
			}
		}
		_, _ = parseSequence(name, "/r/idgen/ID-")
		_, _ = metadata.DecodeBookieServiceInfo(b)
	})
}
