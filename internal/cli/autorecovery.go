package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/foliodb/folio/admin"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/metadata"
)

// AutoRecovery's shell commands (BookKeeper's listunderreplicated,
// whoisauditor, lostbookierecoverydelay, autorecovery -enable/-disable,
// triggeraudit) and the `folio autorecovery` daemon.

func init() {
	shellSubcommands = append(shellSubcommands,
		newListUnderReplicatedCommand, newWhoIsAuditorCommand, newLostBookieRecoveryDelayCommand,
		newAutoRecoverySwitchCommand, newTriggerAuditCommand)
}

// openAutoRecovery opens the metadata store and checks it supports
// AutoRecovery.
func openAutoRecovery(ctx context.Context, o *ShellOptions) (metadata.Driver, metadata.AutoRecoveryDriver, error) {
	d, err := openMetadata(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	ar, ok := d.(metadata.AutoRecoveryDriver)
	if !ok {
		d.Close()
		return nil, nil, WithHint(fmt.Errorf("AutoRecovery: %w", metadata.ErrNotSupported), "use an etcd:// metadata service URI")
	}
	return d, ar, nil
}

// UnderReplicatedRow is one row of `listunderreplicated`.
type UnderReplicatedRow struct {
	LedgerID        int64    `json:"ledgerId"`
	MissingReplicas []string `json:"missingReplicas"`
	Ctime           string   `json:"ctime,omitempty"`
	// ReplicationWorkerID is the worker re-replicating the ledger now
	// (--printreplicationworkerid; empty: none).
	ReplicationWorkerID string `json:"replicationWorkerId,omitempty"`
}

// UnderReplicatedCountView is what `listunderreplicated -c` prints.
type UnderReplicatedCountView struct {
	Count int `json:"underReplicatedLedgerCount"`
}

func newListUnderReplicatedCommand(o *ShellOptions) *cobra.Command {
	var missing, excluding string
	var printMissing, printWorker, onlyCount bool
	cmd := &cobra.Command{
		Use:   "listunderreplicated",
		Short: "List the ledgers marked under-replicated, with their missing bookies",
		Long: "List the under-replicated ledgers the auditor marked and the replication\n" +
			"workers have not repaired yet, with the bookies whose copies are missing.\n" +
			"--missingreplica keeps ledgers missing that bookie; --excludingmissingreplica\n" +
			"drops them. -c prints only how many ledgers match; --printreplicationworkerid\n" +
			"adds the replication worker holding each ledger now. The missing replicas are\n" +
			"always printed (--printmissingreplica is accepted for BookKeeper's runbooks).",
		Args: cobra.NoArgs,
		Annotations: map[string]string{bkFlagsAnnotation: "-mr=--missingreplica,-emr=--excludingmissingreplica," +
			"-pmr=--printmissingreplica,-prw=--printreplicationworkerid,-missingreplica=--missingreplica," +
			"-excludingmissingreplica=--excludingmissingreplica,-printmissingreplica=--printmissingreplica," +
			"-printreplicationworkerid=--printreplicationworkerid,-onlydisplayledgercount=--onlydisplayledgercount"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			rows := []UnderReplicatedRow{}
			opts := admin.UnderReplicatedOptions{MissingReplica: missing, ExcludingMissingReplica: excluding, ReplicationWorker: printWorker && !onlyCount}
			for u, err := range adm.UnderReplicatedLedgers(ctx, opts) {
				if err != nil {
					return autoRecoveryError(err)
				}
				row := UnderReplicatedRow{LedgerID: u.LedgerID, MissingReplicas: u.MissingReplicas, ReplicationWorkerID: u.ReplicationWorker}
				if !u.Marked.IsZero() {
					row.Ctime = u.Marked.UTC().Format(time.RFC3339)
				}
				rows = append(rows, row)
			}
			if onlyCount {
				v := UnderReplicatedCountView{Count: len(rows)}
				return o.Printer(cmd).Print(v, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "Under replicated ledger count: %d\n", v.Count)
					return err
				})
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				if len(rows) == 0 {
					_, err := fmt.Fprintln(w, "no under-replicated ledgers")
					return err
				}
				t := Table{Headers: []string{"LEDGER", "MISSING REPLICAS", "MARKED"}}
				if printWorker {
					t.Headers = append(t.Headers, "WORKER")
				}
				for _, r := range rows {
					if printWorker {
						t.Append(r.LedgerID, strings.Join(r.MissingReplicas, ","), r.Ctime, r.ReplicationWorkerID)
						continue
					}
					t.Append(r.LedgerID, strings.Join(r.MissingReplicas, ","), r.Ctime)
				}
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&missing, "missingreplica", "", "only ledgers missing this bookie")
	cmd.Flags().StringVar(&excluding, "excludingmissingreplica", "", "only ledgers not missing this bookie")
	cmd.Flags().BoolVar(&printMissing, "printmissingreplica", false, "print the missing replicas (always done)")
	cmd.Flags().BoolVar(&printWorker, "printreplicationworkerid", false, "print the replication worker re-replicating each ledger now")
	cmd.Flags().BoolVarP(&onlyCount, "onlydisplayledgercount", "c", false, "print only the number of under-replicated ledgers")
	return cmd
}

// AuditorView is what `whoisauditor` prints.
type AuditorView struct {
	Auditor string `json:"auditor"`
}

func newWhoIsAuditorCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "whoisauditor",
		Short: "Print the elected AutoRecovery auditor",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			a, err := adm.Auditor(ctx)
			if errors.Is(err, admin.ErrNoAuditor) {
				return WithHint(errors.New("no auditor is elected"), "start `folio autorecovery` (or bookies with autoRecoveryDaemonEnabled)")
			}
			if err != nil {
				return autoRecoveryError(err)
			}
			return o.Printer(cmd).Print(AuditorView{Auditor: a}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Auditor: %s\n", a)
				return err
			})
		},
	}
}

