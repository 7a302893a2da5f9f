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
	"slices"
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
		// Four groups: damage in the first two is before the last two,
		// which are the only ones a crash can leave unsynced.
		{"body", 1, 1, func(s span) int64 { return s.end - 3 }},
		{"length", 1, 0, func(s span) int64 { return s.start + 5 }},
		{"record-crc", 1, 0, func(s span) int64 { return s.start }},
		{"group-header-crc", 1, 0, func(s span) int64 { return s.start - GroupHeaderSize }},
		{"group-header-length", 0, 0, func(s span) int64 { return s.start - GroupHeaderSize + 4 }},
		{"group-header-seq", 1, 0, func(s span) int64 { return s.start - GroupHeaderSize + 16 }},
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
			// Reported at the damaged group's header.
			expectCorruption(t, err, file1, groupStart(spans, c.group))
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
	_, err := replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, groupStart(spans, 2))
}

// groupStart is the offset of group g's header.
func groupStart(spans [][]span, g int) int64 { return spans[g][0].start - GroupHeaderSize }

// TestTornTailIsCut covers the torn-tail clauses of the version 2 replay
// rule: damage confined to the last two groups of the last file (a crash
// can leave both unsynced: group N+1 is written while group N syncs) is cut
// at the first damaged group, whole groups only.
func TestTornTailIsCut(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, fs vfs.FS, spans [][]span)
		keep   int // groups (of 3 records) that survive, of 4
	}{
		{"flipped-last-record", func(t *testing.T, fs vfs.FS, spans [][]span) {
			flipByte(t, fs, file1, spans[3][2].end-1)
		}, 3},
		{"zeroed-from-middle-record", func(t *testing.T, fs vfs.FS, spans [][]span) {
			patch(t, fs, file1, spans[3][1].start+4, make([]byte, spans[3][2].end-spans[3][1].start-4))
		}, 3},
		{"zeroed-group-header-then-kept-block", func(t *testing.T, fs vfs.FS, spans [][]span) {
			// The group's header never reached the disk but its records did.
			patch(t, fs, file1, groupStart(spans, 3), make([]byte, GroupHeaderSize))
		}, 3},
		{"file-cut-mid-record", func(t *testing.T, fs vfs.FS, spans [][]span) {
			truncate(t, fs, file1, spans[3][1].start+7)
		}, 3},
		{"file-cut-mid-group-header", func(t *testing.T, fs vfs.FS, spans [][]span) {
			truncate(t, fs, file1, groupStart(spans, 3)+3)
		}, 3},
		{"second-to-last-torn-last-intact", func(t *testing.T, fs vfs.FS, spans [][]span) {
			// Group N+1 reached the disk whole while group N's sync was
			// still running: N is cut, and N+1 with it (never acknowledged:
			// acknowledgements are in order).
			flipByte(t, fs, file1, spans[2][1].start+12)
		}, 2},
		{"second-to-last-header-lost-last-intact", func(t *testing.T, fs vfs.FS, spans [][]span) {
			patch(t, fs, file1, groupStart(spans, 2), make([]byte, GroupAlignment))
		}, 2},
		{"last-two-torn", func(t *testing.T, fs vfs.FS, spans [][]span) {
			flipByte(t, fs, file1, spans[2][0].start+12)
			flipByte(t, fs, file1, spans[3][0].start+12)
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			j := manualJournal(t, fs)
			spans := writeGroups(t, j, 4, 3)
			j.Close()
			c.damage(t, fs, spans)
			got, err := replayAll(t, fs, Position{})
			if err != nil {
				t.Fatalf("torn tail not cut: %v", err)
			}
			if want := 3 * c.keep; len(got) != want {
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
	// The last group of file 1 is damaged: a torn tail by the rule within
	// the file, but file 2 recorded that file 1 ended after it.
	last := spans[2]
	flipByte(t, fs, file1, last[2].start+RecordHeaderSize)
	_, err = replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, spans[1][2].end)
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
	all := readAll(t, fs, file1)
	b := all[s.start:s.end]
	b[8] = 9
	binary.LittleEndian.PutUint32(b, recordCRC(1, s.start, b))
	// And a valid group checksum over it.
	g0 := groupStart(spans, 0)
	putGroupHeader(all[g0:spans[0][1].end], 1, g0, 1, 0)
	patch(t, fs, file1, g0, all[g0:spans[0][1].end])
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

// TestGoldenFile pins format version 2: a journal with one group of each
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
	const path = "testdata/golden-v2.hex"
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

// writeFileBytes creates path holding b.
func writeFileBytes(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	if err := fs.MkdirAll(fs.PathDir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// A copy: in invariant (race) builds MemFS scribbles on written buffers.
	if _, err := f.Write(bytes.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadVersion1Files: a file written by the version 1 writer of an
// older build (testdata/golden-v1.hex: file 1, two groups, five records)
// replays; Open seals it and starts a version 2 file that records where it
// ends; a replay across both versions delivers everything; damage in the
// version 1 file is judged by the version 1 rule.
func TestReadVersion1Files(t *testing.T) {
	v1 := readHexDump(t, "testdata/golden-v1.hex")
	if v := binary.LittleEndian.Uint32(v1[8:]); v != 1 {
		t.Fatalf("golden-v1.hex holds version %d", v)
	}
	fs := vfs.NewMem()
	writeFileBytes(t, fs, file1, v1)
	got, err := replayAll(t, fs, Position{})
	if err != nil || len(got) != 5 {
		t.Fatalf("replay of the version 1 file: %d records, %v", len(got), err)
	}
	if got[4].rec.Type != TypeFence || got[4].rec.LedgerID != -2 || string(got[1].rec.Body) != "hello" {
		t.Fatalf("version 1 records decoded wrong: %+v", got)
	}
	j, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := j.Replay(Position{}, func(Position, Record) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("Journal.Replay over the version 1 file: %d records, %v", n, err)
	}
	var v2pos []Position
	for e := int64(0); e < 3; e++ {
		pos, err := j.AppendSync(Record{Type: TypeAddEntry, LedgerID: 8, EntryID: e, Body: body(8, e)})
		if err != nil {
			t.Fatal(err)
		}
		v2pos = append(v2pos, pos)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(readAll(t, fs, testDir+"/"+fileName(2))[8:]); v != FormatVersion {
		t.Fatalf("new file written in version %d", v)
	}
	got, err = replayAll(t, fs, Position{})
	if err != nil || len(got) != 8 {
		t.Fatalf("replay across versions: %d records, %v", len(got), err)
	}
	for i, p := range v2pos {
		if got[5+i].pos != p {
			t.Fatalf("record %d replayed at %v, acknowledged at %v", 5+i, got[5+i].pos, p)
		}
	}
	// From a checkpoint in the version 1 file, and in the version 2 file.
	if got, err := replayAll(t, fs, got[1].pos); err != nil || len(got) != 6 {
		t.Fatalf("replay from a version 1 position: %d records, %v", len(got), err)
	}
	if got, err := replayAll(t, fs, v2pos[0]); err != nil || len(got) != 2 {
		t.Fatalf("replay from a version 2 position: %d records, %v", len(got), err)
	}
	// A second Open (the last file is version 2 now) and replay.
	j2, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	j2.Close()
	if got, err := replayAll(t, fs, Position{}); err != nil || len(got) != 8 {
		t.Fatalf("replay after a second Open: %d records, %v", len(got), err)
	}
	// The version 1 file's last group damaged: file 2 recorded its end.
	flipByte(t, fs, file1, int64(len(v1))-3)
	_, err = replayAll(t, fs, Position{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != file1 {
		t.Fatalf("damage in a sealed version 1 file: %v", err)
	}
}

// TestReadVersion1TornTail: a version 1 file whose last group is torn (an
// old build crashed) is cut by the version 1 rule; Open then records the
// cut and writes version 2 after it.
func TestReadVersion1TornTail(t *testing.T) {
	v1 := readHexDump(t, "testdata/golden-v1.hex")
	fs := vfs.NewMem()
	writeFileBytes(t, fs, file1, v1[:len(v1)-5]) // the fence record, cut
	got, err := replayAll(t, fs, Position{})
	if err != nil || len(got) != 4 {
		t.Fatalf("torn version 1 tail: %d records, %v", len(got), err)
	}
	j, err := Open(fs, testDir, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.AppendSync(Record{Type: TypeFence, LedgerID: 3}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got, err := replayAll(t, fs, Position{}); err != nil || len(got) != 5 {
		t.Fatalf("after Open: %d records, %v", len(got), err)
	}
}

func TestUnknownVersionRefused(t *testing.T) {
	b := encodeFileHeader(3, 1, 0, 0)
	fs := vfs.NewMem()
	writeFileBytes(t, fs, file1, b)
	_, err := replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, 0)
	if !strings.Contains(err.Error(), "format version 3, this build reads versions 1 and 2") {
		t.Fatalf("unclear message: %v", err)
	}
	if _, err := Open(fs, testDir, smallOpts()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a version 3 journal: %v", err)
	}
}

// TestReplayRuleClauses covers the clauses of the version 2 rule that the
// damage tests above do not (package comment, R1..R5).
func TestReplayRuleClauses(t *testing.T) {
	t.Run("R1-bad-record-in-intact-group", func(t *testing.T) {
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 3, 3)
		j.Close()
		// Damage a record and make the group checksum match again: the
		// group says it was written so.
		all := readAll(t, fs, file1)
		all[spans[0][1].start+RecordHeaderSize+3] ^= 0x5a
		g0 := groupStart(spans, 0)
		putGroupHeader(all[g0:spans[0][2].end], 1, g0, 1, 0)
		patch(t, fs, file1, g0, all[g0:spans[0][2].end])
		_, err := replayAll(t, fs, Position{})
		expectCorruption(t, err, file1, spans[0][1].start)
	})
	t.Run("R2-wrong-sequence", func(t *testing.T) {
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 3, 3)
		j.Close()
		all := readAll(t, fs, file1)
		g1 := groupStart(spans, 1)
		putGroupHeader(all[g1:spans[1][2].end], 1, g1, 5, 0)
		patch(t, fs, file1, g1, all[g1:g1+GroupHeaderSize])
		_, err := replayAll(t, fs, Position{})
		expectCorruption(t, err, file1, g1)
	})
	t.Run("R4-end-recorded-by-group-headers", func(t *testing.T) {
		// Files rotated by the pipeline are created ahead: their headers
		// leave prev end 0 and their group headers record it.
		fs := vfs.NewMem()
		j, err := Open(fs, testDir, smallOpts())
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		appendLedgers(t, j, rec, 2, 600)
		j.Close()
		ids, _ := listFiles(fs, testDir, false)
		if len(ids) < 3 {
			t.Fatalf("want 3 files or more, have %v", ids)
		}
		f2 := readAll(t, fs, testDir+"/"+fileName(2))
		if hdr, err := decodeFileHeader(f2, 2); err != nil || hdr.prevID != 1 || hdr.prevEnd != 0 {
			t.Fatalf("file 2 header %+v, %v: want created ahead (prev end 0)", hdr, err)
		}
		var end Position
		for _, p := range rec.order {
			if p.File == 1 && p.Compare(end) > 0 {
				end = p
			}
		}
		// File 1's last group damaged: file 2's groups recorded its end.
		flipByte(t, fs, file1, end.Offset-3)
		_, err = replayAll(t, fs, Position{})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.File != file1 || !strings.Contains(err.Error(), fileName(2)) {
			t.Fatalf("damaged last group of a file followed by a written one: %v", err)
		}
	})
	t.Run("R4-unwritten-file-ahead", func(t *testing.T) {
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		writeGroups(t, j, 2, 2)
		j.Close()
		// File 2 created ahead and never written (a crash): as the last
		// file it records nothing and is allowed.
		file2 := testDir + "/" + fileName(2)
		writeFileBytes(t, fs, file2, append(encodeFileHeader(FormatVersion, 2, 1, 0), make([]byte, 4096)...))
		if got, err := replayAll(t, fs, Position{}); err != nil || len(got) != 4 {
			t.Fatalf("unwritten last file: %d records, %v", len(got), err)
		}
		// Followed by another file, file 1's end is recorded nowhere.
		file3 := testDir + "/" + fileName(3)
		writeFileBytes(t, fs, file3, encodeFileHeader(FormatVersion, 3, 2, FirstGroupOffset))
		_, err := replayAll(t, fs, Position{})
		expectCorruption(t, err, file2, 0)
		// Open removes an unwritten last file, and the file it creates
		// records the end of the one before.
		if err := fs.Remove(file3); err != nil {
			t.Fatal(err)
		}
		j2, err := Open(fs, testDir, smallOpts())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j2.AppendSync(Record{Type: TypeFence, LedgerID: 4}); err != nil {
			t.Fatal(err)
		}
		j2.Close()
		ids, _ := listFiles(fs, testDir, false)
		if !slices.Equal(ids, []uint64{1, 3}) {
			t.Fatalf("files after Open: %v, want [1 3] (2 removed, ids only grow)", ids)
		}
		hdr, err := decodeFileHeader(readAll(t, fs, file3), 3)
		if err != nil || hdr.prevID != 1 || hdr.prevEnd == 0 {
			t.Fatalf("new file header %+v, %v: want it to record file 1's end", hdr, err)
		}
		if got, err := replayAll(t, fs, Position{}); err != nil || len(got) != 5 {
			t.Fatalf("after Open: %d records, %v", len(got), err)
		}
	})
	t.Run("R5-checkpoint-beyond-the-log", func(t *testing.T) {
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 3, 3)
		j.Close()
		ckpt := Position{File: 1, Offset: spans[2][1].end}
		// The last group torn: the acknowledged checkpoint inside it is gone.
		flipByte(t, fs, file1, spans[2][2].end-1)
		_, err := replayAll(t, fs, ckpt)
		expectCorruption(t, err, file1, spans[1][2].end)
	})
	t.Run("R5-checkpoint-inside-a-torn-group-with-its-successor", func(t *testing.T) {
		// Four groups, the third torn, the fourth (its successor, written
		// while the third synced) intact: the log ends after the second,
		// and a checkpoint inside the third is beyond it.
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 4, 3)
		j.Close()
		flipByte(t, fs, file1, spans[2][2].end-1)
		if got, err := replayAll(t, fs, Position{}); err != nil || len(got) != 6 {
			t.Fatalf("replay from the start: %d records, %v; want the first two groups", len(got), err)
		}
		_, err := replayAll(t, fs, Position{File: 1, Offset: spans[2][0].end})
		expectCorruption(t, err, file1, spans[1][2].end)
	})
}

// craftedBody is an entry body for a group starting at base whose bytes
// at the 512-byte boundaries base+512, base+1024 hold valid group headers
// of file 1 with the sequence numbers seqs (a client can write any bytes).
func craftedBody(base int64, seqs ...uint64) []byte {
	const bodyAt = GroupHeaderSize + RecordHeaderSize + 16 // ledger id, entry id
	b := make([]byte, 1200)
	for i, seq := range seqs {
		off := base + int64(i+1)*GroupAlignment
		h := make([]byte, GroupHeaderSize+RecordHeaderSize)
		putGroupHeader(h, 1, off, seq, 0)
		copy(b[off-base-bodyAt:], h[:GroupHeaderSize])
	}
	return b
}

// appendGroup writes one group of one entry of ledger 2 (Manual mode) and
// returns where the group ends.
func appendGroup(t *testing.T, j *Journal, e int64, b []byte) int64 {
	t.Helper()
	rec := newRecorder()
	if err := j.AppendEntry(2, e, b, rec.cb(2, e)); err != nil {
		t.Fatal(err)
	}
	if n, err := j.Flush(); n != 1 || err != nil {
		t.Fatalf("flush: %d %v", n, err)
	}
	return rec.acks[[2]int64{2, e}].pos.Offset
}

// TestCraftedHeadersInPayloadsAreNotProbed: entry bodies are client data
// and may hold bytes that form a valid group header at a 512-byte
// boundary of their file. When the group after the last intact one is torn,
// the probe for later groups must not read such bytes inside the torn
// group (its header is valid, so its length is known) or inside its
// successor: a legitimate torn tail must stay a torn tail.
func TestCraftedHeadersInPayloadsAreNotProbed(t *testing.T) {
	t.Run("inside-the-successor", func(t *testing.T) {
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 2, 1)
		end3 := appendGroup(t, j, 0, body(2, 0))
		base4 := alignUp(end3)
		appendGroup(t, j, 1, craftedBody(base4, 5, 6))
		j.Close()
		flipByte(t, fs, file1, end3-1) // group 3 torn, group 4 (its successor) intact
		got, err := replayAll(t, fs, Position{})
		if err != nil || len(got) != 2 || got[1].pos.Offset != spans[1][0].end {
			t.Fatalf("torn tail: %d records, %v; want the first two groups", len(got), err)
		}
	})
	t.Run("inside-the-torn-group", func(t *testing.T) {
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 2, 1)
		base3 := alignUp(spans[1][0].end)
		end3 := appendGroup(t, j, 0, craftedBody(base3, 4, 5))
		appendGroup(t, j, 1, body(2, 1))
		j.Close()
		flipByte(t, fs, file1, end3-1) // group 3 torn (header valid), group 4 intact
		got, err := replayAll(t, fs, Position{})
		if err != nil || len(got) != 2 || got[1].pos.Offset != spans[1][0].end {
			t.Fatalf("torn tail: %d records, %v; want the first two groups", len(got), err)
		}
	})
	t.Run("successor-at-the-wrong-offset", func(t *testing.T) {
		// Group 3's header is valid and names its length: a group 4 found
		// anywhere but right after it was not written by the journal
		// there, and a valid header with another number after the torn
		// group is corruption.
		fs := vfs.NewMem()
		j := manualJournal(t, fs)
		spans := writeGroups(t, j, 2, 1)
		end3 := appendGroup(t, j, 0, body(2, 0))
		base3 := alignUp(spans[1][0].end)
		j.Close()
		h := make([]byte, GroupHeaderSize+RecordHeaderSize)
		far := alignUp(end3) + GroupAlignment
		putGroupHeader(h, 1, far, 4, 0)
		patch(t, fs, file1, far, h[:GroupHeaderSize])
		flipByte(t, fs, file1, end3-1)
		_, err := replayAll(t, fs, Position{})
		expectCorruption(t, err, file1, base3)
	})
}

func TestGroupHeaderShorterThanRecordIsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	j := manualJournal(t, fs)
	spans := writeGroups(t, j, 2, 1)
	j.Close()
	g1 := groupStart(spans, 1)
	h := make([]byte, GroupHeaderSize+RecordHeaderSize-1) // length 9
	putGroupHeader(h, 1, g1, 2, 0)
	patch(t, fs, file1, g1, h[:GroupHeaderSize])
	_, err := replayAll(t, fs, Position{})
	expectCorruption(t, err, file1, g1)
}
