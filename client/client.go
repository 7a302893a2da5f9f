package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/metadata"
	_ "github.com/foliodb/folio/internal/metadata/etcd" // links the etcd driver: metadata.Open("etcd://…")
	_ "github.com/foliodb/folio/internal/metadata/zk"   // links the ZooKeeper driver: metadata.Open("zk://…")
	"github.com/foliodb/folio/internal/topologyscript"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// Client is a connection to a BookKeeper cluster: its metadata store and
// its bookies. It is safe for concurrent use. Close it when done.
type Client struct {
	cfg Config
	log *slog.Logger
	md  metadata.Driver
	tr  *transport.Transport
	// resolver resolves bookie ids for tr (remembering their addresses).
	resolver *metadata.Resolver
	metrics  *clientMetrics
	health   *bookieHealth
	// clock is Config.clock: it times the machines' Ticks (speculative
	// reads, explicit LAC) and the client's own waits.
	clock clock.Clock
	// racks are the configured bookie locations (nil: none).
	racks map[metadata.BookieID]string
	// script resolves the locations of other bookies (nil: none);
	// resolveLoop runs it, woken by resolveKick (capacity 1: requests
	// coalesce).
	script      *topologyscript.Resolver
	resolveKick chan struct{}
	// policyHook, when set (tests), wraps every policy newPolicy builds.
	policyHook func(placement.Policy) placement.Policy

	// addSlots bounds outstanding appends (Config.MaxOutstandingAdds): an
	// append takes a slot before it is accepted and frees it when it
	// completes.
	addSlots chan struct{}

	// ctx is cancelled by Close; background metadata operations and the
	// bookie watch run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		// writable is the latest set of writable bookies.
		writable []metadata.BookieID
		// writers are the open write handles, told of membership changes.
		writers map[*WriteHandle]struct{}
		// readOnly is the latest set of read-only bookies.
		readOnly []metadata.BookieID
	}
}

// New connects to the metadata store named by cfg.MetadataServiceURI and
// starts watching the writable bookies. Bookie connections are opened
// lazily. ctx bounds the start only.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	md, err := metadata.Open(ctx, cfg.MetadataServiceURI, metadata.Options{DialTimeout: cfg.ConnectTimeout, Logger: cfg.Logger,
		Security: metadata.Security{TLS: cfg.MetadataTLS, User: cfg.MetadataUser, Password: cfg.MetadataPassword}})
	if err != nil {
		return nil, publicError(fmt.Errorf("client: metadata store %s: %w", cfg.MetadataServiceURI, err))
	}
	proto := wire.ProtocolV3
	if cfg.UseV2WireProtocol {
		proto = wire.ProtocolV2
	}
	resolver := metadata.NewResolver(md)
	tr, err := transport.New(transport.Config{
		Protocol:             proto,
		Dialer:               cfg.Dialer,
		ConnectTimeout:       cfg.ConnectTimeout,
		AddTimeout:           cfg.AddEntryTimeout,
		ReadTimeout:          cfg.ReadEntryTimeout,
		ConnectionsPerBookie: cfg.ConnectionsPerBookie,
		TimeoutTick:          min(cfg.AddEntryTimeout, cfg.ReadEntryTimeout) / 10,
		Logger:               cfg.Logger,
		TLS:                  cfg.TLS,
		StartTLSTimeout:      cfg.StartTLSTimeout,
		MaxFrameSize:         cfg.MaxFrameSize,
		Resolve:              resolver.Resolve,
		Clock:                cfg.clock,
	})
	if err != nil {
		md.Close()
		return nil, publicError(fmt.Errorf("client: %w: %w", err, ErrInvalidConfig))
	}
	c := &Client{
		cfg:      cfg,
		log:      cfg.Logger,
		md:       md,
		metrics:  newMetrics(cfg.Metrics),
		resolver: resolver,
		health:   newBookieHealth(cfg),
		clock:    cfg.clock,
		addSlots: make(chan struct{}, cfg.MaxOutstandingAdds),
		tr:       tr,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.writers = map[*WriteHandle]struct{}{}
	c.resolveKick = make(chan struct{}, 1)
	if err := c.loadRacks(); err != nil {
		md.Close()
		c.tr.Close()
		return nil, err
	}
	events, err := md.WatchBookies(c.ctx)
	if err == nil {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				err = errors.New("bookie watch ended")
			case ev.Err != nil:
				err = ev.Err
			default:
				c.mu.writable, c.mu.readOnly = ev.Writable, ev.ReadOnly
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		c.cancel()
		c.tr.Close()
		md.Close()
		return nil, fmt.Errorf("client: watch writable bookies: %w", err)
	}
	// The first resolution runs before New returns (bounded by ctx and
	// the script's timeout, batches in parallel), so the first placements
	// see the script's locations; later ones run in resolveLoop.
	c.resolveLocations(ctx, append(slices.Clone(c.mu.writable), c.mu.readOnly...), nil)
	c.wg.Add(1)
	go c.watchBookies(events)
	if c.script != nil {
		c.wg.Add(1)
		go c.resolveLoop()
	}
	return c, nil
}

