// Package metadata defines Folio's metadata store: the driver interfaces every
// backend implements (etcd, ZooKeeper, an in-memory driver for
// tests and the simulator), the ledger metadata value with Apache BookKeeper's
// serialization, and the URI that selects a driver.
//
// Every change to shared state is a compare-and-set on a Version (DESIGN.md
// §3, §6 invariant 4). Drivers store exactly what Java BookKeeper stores
// (spec/metadata.md §1, §2), so both can share one cluster.
//
// # Concurrency
//
// A Driver and a Session are safe for concurrent use by many goroutines.
// Values passed in are not retained after a call returns unless stated;
// values returned belong to the caller (drivers hand out fresh copies).
//
// # Watches
//
// Watch methods return a channel the driver owns and closes. Events arrive in
// store order; a slow reader may miss intermediate states (the driver may
// coalesce), but always receives the latest one. The channel is closed when
// the context is cancelled, when the watched thing ends (ledger deleted), or
// after an event carrying an error; the driver's goroutines exit then.
package metadata

import (
	"context"
	"time"
)

// Version is the version of a stored value used for compare-and-set. For
// etcd it is the key's mod_revision; for ZooKeeper the znode version; for the
// memory driver a store-wide counter. Versions of one key strictly increase
// over its lifetime (compare numerically: larger is newer). Callers obtain
// versions from reads and writes only; they never compute them.
type Version int64

const (
	// VersionNew, as an expected version, means "the key must not exist".
	VersionNew Version = 0
	// VersionAny, as an expected version of a delete, means "whatever is
	// stored".
	VersionAny Version = -1
)

// MaxLedgerID is the largest ledger id Folio creates or accepts: Java's etcd
// listing ends before Long.MAX_VALUE, so a ledger with that id would be
// garbage-collected by Java bookies (spec/metadata.md §2.3).
const MaxLedgerID = 1<<63 - 2

// Driver is one connection to a metadata store, scoped to one cluster (the
// URI path). Close releases it; sessions opened from it end with it.
type Driver interface {
	LedgerManager
	LedgerIDGenerator
	Registration
	Cookies
	Cluster

	// OpenSession grants a lease that registrations (and AutoRecovery locks)
	// are tied to. The store keeps the lease alive while the session is
	// open and reachable; when it expires, everything under it disappears.
	OpenSession(ctx context.Context, opts SessionOptions) (Session, error)

	// Close releases the driver's resources. Open sessions end (their
	// leases are revoked if the store is reachable). Idempotent.
	Close() error
}

// LedgerManager stores ledger metadata. Keys are the ledger id; values are
// *LedgerMetadata serialized as format 3 (SerializeLedgerMetadata). Reads
// accept formats 1–3 (ParseLedgerMetadata) and report unusable values as
// ErrCorruptMetadata naming the key.
type LedgerManager interface {
	// CreateLedger allocates a new id from the id generator and stores md
	// under it, retrying with another id while the chosen key already exists
	// (ErrLedgerExists is never returned). md is validated first
	// (ErrInvalidMetadata).
	CreateLedger(ctx context.Context, md *LedgerMetadata) (ledgerID int64, v Version, err error)

	// CreateLedgerMetadata stores md under a caller-chosen id if the key is
	// absent, else ErrLedgerExists.
	CreateLedgerMetadata(ctx context.Context, ledgerID int64, md *LedgerMetadata) (Version, error)

	// ReadLedger returns the ledger's metadata and version; ErrNoSuchLedger
	// if the key is absent, ErrCorruptMetadata if present but unusable.
	ReadLedger(ctx context.Context, ledgerID int64) (*LedgerMetadata, Version, error)

	// WriteLedger replaces the metadata if the stored version equals
	// expected and returns the new version. ErrBadVersion if it differs,
	// ErrNoSuchLedger if the key is absent. expected must be a version a
	// read or write returned (not VersionNew or VersionAny).
	WriteLedger(ctx context.Context, ledgerID int64, md *LedgerMetadata, expected Version) (Version, error)

	// DeleteLedger deletes the metadata if the stored version equals expected
	// (or whatever is stored, with VersionAny). ErrBadVersion,
	// ErrNoSuchLedger as for WriteLedger.
	DeleteLedger(ctx context.Context, ledgerID int64, expected Version) error

	// ListLedgers returns up to limit (> 0) ids ≥ startID in ascending
	// order. An empty result means no more ledgers; page with
	// startID = last id + 1. A key in the ledger range that does not parse
	// as a ledger id fails the listing with ErrCorruptMetadata naming the
	// key (Java bookies' GC also stops on it). Values are not read: a
	// corrupt value is listed.
	ListLedgers(ctx context.Context, startID int64, limit int) ([]int64, error)

	// WatchLedger watches one ledger's metadata. The first event is the
	// current value; later events are newer versions, then a final
	// Deleted event if the key is deleted. ErrNoSuchLedger if absent at the
	// start. A value that fails to parse is delivered as an event with Err
	// (ErrCorruptMetadata), after which the channel closes.
	WatchLedger(ctx context.Context, ledgerID int64) (<-chan LedgerEvent, error)
}

