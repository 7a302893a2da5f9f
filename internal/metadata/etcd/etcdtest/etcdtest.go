// Package etcdtest gives tests a real etcd: an embedded single-member server
// (package embedetcd) on free loopback ports with its data in t.TempDir(),
// stopped by t.Cleanup. Tests never use the fixed ports 2379/2380: packages
// run in parallel.
//
// Typical use:
//
//	srv := etcdtest.Start(t)
//	uri := etcdtest.URI(srv, etcdtest.Scope(t)) // etcd://127.0.0.1:NNNNN/folio-test/<n>-<name>
//	d, err := metadata.Open(ctx, uri, metadata.Options{})
//
// metadata.Open needs the etcd driver linked in: import
// github.com/foliodb/folio/internal/metadata/etcd (for its side effect if
// nothing else). This package does not import it, so that the driver's own
// internal tests can use it.
//
// A package whose tests share one server starts it in TestMain with
// StartMain and gives each test its own Scope.
//
// StartCluster runs a multi-member cluster in the test process, for tests of
// fail-over (members stopped and restarted; Cluster.URI is the
// multi-endpoint URI etcd://h1:p1;h2:p2;h3:p3/scope).
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/freeport"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
)

// Option adjusts the embedetcd.Config that Start uses.
type Option func(*embedetcd.Config)

// WithDataDir starts the server on dir instead of a fresh t.TempDir(), e.g.
// to restart a server on the data of an earlier one.
func WithDataDir(dir string) Option { return func(c *embedetcd.Config) { c.DataDir = dir } }

// WithConfig applies f to the config (ports, compaction, quota, ...).
func WithConfig(f func(*embedetcd.Config)) Option { return Option(f) }

// Start starts an embedded etcd for the test and registers its Close with
// t.Cleanup. Defaults: free ports on 127.0.0.1, fsync off (tests only), data
// in a new t.TempDir(). It fails the test if the server does not start
// within a minute.
func Start(t testing.TB, opts ...Option) *embedetcd.Server {
	t.Helper()
	cfg := embedetcd.Config{UnsafeNoFsync: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := embedetcd.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("etcdtest: start embedded etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("etcdtest: close embedded etcd: %v", err)
		}
	})
	return srv
}

// URI is the metadata service URI of scope on srv: etcd://host:port<scope>
// (etcd+https:// when srv serves TLS). scope must start with "/" and not
// end with one (spec/metadata.md §2.1).
func URI(srv *embedetcd.Server, scope string) string {
	return srv.MetadataURI(scope)
}

var scopeSeq atomic.Int64

var unsafeScopeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Scope returns a scope unique within the process, derived from the test
// name, so that tests may share one server without seeing each other's keys:
// /folio-test/<n>-<sanitised test name>. The sequence number comes first so
// that no scope is a prefix of another followed by a byte below '0' (the
// Format range [<scope>, <scope>0) of one test never reaches another's).
func Scope(t testing.TB) string {
	name := strings.Trim(unsafeScopeChars.ReplaceAllString(t.Name(), "_"), "_")
	return fmt.Sprintf("/folio-test/%d-%s", scopeSeq.Add(1), name)
}

// StartMain starts an embedded etcd for a whole test binary (from TestMain,
// where there is no *testing.T), with its data in a new temporary
// directory. stop closes it and removes the directory.
func StartMain(opts ...Option) (srv *embedetcd.Server, stop func() error, err error) {
	cfg := embedetcd.Config{UnsafeNoFsync: true}
	for _, o := range opts {
		o(&cfg)
	}
	var tmp string
	if cfg.DataDir == "" {
		if tmp, err = os.MkdirTemp("", "folio-etcdtest-"); err != nil {
			return nil, nil, err
		}
		cfg.DataDir = tmp
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err = embedetcd.Start(ctx, cfg)
	if err != nil {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
		return nil, nil, fmt.Errorf("etcdtest: start embedded etcd: %w", err)
	}
	return srv, func() error {
		err := srv.Close()
		if tmp != "" {
			if rerr := os.RemoveAll(tmp); err == nil {
				err = rerr
			}
		}
		return err
	}, nil
}

// Short raft timings of StartCluster's members: fail-over within about a
// second. An election timeout of 500 ms also makes etcd's minimum lease TTL
// 750 ms.
const (
	ClusterHeartbeat       = 50 * time.Millisecond
	ClusterElectionTimeout = 500 * time.Millisecond
)

// Cluster is an n-member etcd cluster inside the test process, for tests of
// fail-over: each member can be stopped and restarted on its data directory
// and ports. (Stop is etcd's graceful stop, which hands leadership over
// first; tests that must kill a leader outright run members as processes,
// internal/testcluster.)
type Cluster struct {
	t       testing.TB
	Configs []embedetcd.Config
	// Servers holds the running members; nil for a stopped one.
	Servers []*embedetcd.Server
}

// StartCluster starts an n-member cluster on free loopback ports (chosen
// once and kept across restarts) with fsync off, the Cluster* timings and
// data in t.TempDir(); opts apply to every member's config. Members still
// running at the end of the test are closed.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Configs: make([]embedetcd.Config, n), Servers: make([]*embedetcd.Server, n)}
	var members []embedetcd.Member
	for i := range c.Configs {
		cfg := embedetcd.Config{
			Name: fmt.Sprintf("m%d", i), DataDir: t.TempDir(), UnsafeNoFsync: true,
			ClientPort: freePort(t), PeerPort: freePort(t),
			HeartbeatInterval: ClusterHeartbeat, ElectionTimeout: ClusterElectionTimeout,
		}
		for _, o := range opts {
			o(&cfg)
		}
		c.Configs[i] = cfg
		host := cfg.PeerHost
		if host == "" {
			host = embedetcd.DefaultHost
		}
		members = append(members, embedetcd.Member{Name: cfg.Name, PeerURL: "http://" + net.JoinHostPort(host, strconv.Itoa(cfg.PeerPort))})
	}
	for i := range c.Configs {
		c.Configs[i].Cluster = members
	}
	// Each member's start waits for a quorum: start them together.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range c.Configs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Servers[i], errs[i] = c.start(i)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range c.Servers {
			c.Stop(i)
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("etcdtest: start member %d: %v", i, err)
		}
	}
	return c
}

func (c *Cluster) start(i int) (*embedetcd.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return embedetcd.Start(ctx, c.Configs[i])
}

// Stop closes member i (no-op if it is stopped).
func (c *Cluster) Stop(i int) {
	if s := c.Servers[i]; s != nil {
		c.Servers[i] = nil
		if err := s.Close(); err != nil {
			c.t.Errorf("etcdtest: close member %d: %v", i, err)
		}
	}
}

// Restart starts stopped member i again on its data directory and ports and
// waits until it serves, which needs a quorum of members running.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Servers[i] != nil {
		c.t.Fatalf("etcdtest: member %d is running", i)
	}
	s, err := c.start(i)
	if err != nil {
		c.t.Fatalf("etcdtest: restart member %d: %v", i, err)
	}
	c.Servers[i] = s
}

// Hosts are the members' client addresses (host:port), in member order.
func (c *Cluster) Hosts() []string {
	var out []string
	for _, cfg := range c.Configs {
		host := cfg.ClientHost
		if host == "" {
			host = embedetcd.DefaultHost
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(cfg.ClientPort)))
	}
	return out
}

// URI is the multi-endpoint metadata service URI of scope on the cluster:
// etcd://h1:p1;h2:p2;h3:p3<scope>.
func (c *Cluster) URI(scope string) string {
	return "etcd://" + strings.Join(c.Hosts(), ";") + scope
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Take()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
