// Package standalone runs a whole local Folio cluster in one process: an
// embedded etcd, N bookies (N ≥ 0) and AutoRecovery (an auditor candidate
// and replication workers), with one admin HTTP server (DESIGN.md §3,
// "The standalone contract", which this package implements exactly):
//
//   - etcd serves clients on 127.0.0.1:2379 (peer 2380), scope /ledgers;
//     the cluster is initialised on first start if absent;
//   - bookie i listens on 127.0.0.1:(3181+i) with id 127.0.0.1:<port>;
//   - one HTTP admin server on 127.0.0.1:8080, metrics labelled by bookie;
//   - a port given as 0 is picked free once, recorded in DIR/ports.json and
//     reused on every restart; a busy port is a start-up error (a bookie's
//     id contains its port: a moved port would orphan its data);
//   - once every bookie is registered writable, exactly one line goes to
//     stdout: `folio standalone ready: metadata-service-uri=... bookies=...`
//     (with no bookies the list is empty: `bookies=` ends the line);
//   - AutoRecovery starts once the bookies are registered (so a restart
//     does not look like lost bookies), unless disabled; its id in the
//     auditor election and in locks is the HTTP admin address
//     127.0.0.1:<http port>;
//   - a restart from the same DIR keeps every ledger; stale registrations
//     of its own bookies (left by a crash) are removed at start; bookies
//     listen only after their journal replay;
//   - on ctx's end (SIGTERM, Ctrl-C) it stops AutoRecovery, then the
//     bookies (they deregister), then the HTTP server, then etcd, within
//     ShutdownTimeout;
//   - with TLSDir (`--tls-dir DIR`, tls.go) a local CA and its
//     certificates are generated in DIR once and reused on every restart;
//     etcd then serves only TLS clients with a certificate of that CA (the
//     URI is etcd+https://…), and the admin HTTP server serves https to
//     clients with such a certificate, as BookKeeper's does with
//     httpServerTlsEnable;
//   - /debug/pprof is served only with HTTPPprof.
package standalone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/freeport"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/pki"
	"github.com/foliodb/folio/internal/rereplication"
)

// Defaults of the standalone contract.
const (
	DefaultBookies         = 3
	DefaultDataDir         = "./folio-data"
	DefaultEtcdClientPort  = 2379
	DefaultEtcdPeerPort    = 2380
	DefaultBookiePortBase  = 3181
	DefaultHTTPPort        = 8080
	Host                   = "127.0.0.1"
	Scope                  = "/ledgers"
	DefaultShutdownTimeout = 10 * time.Second
	// ReadyPrefix starts the readiness line.
	ReadyPrefix = "folio standalone ready: "
	portsFile   = "ports.json"
)

// Config configures Run. Ports: a positive value is used as is; 0 means
// "free port, recorded in DataDir and reused".
type Config struct {
	Bookies        int
	DataDir        string
	EtcdClientPort int
	EtcdPeerPort   int
	// BookiePortBase: bookie i listens on BookiePortBase+i; with 0 each
	// bookie gets its own free port.
	BookiePortBase int
	HTTPPort       int

	// Stdout receives the readiness line (and nothing else).
	Stdout io.Writer
	// Logger receives logs (default slog.Default()); etcd logs to
	// DataDir/etcd/etcd.log.
	Logger *slog.Logger
	// ShutdownTimeout bounds the whole stop; default 10 s.
	ShutdownTimeout time.Duration
	// BookieSet are extra bookie configuration pairs (key=value), e.g.
	// gcWaitTime or zkTimeout for tests.
	BookieSet []string
	// OnReady, if set, is called once, right after the readiness line, with
	// what runs where (folio standalone prints it to stderr).
	OnReady func(Info)

	// AutoRecovery configures the embedded AutoRecovery daemon.
	AutoRecovery AutoRecoveryConfig

	// TLSDir, when set, secures the cluster with a local CA kept there
	// (tls.go).
	TLSDir string
	// HTTPPprof serves /debug/pprof on the admin HTTP server.
	HTTPPprof bool
}

