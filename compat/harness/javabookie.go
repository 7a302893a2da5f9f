package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/wire"
)

// javaBookie is an Apache BookKeeper bookie (org.apache.bookkeeper.server.Main)
// on the shared etcd or ZooKeeper.
type javaBookie struct {
	addr    string
	logPath string
	proc    *javaServer
}

// javaServer is a long-running JVM of the harness (a bookie, an
// AutoRecoveryMain): killed or stopped by the test, or at its end.
type javaServer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	err    error         // its exit, once exited is closed
	stop   sync.Once
}

// kill SIGKILLs the process and waits for it to exit (a no-op once it has).
func (p *javaServer) kill() {
	p.stop.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	})
}

// terminate sends SIGTERM and waits up to javaStopTimeout for the exit,
// then SIGKILLs.
func (p *javaServer) terminate() {
	p.stop.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(javaStopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// running reports whether the process has not exited.
func (p *javaServer) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

const javaStopTimeout = 15 * time.Second

// startJavaServer starts `java jvm... -cp classpath mainClass --conf
// conf` with its output in logPath, until the test ends (then SIGTERM). The
// JVM dies with the test binary (Pdeathsig), even on a test timeout. jvm
// is every JVM option (the harness's own start with jvmFlags).
func startJavaServer(t *testing.T, classpath, mainClass, confPath, logPath string, jvm []string) *javaServer {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(jvm), "-cp", classpath, mainClass, "--conf", confPath)
	cmd := exec.Command("java", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("compat: start %s: %v", mainClass, err)
	}
	p := &javaServer{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(p.terminate)
	return p
}

// writeConf writes key=value lines (sorted, for a readable file).
func writeConf(t *testing.T, path string, conf map[string]string) {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		fmt.Fprintf(&b, "%s=%s\n", k, conf[k])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// isZooKeeper reports whether uri names a ZooKeeper metadata service
// (zk://, zk+hierarchical://, ...), which Java serves with its built-in
// driver; any other is etcd.
func isZooKeeper(uri string) bool {
	return strings.HasPrefix(uri, "zk:") || strings.HasPrefix(uri, "zk+")
}

// etcdDriverProps are the system properties that register Java's etcd
// metadata driver (not registered by default, spec/metadata.md §2.1).
var etcdDriverProps = map[string]string{
	"bookkeeper.metadata.bookie.drivers": "org.apache.bookkeeper.metadata.etcd.EtcdMetadataBookieDriver",
	"bookkeeper.metadata.client.drivers": "org.apache.bookkeeper.metadata.etcd.EtcdMetadataClientDriver",
}

// startJavaBookie writes a bk_server.conf and starts a Java bookie with it,
// until the test ends. The config: loopback allowed and advertised as
// 127.0.0.1 (a Java bookie refuses loopback addresses otherwise), no HTTP
// server, a free port, a 1 s garbage collection period (so that a GC pass
// runs during the test), no fsync. On etcd: the etcd drivers, and no
// over-replication GC pass (on etcd it throws and aborts every GC pass,
// spec/metadata.md §2.9). On ZooKeeper: Java's own ZooKeeper driver (give
// zkClasspath's classpath: no etcd jar), a 4 s session (zkTimeout), so
// that a killed bookie's registration goes within seconds.
func startJavaBookie(t *testing.T, classpath, uri string) func() javaBookie {
	t.Helper()
	return startJavaBookieConf(t, classpath, uri, nil)
}

// startJavaBookieConf is startJavaBookie with extra configuration keys
// (added to, or replacing, startJavaBookie's).
func startJavaBookieConf(t *testing.T, classpath, uri string, extra map[string]string) func() javaBookie {
	t.Helper()
	conf := map[string]string{
		"gcWaitTime":               "1000",
		"diskUsageThreshold":       "0.999",
		"diskUsageWarnThreshold":   "0.998",
		"journalPreAllocSizeMB":    "1",
		"journalWriteBufferSizeKB": "64",
		"journalSyncData":          "false", // a test: no fsync per add
		"zkTimeout":                "10000",
	}
	var jvm []string
	if isZooKeeper(uri) {
		conf["zkTimeout"] = "4000"
	} else {
		conf["gcOverreplicatedLedgerWaitTime"] = "0"
		for k, v := range etcdDriverProps {
			conf[k] = v
			jvm = append(jvm, "-D"+k+"="+v)
		}
	}
	maps.Copy(conf, extra)
	return startJavaBookieWith(t, classpath, uri, conf, javaArgs(append(jvm, "-Xmx256m")...))
}

// startJavaBookieWith starts a Java bookie on uri with the settings every
// harness bookie has (a free port, 127.0.0.1 advertised and allowed,
// journal and ledger directories in a temporary directory, no HTTP server)
// plus conf, and the JVM options jvm. The returned function waits until
// it listens.
func startJavaBookieWith(t *testing.T, classpath, uri string, conf map[string]string, jvm []string) func() javaBookie {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	all := map[string]string{
		"bookiePort":         fmt.Sprint(port),
		"advertisedAddress":  "127.0.0.1",
		"allowLoopback":      "true",
		"metadataServiceUri": uri,
		"httpServerEnabled":  "false",
		"journalDirectories": filepath.Join(dir, "journal"),
		"ledgerDirectories":  filepath.Join(dir, "ledgers"),
	}
	maps.Copy(all, conf)
	confPath := filepath.Join(dir, "bk_server.conf")
	writeConf(t, confPath, all)
	jb := javaBookie{addr: fmt.Sprintf("127.0.0.1:%d", port), logPath: filepath.Join(dir, "bookie.log")}
	jb.proc = startJavaServer(t, classpath, "org.apache.bookkeeper.server.Main", confPath, jb.logPath, jvm)
	// The caller waits for the bookie with the returned function, so that
	// several bookies start at once.
	return func() javaBookie {
		t.Helper()
		waitJavaBookie(t, jb)
		return jb
	}
}

func waitJavaBookie(t *testing.T, jb javaBookie) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if !jb.proc.running() {
			t.Fatalf("compat: Java bookie exited: %v\n%s", jb.proc.err, tailFile(jb.logPath, 60))
		}
		if c, err := net.DialTimeout("tcp", jb.addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compat: Java bookie %s not listening within 90 s\n%s", jb.addr, tailFile(jb.logPath, 60))
		}
		time.Sleep(200 * time.Millisecond) // polling a port: there is nothing to wait on
	}
	t.Logf("compat: Java bookie %s started", jb.addr)
}

// waitJavaGC writes a ledger over the cluster's three bookies, deletes it,
// and waits until each of the Java bookies javaAddrs answers "no such
// ledger/entry" for each of its entries: a garbage collection pass of each
// ran after the call began.
func waitJavaGC(ctx context.Context, t *testing.T, fc *client.Client, javaAddrs []string, seed int64) {
	t.Helper()
	const n = 3
	w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte(password)})
	if err != nil {
		t.Fatalf("GC control ledger: %v", err)
	}
	for i := range int64(n) {
		if _, err := w.Append(ctx, payload(seed, i)); err != nil {
			t.Fatalf("GC control ledger append %d: %v", i, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bks := rereplication.NewBookies(0, slog.New(slog.DiscardHandler))
	defer bks.Close()
	for _, b := range javaAddrs {
		if _, err := bks.ReadStoredEntry(ctx, metadata.BookieID(b), w.ID(), 0); err != nil {
			t.Fatalf("GC control ledger %d on Java bookie %s before deletion: %v", w.ID(), b, err)
		}
	}
	if err := fc.DeleteLedger(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	for _, b := range javaAddrs {
		for i := int64(0); i < n; {
			_, err := bks.ReadStoredEntry(ctx, metadata.BookieID(b), w.ID(), i)
			if errors.Is(err, wire.ErrNoSuchLedger) || errors.Is(err, wire.ErrNoSuchEntry) {
				i++
				continue
			}
			if ctx.Err() != nil {
				t.Fatalf("Java bookie %s still serves entry %d of deleted ledger %d (last answer: %v): its GC did not run", b, i, w.ID(), err)
			}
			time.Sleep(200 * time.Millisecond) // polling interval; gcWaitTime is 1 s
		}
	}
}

// MixedEnsemble (TestMixedEnsemble) runs one Folio bookie and two Java bookies on one etcd:
// every ledger with E=3 then spans both implementations. Each client writes
// (two digest types per protocol, all four over both), the other reads
// byte-exact; Java reads Folio's ledgers after Java bookie garbage collection
// (every second) has run, so the Java bookies kept them.
func MixedEnsemble(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	cluster := startStandalone(t, 1)
	wait0, wait1 := startJavaBookie(t, classpath, cluster.uri), startJavaBookie(t, classpath, cluster.uri)
	jbs := []javaBookie{wait0(), wait1()}
	defer func() {
		if t.Failed() {
			for _, jb := range jbs {
				t.Logf("--- Java bookie %s log (tail) ---\n%s", jb.addr, tailFile(jb.logPath, 40))
			}
			t.Logf("--- folio standalone log (tail) ---\n%s", tailFile(cluster.logPath, 40))
		}
	}()
	// Both Java bookies registered writable before any client starts (the
	// clients read the registrations when they start).
	waitRegistered(t, cluster.uri, []string{jbs[0].addr, jbs[1].addr})

	for mi, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			fc := newFolioClient(t, cluster.uri, mode)
			seedBase := int64(mi+1)*100 + 50
			const n = 30
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			// Java writes, Folio reads.
			modeDigests := digests[2*mi : 2*mi+2]
			var names []string
			for _, d := range modeDigests {
				names = append(names, d.java)
			}
			ops := runDriver(t, classpath, cluster.uri, mode, "write", "--digest", strings.Join(names, ","),
				"--password", password, "--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seedBase+1))
			for _, r := range ops {
				lac, got := folioReadAll(ctx, t, fc, r.int("ledgerId"), false)
				if lac != n-1 {
					t.Errorf("folio read of Java %s ledger on the mixed ensemble: LAC %d", r.str("digest"), lac)
				}
				checkPayloads(t, "folio read of Java "+r.str("digest")+" ledger (mixed ensemble)", r.int("ledgerId"), seedBase+1, got, n)
			}

			// Folio writes, Java reads, also after Java bookie GC ran.
			var ids []string
			for _, d := range modeDigests {
				w, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
					DigestType: d.folio, Password: []byte(password)})
				if err != nil {
					t.Fatalf("folio create on the mixed cluster: %v", err)
				}
				for i := range int64(n) {
					if _, err := w.Append(ctx, payload(seedBase+2, i)); err != nil {
						t.Fatalf("folio append %d (mixed ensemble): %v", i, err)
					}
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, fmt.Sprint(w.ID()))
			}
			// A garbage collection pass of each Java bookie after these
			// ledgers were written, shown by a positive control: a ledger
			// deleted now that each Java bookie stops serving.
			waitJavaGC(ctx, t, fc, []string{jbs[0].addr, jbs[1].addr}, seedBase+3)
			ops = runDriver(t, classpath, cluster.uri, mode, "read", "--ledger", strings.Join(ids, ","), "--password", password)
			for i, r := range ops {
				what := "java read (after Java bookie GC) of Folio " + modeDigests[i].java + " ledger (mixed ensemble)"
				if r.int("lac") != n-1 {
					t.Errorf("%s: LAC %d", what, r.int("lac"))
				}
				checkPayloads(t, what, r.int("ledgerId"), seedBase+2, javaEntries(t, r), n)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	return testcluster.FreePort(t)
}
