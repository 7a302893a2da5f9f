package embedetcd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
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
