// Package testcluster runs real Folio processes for process-level tests
// (DESIGN.md §7, layer 4): it builds the folio binary once per test
// process, starts an embedded etcd on free ports, and runs bookie
// processes (`folio bookie`) and whole standalone clusters
// (`folio standalone`) that a test can SIGKILL, SIGSTOP/SIGCONT, restart
// and stop gracefully.
//
// Cluster.LedgerHistory reads every version a ledger's metadata key held
// from etcd, for checks on how the metadata changed (history.go).
//
// WithEtcdCluster replaces the embedded etcd with a multi-member etcd
// cluster whose members are processes (etcd.go), so that a test can SIGKILL
// the leader or a quorum of members and restart them; everyone then uses
// the multi-endpoint URI etcd://h1:p1;h2:p2;h3:p3/scope.
//
// Every port is a free one, chosen once per bookie and kept across its
// restarts (a bookie's id is host:port). Each process writes its stdout and
// stderr to files in its directory, which a failing test names.
package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/freeport"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	// The etcd driver, for the harness's own metadata client.
	_ "github.com/foliodb/folio/internal/metadata/etcd"
	_ "github.com/foliodb/folio/internal/metadata/zk"
)

// Timeouts of the harness.
const (
	// StartTimeout bounds a process's start (until registered or ready).
	StartTimeout = 60 * time.Second
	// StopTimeout bounds a graceful stop (SIGTERM until exit).
	StopTimeout = 15 * time.Second
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of a folio binary built from this module, building
// it on first use (once per test process). Every test process of one
// checkout shares one path, $TMPDIR/folio-testcluster-<checkout hash>/folio:
// each builds into a directory of its own and renames the result over it,
// so a process never sees a half-written binary, processes already
// running keep the file they executed, and no test run leaves a binary
// behind (one temporary directory per test process used to leak 50 MB
// each).
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		// Built in Folio's own module, whichever module the test belongs
		// to: the compat module (compat/go.mod) replaces Folio with this
		// checkout but its go.sum lacks the binary's dependencies.
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		build.path, build.err = buildShared(root, "./cmd/folio", "folio")
	})
	if build.err != nil {
		t.Fatalf("testcluster: %v", build.err)
	}
	return build.path
}

// buildShared builds the package pkg of the module at root into the
// checkout's shared directory as name and returns its path.
func buildShared(root, pkg, name string) (string, error) {
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "folio-testcluster-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	built := filepath.Join(work, name)
	cmd := exec.Command("go", "build", "-o", built, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(built, path); err != nil {
		return "", err
	}
	return path, nil
}

// moduleRoot is the directory of Folio's go.mod: two levels above this
// source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the testcluster sources")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	if _, err := os.Stat(filepath.Join(root, "cmd", "folio")); err != nil {
		return "", fmt.Errorf("Folio's module root %s has no cmd/folio: %w", root, err)
	}
	return root, nil
}

// FreePort returns a port that was free on 127.0.0.1 a moment ago, outside
// the kernel's ephemeral range and reserved against every other test
// process (see package freeport for why both matter).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Take()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Cluster is an embedded etcd (in the test process) with an initialised
// cluster scope, and the bookie processes started on it. With
// WithEtcdCluster the store is instead a multi-member etcd cluster of
// member processes (EtcdCluster), and URI names every member; with
// WithMetadataURI it is another store (e.g. a ZooKeeper).
type Cluster struct {
	t    testing.TB
	Etcd *embedetcd.Server
	// EtcdCluster is the multi-member store of WithEtcdCluster (Etcd is
	// nil then).
	EtcdCluster *EtcdCluster
	URI         string
	MD          metadata.Driver
	Bookies     []*Bookie
	// Settings are key=value pairs given to every bookie (--set).
	Settings []string

	// Secure is the etcd of WithSecureEtcd (Etcd is the same server).
	// Security is what an in-process client or driver needs to reach it,
	// and MetadataFlags what `folio shell` and `folio autorecovery` need
	// besides the URI (both empty without WithSecureEtcd).
	Secure        *etcdtest.Secure
	Security      metadata.Security
	MetadataFlags []string

	// customIDs: bookies get bookieId=bookie-<port> (WithCustomBookieIDs).
	customIDs  bool
	etcdOpts   *EtcdOptions
	secureOpts *etcdtest.SecureOptions
	existing   bool // WithExistingCluster: Start does not initialise the scope
}

