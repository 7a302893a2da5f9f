package entrylog

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"testing"
)

// The entry log format is Folio's own; these bytes pin version 1 (see the
// package comment). A change here is a format change: bump FormatVersion.
func TestFormatGolden(t *testing.T) {
	var h [HeaderSize]byte
	encodeHeader(h[:], 0x0102)
	const wantHeader = "464f4c494f4c4f47" + "00000001" + "0000000000000102" + "0000000000000000" + "52aab8c1"
	if got := hex.EncodeToString(h[:]); got != wantHeader {
		t.Fatalf("header\n got %s\nwant %s", got, wantHeader)
	}
	if reason := checkHeader(h[:], 0x0102); reason != "" {
		t.Fatal(reason)
	}
	if reason := checkHeader(h[:], 0x0103); reason == "" {
		t.Fatal("header of another log accepted")
	}
	rec := appendRecord(nil, 7, 9, []byte("folio"))
	const wantRecord = "00000005" + "8cd92cfc" + "0000000000000007" + "0000000000000009" + "666f6c696f"
	if got := hex.EncodeToString(rec); got != wantRecord {
		t.Fatalf("record\n got %s\nwant %s", got, wantRecord)
	}
	r, total, need, reason := parseRecord(rec)
	if reason != "" || need != 0 || total != len(rec) || r.ledgerID != 7 || r.entryID != 9 || string(r.body) != "folio" {
		t.Fatalf("parse: %+v %d %d %q", r, total, need, reason)
	}
	// Every single-bit flip is caught.
	for i := range rec {
		for bit := 0; bit < 8; bit++ {
			c := append([]byte(nil), rec...)
			c[i] ^= 1 << bit
			if _, total, _, reason := parseRecord(c); reason == "" && total == len(rec) {
				t.Fatalf("flip of byte %d bit %d not detected", i, bit)
			}
		}
	}
	if _, _, need, _ := parseRecord(rec[:10]); need != RecordHeaderSize {
		t.Fatalf("short header: need %d", need)
	}
	if _, _, need, _ := parseRecord(rec[:26]); need != len(rec) {
		t.Fatalf("short body: need %d", need)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add(appendRecord(nil, 1, 2, []byte("x")))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, total, _, reason := parseRecord(b)
		if reason == "" && total > 0 {
			again := appendRecord(nil, r.ledgerID, r.entryID, r.body)
			if string(again) != string(b[:total]) {
				t.Fatal("accepted record does not re-encode to itself")
			}
		}
	})
}

// FuzzCheckHeader: no input panics; a header that verifies is exactly the
// one encodeHeader writes for that log (fixCRC patches the checksum so
// that fuzzing reaches the checks behind it).
func FuzzCheckHeader(f *testing.F) {
	h := make([]byte, HeaderSize)
	encodeHeader(h, 3)
	f.Add(h, uint64(3), false)
	f.Add(h, uint64(4), true)
	f.Add(h[:20], uint64(3), true)
	f.Fuzz(func(t *testing.T, b []byte, id uint64, fixCRC bool) {
		if fixCRC && len(b) >= HeaderSize {
			b = append([]byte(nil), b...)
			binary.BigEndian.PutUint32(b[28:32], crc32.Checksum(b[0:28], castagnoli))
		}
		if checkHeader(b, id) != "" {
			return
		}
		want := make([]byte, HeaderSize)
		encodeHeader(want, id)
		if string(b[:HeaderSize]) != string(want) {
			t.Fatalf("header %x verifies for log %d, but that log's header is %x", b[:HeaderSize], id, want)
		}
	})
}
