// Package zktest gives tests a real ZooKeeper: Apache ZooKeeper's own
// server (org.apache.zookeeper.server.quorum.QuorumPeerMain, a JVM with a
// small heap) started from a generated zoo.cfg on free loopback ports, with
// its data and log in a temporary directory, killable and restartable. No
// fake ZooKeeper: the tests of Folio's ZooKeeper driver run against the
// server Java BookKeeper clusters run on.
//
// The server's classpath comes from Classpath ($FOLIO_ZK_CLASSPATH, else
// compat/java's Maven classpath, else Debian's zookeeper package). Without
// Java the tests skip, saying so; with FOLIO_COMPAT=require (CI) they fail.
//
// Typical use:
//
//	srv := zktest.Start(t)                       // one server for this test
//	uri := zktest.URI(srv, zktest.Scope(t))      // zk://127.0.0.1:NNNNN/folio-test/<n>-<name>
//
// A package shares one server between its tests with Shared(t), stopped by
// StopShared from TestMain. StartEnsemble starts a 3-node ensemble for
// session-expiry and failover tests.
//
// Test servers run with forceSync=no (ZooKeeper's fsync off, tests only, as
// etcdtest runs etcd with UnsafeNoFsync).
package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/freeport"
)

// TickTime is the servers' tickTime: short, so that sessions can be short.
// Session timeouts are accepted between 2 ticks (MinSessionTimeout) and
// MaxSessionTimeout.
const (
	TickTime          = 100 * time.Millisecond
	MinSessionTimeout = 2 * TickTime
	MaxSessionTimeout = 60 * time.Second
)

// StartTimeout bounds waiting for a server (or an ensemble's quorum) to
// serve clients; reaching it fails the start.
var StartTimeout = 90 * time.Second

// JVMOptions are the JVM flags of every server: a small heap and a quick
// start (two cores are shared by many tests).
var JVMOptions = []string{
	"-Xmx64m", "-Xss512k", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
	"-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
	"-Dzookeeper.jmx.log4j.disable=true", "-Dzookeeper.admin.enableServer=false",
}

// Server is one ZooKeeper server process.
type Server struct {
	id         int // myid in an ensemble, 0 when standalone
	dir        string
	clientPort int
	cfgPath    string
	logPath    string
	classpath  string

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		exited chan struct{} // closed when cmd has exited
	}
}

// Addr is the server's client address, 127.0.0.1:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.clientPort) }

// LogPath is the file the server's stdout and stderr go to.
func (s *Server) LogPath() string { return s.logPath }

// Dir is the server's directory (zoo.cfg, data, log).
func (s *Server) Dir() string { return s.dir }

// need returns the classpath, or skips or fails t.
func need(t testing.TB) string {
	t.Helper()
	cp, err := Classpath()
	switch {
	case err == nil:
		return cp
	case errors.Is(err, ErrUnavailable) && !Required():
		t.Skipf("ZooKeeper tests need Java: %v (set %s=%s to make this a failure)", err, RequireEnv, RequireValue)
	default:
		t.Fatalf("%v", err)
	}
	return ""
}

// Start starts a standalone server for the test, stopped by t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	cp := need(t)
	s, err := startStandalone(cp, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill() })
	return s
}

var shared struct {
	sync.Mutex
	srv *Server
	dir string
	err error
}

// Shared returns the package's shared standalone server, starting it at
// the first call. TestMain must call StopShared after m.Run.
func Shared(t testing.TB) *Server {
	t.Helper()
	cp := need(t)
	shared.Lock()
	defer shared.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "folio-zktest-")
		if shared.err == nil {
			shared.srv, shared.err = startStandalone(cp, shared.dir)
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// StopShared kills the shared server, if one was started, and removes its
// directory. On failure (a test failed) it prints the server's log path.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.srv != nil {
		shared.srv.Kill()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.srv, shared.dir = nil, ""
}

func startStandalone(cp, dir string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before the JVM binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{dir: dir, clientPort: port, classpath: cp}
		if err := s.writeConfig(nil); err != nil {
			return nil, err
		}
		if err = s.launch(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
			err = s.waitServing(ctx)
			cancel()
			if err == nil {
				return s, nil
			}
			s.Kill()
		}
		lastErr = err
		if !s.bindFailed() {
			break
		}
	}
	return nil, lastErr
}

// Ensemble is a ZooKeeper ensemble of several servers on this machine.
type Ensemble struct {
	Servers []*Server
}

// ConnectString is the servers' client addresses joined by ','.
func (e *Ensemble) ConnectString() string {
	var a []string
	for _, s := range e.Servers {
		a = append(a, s.Addr())
	}
	return strings.Join(a, ",")
}

// Hosts is the servers' client addresses joined by ';', the form of a
// metadata service URI's authority.
func (e *Ensemble) Hosts() string { return strings.ReplaceAll(e.ConnectString(), ",", ";") }

