package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// CustomBookieIDs runs Folio bookies with custom ids (bookieId, not
// host:port) on ZooKeeper and Apache BookKeeper's Java client and shell
// against them: the Java client resolves each id through the
// BookieServiceInfo Folio publishes as the registration znode's value (as a
// Java bookie does), writes a ledger on them and reads it back; the Folio
// client reads it too; Java's `endpointinfo` shows the address. (On etcd
// Java's driver reads no service info, so Java clients cannot reach custom
// ids there: docs/operations.md.)
func CustomBookieIDs(t *testing.T) {
	srv, classpath := startZooKeeper(t)
	uri := zkURI(srv, "", "/ledgers")
	if out, err := folioShellRaw(t, uri, "initnewcluster"); err != nil {
		t.Fatalf("folio shell initnewcluster on %s: %v\n%s", uri, err, out)
	}
	cl := testcluster.Start(t, 3, testcluster.WithMetadataURI(uri), testcluster.WithExistingCluster(), testcluster.WithCustomBookieIDs())
	defer func() {
		if t.Failed() {
			for _, b := range cl.Bookies {
				t.Logf("--- Folio bookie %s log (tail) ---\n%s", b.ID, tailFile(b.LogPath(), 20))
			}
		}
	}()
	const n, seed = 20, 931
	ops := runDriver(t, classpath, uri, "v3", "write", "--digest", "CRC32C", "--password", password,
		"--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed), "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2")
	id := ops[0].int("ledgerId")
	m, _, err := cl.MD.ReadLedger(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range m.Ensembles[0].Ensemble {
		if !strings.HasPrefix(string(b), "bookie-") {
			t.Fatalf("the Java client's ensemble names %s, not a custom id: %v", b, m.Ensembles)
		}
	}
	jr := runDriver(t, classpath, uri, "v3", "read", "--ledger", fmt.Sprint(id), "--password", password)[0]
	checkPayloads(t, "java read of a Java ledger on Folio bookies with custom ids", id, seed, javaEntries(t, jr), n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fc := newFolioClient(t, uri, "v3")
	_, got := folioReadAll(ctx, t, fc, id, false)
	checkPayloads(t, "folio read of a Java ledger on Folio bookies with custom ids", id, seed, got, n)

	// And the other way: a Folio ledger, read by Java.
	w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2,
		DigestType: client.DigestCRC32C, Password: []byte(password)})
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
	checkPayloads(t, "java read of a Folio ledger on Folio bookies with custom ids", w.ID(), seed+1, javaEntries(t, jr), n)

	b := cl.Bookies[0]
	out := runJavaShell(t, classpath, uri, "endpointinfo -b "+string(b.ID))[0]
	if !strings.Contains(out, string(b.ID)) || !strings.Contains(out, fmt.Sprint(b.Port)) || !strings.Contains(out, "bookie-rpc") {
		t.Errorf("Java's endpointinfo of %s:\n%s", b.ID, out)
	}
}
