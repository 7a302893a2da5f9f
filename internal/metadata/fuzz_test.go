package metadata

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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

// FuzzParseCookie: no input panics; every error says it is about a
// cookie; a cookie that parses and that Folio can write (a valid bookie
// id) survives MarshalText and ParseCookie unchanged, and writes the same
// bytes again.
func FuzzParseCookie(f *testing.F) {
	f.Add([]byte(goldenCookie))
	f.Add([]byte("3\n10.0.0.5:3181\n/data/bk/journal\n2\t/a\t/b\n"))
	f.Add([]byte("4\nbookieHost: \"b:1\"\njournalDir: \"/j1,/j 2\"\nledgerDirs: \"2\\t/l\\303\\251\\t/x\"\nindexDirs: \"1\\t/i\"\n"))
	f.Add([]byte("5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCookie(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cookie") {
				t.Fatalf("error does not say it is about a cookie: %v", err)
			}
			return
		}
		if c.LayoutVersion < 3 || len(c.LedgerDirs) == 0 || len(c.JournalDirs) == 0 || (c.IndexDirs != nil && len(c.IndexDirs) == 0) {
			t.Fatalf("parsed an incomplete cookie: %+v", c)
		}
		if ValidateBookieID(c.BookieID) != nil {
			return // readable, but not a cookie Folio writes
		}
		text, err := c.MarshalText()
		if err != nil {
			t.Fatalf("parsed cookie does not marshal: %v\n%+v", err, c)
		}
		back, err := ParseCookie(text)
		if err != nil {
			t.Fatalf("marshalled cookie does not parse: %v\n%s", err, text)
		}
		want := *c
		want.LayoutVersion = CookieLayoutVersion
		if !reflect.DeepEqual(*back, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\ntext %q", *back, want, text)
		}
		if again, _ := back.MarshalText(); string(again) != string(text) {
			t.Fatalf("cookie text not stable:\n%q\n%q", text, again)
		}
	})
}

// FuzzDecodeUnderReplicated: no input panics; a record that decodes lists
// its missing bookies ascending without duplicates, and its encoding
// decodes to the same record and encodes to the same text again.
func FuzzDecodeUnderReplicated(f *testing.F) {
	f.Add([]byte(EncodeUnderReplicated([]BookieID{"10.0.0.1:3181", "10.0.0.2:3181"}, time.UnixMilli(1700000000123))))
	f.Add([]byte("replica: \"b:1\"\nreplica: \"a:1\" replica: \"b:1\"\n# comment\nctime: -5\n"))
	f.Add([]byte(""))
	f.Add([]byte("replica: \"\\303\\251\\x00\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		missing, ctime, err := DecodeUnderReplicated(data)
		if err != nil {
			return
		}
		if !slices.IsSorted(missing) || len(slices.Compact(slices.Clone(missing))) != len(missing) {
			t.Fatalf("missing replicas not ascending and unique: %q", missing)
		}
		text := EncodeUnderReplicated(missing, ctime)
		back, backCtime, err := DecodeUnderReplicated([]byte(text))
		if err != nil {
			t.Fatalf("encoded record does not decode: %v\n%q", err, text)
		}
		if !slices.Equal(back, missing) || !backCtime.Equal(ctime) {
			t.Fatalf("round trip: %q %v, want %q %v\ntext %q", back, backCtime, missing, ctime, text)
		}
		if again := EncodeUnderReplicated(back, backCtime); again != text {
			t.Fatalf("record text not stable:\n%q\n%q", text, again)
		}
	})
}

// FuzzDecodeCheckTime: no input panics; a completion time that decodes is
// not before 1970 and survives EncodeCheckTime and DecodeCheckTime.
func FuzzDecodeCheckTime(f *testing.F) {
	for _, c := range []PeriodicCheck{LedgerCheck, PlacementPolicyCheck, ReplicasCheck} {
		v, err := EncodeCheckTime(c, time.UnixMilli(1700000000123))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(c), v)
	}
	f.Add(uint8(LedgerCheck), []byte{0x08, 0x80, 0x00})
	f.Add(uint8(ReplicasCheck), []byte{0x08, 0x01, 0x10, 0x02})
	f.Fuzz(func(t *testing.T, which uint8, value []byte) {
		check := PeriodicCheck(which % 4)
		got, err := DecodeCheckTime(check, value)
		if err != nil {
			return
		}
		if got.UnixMilli() < 0 {
			t.Fatalf("%x decodes to %v, before 1970", value, got)
		}
		again, err := EncodeCheckTime(check, got)
		if err != nil {
			t.Fatalf("decoded time %v does not encode: %v", got, err)
		}
		back, err := DecodeCheckTime(check, again)
		if err != nil || !back.Equal(got) {
			t.Fatalf("round trip of %v: %v %v", got, back, err)
		}
	})
}
