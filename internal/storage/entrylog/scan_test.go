package entrylog_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage/entrylog"
)

// writeLog writes entries of ledgers 1 and 2 through a Store, closes it and
// returns the path of the one entry log.
func writeLog(t *testing.T, fs vfs.FS) string {
	t.Helper()
	s, err := entrylog.Open(fs, "logs", entrylog.Options{Clock: clock.NewManual(time.Unix(1_000_000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 5; e++ {
		for _, l := range []int64{2, 1} {
			if err := s.Add(l, e, fmt.Appendf(nil, "ledger %d entry %d", l, e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(func([]entrylog.Placement) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := fs.List("logs")
	if err != nil || len(names) != 1 {
		t.Fatalf("want one log file, got %v %v", names, err)
	}
	return fs.PathJoin("logs", names[0])
}

func scanAll(fs vfs.FS, path string) ([]string, error) {
	var got []string
	err := entrylog.ScanFile(fs, path, func(r entrylog.Record) error {
		got = append(got, fmt.Sprintf("%d %d/%d %s", r.Offset, r.LedgerID, r.EntryID, r.Body))
		return nil
	})
	return got, err
}

func TestScanFile(t *testing.T) {
	fs := vfs.NewMem()
	path := writeLog(t, fs)
	got, err := scanAll(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	// A flush writes sorted by (ledger, entry), right after the 32-byte header.
	if len(got) != 10 || got[0] != "32 1/0 ledger 1 entry 0" || !strings.HasSuffix(got[9], " 2/4 ledger 2 entry 4") {
		t.Fatalf("records:\n%s", strings.Join(got, "\n"))
	}

	// fn's error stops the scan and comes back as is.
	stop := errors.New("stop")
	n := 0
	if err := entrylog.ScanFile(fs, path, func(entrylog.Record) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("callback error: %v after %d records", err, n)
	}

	// A renamed copy (support attachment) is read by its header's id.
	copyFile(t, fs, path, "attachment.bin", -1)
	if again, err := scanAll(fs, "attachment.bin"); err != nil || len(again) != 10 {
		t.Fatalf("renamed copy: %d records, %v", len(again), err)
	}
	// A copy under another log's name is refused at the header.
	copyFile(t, fs, path, entrylog.LogFileName(99), -1)
	wantCorrupt(t, fs, entrylog.LogFileName(99), 0, "header names log")
}

func TestScanFileDamage(t *testing.T) {
	fs := vfs.NewMem()
	path := writeLog(t, fs)
	all, _ := scanAll(fs, path)
	var offs []int64
	for _, s := range all {
		var off int64
		fmt.Sscan(s, &off)
		offs = append(offs, off)
	}
	size := fileSize(t, fs, path)

	// Torn tail: cut in the middle of the last record. Every record before
	// it is delivered, then the error names where verified data ends.
	copyFile(t, fs, path, "torn.log", size-3)
	got := wantCorrupt(t, fs, "torn.log", offs[9], "torn record")
	if len(got) != 9 {
		t.Fatalf("torn tail: %d records delivered, want 9", len(got))
	}
	// Torn header of the last record.
	copyFile(t, fs, path, "torn2.log", offs[9]+10)
	wantCorrupt(t, fs, "torn2.log", offs[9], "torn record header")

	// A flipped byte in the body of record 4.
	copyFile(t, fs, path, "flip.log", -1)
	flipByte(t, fs, "flip.log", offs[4]+entrylog.RecordHeaderSize+2)
	got = wantCorrupt(t, fs, "flip.log", offs[4], "checksum mismatch")
	if len(got) != 4 {
		t.Fatalf("flipped byte: %d records delivered, want 4", len(got))
	}

	// Header damage and files too short for one.
	copyFile(t, fs, path, "badmagic.log", -1)
	flipByte(t, fs, "badmagic.log", 1)
	wantCorrupt(t, fs, "badmagic.log", 0, "bad magic")
	copyFile(t, fs, path, "short.log", 10)
	wantCorrupt(t, fs, "short.log", 0, "shorter than")

	if err := entrylog.ScanFile(fs, "missing.log", func(entrylog.Record) error { return nil }); err == nil || errors.Is(err, entrylog.ErrCorrupt) {
		t.Fatalf("missing file: %v", err)
	}
}

func wantCorrupt(t *testing.T, fs vfs.FS, path string, off int64, reason string) []string {
	t.Helper()
	got, err := scanAll(fs, path)
	var ce *entrylog.CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, entrylog.ErrCorrupt) {
		t.Fatalf("%s: want a *CorruptionError, got %v", path, err)
	}
	if ce.File != path || ce.Offset != off || !strings.Contains(ce.Reason, reason) {
		t.Fatalf("%s: got %q at %d in %s, want %q at %d", path, ce.Reason, ce.Offset, ce.File, reason, off)
	}
	return got
}

func fileSize(t *testing.T, fs vfs.FS, path string) int64 {
	t.Helper()
	fi, err := fs.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyFile copies src to dst, keeping the first n bytes (n < 0: all).
func copyFile(t *testing.T, fs vfs.FS, src, dst string, n int64) {
	t.Helper()
	in, err := fs.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	b, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	if n >= 0 {
		b = b[:n]
	}
	writeFile(t, fs, dst, b)
}

func flipByte(t *testing.T, fs vfs.FS, path string, off int64) {
	t.Helper()
	in, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(in)
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	writeFile(t, fs, path, b)
}

func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFileReader reads records at their locations offline and refuses a
// location that names another entry, another size, the header, a missing
// log or a damaged record, never answering "absent".
func TestFileReader(t *testing.T) {
	fs := vfs.NewMem()
	path := writeLog(t, fs)
	var recs []entrylog.Record
	if err := entrylog.ScanFile(fs, path, func(r entrylog.Record) error {
		r.Body = append([]byte(nil), r.Body...)
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids, err := entrylog.LogIDs(fs, "logs")
	if err != nil || len(ids) != 1 {
		t.Fatalf("LogIDs: %v, %v", ids, err)
	}
	if ids, err := entrylog.LogIDs(fs, "nowhere"); err != nil || len(ids) != 0 {
		t.Fatalf("LogIDs of a missing dir: %v, %v", ids, err)
	}
	rd := entrylog.NewFileReader(fs, "logs")
	defer rd.Close()
	loc := func(r entrylog.Record) entrylog.Location {
		return entrylog.Location{LogID: ids[0], Offset: r.Offset, Size: uint32(len(r.Body))}
	}
	for _, r := range recs {
		got, err := rd.Read(r.LedgerID, r.EntryID, loc(r))
		if err != nil || string(got) != string(r.Body) {
			t.Fatalf("read %d/%d: %q, %v", r.LedgerID, r.EntryID, got, err)
		}
	}
	r := recs[3]
	for name, tc := range map[string]struct {
		l, e int64
		at   entrylog.Location
		want error
	}{
		"other entry":  {r.LedgerID, r.EntryID + 1, loc(r), entrylog.ErrCorrupt},
		"other size":   {r.LedgerID, r.EntryID, entrylog.Location{LogID: ids[0], Offset: r.Offset, Size: uint32(len(r.Body) - 1)}, entrylog.ErrCorrupt},
		"header":       {r.LedgerID, r.EntryID, entrylog.Location{LogID: ids[0], Offset: 4, Size: 3}, entrylog.ErrCorrupt},
		"past the end": {r.LedgerID, r.EntryID, entrylog.Location{LogID: ids[0], Offset: 1 << 20, Size: 3}, entrylog.ErrCorrupt},
		"missing log":  {r.LedgerID, r.EntryID, entrylog.Location{LogID: ids[0] + 1, Offset: r.Offset, Size: 3}, entrylog.ErrNoLog},
	} {
		if _, err := rd.Read(tc.l, tc.e, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// A flipped body byte fails the checksum.
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	at := r.Offset + int64(entrylog.RecordHeaderSize)
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rd2 := entrylog.NewFileReader(fs, "logs")
	defer rd2.Close()
	if _, err := rd2.Read(r.LedgerID, r.EntryID, loc(r)); !errors.Is(err, entrylog.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("damaged record: %v", err)
	}
}

// TestScanFileTorn: ScanFile tells a torn tail (the last record cut short,
// or a log created at a crash before its header was written) from damage.
func TestScanFileTorn(t *testing.T) {
	fs := vfs.NewMem()
	path := writeLog(t, fs)
	st, err := fs.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, st.Size())
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	write := func(name string, b []byte) string {
		p := fs.PathJoin("logs", name)
		w, err := fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		// A copy: Pebble's race builds mangle a written buffer.
		if _, err := w.Write(append([]byte(nil), b...)); err != nil {
			t.Fatal(err)
		}
		w.Close()
		return p
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0xff
	for name, tc := range map[string]struct {
		b    []byte
		torn bool
	}{
		"cut in the last record": {data[:len(data)-3], true},
		"cut in a record header": {data[:entrylog.HeaderSize+5], true},
		"empty":                  {nil, true},
		"zero header":            {make([]byte, entrylog.HeaderSize), true},
		"flipped byte":           {flipped, false},
	} {
		p := write(strings.ReplaceAll(name, " ", "-")+".bin", tc.b)
		err := entrylog.ScanFile(fs, p, func(entrylog.Record) error { return nil })
		var ce *entrylog.CorruptionError
		if !errors.As(err, &ce) || ce.Torn != tc.torn {
			t.Errorf("%s: %v (torn %v), want torn %v", name, err, ce != nil && ce.Torn, tc.torn)
		}
	}
}
