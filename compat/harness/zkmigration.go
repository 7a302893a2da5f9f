package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// ZooKeeperMigration (compat/zkmigration) follows docs/operations.md
// "Migrating from Java bookies" on a small cluster: a ZooKeeper cluster
// initialised by Java (`initnewcluster`, URI zk:// without a type) with
// three Java bookies and Java's AutoRecoveryMain, holding ledgers written
// by Java clients (every digest type, v3 and v2, E=3 and E=2, and one
// ledger its writer left open), gains three Folio bookies and
// `folio autorecovery`; each Java bookie in turn is stopped and
// decommissioned (the first and last with `folio shell
// decommissionbookie`, the second with Java's `decommissionbookie`) while
// AutoRecovery moves its data, with the runbook's checks between steps;
// Java's AutoRecoveryMain is stopped last. At the end only Folio bookies
// are registered and hold cookies, no ledger names a Java bookie, every
// entry is on every bookie of its write set, and both clients read every
// ledger byte-exact.
func ZooKeeperMigration(t *testing.T) {
	srv, classpath := startZooKeeper(t)
	root := "/ledgers"
	uri := zkURI(srv, "", root)
	raw := rawZK(t, srv)
	runJavaShell(t, classpath, uri, "initnewcluster")
	waits := []func() javaBookie{startJavaBookie(t, classpath, uri), startJavaBookie(t, classpath, uri), startJavaBookie(t, classpath, uri)}
	var jbs []javaBookie
	var javaIDs []string
	for _, w := range waits {
		jb := w()
		jbs = append(jbs, jb)
		javaIDs = append(javaIDs, jb.addr)
	}
	waitRegistered(t, uri, javaIDs)
	log4j := filepath.Join(t.TempDir(), "log4j2-autorecovery.xml")
	if err := os.WriteFile(log4j, []byte(autoRecoveryLog4j), 0o644); err != nil {
		t.Fatal(err)
	}
	ja := startJavaAutoRecovery(t, classpath, uri, "-Dlog4j2.configurationFile="+log4j)
	var fcl *testcluster.Cluster
	var fa *testcluster.AutoRecovery
	defer func() {
		if t.Failed() {
			for _, jb := range jbs {
				t.Logf("--- Java bookie %s log (tail) ---\n%s", jb.addr, tailFile(jb.logPath, 30))
			}
			t.Logf("--- Java AutoRecoveryMain %s log (tail) ---\n%s", ja.id, tailFile(ja.logPath, 60))
			if fa != nil {
				t.Logf("--- folio autorecovery log (tail) ---\n%s", tailFile(fa.LogPath(), 60))
			}
		}
	}()

	// The Java cluster's data, written by Java clients.
	const n = 20
	ls := ledgerSet{}
	for _, r := range runDriver(t, classpath, uri, "v3", "write", "--digest", strings.Join(allDigestNames(), ","),
		"--password", password, "--entries", fmt.Sprint(n), "--seed", "601") {
		ls[r.int("ledgerId")] = 601
	}
	for _, r := range runDriver(t, classpath, uri, "v2", "write", "--digest", "CRC32C,MAC", "--password", password,
		"--entries", fmt.Sprint(n), "--seed", "602", "--ensemble", "2", "--write-quorum", "2", "--ack-quorum", "2") {
		ls[r.int("ledgerId")] = 602
	}
	// A writer that went away without closing its ledger: AutoRecovery
	// fences and closes it after its grace period.
	open := runDriver(t, classpath, uri, "v3", "write", "--digest", "CRC32", "--password", password,
		"--entries", fmt.Sprint(n), "--seed", "603", "--close", "false")[0]
	ls[open.int("ledgerId")] = 603
	t.Logf("ledgers written by Java clients: %v (ledger %d left open)", ls, open.int("ledgerId"))
	c := &zkRecoveryCluster{classpath: classpath, uri: uri, root: root, raw: raw}
	c.waitLeader(t, ja.id, ja.id)

	// Before: the listing to compare with at the end; AutoRecovery
	// enabled; nothing under-replicated.
	var before, after []struct {
		LedgerID int64 `json:"ledgerId"`
	}
	folioShell(t, uri, &before, "listledgers")
	var enabled struct {
		Enabled bool `json:"enabled"`
	}
	folioShell(t, uri, &enabled, "autorecovery")
	var ur []struct {
		LedgerID int64 `json:"ledgerId"`
	}
	folioShell(t, uri, &ur, "listunderreplicated")
	if len(before) != len(ls) || !enabled.Enabled || len(ur) != 0 {
		t.Fatalf("before the migration: %d ledgers listed (%d written), AutoRecovery enabled %v, under-replicated %v", len(before), len(ls), enabled.Enabled, ur)
	}

	// Step 1: Folio bookies join the cluster; Java lists them, and
	// bookiesanity writes and reads on each.
	fcl = startFolioBookies(t, uri, 3)
	c.md, c.folio = fcl.MD, fcl
	c.ar = c.md.(metadata.AutoRecoveryDriver)
	var folioIDs []string
	for _, b := range fcl.Bookies {
		folioIDs = append(folioIDs, b.Addr())
		var sanity []struct {
			OK bool `json:"ok"`
		}
		folioShell(t, uri, &sanity, "bookiesanity", "--bookie", b.Addr())
		if len(sanity) != 1 || !sanity[0].OK {
			t.Fatalf("folio shell bookiesanity --bookie %s: %v", b.Addr(), sanity)
		}
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(javaIDs), folioIDs...)))
	if got := shellBookies(runJavaShell(t, classpath, uri, "listbookies -rw")[0]); !slices.Equal(got, want) {
		t.Fatalf("Java's listbookies -rw after the Folio bookies joined: %v, want %v", got, want)
	}
	// Step 2: Folio's AutoRecovery next to Java's, in the same election.
	folioAR := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	fa = fcl.StartAutoRecovery(folioAR, "--workers", "2")
	c.waitLeader(t, ja.id, ja.id, folioAR)

	// Step 3: each Java bookie in turn: stop, decommission, check.
	for i, jb := range jbs {
		t.Run("Decommission"+fmt.Sprint(i+1), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), recoveryTimeout)
			defer cancel()
			start := time.Now()
			jb.proc.terminate()
			waitFor(t, time.Minute, jb.addr+" to deregister", func() bool {
				w, err1 := c.md.WritableBookies(ctx)
				r, err2 := c.md.ReadOnlyBookies(ctx)
				return err1 == nil && err2 == nil && !slices.Contains(w, metadata.BookieID(jb.addr)) && !slices.Contains(r, metadata.BookieID(jb.addr))
			}, nil)
			how := "folio shell decommissionbookie"
			if i == 1 {
				how = "Java's bookkeeper shell decommissionbookie"
				runJavaShell(t, classpath, uri, "decommissionbookie -bookieid "+jb.addr)
			} else if out, err := folioShellRaw(t, uri, "decommissionbookie", "--bookie-id", jb.addr, "--poll-interval", "200ms"); err != nil {
				t.Fatalf("folio shell decommissionbookie --bookie-id %s: %v\n%s", jb.addr, err, out)
			}
			t.Logf("%s decommissioned %s in %v", how, jb.addr, time.Since(start).Round(time.Millisecond))
			// The runbook's checks: no ledger names it, nothing is
			// under-replicated, its cookie is gone, the rest are
			// registered.
			if held := c.holding(ctx, t, jb.addr, slices.Collect(mapKeys(ls))); len(held) != 0 {
				t.Fatalf("after decommissioning %s, ledgers %v still name it", jb.addr, held)
			}
			folioShell(t, uri, &ur, "listunderreplicated")
			if len(ur) != 0 {
				t.Fatalf("after decommissioning %s: under-replicated %v", jb.addr, ur)
			}
			if out, err := folioShellRaw(t, uri, "cookie", "get", jb.addr); err == nil || !strings.Contains(out, "cookie") {
				t.Fatalf("after decommissioning %s: folio shell cookie get: %v\n%s", jb.addr, err, out)
			}
			if ok, _, err := raw.Exists(root + "/cookies/" + jb.addr); err != nil || ok {
				t.Fatalf("after decommissioning %s: its cookie exists %v (%v)", jb.addr, ok, err)
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(javaIDs[i+1:]), folioIDs...)))
			if got, err := registeredBookies(ctx, c.md); err != nil || !slices.Equal(got, want) {
				t.Fatalf("after decommissioning %s: registered %v (%v), want %v", jb.addr, got, err, want)
			}
		})
		if t.Failed() {
			return
		}
	}

	// Step 4: Java's AutoRecoveryMain goes; Folio's is the auditor.
	ja.proc.terminate()
	c.waitLeader(t, folioAR, folioAR)

	// Only Folio bookies remain, in the registrations and the cookies,
	// and every ledger is theirs, complete and byte-exact.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outs := runJavaShell(t, classpath, uri, "listbookies -rw", "listbookies -ro")
	slices.Sort(folioIDs)
	if rw, ro := shellBookies(outs[0]), shellBookies(outs[1]); !slices.Equal(rw, folioIDs) || len(ro) != 0 {
		t.Errorf("Java's listbookies at the end: -rw %v -ro %v; want %v", rw, ro, folioIDs)
	}
	cookies, _, err := raw.Children(root + "/cookies")
	if slices.Sort(cookies); err != nil || !slices.Equal(cookies, folioIDs) {
		t.Errorf("cookies at the end: %v (%v), want %v", cookies, err, folioIDs)
	}
	for id := range ls {
		md, _, err := c.md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !md.IsClosed() || md.LastEntryID != n-1 {
			t.Errorf("ledger %d at the end: state %v, last entry %d; want closed at %d", id, md.State, md.LastEntryID, n-1)
		}
		for _, s := range md.Ensembles {
			for _, b := range s.Ensemble {
				if !slices.Contains(folioIDs, string(b)) {
					t.Errorf("ledger %d at the end: ensemble from entry %d names %s, not a Folio bookie", id, s.FirstEntryID, b)
				}
			}
		}
	}
	c.checkLedgers(t, ls, n)
	folioShell(t, uri, &after, "listledgers")
	if !slices.Equal(before, after) {
		t.Errorf("folio shell listledgers: %v before the migration, %v after", before, after)
	}
	t.Logf("ledgers per worker:%s", workers(logMark{}, []string{ja.logPath}, []string{fa.LogPath()}))
}

// mapKeys yields the ledger ids of ls.
func mapKeys(ls ledgerSet) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for id := range ls {
			if !yield(id) {
				return
			}
		}
	}
}
