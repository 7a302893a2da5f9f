// Command etcdmember runs one member of a multi-member etcd cluster
// (internal/metadata/etcd/embedetcd) as a process of its own, so that a
// process-level test can SIGKILL the cluster's leader: a crash, not etcd's
// graceful stop, which hands leadership over first. It is built and run by
// internal/testcluster (StartEtcdCluster); it is not part of Folio.
//
// Once the member serves clients (which needs a quorum of the cluster) it
// prints "ready" on stdout. SIGTERM or SIGINT stops it gracefully (exit 0);
// a fatal etcd error exits 1. etcd's log is etcd.log in the data directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg     embedetcd.Config
		cluster string
		fsync   bool
	)
	flag.StringVar(&cfg.Name, "name", "", "member name (required)")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "data directory (required)")
	flag.IntVar(&cfg.ClientPort, "client-port", 0, "client port on 127.0.0.1 (required)")
	flag.IntVar(&cfg.PeerPort, "peer-port", 0, "peer port on 127.0.0.1 (required)")
	flag.StringVar(&cluster, "cluster", "", "every member as name=http://host:port, comma separated (required)")
	flag.StringVar(&cfg.ClusterToken, "token", "", "cluster token")
	flag.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", 0, "raft heartbeat interval (0: etcd's 100ms)")
	flag.DurationVar(&cfg.ElectionTimeout, "election-timeout", 0, "raft election timeout (0: etcd's 1s)")
	flag.BoolVar(&fsync, "fsync", false, "fsync etcd's writes (off: a machine crash may lose them, a process crash does not)")
	flag.Parse()
	if cfg.Name == "" || cfg.DataDir == "" || cfg.ClientPort == 0 || cfg.PeerPort == 0 || cluster == "" {
		return fmt.Errorf("--name, --data-dir, --client-port, --peer-port and --cluster are required")
	}
	for _, m := range strings.Split(cluster, ",") {
		name, peerURL, ok := strings.Cut(m, "=")
		if !ok {
			return fmt.Errorf("--cluster: %q is not name=url", m)
		}
		cfg.Cluster = append(cfg.Cluster, embedetcd.Member{Name: name, PeerURL: peerURL})
	}
	cfg.UnsafeNoFsync = !fsync

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := embedetcd.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	select {
	case <-ctx.Done():
		done := make(chan error, 1)
		go func() { done <- srv.Close() }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("graceful stop took over 30s")
		}
	case err := <-srv.Err():
		_ = srv.Close()
		return fmt.Errorf("etcd failed (see %s): %v", srv.LogFile(), err)
	}
}
