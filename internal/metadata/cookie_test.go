package metadata

import (
	"reflect"
	"strings"
	"testing"
)

// The cookie of spec/metadata.md §4, byte for byte as Java 4.17 writes it.
const goldenCookie = "5\n" +
	"bookieHost: \"10.0.0.5:3181\"\n" +
	"journalDir: \"/data/bk/journal\"\n" +
	"ledgerDirs: \"1\\t/data/bk/ledgers\"\n" +
	"instanceId: \"3f1c2a9e-6a43-4f1e-9c1b-0d6f1a2b3c4d\"\n"

func TestCookieGolden(t *testing.T) {
	c := &Cookie{
		BookieID:    "10.0.0.5:3181",
		JournalDirs: []string{"/data/bk/journal"},
		LedgerDirs:  []string{"/data/bk/ledgers"},
		InstanceID:  "3f1c2a9e-6a43-4f1e-9c1b-0d6f1a2b3c4d",
	}
	got, err := c.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != goldenCookie {
		t.Fatalf("cookie text:\n%s\nwant:\n%s", got, goldenCookie)
	}
	back, err := ParseCookie(got)
	if err != nil {
		t.Fatal(err)
	}
	c.LayoutVersion = CookieLayoutVersion
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("parsed %+v, want %+v", back, c)
	}
}

func TestCookieRoundTripAndEscapes(t *testing.T) {
	c := &Cookie{
		LayoutVersion: CookieLayoutVersion,
		BookieID:      "bookie-1.example:3181",
		JournalDirs:   []string{"/j1", "/j 2"},
		LedgerDirs:    []string{"/l1", `/l"2\x`, "/données"},
		IndexDirs:     []string{"/i1"},
	}
	text, err := c.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`journalDir: "/j1,/j 2"`, `ledgerDirs: "3\t/l1\t/l\"2\\x\t/donn\303\251es"`, `indexDirs: "1\t/i1"`} {
		if !strings.Contains(string(text), want) {
			t.Errorf("cookie text lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(string(text), "instanceId") {
		t.Error("an absent instance id must not be written")
	}
	back, err := ParseCookie(text)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, c)
	}
}

func TestCookieLayout3(t *testing.T) {
	c, err := ParseCookie([]byte("3\n10.0.0.5:3181\n/data/bk/journal\n2\t/a\t/b\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Cookie{LayoutVersion: 3, BookieID: "10.0.0.5:3181", JournalDirs: []string{"/data/bk/journal"}, LedgerDirs: []string{"/a", "/b"}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("%+v", c)
	}
}

func TestCookieBadInput(t *testing.T) {
	for name, text := range map[string]string{
		"empty":            "",
		"not a version":    "five\nbookieHost: \"a:1\"\n",
		"too old":          "2\na:1\n/j\n1\t/l\n",
		"layout 3 short":   "3\na:1\n",
		"bad text":         "5\nbookieHost: \"a:1\n",
		"unknown field":    "5\nbookieHost: \"a:1\"\ncolour: \"blue\"\n",
		"count mismatch":   "5\nbookieHost: \"a:1\"\njournalDir: \"/j\"\nledgerDirs: \"2\\t/l\"\n",
		"missing required": "5\nbookieHost: \"a:1\"\n",
	} {
		if c, err := ParseCookie([]byte(text)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, c)
		}
	}
	if _, err := (&Cookie{BookieID: "bad id", JournalDirs: []string{"/j"}, LedgerDirs: []string{"/l"}}).MarshalText(); err == nil {
		t.Error("an invalid bookie id must not be written")
	}
}
