package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

func init() {
	shellSubcommands = append(shellSubcommands, newBookieFormatCommand)
}

// bookieFlags are the flags of commands that read a bookie configuration.
type bookieFlags struct {
	conf string
	set  []string
}

func (f *bookieFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.conf, "conf", "", "bookie configuration file (Java .properties, as bk_server.conf)")
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "override a configuration key: --set key=value (repeatable; after $FOLIO_* variables)")
}

func (f *bookieFlags) load(env Env, log *slog.Logger) (server.Config, error) {
	cfg, err := server.LoadConfig(f.conf, server.Overrides{Getenv: env.Getenv, Environ: env.Environ, Set: f.set}, log)
	if err != nil {
		return cfg, WithHint(err, "fix the configuration file or the overrides ($BK_<key>, $PULSAR_PREFIX_<key>, $FOLIO_<KEY>, --set key=value)")
	}
	return cfg, nil
}

// loadLogged loads the configuration with the logger the flags and the
// configuration's logLevel and logFormat ask for (the flags win), so that
// the configuration's own warnings come out in that form.
func (f *bookieFlags) loadLogged(env Env, lf *logFlags, w io.Writer) (server.Config, *slog.Logger, error) {
	// A first, silent load reads logLevel and logFormat; its errors are
	// the second load's, which reports them.
	pre, _ := server.LoadConfig(f.conf, server.Overrides{Getenv: env.Getenv, Environ: env.Environ, Set: f.set}, nil)
	log := lf.logger(w, pre.LogLevel, pre.LogFormat)
	cfg, err := f.load(env, log)
	return cfg, log, err
}

// cookieHint turns a cookie refusal into the CLI's error-with-hint.
func cookieHint(err error) error {
	var ce *server.CookieError
	if errors.As(err, &ce) {
		return WithHint(err, ce.Hint)
	}
	return err
}

func newBookieCommand(env Env) *cobra.Command {
	var f bookieFlags
	var lf logFlags
	var readOnly, withAutoRecovery, printConfig bool
	cmd := &cobra.Command{
		Use:   "bookie --conf FILE",
		Short: "Run a bookie",
		Long: "Run one bookie: the BookKeeper protocol on bookiePort (default 3181) and, with\n" +
			"httpServerEnabled=true, the admin HTTP server on httpServerPort (default 8080).\n" +
			"Security settings (metadataServiceTls*, metadataServiceUser, httpServerTlsEnable,\n" +
			"httpServerAuthTokenPath, ...) are checked before anything is contacted: a missing\n" +
			"or unusable file, or a setting Folio cannot honour, stops the start. The configuration is a\n" +
			"bk_server.conf-style file; $BK_<key> (the BookKeeper image's convention), then\n" +
			"$PULSAR_PREFIX_<key> (Pulsar's), then $FOLIO_<KEY> variables (e.g. FOLIO_BOOKIE_PORT,\n" +
			"FOLIO_METADATA_SERVICE_URI), then --set key=value override it, in that order.\n" +
			"BookKeeper keys Folio does not support refuse the start when they would change what\n" +
			"the bookie does (docs/operations.md, bk_server.conf keys); --print-config shows every\n" +
			"key's effective value and source.\n" +
			"With autoRecoveryDaemonEnabled=true (or --autorecovery) the process also runs\n" +
			"AutoRecovery under the bookie's id: an auditor candidate and a replication\n" +
			"worker, as `folio autorecovery` does.\n" +
			"SIGTERM or Ctrl-C stops it gracefully (AutoRecovery first).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			if readOnly {
				f.set = append(f.set, "forceReadOnlyBookie=true")
			}
			if cmd.Flags().Changed("autorecovery") {
				f.set = append(f.set, "autoRecoveryDaemonEnabled="+strconv.FormatBool(withAutoRecovery))
			}
			cfg, log, err := f.loadLogged(env, &lf, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if printConfig {
				return cfg.WriteEffective(cmd.OutOrStdout())
			}
			return runBookie(cmd.Context(), cfg, log)
		},
	}
	f.register(cmd)
	lf.register(cmd)
	cmd.Flags().BoolVar(&printConfig, "print-config", false, "print the effective configuration (every key, its value and its source) and exit; a configuration the bookie would refuse exits 1")
	cmd.Flags().BoolVar(&readOnly, "readonly", false, "run read-only for the life of the process (forceReadOnlyBookie=true, Java's bookie -readOnly)")
	cmd.Flags().BoolVar(&withAutoRecovery, "autorecovery", false, "also run AutoRecovery in this process (autoRecoveryDaemonEnabled; --autorecovery=false overrides the file)")
	return cmd
}