// Option adjusts a Cluster before its bookies start.
type Option func(*Cluster)

// WithMetadataURI runs the cluster on the metadata store at uri (e.g. a
// ZooKeeper from internal/metadata/zk/zktest: zk://127.0.0.1:port/root)
// instead of an embedded etcd; Cluster.Etcd is then nil. The scope must be
// empty (Start initialises it) unless WithExistingCluster is given.
func WithMetadataURI(uri string) Option {
	return func(c *Cluster) { c.URI = uri }
}

// WithExistingCluster makes Start use the cluster that the scope (given by
// WithMetadataURI) already holds, e.g. one Apache BookKeeper's
// initnewcluster created, instead of initialising it.
func WithExistingCluster() Option {
	return func(c *Cluster) { c.existing = true }
}

// WithCustomBookieIDs gives each bookie a custom id (bookieId=bookie-<port>,
// not host:port): clients reach it only through the address its
// registration publishes. Bookie.ID is that id, Bookie.Addr its address.
func WithCustomBookieIDs() Option {
	return func(c *Cluster) { c.customIDs = true }
}

// WithSettings adds bookie configuration pairs (key=value).
func WithSettings(kv ...string) Option {
	return func(c *Cluster) { c.Settings = append(c.Settings, kv...) }
}

// WithEtcdCluster runs the metadata store as a multi-member etcd cluster of
// processes (StartEtcdCluster) instead of one embedded member; the bookies,
// the harness and every client get the multi-endpoint URI.
func WithEtcdCluster(o EtcdOptions) Option {
	return func(c *Cluster) { c.etcdOpts = &o }
}

// WithSecureEtcd runs the cluster on an embedded etcd that serves only TLS
// and, as o says, requires client certificates and etcd users
// (etcdtest.StartSecure). The bookies get the metadataServiceTls* keys (and
// metadataServiceUser, metadataServicePasswordPath), StartAutoRecovery and
// MetadataFlags the matching flags, and Security is what an in-process
// client needs.
func WithSecureEtcd(o etcdtest.SecureOptions) Option {
	return func(c *Cluster) { c.secureOpts = &o }
}

