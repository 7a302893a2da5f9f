package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/testcluster"
)

// shell runs `folio shell <args>` against uri with the built binary and
// returns its exit code and output. Output is piped, so no progress shows.
func shell(t *testing.T, uri string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), append([]string{"shell", "--metadata-service-uri", uri}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("folio shell %v: %v", args, err)
	}
	if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic:") {
		t.Fatalf("folio shell %v printed a stack trace:\n%s", args, errb.String())
	}
	return code, out.String(), errb.String()
}

// mustShell runs a command that must succeed.
func mustShell(t *testing.T, uri string, args ...string) string {
	t.Helper()
	code, out, errOut := shell(t, uri, args...)
	if code != 0 {
		t.Fatalf("folio shell %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

func mustJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("not the JSON expected: %v\n%s", err, out)
	}
}

// TestShellEndToEnd runs the shell commands against a real `folio
// standalone`, restarts it with SIGTERM, and reads the ledgers again.
func TestShellEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone cluster")
	}
	sa := testcluster.StartStandalone(t, t.TempDir())
	uri := sa.URI

	// listbookies: every bookie of the readiness line, writable.
	var bookies []admin.BookieStatus
	mustJSON(t, mustShell(t, uri, "listbookies", "-o", "json"), &bookies)
	if len(bookies) != len(sa.BookieIDs) {
		t.Fatalf("listbookies: %v, want %v", bookies, sa.BookieIDs)
	}
	for _, b := range bookies {
		if b.State != admin.StateWritable {
			t.Fatalf("listbookies: %v", bookies)
		}
	}
	mustJSON(t, mustShell(t, uri, "listbookies", "--readonly", "-o", "json"), &bookies)
	if len(bookies) != 0 {
		t.Fatalf("listbookies --readonly: %v", bookies)
	}
	if out := mustShell(t, uri, "listbookies"); !strings.Contains(out, sa.BookieIDs[0]+"  writable") {
		t.Fatalf("listbookies text:\n%s", out)
	}
	if out := mustShell(t, uri, "bookieinfo"); !strings.Contains(out, "GiB") && !strings.Contains(out, "MiB") {
		t.Fatalf("bookieinfo:\n%s", out)
	}
	mustShell(t, uri, "bookiesanity", "-n", "5")
	// bookiesanity --conf checks the bookie a bk_server.conf describes,
	// with that file's metadata store (no --metadata-service-uri here): a
	// container's health check.
	_, port, _ := strings.Cut(sa.BookieIDs[1], ":")
	conf := filepath.Join(t.TempDir(), "bk_server.conf")
	confText := "bookiePort=" + port + "\nadvertisedAddress=127.0.0.1\nallowLoopback=true\nmetadataServiceUri=" + uri +
		"\njournalDirectories=/nonexistent/journal\nledgerDirectories=/nonexistent/ledgers\n"
	if err := os.WriteFile(conf, []byte(confText), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runFolio(t, nil, "shell", "bookiesanity", "--conf", conf, "-n", "3", "-o", "json")
	var sanity []admin.SanityResult
	if code != 0 {
		t.Fatalf("bookiesanity --conf: exit %d: %s", code, errOut)
	}
	mustJSON(t, out, &sanity)
	if len(sanity) != 1 || sanity[0].Bookie != sa.BookieIDs[1] || !sanity[0].OK || sanity[0].EntriesRead != 3 {
		t.Fatalf("bookiesanity --conf: %+v, want bookie %s checked", sanity, sa.BookieIDs[1])
	}
	code, _, errOut = runFolio(t, nil, "shell", "bookiesanity", "--conf", conf, "--bookie", sa.BookieIDs[0])
	if code != 2 || !strings.Contains(errOut, "--conf and --bookie") {
		t.Fatalf("bookiesanity --conf --bookie: exit %d: %s", code, errOut)
	}

	// simpletest deletes its ledger; with --keep the ledger stays.
	var st admin.SimpleTestResult
	mustJSON(t, mustShell(t, uri, "simpletest", "-n", "100", "-o", "json"), &st)
	if st.EntriesWritten != 100 || st.EntriesRead != 100 || st.LastEntryID != 99 || len(st.Ensemble) != 3 {
		t.Fatalf("simpletest: %+v", st)
	}
	deleted := st.LedgerID
	out = mustShell(t, uri, "simpletest", "-e", "3", "-w", "3", "-a", "2", "-n", "300", "--keep")
	if !strings.Contains(out, "simpletest ok") || !strings.Contains(out, "kept ledger ") {
		t.Fatalf("simpletest --keep:\n%s", out)
	}
	kept, err := strconv.ParseInt(strings.TrimSpace(out[strings.LastIndex(out, "kept ledger ")+len("kept ledger "):]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	// An open ledger written from Go, left open (the writer "crashed").
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte("secret")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := w.Append(ctx, []byte(fmt.Sprintf("entry-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	open := w.ID()
	c.Close() // the ledger stays OPEN

	var ledgers []struct{ LedgerID int64 }
	mustJSON(t, mustShell(t, uri, "listledgers", "-o", "json"), &ledgers)
	ids := map[int64]bool{}
	for _, l := range ledgers {
		ids[l.LedgerID] = true
	}
	if !ids[kept] || !ids[open] || ids[deleted] {
		t.Fatalf("listledgers %v: want %d and %d, not %d", ledgers, kept, open, deleted)
	}
	var md struct {
		State       string
		LastEntryID int64
	}
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(kept, 10), "-o", "json"), &md)
	if md.State != "CLOSED" || md.LastEntryID != 299 {
		t.Fatalf("ledgermetadata %d: %+v", kept, md)
	}

	// readledger: text and JSON, a sub-range, and the open ledger up to its
	// LAC with its password.
	out = mustShell(t, uri, "readledger", strconv.FormatInt(kept, 10), "--from", "10", "--to", "12")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "10\t100\t\"folio simpletest entry 10 ") {
		t.Fatalf("readledger text:\n%s", out)
	}
	var entries []struct {
		EntryID int64
		Payload []byte
	}
	mustJSON(t, mustShell(t, uri, "readledger", strconv.FormatInt(open, 10), "--password", "secret", "-o", "json"), &entries)
	// The LAC trails the last acknowledged entry by up to one: entry 19 is
	// acknowledged but only entry 18 is known confirmed to readers.
	if len(entries) < 19 || string(entries[5].Payload) != "entry-5" {
		t.Fatalf("readledger of the open ledger: %d entries", len(entries))
	}

	// inspectledger: the closed ledger has all its entries on every bookie
	// of their write sets; the open one would be recovered at entry 19.
	var ins admin.LedgerInspection
	mustJSON(t, mustShell(t, uri, "inspectledger", strconv.FormatInt(kept, 10), "-o", "json"), &ins)
	if ins.Recovery.Outcome != admin.OutcomeClosed || len(ins.Fragments) != 1 {
		t.Fatalf("inspectledger %d: %+v", kept, ins)
	}
	for _, b := range ins.Fragments[0].Bookies {
		if b.Expected != 300 || b.Held != 300 || b.MissingCount != 0 {
			t.Fatalf("inspectledger %d: bookie %+v", kept, b)
		}
	}
	mustJSON(t, mustShell(t, uri, "inspectledger", strconv.FormatInt(open, 10), "-o", "json"), &ins)
	if ins.State != "OPEN" || ins.Recovery.Outcome != admin.OutcomeEnd || ins.Recovery.LastEntryID != 19 {
		t.Fatalf("inspectledger %d: %+v", open, ins.Recovery)
	}
	out = mustShell(t, uri, "inspectledger", strconv.FormatInt(open, 10))
	if !strings.Contains(out, "state OPEN") || !strings.Contains(out, "recovery: would close the ledger at entry 19") {
		t.Fatalf("inspectledger text:\n%s", out)
	}
	// With the admin HTTP server the fence bits are known: not fenced yet
	// (and reading them fenced nothing: the writer's bookies still take
	// adds, checked below through recoverledger's outcome).
	var ports struct{ HTTP int }
	if b, err := os.ReadFile(filepath.Join(sa.Dir, "ports.json")); err != nil {
		t.Fatal(err)
	} else {
		mustJSON(t, string(b), &ports)
	}
	httpFlag := fmt.Sprintf("--http=127.0.0.1:%d", ports.HTTP)
	mustJSON(t, mustShell(t, uri, "inspectledger", strconv.FormatInt(open, 10), httpFlag, "-o", "json"), &ins)
	for _, b := range ins.Bookies {
		if b.Fenced == nil || *b.Fenced {
			t.Fatalf("inspectledger --http of the open ledger: bookie %+v", b)
		}
	}
	if code, _, errOut := shell(t, uri, "inspectledger", strconv.FormatInt(open, 10), "--http", "nonsense"); code != 2 || !strings.Contains(errOut, "HOST:PORT") {
		t.Fatalf("inspectledger --http nonsense: exit %d, %s", code, errOut)
	}
	// Inspection changed nothing.
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(open, 10), "-o", "json"), &md)
	if md.State != "OPEN" {
		t.Fatalf("inspectledger changed the ledger: %+v", md)
	}

	// recoverledger closes it where inspectledger predicted.
	mustShell(t, uri, "recoverledger", strconv.FormatInt(open, 10))
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(open, 10), "-o", "json"), &md)
	if md.State != "CLOSED" || md.LastEntryID != 19 {
		t.Fatalf("after recoverledger: %+v", md)
	}
	// Recovery fenced the ledger on its bookies; inspectledger shows it
	// (a fence recovery did not wait for may land a moment later).
	for deadline := time.Now().Add(10 * time.Second); ; {
		mustJSON(t, mustShell(t, uri, "inspectledger", strconv.FormatInt(open, 10), httpFlag, "-o", "json"), &ins)
		all := true
		for _, b := range ins.Bookies {
			all = all && b.Fenced != nil && *b.Fenced
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inspectledger --http after recovery: bookies %+v", ins.Bookies)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The embedded AutoRecovery is the auditor, under the HTTP address.
	var aud struct{ Auditor string }
	mustJSON(t, mustShell(t, uri, "whoisauditor", "-o", "json"), &aud)
	if aud.Auditor != fmt.Sprintf("127.0.0.1:%d", ports.HTTP) {
		t.Fatalf("whoisauditor: %+v, want 127.0.0.1:%d", aud, ports.HTTP)
	}
	out = mustShell(t, uri, "inspectledger", strconv.FormatInt(open, 10), httpFlag)
	if strings.Contains(out, "unknown") || !strings.Contains(out, "FENCED") {
		t.Fatalf("inspectledger --http text after recovery:\n%s", out)
	}
	// Without --http the fence state is unknown.
	mustJSON(t, mustShell(t, uri, "inspectledger", strconv.FormatInt(open, 10), "-o", "json"), &ins)
	if ins.Bookies[0].Fenced != nil {
		t.Fatalf("inspectledger without --http: %+v", ins.Bookies[0])
	}

	// Restart: SIGTERM, start again from the same directory, read again.
	sa.Terminate()
	sa.Start()
	uri = sa.URI
	mustJSON(t, mustShell(t, uri, "readledger", strconv.FormatInt(kept, 10), "-o", "json"), &entries)
	if len(entries) != 300 || !strings.HasPrefix(string(entries[299].Payload), "folio simpletest entry 299 ") {
		t.Fatalf("after restart: %d entries of ledger %d", len(entries), kept)
	}
	mustJSON(t, mustShell(t, uri, "readledger", strconv.FormatInt(open, 10), "--password", "secret", "-o", "json"), &entries)
	if len(entries) != 20 || string(entries[19].Payload) != "entry-19" {
		t.Fatalf("after restart: %d entries of ledger %d", len(entries), open)
	}

	// deleteledger needs --force.
	if code, _, errOut := shell(t, uri, "deleteledger", strconv.FormatInt(kept, 10)); code != 2 || !strings.Contains(errOut, "--force") {
		t.Fatalf("deleteledger without --force: exit %d: %s", code, errOut)
	}
	mustShell(t, uri, "deleteledger", "-f", strconv.FormatInt(kept, 10))

	// Bad input: a clear message, the documented exit code.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"readledger", strconv.FormatInt(kept, 10)}, 1, "does not exist"},
		{[]string{"inspectledger", "12345"}, 1, "does not exist"},
		{[]string{"deleteledger", "-f", "12345"}, 1, "does not exist"},
		{[]string{"readledger", strconv.FormatInt(open, 10), "--password", "wrong"}, 1, "wrong password"},
		{[]string{"readledger", "-5"}, 2, "unknown shorthand flag"},
		{[]string{"readledger", "x"}, 2, "bad ledger id"},
		{[]string{"simpletest", "-e", "2", "-w", "3"}, 2, "ensemble ≥ write quorum"},
		{[]string{"simpletest", "-n", "many"}, 2, "invalid argument"},
		{[]string{"listbookies", "--readwrite", "--readonly"}, 2, "at most one"},
		{[]string{"inspectledger"}, 2, "accepts 1 arg"},
	} {
		code, _, errOut := shell(t, uri, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("folio shell %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	sa.Terminate()
	// readjournal works offline on a stopped bookie's journal.
	var recs []struct {
		Type     string
		LedgerID int64
	}
	mustJSON(t, mustShell(t, uri, "readjournal", sa.Dir+"/bookie-0/journal/current", "-o", "json"), &recs)
	if len(recs) == 0 {
		t.Fatal("readjournal: no records")
	}
	// The metadata store is gone now.
	for _, args := range [][]string{{"listbookies"}, {"readledger", "1"}, {"simpletest", "-n", "1"}, {"inspectledger", "1"}} {
		code, _, errOut := shell(t, uri, args...)
		if code != 1 || !strings.Contains(errOut, "hint: check that the metadata store is running") {
			t.Errorf("folio shell %v with no metadata store: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestStandaloneZeroBookies runs `folio standalone --bookies 0`: etcd,
// HTTP and AutoRecovery only; the readiness line lists no bookies and the
// embedded auditor is elected.
func TestStandaloneZeroBookies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone cluster")
	}
	sa := testcluster.StartStandalone(t, t.TempDir(), "--bookies", "0")
	if !strings.HasSuffix(sa.ReadyLine, " bookies=") || len(sa.BookieIDs) != 0 {
		t.Fatalf("readiness line %q", sa.ReadyLine)
	}
	var bookies []admin.BookieStatus
	mustJSON(t, mustShell(t, sa.URI, "listbookies", "-o", "json"), &bookies)
	if len(bookies) != 0 {
		t.Fatalf("listbookies: %v", bookies)
	}
	var aud struct{ Auditor string }
	for deadline := time.Now().Add(20 * time.Second); aud.Auditor == ""; {
		if code, out, _ := shell(t, sa.URI, "whoisauditor", "-o", "json"); code == 0 {
			mustJSON(t, out, &aud)
		} else if time.Now().After(deadline) {
			t.Fatal("no auditor elected")
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !strings.HasPrefix(aud.Auditor, "127.0.0.1:") {
		t.Fatalf("whoisauditor: %+v", aud)
	}
	sa.Terminate()
}
