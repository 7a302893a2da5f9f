package zk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// Scheme is the metadata service URI scheme of this driver (also
// `zk+<type>`).
const Scheme = "zk"

// DefaultPort is used for a URI host without a port.
const DefaultPort = "2181"

// Defaults of Config's timing knobs.
const (
	// DefaultSessionTimeout is the driver connection's ZooKeeper session
	// timeout: Java's zkTimeout default.
	DefaultSessionTimeout = 10 * time.Second
	// DefaultDialTimeout bounds establishing the first session in Open.
	DefaultDialTimeout = 10 * time.Second
)

func init() {
	metadata.RegisterDriver(Scheme, func(ctx context.Context, u *metadata.URI, opts metadata.Options) (metadata.Driver, error) {
		if err := refuseSecurity(opts.Security); err != nil {
			return nil, err
		}
		return Open(ctx, u, Config{DialTimeout: opts.DialTimeout})
	})
}

// refuseSecurity refuses TLS and authentication settings: the driver has
// neither, and connecting without what was asked for would leave the
// cluster less protected than its operator believes.
func refuseSecurity(sec metadata.Security) error {
	var asked []string
	if sec.TLS != nil {
		asked = append(asked, "TLS (metadataServiceTls*, --metadata-tls-*)")
	}
	if sec.User != "" || sec.Password != "" {
		asked = append(asked, "a user and password (metadataServiceUser, metadataServicePasswordPath; --metadata-user, --metadata-password-file)")
	}
	if len(asked) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s asked for, but Folio's ZooKeeper driver supports neither TLS nor authentication: remove those settings, or use an etcd metadata store", metadata.ErrBadSecurity, strings.Join(asked, " and "))
}

// Config configures a Driver. Every timing knob has a default for its zero
// value.
type Config struct {
	// Servers are the ZooKeeper servers, host:port (the URI's hosts; a
	// host without a port gets 2181). Required.
	Servers []string
	// Root is the ledgers root path, the URI's path, e.g. "/ledgers":
	// starting with '/', not ending with one.
	Root string
	// Manager is the ledger manager the URI names (zk+hierarchical://…);
	// 0 means the one LAYOUT names, and Hierarchical where there is no
	// LAYOUT yet (Java's default). A LAYOUT naming another manager than a
	// configured one is an error, as in Java.
	Manager Manager

	// SessionTimeout is the session timeout of the driver's own connection
	// (the one ledger metadata, cookies and watches use); 0 means
	// DefaultSessionTimeout. Sessions (OpenSession) have their own.
	SessionTimeout time.Duration
	// DialTimeout bounds establishing a session (Open, OpenSession); 0
	// means DefaultDialTimeout.
	DialTimeout time.Duration
	// RegistrationWait is how long RegisterBookie waits for a registration
	// znode held by another session to go before ErrBookieRegistered; 0
	// means twice the session's timeout (Java waits zkTimeout).
	RegistrationWait time.Duration
	// MaxCreateAttempts bounds CreateLedger's retries on an id that is
	// already taken; 0 means 100.
	MaxCreateAttempts int
	// Dialer, if set, opens the TCP connections to the servers (tests
	// record sessions through it); nil means net.DialTimeout.
	Dialer gozk.Dialer
	// RetryBackoff is the pause before a watch (or a held lock's check)
	// reads again after a connection error (the client is between
	// servers, or ZooKeeper is down); 0 means DefaultRetryBackoff.
	RetryBackoff time.Duration
}

// DefaultRetryBackoff is Java's ZK_CONNECT_BACKOFF_MS.
const DefaultRetryBackoff = 200 * time.Millisecond

