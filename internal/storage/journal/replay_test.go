package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata/")

// manualJournal opens a Manual journal in one big file.
func manualJournal(t *testing.T, fs vfs.FS) *Journal {
	t.Helper()
	opts := smallOpts()
	opts.Manual = true
	opts.MaxFileBytes = 1 << 20
	j, err := Open(fs, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// span is where one record lies.
type span struct{ start, end int64 }

// writeGroups appends `groups` groups of `per` entries of ledger 1, one
// Flush per group, and returns each record's span (all in file 1).
func writeGroups(t *testing.T, j *Journal, groups, per int) [][]span {
	t.Helper()
	var out [][]span
	e := int64(0)
	for range groups {
		rec := newRecorder()
		var keys [][2]int64
		for range per {
			if err := j.AppendEntry(1, e, body(1, e), rec.cb(1, e)); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, [2]int64{1, e})
			e++
		}
		if n, err := j.Flush(); n != per || err != nil {
			t.Fatalf("flush: %d %v", n, err)
		}
		var g []span
		for _, k := range keys {
			end := rec.acks[k].pos.Offset
			g = append(g, span{end - int64(RecordHeaderSize+16+len(body(k[0], k[1]))), end})
		}
		out = append(out, g)
	}
	return out
}

func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func patch(t *testing.T, fs vfs.FS, path string, off int64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, fs vfs.FS, path string, off int64) {
	t.Helper()
	b := readAll(t, fs, path)
	patch(t, fs, path, off, []byte{b[off] ^ 0x5a})
}

// truncate rewrites path with only its first n bytes.
func truncate(t *testing.T, fs vfs.FS, path string, n int64) {
	t.Helper()
	b := readAll(t, fs, path)[:n]
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(b)); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func expectCorruption(t *testing.T, err error, path string, off int64) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want a corruption error at %s:%d, got %v", path, off, err)
	}
	if ce.File != path || ce.Offset != off {
		t.Fatalf("corruption reported at %s:%d, want %s:%d (%v)", ce.File, ce.Offset, path, off, err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprint(off)) {
		t.Fatalf("message does not name file and offset: %v", err)
	}
}

var file1 = testDir + "/" + fileName(1)

func TestCorruptRecordInMiddleIsAnError(t *testing.T) {
	cases := []struct {
		name  string
		group int
		rec   int
		at    func(s span) int64 // byte to flip
	}{
		{"body", 1, 1, func(s span) int64 { return s.end - 3 }},
		{"length", 1, 0, func(s span) int64 { return s.start + 5 }},
		{"group-start-crc", 2, 0, func(s span) int64 { return s.start }},
		{"first-group", 0, 2, func(s span) int64 { return s.start + RecordHeaderSize + 2 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			j := manualJournal(t, fs)
			spans := writeGroups(t, j, 4, 3)
			j.Close()
			s := spans[c.group][c.rec]
			flipByte(t, fs, file1, c.at(s))
			_, err := replayAll(t, fs, Position{})
			expectCorruption(t, err, file1, s.start)
			// Open refuses the directory too: synced data is damaged.
			if _, err := Open(fs, testDir, smallOpts()); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v", err)
			}
		})
	}
}

func TestLostSectorInMiddleIsAnError(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	spans := writeGroups(t, j, 6, 12)
	j.Close()
	// Zero a whole aligned sector inside group 2 (a lost write).
	g := spans[2]
	sector := alignUp(g[0].start + 1)
	if sector+GroupAlignment > g[len(g)-1].end {
		t.Fatalf("group 2 too small for the test: %v", g)
	}
	patch(t, fs, file1, sector, make([]byte, GroupAlignment))
	var at int64
	for _, s := range g {
		if s.end > sector {
			at = s.start
			break
		}
	}
	_, err := replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, at)
}

func TestTornTailIsCut(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, fs vfs.FS, last []span)
		keep   int // records of the last group that survive
	}{
		{"flipped-last-record", func(t *testing.T, fs vfs.FS, last []span) {
			flipByte(t, fs, file1, last[2].end-1)
		}, 2},
		{"zeroed-from-middle-record", func(t *testing.T, fs vfs.FS, last []span) {
			patch(t, fs, file1, last[1].start+4, make([]byte, last[2].end-last[1].start-4))
		}, 1},
		{"zeroed-header-then-kept-block", func(t *testing.T, fs vfs.FS, last []span) {
			// The group's middle never reached the disk but a later block
			// of it did: still the unsynced last group, so cut.
			patch(t, fs, file1, last[0].start, make([]byte, RecordHeaderSize))
		}, 0},
		{"file-cut-mid-record", func(t *testing.T, fs vfs.FS, last []span) {
			truncate(t, fs, file1, last[1].start+7)
		}, 1},
		{"file-cut-mid-header", func(t *testing.T, fs vfs.FS, last []span) {
			truncate(t, fs, file1, last[0].start+3)
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			j := manualJournal(t, fs)
			spans := writeGroups(t, j, 3, 3)
			j.Close()
			c.damage(t, fs, spans[2])
			got, err := replayAll(t, fs, Position{})
			if err != nil {
				t.Fatalf("torn tail not cut: %v", err)
			}
			if want := 6 + c.keep; len(got) != want {
				t.Fatalf("replayed %d records, want %d", len(got), want)
			}
			// Reopen: the cut point becomes the file's recorded end, and
			// the journal writes on in a new file.
			j2, err := Open(fs, testDir, smallOpts())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j2.AppendSync(Record{Type: TypeFence, LedgerID: 9}); err != nil {
				t.Fatal(err)
			}
			j2.Close()
			got2, err := replayAll(t, fs, Position{})
			if err != nil || len(got2) != len(got)+1 {
				t.Fatalf("after reopen: %d records, %v", len(got2), err)
			}
		})
	}
}