// DelayView is what `lostbookierecoverydelay` prints.
type DelayView struct {
	Seconds float64 `json:"lostBookieRecoveryDelaySeconds"`
	// Stored is false when no value is stored (auditors use their
	// configured default, 0 unless set).
	Stored bool `json:"stored"`
}

// secondsOrDuration is a duration flag that also takes a bare number of
// seconds, the unit of BookKeeper's lostbookierecoverydelay -set.
type secondsOrDuration time.Duration

func (d *secondsOrDuration) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > math.MaxInt64/int64(time.Second) || n < math.MinInt64/int64(time.Second) {
			return fmt.Errorf("%d seconds is out of range", n)
		}
		*d = secondsOrDuration(time.Duration(n) * time.Second)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration (60s, 2m) or a number of seconds: %q", s)
	}
	*d = secondsOrDuration(v)
	return nil
}

func (d *secondsOrDuration) String() string { return time.Duration(*d).String() }
func (d *secondsOrDuration) Type() string   { return "duration" }

func newLostBookieRecoveryDelayCommand(o *ShellOptions) *cobra.Command {
	var set secondsOrDuration
	cmd := &cobra.Command{
		Use:   "lostbookierecoverydelay [--set DURATION]",
		Short: "Print or set how long the auditor waits before re-replicating a lost bookie's data",
		Long: "Print the lost-bookie recovery delay stored in the metadata store, or set it\n" +
			"with --set (e.g. 60s, 0; a bare number is seconds, as BookKeeper's -set). The auditor waits this long after one bookie\n" +
			"disappears before marking its ledgers (a bookie back in time is not\n" +
			"re-replicated); two or more lost bookies are audited at once. Setting the\n" +
			"current value again makes the auditor audit now.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			if cmd.Flags().Changed("set") {
				if set < 0 {
					return Usagef(cmd, "--set %v: the delay must not be negative", time.Duration(set))
				}
				if err := adm.SetLostBookieRecoveryDelay(ctx, time.Duration(set)); err != nil {
					return autoRecoveryError(err)
				}
			}
			v, stored, err := adm.LostBookieRecoveryDelay(ctx)
			if err != nil {
				return autoRecoveryError(err)
			}
			view := DelayView{Seconds: v.Seconds(), Stored: stored}
			return o.Printer(cmd).Print(view, func(w io.Writer) error {
				if !stored {
					_, err := fmt.Fprintln(w, "lostBookieRecoveryDelay: not set (auditors use their configured default, 0 s unless configured)")
					return err
				}
				_, err := fmt.Fprintf(w, "lostBookieRecoveryDelay: %v\n", v)
				return err
			})
		},
	}
	cmd.Flags().Var(&set, "set", "store a new delay (e.g. 60s; a bare number is seconds)")
	cmd.Flags().Bool("get", false, "print the delay (the default; BookKeeper's -get)")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-g=--get,-get=--get,-s=--set,-set=--set"}
	return cmd
}

