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
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// URI is the metadata service URI of scope on srv: etcd://host:port<scope>.
// scope must start with "/" and not end with one (spec/metadata.md §2.1).
func URI(srv *embedetcd.Server, scope string) string {
	return "etcd://" + srv.ClientAddr() + scope
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
