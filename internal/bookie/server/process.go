package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/freeport"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/wire"
	// The metadata drivers a metadataServiceUri can name.
	_ "github.com/foliodb/folio/internal/metadata/etcd"
	_ "github.com/foliodb/folio/internal/metadata/zk"
)

// ProcessOptions are what a bookie process takes besides its Config.
type ProcessOptions struct {
	// Logger receives the process's logs; default slog.Default().
	Logger *slog.Logger
	// Driver, if set, is the metadata store to use (shared by the bookies
	// of a standalone process); the process does not close it. Nil: open
	// Config.MetadataServiceURI.
	Driver metadata.Driver
	// Registry receives the bookie's metrics. Nil: a new registry, with
	// the Go runtime and process collectors, served by the process's own
	// HTTP server.
	Registry *prometheus.Registry
	// LabelMetrics adds the constant label bookie="<id>" to every metric
	// (several bookies in one registry).
	LabelMetrics bool
	// NoHTTP: do not start an HTTP server even if the Config enables one
	// (standalone runs one for all its bookies).
	NoHTTP bool
	// RemoveStaleRegistration: see RegistrarOptions.RemoveStale.
	RemoveStaleRegistration bool
	// Clock drives the background loops and the bookie's long-poll
	// timeOuts; default clock.Real. (The storage engine keeps the system
	// clock.)
	Clock clock.Clock
	// FS, if set, is the file system of the bookie's storage instead of
	// the OS's (tests: a wrapper reporting a directory full; the cookies
	// are read and written on the OS's).
	FS vfs.FS
	// ClusterAdmin, if set, makes the admin HTTP server's cluster
	// operations (ledger/read, ledger/delete, autorecovery/bookie, ...)
	// from the process's metadata store; the process closes it (when it
	// is an io.Closer) at shutdown. Nil: those routes answer 503.
	ClusterAdmin func(md metadata.Driver) (ClusterAdmin, error)
}

// Process is one running bookie: storage, request semantics, the TCP
// listener, registration, read-only state, garbage collection and the admin
// HTTP server. StartProcess brings it up in this order:
//
//	metadata store → bookie id → cookie check → storage open (journal
//	replay) → bookie → read-only check → listener → address free of other
//	registrations (waitAddressFree) → registration → GC,
//	disk checks → HTTP
//
// so that it listens only after journal replay and registers only once it
// serves. Shutdown reverses it (see there).
type Process struct {
	// stopServeWait ends waitAddressFree; serveWaited is closed once it
	// has returned (and, if it failed, the listener is closed).
	stopServeWait context.CancelFunc
	serveWaited   chan struct{}

	cfg Config
	sec Security
	id  metadata.BookieID
	// cookieLock is held for the process's life (CookieLockFile).
	cookieLock io.Closer
	log        *slog.Logger
	md         metadata.Driver
	ownMD      bool
	store      storage.Store
	closeSt    func(context.Context) error
	bk         *bookie.Bookie
	srv        *Server
	ln         net.Listener
	reg        *Registrar
	state      *StateManager
	gc         *GC
	metrics    *PrometheusMetrics
	registry   *prometheus.Registry
	inflight   prometheus.Collector
	storageC   prometheus.Collector
	http       *http.Server
	httpLn     net.Listener
	cluster    ClusterAdmin
	stats      *metricsServer // the Prometheus provider's listener, if any

	cancelLoops context.CancelFunc
	loops       sync.WaitGroup

	failed   chan struct{} // closed on a fatal error (see Failed)
	failOnce sync.Once
	failErr  error

	mu struct {
		sync.Mutex
		shuttingDown bool
	}
	shutdownOnce sync.Once
	shutdownErr  error
}