// AutoRecoveryConfig configures the AutoRecovery run inside a standalone.
// Zero values take the autorecovery package's defaults.
type AutoRecoveryConfig struct {
	// Disabled: run no auditor and no workers.
	Disabled bool
	// Workers is the number of replication workers (default 1; < 0: none,
	// only the auditor).
	Workers int
	// LostBookieRecoveryDelay applies while none is stored in the metadata.
	LostBookieRecoveryDelay time.Duration
	// OpenLedgerRereplicationGracePeriod, BookieCheckInterval, SessionTTL
	// and PollInterval as in autorecovery.AuditorConfig/WorkerConfig.
	OpenLedgerRereplicationGracePeriod time.Duration
	BookieCheckInterval                time.Duration
	SessionTTL                         time.Duration
	PollInterval                       time.Duration
}

// Info describes a running standalone cluster.
type Info struct {
	// MetadataServiceURI is what clients and `folio shell` connect with.
	MetadataServiceURI string
	// EtcdClientAddr and EtcdPeerAddr are host:port of the embedded etcd.
	EtcdClientAddr, EtcdPeerAddr string
	// EtcdDataDir holds etcd's data; EtcdLogFile its log.
	EtcdDataDir, EtcdLogFile string
	// HTTPAddr is host:port of the admin HTTP server.
	HTTPAddr string
	// DataDir is the absolute data directory.
	DataDir string
	// Bookies are the bookies in order (bookie i is Bookies[i]); empty with
	// --bookies 0.
	Bookies []BookieInfo
	// AutoRecoveryID is the id of the embedded AutoRecovery in the auditor
	// election (whoisauditor) and in locks; "" when it is disabled.
	AutoRecoveryID string
	// AutoRecoveryWorkers is the number of replication workers running.
	AutoRecoveryWorkers int
	// HTTPScheme is "https" with TLS, else "http".
	HTTPScheme string
	// TLS is the local CA directory with TLSDir, else nil: clients
	// trust its CA and present its client certificate.
	TLS *pki.Dir
}

// BookieInfo is one bookie of a standalone cluster.
type BookieInfo struct {
	ID string
	// JournalDir and LedgerDir are the configured directories (the data is
	// in their current/ subdirectories).
	JournalDir, LedgerDir string
}

// ports is DataDir/ports.json: the ports picked for settings given as 0.
type ports struct {
	EtcdClient int   `json:"etcdClient,omitempty"`
	EtcdPeer   int   `json:"etcdPeer,omitempty"`
	HTTP       int   `json:"http,omitempty"`
	Bookies    []int `json:"bookies,omitempty"`
}

func loadPorts(dir string) (ports, error) {
	var p ports
	b, err := os.ReadFile(filepath.Join(dir, portsFile))
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", filepath.Join(dir, portsFile), err)
	}
	return p, nil
}

func savePorts(dir string, p ports) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, portsFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, portsFile))
}

