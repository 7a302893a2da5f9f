package admin

import (
	"encoding/binary"
	"testing"
)

// encodeAvail builds the Java layout from (first, last, size, period)
// groups.
func encodeAvail(groups ...[4]int64) []byte {
	b := make([]byte, availHeaderSize+len(groups)*availGroupSize)
	binary.BigEndian.PutUint32(b[4:], uint32(len(groups)))
	for i, g := range groups {
		p := b[availHeaderSize+i*availGroupSize:]
		binary.BigEndian.PutUint64(p, uint64(g[0]))
		binary.BigEndian.PutUint64(p[8:], uint64(g[1]))
		binary.BigEndian.PutUint32(p[16:], uint32(g[2]))
		binary.BigEndian.PutUint32(p[20:], uint32(g[3]))
	}
	return b
}

func TestDecodeAvailability(t *testing.T) {
	// Bookie 0 of E=3, Qw=2 over entries 0..9 holds 0, 2,3, 5,6, 8,9: one
	// single entry, then a group of size 2 every 3.
	a, err := DecodeAvailability(encodeAvail([4]int64{0, 0, 1, 0}, [4]int64{2, 8, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 2, 3, 5, 6, 8, 9}
	if a.Count() != int64(len(want)) || a.Max() != 9 {
		t.Fatalf("count %d max %d, runs %v", a.Count(), a.Max(), a.Runs)
	}
	for _, id := range want {
		if !a.Has(id) {
			t.Errorf("missing %d", id)
		}
	}
	for _, id := range []int64{1, 4, 7, 10, -1} {
		if a.Has(id) {
			t.Errorf("has %d", id)
		}
	}
	empty, err := DecodeAvailability(encodeAvail())
	if err != nil || empty.Count() != 0 || empty.Max() != -1 {
		t.Fatalf("empty: %v %v", empty, err)
	}
	for name, bad := range map[string][]byte{
		"short":     make([]byte, 10),
		"count":     encodeAvail([4]int64{0, 0, 1, 0})[:availHeaderSize],
		"overlap":   encodeAvail([4]int64{0, 5, 2, 5}, [4]int64{3, 3, 1, 0}),
		"period<sz": encodeAvail([4]int64{0, 6, 3, 2}),
		"size0":     encodeAvail([4]int64{0, 0, 0, 0}),
	} {
		if _, err := DecodeAvailability(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