// StartProcess starts a bookie. On error everything started is stopped
// again. A *CookieError means the bookie must not start (see CheckCookies).
// The configuration, its security files included (LoadSecurity), is
// checked before anything is contacted or opened. The steps, in the order
// of Process's comment: openMetadata, resolveID, checkCookies,
// registerMetrics, openStorage, newBookie, listen, startLoops, startHTTP.
func StartProcess(ctx context.Context, cfg Config, opts ProcessOptions) (_ *Process, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sec, err := cfg.LoadSecurity()
	if err != nil {
		return nil, err
	}
	p := &Process{cfg: cfg, sec: sec, log: opts.Logger, failed: make(chan struct{})}
	if p.log == nil {
		p.log = slog.Default()
	}
	s := &processStart{p: p, cfg: &cfg, opts: opts, clock: opts.Clock}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	// TLS and authorisation first: nothing starts if they cannot.
	if s.serverTLS, s.authorizer, err = cfg.Security.ServerTLS(s.clock, p.log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.undo()
		}
	}()
	for _, step := range []func(context.Context) error{
		s.openMetadata, s.resolveID, s.checkCookies, s.registerMetrics, s.openStorage,
		s.newBookie, s.listen, s.startLoops, s.startHTTP,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	p.log.Info("bookie started", "addr", p.ln.Addr().String(), "http", p.HTTPAddr(), "tls", s.serverTLS != nil, "authorizer", s.authorizer != nil)
	return p, nil
}

// processStart is one StartProcess call: what its steps share, and the
// cleanups that undo the steps done if a later one fails.
type processStart struct {
	p     *Process
	cfg   *Config
	opts  ProcessOptions
	clock clock.Clock

	serverTLS  *tls.Config
	authorizer Authorizer
	port       int    // the bookie port, resolved when configured as 0
	addr       string // host:port the bookie registers
	labels     prometheus.Labels

	cleanups []func()
}

// undo runs the cleanups, last first.
func (s *processStart) undo() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// openMetadata opens the metadata store unless the owner passed a driver.
func (s *processStart) openMetadata(ctx context.Context) error {
	p := s.p
	p.md = s.opts.Driver
	if p.md != nil {
		return nil
	}
	d, err := metadata.Open(ctx, s.cfg.MetadataServiceURI, metadata.Options{Logger: p.log, Security: p.sec.Metadata})
	if err != nil {
		return fmt.Errorf("open the metadata store %s: %w", s.cfg.MetadataServiceURI, err)
	}
	p.md, p.ownMD = d, true
	s.cleanups = append(s.cleanups, func() { d.Close() })
	return nil
}

// resolveID resolves the bookie id. A port of 0 (tests) is resolved now:
// the id, and so the cookie, need it before the listener may exist.
func (s *processStart) resolveID(context.Context) error {
	p := s.p
	s.port = s.cfg.BookiePort
	if s.port == 0 {
		var err error
		if s.port, err = freePort(s.cfg.ListenHost); err != nil {
			return err
		}
	}
	var err error
	if p.id, err = s.cfg.BookieID(s.port); err != nil {
		return err
	}
	p.log = p.log.With("bookie", string(p.id))
	return nil
}

func (s *processStart) checkCookies(ctx context.Context) error {
	p, cfg := s.p, s.cfg
	// Held for the process's life (see CookieLockFile): no other start and
	// no offline cookie operation rewrites the cookies under this bookie.
	lock, err := LockCookies(cfg)
	if err != nil {
		return err
	}
	p.cookieLock = lock
	s.cleanups = append(s.cleanups, func() { _ = lock.Close() })
	cookies, err := ValidateCookies(ctx, p.md, cfg, p.id, CookieOptions{AllowExpansion: cfg.AllowStorageExpansion})
	if err != nil {
		return err
	}
	switch {
	case cookies.Created:
		p.log.Info("new bookie: cookies written", "dirs", cfg.AllDirs())
	case len(cookies.Added) > 0:
		p.log.Info("storage expansion: the cookies now list the added directories (allowStorageExpansion=true)", "added", cookies.Added)
	}
	if len(cookies.RolledBack) > 0 {
		p.log.Warn("directories carried the cookie of a storage expansion the metadata store never committed (interrupted, and the configuration no longer adds its directories): their cookie is the stored one again",
			"dirs", cookies.RolledBack)
	}
	if len(cfg.IndexDirs) > 0 {
		p.log.Warn("indexDirectories are stamped with cookies but unused: Folio keeps the index in the ledger directories")
	}
	return nil
}

