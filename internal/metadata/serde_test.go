package metadata

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// workedExample is spec/metadata.md §1.2's example: E=W=A=1, OPEN, one
// segment {127.0.0.1:3181} at entry 0, CRC32C, empty password, cToken 0.
func workedExample() *LedgerMetadata {
	return &LedgerMetadata{
		EnsembleSize: 1, WriteQuorum: 1, AckQuorum: 1,
		State: LedgerOpen, LastEntryID: -1, Ctime: -1,
		Ensembles:   []Segment{{FirstEntryID: 0, Ensemble: []BookieID{"127.0.0.1:3181"}}},
		HasPassword: true, DigestType: DigestCRC32C, Password: []byte{},
	}
}

func TestSerializeGoldenWorkedExample(t *testing.T) {
	want := "BookieMetadataFormatVersion\t3\n" + "\x2f" + string(mustHex(t,
		"0801 1001 1800 20ffffffffffffffffff01 2801 3212 0a0e"+hex.EncodeToString([]byte("127.0.0.1:3181"))+"1000 3803 4200 4801 6000"))
	got, err := SerializeLedgerMetadata(workedExample())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("v3 bytes:\n got %x\nwant %x", got, want)
	}
	file, err := os.ReadFile("testdata/ledgermetadata-v3-worked-example.bin")
	if err != nil || !bytes.Equal(file, got) {
		t.Fatalf("testdata/ledgermetadata-v3-worked-example.bin differs (%v):\n file %x\n  got %x", err, file, got)
	}
	md, err := ParseLedgerMetadata(got)
	if err != nil {
		t.Fatal(err)
	}
	exp := workedExample()
	if !md.Equal(exp) || md.FormatVersion != 3 {
		t.Fatalf("round trip: got %+v", md)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fullExample() *LedgerMetadata {
	return &LedgerMetadata{
		EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2,
		State: LedgerClosed, LastEntryID: 41, Length: 4200,
		Ensembles: []Segment{
			{FirstEntryID: 0, Ensemble: []BookieID{"10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"}},
			{FirstEntryID: 17, Ensemble: []BookieID{"10.0.0.1:3181", "10.0.0.4:3181", "10.0.0.3:3181"}},
		},
		HasPassword: true, DigestType: DigestHMAC, Password: []byte("s3cret\x00\xff"),
		CustomMetadata: map[string][]byte{"application": []byte("pulsar"), "b": {0, 1, 2}},
		Ctime:          1700000000123, StoreCtime: true, CToken: 99,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, md := range []*LedgerMetadata{workedExample(), fullExample()} {
		b, err := SerializeLedgerMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseLedgerMetadata(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(md) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, md)
		}
		b2, _ := SerializeLedgerMetadata(got)
		if !bytes.Equal(b, b2) {
			t.Fatal("serialization not deterministic")
		}
	}
}

func TestNotClosedWritesMinusOne(t *testing.T) {
	md := fullExample()
	md.State = LedgerInRecovery
	b, err := SerializeLedgerMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	f := decodeV3(t, b)
	if f.GetLastEntryId() != -1 || f.GetLength() != 0 || f.LastEntryId == nil || f.Length == nil {
		t.Fatalf("lastEntryId %v length %v", f.LastEntryId, f.Length)
	}
	got, _ := ParseLedgerMetadata(b)
	if got.LastEntryID != -1 || got.Length != 0 {
		t.Fatalf("parsed %d %d", got.LastEntryID, got.Length)
	}
}

func decodeV3(t *testing.T, b []byte) *formatpb.LedgerMetadataFormat {
	t.Helper()
	_, body, err := parseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	n, l := protowire.ConsumeVarint(body)
	f := &formatpb.LedgerMetadataFormat{}
	if err := proto.Unmarshal(body[l:l+int(n)], f); err != nil {
		t.Fatal(err)
	}
	return f
}

func encodeV3(t *testing.T, f *formatpb.LedgerMetadataFormat) []byte {
	t.Helper()
	body, err := proto.MarshalOptions{AllowPartial: true}.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte("BookieMetadataFormatVersion\t3\n"), protowire.AppendVarint(nil, uint64(len(body)))...)
	return append(out, body...)
}

