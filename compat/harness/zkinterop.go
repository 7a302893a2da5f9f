package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// ZooKeeperInterop (compat/zookeeper) runs Java and Folio on one ZooKeeper
// server, each on its own ZooKeeper driver, on two clusters:
//
//   - /ledgers, initialised by Java's `bookkeeper shell initnewcluster`
//     (URI zk+hierarchical://), with two Java bookies and two Folio bookies,
//     so that every E=3 ensemble mixes both: each client writes every digest
//     type with v3 and v2 and the other reads byte-exact; each recovers
//     (fences) a ledger the other is still writing; each tails the other's
//     ledger; then Java's shell and Folio's agree on the cluster (bookies,
//     ledgers, ledger metadata, instance id, under-replicated ledgers
//     marked by either side);
//   - /folio/ledgers, initialised by `folio shell initnewcluster` (URI
//     zk://, no type: the hierarchical default), used by a Java bookie and
//     the Java client (and the Folio client).
func ZooKeeperInterop(t *testing.T) {
	srv, classpath := startZooKeeper(t)
	raw := rawZK(t, srv)

	uriA := zkURI(srv, "hierarchical", "/ledgers")
	runJavaShell(t, classpath, uriA, "initnewcluster")
	uriB := zkURI(srv, "", "/folio/ledgers")
	if out, err := folioShellRaw(t, uriB, "initnewcluster"); err != nil {
		t.Fatalf("folio shell initnewcluster on %s: %v\n%s", uriB, err, out)
	}
	// Java's LAYOUT and Folio's are the same bytes (the hierarchical
	// manager, format 2).
	layoutA, _, errA := raw.Get("/ledgers/LAYOUT")
	layoutB, _, errB := raw.Get("/folio/ledgers/LAYOUT")
	if errA != nil || errB != nil || !bytes.Equal(layoutA, layoutB) {
		t.Fatalf("LAYOUT written by Java %q (%v) and by Folio %q (%v) differ", layoutA, errA, layoutB, errB)
	}

	waitJ := []func() javaBookie{startJavaBookie(t, classpath, uriA), startJavaBookie(t, classpath, uriA)}
	waitB := startJavaBookie(t, classpath, uriB)
	folioA := startFolioBookies(t, uriA, 2)
	var javaIDs, folioIDs []string
	var jbs []javaBookie
	for _, w := range waitJ {
		jb := w()
		jbs = append(jbs, jb)
		javaIDs = append(javaIDs, jb.addr)
	}
	jbB := waitB()
	jbs = append(jbs, jbB)
	for _, b := range folioA.Bookies {
		folioIDs = append(folioIDs, b.Addr())
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(javaIDs), folioIDs...)))
	defer func() {
		if t.Failed() {
			for _, jb := range jbs {
				t.Logf("--- Java bookie %s log (tail) ---\n%s", jb.addr, tailFile(jb.logPath, 40))
			}
			for _, b := range folioA.Bookies {
				t.Logf("--- Folio bookie %s log (tail) ---\n%s", b.Addr(), tailFile(b.LogPath(), 20))
			}
		}
	}()
	waitRegistered(t, uriA, all)
	waitRegistered(t, uriB, []string{jbB.addr})
	dA := folioA.MD

	var sample []int64 // ledgers for the shell checks: written by each client
	for mi, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			e := interopEnv{classpath: classpath, uri: uriA, mode: mode, fc: newFolioClient(t, uriA, mode),
				bookies: all, where: "Java and Folio bookies on ZooKeeper", folio: testcluster.Binary(t)}
			seedBase := int64(mi+1)*100 + 80
			const n = 30
			t.Run("JavaWritesFolioReads", func(t *testing.T) {
				ids := javaWritesFolioReads(t, e, seedBase+1, n)
				checkMixed(t, dA, ids, javaIDs, folioIDs)
				sample = append(sample, ids...)
			})
			var folioLedgers []int64
			t.Run("FolioWritesJavaReads", func(t *testing.T) {
				folioLedgers = folioWritesJavaReads(t, e, seedBase+2, n)
				checkMixed(t, dA, folioLedgers, javaIDs, folioIDs)
				sample = append(sample, folioLedgers...)
			})
			t.Run("JavaSeesFolioMetadata", func(t *testing.T) {
				if len(folioLedgers) == 0 {
					t.Skip("no Folio ledgers (FolioWritesJavaReads failed)")
				}
				javaSeesFolioMetadata(t, e, folioLedgers, seedBase+2, n)
			})
			t.Run("JavaRecoversFolioWriter", func(t *testing.T) { javaRecoversFolioWriter(t, e, seedBase+3) })
			t.Run("FolioRecoversJavaWriter", func(t *testing.T) { folioRecoversJavaWriter(t, e, seedBase+4) })
			if mode == "v3" {
				// Tailing is the bookies' long poll plus the
				// ledger's metadata watch (the close): once.
				t.Run("JavaTailsFolioLedger", func(t *testing.T) { javaTailsFolioLedger(t, e, seedBase+5) })
				t.Run("FolioTailsJavaLedger", func(t *testing.T) { folioTailsJavaLedger(t, e, seedBase+6) })
			}
		})
	}
	t.Run("ShellsAgree", func(t *testing.T) {
		if len(sample) < 2 {
			t.Skip("too few ledgers written (the writes failed)")
		}
		shellsAgree(t, classpath, uriA, dA, sample, all, folioA.Bookies[1])
	})
	t.Run("FolioInitialisedClusterUsedByJava", func(t *testing.T) {
		folioClusterUsedByJava(t, classpath, uriB, jbB.addr)
	})
}