// registerMetrics registers the bookie's metrics in the owner's registry,
// or in a registry of its own.
func (s *processStart) registerMetrics(context.Context) error {
	p := s.p
	p.registry = s.opts.Registry
	if p.registry == nil {
		p.registry = prometheus.NewRegistry()
		p.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if s.opts.LabelMetrics {
		s.labels = prometheus.Labels{"bookie": string(p.id)}
	}
	var err error
	if p.metrics, err = NewPrometheusMetrics(p.registry, s.labels, s.cfg.Stats.LatencyRollover); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	s.cleanups = append(s.cleanups, func() { p.metrics.Unregister(p.registry) })
	return nil
}

// openStorage opens the storage; the journal replay happens here.
func (s *processStart) openStorage(context.Context) error {
	p := s.p
	openStart := time.Now()
	var err error
	if p.store, p.closeSt, err = openStore(s.cfg, p.log, p.metrics, s.opts.FS); err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	s.cleanups = append(s.cleanups, func() { _ = p.closeSt(context.Background()) })
	p.log.Info("storage open", "took", time.Since(openStart).Round(time.Millisecond))
	return nil
}

// newBookie builds the registrar, the bookie over the storage and the
// read-only state manager, and checks the disks once so that the first
// registration has the right mode.
func (s *processStart) newBookie(context.Context) error {
	p, cfg := s.p, s.cfg
	// Registration follows the bookie's effective read-only state.
	var err error
	if s.addr, err = cfg.BookieAddress(s.port); err != nil {
		return err
	}
	info, err := serviceInfo(cfg, s.addr, s.opts.NoHTTP)
	if err != nil {
		return err
	}
	p.reg = NewRegistrar(p.md, p.id, cfg.ForceReadOnly || cfg.ForceReadOnlyBookie, RegistrarOptions{
		SessionTTL: cfg.SessionTTL, Retry: cfg.RegistrationRetry, RemoveStale: s.opts.RemoveStaleRegistration,
		Clock: s.clock, Logger: p.log, ServiceInfo: &info,
	})
	if p.bk, err = bookie.New(p.store, bookie.Config{
		// A batch read's answer must fit the frames this bookie sends.
		MaxBatchReadSize: int64(min(cfg.MaxFrameSize, wire.MaxFrameSize)),
		RejectBatchRead:  cfg.RejectBatchRead,
		Clock:            s.clock,
		Logger:           p.log,
		Metrics:          p.metrics,
		OnReadOnlyChange: p.reg.SetReadOnly,
	}); err != nil {
		return err
	}
	s.cleanups = append(s.cleanups, p.bk.Close)
	p.metrics.ReadOnlyChanged(false)
	p.inflight = newInFlightCollector(p.bk, s.labels)
	if err := p.registry.Register(p.inflight); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	s.cleanups = append(s.cleanups, func() { p.registry.Unregister(p.inflight) })

	p.state = NewStateManager(p.store, cfg, cfg.ForceReadOnly, s.clock, p.log, func(ro bool) {
		p.bk.SetReadOnly(ro)
		f, d, s := p.state.causesLocked()
		p.metrics.setReadOnlyCauses(f, d, s)
	}, p.fail)
	if cc, _ := p.store.(compactionControl); cc != nil {
		p.state.OnDiskFull(cc.SetNoSpace)
	}
	p.state.Check() // the first registration then has the right mode
	p.storageC = newStorageCollector(p, s.labels)
	if err := p.registry.Register(p.storageC); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	s.cleanups = append(s.cleanups, func() { p.registry.Unregister(p.storageC) })
	return nil
}

// listen opens the listener, now that the journal has been replayed, and
// serves it once no other bookie's registration names this address.
func (s *processStart) listen(ctx context.Context) error {
	p, cfg := s.p, s.cfg
	var err error
	p.ln, err = net.Listen("tcp", net.JoinHostPort(cfg.ListenHost, strconv.Itoa(s.port)))
	if err != nil {
		return fmt.Errorf("listen on port %d for bookie %s: %w", s.port, p.id, err)
	}
	s.cleanups = append(s.cleanups, func() { p.ln.Close() })
	p.srv = New(p.bk, Options{Logger: p.log, Metrics: p.metrics, TLS: s.serverTLS, Authorizer: s.authorizer, MaxFrameSize: cfg.MaxFrameSize})
	serveCtx, stopServeWait := context.WithCancel(context.WithoutCancel(ctx))
	p.stopServeWait, p.serveWaited = stopServeWait, make(chan struct{})
	addr, retry := s.addr, cfg.RegistrationRetry
	go func() {
		// Connections wait in the listen backlog until no other bookie's
		// registration names this address (waitAddressFree).
		err := waitAddressFree(serveCtx, p.md, p.id, addr, retry, s.clock, p.log)
		if err != nil {
			p.ln.Close() // stopping before serving: Serve would have closed it
			close(p.serveWaited)
			return
		}
		close(p.serveWaited)
		if err := p.srv.Serve(p.ln); err != nil && !errors.Is(err, ErrServerClosed) {
			p.fail(fmt.Errorf("bookie listener: %w", err))
		}
	}()
	s.cleanups = append(s.cleanups, func() { p.stopServing(context.Background()) })
	return nil
}

// startLoops starts the background loops: registration (once serving),
// the read-only state checks and garbage collection.
func (s *processStart) startLoops(ctx context.Context) error {
	p := s.p
	p.gc = NewGC(p.store, p.md, s.cfg.GCWaitTime, s.clock, p.log)
	p.gc.onPass = p.metrics.gcPass
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancelLoops = cancel
	p.loops.Add(3)
	go func() {
		defer p.loops.Done()
		// Registered only once serving: a registration would have clients
		// pick this bookie while nothing answers (waitAddressFree).
		select {
		case <-p.serveWaited:
		case <-loopCtx.Done():
			return
		}
		p.reg.Run(loopCtx)
	}()
	go func() { defer p.loops.Done(); p.state.Run(loopCtx) }()
	go func() { defer p.loops.Done(); p.gc.Run(loopCtx) }()
	s.cleanups = append(s.cleanups, func() { cancel(); p.loops.Wait(); _ = p.reg.Deregister(context.Background()) })
	return nil
}

// startHTTP starts the admin HTTP server or, without it, BookKeeper's
// Prometheus provider's metrics listener when configured (StatsConfig).
func (s *processStart) startHTTP(context.Context) error {
	p, cfg := s.p, s.cfg
	if cfg.HTTPServerEnabled && !s.opts.NoHTTP {
		var err error
		p.httpLn, err = net.Listen("tcp", net.JoinHostPort(cfg.HTTPServerHost, strconv.Itoa(cfg.HTTPServerPort)))
		if err != nil {
			return fmt.Errorf("admin HTTP server on port %d: %w", cfg.HTTPServerPort, err)
		}
		hopts := p.sec.HTTP
		hopts.Metadata = p.md
		if s.opts.ClusterAdmin != nil {
			if p.cluster, err = s.opts.ClusterAdmin(p.md); err != nil {
				return fmt.Errorf("admin HTTP server: %w", err)
			}
			s.cleanups = append(s.cleanups, p.closeCluster)
			hopts.Cluster = p.cluster
		}
		p.http = NewAdminServer(NewAdminHandler(p.registry, func() []AdminTarget { return []AdminTarget{p} }, hopts), p.sec.HTTPTLS)
		go func() {
			if err := ServeAdmin(p.http, p.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.log.Error("admin HTTP server failed", "err", err)
			}
		}()
	}
	if !cfg.HTTPServerEnabled && !s.opts.NoHTTP && cfg.Stats.wantsListener() {
		var err error
		if p.stats, err = startMetricsServer(cfg.Stats, p.registry, func(err error) { p.log.Error("metrics listener failed", "err", err) }); err != nil {
			return err
		}
		s.cleanups = append(s.cleanups, func() { p.stats.srv.Close() })
		p.log.Info("serving metrics", "address", p.stats.ln.Addr().String())
	}
	return nil
}

// serviceInfo is what the bookie publishes with its registration, as a
// Java bookie does (BookieService, HttpService): endpoint "bookie"
// (bookie-rpc) at the bookie's address (host:port; the id too unless
// bookieId names another), and "httpserver" (http) when the admin HTTP
// server runs on a fixed port.
func serviceInfo(cfg *Config, addr string, noHTTP bool) (metadata.BookieServiceInfo, error) {
	info, err := metadata.DefaultBookieServiceInfo(metadata.BookieID(addr))
	if err != nil {
		return info, err
	}
	if cfg.Security.TLSEnabled() {
		// Java's BookieService marks the bookie endpoint so.
		info.Endpoints[0].Extensions = []string{"tls"}
	}
	if cfg.HTTPServerEnabled && !noHTTP && cfg.HTTPServerPort != 0 {
		info.Endpoints = append(info.Endpoints, metadata.BookieEndpoint{
			ID: metadata.HTTPServerEndpointID, Host: info.Endpoints[0].Host, Port: cfg.HTTPServerPort, Protocol: metadata.HTTPProtocol,
		})
	}
	return info, nil
}

// freePort picks a free port for bookiePort=0 (tests): from package
// freeport when the bookie listens on loopback or every interface (below
// the ephemeral range, reserved for this process), else from the kernel.
func freePort(host string) (int, error) {
	if host == "" || host == "127.0.0.1" || host == "localhost" {
		return freeport.Take()
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// fail records a fatal error: Failed closes, and the owner shuts down.
func (p *Process) fail(err error) {
	p.failOnce.Do(func() {
		p.failErr = err
		p.log.Error("bookie failed", "err", err)
		close(p.failed)
	})
}

// Failed is closed when the process hit a fatal error (the listener died,
// or storage failed or the disk filled with readOnlyModeEnabled=false); Err
// says which. The owner should call Shutdown.
func (p *Process) Failed() <-chan struct{} { return p.failed }

// Err is the fatal error once Failed is closed.
func (p *Process) Err() error {
	select {
	case <-p.failed:
		return p.failErr
	default:
		return nil
	}
}

// MetadataSecurity is how the process connects to its metadata store (for
// AutoRecovery run in the same process, which opens its own connection).
func (p *Process) MetadataSecurity() metadata.Security { return p.sec.Metadata }

// HTTPScheme is the admin HTTP server's scheme: "https" with
// httpServerTlsEnable, else "http".
func (p *Process) HTTPScheme() string {
	if p.sec.HTTPTLS != nil {
		return "https"
	}
	return "http"
}

// ID is the bookie id (host:port).
func (p *Process) ID() metadata.BookieID { return p.id }

// Addr is the bookie protocol listener's address.
func (p *Process) Addr() net.Addr { return p.ln.Addr() }

// MetricsAddr is the address of the Prometheus provider's metrics
// listener (StatsConfig), "" when there is none.
func (p *Process) MetricsAddr() string {
	if p.stats == nil {
		return ""
	}
	return p.stats.ln.Addr().String()
}

// HTTPAddr is the admin HTTP server's address, "" when it has none.
func (p *Process) HTTPAddr() string {
	if p.httpLn == nil {
		return ""
	}
	return p.httpLn.Addr().String()
}

// Bookie returns the request handler (tests).
func (p *Process) Bookie() *bookie.Bookie { return p.bk }

// Store returns the storage (tests).
func (p *Process) Store() storage.Store { return p.store }

// GC returns the garbage collector (tests step it).
func (p *Process) GC() *GC { return p.gc }

// Registrar returns the registration keeper.
func (p *Process) Registrar() *Registrar { return p.reg }

// Registered is closed once the bookie has registered for the first time.
func (p *Process) Registered() <-chan struct{} { return p.reg.Ready() }

// Info implements AdminTarget.
func (p *Process) Info() (BookieInfo, error) {
	u, err := p.store.DiskUsage()
	if err != nil {
		return BookieInfo{}, err
	}
	return BookieInfo{FreeSpace: u.Free, TotalSpace: u.Total}, nil
}

// State implements AdminTarget.
func (p *Process) State() BookieState {
	p.mu.Lock()
	down := p.mu.shuttingDown
	p.mu.Unlock()
	return BookieState{
		Running:                        !down,
		ReadOnly:                       p.bk.ReadOnly(),
		ShuttingDown:                   down,
		AvailableForHighPriorityWrites: !down && !p.bk.StoreFailed(),
	}
}

// SetReadOnly implements AdminTarget: the admin's read-only switch.
func (p *Process) SetReadOnly(readOnly bool) (bool, error) {
	if _, err := p.state.SetForced(readOnly); err != nil {
		return p.bk.ReadOnly(), err
	}
	return p.bk.ReadOnly(), nil
}

// TriggerGC implements AdminTarget: a manual GC, as Java's forced GC: a
// pass over deleted ledgers and a forced compaction tick of the store (its
// kinds' intervals ignored; a disabled kind only with forceAllowCompaction).
func (p *Process) TriggerGC() {
	p.gc.Trigger()
	if cc, ok := p.store.(compactionControl); ok {
		cc.TriggerCompaction()
	}
}

// GCRunning implements AdminTarget.
func (p *Process) GCRunning() bool { return p.gc.Running() }

// LedgerInfo implements AdminTarget: a read of the store's state of the
// ledger that never fences or writes.
func (p *Process) LedgerInfo(ledgerID int64) (storage.LedgerInfo, error) {
	return p.store.LedgerInfo(ledgerID)
}

// Shutdown stops the bookie gracefully, in this order:
//
//  1. stop accepting connections and reading requests; requests already
//     read are answered (within ctx, at most Config.ShutdownTimeout; then
//     their connections are closed and the clients retry elsewhere);
//  2. stop the bookie and the background loops (GC, disk checks);
//  3. flush and checkpoint the storage and close it;
//  4. deregister from the metadata store (the lease is revoked);
//  5. stop the admin HTTP server and close the metadata store if owned.
//
// Idempotent; later calls return the first call's result.
func (p *Process) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() { p.shutdownErr = p.shutdown(ctx) })
	return p.shutdownErr
}

// stopServing ends the wait for the address (waitAddressFree) or the
// serving: the listener is closed when it returns, so the port is free.
func (p *Process) stopServing(ctx context.Context) error {
	p.stopServeWait()
	<-p.serveWaited
	return p.srv.Shutdown(ctx)
}

func (p *Process) shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.mu.shuttingDown = true
	p.mu.Unlock()
	p.log.Info("bookie shutting down")
	var errs []error
	sctx, cancel := context.WithTimeout(ctx, p.cfg.ShutdownTimeout)
	if err := p.stopServing(sctx); err != nil {
		errs = append(errs, fmt.Errorf("stop serving: %w", err))
	}
	cancel()
	p.bk.Close()
	p.cancelLoops()
	p.loops.Wait()
	if err := p.closeSt(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, fmt.Errorf("close storage: %w", err))
	}
	_ = p.cookieLock.Close()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := p.reg.Deregister(dctx); err != nil {
		errs = append(errs, fmt.Errorf("deregister: %w", err))
	}
	cancel()
	if p.http != nil {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = p.http.Shutdown(hctx)
		cancel()
	}
	if p.stats != nil {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = p.stats.srv.Shutdown(hctx)
		cancel()
	}
	p.closeCluster()
	p.metrics.Unregister(p.registry)
	p.registry.Unregister(p.inflight)
	p.registry.Unregister(p.storageC)
	if p.ownMD {
		if err := p.md.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		p.log.Info("bookie stopped")
	}
	return errors.Join(errs...)
}

