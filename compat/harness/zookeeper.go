package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
	_ "github.com/foliodb/folio/internal/metadata/zk" // the zk:// driver of the harness's own metadata clients
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
	"github.com/foliodb/folio/internal/testcluster"
)

// The ZooKeeper interop harness: Apache ZooKeeper's own server
// (internal/metadata/zk/zktest, from compat/java's Maven classpath), Java
// bookies, clients, shell and AutoRecoveryMain on Java's built-in
// ZooKeeper driver, and Folio's bookies (testcluster), client, shell and
// `folio autorecovery` on Folio's, all on one ZooKeeper.

// zkClasspath is classpath without the etcd metadata driver jar
// (target/lib): Java on ZooKeeper needs only bookkeeper-server's own
// dependencies.
func zkClasspath(classpath string) string {
	var keep []string
	for _, e := range filepath.SplitList(classpath) {
		if filepath.Base(e) != "*" || filepath.Base(filepath.Dir(e)) != "lib" {
			keep = append(keep, e)
		}
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// startZooKeeper builds the Java programs and starts a ZooKeeper server
// for the test from their classpath; it returns the server and the
// classpath of the Java programs on ZooKeeper.
func startZooKeeper(t *testing.T) (*zktest.Server, string) {
	t.Helper()
	requireJava(t)
	classpath := zkClasspath(buildJava(t))
	// zktest finds the server's classpath in compat/java/target/classpath.txt,
	// which buildJava has just written; the environment variable wins.
	srv := zktest.Start(t)
	t.Logf("compat: ZooKeeper %s (log %s)", srv.Addr(), srv.LogPath())
	return srv, classpath
}

// zkURI is the metadata service URI of the ledgers root on srv, with the
// ledger manager type typ ("" for plain zk://, else zk+typ://).
func zkURI(srv *zktest.Server, typ, root string) string {
	scheme := "zk"
	if typ != "" {
		scheme += "+" + typ
	}
	return scheme + "://" + srv.Addr() + root
}

// rawZK is a plain ZooKeeper client for checks of znodes.
func rawZK(t *testing.T, srv *zktest.Server) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect([]string{srv.Addr()}, 10*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// startFolioBookies starts n `folio bookie` processes (testcluster: free
// ports, 2 s ZooKeeper sessions) on the cluster at uri, which must exist
// already (initialised by Java or by `folio shell initnewcluster`), and
// waits until each is registered writable.
func startFolioBookies(t *testing.T, uri string, n int) *testcluster.Cluster {
	t.Helper()
	return testcluster.Start(t, n, testcluster.WithMetadataURI(uri), testcluster.WithExistingCluster())
}

// folioShell runs `folio shell <args> -o json --metadata-service-uri uri`
// and decodes its JSON output into v.
func folioShell(t *testing.T, uri string, v any, args ...string) {
	t.Helper()
	out, err := folioShellRaw(t, uri, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("folio shell %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("folio shell %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// folioShellRaw runs `folio shell <args> --metadata-service-uri uri` and
// returns its stdout (and stderr after it, on failure).
func folioShellRaw(t *testing.T, uri string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), javaCmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), append(append([]string{"shell"}, args...), "--metadata-service-uri", uri)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// openMetadata opens Folio's driver on uri for the test.
func openMetadata(t *testing.T, uri string) metadata.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatalf("compat: open %s: %v", uri, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// javaAutoRecovery is Apache BookKeeper's AutoRecovery daemon
// (org.apache.bookkeeper.replication.AutoRecoveryMain: an auditor elector
// and a replication worker) on ZooKeeper.
type javaAutoRecovery struct {
	id      string // its id in the election and in locks: 127.0.0.1:<bookiePort>
	logPath string
	proc    *javaServer
}

// startJavaAutoRecovery starts AutoRecoveryMain on the cluster at uri with
// a generated configuration: its id 127.0.0.1:<a free port> (nothing
// listens there: AutoRecoveryMain only names itself by it), a 4 s
// ZooKeeper session, re-replication of a lost bookie's ledgers at once
// (lostBookieRecoveryDelay 0), and short back-offs so that a ledger a
// worker failed on is retried within a second; the periodic checks keep
// BookKeeper's defaults (the ledger check runs once when an auditor is
// first elected on a cluster).
func startJavaAutoRecovery(t *testing.T, classpath, uri string, jvmArgs ...string) javaAutoRecovery {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	conf := map[string]string{
		"bookiePort":                           fmt.Sprint(port),
		"advertisedAddress":                    "127.0.0.1",
		"allowLoopback":                        "true",
		"metadataServiceUri":                   uri,
		"httpServerEnabled":                    "false",
		"zkTimeout":                            "4000",
		"lostBookieRecoveryDelay":              "0",
		"openLedgerRereplicationGracePeriod":   "1000",
		"lockReleaseOfFailedLedgerGracePeriod": "1000",
		"rwRereplicateBackoffMs":               "500",
		"enforceMinNumRacksPerWriteQuorum":     "false",
		"journalDirectories":                   filepath.Join(dir, "journal"),
		"ledgerDirectories":                    filepath.Join(dir, "ledgers"),
	}
	confPath := filepath.Join(dir, "autorecovery.conf")
	writeConf(t, confPath, conf)
	a := javaAutoRecovery{id: fmt.Sprintf("127.0.0.1:%d", port), logPath: filepath.Join(dir, "autorecovery.log")}
	a.proc = startJavaServer(t, classpath, "org.apache.bookkeeper.replication.AutoRecoveryMain", confPath, a.logPath, javaArgs(append(jvmArgs, "-Xmx192m")...))
	t.Logf("compat: Java AutoRecoveryMain %s started (log %s)", a.id, a.logPath)
	return a
}

// waitFor polls cond (every 100 ms) until it holds, failing the test after
// timeout; what names the condition, detail (if not nil) adds the state
// seen last.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("compat: timed out after %v waiting for %s", timeout, what)
			if detail != nil {
				msg += "\n" + detail()
			}
			t.Fatal(msg)
		}
		time.Sleep(100 * time.Millisecond) // polling processes the test does not control
	}
}

// registeredBookies returns the writable bookies at uri, sorted.
func registeredBookies(ctx context.Context, d metadata.Driver) ([]string, error) {
	w, err := d.WritableBookies(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range w {
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out, nil
}