// checkMixed fails t unless every ledger of ids has, in its first
// ensemble, at least one Java bookie and one Folio bookie.
func checkMixed(t *testing.T, d metadata.Driver, ids []int64, javaIDs, folioIDs []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		md, _, err := d.ReadLedger(ctx, id)
		if err != nil {
			t.Fatalf("read ledger %d: %v", id, err)
		}
		var j, f int
		for _, b := range md.Ensembles[0].Ensemble {
			switch {
			case slices.Contains(javaIDs, string(b)):
				j++
			case slices.Contains(folioIDs, string(b)):
				f++
			}
		}
		if j == 0 || f == 0 {
			t.Errorf("ledger %d: ensemble %v is not mixed (Java bookies %v, Folio bookies %v)", id, md.Ensembles[0].Ensemble, javaIDs, folioIDs)
		}
	}
	t.Logf("ledgers %v: each ensemble holds Java and Folio bookies", ids)
}

var (
	shellLedgerID     = regexp.MustCompile(`^ledgerID: (\d+)$`)
	shellInstanceID   = regexp.MustCompile(`InstanceId: (\S+)`)
	shellURLedger     = regexp.MustCompile(`^(\d+)$`)
	shellURMissing    = regexp.MustCompile(`^\tMissingReplica : (\S+)$`)
	shellURCount      = regexp.MustCompile(`^Under replicated ledger count: (\d+)$`)
	shellAuditor      = regexp.MustCompile(`^Auditor: (\S+)$`)
	shellMetadataLine = regexp.MustCompile(`^LedgerMetadata\{.*\}$`)
)

// javaDigestName is Java's name (client.api.DigestType) of Folio's digest
// type name.
func javaDigestName(folio string) string {
	if folio == "HMAC" {
		return "MAC"
	}
	return folio
}

