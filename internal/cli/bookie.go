package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/bookie/server"
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
	cfg, err := server.LoadConfig(f.conf, server.Overrides{Getenv: env.Getenv, Set: f.set}, log)
	if err != nil {
		return cfg, WithHint(err, "fix the configuration file or the overrides ($FOLIO_<KEY>, --set key=value)")
	}
	return cfg, nil
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
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "bookie --conf FILE",
		Short: "Run a bookie",
		Long: "Run one bookie: the BookKeeper protocol on bookiePort (default 3181) and the\n" +
			"admin HTTP server on httpServerPort (default 8080). The configuration is a\n" +
			"bk_server.conf-style file; $FOLIO_<KEY> variables (e.g. FOLIO_BOOKIE_PORT,\n" +
			"FOLIO_METADATA_SERVICE_URI) and --set key=value override it, in that order.\n" +
			"SIGTERM or Ctrl-C stops it gracefully.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if readOnly {
				f.set = append(f.set, "readOnlyModeOnStartup=true")
			}
			cfg, err := f.load(env, log)
			if err != nil {
				return err
			}
			return runBookie(cmd.Context(), cfg, log)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&readOnly, "readonly", false, "start in read-only mode")
	return cmd
}

// runBookie runs a bookie until ctx ends or it fails, then stops it.
func runBookie(ctx context.Context, cfg server.Config, log *slog.Logger) error {
	p, err := server.StartProcess(ctx, cfg, server.ProcessOptions{Logger: log})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return cookieHint(fmt.Errorf("starting the bookie: %w", err))
	}
	var failure error
	select {
	case <-ctx.Done():
	case <-p.Failed():
		failure = p.Err()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout+2*time.Second)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		log.Error("unclean shutdown", "err", err)
	}
	if failure != nil {
		return fmt.Errorf("bookie %s failed: %w", p.ID(), failure)
	}
	return nil
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
	return cmd
}
