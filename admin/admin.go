package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"

	"github.com/foliodb/folio/client"
	iadmin "github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	_ "github.com/foliodb/folio/internal/metadata/etcd" // links the etcd driver: etcd://…
	_ "github.com/foliodb/folio/internal/metadata/zk"   // links the ZooKeeper driver: zk://…
	"github.com/foliodb/folio/internal/rereplication"
)

// Config configures an Admin.
type Config struct {
	// Client is the client configuration the Admin reaches the cluster
	// with: MetadataServiceURI (required), the metadata store's security
	// (MetadataTLS, MetadataUser, MetadataPassword), the bookies' TLS,
	// ConnectTimeout and Logger are used by every operation; the rest
	// applies to the client that the recoveries run (RecoverBookie,
	// RecoverLedger), created at their first use.
	Client client.Config
}

// Errors of the admin operations, matched with errors.Is. An error may
// wrap one of these with context (which bookie, which ledger) and keeps
// its cause in the chain. Client errors (client.ErrUnauthorized,
// client.ErrLedgerRecovery, …) pass through unchanged.
var (
	// ErrNoSuchLedger: the ledger's metadata does not exist. It is
	// client.ErrNoSuchLedger (Java's BKNoSuchLedgerExistsException).
	ErrNoSuchLedger = client.ErrNoSuchLedger
	// ErrNoSuchBookie: the bookie is not registered (neither writable nor
	// read-only) where an operation needs a running bookie.
	ErrNoSuchBookie = errors.New("no such bookie")
	// ErrInvalidBookieID: a bookie id is malformed (want host:port or a
	// custom id as BookKeeper's bookieId); nothing was contacted.
	ErrInvalidBookieID = errors.New("invalid bookie id")
	// ErrInvalidLedgerID: a ledger id is negative or above the largest
	// BookKeeper allows; nothing was contacted.
	ErrInvalidLedgerID = errors.New("invalid ledger id")
	// ErrStillRegistered: DecommissionBookie refuses a bookie that is
	// still registered (writable or read-only); stop it first.
	ErrStillRegistered = errors.New("bookie is still registered")
	// ErrAutoRecoveryDisabled: TriggerAudit and DecommissionBookie refuse
	// while re-replication is switched off cluster-wide
	// (DisableAutoRecovery).
	ErrAutoRecoveryDisabled = errors.New("AutoRecovery is disabled")
	// ErrNoAuditor: no auditor is elected (no AutoRecovery process runs).
	ErrNoAuditor = errors.New("no auditor is elected")
	// ErrNoPassword: RecoverLedger of a ledger whose metadata stores no
	// password (written by an old client) needs RecoverLedgerOptions.Password.
	ErrNoPassword = errors.New("the ledger's metadata stores no password")
	// ErrNotSupported: the metadata store's driver does not offer the
	// operation (AutoRecovery and decommissioning need etcd; a zk://
	// cluster is administered with Java's tools for these).
	ErrNotSupported = errors.New("not supported by this metadata store")
	// ErrClosed: the Admin was closed.
	ErrClosed = errors.New("admin closed")
)

// Admin runs administrative operations on one cluster. It is safe for
// concurrent use. Close releases its connections.
type Admin struct {
	cfg client.Config
	log *slog.Logger
	md  metadata.Driver
	bks *rereplication.Bookies
	// placement chooses RecoverBookie's replacements by the placement
	// block of cfg (nil: at random); placement.go.
	placement *rereplication.PlacementSource

	mu struct {
		sync.Mutex
		client *client.Client
		closed bool
	}
}

// New connects to the metadata store named by cfg.Client.MetadataServiceURI
// (Java: new BookKeeperAdmin(ClientConfiguration)). Bookie connections
// and the client that recoveries use are made when first needed. ctx
// bounds the connection only.
func New(ctx context.Context, cfg Config) (*Admin, error) {
	c := cfg.Client
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = client.DefaultConnectTimeout
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	place, err := placementSource(c, log)
	if err != nil {
		return nil, err
	}
	md, err := metadata.Open(ctx, c.MetadataServiceURI, metadata.Options{DialTimeout: c.ConnectTimeout, Logger: c.Logger,
		Security: metadata.Security{TLS: c.MetadataTLS, User: c.MetadataUser, Password: c.MetadataPassword}})
	switch {
	case errors.Is(err, metadata.ErrBadURI), errors.Is(err, metadata.ErrNotBuilt):
		return nil, &publicErr{public: client.ErrInvalidConfig, cause: err}
	case err != nil:
		return nil, publicError(fmt.Errorf("cannot open the metadata store %s: %w", c.MetadataServiceURI, err))
	}
	bks := rereplication.NewBookiesTLS(0, log, c.TLS)
	bks.ResolveWith(md)
	return &Admin{cfg: c, log: log, md: md, bks: bks, placement: place}, nil
}

// Close closes the client the recoveries used, the bookie connections and
// the metadata store connection. Operations running meanwhile fail;
// closing again does nothing.
func (a *Admin) Close() error {
	a.mu.Lock()
	if a.mu.closed {
		a.mu.Unlock()
		return nil
	}
	a.mu.closed = true
	c := a.mu.client
	a.mu.Unlock()
	var errs []error
	if c != nil {
		errs = append(errs, c.Close())
	}
	errs = append(errs, a.bks.Close(), a.md.Close())
	return errors.Join(errs...)
}

