package standalone

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBusyPortIsAStartupError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	var out bytes.Buffer
	err = Run(context.Background(), Config{
		Bookies: 1, DataDir: t.TempDir(), BookiePortBase: busy, Stdout: &out,
	})
	if err == nil || !strings.Contains(err.Error(), "not available") {
		t.Fatalf("Run on a busy bookie port: %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("stdout: %q", out.String())
	}
}

func TestRunReadyLineAndStop(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	infos := make(chan Info, 2)
	go func() {
		done <- Run(ctx, Config{Bookies: 2, DataDir: dir, Stdout: &out, BookieSet: []string{"zkTimeout=2000"},
			OnReady: func(i Info) { infos <- i }})
	}()
	// OnReady is called right after the readiness line is written: wait
	// for it (or for Run to fail), then read the line.
	var info Info
	select {
	case info = <-infos:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v", err)
	}
	line := out.String()
	if !strings.HasPrefix(line, ReadyPrefix+"metadata-service-uri=etcd://127.0.0.1:") || strings.Count(line, ",") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("readiness line %q", line)
	}
	p, err := loadPorts(dir)
	if err != nil || p.EtcdClient == 0 || p.EtcdPeer == 0 || p.HTTP == 0 || len(p.Bookies) != 2 {
		t.Fatalf("recorded ports %+v, %v", p, err)
	}
	// OnReady describes what the readiness line announced, once.
	if !strings.Contains(line, "metadata-service-uri="+info.MetadataServiceURI+" ") ||
		!strings.Contains(line, "bookies="+info.Bookies[0].ID+","+info.Bookies[1].ID+"\n") ||
		info.EtcdClientAddr != fmt.Sprintf("127.0.0.1:%d", p.EtcdClient) || info.HTTPAddr != fmt.Sprintf("127.0.0.1:%d", p.HTTP) ||
		info.Bookies[1].JournalDir != filepath.Join(info.DataDir, "bookie-1", "journal") || info.EtcdLogFile == "" {
		t.Fatalf("info %+v does not match line %q / ports %+v", info, line, p)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not stopped within 10 s")
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("stdout %q: want exactly one line", out.String())
	}
	if len(infos) != 0 {
		t.Fatal("OnReady called more than once")
	}
}
