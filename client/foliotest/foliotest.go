// Package foliotest runs a BookKeeper-compatible cluster inside the test
// process, for the tests of programs that use the Folio client: an
// embedded etcd holding the metadata and bookies, each on a free port
// with its data in a temporary directory, as `folio standalone` runs them
// (without AutoRecovery). Start is the one-line form for tests; New and
// Close suit examples and TestMain:
//
//	func TestMyWAL(t *testing.T) {
//		uri := foliotest.Start(t)
//		c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
//		…
//	}
//
// A cluster takes a second or two to start; tests that need many ledgers
// can share one (New in TestMain).
package foliotest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/foliodb/folio/internal/standalone"
)

// DefaultBookies is the number of bookies a cluster runs without the
// Bookies option: enough for the client's default ensemble (3, write and
// ack quorums 2).
const DefaultBookies = 3

// Option configures a cluster.
type Option func(*options)

type options struct {
	bookies int
	logger  *slog.Logger
}

// Bookies sets the number of bookies (at least 1; default DefaultBookies).
// A ledger's ensemble cannot be larger.
func Bookies(n int) Option { return func(o *options) { o.bookies = n } }

// Logger sends the cluster's logs (bookies and metadata) to l; by default
// they are discarded. The embedded etcd logs to a file in the cluster's
// directory either way.
func Logger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Cluster is a running in-process cluster.
type Cluster struct {
	uri     string
	dir     string
	cancel  context.CancelFunc
	stopped chan struct{}
	runErr  error // set before stopped closes

	closeOnce sync.Once
	closeErr  error
}

// Start runs a cluster for the test and returns its metadata service URI
// (Config.MetadataServiceURI of the client). The cluster stops and its
// files are removed when the test and its subtests finish (t.Cleanup); a
// failure to start fails the test (t.Fatal).
func Start(t testing.TB, opts ...Option) (uri string) {
	t.Helper()
	c, err := New(opts...)
	if err != nil {
		t.Fatalf("foliotest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("foliotest: %v", err)
		}
	})
	return c.URI()
}

// New starts a cluster and returns once every bookie is writable. The
// caller must Close it.
func New(opts ...Option) (*Cluster, error) {
	o := options{bookies: DefaultBookies}
	for _, opt := range opts {
		opt(&o)
	}
	if o.bookies < 1 {
		return nil, fmt.Errorf("foliotest: Bookies(%d): a cluster needs at least 1 bookie", o.bookies)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir, err := os.MkdirTemp("", "foliotest-")
	if err != nil {
		return nil, fmt.Errorf("foliotest: %w", err)
	}
	ready := make(chan standalone.Info, 1)
	cfg := standalone.Config{
		Bookies: o.bookies,
		DataDir: dir,
		// Every port 0: free ports, as tests need.
		Logger:       o.logger,
		AutoRecovery: standalone.AutoRecoveryConfig{Disabled: true},
		OnReady:      func(info standalone.Info) { ready <- info },
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{dir: dir, cancel: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(c.stopped)
		c.runErr = standalone.Run(ctx, cfg)
	}()
	select {
	case info := <-ready:
		c.uri = info.MetadataServiceURI
		return c, nil
	case <-c.stopped:
		cancel()
		err := c.runErr
		if err == nil {
			err = fmt.Errorf("cluster stopped before it was ready")
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			o.logger.Warn("foliotest: removing the cluster's directory", "dir", dir, "err", rmErr)
		}
		return nil, fmt.Errorf("foliotest: starting a cluster of %d bookies in %s: %w", o.bookies, dir, err)
	}
}

// URI returns the cluster's metadata service URI, for the client's
// Config.MetadataServiceURI (etcd://127.0.0.1:<port>/ledgers).
func (c *Cluster) URI() string { return c.uri }

// Close stops the cluster, waits until every part of it has stopped and
// removes its files. It returns the error the cluster failed with while it
// ran, if any; closing again returns the same.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		<-c.stopped
		err := c.runErr
		if rmErr := os.RemoveAll(c.dir); rmErr != nil && err == nil {
			err = rmErr
		}
		if err != nil {
			c.closeErr = fmt.Errorf("foliotest: cluster in %s: %w", c.dir, err)
		}
	})
	return c.closeErr
}
