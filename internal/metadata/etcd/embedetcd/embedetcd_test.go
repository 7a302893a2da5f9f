package embedetcd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
)

func start(t *testing.T, cfg embedetcd.Config) *embedetcd.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := embedetcd.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

func client(t *testing.T, s *embedetcd.Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// TestRestartKeepsData: a member restarted on the same data dir (and even on
// different ports) serves everything written before, with the same revisions.
func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	s := start(t, embedetcd.Config{DataDir: dir, AutoCompactionRetention: 10 * time.Minute, QuotaBackendBytes: 64 << 20})
	if s.ClientPort() == 0 || s.PeerPort() == 0 || s.ClientPort() == 2379 {
		t.Fatalf("ports: client %d peer %d", s.ClientPort(), s.PeerPort())
	}
	c := client(t, s)
	ctx := context.Background()
	put, err := c.Put(ctx, "/k", "v")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatalf("second Close: %v", err)
	}

	s2 := start(t, embedetcd.Config{DataDir: dir})
	defer s2.Close()
	c2 := client(t, s2)
	defer c2.Close()
	resp, err := c2.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" || resp.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("after restart: %+v (want v at revision %d)", resp.Kvs, put.Header.Revision)
	}
}

// TestLogsGoToFile: etcd's log is written to the file in the data dir.
func TestLogsGoToFile(t *testing.T) {
	dir := t.TempDir()
	s := start(t, embedetcd.Config{DataDir: dir, UnsafeNoFsync: true})
	if want := filepath.Join(dir, embedetcd.DefaultLogFile); s.LogFile() != want {
		t.Fatalf("LogFile = %q, want %q", s.LogFile(), want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.LogFile())
	if err != nil || fi.Size() == 0 {
		t.Fatalf("log file %s: %v, %v", s.LogFile(), fi, err)
	}
}

// TestBusyPortFails: an explicit busy port is an error, never a silent move.
func TestBusyPortFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := embedetcd.Start(ctx, embedetcd.Config{DataDir: t.TempDir(), ClientPort: port, UnsafeNoFsync: true})
	if err == nil {
		s.Close()
		t.Fatalf("Start on busy port %d succeeded", port)
	}
	if !errors.Is(err, embedetcd.ErrPortInUse) {
		t.Fatalf("err = %v, want ErrPortInUse", err)
	}
	if want := strconv.Itoa(port); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name port %s", err, want)
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := embedetcd.Start(ctx, embedetcd.Config{}); err == nil {
		t.Fatal("Start without DataDir succeeded")
	}
	if _, err := embedetcd.Start(ctx, embedetcd.Config{DataDir: t.TempDir(), ClientPort: 70000}); err == nil {
		t.Fatal("Start with port 70000 succeeded")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// clusterConfigs returns the configs of an n-member cluster on free ports
// with short raft timings.
func clusterConfigs(t *testing.T, n int) []embedetcd.Config {
	t.Helper()
	var members []embedetcd.Member
	cfgs := make([]embedetcd.Config, n)
	for i := range cfgs {
		name := "m" + strconv.Itoa(i)
		peer := freePort(t)
		cfgs[i] = embedetcd.Config{
			DataDir: t.TempDir(), Name: name, PeerPort: peer, UnsafeNoFsync: true,
			HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		}
		members = append(members, embedetcd.Member{Name: name, PeerURL: "http://127.0.0.1:" + strconv.Itoa(peer)})
	}
	for i := range cfgs {
		cfgs[i].Cluster = members
	}
	return cfgs
}

// TestThreeMemberCluster: three members started together form one cluster;
// a write through one is read through another; with one member stopped the
// other two still serve writes, and the stopped member restarted on its data
// directory rejoins and catches up.
func TestThreeMemberCluster(t *testing.T) {
	cfgs := clusterConfigs(t, 3)
	servers := make([]*embedetcd.Server, len(cfgs))
	errs := make([]error, len(cfgs))
	done := make(chan int)
	for i := range cfgs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			servers[i], errs[i] = embedetcd.Start(ctx, cfgs[i]) // each waits for the cluster's quorum
			done <- i
		}()
	}
	for range cfgs {
		<-done
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		t.Cleanup(func() { servers[i].Close() })
	}
	ctx := context.Background()
	c0, c2 := client(t, servers[0]), client(t, servers[2])
	defer c0.Close()
	defer c2.Close()
	put, err := c0.Put(ctx, "/k", "v")
	if err != nil {
		t.Fatal(err)
	}
	members, err := c2.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 3 {
		t.Fatalf("member list has %d members, want 3: %v", len(members.Members), members.Members)
	}
	if resp, err := c2.Get(ctx, "/k"); err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("read through member 2: %v %v", resp, err)
	}

	if err := servers[1].Close(); err != nil {
		t.Fatalf("close member 1: %v", err)
	}
	put2, err := c2.Put(ctx, "/k2", "v2")
	if err != nil {
		t.Fatalf("write with 2 of 3 members: %v", err)
	}
	servers[1] = start(t, cfgs[1])
	c1 := client(t, servers[1])
	defer c1.Close()
	resp, err := c1.Get(ctx, "/k2") // linearizable: served once member 1 caught up
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != put2.Header.Revision {
		t.Fatalf("restarted member 1 reads /k2: %v %v", resp, err)
	}
}

func TestClusterConfigErrors(t *testing.T) {
	ctx := context.Background()
	good := clusterConfigs(t, 3)[0]
	cases := map[string]func(c *embedetcd.Config){
		"no peer port":       func(c *embedetcd.Config) { c.PeerPort = 0 },
		"not in the list":    func(c *embedetcd.Config) { c.Name = "other" },
		"wrong own url":      func(c *embedetcd.Config) { c.PeerPort++ },
		"duplicate name":     func(c *embedetcd.Config) { c.Cluster = append(c.Cluster, c.Cluster[0]) },
		"election too short": func(c *embedetcd.Config) { c.ElectionTimeout = 4 * c.HeartbeatInterval },
		"sub-millisecond":    func(c *embedetcd.Config) { c.HeartbeatInterval = 1500 * time.Microsecond },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := good
			cfg.Cluster = slices.Clone(good.Cluster)
			mod(&cfg)
			if s, err := embedetcd.Start(ctx, cfg); err == nil {
				s.Close()
				t.Fatal("Start succeeded")
			}
		})
	}
}