// Start starts an etcd and n bookie processes and waits until each is
// registered writable. Everything is stopped by t.Cleanup (bookies with
// SIGKILL: a test that wants a graceful stop calls Bookie.Terminate).
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	Binary(t) // build before starting anything
	c := &Cluster{t: t}
	// Short timings so that restarts and stops take seconds.
	c.Settings = []string{"zkTimeout=2000", "registrationRetryInterval=200", "shutdownTimeout=3000", "diskCheckInterval=1000"}
	for _, o := range opts {
		o(c)
	}
	switch {
	case c.URI != "":
	case c.secureOpts != nil:
		c.startSecure(*c.secureOpts)
	case c.etcdOpts != nil:
		c.EtcdCluster = StartEtcdCluster(t, *c.etcdOpts)
		c.URI = c.EtcdCluster.URI(etcdtest.Scope(t))
	default:
		c.Etcd = etcdtest.Start(t)
		c.URI = etcdtest.URI(c.Etcd, etcdtest.Scope(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	md, err := metadata.Open(ctx, c.URI, metadata.Options{Security: c.Security})
	if err != nil {
		t.Fatalf("testcluster: open %s: %v", c.URI, err)
	}
	t.Cleanup(func() { md.Close() })
	c.MD = md
	if !c.existing {
		if _, err := md.InitNewCluster(ctx); err != nil {
			t.Fatalf("testcluster: init cluster: %v", err)
		}
	}
	for range n {
		b := c.NewBookie()
		b.Start()
		b.WaitRegistered(false)
	}
	return c
}

// startSecure starts the etcd of WithSecureEtcd and sets what the bookies,
// tools and clients need to reach it.
func (c *Cluster) startSecure(o etcdtest.SecureOptions) {
	t := c.t
	c.Secure = etcdtest.StartSecure(t, o)
	c.Etcd = c.Secure.Server
	c.URI = etcdtest.URI(c.Etcd, etcdtest.Scope(t))
	c.Security = c.Secure.Security(t)
	d := c.Secure.Dir
	c.Settings = append(c.Settings, "metadataServiceTlsCaFile="+d.CA(), "metadataServiceTlsCertFile="+d.ClientCert(), "metadataServiceTlsKeyFile="+d.ClientKey())
	c.MetadataFlags = []string{"--metadata-tls-ca", d.CA(), "--metadata-tls-cert", d.ClientCert(), "--metadata-tls-key", d.ClientKey()}
	if o.Auth {
		pw := filepath.Join(t.TempDir(), "etcd-password")
		if err := os.WriteFile(pw, []byte(etcdtest.Password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Settings = append(c.Settings, "metadataServiceUser="+etcdtest.User, "metadataServicePasswordPath="+pw)
		c.MetadataFlags = append(c.MetadataFlags, "--metadata-user", etcdtest.User, "--metadata-password-file", pw)
	}
}

// Bookie is one bookie process with its directory, ports and id, which stay
// the same across restarts.
type Bookie struct {
	c        *Cluster
	Dir      string
	Port     int
	HTTPPort int
	ID       metadata.BookieID
	ConfPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	wait chan error // receives the process's exit, once
	runs int
}

// NewBookie prepares a bookie (directory, free ports, configuration file)
// without starting it.
func (c *Cluster) NewBookie() *Bookie {
	t := c.t
	t.Helper()
	dir := t.TempDir()
	b := &Bookie{c: c, Dir: dir, Port: FreePort(t), HTTPPort: FreePort(t)}
	b.ID = metadata.BookieID("127.0.0.1:" + strconv.Itoa(b.Port))
	var idLine string
	if c.customIDs {
		b.ID = metadata.BookieID("bookie-" + strconv.Itoa(b.Port))
		idLine = "bookieId=" + string(b.ID)
	}
	b.ConfPath = filepath.Join(dir, "bk_server.conf")
	conf := strings.Join([]string{
		idLine,
		"# written by testcluster",
		"bookiePort=" + strconv.Itoa(b.Port),
		"listenHost=127.0.0.1",
		"advertisedAddress=127.0.0.1",
		"allowLoopback=true",
		"journalDirectories=" + filepath.Join(dir, "journal"),
		"ledgerDirectories=" + filepath.Join(dir, "ledgers"),
		"metadataServiceUri=" + c.URI,
		"httpServerEnabled=true",
		"httpServerHost=127.0.0.1",
		"httpServerPort=" + strconv.Itoa(b.HTTPPort),
		"",
	}, "\n")
	if err := os.WriteFile(b.ConfPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Bookies = append(c.Bookies, b)
	t.Cleanup(func() { b.Kill() })
	return b
}

// Addr is the bookie's host:port (its id too, unless WithCustomBookieIDs).
func (b *Bookie) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

// HTTPAddr is the admin HTTP server's host:port.
func (b *Bookie) HTTPAddr() string { return "127.0.0.1:" + strconv.Itoa(b.HTTPPort) }

// LogPath is the stderr file of the current run.
func (b *Bookie) LogPath() string { return filepath.Join(b.Dir, fmt.Sprintf("bookie.%d.log", b.runs)) }

// Start starts the bookie process (it must not be running).
func (b *Bookie) Start(extraArgs ...string) {
	t := b.c.t
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		t.Fatalf("testcluster: bookie %s is already running", b.ID)
	}
	b.runs++
	args := []string{"bookie", "--conf", b.ConfPath}
	for _, kv := range b.c.Settings {
		args = append(args, "--set", kv)
	}
	args = append(args, extraArgs...)
	cmd, wait := startProcess(t, b.Dir, fmt.Sprintf("bookie.%d", b.runs), args)
	b.cmd, b.wait = cmd, wait
}

func startProcess(t testing.TB, dir, name string, args []string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	stderr, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if cmd.Stdout == nil {
		out, err := os.Create(filepath.Join(dir, name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = out
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testcluster: start %v: %v", args, err)
	}
	wait := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		stderr.Close()
		if f, ok := cmd.Stdout.(*os.File); ok {
			f.Close()
		}
		wait <- err
	}()
	return cmd, wait
}

// signal sends sig to the running process.
func (b *Bookie) signal(sig syscall.Signal) {
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Kill SIGKILLs the process and waits for it to die (no-op if not running).
func (b *Bookie) Kill() {
	b.mu.Lock()
	cmd, wait := b.cmd, b.wait
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-wait
}

// Pause SIGSTOPs the process and returns once it is stopped; Resume
// SIGCONTs it and returns once it runs again. Signals are delivered
// asynchronously: a test that goes on right after kill(2) may still be
// served by a bookie it thinks is stopped. Where /proc is missing (not
// Linux) they return after sending the signal.
func (b *Bookie) Pause() {
	b.signal(syscall.SIGSTOP)
	b.waitStopped(true)
}

func (b *Bookie) Resume() {
	b.signal(syscall.SIGCONT)
	b.waitStopped(false)
}

// waitStopped polls the process's state in /proc/<pid>/stat until it is
// (or is not) stopped by a signal; it returns at once if the process is
// gone or /proc cannot be read.
func (b *Bookie) waitStopped(stopped bool) {
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	for {
		st, err := procState(cmd.Process.Pid)
		if err != nil || (st == 'T') == stopped {
			return
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// procState returns the state letter of process pid (proc(5): the field
// after the parenthesised command name; 'T' is stopped by a signal).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("/proc/%d/stat: no state field in %q", pid, b)
	}
	return b[i+2], nil
}

// Terminate sends SIGTERM and waits for a clean exit (status 0) within
// StopTimeout; it fails the test otherwise. It returns how long the stop
// took.
func (b *Bookie) Terminate() time.Duration {
	t := b.c.t
	t.Helper()
	b.mu.Lock()
	cmd, wait := b.cmd, b.wait
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		t.Fatalf("testcluster: bookie %s is not running", b.ID)
	}
	return terminate(t, cmd, wait, b.LogPath())
}

func terminate(t testing.TB, cmd *exec.Cmd, wait chan error, logPath string) time.Duration {
	t.Helper()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-wait:
		if err != nil {
			t.Fatalf("testcluster: %s exited with %v after SIGTERM (log %s)", cmd.Args[1], err, logPath)
		}
	case <-time.After(StopTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-wait
		t.Fatalf("testcluster: %s did not stop within %v of SIGTERM (log %s)", cmd.Args[1], StopTimeout, logPath)
	}
	return time.Since(start)
}

// Restart SIGKILLs the process and starts it again on the same directory,
// port and id, then waits until the new process is registered: the killed
// process's registration first vanishes with its lease (zkTimeout), so that
// the key seen afterwards is the new one's.
func (b *Bookie) Restart() {
	b.c.t.Helper()
	b.Kill()
	b.WaitUnregistered()
	b.Start()
	b.WaitRegistered(false)
}

// WaitUnregistered waits until the bookie has no registration (its lease
// expired or it deregistered).
func (b *Bookie) WaitUnregistered() {
	t := b.c.t
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w, err1 := b.c.MD.WritableBookies(ctx)
		r, err2 := b.c.MD.ReadOnlyBookies(ctx)
		cancel()
		if err1 == nil && err2 == nil && !slices.Contains(w, b.ID) && !slices.Contains(r, b.ID) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testcluster: bookie %s still registered after %v", b.ID, StartTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Exited reports whether the current process has exited, and its error.
func (b *Bookie) Exited(within time.Duration) (bool, error) {
	b.mu.Lock()
	wait := b.wait
	b.mu.Unlock()
	select {
	case err := <-wait:
		b.mu.Lock()
		b.cmd = nil
		b.mu.Unlock()
		return true, err
	case <-time.After(within):
		return false, nil
	}
}

// WaitRegistered waits until the bookie is registered writable (or
// read-only), failing the test after StartTimeout or if the process exits.
func (b *Bookie) WaitRegistered(readOnly bool) {
	t := b.c.t
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		list := b.c.MD.WritableBookies
		if readOnly {
			list = b.c.MD.ReadOnlyBookies
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ids, err := list(ctx)
		cancel()
		if err == nil && slices.Contains(ids, b.ID) {
			return
		}
		if exited, perr := b.Exited(0); exited {
			t.Fatalf("testcluster: bookie %s exited (%v) before registering; log %s:\n%s", b.ID, perr, b.LogPath(), tail(b.LogPath()))
		}
		if time.Now().After(deadline) {
			t.Fatalf("testcluster: bookie %s not registered within %v; log %s:\n%s", b.ID, StartTimeout, b.LogPath(), tail(b.LogPath()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tail returns the last lines of a file, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// Standalone is a `folio standalone` process.
type Standalone struct {
	t    testing.TB
	Dir  string
	Args []string
	runs int

	cmd  *exec.Cmd
	wait chan error
	// lines receives stdout lines of the current run.
	lines chan string

	// ReadyLine is the readiness line of the current run; URI and
	// BookieIDs are parsed from it.
	ReadyLine string
	URI       string
	BookieIDs []string
}

// StartStandalone runs `folio standalone --data-dir dir` with every port 0
// (free, recorded in dir) and the extra args, and waits for its readiness
// line. It is SIGKILLed by t.Cleanup if still running.
func StartStandalone(t testing.TB, dir string, args ...string) *Standalone {
	t.Helper()
	s := &Standalone{t: t, Dir: dir, Args: append([]string{
		"standalone", "--data-dir", dir,
		"--etcd-client-port", "0", "--etcd-peer-port", "0", "--bookie-port-base", "0", "--http-port", "0",
		"--bookie-set", "zkTimeout=2000",
	}, args...)}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// LogPath is the stderr file of the current run.
func (s *Standalone) LogPath() string {
	return filepath.Join(s.Dir, fmt.Sprintf("standalone.%d.log", s.runs))
}

// Start starts the process and waits for the readiness line.
func (s *Standalone) Start() {
	t := s.t
	t.Helper()
	s.runs++
	s.ReadyLine, s.URI, s.BookieIDs = "", "", nil
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary(t), s.Args...)
	cmd.Stdout = pw
	s.cmd, s.wait = startProcessCmd(t, cmd, s.LogPath())
	pw.Close()
	s.lines = make(chan string, 100)
	go func() {
		defer close(s.lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	select {
	case line, ok := <-s.lines:
		if !ok {
			t.Fatalf("testcluster: standalone exited before its readiness line; log %s:\n%s", s.LogPath(), tail(s.LogPath()))
		}
		s.ReadyLine = line
	case <-time.After(StartTimeout):
		t.Fatalf("testcluster: no readiness line within %v; log %s:\n%s", StartTimeout, s.LogPath(), tail(s.LogPath()))
	}
	const prefix = "folio standalone ready: "
	if !strings.HasPrefix(s.ReadyLine, prefix) {
		t.Fatalf("testcluster: first stdout line is not the readiness line: %q", s.ReadyLine)
	}
	hasBookies := false
	for _, f := range strings.Fields(strings.TrimPrefix(s.ReadyLine, prefix)) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "metadata-service-uri":
			s.URI = v
		case "bookies":
			// Empty with --bookies 0.
			hasBookies = true
			if v != "" {
				s.BookieIDs = strings.Split(v, ",")
			}
		}
	}
	if s.URI == "" || !hasBookies {
		t.Fatalf("testcluster: malformed readiness line %q", s.ReadyLine)
	}
}

// StartFails starts the process expecting it to refuse to start: it must
// exit without printing its readiness line, within StartTimeout. It returns
// the exit error (nil for status 0) and the run's stderr.
func (s *Standalone) StartFails() (exitErr error, stderr string) {
	t := s.t
	t.Helper()
	s.runs++
	cmd := exec.Command(Binary(t), s.Args...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	var wait chan error
	s.cmd, wait = startProcessCmd(t, cmd, s.LogPath())
	select {
	case exitErr = <-wait:
	case <-time.After(StartTimeout):
		t.Fatalf("testcluster: standalone did not exit within %v; log %s:\n%s", StartTimeout, s.LogPath(), tail(s.LogPath()))
	}
	s.cmd = nil
	if strings.Contains(stdout.String(), "folio standalone ready") {
		t.Fatalf("testcluster: standalone became ready although it was expected to refuse: %q", stdout.String())
	}
	b, err := os.ReadFile(s.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return exitErr, string(b)
}

func startProcessCmd(t testing.TB, cmd *exec.Cmd, logPath string) (*exec.Cmd, chan error) {
	t.Helper()
	stderr, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("testcluster: start %v: %v", cmd.Args, err)
	}
	wait := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		stderr.Close()
		if f, ok := cmd.Stdout.(*os.File); ok {
			f.Close()
		}
		wait <- err
	}()
	return cmd, wait
}

// Kill SIGKILLs the process (no-op if it is not running).
func (s *Standalone) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.wait
	s.cmd = nil
}

// Terminate sends SIGTERM, waits for exit status 0 within StopTimeout, and
// returns how long it took and every stdout line after the readiness line.
func (s *Standalone) Terminate() (time.Duration, []string) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatal("testcluster: standalone is not running")
	}
	d := terminate(s.t, s.cmd, s.wait, s.LogPath())
	s.cmd = nil
	var rest []string
	for l := range s.lines {
		rest = append(rest, l)
	}
	return d, rest
}
