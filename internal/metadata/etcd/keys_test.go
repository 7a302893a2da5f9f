package etcd_test

import (
	"math"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
)

// Golden keys from spec/metadata.md §2.3 (Java's new UUID(0, id).toString()).
func TestLedgerUUIDGolden(t *testing.T) {
	for _, tc := range []struct {
		id   int64
		want string
	}{
		{0, "00000000-0000-0000-0000-000000000000"},
		{1, "00000000-0000-0000-0000-000000000001"},
		{5<<56 | 1, "00000000-0000-0000-0500-000000000001"},
		{360287970189639681, "00000000-0000-0000-0500-000000000001"},
		{0xabcdef, "00000000-0000-0000-0000-000000abcdef"},
		{1<<48 - 1, "00000000-0000-0000-0000-ffffffffffff"},
		{1 << 48, "00000000-0000-0000-0001-000000000000"},
		{metadata.MaxLedgerID, "00000000-0000-0000-7fff-fffffffffffe"},
		{math.MaxInt64, "00000000-0000-0000-7fff-ffffffffffff"},
	} {
		if got := etcd.LedgerUUID(tc.id); got != tc.want {
			t.Errorf("LedgerUUID(%d) = %s, want %s", tc.id, got, tc.want)
		}
		back, err := etcd.ParseLedgerUUID(tc.want)
		if err != nil || back != tc.id {
			t.Errorf("ParseLedgerUUID(%s) = %d, %v; want %d", tc.want, back, err, tc.id)
		}
	}
}

func TestParseLedgerUUIDRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"1",
		"00000000-0000-0000-0000-00000000000A", // upper case: Java accepts, Folio never writes it
		"00000000-0000-0000-0000-00000000000g",
		"00000000-0000-0000-0000-0000000000001",
		"00000000-0000-0000-0000-00000000001",
		"00000000-0000-0000-8000-000000000000", // negative as a Java long
		"00000001-0000-0000-0000-000000000001", // most significant half not zero
		"00000000-0000-0000-0000_000000000001",
		"00000000-0000-0000-0000-000000000001/x",
		"0-0-0-0-1",
	} {
		if id, err := etcd.ParseLedgerUUID(s); err == nil {
			t.Errorf("ParseLedgerUUID(%q) = %d, want an error", s, id)
		}
	}
}

func TestUUIDOrderIsNumericOrder(t *testing.T) {
	ids := []int64{0, 1, 9, 10, 15, 16, 255, 1 << 47, 1 << 48, 5<<56 | 1, 127<<56 | 1, metadata.MaxLedgerID}
	for i := 1; i < len(ids); i++ {
		if a, b := etcd.LedgerUUID(ids[i-1]), etcd.LedgerUUID(ids[i]); a >= b {
			t.Errorf("key of %d (%s) does not sort before key of %d (%s)", ids[i-1], a, ids[i], b)
		}
	}
}

func TestLayoutValueGolden(t *testing.T) {
	const want = "2\norg.apache.bookkeeper.metadata.etcd.EtcdLedgerManagerFactory:0"
	if etcd.LayoutValue != want {
		t.Fatalf("LayoutValue = %q, want %q", etcd.LayoutValue, want)
	}
}

func TestBucketID(t *testing.T) {
	for _, tc := range []struct {
		bucket  int
		version int64
		id      int64
		ok      bool
	}{
		{0, 1, 1, true},
		{5, 1, 5<<56 | 1, true},
		{127, 1, 127<<56 | 1, true},
		{3, 1<<56 - 1, 3<<56 | (1<<56 - 1), true},
		{3, 1 << 56, 0, false},            // bucket counter past 2^56-1: next bucket
		{127, 1<<56 - 1, 0, false},        // would be Long.MAX_VALUE, unlisted by Java
		{127, 1<<56 - 2, 1<<63 - 2, true}, // MaxLedgerID itself
		{0, 0, 0, false},
		{128, 1, 0, false},
	} {
		id, ok := etcd.BucketID(tc.bucket, tc.version)
		if id != tc.id || ok != tc.ok {
			t.Errorf("bucketID(%d, %d) = %d, %v; want %d, %v", tc.bucket, tc.version, id, ok, tc.id, tc.ok)
		}
	}
}