// Driver is the ZooKeeper metadata driver. It implements metadata.Driver
// and metadata.AutoRecoveryDriver.
type Driver struct {
	conn *conn // the driver's own session: metadata, cookies, watches, id generation
	cfg  Config
	p    paths

	// closeCtx is cancelled by Close; watch goroutines derive from it.
	closeCtx context.Context
	cancel   context.CancelFunc

	mu struct {
		sync.Mutex
		closed   bool
		sessions map[*session]struct{}
		// manager is the ledger manager once resolved from LAYOUT (0:
		// not yet; see manager()).
		manager Manager
		// urReady: the under-replication base nodes exist (ensureUR).
		urReady bool
		// longIDs: idgen-long exists, ids come from the long generator.
		longIDs bool
	}
	wg sync.WaitGroup // watch goroutines and session expiry handlers
}

var (
	_ metadata.Driver             = (*Driver)(nil)
	_ metadata.AutoRecoveryDriver = (*Driver)(nil)
)

// Open opens a driver for a parsed metadata URI: zk://h1:2181;h2:2181/ledgers
// or zk+<type>://… (hierarchical, longhierarchical, flat, null). cfg's
// Servers, Root and Manager are taken from u. A URI with user information
// (ZooKeeper authentication) is refused: Folio's driver neither
// authenticates nor sets ACLs, and does not pretend to.
func Open(ctx context.Context, u *metadata.URI, cfg Config) (*Driver, error) {
	if u.Scheme != Scheme {
		return nil, fmt.Errorf("%w: scheme %q is not %q", metadata.ErrBadURI, u.Scheme, Scheme)
	}
	m, err := ManagerFromURIType(u.SchemeType)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", metadata.ErrBadURI, u.String(), err)
	}
	if u.UserInfo != "" {
		return nil, fmt.Errorf("%w %q: user information in a zk:// URI asks for ZooKeeper authentication, which Folio's ZooKeeper driver does not support (digest, SASL and ACLs are out of scope): remove it, or use a ZooKeeper that lets Folio in without", metadata.ErrBadURI, u.Scheme+"://…@"+strings.Join(u.Hosts, ";")+u.Scope)
	}
	if len(u.Hosts) == 0 {
		return nil, fmt.Errorf("%w %q: no ZooKeeper hosts", metadata.ErrBadURI, u.String())
	}
	cfg.Servers = nil
	for _, h := range u.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), DefaultPort)
		}
		cfg.Servers = append(cfg.Servers, h)
	}
	cfg.Root, cfg.Manager = u.Scope, m
	return New(ctx, cfg)
}

// New connects to ZooKeeper and waits (up to DialTimeout) for a session, so
// that an unreachable ensemble is reported here, naming the servers.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Root == "" || cfg.Root[0] != '/' || strings.HasSuffix(cfg.Root, "/") || strings.Contains(cfg.Root, "//") {
		return nil, fmt.Errorf("%w: ledgers root %q must start with '/', have no empty part and not end with '/'", metadata.ErrBadURI, cfg.Root)
	}
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers", metadata.ErrBadURI)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxCreateAttempts <= 0 {
		cfg.MaxCreateAttempts = 100
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	d := &Driver{cfg: cfg, p: newPaths(cfg.Root)}
	d.closeCtx, d.cancel = context.WithCancel(context.Background())
	d.mu.sessions = map[*session]struct{}{}
	c, err := dial(ctx, cfg, cfg.SessionTimeout, nil)
	if err != nil {
		d.cancel()
		return nil, err
	}
	d.conn = c
	return d, nil
}

// SessionID returns the session id of the driver's own connection (the
// one it was opened with; after that session expires the connection goes
// on under a new one).
func (d *Driver) SessionID() int64 { return d.conn.sessionID }

// Root returns the ledgers root path.
func (d *Driver) Root() string { return d.p.root }

// Servers returns the ZooKeeper servers the driver uses.
func (d *Driver) Servers() []string { return append([]string(nil), d.cfg.Servers...) }

// LedgerPath returns the znode of ledger id's metadata under the cluster's
// ledger manager (resolved from LAYOUT), for tools and tests.
func (d *Driver) LedgerPath(ctx context.Context, id int64) (string, error) {
	m, err := d.manager(ctx)
	if err != nil {
		return "", err
	}
	return m.LedgerPath(d.p.root, id)
}

