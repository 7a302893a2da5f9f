package metadata

import (
	"errors"
	"os"
	"testing"
)

// FuzzParseLedgerMetadata: no input panics; every error is
// ErrCorruptMetadata; whatever parses and has a password survives a format 3
// round trip unchanged.
func FuzzParseLedgerMetadata(f *testing.F) {
	for _, name := range []string{"ledgermetadata-v3-worked-example.bin", "ledgermetadata-v2.txt", "ledgermetadata-v1.txt"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	full, _ := SerializeLedgerMetadata(fullExample())
	f.Add(full)
	f.Fuzz(func(t *testing.T, b []byte) {
		md, err := ParseLedgerMetadata(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptMetadata) {
				t.Fatalf("error %v is not ErrCorruptMetadata", err)
			}
			return
		}
		if !md.HasPassword {
			return // Folio refuses to write such values (spec §1.4)
		}
		out, err := SerializeLedgerMetadata(md)
		if err != nil {
			if md.State == LedgerClosed && (md.LastEntryID < -1 || md.Length < 0) {
				return // readable, but Folio does not write nonsense close values
			}
			t.Fatalf("parsed metadata does not serialize: %v\n%+v", err, md)
		}
		back, err := ParseLedgerMetadata(out)
		if err != nil || !back.Equal(md) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back, md)
		}
	})
}