// probePort binds host:port and releases it, returning the port; 0 takes
// a free port from package freeport (below the ephemeral range, so no
// outgoing connection of another process takes it before the bookie
// listens, and reserved for this process). An explicit busy port is an
// error naming what it is for.
func probePort(port int, what string) (int, error) {
	if port == 0 {
		p, err := freeport.Take()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		return p, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("%s port %d on %s is not available (a standalone keeps its ports: stop whatever holds it, or start from another --data-dir): %w", what, port, Host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pick resolves a port setting: explicit, else recorded, else free (and
// recorded by the caller).
func pick(flag, recorded int) int {
	if flag > 0 {
		return flag
	}
	return recorded
}

// Validate reports the first setting Run would refuse (a negative bookie
// count, a port out of range), without starting anything.
func (c Config) Validate() error { return c.withDefaults() }

func (c *Config) withDefaults() error {
	if c.Bookies < 0 {
		return fmt.Errorf("--bookies must be at least 0, not %d", c.Bookies)
	}
	if c.AutoRecovery.Workers == 0 {
		c.AutoRecovery.Workers = 1
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return err
	}
	c.DataDir = abs
	if c.TLSDir != "" {
		if c.TLSDir, err = filepath.Abs(c.TLSDir); err != nil {
			return err
		}
	}
	for _, p := range []int{c.EtcdClientPort, c.EtcdPeerPort, c.BookiePortBase, c.HTTPPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("port %d is not in 0..65535", p)
		}
	}
	if c.BookiePortBase > 0 && c.Bookies > 0 && c.BookiePortBase+c.Bookies-1 > 65535 {
		return fmt.Errorf("bookie ports %d..%d pass 65535", c.BookiePortBase, c.BookiePortBase+c.Bookies-1)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	return nil
}

// Run runs the standalone cluster until ctx ends (then stops it and returns
// nil) or something fails (then stops it and returns the error). Its steps,
// in order: reservePorts, startEtcd, openMetadata, startAdminHTTP,
// startBookies, waitWritable, startAutoRecovery, announceReady, supervise,
// and stop (which undoes whatever of them ran, also on a failed start).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.withDefaults(); err != nil {
		return err
	}
	c := &cluster{cfg: &cfg, log: cfg.Logger}
	if err := c.start(ctx); err != nil {
		stopErr := c.stop(ctx)
		if errors.Is(err, errStoppedBeforeReady) {
			return stopErr
		}
		return err
	}
	runErr := c.supervise(ctx)
	if err := c.stop(ctx); err != nil {
		c.log.Warn("standalone stopped uncleanly", "err", err)
	} else {
		c.log.Info("standalone stopped")
	}
	return runErr
}

// cluster is one run of Run: what each step started, for the later steps
// and for stop. Fields are set by one step and read after it, all on Run's
// goroutine, except bookies (read by the admin HTTP server's handler).
type cluster struct {
	cfg *Config
	log *slog.Logger

	rec          ports // the recorded ports (DataDir/ports.json)
	bookiePorts  []int
	sec          security
	httpLn       net.Listener // bound by reservePorts; served from startAdminHTTP
	etcdSrv      *embedetcd.Server
	uri          string
	md           metadata.Driver
	registry     *prometheus.Registry
	clusterAdmin *admin.HTTPCluster
	httpSrv      *http.Server // nil until startAdminHTTP
	procs        []*server.Process
	ar           *autorecovery.Service
	arID         metadata.BookieID

	bookiesMu sync.Mutex
	bookies   []*server.Process // guarded by bookiesMu: the admin server's targets
}

// start runs the start-up steps; on error, stop undoes what ran.
func (c *cluster) start(ctx context.Context) error {
	for _, step := range []func(context.Context) error{
		c.reservePorts, c.startEtcd, c.openMetadata, c.startAdminHTTP,
		c.startBookies, c.waitWritable, c.startAutoRecovery,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	c.announceReady()
	return nil
}

// reservePorts creates the data directory, loads the security settings and
// the recorded ports, probes the bookie ports (their identities), binds the
// admin HTTP listener, and records the ports picked.
func (c *cluster) reservePorts(context.Context) error {
	cfg := c.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create the data directory: %w", err)
	}
	var err error
	if c.rec, err = loadPorts(cfg.DataDir); err != nil {
		return err
	}
	if c.sec, err = loadSecurity(cfg); err != nil {
		return err
	}
	// Bookie ports first: they are the bookies' identities.
	c.bookiePorts = make([]int, cfg.Bookies)
	for i := range c.bookiePorts {
		want := 0
		if cfg.BookiePortBase > 0 {
			want = cfg.BookiePortBase + i
		} else if i < len(c.rec.Bookies) {
			want = c.rec.Bookies[i]
		}
		if c.bookiePorts[i], err = probePort(want, fmt.Sprintf("bookie %d", i)); err != nil {
			return err
		}
	}
	if cfg.BookiePortBase == 0 {
		// Keep the ports of bookies beyond cfg.Bookies recorded: a later
		// start with more bookies finds their data under the same ids.
		for i, p := range c.bookiePorts {
			if i < len(c.rec.Bookies) {
				c.rec.Bookies[i] = p
			} else {
				c.rec.Bookies = append(c.rec.Bookies, p)
			}
		}
	}
	// The HTTP listener (bound now, served once the bookies are up).
	port := pick(cfg.HTTPPort, c.rec.HTTP)
	if c.httpLn, err = net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(port))); err != nil {
		return fmt.Errorf("admin HTTP port %d on %s is not available: %w", port, Host, err)
	}
	if cfg.HTTPPort == 0 {
		c.rec.HTTP = c.httpLn.Addr().(*net.TCPAddr).Port
	}
	if err := savePorts(cfg.DataDir, c.rec); err != nil {
		return fmt.Errorf("record ports: %w", err)
	}
	return nil
}