// shellsAgree runs Java's BookieShell and Folio's shell on the cluster at
// uri and checks that they say the same: whatisinstanceid, listbookies
// (read-write and read-only, with ro switched to read-only through its
// admin HTTP endpoint meanwhile), listledgers (also against Folio's
// driver), ledgermetadata of each ledger of ids, and listunderreplicated
// with the missing replicas, after one ledger was marked by Folio's driver
// and another by Java's own LedgerUnderreplicationManager.
func shellsAgree(t *testing.T, classpath, uri string, d metadata.Driver, ids []int64, bookies []string, ro *testcluster.Bookie) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	setReadOnly(t, ro, true)
	defer setReadOnly(t, ro, false)
	var writable []string
	for _, b := range bookies {
		if b != ro.Addr() {
			writable = append(writable, b)
		}
	}
	ar := d.(metadata.AutoRecoveryDriver)
	folioMarked, javaMarked := ids[0], ids[len(ids)-1]
	folioMissing := []string{bookies[0], bookies[1]}
	javaMissing := []string{bookies[2], bookies[3]}
	if err := ar.MarkLedgerUnderReplicated(ctx, folioMarked, []metadata.BookieID{metadata.BookieID(folioMissing[0]), metadata.BookieID(folioMissing[1])}); err != nil {
		t.Fatal(err)
	}
	runDriver(t, classpath, uri, "v3", "markur", "--ledger", fmt.Sprint(javaMarked), "--missing", strings.Join(javaMissing, ","))
	// Folio reads Java's record: the same missing replicas, and Java's
	// mark time.
	rec, err := ar.ReadUnderReplicatedLedger(ctx, javaMarked)
	if err != nil {
		t.Fatalf("Folio reads the under-replication record Java wrote for ledger %d: %v", javaMarked, err)
	}
	if got := bookieStrings(rec.MissingReplicas); !slices.Equal(got, javaMissing) || rec.Ctime.IsZero() {
		t.Errorf("Folio reads Java's record of ledger %d as missing %v, ctime %v; Java marked %v", javaMarked, got, rec.Ctime, javaMissing)
	}

	ledgers, err := d.ListLedgers(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	cmds := []string{"whatisinstanceid", "listbookies -rw", "listbookies -ro", "listledgers", "listunderreplicated -printmissingreplica"}
	for _, id := range ids {
		cmds = append(cmds, fmt.Sprintf("ledgermetadata -ledgerid %d", id))
	}
	outs := runJavaShell(t, classpath, uri, cmds...)

	// whatisinstanceid
	var inst struct {
		InstanceID string `json:"instanceId"`
	}
	folioShell(t, uri, &inst, "whatisinstanceid")
	if m := shellInstanceID.FindStringSubmatch(outs[0]); m == nil || m[1] != inst.InstanceID {
		t.Errorf("whatisinstanceid: Java %q, Folio %q", strings.TrimSpace(outs[0]), inst.InstanceID)
	}

	// listbookies
	var fb []struct{ ID, State string }
	folioShell(t, uri, &fb, "listbookies")
	var folioRW, folioRO []string
	for _, b := range fb {
		if b.State == "readonly" {
			folioRO = append(folioRO, b.ID)
		} else {
			folioRW = append(folioRW, b.ID)
		}
	}
	javaRW, javaRO := shellBookies(outs[1]), shellBookies(outs[2])
	slices.Sort(folioRW)
	if !slices.Equal(javaRW, folioRW) || !slices.Equal(javaRW, writable) || !slices.Equal(javaRO, folioRO) || !slices.Equal(javaRO, []string{ro.Addr()}) {
		t.Errorf("listbookies: Java -rw %v -ro %v; Folio writable %v read-only %v; want writable %v, read-only [%s]", javaRW, javaRO, folioRW, folioRO, writable, ro.Addr())
	}

	// listledgers
	var fl []struct {
		LedgerID int64 `json:"ledgerId"`
	}
	folioShell(t, uri, &fl, "listledgers")
	var javaLedgers, folioLedgers []int64
	for _, line := range strings.Split(outs[3], "\n") {
		if m := shellLedgerID.FindStringSubmatch(line); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			javaLedgers = append(javaLedgers, id)
		}
	}
	for _, l := range fl {
		folioLedgers = append(folioLedgers, l.LedgerID)
	}
	slices.Sort(javaLedgers)
	if !slices.Equal(javaLedgers, folioLedgers) || !slices.Equal(folioLedgers, ledgers) {
		t.Errorf("listledgers: Java %v, Folio's shell %v, Folio's driver %v", javaLedgers, folioLedgers, ledgers)
	}
	for _, id := range ids {
		if !slices.Contains(javaLedgers, id) {
			t.Errorf("listledgers: Java's listing lacks ledger %d", id)
		}
	}
	t.Logf("instance id %s; writable bookies %v, read-only %v; %d ledgers listed by both: %v", inst.InstanceID, javaRW, javaRO, len(javaLedgers), javaLedgers)

	// listunderreplicated
	javaUR := map[int64][]string{}
	var cur int64 = -1
	count := -1
	for _, line := range strings.Split(outs[4], "\n") {
		if m := shellURLedger.FindStringSubmatch(line); m != nil {
			cur, _ = strconv.ParseInt(m[1], 10, 64)
			javaUR[cur] = nil
		} else if m := shellURMissing.FindStringSubmatch(line); m != nil && cur >= 0 {
			javaUR[cur] = append(javaUR[cur], m[1])
		} else if m := shellURCount.FindStringSubmatch(line); m != nil {
			count, _ = strconv.Atoi(m[1])
		}
	}
	var fur []struct {
		LedgerID        int64    `json:"ledgerId"`
		MissingReplicas []string `json:"missingReplicas"`
	}
	folioShell(t, uri, &fur, "listunderreplicated")
	folioUR := map[int64][]string{}
	for _, r := range fur {
		folioUR[r.LedgerID] = r.MissingReplicas
	}
	want := map[int64][]string{folioMarked: folioMissing, javaMarked: javaMissing}
	for _, m := range []map[int64][]string{javaUR, folioUR} {
		for _, v := range m {
			slices.Sort(v)
		}
	}
	if !mapsEqual(javaUR, want) || !mapsEqual(folioUR, want) || count != len(want) {
		t.Errorf("listunderreplicated: Java %v (count %d), Folio %v; marked %v\n--- Java ---\n%s", javaUR, count, folioUR, want, outs[4])
	}
	t.Logf("listunderreplicated, both: %v (ledger %d marked by Folio, %d by Java)", folioUR, folioMarked, javaMarked)

	// ledgermetadata
	for i, id := range ids {
		var v struct {
			FormatVersion, EnsembleSize, WriteQuorumSize, AckQuorumSize int
			State, DigestType                                           string
			LastEntryID                                                 int64 `json:"lastEntryId"`
			Length                                                      int64
			Ensembles                                                   []struct {
				FirstEntryID int64 `json:"firstEntryId"`
				Bookies      []string
			}
			CustomMetadata map[string][]byte `json:"customMetadata"`
		}
		folioShell(t, uri, &v, "ledgermetadata", fmt.Sprint(id))
		var ens []string
		for _, s := range v.Ensembles {
			ens = append(ens, fmt.Sprintf("%d=[%s]", s.FirstEntryID, strings.Join(s.Bookies, ", ")))
		}
		wantParts := []string{
			fmt.Sprintf("ledgerID: %d\n", id),
			fmt.Sprintf("LedgerMetadata{formatVersion=%d, ensembleSize=%d, writeQuorumSize=%d, ackQuorumSize=%d, state=%s, length=%d, lastEntryId=%d, digestType=%s, password=",
				v.FormatVersion, v.EnsembleSize, v.WriteQuorumSize, v.AckQuorumSize, v.State, v.Length, v.LastEntryID, javaDigestName(v.DigestType)),
			fmt.Sprintf(", ensembles={%s}, customMetadata={", strings.Join(ens, ", ")),
		}
		// Java prints each custom metadata value as base64:<std base64>.
		for k, val := range v.CustomMetadata {
			wantParts = append(wantParts, fmt.Sprintf("%s=base64:%s", k, base64.StdEncoding.EncodeToString(val)))
		}
		if len(v.CustomMetadata) == 0 {
			wantParts = append(wantParts, "customMetadata={}}")
		}
		out := outs[5+i]
		for _, w := range wantParts {
			if !strings.Contains(out, w) {
				t.Errorf("ledgermetadata %d: Java's output lacks %q (from Folio's view)\n--- Java ---\n%s", id, w, out)
			}
		}
		found := false
		for _, line := range strings.Split(out, "\n") {
			found = found || shellMetadataLine.MatchString(line)
		}
		if !found || v.State != "CLOSED" {
			t.Errorf("ledgermetadata %d: Folio says state %s; Java:\n%s", id, v.State, out)
		}
	}

	// Folio clears both records (the Java-written one read back as
	// Java wrote it), so the cluster is left as it was.
	for _, id := range []int64{folioMarked, javaMarked} {
		r, err := ar.ReadUnderReplicatedLedger(ctx, id)
		if err == nil {
			err = ar.MarkLedgerReplicated(ctx, id, r.Version)
		}
		if err != nil {
			t.Errorf("clear the under-replication record of ledger %d: %v", id, err)
		}
	}
	outs = runJavaShell(t, classpath, uri, "listunderreplicated")
	if m := shellURCount.FindStringSubmatch(strings.TrimSpace(lastLine(outs[0]))); m == nil || m[1] != "0" {
		t.Errorf("Java's listunderreplicated after Folio cleared the records:\n%s", outs[0])
	}
}

