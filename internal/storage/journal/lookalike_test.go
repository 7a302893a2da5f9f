package journal

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lookalikeHeader returns a valid group header of file 1 at off with seq
// and a claimed payload length, as a client could put in an entry body.
func lookalikeHeader(off int64, seq uint64, length uint32) []byte {
	b := make([]byte, GroupHeaderSize)
	binary.LittleEndian.PutUint32(b[4:], length)
	binary.LittleEndian.PutUint32(b[8:], 0x12345678)
	binary.LittleEndian.PutUint64(b[16:], seq)
	binary.LittleEndian.PutUint32(b, groupCRC(1, off, b))
	return b
}

// Bit rot in the header of a synced, acknowledged group whose entry body
// holds a look-alike header of the next group with a huge length: replay
// must still find the real later groups (proof the damaged one was synced)
// and report corruption, not cut every acknowledged group from there on as
// a torn tail.
func TestLookalikeSuccessorDoesNotHideSyncedGroups(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	spans := writeGroups(t, j, 2, 1)
	base3 := alignUp(spans[1][0].end)
	fakeAt := base3 + GroupAlignment
	const bodyAt = GroupHeaderSize + RecordHeaderSize + 16 // group header, record header, ledger and entry ids
	b := make([]byte, 1200)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	copy(b[fakeAt-base3-bodyAt:], lookalikeHeader(fakeAt, 4, 64<<10))
	appendGroup(t, j, 0, b)
	for e := int64(1); e <= 3; e++ {
		appendGroup(t, j, e, body(2, e))
	}
	j.Close()
	if got, err := replayAll(t, fs, Position{}); err != nil || len(got) != 6 {
		t.Fatalf("intact journal: %d records, %v; want 6", len(got), err)
	}
	flipByte(t, fs, file1, base3+20) // group 3's header (its sequence number)
	got, err := replayAll(t, fs, Position{})
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("damaged header of acknowledged group 3: replay returned %d records, err %v; want a *CorruptionError", len(got), err)
	}
}

// An all-zero block is preallocated space wherever it is, also at the
// (file, offset) pairs whose CRC of zeros happens to be zero (file 4634,
// offset 219351040 is one): never a header, never an error.
func TestZeroBlockIsNeverAHeader(t *testing.T) {
	zeros := make([]byte, GroupHeaderSize)
	if binary.LittleEndian.Uint32(zeros) != groupCRC(4634, 219351040, zeros) {
		t.Fatal("the test's (file, offset) no longer has a zero checksum of zeros; find another")
	}
	h, ok, err := decodeGroupHeader(4634, 219351040, zeros)
	if ok || err != nil {
		t.Fatalf("decodeGroupHeader(zeros) = %+v, %v, %v; want no header and no error", h, ok, err)
	}
}
