package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/admin"
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
	// SkippedUnrecoverable: Failed were skipped
	// (--skip-unrecoverable-ledgers), not an error.
	SkippedUnrecoverable bool `json:"skippedUnrecoverable,omitempty"`
	// DeletedCookies are the bookies whose cookie --delete-cookie deleted.
	DeletedCookies []string `json:"deletedCookies,omitempty"`
}

// RecoverQueryRow is one ledger of `recover --query`: a ledger whose
// ensembles name one of the bookies, with how many of them each ensemble
// names (BookKeeper's "summary").
type RecoverQueryRow struct {
	LedgerID  int64                  `json:"ledgerId"`
	State     string                 `json:"state"`
	Ensembles []RecoverQueryEnsemble `json:"ensembles"`
}

// RecoverQueryEnsemble is one segment of a RecoverQueryRow.
type RecoverQueryEnsemble struct {
	FirstEntryID int64    `json:"firstEntryId"`
	Bookies      []string `json:"bookies"`
	ToReplace    int      `json:"bookiesToReplace"`
}

func newRecoverBookieCommand(o *ShellOptions) *cobra.Command {
	var (
		pf        placementFlags
		skipOpen  bool
		rateLimit int
		query     bool
		dryRun    bool
		ledger    int64
		skipBad   bool
		delCookie bool
		force     bool
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
			"Progress is shown on a terminal. It may be run again after a failure.\n" +
			"Bookies may also be given comma-separated, as in BookKeeper.\n" +
			"--query lists the ledgers whose ensembles name the bookies and changes nothing;\n" +
			"--dryrun prints the plan (ledgers, fragments, fences) and changes nothing;\n" +
			"--ledger N recovers only that ledger; --skip-unrecoverable-ledgers reports\n" +
			"ledgers that cannot be recovered and succeeds anyway; --delete-cookie deletes\n" +
			"the bookies' cookies once their data is recovered (not with --dryrun, not\n" +
			"after a failure unless it was skipped). --force is accepted (Folio never asks).",
		Args: cobra.MinimumNArgs(1),
		Annotations: map[string]string{bkFlagsAnnotation: "-query=--query,-dryrun=--dryrun,-dr=--dryrun," +
			"-ledger=--ledger,-skipOpenLedgers=--skip-open-ledgers,-sk=--skip-open-ledgers," +
			"-deleteCookie=--delete-cookie,-skipUnrecoverableLedgers=--skip-unrecoverable-ledgers," +
			"-sku=--skip-unrecoverable-ledgers,-replicationRate=--rate-limit,-rate=--rate-limit,-force=--force"},
		RunE: func(cmd *cobra.Command, args []string) error {
			var failed []string
			for _, arg := range args {
				for _, a := range strings.Split(arg, ",") {
					if err := metadata.ValidateBookieID(metadata.BookieID(a)); err != nil {
						return Usagef(cmd, "bad bookie id %q: %v", a, err)
					}
					failed = append(failed, a)
				}
			}
			args = failed
			if cmd.Flags().Changed("ledger") && (ledger < 0 || ledger > metadata.MaxLedgerID) {
				return Usagef(cmd, "--ledger %d: want a ledger id", ledger)
			}
			if query {
				return recoverQuery(cmd, o, failed)
			}
			ctx := cmd.Context()
			// The placement flags are checked here (usage errors) and go
			// into the admin's client configuration: its recoveries place
			// replacements by them, as a client so configured would.
			if _, _, err := pf.source(cmd, warnLogger(o)); err != nil {
				return err
			}
			adm, err := openAdmin(ctx, o, pf.clientConfig)
			if err != nil {
				return err
			}
			defer adm.Close()
			show, finish := statusLine(o)
			opts := admin.RecoverBookieOptions{SkipOpenLedgers: skipOpen, RateLimitBytesPerSecond: rateLimit, DryRun: dryRun,
				DeleteCookies: delCookie && !dryRun, SkipUnrecoverableLedgers: skipBad}
			if cmd.Flags().Changed("ledger") {
				opts.Ledgers = []int64{ledger}
			}
			if show != nil {
				opts.Progress = func(p admin.Progress) {
					show("recovering: %d/%d ledgers, %d entries copied", p.LedgersDone, p.Ledgers, p.EntriesCopied)
				}
			}
			res, err := adm.RecoverBookie(ctx, failed, opts)
			finish()
			if err != nil {
				return fmt.Errorf("recovering %s: %w", strings.Join(args, ","), err)
			}
			if dryRun {
				return o.Printer(cmd).Print(res.Plan, func(w io.Writer) error { return writePlan(w, res.Plan) })
			}
			view := RecoverBookieView{Bookies: args, Ledgers: res.Ledgers, Fragments: res.Fragments, Entries: res.Entries,
				Skipped: res.Skipped, Failed: []string{}, DeletedCookies: res.DeletedCookies}
			for _, f := range res.Failed {
				view.Failed = append(view.Failed, fmt.Sprintf("ledger %d: %s", f.LedgerID, f.Err))
			}
			view.SkippedUnrecoverable = skipBad && len(view.Failed) > 0
			if err := o.Printer(cmd).Print(view, func(w io.Writer) error {
				t := Table{}
				t.Append("bookies", strings.Join(view.Bookies, ","))
				t.Append("ledgersRecovered", view.Ledgers)
				t.Append("fragmentsReplicated", view.Fragments)
				t.Append("entriesCopied", view.Entries)
				if len(view.Skipped) > 0 {
					t.Append("skippedOpenLedgers", fmt.Sprint(view.Skipped))
				}
				label := "failed"
				if view.SkippedUnrecoverable {
					label = "skippedUnrecoverable"
				}
				for _, f := range view.Failed {
					t.Append(label, f)
				}
				for _, b := range view.DeletedCookies {
					t.Append("deletedCookie", b)
				}
				_, err := t.WriteTo(w)
				return err
			}); err != nil {
				return err
			}
			if len(view.Failed) > 0 && !skipBad {
				return WithHint(fmt.Errorf("%d ledgers could not be recovered", len(view.Failed)),
					"bring their other bookies back or add writable bookies, then run the command again")
			}
			return nil
		},
	}
	f := cmd.Flags()
	pf.register(f)
	f.BoolVar(&skipOpen, "skip-open-ledgers", false, "leave ledgers that are not closed alone instead of fencing them")
	f.IntVar(&rateLimit, "rate-limit", 0, "bytes per second to copy (0: unlimited)")
	f.BoolVarP(&query, "query", "q", false, "list the ledgers whose ensembles name the bookies; change nothing")
	f.BoolVar(&dryRun, "dryrun", false, "print what would be done; change nothing")
	f.Int64VarP(&ledger, "ledger", "l", -1, "recover only this ledger")
	f.BoolVar(&skipBad, "skip-unrecoverable-ledgers", false, "report ledgers that cannot be recovered and succeed anyway")
	f.BoolVarP(&delCookie, "delete-cookie", "d", false, "delete the bookies' cookies once their data is recovered")
	f.BoolVarP(&force, "force", "f", false, "accepted for BookKeeper's runbooks (Folio never asks for confirmation)")
	return cmd
}

