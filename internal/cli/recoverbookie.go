package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
)

// `folio shell recover` (BookKeeper's recover: manual re-replication of a
// bookie's data) and `folio shell decommissionbookie`.

func init() {
	shellSubcommands = append(shellSubcommands, newRecoverBookieCommand, newDecommissionBookieCommand)
}

// statusLine returns a function rewriting one status line on stderr when
// stdout is a terminal, and nil otherwise (piped output stays quiet); finish
// clears the line.
func statusLine(o *ShellOptions) (show func(format string, args ...any), finish func()) {
	if !isTerminal(o.env.Stdout) {
		return nil, func() {}
	}
	w := o.env.Stderr
	shown := false
	return func(format string, args ...any) {
			fmt.Fprintf(w, "\r\033[K"+format, args...)
			shown = true
		}, func() {
			if shown {
				fmt.Fprint(w, "\r\033[K")
			}
		}
}

// RecoverBookieView is what `recover` prints.
type RecoverBookieView struct {
	Bookies   []string `json:"bookies"`
	Ledgers   int      `json:"ledgersRecovered"`
	Fragments int      `json:"fragmentsReplicated"`
	Entries   int      `json:"entriesCopied"`
	Skipped   []int64  `json:"skippedOpenLedgers"`
	Failed    []string `json:"failed"`
}

func newRecoverBookieCommand(o *ShellOptions) *cobra.Command {
	var (
		skipOpen  bool
		rateLimit int
	)
	cmd := &cobra.Command{
		Use:   "recover <bookie-id>...",
		Short: "Re-replicate a failed bookie's data to other bookies",
		Long: "Copy every entry the given bookies hold to other writable bookies and update\n" +
			"each ledger's ensembles, as BookKeeper's recover does. A ledger that is not\n" +
			"closed and has a failed bookie in its last ensemble is first fenced and closed\n" +
			"(its writer, if alive, can add nothing more) unless --skip-open-ledgers is\n" +
			"given. Entries are read from the surviving replicas, their digests checked,\n" +
			"and written with RECOVERY_ADD; each ensemble change is a compare-and-set.\n" +
			"Progress is shown on a terminal. It may be run again after a failure.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var failed []metadata.BookieID
			for _, a := range args {
				b := metadata.BookieID(a)
				if err := metadata.ValidateBookieID(b); err != nil {
					return Usagef(cmd, "bad bookie id %q: %v (use host:port)", a, err)
				}
				failed = append(failed, b)
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			ccfg, err := o.clientConfig()
			if err != nil {
				return err
			}
			ccfg.Logger = log
			c, err := client.New(ctx, ccfg)
			if err != nil {
				return WithHint(err, "check that the metadata store is running and reachable")
			}
			defer c.Close()
			bks, err := o.newBookies(log, d)
			if err != nil {
				return err
			}
			defer bks.Close()
			show, finish := statusLine(o)
			opts := admin.RecoverBookieOptions{SkipOpenLedgers: skipOpen, RateLimitBytesPerSecond: rateLimit}
			if show != nil {
				opts.Progress = func(done, total, entries int) {
					show("recovering: %d/%d ledgers, %d entries copied", done, total, entries)
				}
			}
			res, err := admin.RecoverBookie(ctx, c, bks, d, failed, opts)
			finish()
			if err != nil {
				return fmt.Errorf("recovering %s: %w", strings.Join(args, ","), err)
			}
			view := RecoverBookieView{Bookies: args, Ledgers: res.Ledgers, Fragments: res.Fragments, Entries: res.Entries,
				Skipped: res.Skipped, Failed: []string{}}
			ids := make([]int64, 0, len(res.Failed))
			for id := range res.Failed {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				view.Failed = append(view.Failed, fmt.Sprintf("ledger %d: %s", id, res.Failed[id]))
			}
			if err := o.Printer(cmd).Print(view, func(w io.Writer) error {
				t := Table{}
				t.Append("bookies", strings.Join(view.Bookies, ","))
				t.Append("ledgersRecovered", view.Ledgers)
				t.Append("fragmentsReplicated", view.Fragments)
				t.Append("entriesCopied", view.Entries)
				if len(view.Skipped) > 0 {
					t.Append("skippedOpenLedgers", fmt.Sprint(view.Skipped))
				}
				for _, f := range view.Failed {
					t.Append("failed", f)
				}
				_, err := t.WriteTo(w)
				return err
			}); err != nil {
				return err
			}
			if len(view.Failed) > 0 {
				return WithHint(fmt.Errorf("%d ledgers could not be recovered", len(view.Failed)),
					"bring their other bookies back or add writable bookies, then run the command again")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&skipOpen, "skip-open-ledgers", false, "leave ledgers that are not closed alone instead of fencing them")
	f.IntVar(&rateLimit, "rate-limit", 0, "bytes per second to copy (0: unlimited)")
	return cmd
}

func newDecommissionBookieCommand(o *ShellOptions) *cobra.Command {
	var (
		id                string
		initialWait, poll time.Duration
	)
	cmd := &cobra.Command{
		Use:   "decommissionbookie --bookie-id ID",
		Short: "Drain a stopped bookie through AutoRecovery, then remove its cookie",
		Long: "Take a bookie out of the cluster for good, as BookKeeper's decommissionbookie\n" +
			"does. The bookie must be stopped first: the command refuses while it is\n" +
			"registered. It asks the auditor to audit now (AutoRecovery must be enabled and\n" +
			"running: `folio autorecovery`), waits until no ledger stores entries on the\n" +
			"bookie and no under-replicated ledger lists it, then deletes its cookie so\n" +
			"its identity may be reused. Progress is shown on a terminal.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := metadata.BookieID(id)
			if id == "" {
				return Usagef(cmd, "--bookie-id is required")
			}
			if err := metadata.ValidateBookieID(b); err != nil {
				return Usagef(cmd, "--bookie-id %q: %v (use host:port)", id, err)
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			show, finish := statusLine(o)
			opts := admin.DecommissionOptions{InitialWait: initialWait, PollInterval: poll}
			if show != nil {
				opts.Progress = func(ledgers, urs int) {
					show("decommissioning %s: %d ledgers still store entries on it, %d under-replicated", id, ledgers, urs)
				}
			}
			err = admin.DecommissionBookie(ctx, d, b, opts)
			finish()
			switch {
			case errors.Is(err, admin.ErrStillRegistered):
				return WithHint(err, "stop the bookie, wait until `folio shell listbookies` no longer shows it, and run the command again")
			case errors.Is(err, admin.ErrNoAuditor):
				return WithHint(err, "start `folio autorecovery`: it re-replicates the bookie's data")
			case errors.Is(err, admin.ErrAutoRecoveryDisabled):
				return WithHint(err, "enable it: `folio shell autorecovery --enable`")
			case errors.Is(err, metadata.ErrNotSupported):
				return WithHint(err, "use an etcd:// metadata service URI")
			case err != nil:
				return fmt.Errorf("decommissioning %s: %w", id, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "decommissioned %s: no ledger stores entries on it; its cookie is deleted\n", id)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "bookie-id", "", "the bookie to decommission, host:port (required)")
	f.DurationVar(&initialWait, "initial-wait", 0, "pause after triggering the audit before the first check (BookKeeper: 30s)")
	f.DurationVar(&poll, "poll-interval", time.Second, "first pause between checks; it doubles up to 5m")
	return cmd
}