// closeCluster closes the ClusterAdmin, if it has one to close.
func (p *Process) closeCluster() {
	if c, ok := p.cluster.(io.Closer); ok {
		if err := c.Close(); err != nil {
			p.log.Warn("closing the admin HTTP server's cluster client", "err", err)
		}
	}
	p.cluster = nil
}

// Ready implements AdminTarget.
func (p *Process) Ready() (bool, string) {
	st := p.State()
	if !st.Running || st.ShuttingDown {
		return false, "shutting down"
	}
	registered, ro := p.reg.State()
	switch {
	case !registered:
		return false, "not registered with the metadata store"
	case ro != st.ReadOnly:
		return false, fmt.Sprintf("registration (read-only %v) does not match the bookie's mode (read-only %v) yet", ro, st.ReadOnly)
	}
	return true, ""
}

// LastLogMarks implements AdminTarget.
func (p *Process) LastLogMarks() []LogMark {
	cc, ok := p.store.(compactionControl)
	if !ok {
		return nil
	}
	var out []LogMark
	for _, m := range cc.LastLogMarks() {
		out = append(out, LogMark{FileID: m.File, Offset: m.Offset})
	}
	return out
}

// DiskFiles implements AdminTarget.
func (p *Process) DiskFiles() (map[string][]string, error) { return diskFiles(&p.cfg) }

