package index

import (
	"encoding/hex"
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