// LedgerEvent is one state of a watched ledger.
type LedgerEvent struct {
	// Metadata and Version are the new value (nil, 0 when Deleted or Err).
	Metadata *LedgerMetadata
	Version  Version
	// Deleted: the key is gone; the last event on the channel.
	Deleted bool
	// Err: the watch failed (corrupt value, lost watch); the last event.
	Err error
}

// LedgerIDGenerator hands out ledger ids.
type LedgerIDGenerator interface {
	// GenerateLedgerID returns an id in [1, MaxLedgerID] that no earlier
	// call through any driver of the same scheme returned, as long as the
	// store's counters are intact (etcd: `buckets/NNN` versions; deleting a
	// bucket key resets its counter, which is why create still checks for
	// existence).
	GenerateLedgerID(ctx context.Context) (int64, error)
}

// BookieID is a bookie's identity: `host:port`, or a custom id (bookieId)
// that clients resolve to an address through the BookieServiceInfo of the
// bookie's registration (ResolveBookie; Java clients on etcd cannot: their
// driver reads no service info). ValidateBookieID checks it.
type BookieID string

// SessionOptions configure a session.
type SessionOptions struct {
	// TTL is the lease time-to-live: how long after the process stops
	// keeping it alive (crash, partition) its registrations vanish.
	// Java uses zkTimeout, 10 s by default; 0 means DefaultSessionTTL. The
	// store may round it (etcd: whole seconds, at least 1 s; ZooKeeper:
	// into the server's [minSessionTimeout, maxSessionTimeout]).
	TTL time.Duration

	// ServiceInfo is what the bookie registered under this session
	// publishes about itself, as the registration's value (ZooKeeper, as
	// Java does; etcd too, where Java's driver stores nothing and ignores
	// values). Nil means DefaultBookieServiceInfo of the registered id
	// (ZooKeeper) or an empty value (etcd, as Java writes).
	ServiceInfo *BookieServiceInfo
}

// DefaultSessionTTL is Java's default (zkTimeout = 10 s).
const DefaultSessionTTL = 10 * time.Second

// Session is a lease in the store.
type Session interface {
	// Done is closed when the lease is lost (expired, revoked or the
	// session closed). The store has then removed everything registered
	// under it; the owner must open a new session and register again.
	Done() <-chan struct{}

	// RegisterBookie registers id as writable, or read-only, under this
	// session: the key exists as long as the lease does. Registering
	// read-only also removes the writable registration, and the other way
	// round (a bookie is in exactly one set). Registering again with the
	// same session and mode is a no-op. If another session holds the key,
	// the driver may wait for it to expire (up to 2×TTL, as Java does) and
	// then returns ErrBookieRegistered. ErrSessionExpired if the lease is
	// gone.
	RegisterBookie(ctx context.Context, id BookieID, readOnly bool) error

	// UnregisterBookie removes the bookie's registration in the given mode;
	// a missing key is not an error.
	UnregisterBookie(ctx context.Context, id BookieID, readOnly bool) error

	// Close revokes the lease, removing everything under it. Idempotent.
	Close(ctx context.Context) error
}

