package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FuzzDecodeRecord: no input panics; with frame the length field is made
// to match the input, with fixCRC the checksum too, so that fuzzing reaches
// the payload checks. A record that decodes is one Append accepts and
// re-encodes to the same bytes at the same position; an error is reported
// only for a record whose checksum is valid.
func FuzzDecodeRecord(f *testing.F) {
	for i, r := range []Record{
		{Type: TypeAddEntry, LedgerID: 7, EntryID: 3, Body: []byte("hello")},
		{Type: TypeMasterKey, LedgerID: 7, Body: []byte("0123456789abcdef0123")},
		{Type: TypeFence, LedgerID: -2},
		{Type: TypeExplicitLAC, LedgerID: 1 << 40, Body: []byte{0, 0, 0, 1}},
	} {
		f.Add(uint64(1), int64(FirstGroupOffset), appendRecord(nil, 1, FirstGroupOffset, &r, i%2 == 0), false, false)
		f.Add(uint64(9), int64(4096+10*i), appendRecord(nil, 9, int64(4096+10*i), &r, false), true, true)
	}
	f.Add(uint64(1), int64(512), []byte{0, 0, 0, 0, 0, 0, 0, 0, 9, 0}, true, true)
	f.Fuzz(func(t *testing.T, fileID uint64, off int64, b []byte, frame, fixCRC bool) {
		if len(b) >= RecordHeaderSize {
			b = bytes.Clone(b)
			if frame {
				binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-RecordHeaderSize))
			}
			if fixCRC {
				binary.LittleEndian.PutUint32(b, recordCRC(fileID, off, b))
			}
		}
		var rec Record
		flags, ok, err := decodeRecord(fileID, off, b, &rec)
		crcValid := len(b) >= RecordHeaderSize && binary.LittleEndian.Uint32(b) == recordCRC(fileID, off, b)
		switch {
		case err != nil && !crcValid:
			t.Fatalf("error %v for bytes without a valid checksum", err)
		case err != nil, !ok:
			return
		}
		if err := rec.validate(); err != nil {
			t.Fatalf("decoded a record Append refuses: %v (%+v)", err, rec)
		}
		if again := appendRecord(nil, fileID, off, &rec, flags&flagGroupStart != 0); !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, rec, again)
		}
	})
}

// FuzzDecodeFileHeader: no input panics; a header that decodes names the
// wanted file, a previous file below it, and re-encodes to the same bytes.
func FuzzDecodeFileHeader(f *testing.F) {
	f.Add(encodeFileHeader(formatVersion1, 1, 0, 0)[:fileHeaderUsed], uint64(1), false)
	f.Add(encodeFileHeader(FormatVersion, 7, 6, 4096)[:fileHeaderUsed], uint64(7), false)
	f.Add(encodeFileHeader(FormatVersion, 7, 6, 4096), uint64(7), true)
	f.Add([]byte(fileMagic), uint64(1), true)
	f.Fuzz(func(t *testing.T, b []byte, want uint64, fixCRC bool) {
		if fixCRC && len(b) >= fileHeaderUsed {
			b = bytes.Clone(b)
			binary.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], castagnoli))
		}
		h, err := decodeFileHeader(b, want)
		if err != nil {
			return
		}
		if h.fileID != want || h.prevID >= h.fileID {
			t.Fatalf("nonsense header decoded: %+v", h)
		}
		if again := encodeFileHeader(h.version, h.fileID, h.prevID, h.prevEnd)[:fileHeaderUsed]; !bytes.Equal(again, b[:fileHeaderUsed]) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b[:fileHeaderUsed], h, again)
		}
	})
}

// FuzzReplayFile replays a version 1 journal file whose body (everything
// after the header block) is the input: no input panics; replay ends
// cleanly or with a CorruptionError; every record it delivers lies, at
// increasing positions inside the file, exactly where appendRecord puts
// it.
func FuzzReplayFile(f *testing.F) {
	f.Add(goldenBody(f))
	f.Add(seedBody())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) { fuzzReplay(t, formatVersion1, body) })
}

// FuzzReplayFileV2 is FuzzReplayFile for version 2 files.
func FuzzReplayFileV2(f *testing.F) {
	f.Add(readHexDump(f, "testdata/golden-v2.hex")[FirstGroupOffset:])
	f.Add(seedBodyV2(false))
	f.Add(seedBodyV2(true))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) { fuzzReplay(t, FormatVersion, body) })
}

