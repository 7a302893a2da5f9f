package ledgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/foliodb/folio/internal/storage/journal"
)

// fixCRC replaces a store file's trailing checksum with the right one, so
// that fuzzing reaches the checks behind it.
func fixCRC(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// FuzzDecodeCheckpoint: no input panics; every failure is ErrCorrupt; a
// version 2 file that decodes re-encodes to the same bytes, a version 1
// file to what version 1 wrote, and what decodes is a sensible checkpoint.
func FuzzDecodeCheckpoint(f *testing.F) {
	c := checkpoint{journalIndex: 1, journalCount: 2, ledgerDirCount: 3, pos: journal.Position{File: 5, Offset: 0x200}, storeID: goldenID}
	f.Add(encodeCheckpoint(c), false)
	f.Add(encodeCheckpointV1(c), false)
	f.Add(encodeCheckpoint(checkpoint{journalCount: 1, ledgerDirCount: 1, storeID: goldenID}), true)
	f.Add(encodeLayout(layout{count: 1, storeID: goldenID}), true)
	f.Fuzz(func(t *testing.T, b []byte, patch bool) {
		if patch {
			b = fixCRC(b)
		}
		got, err := decodeCheckpoint("CHECKPOINT", b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if got.journalIndex >= got.journalCount || got.ledgerDirCount == 0 || got.pos.Offset < 0 {
			t.Fatalf("nonsense checkpoint decoded: %+v", got)
		}
		again := encodeCheckpoint(got)
		if got.storeID == (StoreID{}) {
			again = encodeCheckpointV1(got)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, got, again)
		}
	})
}

// FuzzDecodeLayout: as FuzzDecodeCheckpoint, for LAYOUT.
func FuzzDecodeLayout(f *testing.F) {
	f.Add(encodeLayout(layout{index: 4, count: 3, dirs: 5, storeID: goldenID}), false)
	f.Add(encodeLayoutV2(1, 3, goldenID), false)
	f.Add(encodeLayoutV1(1, 3), false)
	f.Add(encodeLayout(layout{index: 0, count: 1, dirs: 1, storeID: goldenID}), true)
	f.Add(encodeCheckpoint(checkpoint{journalCount: 1, ledgerDirCount: 1, storeID: goldenID}), true)
	f.Fuzz(func(t *testing.T, b []byte, patch bool) {
		if patch {
			b = fixCRC(b)
		}
		got, err := decodeLayout("LAYOUT", b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if got.index >= got.dirs || got.count == 0 || got.count > got.dirs {
			t.Fatalf("nonsense layout decoded: %+v", got)
		}
		again := encodeLayout(got)
		switch {
		case got.storeID == (StoreID{}):
			again = encodeLayoutV1(got.index, got.count)
		case len(b) == layoutSizeV2:
			again = encodeLayoutV2(got.index, got.count, got.storeID)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, got, again)
		}
	})
}