// Registration is the client side of bookie membership.
type Registration interface {
	// WritableBookies and ReadOnlyBookies return the registered bookies in
	// ascending order. A registration key that is not a valid BookieID
	// fails the call with ErrCorruptMetadata naming the key.
	WritableBookies(ctx context.Context) ([]BookieID, error)
	ReadOnlyBookies(ctx context.Context) ([]BookieID, error)

	// WatchBookies watches membership. The first event is the current
	// membership, then one event per change (coalescing allowed). An event
	// with Err is the last.
	WatchBookies(ctx context.Context) (<-chan BookiesEvent, error)
}

// BookiesEvent is a snapshot of bookie membership.
type BookiesEvent struct {
	// Writable and ReadOnly are sorted ascending; the event owns them.
	Writable []BookieID
	ReadOnly []BookieID
	Err      error
}

// Cookies stores each bookie's cookie (spec/metadata.md §4). The bytes are
// opaque here (the cookie text is the bookie's business); versions are as
// for ledgers.
type Cookies interface {
	// ReadCookie returns the cookie and its version, or ErrNoSuchCookie.
	ReadCookie(ctx context.Context, id BookieID) ([]byte, Version, error)

	// WriteCookie stores data. With expected == VersionNew it creates the
	// cookie (ErrCookieExists if present); otherwise it is a CAS
	// (ErrBadVersion, or ErrNoSuchCookie if absent). Returns the new version.
	WriteCookie(ctx context.Context, id BookieID, data []byte, expected Version) (Version, error)

	// DeleteCookie deletes the cookie if its version is expected (any with
	// VersionAny); ErrBadVersion, ErrNoSuchCookie.
	DeleteCookie(ctx context.Context, id BookieID, expected Version) error

	// ListCookies returns the bookies that have a cookie, ascending: the
	// set of all bookies ever added and not decommissioned (ZooKeeper's
	// getAllBookies).
	ListCookies(ctx context.Context) ([]BookieID, error)
}

// CookieLocator is implemented by drivers that can name where a bookie's
// cookie is stored (etcd: the key; ZooKeeper: the znode), for error
// messages.
type CookieLocator interface {
	CookieKey(id BookieID) string
}

// CookieKeyOf names where md stores id's cookie: the store's key if the
// driver says, else "cookies/<id>".
func CookieKeyOf(md Cookies, id BookieID) string {
	if l, ok := md.(CookieLocator); ok {
		return l.CookieKey(id)
	}
	return "cookies/" + string(id)
}

// Cluster manages the cluster's layout and instance id.
type Cluster interface {
	// InitNewCluster writes the layout, a new random instance id and the
	// placeholder keys in one atomic step, and returns the instance id.
	// ErrClusterExists if the scope is already initialised (as
	// `bookkeeper shell initnewcluster`); `folio standalone` treats that as
	// success.
	InitNewCluster(ctx context.Context) (instanceID string, err error)

	// Format wipes the scope and initialises a new cluster (`metaformat`).
	// Without force, an existing cluster gives ErrClusterExists. With any
	// force it refuses with ErrBookiesRegistered while bookies are
	// registered. Returns the new instance id.
	Format(ctx context.Context, force bool) (instanceID string, err error)

	// ReadInstanceID returns the instance id written at init; ErrNoCluster
	// if the scope is not initialised.
	ReadInstanceID(ctx context.Context) (string, error)

	// ReadLayout returns the stored layout value (for etcd
	// "2\norg.apache.bookkeeper.metadata.etcd.EtcdLedgerManagerFactory:0");
	// ErrNoCluster if absent.
	ReadLayout(ctx context.Context) (string, error)
}