// GCDetails implements AdminTarget.
func (p *Process) GCDetails() GCStatus {
	var st GCStatus
	if cc, ok := p.store.(compactionControl); ok {
		cs := cc.CompactionStatus()
		st.MajorCompacting = cs.Running == ledgerstore.CompactionMajor
		st.MinorCompacting = cs.Running == ledgerstore.CompactionMinor
		st.MajorCompactionCounter, st.MinorCompactionCounter = cs.MajorCount, cs.MinorCount
		if !cs.LastMajor.IsZero() {
			st.LastMajorCompactionTime = cs.LastMajor.UnixMilli()
		}
		if !cs.LastMinor.IsZero() {
			st.LastMinorCompactionTime = cs.LastMinor.UnixMilli()
		}
		st.ForceCompacting = cs.Forcing
	}
	st.ForceCompacting = st.ForceCompacting || p.gc.Running()
	return st
}

// SuspendCompaction implements AdminTarget.
func (p *Process) SuspendCompaction(major, minor bool) {
	if cc, ok := p.store.(compactionControl); ok {
		cc.SuspendCompaction(major, minor)
	}
}

// ResumeCompaction implements AdminTarget.
func (p *Process) ResumeCompaction(major, minor bool) {
	if cc, ok := p.store.(compactionControl); ok {
		cc.ResumeCompaction(major, minor)
	}
}

