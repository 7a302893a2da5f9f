package metadata

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// URI is a parsed metadata service URI, as BookKeeper's ServiceURI:
// `etcd://host1:2379;host2:2379/ledgers`.
type URI struct {
	// Scheme is the driver name, lower case ("etcd", "zk", "memory").
	// For `zk+hierarchical://…` it is "zk" and SchemeType "hierarchical".
	Scheme     string
	SchemeType string
	// Hosts are the authority's hosts in order (';' or ',' separated),
	// each `host[:port]`.
	Hosts []string
	// Scope is the percent-decoded path, e.g. "/ledgers": the prefix of every
	// key. It is non-empty and has no trailing slash (Java would build
	// `/ledgers//layout` from `/ledgers/`, a different cluster).
	Scope string
	// UserInfo is the authority's user information (`user:password@`), as
	// written; Java parses and ignores it. A driver that cannot
	// authenticate refuses a URI that has it rather than ignore it.
	UserInfo string
}

// String renders the URI back (hosts joined by ';').
func (u *URI) String() string {
	s := u.Scheme
	if u.SchemeType != "" {
		s += "+" + u.SchemeType
	}
	return s + "://" + strings.Join(u.Hosts, ";") + (&url.URL{Path: u.Scope}).EscapedPath()
}

// ParseURI parses and checks a metadata service URI. Errors wrap ErrBadURI.
// The scheme is not checked against the registered drivers (Open does it).
func ParseURI(s string) (*URI, error) {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadURI, s, why) }
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return nil, bad("want scheme://hosts/path, e.g. etcd://127.0.0.1:2379/ledgers")
	}
	u := &URI{}
	u.Scheme, u.SchemeType, _ = strings.Cut(strings.ToLower(scheme), "+")
	authority, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		u.UserInfo, authority = authority[:i], authority[i+1:] // the drivers decide (etcd ignores it, as Java does)
	}
	for _, h := range strings.FieldsFunc(authority, func(r rune) bool { return r == ';' || r == ',' }) {
		if h = strings.TrimSpace(h); h != "" {
			u.Hosts = append(u.Hosts, h)
		}
	}
	if strings.ContainsAny(path, "?#") {
		return nil, bad("query and fragment are not allowed")
	}
	scope, err := url.PathUnescape("/" + path)
	if err != nil {
		return nil, bad(err.Error())
	}
	if scope == "/" || scope == "" {
		return nil, bad("the path (the metadata scope, e.g. /ledgers) must not be empty")
	}
	if strings.HasSuffix(scope, "/") {
		return nil, bad("the path must not end with '/'")
	}
	u.Scope = scope
	return u, nil
}

// Options are given to a driver factory. Every zero value means the
// driver's default.
type Options struct {
	// DialTimeout bounds connecting to the store.
	DialTimeout time.Duration

	// A driver retries a request that failed because the store was
	// unavailable (e.g. etcd electing a new leader, or without a quorum of
	// members) until it succeeds or its context ends, so that callers ride
	// through a fail-over. RequestTimeout bounds one attempt (a request sent
	// to a member that has just died is abandoned after it and tried
	// again); RetryBackoff is the pause after the first failed attempt,
	// doubled after each further one up to RetryBackoffMax.
	RequestTimeout  time.Duration
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration

	// Logger receives the driver's own warnings (a request failing and
	// being retried, and its eventual success); nil discards them.
	Logger *slog.Logger

	// Security protects the connection and authenticates to the store.
	// A driver that cannot honour a setting refuses to open
	// (ErrNotSupported) rather than connect with less than was asked.
	Security Security
}

// Security is how a driver protects its connection to the store and who it
// authenticates as. The zero value is a plaintext, anonymous connection.
//
// On etcd, the URI says whether the connection is TLS: etcd+https://… is,
// etcd:// is not. TLS with an etcd:// URI is refused as ambiguous, and an
// etcd+https:// URI without TLS uses the system's roots and no client
// certificate.
type Security struct {
	// TLS is the client side of the connection: the CAs that sign the
	// store's certificate (RootCAs) and the certificate presented to it
	// (Certificates), for stores that require client certificates. The
	// driver does not modify it.
	TLS *tls.Config
	// User and Password authenticate to the store (etcd's user/password
	// authentication): both or neither.
	User, Password string
}

// IsZero reports whether s asks for nothing.
func (s Security) IsZero() bool { return s.TLS == nil && s.User == "" && s.Password == "" }

// Check refuses a half-given user/password pair.
func (s Security) Check() error {
	switch {
	case s.User != "" && s.Password == "":
		return fmt.Errorf("%w: a metadata store user (%q) needs a password", ErrBadSecurity, s.User)
	case s.User == "" && s.Password != "":
		return fmt.Errorf("%w: a metadata store password is given without a user", ErrBadSecurity)
	}
	return nil
}

// Factory opens a driver for a parsed URI.
type Factory func(ctx context.Context, u *URI, opts Options) (Driver, error)

var registry struct {
	sync.Mutex
	factories map[string]Factory
}

// RegisterDriver makes a driver available to Open under scheme (lower
// case). Driver packages call it from init; registering a scheme twice
// panics (a wiring bug).
func RegisterDriver(scheme string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if registry.factories == nil {
		registry.factories = map[string]Factory{}
	}
	if _, dup := registry.factories[scheme]; dup {
		panic("metadata: driver registered twice: " + scheme)
	}
	registry.factories[scheme] = f
}

// Open parses uri and opens the driver registered for its scheme. `zk` and
// `zk+<type>` give ErrNotBuilt when the ZooKeeper driver is not linked into
// the program; an unknown or unregistered scheme gives ErrBadURI listing the
// registered ones. Pulsar's `metadata-store:…` URIs are refused, naming the
// scheme.
func Open(ctx context.Context, uri string, opts Options) (Driver, error) {
	if strings.HasPrefix(strings.ToLower(uri), "metadata-store:") {
		return nil, fmt.Errorf("%w %q: scheme \"metadata-store\" (Pulsar's metadata-store driver) is not supported: point Folio at the ZooKeeper or etcd cluster itself (zk://host:2181/ledgers, etcd://host:2379/ledgers)", ErrBadURI, uri)
	}
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	registry.Lock()
	f := registry.factories[u.Scheme]
	var known []string
	for k := range registry.factories {
		known = append(known, k)
	}
	registry.Unlock()
	if f == nil {
		if u.Scheme == "zk" {
			return nil, fmt.Errorf("%w (import github.com/foliodb/folio/internal/metadata/zk)", ErrNotBuilt)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("%w %q: unknown scheme %q (known: %s)", ErrBadURI, uri, u.Scheme, strings.Join(known, ", "))
	}
	return f(ctx, u, opts)
}
