package autorecovery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/wire"
)

// DefaultWorkers is the number of replication workers of a Service.
const DefaultWorkers = 1

// ServiceConfig configures a Service. Zero values take the defaults of
// AuditorConfig and WorkerConfig.
type ServiceConfig struct {
	// Driver is the metadata store (a metadata.AutoRecoveryDriver), shared
	// by the auditor and the workers. The caller owns it: close it after
	// Stop.
	Driver metadata.Driver
	// MetadataServiceURI names the same store, for the client the workers
	// fence and close OPEN ledgers with. Required.
	MetadataServiceURI string
	// MetadataSecurity is how that client connects to the store: the
	// Driver's TLS and credentials.
	MetadataSecurity metadata.Security
	// ID names this process in the auditor election and in the workers'
	// locks (host:port; a bookie uses its bookie id).
	ID metadata.BookieID
	// Workers is the number of replication workers: 0 means
	// DefaultWorkers, < 0 none (only the auditor candidate).
	Workers int
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// Metrics, if not nil, records the auditor's and the workers' work.
	Metrics *Metrics
	// BookieTLS, if set, secures every bookie connection of the auditor
	// and the workers (client.Config.TLS): a bookie's AutoRecovery uses the
	// bookie's TLS client settings, as Java's does.
	BookieTLS *tls.Config
	// StartTLSTimeout bounds the START_TLS exchange of the workers' client
	// (client.Config.StartTLSTimeout; 0: its default).
	StartTLSTimeout time.Duration

	// Auditor and Worker are the knobs of the auditor candidate and of
	// every worker (SessionTTL, LostBookieRecoveryDelay, the check
	// intervals, OpenLedgerRereplicationGracePeriod, PollInterval,
	// FailureBackoff, RateLimitBytesPerSecond, ...). Their Driver, ID,
	// Logger and Metrics, the auditor's Bookies, and the workers' Client
	// and Bookies, are the Service's: whatever is set there is replaced.
	Auditor AuditorConfig
	Worker  WorkerConfig
	// Client, if not nil, adjusts the configuration of the workers'
	// client (the placement settings its fencing recoveries write back
	// under) before it is created.
	Client func(*client.Config)
}

// Service is the AutoRecovery of one process (`folio autorecovery`, a
// standalone, or a bookie with autoRecoveryDaemonEnabled): one auditor
// candidate and N replication workers, with the client and the bookie
// connections the workers share. It runs from StartService until Stop.
type Service struct {
	id      metadata.BookieID
	workers int
	log     *slog.Logger
	client  *client.Client
	bookies *rereplication.Bookies
	cancel  context.CancelFunc
	done    chan struct{} // closed once every component has returned
	failed  chan error    // the first component that returned while running

	stopOnce sync.Once
	stopErr  error
}

// Validate reports a configuration StartService refuses: Driver and
// MetadataServiceURI are required. The auditor's and the workers' own
// settings are checked by NewAuditor and NewWorker.
func (c ServiceConfig) Validate() error {
	if c.Driver == nil || c.MetadataServiceURI == "" {
		return errors.New("autorecovery: Driver and MetadataServiceURI are required")
	}
	return nil
}

// StartService starts the auditor candidate and the workers. ctx bounds
// the start only: the Service runs until Stop, so that its owner decides
// the order of a shutdown (AutoRecovery before the bookies it repairs onto).
func StartService(ctx context.Context, cfg ServiceConfig) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Workers == 0:
		cfg.Workers = DefaultWorkers
	case cfg.Workers < 0:
		cfg.Workers = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	bookies := rereplication.NewBookiesTLS(0, cfg.Logger, cfg.BookieTLS)
	bookies.ResolveWith(cfg.Driver)
	ac := cfg.Auditor
	ac.Driver, ac.ID, ac.Logger, ac.Metrics, ac.Bookies = cfg.Driver, cfg.ID, cfg.Logger, cfg.Metrics, bookies
	a, err := NewAuditor(ac)
	if err != nil {
		bookies.Close()
		return nil, err
	}
	// The workers' client reads frames of any size a bookie may be
	// configured to take (nettyMaxFrameSizeBytes up to
	// wire.MaxFrameSizeLimit): re-replication copies every entry.
	ccfg := client.Config{MetadataServiceURI: cfg.MetadataServiceURI, TLS: cfg.BookieTLS, StartTLSTimeout: cfg.StartTLSTimeout,
		MaxFrameSize: wire.MaxFrameSizeLimit,
		MetadataTLS:  cfg.MetadataSecurity.TLS, MetadataUser: cfg.MetadataSecurity.User, MetadataPassword: cfg.MetadataSecurity.Password}
	if cfg.Client != nil {
		cfg.Client(&ccfg)
	}
	cl, err := client.New(ctx, ccfg)
	if err != nil {
		bookies.Close()
		return nil, fmt.Errorf("autorecovery: client: %w", err)
	}
	s := &Service{id: cfg.ID, workers: cfg.Workers, log: cfg.Logger, client: cl, bookies: bookies,
		done: make(chan struct{}), failed: make(chan error, 1)}
	ws := make([]*Worker, 0, cfg.Workers)
	for range cfg.Workers {
		wc := cfg.Worker
		wc.Driver, wc.Client, wc.Bookies, wc.ID, wc.Logger, wc.Metrics = cfg.Driver, cl, s.bookies, cfg.ID, cfg.Logger, cfg.Metrics
		w, err := NewWorker(wc)
		if err != nil {
			s.bookies.Close()
			cl.Close()
			return nil, err
		}
		ws = append(ws, w)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			// Run returns only when rctx ends; anything else is a failure.
			if err := f(rctx); rctx.Err() == nil {
				select {
				case s.failed <- fmt.Errorf("%s stopped unexpectedly: %w", name, err):
				default:
				}
			}
		})
	}
	run("auditor", a.Run)
	for i, w := range ws {
		run(fmt.Sprintf("replication worker %d", i), w.Run)
	}
	go func() { wg.Wait(); close(s.done) }()
	s.log.Info("autorecovery running", "id", cfg.ID, "workers", cfg.Workers, "metadata", cfg.MetadataServiceURI)
	return s, nil
}

// ID is the Service's id in the election and in locks.
func (s *Service) ID() metadata.BookieID { return s.id }

// Workers is the number of replication workers running.
func (s *Service) Workers() int { return s.workers }

// Failed receives the error of the first component (the auditor candidate
// or a worker) that returned before Stop; they retry operating errors
// themselves, so this is a bug, not an outage. At most one value is sent;
// the channel is never closed.
func (s *Service) Failed() <-chan error { return s.failed }

// Stop stops the auditor candidate and the workers (their election and
// locks pass to other processes), waits for them within ctx, then closes
// the client and the bookie connections. Idempotent: later calls return
// the first call's result. The Driver stays open.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.cancel()
		var errs []error
		select {
		case <-s.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("autorecovery: components still running: %w", ctx.Err()))
		}
		errs = append(errs, s.bookies.Close(), s.client.Close())
		s.stopErr = errors.Join(errs...)
		s.log.Info("autorecovery stopped", "id", s.id)
	})
	return s.stopErr
}