// startEtcd starts the embedded etcd and records its ports.
func (c *cluster) startEtcd(ctx context.Context) error {
	cfg := c.cfg
	srv, err := embedetcd.Start(ctx, embedetcd.Config{
		DataDir:    filepath.Join(cfg.DataDir, "etcd"),
		ClientHost: Host, ClientPort: pick(cfg.EtcdClientPort, c.rec.EtcdClient),
		PeerHost: Host, PeerPort: pick(cfg.EtcdPeerPort, c.rec.EtcdPeer),
		PortAttempts: 1,
		ClientTLS:    c.sec.etcdTLS,
	})
	if err != nil {
		return fmt.Errorf("start the embedded etcd: %w", err)
	}
	c.etcdSrv = srv
	if cfg.EtcdClientPort == 0 {
		c.rec.EtcdClient = srv.ClientPort()
	}
	if cfg.EtcdPeerPort == 0 {
		c.rec.EtcdPeer = srv.PeerPort()
	}
	if err := savePorts(cfg.DataDir, c.rec); err != nil {
		return fmt.Errorf("record ports: %w", err)
	}
	c.uri = srv.MetadataURI(Scope)
	return nil
}

// openMetadata opens the standalone's metadata connection and initialises
// the cluster on first start.
func (c *cluster) openMetadata(ctx context.Context) error {
	md, err := metadata.Open(ctx, c.uri, metadata.Options{Security: c.sec.metadata})
	if err != nil {
		return fmt.Errorf("open the metadata store %s: %w", c.uri, err)
	}
	c.md = md
	switch _, err := md.InitNewCluster(ctx); {
	case err == nil:
		c.log.Info("initialised a new cluster", "metadataServiceUri", c.uri)
	case errors.Is(err, metadata.ErrClusterExists):
	default:
		return fmt.Errorf("initialise the cluster at %s: %w", c.uri, err)
	}
	return nil
}

