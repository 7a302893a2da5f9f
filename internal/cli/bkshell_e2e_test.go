package cli_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/cli"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestBookKeeperShellEndToEnd runs BookKeeper's spellings and the local
// commands against a live cluster (real bookie processes, embedded etcd),
// each with -o json: listbookies -rw/-ro/-a/-h, lastmark, a lost index
// rebuilt with rebuild-index and read back entry by entry from the bookie,
// localconsistencycheck on a sound and on a damaged entry log, the Pulsar
// chart's `bookieformat -nonInteractive -force -deleteCookie`, and
// initbookie.
func TestBookKeeperShellEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	victim := cl.Bookies[2]

	// listbookies, BookKeeper's way.
	var rows []cli.BookieView
	mustJSON(t, mustShell(t, cl.URI, "listbookies", "-rw", "-o", "json"), &rows)
	if len(rows) != 3 || rows[0].State != "writable" {
		t.Fatalf("listbookies -rw: %+v", rows)
	}
	mustJSON(t, mustShell(t, cl.URI, "listbookies", "-ro", "-o", "json"), &rows)
	if len(rows) != 0 {
		t.Fatalf("listbookies -ro: %+v", rows)
	}
	mustJSON(t, mustShell(t, cl.URI, "listbookies", "-rw", "-h", "-o", "json"), &rows)
	if len(rows) != 3 || rows[0].IP != "127.0.0.1" || rows[0].Port == 0 || rows[0].Hostname == "" {
		t.Fatalf("listbookies -rw -h: %+v", rows)
	}
	if out := mustShell(t, cl.URI, "listbookies", "-readwrite", "-hostnames"); !strings.Contains(out, "BookieID:"+victim.Addr()+", IP:127.0.0.1, Port:") {
		t.Fatalf("listbookies -readwrite -hostnames:\n%s", out)
	}
	if code, _, errOut := shell(t, cl.URI, "listbookies", "-rw", "-ro"); code != 2 || !strings.Contains(errOut, "at most one") {
		t.Fatalf("listbookies -rw -ro: exit %d, %q", code, errOut)
	}

	// Ledgers on every bookie (ensemble 3, write quorum 2).
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeLedgers(ctx, t, c, cl.MD, 6, 40)
	// A ledger whose ensemble includes the victim but which has no entry
	// on it (the victim may have fenced it): rebuild-index must give it a
	// fenced state from the metadata store's list.
	empty, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	checkAll := func() {
		t.Helper()
		for id := range ends {
			testcluster.CheckStored(ctx, t, cl.MD, id, []byte("pw"), func(e int64) []byte { return entryPayload(id, e) })
		}
	}

	// lastmark may run while the bookie runs.
	var marks []cli.LastMarkView
	mustJSON(t, mustLocal(t, "lastmark", "--conf", victim.ConfPath, "-o", "json"), &marks)
	if len(marks) != 1 || !marks[0].Checkpointed || !strings.HasSuffix(marks[0].File, ".jnl") {
		t.Fatalf("lastmark: %+v", marks)
	}
	if out := mustLocal(t, "lastmark", "--conf", victim.ConfPath); !strings.HasPrefix(out, "LastLogMark : Journal Id - ") {
		t.Fatalf("lastmark text: %q", out)
	}
	// The local commands that need the directories refuse a running bookie.
	for _, cmd := range []string{"rebuild-index", "localconsistencycheck"} {
		code, _, errOut := local(t, cmd, "--conf", victim.ConfPath, "-o", "json")
		if code != 1 || !strings.Contains(errOut, "in use") || !strings.Contains(errOut, "stop the bookie") {
			t.Fatalf("%s on a running bookie: exit %d, %q", cmd, code, errOut)
		}
	}

	// Stop, check, lose the index: the bookie refuses to start.
	victim.Terminate()
	victim.WaitUnregistered()
	// A graceful stop checkpoints: the mark moved past the records.
	mustJSON(t, mustLocal(t, "lastmark", "--conf", victim.ConfPath, "-o", "json"), &marks)
	if len(marks) != 1 || marks[0].FileID == 0 || marks[0].Offset <= 0 {
		t.Fatalf("lastmark after a stop: %+v", marks)
	}
	mustJSON(t, mustShell(t, cl.URI, "listbookies", "-a", "-o", "json"), &rows)
	if len(rows) != 3 || stateOf(rows, victim.Addr()) != "down" {
		t.Fatalf("listbookies -a with %s stopped: %+v", victim.Addr(), rows)
	}
	var check cli.ConsistencyView
	mustJSON(t, mustLocal(t, "localconsistencycheck", "--conf", victim.ConfPath, "-o", "json"), &check)
	if !check.OK || check.Entries == 0 || check.Ledgers != 6 || len(check.Problems) != 0 {
		t.Fatalf("localconsistencycheck: %+v", check)
	}
	ledgersDir := filepath.Join(victim.Dir, "ledgers", "current")
	if err := os.RemoveAll(filepath.Join(ledgersDir, "index")); err != nil {
		t.Fatal(err)
	}
	victim.Start()
	if exited, _ := victim.Exited(testcluster.StartTimeout); !exited {
		t.Fatal("the bookie started without its index")
	}
	if log, _ := os.ReadFile(victim.LogPath()); !strings.Contains(string(log), "index") || !strings.Contains(string(log), "missing") {
		t.Fatalf("refusal does not name the missing index:\n%s", log)
	}
	// Without the metadata store, the fences of ledgers without entries
	// here cannot be restored: refused unless accepted explicitly.
	code, _, errOut := local(t, "rebuild-index", "--conf", victim.ConfPath, "--master-keys-from-metadata=false", "-o", "json")
	if code != 1 || !strings.Contains(errOut, "--accept-lost-fences") {
		t.Fatalf("rebuild-index without the metadata store: exit %d, %q", code, errOut)
	}
	var rb cli.RebuildView
	mustJSON(t, mustLocal(t, "rebuild-index", "--conf", victim.ConfPath, "-o", "json"), &rb)
	if len(rb.Rebuilt) != 1 || rb.Rebuilt[0].Entries != check.Entries || rb.Rebuilt[0].Ledgers != 7 || len(rb.Damage) != 0 {
		t.Fatalf("rebuild-index: %+v (check saw %d entries)", rb, check.Entries)
	}
	// Every master key is back: from the journal or the ledgers' metadata;
	// the ledger without entries here is fenced.
	if d := rb.Rebuilt[0]; d.UnknownKeys != 0 || d.KeysFromJournal+d.KeysFromMetadata != 7 || d.FencedForSafety < 1 {
		t.Fatalf("rebuild-index master keys and fences (ledger %d has no entries here): %+v", empty.ID(), d)
	}
	mustJSON(t, mustLocal(t, "localconsistencycheck", "--conf", victim.ConfPath, "-o", "json"), &check)
	if !check.OK || check.Entries != rb.Rebuilt[0].Entries {
		t.Fatalf("localconsistencycheck after rebuild: %+v", check)
	}
	victim.Start()
	victim.WaitRegistered(false)
	checkAll() // every entry, read from each bookie of its write set alone

	// A damaged entry log: reported with ledger, entry and location; the
	// rebuild refuses it and changes nothing.
	victim.Terminate()
	victim.WaitUnregistered()
	logs, _ := filepath.Glob(filepath.Join(ledgersDir, "entrylogs", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no entry logs")
	}
	flipMiddleByte(t, logs[0])
	code, out, errOut := local(t, "localconsistencycheck", "--conf", victim.ConfPath, "-o", "json")
	mustJSON(t, out, &check)
	if code != 1 || check.OK || len(check.Problems) == 0 || check.Problems[0].LogID == 0 || !strings.Contains(errOut, "problems") {
		t.Fatalf("localconsistencycheck on a damaged log: exit %d, %+v, %q", code, check, errOut)
	}
	code, _, errOut = local(t, "rebuild-index", "--conf", victim.ConfPath, "--all", "-o", "json")
	if code != 1 || !strings.Contains(errOut, logs[0]) || !strings.Contains(errOut, "nothing was changed") {
		t.Fatalf("rebuild-index on a damaged log: exit %d, %q", code, errOut)
	}

	// The Pulsar chart's init step resets the bookie; initbookie makes it
	// a new bookie again.
	code, _, errOut = local(t, "initbookie", "--conf", victim.ConfPath)
	if code != 1 || !strings.Contains(errOut, "already has a cookie") {
		t.Fatalf("initbookie on an initialised bookie: exit %d, %q", code, errOut)
	}
	out = mustShell(t, cl.URI, "bookieformat", "--conf", victim.ConfPath, "-nonInteractive", "-force", "-deleteCookie", "-o", "json")
	if !strings.Contains(out, victim.Addr()) {
		t.Fatalf("bookieformat: %s", out)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, victim.ID); !errors.Is(err, metadata.ErrNoSuchCookie) {
		t.Fatalf("cookie after bookieformat: %v", err)
	}
	if ents, _ := os.ReadDir(ledgersDir); len(ents) != 0 {
		t.Fatalf("%s after bookieformat: %v", ledgersDir, ents)
	}
	// initbookie refuses directories holding data.
	if err := os.MkdirAll(filepath.Join(ledgersDir, "entrylogs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := local(t, "initbookie", "--conf", victim.ConfPath); code != 1 || !strings.Contains(errOut, "holds data") {
		t.Fatalf("initbookie on a directory with data: exit %d, %q", code, errOut)
	}
	if err := os.Remove(filepath.Join(ledgersDir, "entrylogs")); err != nil {
		t.Fatal(err)
	}
	var ib struct {
		BookieID    string   `json:"bookieId"`
		InstanceID  string   `json:"instanceId"`
		Directories []string `json:"directories"`
	}
	mustJSON(t, mustLocal(t, "initbookie", "--conf", victim.ConfPath, "-o", "json"), &ib)
	if ib.BookieID != victim.Addr() || ib.InstanceID == "" || len(ib.Directories) != 2 {
		t.Fatalf("initbookie: %+v", ib)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, victim.ID); err != nil {
		t.Fatalf("cookie after initbookie: %v", err)
	}
	victim.Start()
	victim.WaitRegistered(false)
	mustJSON(t, mustShell(t, cl.URI, "listbookies", "-a", "-o", "json"), &rows)
	if stateOf(rows, victim.Addr()) != "writable" {
		t.Fatalf("listbookies -a after initbookie: %+v", rows)
	}
}

func stateOf(rows []cli.BookieView, id string) string {
	for _, r := range rows {
		if r.ID == id {
			return r.State
		}
	}
	return ""
}

// local runs a `folio shell` command that reads the bookie configuration
// only (no --metadata-service-uri).
func local(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runFolio(t, nil, append([]string{"shell"}, args...)...)
}

func mustLocal(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := local(t, args...)
	if code != 0 {
		t.Fatalf("folio shell %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// flipMiddleByte damages one byte in the middle of path.
func flipMiddleByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], st.Size()/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], st.Size()/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