// runBookie runs a bookie until ctx ends or it fails, then stops it. With
// cfg.AutoRecovery.Enabled it also runs AutoRecovery from the bookie's
// registration on, and stops it before the bookie.
func runBookie(ctx context.Context, cfg server.Config, log *slog.Logger) error {
	opts := server.ProcessOptions{Logger: log, ClusterAdmin: httpClusterAdmin(cfg, log)}
	if cfg.AutoRecovery.Enabled {
		// One registry, so that AutoRecovery's metrics are served with the
		// bookie's on its admin HTTP server.
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	p, err := server.StartProcess(ctx, cfg, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return cookieHint(fmt.Errorf("starting the bookie: %w", err))
	}
	var ar *bookieAutoRecovery
	var failure error
	if cfg.AutoRecovery.Enabled {
		ar, failure = startBookieAutoRecovery(ctx, cfg, p, opts.Registry, log)
	}
	// A failed AutoRecovery stops the bookie too, with a non-zero exit, as
	// a failed bookie does. Its parts retry every operating error
	// themselves (sessions, metadata, bookies), so a failure is a bug or a
	// start that cannot succeed; running on without it would leave the
	// cluster silently short of the auditor candidate and worker the
	// operator configured (Java's BookieServer only logs it), while an exit
	// is seen by whatever supervises the bookie, which restarts both.
	if failure == nil {
		select {
		case <-ctx.Done():
		case <-p.Failed():
			failure = fmt.Errorf("bookie %s failed: %w", p.ID(), p.Err())
		case err := <-ar.failed():
			failure = fmt.Errorf("AutoRecovery of bookie %s failed: %w", p.ID(), err)
		}
	}
	if failure != nil {
		log.Error("stopping the bookie", "err", failure)
	}
	if ar != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		if err := ar.stop(actx); err != nil {
			log.Warn("AutoRecovery stopped uncleanly", "err", err)
		}
		cancel()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout+2*time.Second)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		log.Error("unclean shutdown", "err", err)
	}
	return failure
}

// bookieAutoRecovery is the AutoRecovery inside a bookie process
// (autoRecoveryDaemonEnabled) with the metadata store it owns.
type bookieAutoRecovery struct {
	svc *autorecovery.Service
	md  metadata.Driver
}

