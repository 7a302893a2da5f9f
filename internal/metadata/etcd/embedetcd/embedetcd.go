// Package embedetcd runs an etcd member inside the Folio process
// (go.etcd.io/etcd/server/v3/embed): by default a single-member cluster, or
// one member of a multi-member cluster (Config.Cluster).
//
// Its users: `folio standalone` (DESIGN.md §3: clients on 127.0.0.1:2379,
// peer 2380), tests of every package that talks to the metadata store (free
// loopback ports, a t.TempDir data directory; see the sibling package
// etcdtest), and the test harness's multi-member clusters, whose members
// run as separate processes so that a test can SIGKILL the leader
// (internal/testcluster). It lives under internal/metadata/etcd, below
// internal/standalone in DESIGN.md §8's dependency order, so that the etcd
// driver's own tests and the standalone command can both import it without a
// cycle. It knows nothing about BookKeeper's key layout: it only serves etcd.
//
// Contracts:
//   - The data directory is the state: Start on a directory that an earlier
//     Server used restarts that member with all its keys, revisions and
//     leases (leases keep their remaining TTL, measured from the restart).
//   - A port of 0 means "pick a free port on the host"; an explicit port that
//     is busy is a start-up error, never a silent move to another port.
//   - Logs go to a file (by default etcd.log in the data directory), never to
//     the terminal.
//   - Periodic auto-compaction and a backend quota keep the store from
//     growing without bound.
//   - A member of a multi-member cluster keeps its name and peer URL for
//     life: etcd records the membership in the data directory, and a member
//     restarted on it rejoins with the same identity.
//   - With Config.ClientTLS clients connect over TLS (https:// client URL;
//     the metadata URI is etcd+https://), and with ClientCertAuth only
//     clients with a certificate signed by the trusted CA get in. With
//     Config.Auth etcd's authentication is turned on at the member's first
//     start (security.go); a restart keeps the users and roles it stored.
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for the zero values of Config.
const (
	DefaultHost = "127.0.0.1"
	// DefaultAutoCompactionRetention keeps one hour of history: watches that
	// fall further behind than that must re-read (etcd answers "compacted").
	DefaultAutoCompactionRetention = time.Hour
	// DefaultQuotaBackendBytes is etcd's own default (2 GiB). When the
	// backend reaches the quota etcd raises a NOSPACE alarm and refuses
	// writes until an operator compacts, defragments and disarms it.
	DefaultQuotaBackendBytes int64 = 2 << 30
	// DefaultLogFile is the log file name inside the data directory.
	DefaultLogFile = "etcd.log"
	// DefaultStartTimeout bounds the wait for the member to serve clients.
	DefaultStartTimeout = time.Minute
	// DefaultName is the member name recorded in the data directory.
	DefaultName = "folio"
)

// Config configures one embedded etcd member. The zero value of every field
// except DataDir has a documented default.
type Config struct {
	// DataDir is etcd's data directory (created if absent). Required.
	DataDir string
	// Name is the member name; default DefaultName. It is recorded in the
	// data directory, so keep it stable across restarts.
	Name string

	// ClientHost and ClientPort are where clients connect (plain http, as
	// Java BookKeeper's jetcd driver requires, unless ClientTLS). Host
	// default DefaultHost; port 0 picks a free port.
	ClientHost string
	ClientPort int
	// PeerHost and PeerPort are the raft peer listener; same defaults.
	PeerHost string
	PeerPort int

	// AutoCompactionRetention is the periodic auto-compaction retention
	// (etcd mode "periodic"). 0 means DefaultAutoCompactionRetention; a
	// negative value disables auto-compaction.
	AutoCompactionRetention time.Duration
	// QuotaBackendBytes is the backend size quota; 0 means
	// DefaultQuotaBackendBytes.
	QuotaBackendBytes int64

	// LogFile is where etcd's own log goes. Empty means DefaultLogFile; a
	// relative path is relative to DataDir. The file is appended to.
	LogFile string
	// LogLevel is etcd's log level (debug, info, warn, error); default info.
	LogLevel string

	// StartTimeout bounds how long Start waits for the member to be ready
	// (besides ctx); 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// PortAttempts is how many times Start retries when a port it picked
	// itself (port 0) was taken by someone else before etcd bound it;
	// 0 means 5.
	PortAttempts int

	// UnsafeNoFsync disables fsync in etcd. For tests only: a crash of the
	// machine (not of the process) can lose acknowledged writes.
	UnsafeNoFsync bool

	// Cluster lists every member of a multi-member cluster, this one
	// included (by Name). Empty means a cluster of this member alone. With
	// Cluster, PeerPort must be given (the other members know this member
	// by its peer URL, which must be PeerHost:PeerPort) and the entry for
	// Name must be that URL. On a data directory that already holds a
	// member, etcd takes the membership from the directory and ignores
	// Cluster.
	Cluster []Member
	// ClusterToken tells clusters apart on the network: members refuse
	// peers of another token. Default "folio-" + Name for a single member,
	// "folio-cluster" with Cluster.
	ClusterToken string

	// HeartbeatInterval is raft's heartbeat interval (etcd's
	// --heartbeat-interval); 0 means etcd's default, 100 ms.
	HeartbeatInterval time.Duration
	// ElectionTimeout is how long a follower waits without hearing from
	// the leader before it starts an election (etcd's --election-timeout);
	// 0 means etcd's default, 1 s. It must be at least 5 heartbeat
	// intervals. It also sets etcd's minimum lease TTL: 1.5 × it (etcd
	// raises shorter lease TTLs to that).
	ElectionTimeout time.Duration

	// ClientTLS, when set, serves clients over TLS only (security.go).
	ClientTLS *TLS
	// Auth, when set, turns on etcd's authentication (security.go).
	Auth *Auth
}