// setReadOnly switches Folio bookie b to read-only mode or back through its
// admin HTTP endpoint (PUT /api/v1/bookie/state/readonly) and waits until
// its registration moved (available/readonly/<id> or available/<id>).
func setReadOnly(t *testing.T, b *testcluster.Bookie, readOnly bool) {
	t.Helper()
	body := fmt.Sprintf(`{"readOnly": %v}`, readOnly)
	req, err := http.NewRequest(http.MethodPut, "http://"+b.HTTPAddr()+"/api/v1/bookie/state/readonly", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT readonly %v on bookie %s: %v", readOnly, b.Addr(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT readonly %v on bookie %s: %s", readOnly, b.Addr(), resp.Status)
	}
	b.WaitRegistered(readOnly)
}

// folioClusterUsedByJava: on a cluster `folio shell initnewcluster`
// created (uri, plain zk://), a Java bookie has registered (bookie); the
// Java client writes a ledger on it and reads it back, the Folio client
// reads it, Folio writes one that Java reads, and Java's
// whatisinstanceid is Folio's.
func folioClusterUsedByJava(t *testing.T, classpath, uri, bookie string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n, seed = 20, 901
	ops := runDriver(t, classpath, uri, "v3", "write", "--digest", "CRC32C", "--password", password,
		"--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed), "--ensemble", "1", "--write-quorum", "1", "--ack-quorum", "1")
	id := ops[0].int("ledgerId")
	jr := runDriver(t, classpath, uri, "v3", "read", "--ledger", fmt.Sprint(id), "--password", password)[0]
	checkPayloads(t, "java read of a Java ledger on a Folio-initialised cluster", id, seed, javaEntries(t, jr), n)
	fc := newFolioClient(t, uri, "v3")
	_, got := folioReadAll(ctx, t, fc, id, false)
	checkPayloads(t, "folio read of a Java ledger on a Folio-initialised cluster", id, seed, got, n)

	w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1,
		DigestType: client.DigestCRC32, Password: []byte(password)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(n) {
		if _, err := w.Append(ctx, payload(seed+1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	jr = runDriver(t, classpath, uri, "v3", "read", "--ledger", fmt.Sprint(w.ID()), "--password", password)[0]
	checkPayloads(t, "java read of a Folio ledger on a Folio-initialised cluster", w.ID(), seed+1, javaEntries(t, jr), n)

	var inst struct {
		InstanceID string `json:"instanceId"`
	}
	folioShell(t, uri, &inst, "whatisinstanceid")
	outs := runJavaShell(t, classpath, uri, "whatisinstanceid", "listbookies -rw")
	if m := shellInstanceID.FindStringSubmatch(outs[0]); m == nil || m[1] != inst.InstanceID {
		t.Errorf("whatisinstanceid on the Folio-initialised cluster: Java %q, Folio %q", strings.TrimSpace(outs[0]), inst.InstanceID)
	}
	if got := shellBookies(outs[1]); !slices.Equal(got, []string{bookie}) {
		t.Errorf("Java's listbookies -rw on the Folio-initialised cluster: %v, want [%s]", got, bookie)
	}
}

// shellBookies returns the bookie ids `listbookies` printed, sorted.
func shellBookies(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if m := shellBookie.FindStringSubmatch(line); m != nil {
			ids = append(ids, m[1])
		}
	}
	slices.Sort(ids)
	return ids
}

func bookieStrings(ids []metadata.BookieID) []string {
	var out []string
	for _, b := range ids {
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

func mapsEqual(a, b map[int64][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