func fuzzReplay(t *testing.T, version uint32, body []byte) {
	file := append(encodeFileHeader(version, 1, 0, 0), body...)
	fs := vfs.NewMem()
	if err := fs.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := fs.Create(fs.PathJoin(testDir, fileName(1)), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// A copy: in invariant (race) builds MemFS scribbles on written buffers.
	if _, err := w.Write(bytes.Clone(file)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var last Position
	err = Replay(fs, testDir, Position{}, func(pos Position, rec Record) error {
		if pos.File != 1 || pos.Offset <= last.Offset || pos.Offset > int64(len(file)) {
			t.Fatalf("record at %v after %v in a %d-byte file", pos, last, len(file))
		}
		start := pos.Offset - int64(rec.encodedSize())
		if start < max(last.Offset, FirstGroupOffset) {
			t.Fatalf("record ending at %v starts at %d, before the previous end %v", pos, start, last)
		}
		got := file[start:pos.Offset]
		if !bytes.Equal(got, appendRecord(nil, 1, start, &rec, true)) && !bytes.Equal(got, appendRecord(nil, 1, start, &rec, false)) {
			t.Fatalf("record %+v delivered at %d is not the bytes there", rec, start)
		}
		last = pos
		return nil
	})
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("replay error %v is not a CorruptionError", err)
	}
}

// goldenBody is the body of testdata/golden-v1.hex (a hex dump).
func goldenBody(f *testing.F) []byte {
	return readHexDump(f, "testdata/golden-v1.hex")[FirstGroupOffset:]
}

// readHexDump returns the bytes of a hex dump (hex.Dump's format).
func readHexDump(tb testing.TB, path string) []byte {
	tb.Helper()
	dump, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var b []byte
	for _, line := range strings.Split(string(dump), "\n") {
		if len(line) < 10 {
			continue
		}
		hexPart, _, _ := strings.Cut(line[10:], "|")
		raw, err := hex.DecodeString(strings.ReplaceAll(hexPart, " ", ""))
		if err != nil {
			tb.Fatalf("dump %s line %q: %v", path, line, err)
		}
		b = append(b, raw...)
	}
	return b
}

// seedBody is two groups of records, as the writer lays them out.
func seedBody() []byte {
	b := encodeFileHeader(formatVersion1, 1, 0, 0)
	for g := range 2 {
		for i := range 3 {
			r := Record{Type: TypeAddEntry, LedgerID: 5, EntryID: int64(g*3 + i), Body: []byte("entry body")}
			b = appendRecord(b, 1, int64(len(b)), &r, i == 0)
		}
		b = append(b, make([]byte, alignUp(int64(len(b)))-int64(len(b)))...)
	}
	return b[FirstGroupOffset:]
}

// seedBodyV2 is three version 2 groups of records as the writer lays them
// out; with torn, the second group's payload is damaged (a torn tail).
func seedBodyV2(torn bool) []byte {
	b := encodeFileHeader(FormatVersion, 1, 0, 0)
	for g := range 3 {
		base := int64(len(b))
		b = append(b, make([]byte, GroupHeaderSize)...)
		for i := range 3 {
			r := Record{Type: TypeAddEntry, LedgerID: 5, EntryID: int64(g*3 + i), Body: []byte("entry body")}
			b = appendRecord(b, 1, int64(len(b)), &r, false)
		}
		putGroupHeader(b[base:], 1, base, uint64(g+1), 0)
		if torn && g == 1 {
			b[len(b)-1] ^= 0xff
		}
		b = append(b, make([]byte, alignUp(int64(len(b)))-int64(len(b)))...)
	}
	return b[FirstGroupOffset:]
}

// FuzzDecodeGroupHeader: no input panics; a header that decodes
// re-encodes to the same bytes.
func FuzzDecodeGroupHeader(f *testing.F) {
	b := make([]byte, GroupHeaderSize+20)
	putGroupHeader(b, 3, 1024, 2, 4096)
	f.Add(b[:GroupHeaderSize], uint64(3), int64(1024), false)
	f.Add(make([]byte, GroupHeaderSize), uint64(1), int64(512), true)
	f.Fuzz(func(t *testing.T, b []byte, fileID uint64, off int64, fixCRC bool) {
		if len(b) >= GroupHeaderSize {
			b = bytes.Clone(b[:GroupHeaderSize])
			if fixCRC {
				binary.LittleEndian.PutUint32(b, groupCRC(fileID, off, b))
			}
		}
		h, ok, err := decodeGroupHeader(fileID, off, b)
		if err != nil || !ok {
			return
		}
		if h.seq == 0 || h.prevEnd != 0 && h.prevEnd < FirstGroupOffset {
			t.Fatalf("nonsense header decoded: %+v", h)
		}
		again := make([]byte, GroupHeaderSize)
		binary.LittleEndian.PutUint32(again[4:], uint32(h.length))
		binary.LittleEndian.PutUint32(again[8:], h.payloadCRC)
		binary.LittleEndian.PutUint64(again[16:], h.seq)
		binary.LittleEndian.PutUint64(again[24:], uint64(h.prevEnd))
		binary.LittleEndian.PutUint32(again, groupCRC(fileID, off, again))
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, h, again)
		}
	})
}
