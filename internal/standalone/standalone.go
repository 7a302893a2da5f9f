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
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/embedetcd"
	"github.com/foliodb/folio/internal/pki"
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

// probePort binds host:port (0: any free port) and releases it, returning
// the port. An explicit busy port is an error naming what it is for.
func probePort(port int, what string) (int, error) {
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
// nil) or something fails (then stops it and returns the error).
func Run(ctx context.Context, cfg Config) (err error) {
	if err := cfg.withDefaults(); err != nil {
		return err
	}
	log := cfg.Logger
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create the data directory: %w", err)
	}
	rec, err := loadPorts(cfg.DataDir)
	if err != nil {
		return err
	}
	sec, err := loadSecurity(&cfg)
	if err != nil {
		return err
	}

	// Bookie ports first: they are the bookies' identities.
	bookiePorts := make([]int, cfg.Bookies)
	for i := range bookiePorts {
		want := 0
		if cfg.BookiePortBase > 0 {
			want = cfg.BookiePortBase + i
		} else if i < len(rec.Bookies) {
			want = rec.Bookies[i]
		}
		if bookiePorts[i], err = probePort(want, fmt.Sprintf("bookie %d", i)); err != nil {
			return err
		}
	}
	if cfg.BookiePortBase == 0 {
		// Keep the ports of bookies beyond cfg.Bookies recorded: a later
		// start with more bookies finds their data under the same ids.
		for i, p := range bookiePorts {
			if i < len(rec.Bookies) {
				rec.Bookies[i] = p
			} else {
				rec.Bookies = append(rec.Bookies, p)
			}
		}
	}
	// The HTTP listener (bound now, served once the bookies are up).
	httpLn, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(pick(cfg.HTTPPort, rec.HTTP))))
	if err != nil {
		return fmt.Errorf("admin HTTP port %d on %s is not available: %w", pick(cfg.HTTPPort, rec.HTTP), Host, err)
	}
	defer func() {
		if err != nil {
			httpLn.Close()
		}
	}()
	if cfg.HTTPPort == 0 {
		rec.HTTP = httpLn.Addr().(*net.TCPAddr).Port
	}
	if err := savePorts(cfg.DataDir, rec); err != nil {
		return fmt.Errorf("record ports: %w", err)
	}

	// etcd.
	etcdSrv, err := embedetcd.Start(ctx, embedetcd.Config{
		DataDir:    filepath.Join(cfg.DataDir, "etcd"),
		ClientHost: Host, ClientPort: pick(cfg.EtcdClientPort, rec.EtcdClient),
		PeerHost: Host, PeerPort: pick(cfg.EtcdPeerPort, rec.EtcdPeer),
		PortAttempts: 1,
		ClientTLS:    sec.etcdTLS,
	})
	if err != nil {
		return fmt.Errorf("start the embedded etcd: %w", err)
	}
	defer func() {
		if err != nil {
			etcdSrv.Close()
		}
	}()
	if cfg.EtcdClientPort == 0 {
		rec.EtcdClient = etcdSrv.ClientPort()
	}
	if cfg.EtcdPeerPort == 0 {
		rec.EtcdPeer = etcdSrv.PeerPort()
	}
	if err := savePorts(cfg.DataDir, rec); err != nil {
		return fmt.Errorf("record ports: %w", err)
	}
	uri := etcdSrv.MetadataURI(Scope)
	md, err := metadata.Open(ctx, uri, metadata.Options{Security: sec.metadata})
	if err != nil {
		return fmt.Errorf("open the metadata store %s: %w", uri, err)
	}
	defer func() {
		if err != nil {
			md.Close()
		}
	}()
	switch _, err := md.InitNewCluster(ctx); {
	case err == nil:
		log.Info("initialised a new cluster", "metadataServiceUri", uri)
	case errors.Is(err, metadata.ErrClusterExists):
	default:
		return fmt.Errorf("initialise the cluster at %s: %w", uri, err)
	}

	// The admin HTTP server, over whichever bookies are up.
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var bookiesMu sync.Mutex
	var bookies []*server.Process
	// The cluster routes (ledger/*, autorecovery/*) over the standalone's
	// own metadata connection, with a client made at first use.
	clusterAdmin := admin.NewHTTPCluster(md, func(ctx context.Context) (*client.Client, error) {
		return client.New(ctx, client.Config{MetadataServiceURI: uri, Logger: log, MetadataTLS: sec.metadata.TLS})
	}, admin.NewBookies(0, log), log)
	defer func() {
		if err != nil {
			clusterAdmin.Close()
		}
	}()
	httpSrv := server.NewAdminServer(server.NewAdminHandler(registry, func() []server.AdminTarget {
		bookiesMu.Lock()
		defer bookiesMu.Unlock()
		out := make([]server.AdminTarget, 0, len(bookies))
		for _, b := range bookies {
			out = append(out, b)
		}
		return out
	}, server.AdminOptions{Pprof: cfg.HTTPPprof, Metadata: md, Cluster: clusterAdmin}), sec.httpTLS)
	go func() {
		if err := server.ServeAdmin(httpSrv, httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin HTTP server failed", "err", err)
		}
	}()

	// AutoRecovery, started once the bookies are registered; stopped first.
	var ar *autorecovery.Service
	stopAll := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout-time.Second)
		defer cancel()
		if ar != nil {
			if err := ar.Stop(sctx); err != nil {
				log.Warn("AutoRecovery stopped uncleanly", "err", err)
			}
		}
		bookiesMu.Lock()
		bs := slices.Clone(bookies)
		bookiesMu.Unlock()
		var wg sync.WaitGroup
		errs := make([]error, len(bs))
		for i, b := range bs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = b.Shutdown(sctx) }()
		}
		wg.Wait()
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
		_ = httpSrv.Shutdown(hctx)
		hcancel()
		errs = append(errs, clusterAdmin.Close(), md.Close(), etcdSrv.Close())
		return errors.Join(errs...)
	}

	// The bookies, in parallel (each replays its journal before it listens).
	type started struct {
		i   int
		p   *server.Process
		err error
	}
	results := make(chan started, cfg.Bookies)
	for i := range cfg.Bookies {
		go func() {
			bcfg, err := bookieConfig(&cfg, i, bookiePorts[i], uri, sec)
			if err != nil {
				results <- started{i, nil, err}
				return
			}
			p, err := server.StartProcess(ctx, bcfg, server.ProcessOptions{
				Logger: log, Driver: md, Registry: registry, LabelMetrics: true,
				NoHTTP: true, RemoveStaleRegistration: true,
			})
			results <- started{i, p, err}
		}()
	}
	var startErrs []error
	procs := make([]*server.Process, cfg.Bookies)
	for range cfg.Bookies {
		r := <-results
		if r.err != nil {
			startErrs = append(startErrs, fmt.Errorf("bookie %d (port %d): %w", r.i, bookiePorts[r.i], r.err))
			continue
		}
		procs[r.i] = r.p
		bookiesMu.Lock()
		bookies = append(bookies, r.p)
		bookiesMu.Unlock()
	}
	if len(startErrs) > 0 {
		_ = stopAll()
		return errors.Join(startErrs...)
	}
	bookiesMu.Lock()
	bookies = procs // in bookie order
	bookiesMu.Unlock()

	// Ready once every bookie is registered writable.
	ids := make([]string, len(procs))
	for i, p := range procs {
		ids[i] = string(p.ID())
	}
	if err := waitWritable(ctx, md, procs); err != nil {
		if ctx.Err() != nil {
			return stopAll()
		}
		_ = stopAll()
		return err
	}
	arID := metadata.BookieID(httpLn.Addr().String())
	if !cfg.AutoRecovery.Disabled {
		if ar, err = startAutoRecovery(ctx, &cfg, md, uri, sec, arID); err != nil {
			_ = stopAll()
			return fmt.Errorf("start AutoRecovery: %w", err)
		}
	}
	fmt.Fprintf(cfg.Stdout, "%smetadata-service-uri=%s bookies=%s\n", ReadyPrefix, uri, strings.Join(ids, ","))
	log.Info("standalone ready", "metadataServiceUri", uri, "bookies", ids, "http", httpLn.Addr().String())
	if cfg.OnReady != nil {
		info := Info{
			MetadataServiceURI: uri,
			EtcdClientAddr:     etcdSrv.ClientAddr(),
			EtcdPeerAddr:       net.JoinHostPort(Host, strconv.Itoa(etcdSrv.PeerPort())),
			EtcdDataDir:        etcdSrv.DataDir(),
			EtcdLogFile:        etcdSrv.LogFile(),
			HTTPAddr:           httpLn.Addr().String(),
			DataDir:            cfg.DataDir,
			HTTPScheme:         "http",
			TLS:                sec.dir,
		}
		if sec.httpTLS != nil {
			info.HTTPScheme = "https"
		}
		if ar != nil {
			info.AutoRecoveryID, info.AutoRecoveryWorkers = string(arID), ar.Workers()
		}
		for i, id := range ids {
			d := bookieDir(&cfg, i)
			info.Bookies = append(info.Bookies, BookieInfo{ID: id, JournalDir: filepath.Join(d, "journal"), LedgerDir: filepath.Join(d, "ledgers")})
		}
		cfg.OnReady(info)
	}

	// Run until stopped or a part fails.
	failed := make(chan error, len(procs)+2)
	if ar != nil {
		go func() {
			select {
			case err := <-ar.Failed():
				failed <- fmt.Errorf("AutoRecovery: %w", err)
			case <-ctx.Done():
			}
		}()
	}
	for _, p := range procs {
		go func() {
			select {
			case <-p.Failed():
				failed <- fmt.Errorf("bookie %s: %w", p.ID(), p.Err())
			case <-ctx.Done():
			}
		}()
	}
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("standalone stopping")
	case runErr = <-failed:
	case e, ok := <-etcdSrv.Err():
		if !ok || e == nil {
			e = errors.New("stopped")
		}
		runErr = fmt.Errorf("embedded etcd: %w", e)
	}
	if err := stopAll(); err != nil {
		log.Warn("standalone stopped uncleanly", "err", err)
	} else {
		log.Info("standalone stopped")
	}
	return runErr
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
