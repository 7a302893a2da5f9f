package ledgerstore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/foliodb/folio/internal/storage/journal"
)

var goldenID = StoreID{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10}

// TestStoreFilesGolden pins CHECKPOINT and LAYOUT: version 2 as written,
// version 1 as Folio wrote it before store ids (still read; the v1 bytes
// here are what commit 98450b1's encoders produce, and the checksums were
// computed independently).
func TestStoreFilesGolden(t *testing.T) {
	c := checkpoint{journalIndex: 1, journalCount: 2, ledgerDirCount: 3, pos: journal.Position{File: 5, Offset: 0x200}, storeID: goldenID}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"CHECKPOINT v2", encodeCheckpoint(c), "464f4c494f434b50" + "00000002" + "00000001" + "00000002" + "00000003" +
			"0000000000000005" + "0000000000000200" + "0102030405060708090a0b0c0d0e0f10" + "37082c66"},
		{"CHECKPOINT v1", encodeCheckpointV1(c), "464f4c494f434b50" + "00000001" + "00000001" + "00000002" + "00000003" +
			"0000000000000005" + "0000000000000200" + "5ff36f1e"},
		{"LAYOUT v3", encodeLayout(layout{index: 4, count: 3, dirs: 5, storeID: goldenID}), "464f4c494f4c4452" + "00000003" + "00000004" + "00000003" +
			"00000005" + "0102030405060708090a0b0c0d0e0f10" + "daa102fa"},
		{"LAYOUT v2", encodeLayoutV2(1, 3, goldenID), "464f4c494f4c4452" + "00000002" + "00000001" + "00000003" +
			"0102030405060708090a0b0c0d0e0f10" + "28c825db"},
		{"LAYOUT v1", encodeLayoutV1(1, 3), "464f4c494f4c4452" + "00000001" + "00000001" + "00000003" + "ccf11c10"},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if back, err := decodeCheckpoint("c", encodeCheckpoint(c)); err != nil || back != c {
		t.Fatalf("CHECKPOINT v2: %+v %v", back, err)
	}
	legacy := c
	legacy.storeID = StoreID{}
	if back, err := decodeCheckpoint("c", encodeCheckpointV1(c)); err != nil || back != legacy {
		t.Fatalf("CHECKPOINT v1: %+v %v", back, err)
	}
	l := layout{index: 4, count: 3, dirs: 5, storeID: goldenID}
	if back, err := decodeLayout("l", encodeLayout(l)); err != nil || back != l || !back.capacity() {
		t.Fatalf("LAYOUT v3: %+v %v", back, err)
	}
	// Versions 1 and 2 read as a store without capacity directories.
	if back, err := decodeLayout("l", encodeLayoutV2(1, 3, goldenID)); err != nil || back != (layout{index: 1, count: 3, dirs: 3, storeID: goldenID}) {
		t.Fatalf("LAYOUT v2: %+v %v", back, err)
	}
	if back, err := decodeLayout("l", encodeLayoutV1(1, 3)); err != nil || back != (layout{index: 1, count: 3, dirs: 3}) {
		t.Fatalf("LAYOUT v1: %+v %v", back, err)
	}
	for name, b := range map[string][]byte{
		"CHECKPOINT v2": encodeCheckpoint(c), "CHECKPOINT v1": encodeCheckpointV1(c),
		"LAYOUT v3": encodeLayout(l), "LAYOUT v2": encodeLayoutV2(1, 3, goldenID), "LAYOUT v1": encodeLayoutV1(1, 3),
	} {
		decode := func(b []byte) error { _, err := decodeLayout("f", b); return err }
		if name[0] == 'C' {
			decode = func(b []byte) error { _, err := decodeCheckpoint("f", b); return err }
		}
		for i := range b {
			bad := bytes.Clone(b)
			bad[i] ^= 0x20
			if err := decode(bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: flipping byte %d gave %v, want ErrCorrupt", name, i, err)
			}
		}
		if err := decode(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: truncated: %v", name, err)
		}
	}
}

// TestStoreFilesRefuseNonsense: files whose checksum is right but whose
// content Folio never writes are corrupt, not read.
func TestStoreFilesRefuseNonsense(t *testing.T) {
	for name, b := range map[string][]byte{
		"zero store id":          encodeLayout(layout{index: 0, count: 1, dirs: 1}),
		"v2 zero store id":       encodeLayoutV2(0, 1, StoreID{}),
		"directory beyond dirs":  encodeLayout(layout{index: 2, count: 2, dirs: 2, storeID: goldenID}),
		"shard beyond count v2":  encodeLayoutV2(2, 2, goldenID),
		"fewer dirs than shards": encodeLayout(layout{index: 0, count: 2, dirs: 1, storeID: goldenID}),
		"no shards":              encodeLayout(layout{index: 0, count: 0, dirs: 1, storeID: goldenID}),
		"version 4":              withVersion(encodeLayout(layout{index: 0, count: 1, dirs: 1, storeID: goldenID}), 4),
	} {
		if _, err := decodeLayout("LAYOUT", b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("LAYOUT with %s: %v", name, err)
		}
	}
	for name, c := range map[string]checkpoint{
		"zero store id":        {journalCount: 1, ledgerDirCount: 1},
		"journal beyond count": {journalIndex: 1, journalCount: 1, ledgerDirCount: 1, storeID: goldenID},
		"no ledger dirs":       {journalCount: 1, storeID: goldenID},
		"offset without file":  {journalCount: 1, ledgerDirCount: 1, storeID: goldenID, pos: journal.Position{Offset: 512}},
	} {
		if _, err := decodeCheckpoint("CHECKPOINT", encodeCheckpoint(c)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("CHECKPOINT with %s: %v", name, err)
		}
	}
}

// withVersion rewrites a store file's version and checksum.
func withVersion(b []byte, v uint32) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[8:], v)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}