// Close closes the client: open write handles stop (their pending appends
// fail), connections close, the metadata store is released. Ledgers are
// not closed; close write handles first to close their ledgers.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	writers := make([]*WriteHandle, 0, len(c.mu.writers))
	for w := range c.mu.writers {
		writers = append(writers, w)
	}
	c.mu.Unlock()
	for _, w := range writers {
		w.stop()
	}
	c.cancel()
	err := c.tr.Close()
	c.wg.Wait()
	if e := c.md.Close(); err == nil {
		err = e
	}
	return err
}

// Metrics returns the Metrics the client records into: Config.Metrics, or
// NopMetrics when it was nil.
//
// Until the client stopped depending on Prometheus it returned the
// client's Prometheus collectors for the application to register; now
// Config.Metrics takes clientprom.New(registerer), which registers them.
func (c *Client) Metrics() Metrics { return c.metrics.m }

// watchBookies keeps the writable set current and tells the write handles,
// whose ensemble changes choose from it. A failed watch is restarted.
func (c *Client) watchBookies(events <-chan metadata.BookiesEvent) {
	defer c.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		for ev := range events {
			if ev.Err != nil {
				c.log.Warn("bookie watch failed; restarting it", "err", ev.Err)
				break
			}
			backoff = 100 * time.Millisecond
			c.setMembership(ev.Writable, ev.ReadOnly)
		}
		for events = nil; events == nil; {
			if clock.Sleep(c.ctx, c.clock, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			var err error
			if events, err = c.md.WatchBookies(c.ctx); err != nil {
				c.log.Warn("bookie watch failed; retrying", "err", err, "backoff", backoff)
				events = nil
			}
		}
	}
}

// setMembership publishes the registered bookies to placement and the
// write handles at once, drops the reconnect backoff of bookies that
// registered (again), then has the topology script resolve newcomers
// in the background and prunes per-bookie state of bookies that left.
func (c *Client) setMembership(writable, readOnly []metadata.BookieID) {
	c.mu.Lock()
	var joined []metadata.BookieID
	for _, b := range slices.Concat(writable, readOnly) {
		if !c.registeredLocked(b) {
			joined = append(joined, b)
		}
	}
	c.mu.writable, c.mu.readOnly = writable, readOnly
	writers := make([]*WriteHandle, 0, len(c.mu.writers))
	for w := range c.mu.writers {
		writers = append(writers, w)
	}
	c.mu.Unlock()
	for _, b := range joined {
		// Registered (again): connect at once, whatever backoff its
		// absence earned.
		c.tr.Registered(string(b))
	}
	for _, w := range writers {
		w.q.Push(ledger.WritableBookies{Bookies: slices.Clone(writable)})
	}
	c.health.prune(writable, readOnly)
	c.pruneBookies()
	c.resolveLater()
}

// pruneBookies forgets the connections and remembered addresses of
// bookies that are neither registered nor in the current ensemble of an
// open write handle (issue #22 §4): on a cluster whose bookies come and go
// the client's per-bookie state stays bounded by the bookies it uses. The
// transport keeps a connection with requests outstanding (a read of an
// old ledger from a bookie that left, say) and a reconnect backoff in use
// (a dead bookie readers still ask keeps failing fast) until a later
// prune, and a pruned bookie asked again is connected afresh, so nothing
// fails for it. (Health state is pruned by bookieHealth.prune, script
// locations by resolveLoop.)
//
// It runs on a membership change and when a write handle whose ensembles
// hold an unregistered bookie closes (unregister), never on every close.
// The membership and the handles are read, and the pruning done, under
// c.mu, so two prunes never work from different snapshots: one that
// started before a bookie joined cannot forget the joiner's connection
// after a later one kept it. (Lock order: c.mu, then the transport's and
// the resolver's locks; neither calls back into the client.)
func (c *Client) pruneBookies() {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := make(map[metadata.BookieID]bool, len(c.mu.writable)+len(c.mu.readOnly))
	for _, b := range c.mu.writable {
		keep[b] = true
	}
	for _, b := range c.mu.readOnly {
		keep[b] = true
	}
	for w := range c.mu.writers {
		for b := range w.ensembleBookies() {
			keep[b] = true
		}
	}
	c.tr.Prune(func(b string) bool { return keep[metadata.BookieID(b)] })
	c.resolver.Prune(func(b metadata.BookieID) bool { return keep[b] })
}

