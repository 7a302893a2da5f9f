package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// withFixedCRC returns v with its last four bytes replaced by the CRC32C of
// the rest, so that fuzzing reaches the parsing behind the checksum.
func withFixedCRC(v []byte) []byte {
	if len(v) < 4 {
		return v
	}
	c := bytes.Clone(v)
	binary.BigEndian.PutUint32(c[len(c)-4:], crc32.Checksum(c[:len(c)-4], castagnoli))
	return c
}

// FuzzDecodeLocation: no value panics; a value that decodes re-encodes to
// the same bytes; every failure is a CorruptionError.
func FuzzDecodeLocation(f *testing.F) {
	f.Add(encodeLocation(nil, Location{LogID: 3, Offset: 32, Size: 1024}))
	f.Add(encodeLocation(nil, Location{LogID: 1<<64 - 1, Offset: 1 << 62, Size: 1<<32 - 1}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, v []byte) {
		l, err := decodeLocation(entryKey(5, 6), v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if again := encodeLocation(nil, l); !bytes.Equal(again, v) {
			t.Fatalf("%x decodes to %v, which encodes to %x", v, l, again)
		}
	})
}

// FuzzDecodeState: no value panics; the decoded fields are slices of the
// input (allocation bounded by its length); a value that decodes
// re-encodes to the same bytes. fixCRC patches the checksum first.
func FuzzDecodeState(f *testing.F) {
	for _, st := range []State{
		{},
		{MasterKey: []byte{0xaa, 0xbb}, Fenced: true, ExplicitLAC: []byte{0x01}},
		{MasterKey: bytes.Repeat([]byte{7}, 200), Fenced: true, Deleted: true},
		{MasterKey: []byte("k"), ExplicitLAC: []byte{}},
	} {
		f.Add(encodeState(st), false)
		f.Add(encodeState(st), true)
	}
	f.Fuzz(func(t *testing.T, v []byte, fixCRC bool) {
		if fixCRC {
			v = withFixedCRC(v)
		}
		st, err := decodeState(1, stateKey(1), v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(st.MasterKey)+len(st.ExplicitLAC) > len(v) {
			t.Fatalf("decoded %d bytes of fields from a %d-byte value", len(st.MasterKey)+len(st.ExplicitLAC), len(v))
		}
		if again := encodeState(st); !bytes.Equal(again, v) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", v, st, again)
		}
	})
}

// FuzzDecodeStamp: no value panics; a stamp that decodes re-encodes to the
// same bytes and names a valid shard with a non-zero store id.
func FuzzDecodeStamp(f *testing.F) {
	seed := encodeStamp(Stamp{StoreID: [16]byte{1, 2, 3}, Shard: 1, Shards: 2})
	f.Add(seed, false)
	f.Add(seed, true)
	f.Add(seed[:10], true)
	f.Fuzz(func(t *testing.T, v []byte, fixCRC bool) {
		if fixCRC {
			v = withFixedCRC(v)
		}
		st, err := decodeStamp(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if st.StoreID == ([16]byte{}) || st.Shard >= st.Shards {
			t.Fatalf("invalid stamp decoded: %+v", st)
		}
		if again := encodeStamp(st); !bytes.Equal(again, v) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", v, st, again)
		}
	})
}