// Member is one member of a multi-member cluster: its name and its peer URL
// (http://host:port).
type Member struct {
	Name    string
	PeerURL string
}

// Server is a running embedded etcd member.
type Server struct {
	cfg        Config // with defaults applied
	etcd       *embed.Etcd
	logFile    *os.File
	clientURL  string
	peerURL    string
	clientPort int
	peerPort   int

	closeOnce sync.Once
	closeErr  error
}

// ErrPortInUse reports that a configured port is taken.
var ErrPortInUse = errors.New("port already in use")

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("embedetcd: Config.DataDir is required")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("embedetcd: data dir %q: %w", c.DataDir, err)
	}
	c.DataDir = abs
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.ClientHost == "" {
		c.ClientHost = DefaultHost
	}
	if c.PeerHost == "" {
		c.PeerHost = DefaultHost
	}
	if c.ClientPort < 0 || c.ClientPort > 65535 || c.PeerPort < 0 || c.PeerPort > 65535 {
		return c, fmt.Errorf("embedetcd: ports must be in 0..65535 (client %d, peer %d)", c.ClientPort, c.PeerPort)
	}
	if c.ClientPort != 0 && c.ClientPort == c.PeerPort && c.ClientHost == c.PeerHost {
		return c, fmt.Errorf("embedetcd: client and peer ports are both %d", c.ClientPort)
	}
	if c.AutoCompactionRetention == 0 {
		c.AutoCompactionRetention = DefaultAutoCompactionRetention
	}
	if c.QuotaBackendBytes == 0 {
		c.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if c.LogFile == "" {
		c.LogFile = DefaultLogFile
	}
	if !filepath.IsAbs(c.LogFile) {
		c.LogFile = filepath.Join(c.DataDir, c.LogFile)
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.PortAttempts <= 0 {
		c.PortAttempts = 5
	}
	if c.HeartbeatInterval < 0 || c.ElectionTimeout < 0 {
		return c, fmt.Errorf("embedetcd: heartbeat interval %v and election timeout %v must not be negative", c.HeartbeatInterval, c.ElectionTimeout)
	}
	if c.HeartbeatInterval%time.Millisecond != 0 || c.ElectionTimeout%time.Millisecond != 0 {
		return c, fmt.Errorf("embedetcd: heartbeat interval %v and election timeout %v must be whole milliseconds", c.HeartbeatInterval, c.ElectionTimeout)
	}
	hb, et := c.HeartbeatInterval, c.ElectionTimeout
	if hb == 0 {
		hb = 100 * time.Millisecond
	}
	if et == 0 {
		et = time.Second
	}
	if et < 5*hb {
		return c, fmt.Errorf("embedetcd: election timeout %v must be at least 5 heartbeat intervals (%v)", et, hb)
	}
	if err := c.checkSecurity(); err != nil {
		return c, err
	}
	if len(c.Cluster) > 0 {
		if err := c.checkCluster(); err != nil {
			return c, err
		}
		if c.ClusterToken == "" {
			c.ClusterToken = "folio-cluster"
		}
	} else if c.ClusterToken == "" {
		c.ClusterToken = "folio-" + c.Name
	}
	return c, nil
}

// checkCluster checks Cluster against the member's own name and peer URL.
func (c Config) checkCluster() error {
	if c.PeerPort == 0 {
		return fmt.Errorf("embedetcd: member %q of a %d-member cluster needs an explicit PeerPort (the others know it by its peer URL)", c.Name, len(c.Cluster))
	}
	own := (&url.URL{Scheme: "http", Host: net.JoinHostPort(c.PeerHost, strconv.Itoa(c.PeerPort))}).String()
	names := map[string]bool{}
	found := false
	for _, m := range c.Cluster {
		if m.Name == "" || m.PeerURL == "" {
			return fmt.Errorf("embedetcd: cluster member %+v: name and peer URL are required", m)
		}
		if names[m.Name] {
			return fmt.Errorf("embedetcd: cluster member name %q appears twice", m.Name)
		}
		names[m.Name] = true
		if _, err := url.Parse(m.PeerURL); err != nil {
			return fmt.Errorf("embedetcd: cluster member %q: peer URL %q: %v", m.Name, m.PeerURL, err)
		}
		if m.Name == c.Name {
			found = true
			if m.PeerURL != own {
				return fmt.Errorf("embedetcd: cluster lists member %q at %s, but it listens for peers at %s", c.Name, m.PeerURL, own)
			}
		}
	}
	if !found {
		return fmt.Errorf("embedetcd: member %q is not in its cluster's member list", c.Name)
	}
	return nil
}

// initialCluster renders Cluster as etcd's --initial-cluster
// ("n1=http://h:p,n2=…").
func (c Config) initialCluster() string {
	parts := make([]string, len(c.Cluster))
	for i, m := range c.Cluster {
		parts[i] = m.Name + "=" + m.PeerURL
	}
	return strings.Join(parts, ",")
}

// Start starts a member and waits until it serves clients. On error nothing
// is left running.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: create data dir: %w", err)
	}
	logFile, logger, err := openLog(cfg)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < cfg.PortAttempts; attempt++ {
		s, err := startOnce(ctx, cfg, logFile, logger)
		if err == nil {
			return s, nil
		}
		lastErr = err
		// Retry only when a port we picked ourselves was stolen between our
		// probe and etcd's bind. Explicit ports fail at once.
		if !errors.Is(err, ErrPortInUse) || (cfg.ClientPort != 0 && cfg.PeerPort != 0) {
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	_ = logger.Sync()
	_ = logFile.Close()
	return nil, lastErr
}

func openLog(cfg Config) (*os.File, *zap.Logger, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.LogFile), 0o700); err != nil {
		return nil, nil, fmt.Errorf("embedetcd: create log dir: %w", err)
	}
	f, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("embedetcd: open log file: %w", err)
	}
	var level zapcore.Level
	if err := level.Set(cfg.LogLevel); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("embedetcd: log level %q: %w", cfg.LogLevel, err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(f), level)
	// ErrorOutput also goes to the file: zap's internal errors must not
	// reach the terminal either.
	return f, zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.AddSync(f))), nil
}