// CompactionSuspended implements AdminTarget.
func (p *Process) CompactionSuspended() (major, minor bool) {
	if cc, ok := p.store.(compactionControl); ok {
		cs := cc.CompactionStatus()
		return cs.MajorSuspended, cs.MinorSuspended
	}
	return false, false
}

// ExpandStorage implements AdminTarget (PUT /api/v1/bookie/expand_storage):
// the start-up cookie check again with the bookie's configuration, as
// BookKeeper's ExpandStorageService does. The running bookie's directories
// are those it started with, so this stamps nothing new: directories are
// added by a restart with allowStorageExpansion=true, or by `folio shell
// updatecookie --expandstorage` with the bookie stopped. It fails when the
// cookies no longer match (a directory's or the stored cookie changed).
func (p *Process) ExpandStorage(ctx context.Context) error {
	_, err := ValidateCookies(ctx, p.md, &p.cfg, p.id, CookieOptions{AllowExpansion: p.cfg.AllowStorageExpansion})
	return err
}

// ServerConfig implements AdminTarget: every property as read (Java's
// conf.asJson lists the keys set), with the effective values of the keys
// every bookie has, so that they show even when left to their defaults.
func (p *Process) ServerConfig() map[string]string {
	out := maps.Clone(p.cfg.Props)
	if out == nil {
		out = map[string]string{}
	}
	c := &p.cfg
	maps.Copy(out, map[string]string{
		"bookiePort":          strconv.Itoa(procPortOf(p)),
		"journalDirectories":  strings.Join(c.JournalDirs, ","),
		"ledgerDirectories":   strings.Join(c.LedgerDirs, ","),
		"metadataServiceUri":  c.MetadataServiceURI,
		"httpServerEnabled":   strconv.FormatBool(c.HTTPServerEnabled),
		"httpServerPort":      strconv.Itoa(c.HTTPServerPort),
		"gcWaitTime":          strconv.FormatInt(c.GCWaitTime.Milliseconds(), 10),
		"readOnlyModeEnabled": strconv.FormatBool(c.ReadOnlyModeEnabled),
		"forceReadOnlyBookie": strconv.FormatBool(c.ForceReadOnly),
		"diskUsageThreshold":  strconv.FormatFloat(c.DiskUsageThreshold, 'f', -1, 64),
		"diskCheckInterval":   strconv.FormatInt(c.DiskCheckInterval.Milliseconds(), 10),

		"readOnlyModeOnAnyDiskFullEnabled": strconv.FormatBool(c.ReadOnlyModeOnAnyDiskFull),
		"allowStorageExpansion":            strconv.FormatBool(c.AllowStorageExpansion),
	})
	if c.AdvertisedAddress != "" {
		out["advertisedAddress"] = c.AdvertisedAddress
	}
	return out
}

