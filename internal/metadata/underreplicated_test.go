package metadata

import (
	"slices"
	"testing"
	"time"
)

// TestUnderReplicatedGolden pins the record text (Java's ZooKeeper manager
// writes the same TextFormat) and reads one as Java may write it.
func TestUnderReplicatedGolden(t *testing.T) {
	got := EncodeUnderReplicated([]BookieID{"10.0.0.1:3181", "10.0.0.2:3181"}, time.UnixMilli(1700000000123))
	const want = "replica: \"10.0.0.1:3181\"\nreplica: \"10.0.0.2:3181\"\nctime: 1700000000123\n"
	if got != want {
		t.Fatalf("record text:\n%q\nwant\n%q", got, want)
	}
	if got := EncodeUnderReplicated([]BookieID{"b:1"}, time.Time{}); got != "replica: \"b:1\"\n" {
		t.Fatalf("record without ctime: %q", got)
	}
	missing, ctime, err := DecodeUnderReplicated([]byte("replica: \"b:2\"\nreplica: \"a:1\"\nreplica: \"b:2\"\nctime: 1700000000123\n"))
	if err != nil || !slices.Equal(missing, []BookieID{"a:1", "b:2"}) || ctime.UnixMilli() != 1700000000123 {
		t.Fatalf("decode: %v %v %v", missing, ctime, err)
	}
	if _, _, err := DecodeUnderReplicated([]byte("replica: 7\n")); err == nil {
		t.Fatal("a malformed record decoded")
	}
}