// StartEnsemble starts an n-server ensemble (n ≥ 3 for one to survive a
// loss) and waits until every server serves clients; t.Cleanup kills them.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	cp := need(t)
	base := t.TempDir()
	e := &Ensemble{}
	var servers []string
	for i := 1; i <= n; i++ {
		ports, err := freePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{id: i, dir: filepath.Join(base, fmt.Sprint(i)), clientPort: ports[0], classpath: cp}
		e.Servers = append(e.Servers, s)
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, ports[1], ports[2]))
	}
	t.Cleanup(func() {
		for _, s := range e.Servers {
			s.Kill()
		}
	})
	for _, s := range e.Servers {
		if err := s.writeConfig(servers); err != nil {
			t.Fatal(err)
		}
		if err := s.launch(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	for _, s := range e.Servers {
		if err := s.waitServing(ctx); err != nil {
			t.Fatalf("zktest: ensemble server %d: %v", s.id, err)
		}
	}
	return e
}

// writeConfig writes zoo.cfg (and myid in an ensemble) under s.dir.
func (s *Server) writeConfig(servers []string) error {
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	cfg := []string{
		fmt.Sprintf("tickTime=%d", TickTime.Milliseconds()),
		"dataDir=" + data,
		fmt.Sprintf("clientPort=%d", s.clientPort),
		"clientPortAddress=127.0.0.1",
		fmt.Sprintf("minSessionTimeout=%d", MinSessionTimeout.Milliseconds()),
		fmt.Sprintf("maxSessionTimeout=%d", MaxSessionTimeout.Milliseconds()),
		"admin.enableServer=false",
		"forceSync=no",
		"maxClientCnxns=0",
		"autopurge.purgeInterval=0",
	}
	if len(servers) > 0 {
		cfg = append(cfg, "initLimit=50", "syncLimit=20", "reconfigEnabled=false", "standaloneEnabled=false")
		cfg = append(cfg, servers...)
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", s.id)), 0o644); err != nil {
			return err
		}
	}
	s.cfgPath = filepath.Join(s.dir, "zoo.cfg")
	s.logPath = filepath.Join(s.dir, "zookeeper.log")
	return os.WriteFile(s.cfgPath, []byte(strings.Join(cfg, "\n")+"\n"), 0o644)
}

// launch starts the JVM; its output is appended to the log file.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append(append([]string{}, JVMOptions...),
		"-cp", s.classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath)
	cmd := exec.Command("java", args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// The JVM dies with the test binary, even on a test timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("zktest: start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.mu.cmd, s.mu.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// Running reports whether the server's process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	exited := s.mu.exited
	s.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Kill SIGKILLs the server and waits for it to exit (a no-op if it is not
// running). Its data stays: Restart brings it back.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.mu.cmd, s.mu.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Restart starts a killed server again on the same port and data, and
// waits until it serves (for an ensemble member: until it has rejoined a
// quorum).
func (s *Server) Restart(ctx context.Context) error {
	if s.Running() {
		return fmt.Errorf("zktest: server %s is running", s.Addr())
	}
	if err := s.launch(); err != nil {
		return err
	}
	return s.waitServing(ctx)
}

// Pause stops the server's process (SIGSTOP) without killing it, as a hung
// machine would; Resume continues it.
func (s *Server) Pause() error  { return s.signal(syscall.SIGSTOP) }
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.mu.cmd
	s.mu.Unlock()
	if cmd == nil || !s.Running() {
		return fmt.Errorf("zktest: server %s is not running", s.Addr())
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// waitServing polls the client port until a ZooKeeper session can be
// established (a server outside a quorum refuses sessions), or the process
// exits, or ctx ends.
func (s *Server) waitServing(ctx context.Context) error {
	s.mu.Lock()
	exited := s.mu.exited
	s.mu.Unlock()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := Ping(pctx, s.Addr())
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("zktest: ZooKeeper server %s exited during start-up: %s", s.Addr(), s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("zktest: ZooKeeper server %s does not serve (%v): %s", s.Addr(), err, s.logTail())
		case <-time.After(50 * time.Millisecond): // polling a port: there is nothing to wait on
		}
	}
}

var bindError = regexp.MustCompile(`(?i)address already in use|BindException`)

func (s *Server) bindFailed() bool {
	b, _ := os.ReadFile(s.logPath)
	return bindError.Match(b)
}

// logTail returns the last lines of the server's log, for error messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "log " + s.logPath + ":\n" + string(bytes.Join(lines, []byte("\n")))
}

func freePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// freePorts returns n distinct ports that were free on 127.0.0.1, reserved
// against every other test process (package freeport).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		p, err := freeport.Take()
		if err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

var scopeSeq atomic.Int64

var unsafeScopeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Scope returns a ledgers root path unique within the process, derived
// from the test name, so that tests may share one server:
// /folio-test/<n>-<sanitised test name>.
func Scope(t testing.TB) string {
	name := strings.Trim(unsafeScopeChars.ReplaceAllString(t.Name(), "_"), "_")
	return fmt.Sprintf("/folio-test/%d-%s", scopeSeq.Add(1), name)
}

// URI is the metadata service URI of the ledgers root scope on s:
// zk://127.0.0.1:port<scope>.
func URI(s *Server, scope string) string { return "zk://" + s.Addr() + scope }

// EnsembleURI is the metadata service URI of scope on e, hosts separated
// by ';' as BookKeeper writes them.
func EnsembleURI(e *Ensemble, scope string) string { return "zk://" + e.Hosts() + scope }