// startBookieAutoRecovery waits until p is registered, then starts
// AutoRecovery under p's id on its own handle of the bookie's metadata
// store. It waits so that an auditor elected here does not find its own
// bookie missing and mark its ledgers. It returns nil, nil if p fails or
// ctx ends first (the caller sees that).
func startBookieAutoRecovery(ctx context.Context, cfg server.Config, p *server.Process, reg *prometheus.Registry, log *slog.Logger) (*bookieAutoRecovery, error) {
	select {
	case <-p.Registered():
	case <-p.Failed():
		return nil, nil
	case <-ctx.Done():
		return nil, nil
	}
	// The bookie's TLS client settings, as Java's AutoRecovery builds its
	// client from the bookie's configuration (checked at start-up).
	bookieTLS, err := cfg.Security.ClientTLS(nil, log)
	if err != nil {
		return nil, fmt.Errorf("AutoRecovery: %w", err)
	}
	md, err := metadata.Open(ctx, cfg.MetadataServiceURI, metadata.Options{Logger: log, Security: p.MetadataSecurity()})
	if err != nil {
		return nil, fmt.Errorf("AutoRecovery: open the metadata store %s: %w", cfg.MetadataServiceURI, err)
	}
	ard, _ := md.(metadata.AutoRecoveryDriver) // nil: StartService reports it
	metrics := autorecovery.NewMetrics(ard)
	auditor, worker := autoRecoveryKnobs(cfg)
	pl, clientPlacement, err := bookiePlacement(cfg.Placement, log)
	if err != nil {
		md.Close()
		return nil, fmt.Errorf("AutoRecovery: %w", err)
	}
	worker.PlacementSource = pl
	svc, err := autorecovery.StartService(ctx, autorecovery.ServiceConfig{
		Driver: md, MetadataServiceURI: cfg.MetadataServiceURI, MetadataSecurity: p.MetadataSecurity(), ID: p.ID(),
		Logger: log, Metrics: metrics, BookieTLS: bookieTLS, StartTLSTimeout: cfg.Security.StartTLSTimeoutOrDefault(),
		Auditor: auditor, Worker: worker, Client: clientPlacement,
	})
	if err != nil {
		md.Close()
		return nil, fmt.Errorf("AutoRecovery: %w", err)
	}
	if reg != nil {
		reg.MustRegister(metrics)
	}
	return &bookieAutoRecovery{svc: svc, md: md}, nil
}

// autoRecoveryKnobs maps the bookie's AutoRecovery keys onto the auditor's
// and the workers' settings. The sessions last zkTimeout, as Java's
// AutoRecovery's ZooKeeper session does.
func autoRecoveryKnobs(cfg server.Config) (autorecovery.AuditorConfig, autorecovery.WorkerConfig) {
	// In bk_server.conf 0 switches a periodic check off; in AuditorConfig
	// 0 means the default and < 0 off.
	off := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	c := cfg.AutoRecovery
	return autorecovery.AuditorConfig{
			SessionTTL:                   cfg.SessionTTL,
			LostBookieRecoveryDelay:      c.LostBookieRecoveryDelay,
			BookieCheckInterval:          off(c.BookieCheckInterval),
			LedgerCheckInterval:          off(c.LedgerCheckInterval),
			LedgerVerificationPercentage: c.LedgerVerificationPercentage,
			PlacementPolicyCheckInterval: off(c.PlacementPolicyCheckInterval),
		}, autorecovery.WorkerConfig{
			SessionTTL:                         cfg.SessionTTL,
			OpenLedgerRereplicationGracePeriod: c.OpenLedgerRereplicationGracePeriod,
			PollInterval:                       c.PollInterval,
			FailureBackoff:                     c.RereplicateBackoff,
			RateLimitBytesPerSecond:            max(c.RateLimitBytesPerSecond, 0),
			LedgerVerificationPercentage:       c.LedgerVerificationPercentage, // the auditor's, as it asks
		}
}

// failed is the Service's Failed channel; nil (never ready) without one.
func (a *bookieAutoRecovery) failed() <-chan error {
	if a == nil {
		return nil
	}
	return a.svc.Failed()
}

// stop stops the Service, then closes its metadata store.
func (a *bookieAutoRecovery) stop(ctx context.Context) error {
	return errors.Join(a.svc.Stop(ctx), a.md.Close())
}

// nonInteractiveFlag adds BookKeeper's -nonInteractive to a command that
// deletes data: Folio never prompts, so the flag changes nothing, and
// --force stays the only confirmation.
func nonInteractiveFlag(cmd *cobra.Command) {
	cmd.Flags().Bool("non-interactive", false, "accepted for BookKeeper's -nonInteractive: Folio never prompts; --force confirms")
}