// recoverQuery is `recover --query`.
func recoverQuery(cmd *cobra.Command, o *ShellOptions, bookies []string) error {
	ctx := cmd.Context()
	adm, err := openAdmin(ctx, o)
	if err != nil {
		return err
	}
	defer adm.Close()
	ledgers, err := adm.LedgersContainingBookies(ctx, bookies...)
	if err != nil {
		return err
	}
	rows := []RecoverQueryRow{}
	for _, l := range ledgers {
		row := RecoverQueryRow{LedgerID: l.LedgerID, State: l.State, Ensembles: []RecoverQueryEnsemble{}}
		for _, seg := range l.Ensembles {
			e := RecoverQueryEnsemble{FirstEntryID: seg.FirstEntryID, Bookies: seg.Bookies}
			for _, b := range seg.Bookies {
				if slices.Contains(bookies, b) {
					e.ToReplace++
				}
			}
			row.Ensembles = append(row.Ensembles, e)
		}
		rows = append(rows, row)
	}
	return o.Printer(cmd).Print(rows, func(w io.Writer) error {
		if len(rows) == 0 {
			_, err := fmt.Fprintln(w, "no ledger names these bookies")
			return err
		}
		for _, r := range rows {
			fmt.Fprintf(w, "ledger %d : %s\n", r.LedgerID, r.State)
			for _, e := range r.Ensembles {
				marked := make([]string, len(e.Bookies))
				for i, b := range e.Bookies {
					marked[i] = b
					if slices.Contains(bookies, b) {
						marked[i] += "*"
					}
				}
				fmt.Fprintf(w, "  %d: %s  (%d to replace)\n", e.FirstEntryID, strings.Join(marked, " "), e.ToReplace)
			}
		}
		return nil
	})
}

// writePlan prints a dry run's plan.
func writePlan(w io.Writer, plan []admin.PlannedLedger) error {
	if len(plan) == 0 {
		_, err := fmt.Fprintln(w, "nothing to recover")
		return err
	}
	for _, p := range plan {
		what := "replicate"
		switch {
		case p.Skip:
			what = "skip (open, --skip-open-ledgers)"
		case p.Fence:
			what = "fence and close, then replicate"
		}
		fmt.Fprintf(w, "ledger %d (%s): %s\n", p.LedgerID, p.State, what)
		for _, f := range p.Fragments {
			last := strconv.FormatInt(f.LastEntryID, 10)
			if f.LastEntryID < 0 && f.LastEntryID < f.FirstEntryID {
				last = "end"
			}
			fmt.Fprintf(w, "  entries %d..%s on %s: replace %s\n", f.FirstEntryID, last, strings.Join(f.Ensemble, ","), strings.Join(f.Replace, ","))
		}
	}
	return nil
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
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			show, finish := statusLine(o)
			opts := admin.DecommissionOptions{InitialWait: initialWait, PollInterval: poll}
			if show != nil {
				opts.Progress = func(p admin.Progress) {
					show("decommissioning %s: %d ledgers still store entries on it, %d under-replicated", id, p.LedgersRemaining, p.UnderReplicated)
				}
			}
			err = adm.DecommissionBookie(ctx, id, opts)
			finish()
			switch {
			case errors.Is(err, admin.ErrStillRegistered):
				return WithHint(err, "stop the bookie, wait until `folio shell listbookies` no longer shows it, and run the command again")
			case errors.Is(err, admin.ErrNoAuditor):
				return WithHint(err, "start `folio autorecovery`: it re-replicates the bookie's data")
			case errors.Is(err, admin.ErrAutoRecoveryDisabled):
				return WithHint(err, "enable it: `folio shell autorecovery --enable`")
			case errors.Is(err, admin.ErrNotSupported):
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
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-bookieid=--bookie-id"}
	return cmd
}
