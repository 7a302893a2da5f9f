package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
)

// memoryStore returns a URI naming a fresh in-memory store and a driver on it.
func memoryStore(t *testing.T) (string, metadata.Driver) {
	name := strings.ReplaceAll(t.Name(), "/", "_")
	memory.ForgetNamed(name)
	t.Cleanup(func() { memory.ForgetNamed(name) })
	d := memory.Named(name).Open()
	t.Cleanup(func() { _ = d.Close() })
	return "memory://" + name + "/ledgers", d
}

func goldenLedger() *metadata.LedgerMetadata {
	return &metadata.LedgerMetadata{
		EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2,
		State: metadata.LedgerClosed, LastEntryID: 99, Length: 12345,
		Ensembles: []metadata.Segment{
			{FirstEntryID: 0, Ensemble: []metadata.BookieID{"127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"}},
			{FirstEntryID: 50, Ensemble: []metadata.BookieID{"127.0.0.1:3181", "127.0.0.1:3184", "127.0.0.1:3183"}},
		},
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte("secret"),
		CustomMetadata: map[string][]byte{"application": []byte("folio")},
		Ctime:          -1,
	}
}

func TestListLedgersGolden(t *testing.T) {
	uri, d := memoryStore(t)
	ctx := context.Background()
	for _, id := range []int64{5<<56 | 1, 1} {
		if _, err := d.CreateLedgerMetadata(ctx, id, goldenLedger()); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := run(t, nil, "shell", "listledgers", "-o", "json", "--metadata-service-uri", uri)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "[\n  {\n    \"ledgerId\": 1\n  },\n  {\n    \"ledgerId\": 360287970189639681\n  }\n]\n"
	if out != want {
		t.Fatalf("listledgers -o json:\n%s\nwant:\n%s", out, want)
	}
	code, out, _ = run(t, map[string]string{MetadataURIEnv: uri}, "shell", "listledgers")
	if want := "LEDGER ID\n1\n360287970189639681\n"; code != ExitOK || out != want {
		t.Fatalf("listledgers: exit %d\n%s\nwant:\n%s", code, out, want)
	}
}

func TestListLedgersEmptyIsEmptyArray(t *testing.T) {
	uri, _ := memoryStore(t)
	code, out, _ := run(t, nil, "shell", "listledgers", "-o", "json", "--metadata-service-uri", uri)
	if code != ExitOK || out != "[]\n" {
		t.Fatalf("exit %d, %q", code, out)
	}
}

func TestLedgerMetadataGolden(t *testing.T) {
	uri, d := memoryStore(t)
	ctx := context.Background()
	const id = 5<<56 | 1
	v, err := d.CreateLedgerMetadata(ctx, id, goldenLedger())
	if err != nil {
		t.Fatal(err)
	}
	if v != 1 {
		t.Fatalf("a fresh memory store's first version is %d; the golden output assumes 1", v)
	}
	code, out, errOut := run(t, nil, "shell", "ledgermetadata", "360287970189639681", "-o", "json", "--metadata-service-uri", uri)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	wantJSON := `{
  "ledgerId": 360287970189639681,
  "version": 1,
  "formatVersion": 3,
  "state": "CLOSED",
  "ensembleSize": 3,
  "writeQuorumSize": 2,
  "ackQuorumSize": 2,
  "lastEntryId": 99,
  "length": 12345,
  "digestType": "CRC32C",
  "hasPassword": true,
  "ensembles": [
    {
      "firstEntryId": 0,
      "bookies": [
        "127.0.0.1:3181",
        "127.0.0.1:3182",
        "127.0.0.1:3183"
      ]
    },
    {
      "firstEntryId": 50,
      "bookies": [
        "127.0.0.1:3181",
        "127.0.0.1:3184",
        "127.0.0.1:3183"
      ]
    }
  ],
  "customMetadata": {
    "application": "Zm9saW8="
  },
  "cToken": 0
}
`
	if out != wantJSON {
		t.Fatalf("ledgermetadata -o json:\n%s\nwant:\n%s", out, wantJSON)
	}
	if strings.Contains(out, "secret") {
		t.Fatal("password printed")
	}
	code, out, _ = run(t, nil, "shell", "ledgermetadata", "--ledgerid", "360287970189639681", "--metadata-service-uri", uri)
	wantText := `ledgerId               360287970189639681
version                1
formatVersion          3
state                  CLOSED
ensembleSize           3
writeQuorumSize        2
ackQuorumSize          2
lastEntryId            99
length                 12345
digestType             CRC32C
password               (present, not shown)
ensemble@0             127.0.0.1:3181,127.0.0.1:3182,127.0.0.1:3183
ensemble@50            127.0.0.1:3181,127.0.0.1:3184,127.0.0.1:3183
custom["application"]  "folio"
cToken                 0
`
	if code != ExitOK || out != wantText {
		t.Fatalf("ledgermetadata: exit %d\n%s\nwant:\n%s", code, out, wantText)
	}
}

func TestLedgerMetadataErrors(t *testing.T) {
	uri, d := memoryStore(t)
	key, err := d.(*memory.Driver).Store().PutLedgerRaw(context.Background(), 7, []byte("BookieMetadataFormatVersion\t9\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		have []string
	}{
		{[]string{"ledgermetadata", "8"}, ExitFail, []string{"folio: ledger 8 does not exist"}},
		{[]string{"ledgermetadata", "7"}, ExitFail, []string{"corrupt metadata", key, "unsupported format version 9", "hint:"}},
		{[]string{"ledgermetadata"}, ExitUsage, []string{"missing ledger id"}},
		{[]string{"ledgermetadata", "x"}, ExitUsage, []string{`bad ledger id "x"`}},
		{[]string{"ledgermetadata", "-1"}, ExitUsage, []string{"unknown shorthand flag"}},
		{[]string{"ledgermetadata", "--", "-1"}, ExitUsage, []string{`bad ledger id "-1"`}},
		{[]string{"ledgermetadata", "1", "--ledgerid", "1"}, ExitUsage, []string{"once"}},
		{[]string{"listledgers", "extra"}, ExitUsage, []string{"unknown command"}},
	} {
		code, out, errOut := run(t, nil, append([]string{"shell", "--metadata-service-uri", uri}, tc.args...)...)
		if code != tc.code || out != "" {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q", tc.args, code, tc.code, out, errOut)
			continue
		}
		for _, s := range tc.have {
			if !strings.Contains(errOut, s) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, s)
			}
		}
	}
	for _, uri := range []string{"zk://127.0.0.1:2181/ledgers", "etcd://127.0.0.1:2379/"} {
		code, _, errOut := run(t, nil, "shell", "listledgers", "--metadata-service-uri", uri)
		if code != ExitFail || !strings.Contains(errOut, "hint:") {
			t.Errorf("%s: exit %d, stderr %q", uri, code, errOut)
		}
	}
}