func TestReadAbsentOptionalsAsJava(t *testing.T) {
	f := &formatpb.LedgerMetadataFormat{
		QuorumSize: proto.Int32(2), EnsembleSize: proto.Int32(2), Length: proto.Int64(10),
		State:    formatpb.LedgerMetadataFormat_CLOSED.Enum(),
		Segment:  []*formatpb.LedgerMetadataFormat_Segment{{EnsembleMember: []string{"a:1", "b:2"}, FirstEntryId: proto.Int64(0)}},
		Password: []byte("pw"),
	}
	md, err := ParseLedgerMetadata(encodeV3(t, f))
	if err != nil {
		t.Fatal(err)
	}
	// ack quorum → write quorum; digest → CRC32; lastEntryId absent on
	// CLOSED → 0; ctime → -1; cToken → 0.
	if md.AckQuorum != 2 || md.DigestType != DigestCRC32 || md.LastEntryID != 0 || md.Ctime != -1 || md.StoreCtime || md.CToken != 0 || !md.HasPassword {
		t.Fatalf("%+v", md)
	}
	f.Password = nil
	md, err = ParseLedgerMetadata(encodeV3(t, f))
	if err != nil {
		t.Fatal(err)
	}
	if md.HasPassword || md.DigestType != 0 {
		t.Fatalf("no password: %+v", md)
	}
	if _, err := SerializeLedgerMetadata(md); !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("writing without password: %v", err)
	}
}

func TestParseV2(t *testing.T) {
	// As Java's TextFormat prints it (format 2 has no cToken; bytes use octal
	// escapes).
	v2, err := os.ReadFile("testdata/ledgermetadata-v2.txt")
	if err != nil {
		t.Fatal(err)
	}
	md, err := ParseLedgerMetadata(v2)
	if err != nil {
		t.Fatal(err)
	}
	if md.FormatVersion != 2 || md.State != LedgerClosed || md.LastEntryID != 7 || md.Length != 512 || md.AckQuorum != 1 ||
		md.DigestType != DigestCRC32C || string(md.Password) != "p\x00\xff" || string(md.CustomMetadata["k"]) != "v" ||
		len(md.Ensembles) != 1 || md.Ensembles[0].Ensemble[2] != "10.0.0.3:3181" {
		t.Fatalf("%+v", md)
	}
}