// Once a later file records where this one ended, losing its last group is
// corruption, not a torn tail.
func TestDamageBeforeRecordedEndIsAnError(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	spans := writeGroups(t, j, 3, 3)
	j.Close()
	j2, err := Open(fs, testDir, smallOpts()) // file 2 records file 1's end
	if err != nil {
		t.Fatal(err)
	}
	j2.Close()
	last := spans[2]
	flipByte(t, fs, file1, last[2].start+RecordHeaderSize)
	_, err = replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, last[2].start)
	if !strings.Contains(err.Error(), fileName(2)) {
		t.Fatalf("error does not say which file recorded the end: %v", err)
	}
}

func TestZeroTailIsCleanEnd(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	spans := writeGroups(t, j, 2, 2)
	j.Close()
	st, err := fs.Stat(file1)
	if err != nil {
		t.Fatal(err)
	}
	end := spans[1][1].end
	if st.Size() < end+smallOpts().PreallocBytes/2 {
		t.Fatalf("file is %d bytes, log ends at %d: no zeros preallocated ahead", st.Size(), end)
	}
	if b := readAll(t, fs, file1)[end:]; !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("preallocated tail is not zeros")
	}
	got, err := replayAll(t, fs, Position{})
	if err != nil || len(got) != 4 {
		t.Fatalf("replay: %d records, %v", len(got), err)
	}
	// Replay from a checkpoint at the very end delivers nothing.
	got, err = replayAll(t, fs, Position{File: 1, Offset: end})
	if err != nil || len(got) != 0 {
		t.Fatalf("replay from the end: %d records, %v", len(got), err)
	}
	// And from a mid-group position, exactly the rest.
	got, err = replayAll(t, fs, Position{File: 1, Offset: spans[0][0].end})
	if err != nil || len(got) != 3 {
		t.Fatalf("replay from mid-group: %d records, %v", len(got), err)
	}
}

func TestUnknownRecordTypeIsAnError(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	spans := writeGroups(t, j, 2, 2)
	j.Close()
	// Rewrite record 1 of group 0 as type 9 with a valid checksum, as a
	// newer format would.
	s := spans[0][1]
	b := readAll(t, fs, file1)[s.start:s.end]
	b[8] = 9
	binary.LittleEndian.PutUint32(b, recordCRC(1, s.start, b))
	patch(t, fs, file1, s.start, b)
	_, err := replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, s.start)
	if !strings.Contains(err.Error(), "unknown record type(9)") {
		t.Fatalf("message does not name the type: %v", err)
	}
}

func TestBadFileHeaderIsAnError(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	writeGroups(t, j, 1, 1)
	j.Close()
	patch(t, fs, file1, 0, []byte("NOTAJRNL"))
	_, err := replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, 0)
}

func TestPositionCRC(t *testing.T) {
	for _, p := range [][2]uint64{{0, 0}, {1, 512}, {0xfedcba9876543210, 1 << 40}} {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], p[0])
		binary.LittleEndian.PutUint64(b[8:], p[1])
		if got, want := positionCRC(p[0], p[1]), crc32.Update(0, castagnoli, b[:]); got != want {
			t.Errorf("positionCRC(%v) = %#x, want %#x", p, got, want)
		}
	}
}

// TestGoldenFile pins format version 1: a journal with one group of each
// record type and a second group must have exactly these bytes.
func TestGoldenFile(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	cb := &countingCB{}
	for _, r := range []Record{
		{Type: TypeMasterKey, LedgerID: 7, Body: []byte("0123456789abcdef0123")},
		{Type: TypeAddEntry, LedgerID: 7, EntryID: 0, Body: []byte("hello")},
		{Type: TypeAddEntry, LedgerID: 7, EntryID: 1, Body: []byte("world")},
		{Type: TypeExplicitLAC, LedgerID: 7, Body: []byte{0, 0, 0, 1}},
	} {
		if err := j.Append(r, cb); err != nil {
			t.Fatal(err)
		}
	}
	j.Flush()
	if err := j.AppendFence(-2, cb); err != nil {
		t.Fatal(err)
	}
	j.Flush()
	j.Close()
	b := readAll(t, fs, file1)
	b = bytes.TrimRight(b, "\x00")
	got := hex.Dump(b)
	const path = "testdata/golden-v1.hex"
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("journal bytes differ from %s (format change? bump FormatVersion):\n%s", path, got)
	}
}