func startOnce(ctx context.Context, cfg Config, logFile *os.File, logger *zap.Logger) (*Server, error) {
	clientPort, peerPort := cfg.ClientPort, cfg.PeerPort
	var err error
	if clientPort == 0 {
		if clientPort, err = freePort(cfg.ClientHost, peerPort); err != nil {
			return nil, err
		}
	}
	if peerPort == 0 {
		if peerPort, err = freePort(cfg.PeerHost, clientPort); err != nil {
			return nil, err
		}
	}
	clientURL := url.URL{Scheme: cfg.clientScheme(), Host: net.JoinHostPort(cfg.ClientHost, strconv.Itoa(clientPort))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort(cfg.PeerHost, strconv.Itoa(peerPort))}

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	if len(cfg.Cluster) > 0 {
		ec.InitialCluster = cfg.initialCluster()
	}
	ec.ClusterState = embed.ClusterStateFlagNew // ignored on a data dir that holds a member
	ec.InitialClusterToken = cfg.ClusterToken
	if cfg.HeartbeatInterval > 0 {
		ec.TickMs = uint(cfg.HeartbeatInterval / time.Millisecond)
	}
	if cfg.ElectionTimeout > 0 {
		ec.ElectionMs = uint(cfg.ElectionTimeout / time.Millisecond)
	}
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.AutoCompactionMode = "periodic"
	if cfg.AutoCompactionRetention > 0 {
		ec.AutoCompactionRetention = cfg.AutoCompactionRetention.String()
	} else {
		ec.AutoCompactionRetention = "0" // disabled
	}
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.LogLevel = cfg.LogLevel
	ec.LogOutputs = []string{cfg.LogFile} // informational; the builder below wins
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// No metrics or pprof listeners: Folio exposes its own admin HTTP server.
	ec.EnablePprof = false
	cfg.applySecurity(ec)

	e, err := embed.StartEtcd(ec)
	if err != nil {
		if isAddrInUse(err) {
			return nil, fmt.Errorf("embedetcd: start (client %s, peer %s): %w: %v", clientURL.Host, peerURL.Host, ErrPortInUse, err)
		}
		return nil, fmt.Errorf("embedetcd: start in %s: %w", cfg.DataDir, err)
	}
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: etcd failed while starting (see %s): %v", cfg.LogFile, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedetcd: etcd not ready after %v (see %s)", cfg.StartTimeout, cfg.LogFile)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedetcd: start: %w", ctx.Err())
	}
	if err := cfg.enableAuth(ctx, e); err != nil {
		e.Close()
		return nil, err
	}
	cfg.ClientPort, cfg.PeerPort = clientPort, peerPort
	return &Server{
		cfg:        cfg,
		etcd:       e,
		logFile:    logFile,
		clientURL:  clientURL.String(),
		peerURL:    peerURL.String(),
		clientPort: clientPort,
		peerPort:   peerPort,
	}, nil
}

