package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// HTTPCluster is the cluster side of a bookie's admin HTTP server
// (server.ClusterAdmin): what BookKeeper's services do with a BookKeeper
// client and BookKeeperAdmin. The client is created at first use and
// closed by Close; recoveries and decommissions started over HTTP run in
// the background, as Java's do, until they finish or Close cancels them.
type HTTPCluster struct {
	md        metadata.Driver
	newClient func(ctx context.Context) (*client.Client, error)
	bks       *rereplication.Bookies
	log       *slog.Logger

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		client *client.Client
		closed bool
	}
}

// NewHTTPCluster returns the cluster operations over md; newClient makes
// the BookKeeper client (on the process's metadata store and TLS
// settings) and bks reaches the bookies directly (GET_BOOKIE_INFO,
// fragment copies). HTTPCluster closes bks and the client.
func NewHTTPCluster(md metadata.Driver, newClient func(ctx context.Context) (*client.Client, error), bks *rereplication.Bookies, log *slog.Logger) *HTTPCluster {
	if log == nil {
		log = slog.Default()
	}
	h := &HTTPCluster{md: md, newClient: newClient, bks: bks, log: log}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// client returns the client, creating it at first use.
func (h *HTTPCluster) client(ctx context.Context) (*client.Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return nil, errors.New("admin: the HTTP cluster operations are closed")
	}
	if h.mu.client == nil {
		c, err := h.newClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("admin: BookKeeper client: %w", err)
		}
		h.mu.client = c
	}
	return h.mu.client, nil
}

// Close cancels the background operations, waits for them, and closes
// the client and the bookie connections.
func (h *HTTPCluster) Close() error {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return nil
	}
	h.mu.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	var errs []error
	if h.mu.client != nil {
		errs = append(errs, h.mu.client.Close())
	}
	errs = append(errs, h.bks.Close())
	return errors.Join(errs...)
}

// background runs op in the background under h's context.
func (h *HTTPCluster) background(what string, op func(ctx context.Context) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return errors.New("admin: the HTTP cluster operations are closed")
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		start := time.Now()
		if err := op(h.ctx); err != nil {
			h.log.Error(what+" failed", "err", err)
			return
		}
		h.log.Info(what+" done", "took", time.Since(start).Round(time.Millisecond))
	}()
	return nil
}

// BookieInfo implements server.ClusterAdmin.
func (h *HTTPCluster) BookieInfo(ctx context.Context, fn func(id metadata.BookieID, free, total uint64)) error {
	reg, err := ListBookies(ctx, h.md, true, true)
	if err != nil {
		return err
	}
	ids := make([]string, len(reg))
	for i, b := range reg {
		ids[i] = b.ID
	}
	for _, in := range GetBookieInfo(ctx, h.bks, ids) {
		if in.Error == "" && in.FreeDiskSpace >= 0 && in.TotalDiskCapacity >= 0 {
			fn(metadata.BookieID(in.ID), uint64(in.FreeDiskSpace), uint64(in.TotalDiskCapacity))
		}
	}
	return nil
}

// ReadEntries implements server.ClusterAdmin: an open without recovery
// (nothing is fenced), with the ledger's own password, as BookKeeperAdmin
// reads; entries past the last add confirmed are not read.
func (h *HTTPCluster) ReadEntries(ctx context.Context, ledgerID, first, last int64, max int, fn func(entryID int64, data []byte)) error {
	m, _, err := h.md.ReadLedger(ctx, ledgerID)
	if err != nil {
		return err
	}
	c, err := h.client(ctx)
	if err != nil {
		return err
	}
	r, err := c.OpenLedger(ctx, ledgerID, client.OpenOptions{Password: m.Password})
	if err != nil {
		return err
	}
	defer r.Close()
	lac, err := r.ReadLastAddConfirmed(ctx)
	if err != nil {
		return err
	}
	if last < 0 || last > lac {
		last = lac
	}
	last = min(last, first+int64(max)-1)
	if last < first {
		return nil
	}
	entries, err := r.Read(ctx, first, last)
	for _, e := range entries {
		fn(e.ID, e.Payload)
	}
	return err
}

// DeleteLedger implements server.ClusterAdmin.
func (h *HTTPCluster) DeleteLedger(ctx context.Context, ledgerID int64) error {
	return h.md.DeleteLedger(ctx, ledgerID, metadata.VersionAny)
}

// StartRecoverBookie implements server.ClusterAdmin (RecoverBookie in the
// background, then the cookie deletion if asked).
func (h *HTTPCluster) StartRecoverBookie(bookie metadata.BookieID, deleteCookie bool) error {
	return h.background(fmt.Sprintf("recovery of bookie %s", bookie), func(ctx context.Context) error {
		c, err := h.client(ctx)
		if err != nil {
			return err
		}
		res, err := RecoverBookie(ctx, c, h.bks, h.md, []metadata.BookieID{bookie}, RecoverBookieOptions{})
		if err != nil {
			return err
		}
		if len(res.Failed) > 0 {
			return fmt.Errorf("%d ledgers failed (re-run the recovery): %v", len(res.Failed), res.Failed)
		}
		if deleteCookie {
			if err := h.md.DeleteCookie(ctx, bookie, metadata.VersionAny); err != nil && !errors.Is(err, metadata.ErrNoSuchCookie) {
				return fmt.Errorf("deleting the cookie of %s: %w", bookie, err)
			}
		}
		return nil
	})
}

// StartDecommission implements server.ClusterAdmin: it refuses at once a
// bookie that is still registered, then decommissions in the background.
func (h *HTTPCluster) StartDecommission(bookie metadata.BookieID) error {
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	reg, err := ListBookies(ctx, h.md, true, true)
	if err != nil {
		return err
	}
	for _, b := range reg {
		if b.ID == string(bookie) {
			return fmt.Errorf("%w: %s is %s; stop it first", ErrStillRegistered, bookie, b.State)
		}
	}
	return h.background(fmt.Sprintf("decommission of bookie %s", bookie), func(ctx context.Context) error {
		return DecommissionBookie(ctx, h.md, bookie, DecommissionOptions{})
	})
}

// TriggerAudit implements server.ClusterAdmin.
func (h *HTTPCluster) TriggerAudit(ctx context.Context) error {
	ar, ok := h.md.(metadata.AutoRecoveryDriver)
	if !ok {
		return fmt.Errorf("trigger audit: %w", metadata.ErrNotSupported)
	}
	return TriggerAudit(ctx, ar)
}