// SwitchView is what `autorecovery` prints.
type SwitchView struct {
	Enabled bool `json:"enabled"`
}

func newAutoRecoverySwitchCommand(o *ShellOptions) *cobra.Command {
	var enable, disable bool
	cmd := &cobra.Command{
		Use:   "autorecovery [--enable | --disable]",
		Short: "Show, enable or disable re-replication cluster-wide",
		Long: "Without flags, print whether AutoRecovery is enabled. --disable stops the\n" +
			"auditor from marking ledgers and the replication workers from taking them\n" +
			"(work in progress finishes); --enable resumes both.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if enable && disable {
				return Usagef(cmd, "give --enable or --disable, not both")
			}
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			switch {
			case enable:
				err = adm.EnableAutoRecovery(ctx)
			case disable:
				err = adm.DisableAutoRecovery(ctx)
			}
			if err != nil {
				return autoRecoveryError(err)
			}
			on, err := adm.IsAutoRecoveryEnabled(ctx)
			if err != nil {
				return autoRecoveryError(err)
			}
			return o.Printer(cmd).Print(SwitchView{Enabled: on}, func(w io.Writer) error {
				state := "disabled"
				if on {
					state = "enabled"
				}
				_, err := fmt.Fprintf(w, "AutoRecovery is %s\n", state)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&enable, "enable", false, "enable re-replication")
	cmd.Flags().BoolVar(&disable, "disable", false, "disable re-replication")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-e=--enable,-enable=--enable,-d=--disable,-disable=--disable"}
	return cmd
}

func newTriggerAuditCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "triggeraudit",
		Short: "Make the auditor audit bookies now",
		Long: "Ask the auditor to check every ledger against the available bookies now, by\n" +
			"storing the lost-bookie recovery delay again (BookKeeper's triggerAudit).\n" +
			"Fails if AutoRecovery is disabled or no auditor is elected.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			switch err := adm.TriggerAudit(ctx); {
			case errors.Is(err, admin.ErrAutoRecoveryDisabled):
				return WithHint(errors.New("AutoRecovery is disabled"), "enable it: `folio shell autorecovery --enable`")
			case errors.Is(err, admin.ErrNoAuditor):
				return WithHint(errors.New("no auditor is elected"), "start `folio autorecovery`")
			case err != nil:
				return autoRecoveryError(err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), "audit triggered")
			return err
		},
	}
}