func newBookieFormatCommand(o *ShellOptions) *cobra.Command {
	var f bookieFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "bookieformat --conf FILE --force",
		Short: "Reset a bookie: wipe its local data and its cookie",
		Long: "Delete everything in the bookie's journal, ledger and index directories\n" +
			"(their current/ subdirectories, cookies included) and its cookie in the\n" +
			"metadata store, so that it starts as a new, empty bookie. Its data is gone:\n" +
			"make sure its ledgers are replicated elsewhere first. Refuses while the bookie\n" +
			"is registered (running). The metadata store is the configuration's\n" +
			"metadataServiceUri unless --metadata-service-uri is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !force {
				return Usagef(cmd, "bookieformat deletes the bookie's data; confirm with --force")
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
			cfg, err := f.load(o.env, log)
			if err != nil {
				return err
			}
			if fl := cmd.Flag("metadata-service-uri"); fl != nil && fl.Changed {
				cfg.MetadataServiceURI = o.MetadataServiceURI
			}
			id, err := cfg.BookieID(cfg.BookiePort)
			if err != nil {
				return WithHint(err, "the bookie id comes from advertisedAddress and bookiePort in the configuration")
			}
			ctx := cmd.Context()
			so := *o
			so.MetadataServiceURI = cfg.MetadataServiceURI
			if !o.metadataSec.given() {
				// The configuration's metadata store settings, unless the
				// shell's flags say otherwise.
				sec, err := cfg.LoadMetadataSecurity()
				if err != nil {
					return WithHint(err, "fix the configuration file or give the shell's --metadata-tls-* and --metadata-user flags")
				}
				if !sec.IsZero() {
					so.security = &sec
				}
			}
			d, err := openMetadata(ctx, &so)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := server.FormatBookie(ctx, d, &cfg, id); err != nil {
				return cookieHint(fmt.Errorf("formatting bookie %s: %w", id, err))
			}
			type view struct {
				BookieID string   `json:"bookieId"`
				Wiped    []string `json:"wipedDirectories"`
			}
			v := view{BookieID: string(id)}
			for _, dir := range cfg.AllDirs() {
				v.Wiped = append(v.Wiped, server.CurrentDir(dir))
			}
			return o.Printer(cmd).Print(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "formatted bookie %s: wiped %d directories and deleted its cookie\n", id, len(v.Wiped))
				return err
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "really delete the bookie's data")
	nonInteractiveFlag(cmd)
	// BookKeeper deletes the stored cookie only with -deleteCookie; a bookie
	// whose directories were wiped but whose cookie is still stored cannot
	// start, so Folio always deletes it and takes the flag for runbooks.
	cmd.Flags().Bool("delete-cookie", false, "accepted for BookKeeper's -deleteCookie: the cookie is always deleted")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-n=--non-interactive,-nonInteractive=--non-interactive,-noninteractive=--non-interactive,-f=--force,-force=--force,-d=--delete-cookie,-deleteCookie=--delete-cookie,-deletecookie=--delete-cookie,-conf=--conf"}
	return cmd
}

// httpClusterAdmin makes the admin HTTP server's cluster operations
// (BookKeeper's ledger/read, ledger/delete, autorecovery/bookie, ...) with
// the bookie's metadata store and its client TLS settings, as Java's
// services build their client from the bookie's configuration.
func httpClusterAdmin(cfg server.Config, log *slog.Logger) func(md metadata.Driver) (server.ClusterAdmin, error) {
	return func(md metadata.Driver) (server.ClusterAdmin, error) {
		bookieTLS, err := cfg.Security.ClientTLS(nil, log)
		if err != nil {
			return nil, err
		}
		sec, err := cfg.LoadSecurity()
		if err != nil {
			return nil, err
		}
		newClient := func(ctx context.Context) (*client.Client, error) {
			return client.New(ctx, client.Config{
				MetadataServiceURI: cfg.MetadataServiceURI, Logger: log,
				MetadataTLS: sec.Metadata.TLS, MetadataUser: sec.Metadata.User, MetadataPassword: sec.Metadata.Password,
				TLS: bookieTLS, StartTLSTimeout: cfg.Security.StartTLSTimeoutOrDefault(),
			})
		}
		return admin.NewHTTPCluster(md, newClient, rereplication.NewBookiesTLS(0, log, bookieTLS), log), nil
	}
}

var _ server.ClusterAdmin = (*admin.HTTPCluster)(nil)