// freePort asks the kernel for a free port on host, avoiding `avoid`. The
// port is free when we return but may be taken before etcd binds it; Start
// retries in that case.
func freePort(host string, avoid int) (int, error) {
	for i := 0; i < 10; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("embedetcd: find a free port on %s: %w", host, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port != avoid {
			return port, nil
		}
	}
	return 0, fmt.Errorf("embedetcd: no free port on %s", host)
}

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// Endpoints returns the client URLs, e.g. ["http://127.0.0.1:2379"]
// (https:// with ClientTLS).
func (s *Server) Endpoints() []string { return []string{s.clientURL} }

// ClientURL is the single client URL (http://host:port, or https://).
func (s *Server) ClientURL() string { return s.clientURL }

// ClientAddr is the client listener as host:port, the form used in an
// etcd:// (or, with ClientTLS, etcd+https://) metadata service URI.
func (s *Server) ClientAddr() string {
	return net.JoinHostPort(s.cfg.ClientHost, strconv.Itoa(s.clientPort))
}

// PeerURL is the raft peer URL (http://host:port).
func (s *Server) PeerURL() string { return s.peerURL }

// ClientPort and PeerPort are the ports actually bound (useful when the
// Config asked for 0).
func (s *Server) ClientPort() int { return s.clientPort }

// PeerPort is the peer port actually bound.
func (s *Server) PeerPort() int { return s.peerPort }

// DataDir is the absolute data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// LogFile is the absolute path of etcd's log file.
func (s *Server) LogFile() string { return s.cfg.LogFile }

// Err delivers a fatal error of the running server; it is closed when the
// server has stopped.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member gracefully (pending client requests get up to
// etcd's request timeout) and closes the log file. Idempotent; safe to call
// from several goroutines.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.etcd.Close()
		// Drain: Close closes the error channel once every server goroutine
		// has exited; report the first error that was not a normal stop.
		for err := range s.etcd.Err() {
			if err != nil && s.closeErr == nil && !isShutdownErr(err) {
				s.closeErr = err
			}
		}
		lg := s.etcd.GetLogger()
		if lg != nil {
			_ = lg.Sync()
		}
		if err := s.logFile.Close(); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

func isShutdownErr(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "use of closed network connection") ||
		strings.Contains(msg, "server closed") ||
		strings.Contains(msg, "mux: server closed")
}