// newAutoRecoveryDaemonCommand is `folio autorecovery`: an auditor
// candidate and replication workers in one process, until SIGTERM.
func newAutoRecoveryDaemonCommand(env Env) *cobra.Command {
	o := &ShellOptions{env: env}
	var (
		id, metricsAddr                        string
		workers, rateLimit, verifyPct          int
		pf                                     placementFlags
		delay, grace, checkInterval, ttl, poll time.Duration
		ledgerCheck, placementCheck            time.Duration
		repairPlacement                        bool
		lf                                     logFlags
	)
	cmd := &cobra.Command{
		Use:   "autorecovery",
		Short: "Run AutoRecovery: the auditor election and replication workers",
		Long: "Run AutoRecovery as its own process: it campaigns to be the cluster's one\n" +
			"auditor (which marks the ledgers of lost bookies under-replicated and, every\n" +
			"--ledger-check-interval, those whose entries are missing or corrupt on live\n" +
			"bookies) and runs replication workers (which copy those ledgers' fragments\n" +
			"to other bookies). --placement-check-interval also counts closed ledgers\n" +
			"whose ensembles break the placement policy; --repair-placement moves them.\n" +
			"Run several for availability: one is the auditor, all replicate.\n" +
			"SIGTERM or Ctrl-C stops it; its locks and election pass to the others.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			bid := metadata.BookieID(id)
			if err := metadata.ValidateBookieID(bid); err != nil {
				return Usagef(cmd, "--id %q: %v (use host:port)", id, err)
			}
			if verifyPct < 0 || verifyPct > 100 {
				return Usagef(cmd, "--ledger-verification-percentage %d: want 0..100", verifyPct)
			}
			bookieTLS, err := o.bookieTLS()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			log := lf.logger(env.Stderr, "", "")
			source, policy, err := pf.source(cmd, log)
			if err != nil {
				return err
			}
			d, err := openMetadataLogged(ctx, o, log)
			if err != nil {
				return err
			}
			defer d.Close()
			var metrics *autorecovery.Metrics
			if metricsAddr != "" {
				ar, _ := d.(metadata.AutoRecoveryDriver)
				metrics = autorecovery.NewMetrics(ar)
				reg := prometheus.NewRegistry()
				reg.MustRegister(metrics)
				sctx, cancel := context.WithCancel(ctx)
				stop, err := serveMetrics(sctx, metricsAddr, reg, log)
				if err != nil {
					cancel()
					return err
				}
				defer stop()
				defer cancel()
			}
			n := workers
			if n == 0 {
				n = -1 // --workers 0: the auditor candidate only
			}
			sec, err := o.MetadataSecurity()
			if err != nil {
				return err
			}
			svc, err := autorecovery.StartService(ctx, autorecovery.ServiceConfig{
				Driver: d, MetadataServiceURI: o.MetadataURI(), MetadataSecurity: sec, ID: bid, Workers: n, Logger: log, Metrics: metrics, BookieTLS: bookieTLS,
				Auditor: autorecovery.AuditorConfig{SessionTTL: ttl, LostBookieRecoveryDelay: delay, BookieCheckInterval: checkInterval,
					LedgerCheckInterval: ledgerCheck, LedgerVerificationPercentage: verifyPct,
					PlacementPolicyCheckInterval: placementCheck, PlacementPolicy: policy, RepairPlacement: repairPlacement},
				Worker: autorecovery.WorkerConfig{SessionTTL: ttl, OpenLedgerRereplicationGracePeriod: grace, PollInterval: poll,
					RateLimitBytesPerSecond: rateLimit, LedgerVerificationPercentage: verifyPct,
					PlacementPolicy: policy, RepairPlacement: repairPlacement, PlacementSource: source},
				Client: pf.clientConfig,
			})
			if err != nil {
				return err
			}
			var failure error
			select {
			case <-ctx.Done():
			case err := <-svc.Failed():
				failure = fmt.Errorf("autorecovery: %w", err)
			}
			// The workers drop their copies and locks, the auditor resigns.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := svc.Stop(sctx); err != nil {
				log.Warn("autorecovery stopped uncleanly", "err", err)
			}
			return failure
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.MetadataServiceURI, "metadata-service-uri", "", "metadata store URI (default $"+MetadataURIEnv+", then "+DefaultMetadataURI+")")
	o.metadataSec.register(f)
	f.StringVar(&id, "id", "", "this process's id in the election and in locks, host:port (required)")
	o.BookieTLS.register(f)
	f.IntVar(&workers, "workers", 1, "replication workers")
	f.StringVar(&metricsAddr, "metrics-address", "", "serve Prometheus metrics at http://ADDRESS/metrics, e.g. :8000 (default: none)")
	f.IntVar(&rateLimit, "rate-limit", 0, "bytes per second each worker copies (0: unlimited)")
	f.DurationVar(&delay, "lost-bookie-recovery-delay", autorecovery.DefaultLostBookieRecoveryDelay, "delay used while none is stored (lostbookierecoverydelay --set stores one)")
	f.DurationVar(&grace, "open-ledger-rereplication-grace-period", autorecovery.DefaultOpenLedgerRereplicationGracePeriod, "how long an open ledger's writer may replace a lost bookie itself before the ledger is fenced")
	f.DurationVar(&checkInterval, "bookie-check-interval", autorecovery.DefaultBookieCheckInterval, "period of the full bookie check (negative: off)")
	f.DurationVar(&ledgerCheck, "ledger-check-interval", autorecovery.DefaultLedgerCheckInterval,
		"period of the check of every ledger's entries on its bookies (auditorPeriodicCheckInterval; negative: off)")
	f.IntVar(&verifyPct, "ledger-verification-percentage", 0,
		"percentage (0..100) of each bookie's entries per fragment the ledger check reads besides its first and last")
	f.DurationVar(&placementCheck, "placement-check-interval", 0, "period of the placement policy check of closed ledgers (0: off)")
	pf.register(f)
	f.BoolVar(&repairPlacement, "repair-placement", false,
		"mark closed ledgers that do not adhere to the placement policy and move their data to compliant bookies")
	f.DurationVar(&ttl, "session-ttl", autorecovery.DefaultSessionTTL, "lease TTL of the election and the locks")
	f.DurationVar(&poll, "poll-interval", autorecovery.DefaultPollInterval, "pause of an idle replication worker")
	lf.register(cmd)
	return cmd
}
