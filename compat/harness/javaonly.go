package harness

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/wire"
)

// JavaBookieEnsemble (compat/javabookies) runs the interop scenarios on a cluster whose
// bookies are all Apache BookKeeper's (three org.apache.bookkeeper.server.Main
// processes), with `folio standalone --bookies 0` providing only the etcd:
// the Folio client writes and recovers ledgers on Java bookies, fences Java
// writers there, tails through their long polls; Java's garbage collection
// (every second) keeps every ledger Folio wrote and removes one Folio
// deleted, checked by reading each entry from each bookie of its write set,
// with Folio's bookie client and with Java's `readledger --bookie`.
func JavaBookieEnsemble(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	cluster := startStandalone(t, 0)
	waits := []func() javaBookie{startJavaBookie(t, classpath, cluster.uri), startJavaBookie(t, classpath, cluster.uri),
		startJavaBookie(t, classpath, cluster.uri)}
	var jbs []javaBookie
	var ids []string
	for _, w := range waits {
		jb := w()
		jbs = append(jbs, jb)
		ids = append(ids, jb.addr)
	}
	defer func() {
		if t.Failed() {
			for _, jb := range jbs {
				t.Logf("--- Java bookie %s log (tail) ---\n%s", jb.addr, tailFile(jb.logPath, 40))
			}
			t.Logf("--- folio standalone log (tail) ---\n%s", tailFile(cluster.logPath, 40))
		}
	}()
	waitRegistered(t, cluster.uri, ids)

	bks := rereplication.NewBookies(0, slog.New(slog.DiscardHandler))
	defer bks.Close()
	for mi, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			e := interopEnv{classpath: classpath, uri: cluster.uri, mode: mode, fc: newFolioClient(t, cluster.uri, mode),
				bookies: ids, where: "Java bookies", folio: cluster.bin}
			seedBase := int64(mi+1)*100 + 70
			const n = 40
			var folioLedgers []int64
			t.Run("JavaWritesFolioReads", func(t *testing.T) { javaWritesFolioReads(t, e, seedBase+1, n) })
			t.Run("FolioWritesJavaReads", func(t *testing.T) { folioLedgers = folioWritesJavaReads(t, e, seedBase+2, n) })
			t.Run("JavaSeesFolioMetadata", func(t *testing.T) {
				if len(folioLedgers) == 0 {
					t.Skip("no Folio ledgers (FolioWritesJavaReads failed)")
				}
				javaSeesFolioMetadata(t, e, folioLedgers, seedBase+2, n)
			})
			t.Run("JavaRecoversFolioWriter", func(t *testing.T) { javaRecoversFolioWriter(t, e, seedBase+3) })
			t.Run("FolioRecoversJavaWriter", func(t *testing.T) { folioRecoversJavaWriter(t, e, seedBase+4) })
			t.Run("JavaTailsFolioLedger", func(t *testing.T) { javaTailsFolioLedger(t, e, seedBase+5) })
			t.Run("FolioTailsJavaLedger", func(t *testing.T) { folioTailsJavaLedger(t, e, seedBase+6) })
			t.Run("FolioBatchReads", func(t *testing.T) { folioBatchReads(t, e, seedBase+8) })
			t.Run("JavaGCKeepsFolioLedgers", func(t *testing.T) {
				if len(folioLedgers) == 0 {
					t.Skip("no Folio ledgers (FolioWritesJavaReads failed)")
				}
				javaGCKeepsFolioLedgers(t, e, bks, folioLedgers, seedBase+2, n, seedBase+7)
				if mode == "v3" {
					javaShellSeesCluster(t, e, folioLedgers, n)
				}
			})
		})
	}
}

// waitRegistered waits until every bookie of ids is registered writable.
func waitRegistered(t *testing.T, uri string, ids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for {
		w, err := d.WritableBookies(ctx)
		if err != nil {
			t.Fatalf("compat: list writable bookies: %v", err)
		}
		missing := 0
		for _, id := range ids {
			found := false
			for _, b := range w {
				found = found || string(b) == id
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("compat: bookies %v not all registered writable (registered: %v)", ids, w)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// javaGCKeepsFolioLedgers deletes a fresh Folio ledger (a positive control:
// the Java bookies' garbage collection runs and reads Folio's metadata), waits
// until every Java bookie has collected it, and then reads each entry of the
// ledgers ids (n entries of seed, digests in order) from each bookie of its
// write set: each must still be there, digest-verified, byte-exact.
func javaGCKeepsFolioLedgers(t *testing.T, e interopEnv, bks *rereplication.Bookies, ids []int64, seed, n, deletedSeed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const deletedN = 10
	d, err := metadata.Open(ctx, e.uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	del := folioWrite(ctx, t, e, client.DigestCRC32C, deletedSeed, deletedN)
	md, _, err := d.ReadLedger(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	delEnsemble := md.Ensembles[0].Ensemble
	for i, b := range delEnsemble {
		if _, err := bks.ReadStoredEntry(ctx, b, del, int64(i)); err != nil {
			t.Fatalf("entry %d of ledger %d on bookie %s before deletion: %v", i, del, b, err)
		}
	}
	if err := e.fc.DeleteLedger(ctx, del); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i, b := range delEnsemble {
		for {
			_, err := bks.ReadStoredEntry(ctx, b, del, int64(i))
			if errors.Is(err, wire.ErrNoSuchLedger) || errors.Is(err, wire.ErrNoSuchEntry) {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("Java bookie %s still serves entry %d of deleted ledger %d after %v (last answer: %v): its GC did not run",
					b, i, del, time.Since(start), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("every Java bookie of its ensemble collected deleted ledger %d within %v", del, time.Since(start).Round(time.Millisecond))

	for _, id := range ids {
		if m, _, err := d.ReadLedger(ctx, id); err != nil || !m.IsClosed() || m.LastEntryID != n-1 {
			t.Fatalf("Folio ledger %d after Java GC: metadata %v (%v), want closed at %d", id, m, err, n-1)
		}
		// Every entry on every Java bookie of its write set, read from
		// that bookie alone, digest-verified, byte-exact.
		testcluster.CheckStored(ctx, t, d, id, []byte(password), func(e int64) []byte { return payload(seed, e) })
	}
}