// registeredLocked reports whether b is a writable or read-only bookie.
// Called with c.mu held.
func (c *Client) registeredLocked(b metadata.BookieID) bool {
	return slices.Contains(c.mu.writable, b) || slices.Contains(c.mu.readOnly, b)
}

func (c *Client) writable() []metadata.BookieID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mu.writable)
}

// CreateLedger creates a ledger on an ensemble chosen at random among the
// writable bookies and returns its write handle. With o.LedgerID it
// creates that ledger, or fails with ErrLedgerExists if it exists.
func (c *Client) CreateLedger(ctx context.Context, o LedgerOptions) (_ *WriteHandle, err error) {
	defer func(start time.Time) { err = c.closedError(err); observe(c.metrics.create, start, err) }(time.Now())
	return c.createLedger(ctx, o, false)
}

// createLedger creates the ledger and its write handle; explicit: the
// writer takes explicit entry ids (CreateLedgerAdv).
func (c *Client) createLedger(ctx context.Context, o LedgerOptions, explicit bool) (*WriteHandle, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.WriteFlags&DeferredSync != 0 && c.cfg.UseV2WireProtocol {
		return nil, fmt.Errorf("client: DEFERRED_SYNC needs the v3 protocol (FORCE_LEDGER)")
	}
	dig, err := digest.New(digest.Type(opts.DigestType), opts.Password)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	writable := slices.Clone(c.mu.writable)
	c.mu.Unlock()
	// The search runs without c.mu: membership, other creates and writers
	// go on meanwhile.
	ensemble, err := c.newPolicy(opts.WriteQuorumSize, opts.AckQuorumSize).NewEnsemble(opts.EnsembleSize, writable)
	if errors.Is(err, placement.ErrInvalidQuorum) {
		return nil, fmt.Errorf("client: create ledger with ensemble %d/%d/%d: %w: %w", opts.EnsembleSize, opts.WriteQuorumSize, opts.AckQuorumSize, err, ErrInvalidConfig)
	}
	if err != nil {
		return nil, publicError(fmt.Errorf("client: create ledger with ensemble size %d: %w", opts.EnsembleSize, err))
	}
	md := &metadata.LedgerMetadata{
		EnsembleSize:   opts.EnsembleSize,
		WriteQuorum:    opts.WriteQuorumSize,
		AckQuorum:      opts.AckQuorumSize,
		State:          metadata.LedgerOpen,
		LastEntryID:    -1,
		Ensembles:      []metadata.Segment{{FirstEntryID: 0, Ensemble: ensemble}},
		HasPassword:    true,
		DigestType:     metadata.DigestType(opts.DigestType),
		Password:       slices.Clone(opts.Password),
		CustomMetadata: opts.CustomMetadata,
		// Always stored, as Java stores it with
		// storeSystemTimeAsLedgerCreationTime=true; Java readers of any
		// setting read it (spec/metadata.md §1.4).
		Ctime:      time.Now().UnixMilli(),
		StoreCtime: true,
	}
	if md.Password == nil {
		md.Password = []byte{}
	}
	id, version, err := c.storeNewLedger(ctx, opts.LedgerID, md)
	if err != nil {
		return nil, err
	}
	w, err := c.newWriteHandle(id, md, version, dig, opts, explicit)
	if err != nil {
		return nil, err
	}
	c.log.Debug("ledger created", "ledger", id, "ensemble", ensemble)
	return w, nil
}

