package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/foliodb/folio/internal/metadata"
)

// Scheme is the metadata service URI scheme of this driver.
const Scheme = "etcd"

// DefaultPort is used for a URI host without a port.
const DefaultPort = "2379"

// DefaultDialTimeout bounds connecting (and the first request) when
// Config.DialTimeout is 0.
const DefaultDialTimeout = 5 * time.Second

func init() {
	metadata.RegisterDriver(Scheme, func(ctx context.Context, u *metadata.URI, opts metadata.Options) (metadata.Driver, error) {
		return Open(ctx, u, Config{
			DialTimeout:     opts.DialTimeout,
			RequestTimeout:  opts.RequestTimeout,
			RetryBackoff:    opts.RetryBackoff,
			RetryBackoffMax: opts.RetryBackoffMax,
			Log:             opts.Logger,
			TLS:             opts.Security.TLS,
			Username:        opts.Security.User,
			Password:        opts.Security.Password,
		})
	})
}

// Config configures a Driver. Every timing knob has a default for its zero
// value.
type Config struct {
	// Endpoints are etcd client URLs (http://host:port, or https://host:port
	// for TLS). Required by New; Open fills them from the URI (security.go).
	Endpoints []string
	// Scope is the key prefix of the cluster, the metadata URI's path, e.g.
	// "/ledgers": non-empty, starting with '/', without a trailing '/'.
	Scope string

	// DialTimeout bounds connecting to etcd and the reachability probe New
	// makes; 0 means DefaultDialTimeout.
	DialTimeout time.Duration

	// RequestTimeout bounds one attempt of a request; 0 means
	// DefaultRequestTimeout. Every request is retried while etcd is
	// unavailable (retry.go): a member that has no leader refuses at once,
	// but a request a follower forwarded to a leader that has just died is
	// answered only by etcd's own request timeout (5 s + 2 election
	// timeouts), so the driver abandons the attempt after RequestTimeout
	// and tries again.
	RequestTimeout time.Duration
	// RetryBackoff is the pause after a failed attempt, doubled after each
	// further one up to RetryBackoffMax; 0 means DefaultRetryBackoff and
	// DefaultRetryBackoffMax.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// Log receives the driver's warnings: a request failing and being
	// retried, and its eventual success. nil discards them.
	Log *slog.Logger

	// RegistrationWait is how long RegisterBookie waits for a registration
	// held by another lease to disappear before failing with
	// ErrBookieRegistered. 0 means twice the session's TTL, as Java's
	// EtcdBookieRegister does.
	RegistrationWait time.Duration

	// MaxCreateAttempts bounds CreateLedger's retries on an id that is
	// already taken; 0 means 100.
	MaxCreateAttempts int

	// Logger receives the etcd client's logs; nil discards them (the CLI
	// and tests must not print client chatter to the terminal).
	Logger *zap.Logger

	// TLS is the client TLS configuration for https:// endpoints: the CAs
	// that sign etcd's certificate and the client certificate etcd may
	// require. Nil with https:// endpoints means the system's roots and no
	// client certificate; set with http:// endpoints it is refused
	// (security.go). Not modified.
	TLS *tls.Config
	// Username and Password authenticate to etcd (both or neither). When
	// they are set and etcd has authentication disabled, the driver works
	// and logs a warning to Log: clients get their credentials before an
	// operator enables etcd's authentication.
	Username, Password string

	// Client, if set, is used instead of dialling Endpoints; the Driver
	// does not close it.
	Client *clientv3.Client
}

// Driver is the etcd metadata driver. It implements metadata.Driver.
type Driver struct {
	cli       *clientv3.Client
	ownClient bool
	k         keys
	cfg       Config

	// nextBucket is the last bucket used by GenerateLedgerID; each call
	// moves to the next one first (round-robin from a random start).
	nextBucket atomic.Uint32

	// closeCtx is cancelled by Close; every watch goroutine derives from it.
	closeCtx context.Context
	cancel   context.CancelFunc

	mu struct {
		sync.Mutex
		closed   bool
		sessions map[*session]struct{}
	}
	wg sync.WaitGroup // watch and session goroutines
}

var _ metadata.Driver = (*Driver)(nil)

// Open opens a driver for a parsed metadata URI (etcd://h1:2379;h2:2379/scope).
// cfg's Endpoints and Scope are taken from u.
func Open(ctx context.Context, u *metadata.URI, cfg Config) (*Driver, error) {
	if u.Scheme != Scheme {
		return nil, fmt.Errorf("%w: scheme %q is not %q", metadata.ErrBadURI, u.Scheme, Scheme)
	}
	if len(u.Hosts) == 0 {
		return nil, fmt.Errorf("%w %q: no etcd hosts", metadata.ErrBadURI, u.String())
	}
	if u.UserInfo != "" {
		return nil, fmt.Errorf("%w %q: user information in an etcd URI is not used (Java ignores it; Folio refuses rather than connect anonymously): give the user and the password file in the security settings (metadataServiceUser, metadataServicePasswordPath; --metadata-user, --metadata-password-file)", metadata.ErrBadURI, u.String())
	}
	scheme, err := endpointScheme(u)
	if err != nil {
		return nil, err
	}
	cfg.Endpoints = nil
	for _, h := range u.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), DefaultPort)
		}
		cfg.Endpoints = append(cfg.Endpoints, scheme+"://"+h)
	}
	cfg.Scope = u.Scope
	return New(ctx, cfg)
}

