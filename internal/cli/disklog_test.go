package cli

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

type addDone chan error

func (d addDone) AddComplete(err error) { d <- err }

// writeBookieDirs writes entries 0..4 of ledgers 7 and 8 through the
// bookie's storage engine into a journal and a ledger directory laid out as
// a bookie lays them out, and closes it (which flushes the entry logs).
func writeBookieDirs(t *testing.T) (journalDir, ledgerDir string) {
	t.Helper()
	root := t.TempDir()
	journalDir, ledgerDir = filepath.Join(root, "journal"), filepath.Join(root, "ledgers")
	st, err := ledgerstore.Open(vfs.Default, ledgerstore.Config{
		JournalDirs: []string{server.CurrentDir(journalDir)},
		LedgerDirs:  []string{server.CurrentDir(ledgerDir)},
		Clock:       clock.NewManual(time.Unix(1_000_000, 0)),
		Manual:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 20)
	for _, l := range []int64{7, 8} {
		for e := int64(0); e < 5; e++ {
			body := make([]byte, 32, 40)
			binary.BigEndian.PutUint64(body[0:], uint64(l))
			binary.BigEndian.PutUint64(body[8:], uint64(e))
			binary.BigEndian.PutUint64(body[16:], uint64(e-1))
			body = append(body, "payload!"...)
			done := make(addDone, 1)
			st.AddEntry(l, e, key, body, storage.AddOptions{}, done)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return journalDir, ledgerDir
}

func TestListFilesOnDiscAndReadLog(t *testing.T) {
	jd, ld := writeBookieDirs(t)
	dirs := []string{"--set", "journalDirectories=" + jd, "--set", "ledgerDirectories=" + ld}

	code, out, errOut := run(t, nil, append([]string{"shell", "listfilesondisc", "-o", "json"}, dirs...)...)
	if code != ExitOK {
		t.Fatalf("listfilesondisc: exit %d: %s", code, errOut)
	}
	var files []DiskFileView
	if err := json.Unmarshal([]byte(out), &files); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	kinds := map[string]int{}
	var entryLog string
	for _, f := range files {
		kinds[f.Kind]++
		if f.Kind == "entrylog" && strings.HasSuffix(f.Path, ".log") {
			entryLog = f.Path
		}
		if st, err := os.Stat(f.Path); err != nil || st.Size() != f.Size {
			t.Fatalf("%+v: stat %v", f, err)
		}
	}
	if kinds["journal"] == 0 || kinds["entrylog"] == 0 || kinds["index"] == 0 || entryLog == "" {
		t.Fatalf("kinds %v in %s", kinds, out)
	}

	// A selection flag lists only that kind; text output is a table.
	code, out, errOut = run(t, nil, append([]string{"shell", "listfilesondisc", "--entrylog"}, dirs...)...)
	if code != ExitOK || !strings.HasPrefix(out, "KIND") || !strings.Contains(out, entryLog) || strings.Contains(out, "journal ") || strings.Contains(out, "index ") {
		t.Fatalf("listfilesondisc --entrylog: exit %d\n%s%s", code, out, errOut)
	}

	// readlog: every record, then one ledger, then one entry.
	var recs []EntryLogRecordView
	code, out, errOut = run(t, nil, "shell", "readlog", entryLog, "-o", "json")
	if code != ExitOK {
		t.Fatalf("readlog: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 10 {
		t.Fatalf("readlog: %v: %s", err, out)
	}
	if r := recs[0]; r.Offset != 32 || r.LedgerID != 7 || r.EntryID != 0 || r.Length != 40 {
		t.Fatalf("first record %+v", r)
	}
	code, out, _ = run(t, nil, "shell", "readlog", entryLog, "--ledger", "8", "--entry", "3")
	if code != ExitOK || !strings.HasPrefix(out, "OFFSET") || strings.Count(out, "\n") != 2 || !strings.Contains(out, " 8 ") {
		t.Fatalf("readlog --ledger 8 --entry 3: exit %d\n%s", code, out)
	}

	// Damage: the records before it are printed, then exit 1 naming the offset.
	b, err := os.ReadFile(entryLog)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.log")
	if err := os.WriteFile(damaged, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, nil, "shell", "readlog", damaged, "-o", "json")
	recs = nil
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 9 {
		t.Fatalf("damaged: %v: %s", err, out)
	}
	if code != ExitFail || !strings.Contains(errOut, damaged) || !strings.Contains(errOut, "offset") || strings.Contains(errOut, "goroutine") {
		t.Fatalf("damaged: exit %d, stderr %q", code, errOut)
	}

	// Usage errors and missing files.
	if code, _, errOut := run(t, nil, "shell", "readlog", entryLog, "--entry", "1"); code != ExitUsage {
		t.Fatalf("--entry without --ledger: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "shell", "readlog", filepath.Join(ld, "nope.log")); code != ExitFail || !strings.Contains(errOut, "listfilesondisc") {
		t.Fatalf("missing file: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "shell", "readlog"); code != ExitUsage {
		t.Fatalf("no argument: exit %d %s", code, errOut)
	}
}

// TestListFilesOnDiscSpilledLogs: with its own ledger directory full, a
// shard's entry logs go to the other ledger directory
// (entrylogs-shard-<i>/); listfilesondisc lists them, and readlog reads
// them.
func TestListFilesOnDiscSpilledLogs(t *testing.T) {
	root := t.TempDir()
	jd := filepath.Join(root, "journal")
	lds := []string{filepath.Join(root, "ledgers0"), filepath.Join(root, "ledgers1")}
	st, err := ledgerstore.Open(vfs.Default, ledgerstore.Config{
		JournalDirs: []string{server.CurrentDir(jd)},
		LedgerDirs:  []string{server.CurrentDir(lds[0]), server.CurrentDir(lds[1])},
		Clock:       clock.NewManual(time.Unix(1_000_000, 0)),
		Manual:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	st.SetLedgerDirFull(0, true)
	key := make([]byte, 20)
	const ledger = 8 // shard 0
	for e := int64(0); e < 3; e++ {
		body := make([]byte, 32, 40)
		binary.BigEndian.PutUint64(body[0:], ledger)
		binary.BigEndian.PutUint64(body[8:], uint64(e))
		binary.BigEndian.PutUint64(body[16:], uint64(e-1))
		body = append(body, "spilled!"...)
		done := make(addDone, 1)
		st.AddEntry(ledger, e, key, body, storage.AddOptions{}, done)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	dirs := []string{"--set", "journalDirectories=" + jd, "--set", "ledgerDirectories=" + strings.Join(lds, ",")}
	code, out, errOut := run(t, nil, append([]string{"shell", "listfilesondisc", "--entrylog", "-o", "json"}, dirs...)...)
	if code != ExitOK {
		t.Fatalf("listfilesondisc: exit %d: %s", code, errOut)
	}
	var files []DiskFileView
	if err := json.Unmarshal([]byte(out), &files); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	spillDir := filepath.Join(server.CurrentDir(lds[1]), "entrylogs-shard-0") + string(filepath.Separator)
	var spilled string
	for _, f := range files {
		if strings.HasPrefix(f.Path, spillDir) && f.Size > 0 {
			spilled = f.Path
		}
	}
	if spilled == "" {
		t.Fatalf("no entry log under %s in %s", spillDir, out)
	}
	var recs []EntryLogRecordView
	code, out, errOut = run(t, nil, "shell", "readlog", spilled, "-o", "json")
	if code != ExitOK {
		t.Fatalf("readlog: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 3 || recs[0].LedgerID != ledger {
		t.Fatalf("readlog of the spilled log: %v: %s", err, out)
	}
}
