package testcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdOptions configure StartEtcdCluster. Zero values are the defaults.
type EtcdOptions struct {
	// Members is the number of members; default 3.
	Members int
	// HeartbeatInterval and ElectionTimeout are raft's (etcd's
	// --heartbeat-interval and --election-timeout); defaults 50 ms and
	// 500 ms, so that a fail-over takes about a second. The election
	// timeout also sets etcd's minimum lease TTL, 1.5 × it.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
}

var memberBuild struct {
	once sync.Once
	path string
	err  error
}

// memberBinary builds internal/testcluster/etcdmember once per test
// process, into the checkout's shared path (see Binary).
func memberBinary(t testing.TB) string {
	t.Helper()
	memberBuild.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			memberBuild.err = err
			return
		}
		memberBuild.path, memberBuild.err = buildShared(root, "./internal/testcluster/etcdmember", "etcdmember")
	})
	if memberBuild.err != nil {
		t.Fatalf("testcluster: %v", memberBuild.err)
	}
	return memberBuild.path
}

// EtcdCluster is a multi-member etcd cluster whose members are processes
// (internal/testcluster/etcdmember running an embedded etcd), so that a test
// can SIGKILL the leader, or enough members to lose the quorum, and restart
// them on their data. Members keep their ports across restarts.
type EtcdCluster struct {
	t       testing.TB
	Members []*EtcdMember
	opts    EtcdOptions
	// status asks members for their raft status (Leader).
	status *clientv3.Client
}

// EtcdMember is one member process.
type EtcdMember struct {
	c          *EtcdCluster
	Name       string
	Dir        string
	ClientPort int
	PeerPort   int
	args       []string

	mu    sync.Mutex
	cmd   *exec.Cmd
	wait  chan error
	ready chan struct{} // closed when the current run printed "ready"
	runs  int
}

// StartEtcdCluster starts the members on free loopback ports and waits until
// each serves clients. Members still running at the end of the test are
// SIGKILLed.
func StartEtcdCluster(t testing.TB, o EtcdOptions) *EtcdCluster {
	t.Helper()
	if o.Members <= 0 {
		o.Members = 3
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 50 * time.Millisecond
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = 500 * time.Millisecond
	}
	memberBinary(t) // build before starting anything
	c := &EtcdCluster{t: t, opts: o}
	var cluster []string
	for i := range o.Members {
		m := &EtcdMember{c: c, Name: "etcd" + strconv.Itoa(i), Dir: t.TempDir(), ClientPort: FreePort(t), PeerPort: FreePort(t)}
		c.Members = append(c.Members, m)
		cluster = append(cluster, m.Name+"=http://127.0.0.1:"+strconv.Itoa(m.PeerPort))
	}
	for _, m := range c.Members {
		m.args = []string{
			"--name", m.Name, "--data-dir", filepath.Join(m.Dir, "data"),
			"--client-port", strconv.Itoa(m.ClientPort), "--peer-port", strconv.Itoa(m.PeerPort),
			"--cluster", strings.Join(cluster, ","), "--token", "testcluster-" + strconv.Itoa(c.Members[0].PeerPort),
			"--heartbeat-interval", o.HeartbeatInterval.String(), "--election-timeout", o.ElectionTimeout.String(),
		}
		m.Start()
		t.Cleanup(m.Kill)
	}
	for _, m := range c.Members {
		m.WaitReady()
	}
	var eps []string
	for _, h := range c.Hosts() {
		eps = append(eps, "http://"+h)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("testcluster: etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	c.status = cli
	return c
}

// Hosts are the members' client addresses (127.0.0.1:port), in member
// order.
func (c *EtcdCluster) Hosts() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Addr())
	}
	return out
}

// URI is the multi-endpoint metadata service URI of scope:
// etcd://h1:p1;h2:p2;h3:p3<scope>.
func (c *EtcdCluster) URI(scope string) string {
	return "etcd://" + strings.Join(c.Hosts(), ";") + scope
}

// Addr is the member's client address, host:port.
func (m *EtcdMember) Addr() string { return "127.0.0.1:" + strconv.Itoa(m.ClientPort) }

// LogPath is the stderr file of the member's current run; etcd's own log is
// etcd.log in its data directory.
func (m *EtcdMember) LogPath() string {
	return filepath.Join(m.Dir, fmt.Sprintf("etcdmember.%d.log", m.runs))
}

// Start starts the member process on its data directory and ports (it must
// not be running). It does not wait: a member serves only once a quorum of
// the cluster runs (WaitReady).
func (m *EtcdMember) Start() {
	t := m.c.t
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		t.Fatalf("testcluster: etcd member %s is already running", m.Name)
	}
	m.runs++
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(memberBinary(t), m.args...)
	cmd.Stdout = pw
	m.cmd, m.wait = startProcessCmd(t, cmd, m.LogPath())
	pw.Close()
	ready := make(chan struct{})
	m.ready = ready
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
}

// WaitReady waits until the current run serves clients, failing the test
// after StartTimeout or if the process exits.
func (m *EtcdMember) WaitReady() {
	t := m.c.t
	t.Helper()
	m.mu.Lock()
	ready, wait := m.ready, m.wait
	m.mu.Unlock()
	if ready == nil {
		t.Fatalf("testcluster: etcd member %s was never started", m.Name)
	}
	select {
	case <-ready:
	case err := <-wait:
		wait <- err
		t.Fatalf("testcluster: etcd member %s exited (%v) before serving; log %s:\n%s", m.Name, err, m.LogPath(), tail(m.LogPath()))
	case <-time.After(StartTimeout):
		t.Fatalf("testcluster: etcd member %s not serving within %v; log %s:\n%s", m.Name, StartTimeout, m.LogPath(), tail(m.LogPath()))
	}
}

// Kill SIGKILLs the member and waits for it to die (no-op if it is not
// running): a crash, with no hand-over of leadership.
func (m *EtcdMember) Kill() {
	m.mu.Lock()
	cmd, wait := m.cmd, m.wait
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := <-wait
	wait <- err
}

// Running reports whether the member's process runs.
func (m *EtcdMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// status asks the member for its raft status: its own id and the leader
// it knows (0: none).
func (m *EtcdMember) status(ctx context.Context) (id, leader uint64, err error) {
	resp, err := m.c.status.Status(ctx, "http://"+m.Addr())
	if err != nil {
		return 0, 0, err
	}
	return resp.Header.MemberId, resp.Leader, nil
}

// Leader waits until every running member names the same leader, and that
// leader is a running member which names itself, and returns it: a quorum
// holds a leader again. It fails the test after StartTimeout.
func (c *EtcdCluster) Leader() *EtcdMember {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	var last string
	for {
		m, why := c.leader()
		if m != nil {
			return m
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("testcluster: no etcd leader within %v: %s", StartTimeout, last)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

func (c *EtcdCluster) leader() (*EtcdMember, string) {
	ids := map[uint64]*EtcdMember{}
	var leader uint64
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, l, err := m.status(ctx)
		cancel()
		switch {
		case err != nil:
			return nil, fmt.Sprintf("status of %s: %v", m.Name, err)
		case l == 0:
			return nil, m.Name + " knows no leader"
		case leader != 0 && l != leader:
			return nil, fmt.Sprintf("%s names leader %x, another member %x", m.Name, l, leader)
		}
		ids[id], leader = m, l
	}
	if m := ids[leader]; m != nil {
		return m, ""
	}
	return nil, fmt.Sprintf("leader %x is not a running member", leader)
}