// OpenLedger opens a ledger for reading. With o.Recovery it first recovers
// the ledger (fences it, finds its end, closes it) unless it is closed
// already; without, it reads the LAC from the bookies of an open ledger.
func (c *Client) OpenLedger(ctx context.Context, id int64, o OpenOptions) (_ *ReadHandle, err error) {
	defer func(start time.Time) { err = c.closedError(err); observe(c.metrics.open, start, err) }(time.Now())
	md, version, err := c.md.ReadLedger(ctx, id)
	if err != nil {
		return nil, publicError(fmt.Errorf("client: open ledger %d: %w", id, err))
	}
	if md.HasPassword && !bytes.Equal(md.Password, o.Password) {
		return nil, fmt.Errorf("%w: ledger %d", ErrUnauthorized, id)
	}
	dt := digest.Type(md.DigestType)
	if !md.HasPassword {
		dt = digest.Type(o.DigestType)
		if dt == 0 {
			dt = digest.Type(DigestCRC32C)
		}
	}
	dig, err := digest.New(dt, o.Password)
	if err != nil {
		return nil, fmt.Errorf("client: open ledger %d: %w", id, err)
	}
	r := &ReadHandle{c: c, id: id, dig: dig, password: o.Password}
	if o.Recovery && !md.IsClosed() {
		md, err = c.recover(ctx, r, md, version)
		if err != nil {
			return nil, err
		}
	}
	r.mu.md, r.mu.lac = md, -1
	if md.IsClosed() {
		r.mu.lac = md.LastEntryID
		return r, nil
	}
	if _, err := r.readLAC(ctx, md); err != nil {
		return nil, err
	}
	return r, nil
}

// recover runs the recovery machine and returns the CLOSED metadata.
func (c *Client) recover(ctx context.Context, r *ReadHandle, md *metadata.LedgerMetadata, version metadata.Version) (*metadata.LedgerMetadata, error) {
	// Recovery may replace members that are read-only or gone: resolve
	// the ensembles' bookies the script does not know yet (bounded by ctx
	// and the script's timeout), so replacements see their locations.
	c.resolveLocations(ctx, ensembleMembers(md), nil)
	pl := c.newPolicy(md.WriteQuorum, md.AckQuorum)
	writable := c.writable()
	m := ledger.NewRecovery(ledger.RecoveryConfig{
		LedgerID:  r.id,
		Metadata:  md,
		Version:   version,
		Verifier:  r.dig,
		Placement: pl,
		Writable:  writable,
		ReadAhead: c.cfg.RecoveryReadBatchSize,

		AckedAdhering: c.ackRule(pl, md.WriteQuorum, md.AckQuorum),
	})
	var res ledger.RecoveryComplete
	err := c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		if rc, ok := eff.(ledger.RecoveryComplete); ok {
			res = rc
		}
	})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		err = publicError(fmt.Errorf("client: recover ledger %d: %w", r.id, err))
		if errors.Is(err, ledger.ErrLedgerRecovery) && !errors.Is(err, ErrLedgerRecovery) {
			// A failed recovery always matches ErrLedgerRecovery (the ledger
			// stays IN_RECOVERY, anyone may retry), besides the more specific
			// cause it may have (ErrUnauthorized, ErrNotEnoughBookies, …).
			err = &recoveryError{err}
		}
		return nil, err
	}
	c.log.Info("ledger recovered", "ledger", r.id, "last_entry", res.Metadata.LastEntryID, "length", res.Metadata.Length)
	return res.Metadata, nil
}

// ensembleMembers is every bookie of md's ensembles, once.
func ensembleMembers(md *metadata.LedgerMetadata) []metadata.BookieID {
	var out []metadata.BookieID
	for _, seg := range md.Ensembles {
		for _, b := range seg.Ensemble {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// DeleteLedger deletes the ledger's metadata; bookies garbage-collect its
// entries later. Deleting an open ledger does not stop its writer: fence it
// first (OpenLedger with Recovery) if one may be running.
func (c *Client) DeleteLedger(ctx context.Context, id int64) (err error) {
	defer func(start time.Time) { err = c.closedError(err); observe(c.metrics.del, start, err) }(time.Now())
	if err := c.md.DeleteLedger(ctx, id, metadata.VersionAny); err != nil {
		return publicError(fmt.Errorf("client: delete ledger %d: %w", id, err))
	}
	return nil
}

// recoveryError is a failed recovery whose public error is more specific
// than ErrLedgerRecovery: it matches both.
type recoveryError struct{ err error }

func (e *recoveryError) Error() string        { return e.err.Error() }
func (e *recoveryError) Unwrap() error        { return e.err }
func (e *recoveryError) Is(target error) bool { return target == ErrLedgerRecovery }