func TestParseV1(t *testing.T) {
	v1, err := os.ReadFile("testdata/ledgermetadata-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	md, err := ParseLedgerMetadata(v1)
	if err != nil {
		t.Fatal(err)
	}
	if md.FormatVersion != 1 || md.WriteQuorum != 2 || md.AckQuorum != 2 || md.EnsembleSize != 3 || md.State != LedgerClosed ||
		md.LastEntryID != 9 || md.Length != 100 || len(md.Ensembles) != 2 || md.Ensembles[1].FirstEntryID != 5 || md.HasPassword {
		t.Fatalf("%+v", md)
	}
	md, err = ParseLedgerMetadata([]byte("BookieMetadataFormatVersion\t1\n1\n1\n0\n0\ta:1\n-102\tCLOSED"))
	if err != nil || md.State != LedgerInRecovery || md.LastEntryID != -1 {
		t.Fatalf("%+v %v", md, err)
	}
	md, err = ParseLedgerMetadata([]byte("BookieMetadataFormatVersion\t1\n1\n1\n0\n0\ta:1\n"))
	if err != nil || md.State != LedgerOpen {
		t.Fatalf("%+v %v", md, err)
	}
}

func TestParseRejects(t *testing.T) {
	good, _ := SerializeLedgerMetadata(fullExample())
	seg := func(first int64, members ...string) *formatpb.LedgerMetadataFormat_Segment {
		return &formatpb.LedgerMetadataFormat_Segment{EnsembleMember: members, FirstEntryId: proto.Int64(first)}
	}
	base := func() *formatpb.LedgerMetadataFormat {
		return &formatpb.LedgerMetadataFormat{
			QuorumSize: proto.Int32(1), EnsembleSize: proto.Int32(1), Length: proto.Int64(0),
			State: formatpb.LedgerMetadataFormat_OPEN.Enum(), Segment: []*formatpb.LedgerMetadataFormat_Segment{seg(0, "a:1")},
			DigestType: formatpb.LedgerMetadataFormat_CRC32.Enum(), Password: []byte{},
		}
	}
	with := func(mod func(f *formatpb.LedgerMetadataFormat)) []byte {
		f := base()
		mod(f)
		return encodeV3(t, f)
	}
	if _, err := ParseLedgerMetadata(with(func(*formatpb.LedgerMetadataFormat) {})); err != nil {
		t.Fatalf("base must parse: %v", err)
	}
	cases := map[string][]byte{
		"empty":          nil,
		"no header":      []byte("hello"),
		"version 4":      []byte("BookieMetadataFormatVersion\t4\n"),
		"version 0":      []byte("BookieMetadataFormatVersion\t0\nx"),
		"long version":   []byte("BookieMetadataFormatVersion\t12345678901\n"),
		"no newline":     []byte("BookieMetadataFormatVersion\t3"),
		"truncated":      good[:len(good)-5],
		"header only":    good[:len("BookieMetadataFormatVersion\t3\n")],
		"bad v2":         []byte("BookieMetadataFormatVersion\t2\nquorumSize: x"),
		"v1 short":       []byte("BookieMetadataFormatVersion\t1\n1\n1\n"),
		"v1 no segments": []byte("BookieMetadataFormatVersion\t1\n1\n1\n0\n"),
		"missing state":  with(func(f *formatpb.LedgerMetadataFormat) { f.State = nil }),
		"missing firstEntryId": with(func(f *formatpb.LedgerMetadataFormat) {
			f.Segment[0].FirstEntryId = nil
		}),
		"no segments": with(func(f *formatpb.LedgerMetadataFormat) { f.Segment = nil }),
		"unsorted": with(func(f *formatpb.LedgerMetadataFormat) {
			f.Segment = append(f.Segment, seg(10, "b:1"), seg(5, "c:1"))
		}),
		"duplicate first":  with(func(f *formatpb.LedgerMetadataFormat) { f.Segment = append(f.Segment, seg(0, "b:1")) }),
		"not at 0":         with(func(f *formatpb.LedgerMetadataFormat) { f.Segment[0].FirstEntryId = proto.Int64(3) }),
		"short ensemble":   with(func(f *formatpb.LedgerMetadataFormat) { f.EnsembleSize = proto.Int32(2) }),
		"ack > write":      with(func(f *formatpb.LedgerMetadataFormat) { f.AckQuorumSize = proto.Int32(2) }),
		"write > ensemble": with(func(f *formatpb.LedgerMetadataFormat) { f.QuorumSize = proto.Int32(2) }),
		"bad bookie":       with(func(f *formatpb.LedgerMetadataFormat) { f.Segment[0].EnsembleMember[0] = "a b:1" }),
		"readonly bookie":  with(func(f *formatpb.LedgerMetadataFormat) { f.Segment[0].EnsembleMember[0] = "ReadOnly" }),
		"duplicate custom key": with(func(f *formatpb.LedgerMetadataFormat) {
			e := &formatpb.LedgerMetadataFormatCMetadataMapEntry{Key: proto.String("k")}
			f.CustomMetadata = append(f.CustomMetadata, e, e)
		}),
	}
	for name, b := range cases {
		_, err := ParseLedgerMetadata(b)
		if !errors.Is(err, ErrCorruptMetadata) || errors.Is(err, ErrNoSuchLedger) {
			t.Errorf("%s: got %v, want ErrCorruptMetadata", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestValidateBookieID(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:3181", "host-1.example:3181", "a;b<c=d>e?f@g[h\\i]j^k_l", "readonly:3181"} {
		if err := ValidateBookieID(BookieID(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "a+b", "a~b", "a,b", "readonly", "READONLY", "ü:1"} {
		if err := ValidateBookieID(BookieID(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestEnsembleAt(t *testing.T) {
	md := fullExample()
	for _, c := range []struct {
		entry int64
		seg   int
	}{{-1, 0}, {0, 0}, {16, 0}, {17, 1}, {1000, 1}} {
		if got := md.SegmentIndex(c.entry); got != c.seg {
			t.Errorf("entry %d: segment %d, want %d", c.entry, got, c.seg)
		}
	}
	if md.EnsembleAt(17)[1] != "10.0.0.4:3181" || md.LastEnsemble().FirstEntryID != 17 {
		t.Fatal("EnsembleAt/LastEnsemble")
	}
}

func TestCloneIsDeep(t *testing.T) {
	md := fullExample()
	c := md.Clone()
	c.Ensembles[0].Ensemble[0] = "x:1"
	c.Password[0] = 'X'
	c.CustomMetadata["b"][0] = 9
	if !md.Equal(fullExample()) {
		t.Fatal("Clone shares memory")
	}
}

func TestCorruptErrorNamesKey(t *testing.T) {
	_, perr := ParseLedgerMetadata([]byte("junk"))
	err := Corrupt("/ledgers/ledgers/00000000-0000-0000-0000-000000000001", perr)
	if !errors.Is(err, ErrCorruptMetadata) || !strings.Contains(err.Error(), "00000000-0000-0000-0000-000000000001") {
		t.Fatal(err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Key == "" {
		t.Fatal("not a CorruptError")
	}
}

func TestEqualIgnoresWhatIsNotStored(t *testing.T) {
	md := workedExample()
	md.Ctime, md.LastEntryID, md.Length = 0, 5, 10 // not stored: OPEN, no StoreCtime
	b, err := SerializeLedgerMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ParseLedgerMetadata(b)
	if !got.Equal(md) || got.Ctime != -1 || got.LastEntryID != -1 || got.Length != 0 {
		t.Fatalf("%+v", got)
	}
	other := md.Clone()
	other.Password = []byte("x")
	if md.Equal(other) {
		t.Fatal("password difference ignored")
	}
}
