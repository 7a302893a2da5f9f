package cli_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/cli"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
	"github.com/foliodb/folio/internal/testcluster"
)

// testBookieConfig loads b's configuration file with the --set pairs of
// overrides (key=value after each "--set").
func testBookieConfig(t *testing.T, b *testcluster.Bookie, overrides []string) server.Config {
	t.Helper()
	var set []string
	for i := 0; i+1 < len(overrides); i += 2 {
		set = append(set, overrides[i+1])
	}
	cfg, err := server.LoadConfig(b.ConfPath, server.Overrides{Getenv: func(string) string { return "" }, Set: set}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// namesBookie reports whether any ensemble of ledger id names b.
func namesBookie(ctx context.Context, t *testing.T, md metadata.LedgerManager, id int64, b metadata.BookieID) bool {
	t.Helper()
	m, _, err := md.ReadLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(m.Ensembles, func(s metadata.Segment) bool { return slices.Contains(s.Ensemble, b) })
}

// readBackLedgers reads every entry of the ledgers through a new client.
func readBackLedgers(ctx context.Context, t *testing.T, uri string, ends map[int64]int64) {
	t.Helper()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for id, last := range ends {
		r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatalf("open ledger %d: %v", id, err)
		}
		entries, err := r.Read(ctx, 0, last)
		r.Close()
		if err != nil {
			t.Fatalf("read ledger %d: %v", id, err)
		}
		for i, e := range entries {
			if string(e.Payload) != string(entryPayload(id, int64(i))) {
				t.Fatalf("ledger %d entry %d differs", id, i)
			}
		}
	}
}

// TestShellClusterCommandsCustomIDs runs the cluster commands against live
// bookies with custom ids (bookieId): endpointinfo, clusterinfo,
// listledgers --bookieid/-m, listunderreplicated -c/--printreplicationworkerid,
// queryautorecoverystatus, ledgermetadata --dumptofile/--restorefromfile and
// recover --query/--dryrun/--ledger/--delete-cookie, every one with -o json.
func TestShellClusterCommandsCustomIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 4, testcluster.WithCustomBookieIDs())
	uri := cl.URI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// endpointinfo: the registration names the bookie's address and its
	// admin HTTP server.
	b0 := cl.Bookies[0]
	var ep cli.EndpointInfoView
	mustJSON(t, mustShell(t, uri, "endpointinfo", "--bookieid", string(b0.ID), "-o", "json"), &ep)
	if ep.BookieID != string(b0.ID) || len(ep.Endpoints) != 2 ||
		ep.Endpoints[0].Protocol != metadata.BookieRPCProtocol || ep.Endpoints[0].Host+":"+strconv.Itoa(ep.Endpoints[0].Port) != b0.Addr() ||
		ep.Endpoints[1].ID != metadata.HTTPServerEndpointID || ep.Endpoints[1].Port != b0.HTTPPort {
		t.Fatalf("endpointinfo %s: %+v", b0.ID, ep)
	}
	if out := mustShell(t, uri, "endpointinfo", "-b", string(b0.ID)); !strings.Contains(out, b0.Addr()) {
		t.Fatalf("endpointinfo text:\n%s", out)
	}
	if code, _, errOut := shell(t, uri, "endpointinfo", "--bookieid", "nosuchbookie"); code != 1 || !strings.Contains(errOut, "not registered") {
		t.Fatalf("endpointinfo of an unknown bookie: exit %d, %s", code, errOut)
	}

	var info cli.ClusterInfoView
	mustJSON(t, mustShell(t, uri, "clusterinfo", "-o", "json"), &info)
	if info != (cli.ClusterInfoView{LedgerReplicationEnabled: true, TotalBookiesCount: 4, WritableBookiesCount: 4}) {
		t.Fatalf("clusterinfo: %+v", info)
	}

	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeLedgers(ctx, t, c, cl.MD, 6, 10)
	ids := make([]int64, 0, len(ends))
	for id := range ends {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	// listledgers --bookieid: the ledgers storing entries on the bookie.
	for _, b := range cl.Bookies {
		var rows []cli.LedgerListRow
		mustJSON(t, mustShell(t, uri, "listledgers", "--bookieid", string(b.ID), "-o", "json"), &rows)
		var want []int64
		for _, id := range ids {
			m, _, err := cl.MD.ReadLedger(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if admin.StoresEntriesOn(m, b.ID) {
				want = append(want, id)
			}
		}
		var got []int64
		for _, r := range rows {
			got = append(got, r.LedgerID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listledgers --bookieid %s = %v, want %v", b.ID, got, want)
		}
	}
	var metas []cli.LedgerMetadataView
	mustJSON(t, mustShell(t, uri, "listledgers", "-m", "-o", "json"), &metas)
	if len(metas) != len(ids) || metas[0].LedgerID != ids[0] || metas[0].State != "CLOSED" || len(metas[0].Ensembles[0].Bookies) != 3 {
		t.Fatalf("listledgers -m: %+v", metas)
	}

	// Under-replication, and a replication worker holding a ledger.
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	ur := ids[0]
	if err := ar.MarkLedgerUnderReplicated(ctx, ur, []metadata.BookieID{b0.ID}); err != nil {
		t.Fatal(err)
	}
	mustJSON(t, mustShell(t, uri, "clusterinfo", "-o", "json"), &info)
	if !info.ClusterUnderReplicated {
		t.Fatalf("clusterinfo with a marked ledger: %+v", info)
	}
	var count cli.UnderReplicatedCountView
	mustJSON(t, mustShell(t, uri, "listunderreplicated", "-c", "-o", "json"), &count)
	if count.Count != 1 {
		t.Fatalf("listunderreplicated -c: %+v", count)
	}
	mustJSON(t, mustShell(t, uri, "listunderreplicated", "-c", "--excludingmissingreplica", string(b0.ID), "-o", "json"), &count)
	if count.Count != 0 {
		t.Fatalf("listunderreplicated -c --excludingmissingreplica: %+v", count)
	}
	var recovering []cli.RecoveringLedgerView
	mustJSON(t, mustShell(t, uri, "queryautorecoverystatus", "-o", "json"), &recovering)
	if len(recovering) != 0 {
		t.Fatalf("queryautorecoverystatus with no worker: %+v", recovering)
	}
	sess, err := cl.MD.OpenSession(ctx, metadata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := ar.LockUnderReplicatedLedger(ctx, sess, ur, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	mustJSON(t, mustShell(t, uri, "queryautorecoverystatus", "-v", "-o", "json"), &recovering)
	if len(recovering) != 1 || recovering[0].LedgerID != ur || recovering[0].BookieID != "worker-1" ||
		recovering[0].LedgerSize == nil || *recovering[0].LedgerSize <= 0 {
		t.Fatalf("queryautorecoverystatus -v: %+v", recovering)
	}
	var urs []cli.UnderReplicatedRow
	mustJSON(t, mustShell(t, uri, "listunderreplicated", "--printreplicationworkerid", "-o", "json"), &urs)
	if len(urs) != 1 || urs[0].ReplicationWorkerID != "worker-1" || !slices.Equal(urs[0].MissingReplicas, []string{string(b0.ID)}) {
		t.Fatalf("listunderreplicated --printreplicationworkerid: %+v", urs)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = sess.Close(ctx)
	rec, err := ar.ReadUnderReplicatedLedger(ctx, ur)
	if err != nil {
		t.Fatal(err)
	}
	if err := ar.MarkLedgerReplicated(ctx, ur, rec.Version); err != nil {
		t.Fatal(err)
	}

	// ledgermetadata --dumptofile / --restorefromfile.
	dumped := ids[1]
	file := filepath.Join(t.TempDir(), "ledger.bin")
	mustShell(t, uri, "ledgermetadata", "--ledgerid", strconv.FormatInt(dumped, 10), "--dumptofile", file, "-o", "json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 || !strings.HasPrefix(string(b), "BookieMetadataFormatVersion\t3\n") {
		t.Fatalf("dump: mode %v, %q", st.Mode(), b[:min(len(b), 32)])
	}
	want, _, err := cl.MD.ReadLedger(ctx, dumped)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.MD.DeleteLedger(ctx, dumped, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	var restored cli.LedgerMetadataFileView
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(dumped, 10), "--restorefromfile", file, "-o", "json"), &restored)
	if restored.Action != "created" {
		t.Fatalf("restore: %+v", restored)
	}
	if code, _, errOut := shell(t, uri, "ledgermetadata", strconv.FormatInt(dumped, 10), "--restorefromfile", file); code != 1 || !strings.Contains(errOut, "already has metadata") {
		t.Fatalf("restore over existing metadata: exit %d, %s", code, errOut)
	}
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(dumped, 10), "--restorefromfile", file, "--update", "-o", "json"), &restored)
	if restored.Action != "updated" {
		t.Fatalf("restore --update: %+v", restored)
	}
	if got, _, err := cl.MD.ReadLedger(ctx, dumped); err != nil || !got.Equal(want) {
		t.Fatalf("restored metadata %+v (%v), want %+v", got, err, want)
	}
	if code, _, _ := shell(t, uri, "ledgermetadata", "1", "--restorefromfile", filepath.Join(t.TempDir(), "missing")); code != 1 {
		t.Fatalf("restore from a missing file: exit %d", code)
	}

	// A bookie dies; recover its data: --query and --dryrun change
	// nothing, --ledger moves one ledger, then the rest, and
	// --delete-cookie removes its cookie once done.
	victim := cl.Bookies[1]
	var victimLedgers []int64
	for _, id := range ids {
		if namesBookie(ctx, t, cl.MD, id, victim.ID) {
			victimLedgers = append(victimLedgers, id)
		}
	}
	if len(victimLedgers) < 2 {
		t.Fatalf("want at least 2 ledgers on %s, have %v", victim.ID, victimLedgers)
	}
	victim.Kill()
	victim.WaitUnregistered()
	mustJSON(t, mustShell(t, uri, "clusterinfo", "-o", "json"), &info)
	if info.TotalBookiesCount != 4 || info.WritableBookiesCount != 3 || info.UnavailableBookiesCount != 1 {
		t.Fatalf("clusterinfo with a dead bookie: %+v", info)
	}
	var q []cli.RecoverQueryRow
	mustJSON(t, mustShell(t, uri, "recover", "--query", string(victim.ID), "-o", "json"), &q)
	var qids []int64
	for _, r := range q {
		qids = append(qids, r.LedgerID)
		if r.State != "CLOSED" || len(r.Ensembles) != 1 || r.Ensembles[0].ToReplace != 1 {
			t.Fatalf("recover --query row: %+v", r)
		}
	}
	if !slices.Equal(qids, victimLedgers) {
		t.Fatalf("recover --query = %v, want %v", qids, victimLedgers)
	}
	var plan []admin.PlannedLedger
	mustJSON(t, mustShell(t, uri, "recover", "--dryrun", string(victim.ID), "-o", "json"), &plan)
	if len(plan) != len(victimLedgers) || plan[0].Fence || len(plan[0].Fragments) != 1 ||
		!slices.Equal(plan[0].Fragments[0].Replace, []string{string(victim.ID)}) {
		t.Fatalf("recover --dryrun: %+v", plan)
	}
	for _, id := range victimLedgers {
		if !namesBookie(ctx, t, cl.MD, id, victim.ID) {
			t.Fatalf("--query/--dryrun changed ledger %d", id)
		}
	}
	var rv cli.RecoverBookieView
	mustJSON(t, mustShell(t, uri, "recover", "--ledger", strconv.FormatInt(victimLedgers[0], 10), string(victim.ID), "-o", "json"), &rv)
	if rv.Ledgers != 1 || namesBookie(ctx, t, cl.MD, victimLedgers[0], victim.ID) || !namesBookie(ctx, t, cl.MD, victimLedgers[1], victim.ID) {
		t.Fatalf("recover --ledger %d: %+v", victimLedgers[0], rv)
	}
	mustJSON(t, mustShell(t, uri, "recover", string(victim.ID), "--delete-cookie", "-o", "json"), &rv)
	if rv.Ledgers != len(victimLedgers)-1 || !slices.Equal(rv.DeletedCookies, []string{string(victim.ID)}) {
		t.Fatalf("recover --delete-cookie: %+v", rv)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, victim.ID); err == nil {
		t.Fatalf("cookie of %s still stored", victim.ID)
	}
	checkReplicated(ctx, t, cl.MD, ends, victim.ID)
	readBackLedgers(ctx, t, uri, ends)
}

// TestShellReaddressBookie is the "bookie address changed" runbook
// (docs/operations.md): a bookie with an address-based id comes back under
// another address. It refuses to start on its old cookie; updatecookie
// --from-bookieid moves the cookie; updateBookieInLedger (refused while the
// old id is registered) re-addresses the ledgers; the data reads back.
// Then updatecookie --list, --expandstorage and --delete on the stopped
// bookie.
func TestShellReaddressBookie(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 3)
	uri := cl.URI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	ends := writeLedgers(ctx, t, c, cl.MD, 4, 10)
	c.Close()
	b := cl.Bookies[2]
	oldID := b.ID
	newID := metadata.BookieID("localhost:" + strconv.Itoa(b.Port))

	// The source must not be registered.
	code, _, errOut := shell(t, uri, "updateBookieInLedger", "--srcBookie", string(oldID), "--destBookie", string(newID))
	if code != 1 || !strings.Contains(errOut, "still registered") {
		t.Fatalf("updateBookieInLedger with the source registered: exit %d, %s", code, errOut)
	}

	b.Terminate()
	b.WaitUnregistered()
	moved := []string{"--set", "advertisedAddress=localhost"}
	b.Start(moved...)
	if exited, _ := b.Exited(testcluster.StartTimeout); !exited {
		t.Fatal("the bookie started under a new id on its old cookie")
	}

	var uc cli.UpdateCookieView
	mustJSON(t, mustShell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--from-bookieid", string(oldID), "-o", "json"}, moved...)...), &uc)
	if uc.OldBookieID != string(oldID) || uc.BookieID != string(newID) || len(uc.Directories) != 2 {
		t.Fatalf("updatecookie --from-bookieid: %+v", uc)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, oldID); err == nil {
		t.Fatalf("the cookie of %s is still stored", oldID)
	}
	b.ID = newID
	b.Start(moved...)
	b.WaitRegistered(false)

	var ul cli.UpdateLedgersView
	mustJSON(t, mustShell(t, uri, "updateBookieInLedger", "--srcBookie", string(oldID), "--destBookie", string(newID),
		"--updatespersec", "1000", "-o", "json"), &ul)
	var want []int64
	for id := range ends {
		if namesBookie(ctx, t, cl.MD, id, oldID) {
			t.Fatalf("ledger %d still names %s", id, oldID)
		}
		if namesBookie(ctx, t, cl.MD, id, newID) {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	if ul.Examined != len(ends) || !slices.Equal(ul.Updated, want) || len(want) == 0 {
		t.Fatalf("updateBookieInLedger: %+v, want updated %v", ul, want)
	}
	// Run again: nothing left to do.
	mustJSON(t, mustShell(t, uri, "updateBookieInLedger", "--srcBookie", string(oldID), "--destBookie", string(newID), "-o", "json"), &ul)
	if len(ul.Updated) != 0 {
		t.Fatalf("second updateBookieInLedger: %+v", ul)
	}
	checkReplicated(ctx, t, cl.MD, ends, oldID)
	readBackLedgers(ctx, t, uri, ends)

	// The cookie commands on the stopped bookie.
	b.Terminate()
	b.WaitUnregistered()
	mustJSON(t, mustShell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--list", "-o", "json"}, moved...)...), &uc)
	if len(uc.LocalCookies) != 2 || !uc.StoredCookie {
		t.Fatalf("updatecookie --list: %+v", uc)
	}
	extra := filepath.Join(t.TempDir(), "ledgers2")
	expanded := append(slices.Clone(moved), "--set", "ledgerDirectories="+filepath.Join(b.Dir, "ledgers")+","+extra)
	mustJSON(t, mustShell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--expandstorage", "-o", "json"}, expanded...)...), &uc)
	if !slices.Equal(uc.Directories, []string{extra}) {
		t.Fatalf("updatecookie --expandstorage: %+v", uc)
	}
	// The stored cookie and every directory's list the new directory (the
	// bookie's storage takes it at its next start: the server package's
	// TestProcessExpandStorageOffline).
	var cv cli.CookieView
	mustJSON(t, mustShell(t, uri, "cookie", "get", string(newID), "-o", "json"), &cv)
	if !slices.Equal(cv.LedgerDirs, []string{filepath.Join(b.Dir, "ledgers"), extra}) {
		t.Fatalf("stored cookie after --expandstorage: %+v", cv)
	}
	stored, _, err := cl.MD.ReadCookie(ctx, newID)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(b.Dir, "journal"), filepath.Join(b.Dir, "ledgers"), extra} {
		local, err := os.ReadFile(filepath.Join(dir, "current", "VERSION"))
		if err != nil || string(local) != string(stored) {
			t.Fatalf("cookie in %s: %q (%v), want the stored one %q", dir, local, err, stored)
		}
	}
	// The bookie starts with the added directory without
	// allowStorageExpansion (the cookie lists it) and serves its data.
	b.Start(expanded...)
	b.WaitRegistered(false)
	readBackLedgers(ctx, t, uri, ends)
	if _, err := os.Stat(filepath.Join(extra, "current", "LAYOUT")); err != nil {
		t.Fatalf("the storage did not take the added directory: %v", err)
	}
	b.Terminate()
	b.WaitUnregistered()

	if code, _, _ := shell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--delete"}, expanded...)...); code != 2 {
		t.Fatalf("updatecookie --delete without --force: exit %d", code)
	}
	mustJSON(t, mustShell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--delete", "force", "-o", "json"}, expanded...)...), &uc)
	if len(uc.LocalCookies) != 3 || !uc.StoredCookie {
		t.Fatalf("updatecookie --delete force: %+v", uc)
	}
	if _, _, err := cl.MD.ReadCookie(ctx, newID); err == nil {
		t.Fatalf("the cookie of %s is still stored", newID)
	}
}

// TestShellUpdateCookieAndLedgersHostname: a bookie whose id was its IP
// address switches to its host name (useHostNameAsBookieID=true):
// updatecookie --bookieid hostname moves its cookie, updateledgers
// --bookieid hostname rewrites the ledgers, and the bookie comes back under
// the new id with its data.
func TestShellUpdateCookieAndLedgersHostname(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 2)
	uri := cl.URI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A bookie whose id is an IP address of this machine (no
	// advertisedAddress), listening on every interface.
	b := cl.NewBookie()
	asIP := []string{"--set", "advertisedAddress=", "--set", "listenHost="}
	ipCfg := testBookieConfig(t, b, asIP)
	oldID, err := ipCfg.BookieID(b.Port)
	if err != nil {
		t.Fatal(err)
	}
	hostCfg := ipCfg
	hostCfg.UseHostNameAsBookieID = true
	newID, err := hostCfg.BookieID(b.Port)
	if err != nil {
		t.Fatal(err)
	}
	b.ID = oldID
	b.Start(asIP...)
	b.WaitRegistered(false)

	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int64]int64{}
	for range 3 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(5) {
			if _, err := w.Append(ctx, entryPayload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ends[w.ID()] = 4
	}
	c.Close()
	b.Terminate()
	b.WaitUnregistered()

	asHost := append(slices.Clone(asIP), "--set", "useHostNameAsBookieID=true")
	// The configuration must say the new choice.
	if code, _, errOut := shell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--bookieid", "hostname"}, asIP...)...); code != 1 ||
		!strings.Contains(errOut, "useHostNameAsBookieID=true") {
		t.Fatalf("updatecookie --bookieid hostname with useHostNameAsBookieID=false: exit %d, %s", code, errOut)
	}
	var uc cli.UpdateCookieView
	mustJSON(t, mustShell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--bookieid", "hostname", "-o", "json"}, asHost...)...), &uc)
	if uc.OldBookieID != string(oldID) || uc.BookieID != string(newID) || len(uc.Directories) != 2 {
		t.Fatalf("updatecookie --bookieid hostname: %+v", uc)
	}
	var ul cli.UpdateLedgersView
	mustJSON(t, mustShell(t, uri, append([]string{"updateledgers", "--conf", b.ConfPath, "--bookieid", "hostname",
		"--updatespersec", "1000", "--limit", "100", "--verbose", "true", "-o", "json"}, asHost...)...), &ul)
	var ids []int64
	for id := range ends {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if ul.From != string(oldID) || ul.To != string(newID) || !slices.Equal(ul.Updated, ids) {
		t.Fatalf("updateledgers: %+v, want %v updated", ul, ids)
	}
	for _, id := range ids {
		if namesBookie(ctx, t, cl.MD, id, oldID) || !namesBookie(ctx, t, cl.MD, id, newID) {
			t.Fatalf("ledger %d not re-addressed", id)
		}
	}
	// The bookie under its host name; clients reach it through the address
	// its registration publishes: the host name, resolved by the system,
	// which this machine must be able to do for the rest.
	host, _, _ := net.SplitHostPort(string(newID))
	if _, err := net.LookupHost(host); err != nil {
		t.Logf("host name %s does not resolve (%v): not restarting the bookie under it", host, err)
		return
	}
	b.ID = newID
	b.Start(asHost...)
	b.WaitRegistered(false)
	readBackLedgers(ctx, t, uri, ends)
}

// TestShellIdentityOnZooKeeper runs the identity commands on a ZooKeeper
// metadata store with live bookies with custom ids: endpointinfo (the
// registration znode's BookieServiceInfo), ledgermetadata
// --dumptofile/--restorefromfile, and a bookie renamed (bookieId changed):
// updatecookie --from-bookieid, then updateBookieInLedger, whose
// compare-and-sets go through the ZooKeeper driver; the data reads back.
func TestShellIdentityOnZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	srv := zktest.Start(t)
	uri := zktest.URI(srv, "/ledgers")
	mustShell(t, uri, "initnewcluster")
	cl := testcluster.Start(t, 3, testcluster.WithMetadataURI(uri), testcluster.WithExistingCluster(), testcluster.WithCustomBookieIDs())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	b := cl.Bookies[2]
	var ep cli.EndpointInfoView
	mustJSON(t, mustShell(t, uri, "endpointinfo", "--bookieid", string(b.ID), "-o", "json"), &ep)
	if len(ep.Endpoints) == 0 || ep.Endpoints[0].Host+":"+strconv.Itoa(ep.Endpoints[0].Port) != b.Addr() {
		t.Fatalf("endpointinfo %s on ZooKeeper: %+v", b.ID, ep)
	}
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	ends := writeLedgers(ctx, t, c, cl.MD, 3, 10)
	c.Close()
	var dumped int64
	for id := range ends {
		dumped = id
	}
	file := filepath.Join(t.TempDir(), "ledger.bin")
	mustShell(t, uri, "ledgermetadata", strconv.FormatInt(dumped, 10), "--dumptofile", file)
	want, _, err := cl.MD.ReadLedger(ctx, dumped)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.MD.DeleteLedger(ctx, dumped, metadata.VersionAny); err != nil {
		t.Fatal(err)
	}
	var restored cli.LedgerMetadataFileView
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(dumped, 10), "--restorefromfile", file, "-o", "json"), &restored)
	mustJSON(t, mustShell(t, uri, "ledgermetadata", strconv.FormatInt(dumped, 10), "--restorefromfile", file, "--update", "-o", "json"), &restored)
	if got, _, err := cl.MD.ReadLedger(ctx, dumped); err != nil || !got.Equal(want) || restored.Action != "updated" {
		t.Fatalf("restored on ZooKeeper: %+v (%v), %+v", got, err, restored)
	}

	// The bookie is renamed: stop it, move its cookie, start it under the
	// new id, re-address the ledgers.
	oldID, newID := b.ID, metadata.BookieID(string(b.ID)+"-renamed")
	b.Terminate()
	b.WaitUnregistered()
	renamed := []string{"--set", "bookieId=" + string(newID)}
	mustShell(t, uri, append([]string{"updatecookie", "--conf", b.ConfPath, "--from-bookieid", string(oldID)}, renamed...)...)
	b.ID = newID
	b.Start(renamed...)
	b.WaitRegistered(false)
	var ul cli.UpdateLedgersView
	mustJSON(t, mustShell(t, uri, "updateBookieInLedger", "--srcBookie", string(oldID), "--destBookie", string(newID),
		"--updatespersec", "1000", "-o", "json"), &ul)
	if ul.Examined != len(ends) || len(ul.Updated) == 0 {
		t.Fatalf("updateBookieInLedger on ZooKeeper: %+v", ul)
	}
	checkReplicated(ctx, t, cl.MD, ends, oldID)
	readBackLedgers(ctx, t, uri, ends)
}