// startAdminHTTP serves the admin HTTP server, over whichever bookies are
// up, on the listener reservePorts bound. Its goroutine ends when stop
// shuts the server down.
func (c *cluster) startAdminHTTP(context.Context) error {
	c.registry = prometheus.NewRegistry()
	c.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The cluster routes (ledger/*, autorecovery/*) over the standalone's
	// own metadata connection, with a client made at first use.
	uri, log, mdTLS := c.uri, c.log, c.sec.metadata.TLS
	c.clusterAdmin = admin.NewHTTPCluster(c.md, func(ctx context.Context) (*client.Client, error) {
		return client.New(ctx, client.Config{MetadataServiceURI: uri, Logger: log, MetadataTLS: mdTLS})
	}, rereplication.NewBookies(0, log), log)
	c.httpSrv = server.NewAdminServer(server.NewAdminHandler(c.registry, func() []server.AdminTarget {
		c.bookiesMu.Lock()
		defer c.bookiesMu.Unlock()
		out := make([]server.AdminTarget, 0, len(c.bookies))
		for _, b := range c.bookies {
			out = append(out, b)
		}
		return out
	}, server.AdminOptions{Pprof: c.cfg.HTTPPprof, Metadata: c.md, Cluster: c.clusterAdmin}), c.sec.httpTLS)
	srv, ln := c.httpSrv, c.httpLn
	go func() {
		if err := server.ServeAdmin(srv, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin HTTP server failed", "err", err)
		}
	}()
	return nil
}

// startBookies starts the bookies in parallel (each replays its journal
// before it listens). Those that started are kept for stop even when
// another failed.
func (c *cluster) startBookies(ctx context.Context) error {
	n := c.cfg.Bookies
	type started struct {
		i   int
		p   *server.Process
		err error
	}
	results := make(chan started, n)
	for i := range n {
		go func() {
			bcfg, err := bookieConfig(c.cfg, i, c.bookiePorts[i], c.uri, c.sec)
			if err != nil {
				results <- started{i, nil, err}
				return
			}
			p, err := server.StartProcess(ctx, bcfg, server.ProcessOptions{
				Logger: c.log, Driver: c.md, Registry: c.registry, LabelMetrics: true,
				NoHTTP: true, RemoveStaleRegistration: true,
			})
			results <- started{i, p, err}
		}()
	}
	var errs []error
	procs := make([]*server.Process, n)
	for range n {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("bookie %d (port %d): %w", r.i, c.bookiePorts[r.i], r.err))
			continue
		}
		procs[r.i] = r.p
		c.bookiesMu.Lock()
		c.bookies = append(c.bookies, r.p)
		c.bookiesMu.Unlock()
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.procs = procs
	c.bookiesMu.Lock()
	c.bookies = procs // in bookie order
	c.bookiesMu.Unlock()
	return nil
}

// errStoppedBeforeReady: ctx ended while Run waited for the bookies to
// register; Run stops and returns nil, as when ctx ends later.
var errStoppedBeforeReady = errors.New("stopped before the bookies registered")

// waitWritable waits until every bookie is registered writable.
func (c *cluster) waitWritable(ctx context.Context) error {
	err := waitWritable(ctx, c.md, c.procs)
	if err != nil && ctx.Err() != nil {
		return errStoppedBeforeReady
	}
	return err
}

// startAutoRecovery starts AutoRecovery (unless disabled) once the bookies
// are registered, under the admin HTTP address as its id.
func (c *cluster) startAutoRecovery(ctx context.Context) error {
	c.arID = metadata.BookieID(c.httpLn.Addr().String())
	if c.cfg.AutoRecovery.Disabled {
		return nil
	}
	ar, err := startAutoRecovery(ctx, c.cfg, c.md, c.uri, c.sec, c.arID)
	if err != nil {
		return fmt.Errorf("start AutoRecovery: %w", err)
	}
	c.ar = ar
	return nil
}

// announceReady writes the readiness line and calls OnReady.
func (c *cluster) announceReady() {
	cfg := c.cfg
	ids := make([]string, len(c.procs))
	for i, p := range c.procs {
		ids[i] = string(p.ID())
	}
	fmt.Fprintf(cfg.Stdout, "%smetadata-service-uri=%s bookies=%s\n", ReadyPrefix, c.uri, strings.Join(ids, ","))
	c.log.Info("standalone ready", "metadataServiceUri", c.uri, "bookies", ids, "http", c.httpLn.Addr().String())
	if cfg.OnReady == nil {
		return
	}
	info := Info{
		MetadataServiceURI: c.uri,
		EtcdClientAddr:     c.etcdSrv.ClientAddr(),
		EtcdPeerAddr:       net.JoinHostPort(Host, strconv.Itoa(c.etcdSrv.PeerPort())),
		EtcdDataDir:        c.etcdSrv.DataDir(),
		EtcdLogFile:        c.etcdSrv.LogFile(),
		HTTPAddr:           c.httpLn.Addr().String(),
		DataDir:            cfg.DataDir,
		HTTPScheme:         "http",
		TLS:                c.sec.dir,
	}
	if c.sec.httpTLS != nil {
		info.HTTPScheme = "https"
	}
	if c.ar != nil {
		info.AutoRecoveryID, info.AutoRecoveryWorkers = string(c.arID), c.ar.Workers()
	}
	for i, id := range ids {
		d := bookieDir(cfg, i)
		info.Bookies = append(info.Bookies, BookieInfo{ID: id, JournalDir: filepath.Join(d, "journal"), LedgerDir: filepath.Join(d, "ledgers")})
	}
	cfg.OnReady(info)
}

// supervise waits until ctx ends (nil) or a part fails: a bookie, the
// AutoRecovery service or the embedded etcd (that part's error).
func (c *cluster) supervise(ctx context.Context) error {
	var watch []func(context.Context) error
	if ar := c.ar; ar != nil {
		watch = append(watch, func(ctx context.Context) error {
			select {
			case err := <-ar.Failed():
				return fmt.Errorf("AutoRecovery: %w", err)
			case <-ctx.Done():
				return nil
			}
		})
	}
	for _, p := range c.procs {
		watch = append(watch, func(ctx context.Context) error {
			select {
			case <-p.Failed():
				return fmt.Errorf("bookie %s: %w", p.ID(), p.Err())
			case <-ctx.Done():
				return nil
			}
		})
	}
	etcdErr := c.etcdSrv.Err()
	watch = append(watch, func(ctx context.Context) error {
		select {
		case e, ok := <-etcdErr:
			if !ok || e == nil {
				e = errors.New("stopped")
			}
			return fmt.Errorf("embedded etcd: %w", e)
		case <-ctx.Done():
			return nil
		}
	})
	err := supervise(ctx, watch)
	if err == nil {
		c.log.Info("standalone stopping")
	}
	return err
}

// supervise runs each watch on its own goroutine until one returns an error
// (the first is returned) or ctx ends (nil). A watch blocks until its part
// fails, returning why, or until its context ends, returning nil. Every
// goroutine has ended when supervise returns, whichever way it returns.
func supervise(ctx context.Context, watch []func(context.Context) error) error {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	failed := make(chan error, len(watch))
	for _, w := range watch {
		wg.Go(func() {
			if err := w(wctx); err != nil {
				failed <- err
			}
		})
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// stop stops whatever the start-up steps started, in reverse order:
// AutoRecovery first, then the bookies (they deregister), then the admin
// HTTP server, then the metadata connection and etcd, within
// ShutdownTimeout.
func (c *cluster) stop(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout-time.Second)
	defer cancel()
	if c.ar != nil {
		if err := c.ar.Stop(sctx); err != nil {
			c.log.Warn("AutoRecovery stopped uncleanly", "err", err)
		}
	}
	c.bookiesMu.Lock()
	bs := slices.Clone(c.bookies)
	c.bookiesMu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(bs))
	for i, b := range bs {
		wg.Go(func() { errs[i] = b.Shutdown(sctx) })
	}
	wg.Wait()
	switch {
	case c.httpSrv != nil:
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
		_ = c.httpSrv.Shutdown(hctx)
		hcancel()
	case c.httpLn != nil:
		c.httpLn.Close()
	}
	if c.clusterAdmin != nil {
		errs = append(errs, c.clusterAdmin.Close())
	}
	if c.md != nil {
		errs = append(errs, c.md.Close())
	}
	if c.etcdSrv != nil {
		errs = append(errs, c.etcdSrv.Close())
	}
	return errors.Join(errs...)
}

// bookieDir is bookie i's directory.
func bookieDir(cfg *Config, i int) string {
	return filepath.Join(cfg.DataDir, fmt.Sprintf("bookie-%d", i))
}

// bookieConfig is the configuration of bookie i.
func bookieConfig(cfg *Config, i, port int, uri string, sec security) (server.Config, error) {
	bc := server.DefaultConfig()
	dir := bookieDir(cfg, i)
	bc.BookiePort = port
	bc.ListenHost = Host
	bc.AdvertisedAddress = Host
	bc.AllowLoopback = true
	bc.JournalDirs = []string{filepath.Join(dir, "journal")}
	bc.LedgerDirs = []string{filepath.Join(dir, "ledgers")}
	bc.MetadataServiceURI = uri
	bc.MetadataSecurity = sec.bookieMetadata
	bc.HTTPServerEnabled = false
	bc.ShutdownTimeout = max(cfg.ShutdownTimeout/2, time.Second)
	for _, kv := range append(slices.Clone(sec.bookieSettings), cfg.BookieSet...) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return bc, fmt.Errorf("bookie setting %q: want key=value", kv)
		}
		if err := bc.SetFrom(strings.TrimSpace(k), v, "--bookie-set"); err != nil {
			return bc, err
		}
	}
	if err := bc.CheckKeys(cfg.Logger); err != nil {
		return bc, err
	}
	return bc, bc.Validate()
}

// waitWritable waits until every bookie is registered writable in the
// metadata store.
func waitWritable(ctx context.Context, md metadata.Driver, procs []*server.Process) error {
	for _, p := range procs {
		select {
		case <-p.Registered():
		case <-p.Failed():
			return fmt.Errorf("bookie %s: %w", p.ID(), p.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		w, err := md.WritableBookies(ctx)
		if err != nil {
			return fmt.Errorf("list writable bookies: %w", err)
		}
		all := true
		for _, p := range procs {
			all = all && slices.Contains(w, p.ID())
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startAutoRecovery starts the auditor candidate and the workers under id.
func startAutoRecovery(ctx context.Context, cfg *Config, md metadata.Driver, uri string, sec security, id metadata.BookieID) (*autorecovery.Service, error) {
	c := cfg.AutoRecovery
	return autorecovery.StartService(ctx, autorecovery.ServiceConfig{
		Driver: md, MetadataServiceURI: uri, MetadataSecurity: sec.metadata, BookieTLS: sec.bookieClientTLS, ID: id, Workers: c.Workers,
		Logger: cfg.Logger.With("component", "autorecovery"),
		Auditor: autorecovery.AuditorConfig{SessionTTL: c.SessionTTL, LostBookieRecoveryDelay: c.LostBookieRecoveryDelay,
			BookieCheckInterval: c.BookieCheckInterval},
		Worker: autorecovery.WorkerConfig{SessionTTL: c.SessionTTL, OpenLedgerRereplicationGracePeriod: c.OpenLedgerRereplicationGracePeriod,
			PollInterval: c.PollInterval},
	})
}