// procPortOf is the port the bookie listens on.
func procPortOf(p *Process) int {
	if a, ok := p.ln.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return p.cfg.BookiePort
}

// waitAddressFree returns once no bookie other than id is registered with
// addr as its bookie-rpc address, checking every retry; it returns ctx's
// error if ctx ends first.
//
// The bookie protocol names no bookie: a client reaches a bookie id at
// the address its registration publishes. A bookie with a custom id that
// died leaves its registration until its session expires; a different
// bookie starting on the same address meanwhile (a reused pod IP) would
// answer that id's requests: its "no such ledger" to a recovery's fencing
// reads would count as the dead bookie's proven absence and cut
// acknowledged entries off the ledger. So this bookie serves nothing until
// such a stale registration is gone (at most a session TTL). A store error
// is retried too: serving on a guess is what this avoids. It checks every
// retry on clk.
func waitAddressFree(ctx context.Context, md metadata.Driver, id metadata.BookieID, addr string, retry time.Duration, clk clock.Clock, log *slog.Logger) error {
	if retry <= 0 {
		retry = DefaultRegistrationRetry
	}
	warned := false
	for {
		other, err := addressClaimedBy(ctx, md, id, addr)
		switch {
		case err == nil && other == "":
			if warned {
				log.Info("no other bookie's registration names this address any more; serving", "address", addr)
			}
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			log.Warn("cannot check that no other bookie is registered at this address; not serving yet", "address", addr, "err", err)
		case !warned:
			log.Warn("another bookie's registration names this bookie's address (a stale registration of a bookie that was here before?); not serving until it expires",
				"address", addr, "registered", other)
			warned = true
		}
		if err := clock.Sleep(ctx, clk, retry); err != nil {
			return err
		}
	}
}

// addressClaimedBy returns a registered bookie other than id whose
// bookie-rpc address is addr, or "".
func addressClaimedBy(ctx context.Context, md metadata.Driver, id metadata.BookieID, addr string) (metadata.BookieID, error) {
	w, err := md.WritableBookies(ctx)
	if err != nil {
		return "", err
	}
	ro, err := md.ReadOnlyBookies(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range append(w, ro...) {
		if b == id {
			continue
		}
		info, err := metadata.ServiceInfoOf(ctx, md, b)
		if errors.Is(err, metadata.ErrBookieNotResolved) || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrCorruptMetadata) {
			// Gone meanwhile, no address at all, or a value nobody can
			// resolve (clients fail on it too): it routes nothing here.
			continue
		}
		if err != nil {
			return "", fmt.Errorf("bookie %s: %w", b, err)
		}
		if a, err := info.BookieAddress(); err == nil && a == addr {
			return b, nil
		}
	}
	return "", nil
}