// check fails with ErrClosed after Close.
func (a *Admin) check() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.closed {
		return ErrClosed
	}
	return nil
}

// client returns the recoveries' client, creating it at first use.
func (a *Admin) client(ctx context.Context) (*client.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.closed {
		return nil, ErrClosed
	}
	if a.mu.client == nil {
		c, err := client.New(ctx, a.cfg)
		if err != nil {
			return nil, err
		}
		a.mu.client = c
	}
	return a.mu.client, nil
}

// autoRecovery returns the driver's AutoRecovery side, or ErrNotSupported.
func (a *Admin) autoRecovery() (metadata.AutoRecoveryDriver, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	ar, ok := a.md.(metadata.AutoRecoveryDriver)
	if !ok {
		return nil, &publicErr{public: ErrNotSupported, cause: fmt.Errorf("AutoRecovery: %w", metadata.ErrNotSupported)}
	}
	return ar, nil
}

// Progress is what a long operation reports, through the Progress
// callback of its options, after each step. Which fields are set depends
// on the operation (Op).
type Progress struct {
	// Op is "recover" (RecoverBookie) or "decommission" (DecommissionBookie).
	Op string
	// LedgersDone of Ledgers have been handled (recover).
	LedgersDone, Ledgers int
	// EntriesCopied is the number of entries copied so far (recover).
	EntriesCopied int
	// LedgersRemaining is the number of ledgers that still store entries
	// on the bookie, and UnderReplicated the number of under-replication
	// records that still name it (decommission, after each check).
	LedgersRemaining, UnderReplicated int
}

// validBookie checks a bookie id.
func validBookie(id string) error {
	if err := metadata.ValidateBookieID(metadata.BookieID(id)); err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidBookieID, id, err)
	}
	return nil
}

// validLedger checks a ledger id.
func validLedger(id int64) error {
	if id < 0 || id > metadata.MaxLedgerID {
		return fmt.Errorf("%w: %d (want 0..%d)", ErrInvalidLedgerID, id, int64(metadata.MaxLedgerID))
	}
	return nil
}

// publicErr is an internal error given its public meaning: it matches the
// public sentinel and still unwraps to the cause, with the cause's message.
type publicErr struct {
	public error
	cause  error
}

func (e *publicErr) Error() string        { return e.cause.Error() }
func (e *publicErr) Unwrap() error        { return e.cause }
func (e *publicErr) Is(target error) bool { return target == e.public }

// publicError gives err the public sentinel of its internal cause: the
// implementation's (internal/admin) refusals, the metadata store's "no
// such ledger" and "not supported", and the client's mapping of the
// store's security errors.
func publicError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoSuchLedger), errors.Is(err, ErrNotSupported), errors.Is(err, ErrStillRegistered),
		errors.Is(err, ErrAutoRecoveryDisabled), errors.Is(err, ErrNoAuditor), errors.Is(err, ErrNoPassword):
		return err
	case errors.Is(err, iadmin.ErrStillRegistered):
		return &publicErr{public: ErrStillRegistered, cause: err}
	case errors.Is(err, iadmin.ErrAutoRecoveryDisabled):
		return &publicErr{public: ErrAutoRecoveryDisabled, cause: err}
	case errors.Is(err, iadmin.ErrNoAuditor):
		return &publicErr{public: ErrNoAuditor, cause: err}
	case errors.Is(err, iadmin.ErrNoPassword):
		return &publicErr{public: ErrNoPassword, cause: err}
	case errors.Is(err, metadata.ErrNoSuchLedger):
		return &publicErr{public: ErrNoSuchLedger, cause: err}
	case errors.Is(err, metadata.ErrNotSupported):
		return &publicErr{public: ErrNotSupported, cause: err}
	case errors.Is(err, metadata.ErrAuthFailed), errors.Is(err, metadata.ErrPermissionDenied):
		return &publicErr{public: client.ErrMetadataAuth, cause: err}
	case errors.Is(err, metadata.ErrTLS):
		return &publicErr{public: client.ErrMetadataTLS, cause: err}
	case errors.Is(err, metadata.ErrBadSecurity):
		return &publicErr{public: client.ErrInvalidConfig, cause: err}
	}
	return err
}

// LedgerMetadata returns ledger id's metadata as stored (Java:
// getLedgerMetadata): ensembles, quorums, state, end, custom metadata.
// It is client.Client.LedgerMetadata, through the Admin's client.
// ErrInvalidLedgerID, ErrNoSuchLedger.
func (a *Admin) LedgerMetadata(ctx context.Context, id int64) (client.LedgerMetadata, error) {
	if err := validLedger(id); err != nil {
		return client.LedgerMetadata{}, err
	}
	c, err := a.client(ctx)
	if err != nil {
		return client.LedgerMetadata{}, err
	}
	return c.LedgerMetadata(ctx, id)
}

// ListLedgers streams every ledger id in ascending order, a page at a
// time (Java: listLedgers). It is client.Client.ListLedgers, through the
// Admin's client; an error is yielded once and ends the sequence.
func (a *Admin) ListLedgers(ctx context.Context) iter.Seq2[int64, error] {
	return func(yield func(int64, error) bool) {
		c, err := a.client(ctx)
		if err != nil {
			yield(0, err)
			return
		}
		for id, err := range c.ListLedgers(ctx) {
			if !yield(id, err) || err != nil {
				return
			}
		}
	}
}
