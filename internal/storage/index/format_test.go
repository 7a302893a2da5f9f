package index

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"
)

// Index keys and values are Folio's own format; these bytes pin version 1.
func TestFormatGolden(t *testing.T) {
	if got := hex.EncodeToString(entryKey(0x0102, 7)); got != "65"+"0000000000000102"+"0000000000000007" {
		t.Fatalf("entry key %s", got)
	}
	if got := hex.EncodeToString(stateKey(0x0102)); got != "73"+"0000000000000102" {
		t.Fatalf("state key %s", got)
	}
	l := Location{LogID: 3, Offset: 0x20, Size: 1024}
	v := encodeLocation(nil, l)
	if got := hex.EncodeToString(v); got != "01"+"0000000000000003"+"0000000000000020"+"00000400" {
		t.Fatalf("location value %s", got)
	}
	if back, err := decodeLocation(entryKey(1, 2), v); err != nil || back != l {
		t.Fatalf("decode: %v %v", back, err)
	}
	st := State{MasterKey: []byte{0xaa, 0xbb}, Fenced: true, ExplicitLAC: []byte{0x01}}
	sv := encodeState(st)
	if got := hex.EncodeToString(sv[:len(sv)-4]); got != "01"+"05"+"02aabb"+"0101" {
		t.Fatalf("state value %s", got)
	}
	back, err := decodeState(1, stateKey(1), sv)
	if err != nil || !back.Fenced || back.Deleted || string(back.MasterKey) != string(st.MasterKey) || string(back.ExplicitLAC) != "\x01" {
		t.Fatalf("decode state: %+v %v", back, err)
	}
	for i := range sv {
		c := append([]byte(nil), sv...)
		c[i] ^= 0x10
		if _, err := decodeState(1, stateKey(1), c); err == nil {
			t.Fatalf("corruption at byte %d not detected", i)
		}
	}
}

func TestStampFormatGolden(t *testing.T) {
	st := Stamp{Shard: 1, Shards: 3}
	for i := range st.StoreID {
		st.StoreID[i] = byte(i + 1)
	}
	v := encodeStamp(st)
	if got := hex.EncodeToString(v); got != "01"+"0102030405060708090a0b0c0d0e0f10"+"00000001"+"00000003"+"41003a15" {
		t.Fatalf("stamp value %s", got)
	}
	if back, err := decodeStamp(v); err != nil || back != st {
		t.Fatalf("decode: %+v %v", back, err)
	}
	for i := range v {
		c := append([]byte(nil), v...)
		c[i] ^= 0x04
		if _, err := decodeStamp(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corruption at byte %d: %v", i, err)
		}
	}
	for _, bad := range []Stamp{{Shard: 0, Shards: 1}, {StoreID: st.StoreID, Shard: 3, Shards: 3}} {
		if _, err := decodeStamp(encodeStamp(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("stamp %+v decoded: %v", bad, err)
		}
	}
}

// TestStateDecodingIsStrict: only what encodeState writes decodes, so a
// decoded value re-encodes to the same bytes.
func TestStateDecodingIsStrict(t *testing.T) {
	withCRC := func(body ...byte) []byte {
		return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	}
	for name, v := range map[string][]byte{
		"non-minimal key length": withCRC(1, 0, 0x82, 0x00, 0xaa, 0xbb, 0),
		"LAC bytes without flag": withCRC(1, 0, 0, 1, 0x07),
		"unknown flag":           withCRC(1, 0x08, 0, 0),
		"trailing bytes":         withCRC(1, 0, 0, 0, 9),
	} {
		if _, err := decodeState(1, stateKey(1), v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decoded (%v)", name, err)
		}
	}
}