// Close closes the open sessions (their ephemeral znodes go at once), ends
// watches and closes the connection. Idempotent.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil
	}
	d.mu.closed = true
	sessions := d.mu.sessions
	d.mu.sessions = nil
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.DialTimeout)
	defer cancel()
	for s := range sessions {
		_ = s.Close(ctx)
	}
	d.cancel()
	d.conn.close()
	d.wg.Wait()
	return nil
}

func (d *Driver) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return metadata.ErrClosed
	}
	return nil
}

func (d *Driver) closed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.closed
}

// storeErr wraps an error of the ZooKeeper client with what was being done
// and an explanation where one helps.
func (d *Driver) storeErr(what string, err error) error {
	servers := strings.Join(d.cfg.Servers, ",")
	switch {
	case (errors.Is(err, gozk.ErrClosing) || errors.Is(err, gozk.ErrConnectionClosed)) && d.closed():
		return fmt.Errorf("zookeeper: %s: %w", what, metadata.ErrClosed)
	case errors.Is(err, gozk.ErrNoServer):
		return fmt.Errorf("zookeeper %s: %s: no server reachable (is ZooKeeper running there?): %w", servers, what, err)
	case errors.Is(err, gozk.ErrNoAuth), errors.Is(err, gozk.ErrInvalidACL), errors.Is(err, gozk.ErrAuthFailed):
		return fmt.Errorf("zookeeper %s: %s: access denied (Folio's ZooKeeper driver does not authenticate and creates open znodes; ACLs and digest/SASL authentication are not supported): %w", servers, what, err)
	}
	return fmt.Errorf("zookeeper: %s: %w", what, err)
}

// transient reports whether err is a connection error a watch outlives:
// the client is reconnecting (to another server, or under a new session),
// or no server answers for now.
func (d *Driver) transient(err error) bool {
	if d.closed() {
		return false
	}
	return errors.Is(err, gozk.ErrNoServer) || errors.Is(err, gozk.ErrConnectionClosed) ||
		errors.Is(err, gozk.ErrSessionExpired) || errors.Is(err, gozk.ErrClosing) || errors.Is(err, gozk.ErrSessionMoved)
}

// backoff waits RetryBackoff; false if ctx ended first.
func (d *Driver) backoff(ctx context.Context) bool {
	t := time.NewTimer(d.cfg.RetryBackoff)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func checkLedgerID(id int64) error {
	if id < 0 || id > metadata.MaxLedgerID {
		return fmt.Errorf("%w: %d (want 0..%d)", metadata.ErrInvalidLedgerID, id, int64(metadata.MaxLedgerID))
	}
	return nil
}

func checkBookieID(id metadata.BookieID) error {
	if err := metadata.ValidateBookieID(id); err != nil {
		return fmt.Errorf("invalid bookie id: %w", err)
	}
	return nil
}

// checkExpected refuses VersionNew and VersionAny where a version read from
// the store is needed.
func checkExpected(expected metadata.Version) error {
	if expected <= 0 {
		return fmt.Errorf("%w: expected version %d is not a version read from the store", metadata.ErrBadVersion, expected)
	}
	return nil
}

// version is a znode's metadata.Version: its mzxid (doc.go, Versions).
func version(st *gozk.Stat) metadata.Version { return metadata.Version(st.Mzxid) }

// goWatch runs f in a goroutine tracked by Close, with a context that ends
// when ctx or the driver does. ErrClosed if the driver is closed.
func (d *Driver) goWatch(ctx context.Context, f func(ctx context.Context)) error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return metadata.ErrClosed
	}
	d.wg.Add(1) // under mu: Close waits only after marking closed
	d.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.closeCtx, cancel)
	go func() {
		defer d.wg.Done()
		defer stop()
		defer cancel()
		f(wctx)
	}()
	return nil
}