// New connects to etcd and checks that it answers (within DialTimeout), so
// that an unreachable store is reported here, naming the endpoints.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Scope == "" || cfg.Scope[0] != '/' || strings.HasSuffix(cfg.Scope, "/") {
		return nil, fmt.Errorf("%w: scope %q must start with '/' and not end with one", metadata.ErrBadURI, cfg.Scope)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxCreateAttempts <= 0 {
		cfg.MaxCreateAttempts = 100
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.RetryBackoffMax <= 0 {
		cfg.RetryBackoffMax = DefaultRetryBackoffMax
	}
	cfg.RetryBackoffMax = max(cfg.RetryBackoffMax, cfg.RetryBackoff)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{cfg: cfg, k: newKeys(cfg.Scope), cli: cfg.Client}
	if d.cli == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, fmt.Errorf("%w: no etcd endpoints", metadata.ErrBadURI)
		}
		if err := checkSecurity(cfg.Endpoints, cfg.TLS, cfg.Username, cfg.Password); err != nil {
			return nil, err
		}
		// With a user, the client authenticates here (within DialTimeout).
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   cfg.Endpoints,
			DialTimeout: cfg.DialTimeout,
			Logger:      cfg.Logger,
			TLS:         cfg.TLS,
			Username:    cfg.Username,
			Password:    cfg.Password,
		})
		if err != nil {
			return nil, d.connectErr(ctx, "connect", err)
		}
		d.cli, d.ownClient = cli, true
	}
	// Probe: one cheap read, so that a wrong address, certificate or
	// credential fails now with a clear message rather than at the first
	// real operation.
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err := d.cli.Get(pctx, d.k.scope, clientv3.WithCountOnly())
	cancel()
	if err == nil && cfg.Username != "" {
		// Credentials sent to an etcd without authentication are not
		// checked: say so, once.
		actx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		st, aerr := d.cli.AuthStatus(actx)
		cancel()
		if aerr == nil && !st.Enabled {
			cfg.Log.Warn("etcd has authentication disabled: the metadata store user and password are not checked, and anyone who reaches etcd can change the cluster's metadata (etcdctl auth enable)",
				"endpoints", strings.Join(cfg.Endpoints, ","), "user", cfg.Username)
		}
	}
	if err != nil {
		if d.ownClient {
			_ = d.cli.Close()
		}
		return nil, d.connectErr(ctx, "read "+d.k.scope, err)
	}
	d.nextBucket.Store(uint32(rand.IntN(NumBuckets)))
	d.closeCtx, d.cancel = context.WithCancel(context.Background())
	d.mu.sessions = map[*session]struct{}{}
	return d, nil
}

// connectErr explains a failure to connect or to probe: a refused
// credential or permission as such, else whatever diagnose finds at the
// endpoints, else that etcd is not reachable. Every message names the
// endpoints.
func (d *Driver) connectErr(ctx context.Context, what string, err error) error {
	eps := strings.Join(d.cfg.Endpoints, ",")
	if len(eps) == 0 && d.cli != nil {
		eps = strings.Join(d.cli.Endpoints(), ",")
	}
	if serr := securityErr(err); isSecurityErr(serr) {
		who := ""
		if d.cfg.Username != "" {
			who = fmt.Sprintf(" as user %q", d.cfg.Username)
		}
		return fmt.Errorf("etcd %s: %s%s: %w", eps, what, who, serr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return fmt.Errorf("etcd %s: %s: %w", eps, what, err)
	}
	if derr := diagnose(context.WithoutCancel(ctx), d.cfg.Endpoints, d.cfg.TLS, d.cfg.DialTimeout); derr != nil {
		return fmt.Errorf("etcd %s: %s: %w", eps, what, derr)
	}
	return fmt.Errorf("etcd %s is not reachable (is etcd running there?): %s: %w", eps, what, err)
}

// Client returns the underlying etcd client (for tools and tests).
func (d *Driver) Client() *clientv3.Client { return d.cli }

// Scope returns the driver's scope.
func (d *Driver) Scope() string { return d.k.scope }

// LedgerKey returns the key of ledger id's metadata, <scope>/ledgers/<uuid>
// (spec/metadata.md §2.3), for tools and tests that read the store itself.
func (d *Driver) LedgerKey(id int64) string { return d.k.ledger(id) }

// Close revokes the leases of open sessions, ends watches and closes the
// client (unless it was given in Config.Client). Idempotent.
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
		_ = s.close(ctx)
	}
	d.cancel()
	d.wg.Wait()
	if d.ownClient {
		return d.cli.Close()
	}
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

// storeErr wraps an error of the etcd client with what was being done, and
// maps the driver-closed case to ErrClosed.
func (d *Driver) storeErr(what string, err error) error {
	if err := securityErr(err); isSecurityErr(err) {
		return fmt.Errorf("etcd: %s: %w", what, err)
	}
	if errors.Is(err, context.Canceled) && d.closeCtx.Err() != nil {
		return fmt.Errorf("etcd: %s: %w", what, metadata.ErrClosed)
	}
	if errors.Is(err, rpctypes.ErrGRPCNoSpace) || errors.Is(err, rpctypes.ErrNoSpace) {
		return fmt.Errorf("etcd: %s: %w (the etcd backend quota is exhausted: compact, defragment and disarm the NOSPACE alarm)", what, err)
	}
	return fmt.Errorf("etcd: %s: %w", what, err)
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
