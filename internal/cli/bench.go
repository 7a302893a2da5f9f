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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/bench"
)

// benchCleanupTimeout bounds deleting the ledgers after a run, also after
// an interrupt.
const benchCleanupTimeout = 30 * time.Second

// benchTailDefaultDuration is how long `bench read --tail` writes without
// --duration (catch-up reads default to reading everything).
const benchTailDefaultDuration = 10 * time.Second

func newBenchCommand(env Env) *cobra.Command {
	opts := &ShellOptions{Output: OutputText, env: env}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a cluster: append, catch-up read and tailing throughput and latency",
		Long: "Measure a running cluster through the Go client, as BookKeeper's `bookkeeper\n" +
			"benchmark writes/reads` and `etcdctl check perf` do. The cluster is found as\n" +
			"`folio shell` finds it: --metadata-service-uri, else $" + MetadataURIEnv + ",\n" +
			"else " + DefaultMetadataURI + ".\n" +
			"Results: a table (entries/s, MB/s = 10^6 bytes/s, latency p50/p95/p99/p99.9/max\n" +
			"from an HdrHistogram), or with -o json exactly one JSON object on stdout.\n" +
			"A progress line shows on stderr when stderr is a terminal. Ctrl-C stops the\n" +
			"run, deletes what it created (unless --keep) and prints what was measured.\n" +
			"Exit codes: 0 success, 1 failure (any add or read failed, or interrupted), 2 usage error.",
	}
	opts.register(cmd.PersistentFlags())
	cmd.AddCommand(newBenchWriteCommand(opts), newBenchReadCommand(opts))
	return groupCommand(cmd)
}

// benchWriteFlags are the writer's flags, of `bench write` and `bench read
// --tail`.
type benchWriteFlags struct {
	ledgers, ensemble, writeQuorum, ackQuorum int
	entrySize, maxOutstanding                 int
	rate                                      float64
	duration                                  time.Duration
	keep                                      bool
}

// writerFlagNames are the flags benchWriteFlags registers.
var writerFlagNames = []string{"ledgers", "ensemble-size", "write-quorum", "ack-quorum", "entry-size", "max-outstanding", "rate", "keep"}

func (f *benchWriteFlags) register(fs *pflag.FlagSet, rate float64) {
	fs.IntVar(&f.ledgers, "ledgers", 1, "ledgers written at once (adds go to them in turn)")
	fs.IntVarP(&f.ensemble, "ensemble-size", "e", 3, "ensemble size of each ledger")
	fs.IntVarP(&f.writeQuorum, "write-quorum", "w", 2, "write quorum size")
	fs.IntVarP(&f.ackQuorum, "ack-quorum", "a", 2, "ack quorum size")
	fs.IntVar(&f.entrySize, "entry-size", 1024, "payload bytes per entry")
	fs.IntVar(&f.maxOutstanding, "max-outstanding", 1000, "adds in flight at most, over all ledgers")
	fs.Float64Var(&f.rate, "rate", rate, "target entries per second over all ledgers; 0 is unlimited")
	fs.BoolVar(&f.keep, "keep", false, "keep the ledgers (default: delete them at the end, also after Ctrl-C)")
}

// check refuses bad values naming their flags, before anything connects.
func (f *benchWriteFlags) check(cmd *cobra.Command) error {
	switch {
	case f.ledgers < 1:
		return Usagef(cmd, "--ledgers %d: want at least 1", f.ledgers)
	case f.ensemble < 1 || f.writeQuorum < 1 || f.ackQuorum < 1:
		return Usagef(cmd, "-e %d -w %d -a %d: each must be at least 1", f.ensemble, f.writeQuorum, f.ackQuorum)
	case f.writeQuorum > f.ensemble || f.ackQuorum > f.writeQuorum:
		return Usagef(cmd, "-e %d -w %d -a %d: want ensemble size (-e) ≥ write quorum (-w) ≥ ack quorum (-a)", f.ensemble, f.writeQuorum, f.ackQuorum)
	case f.entrySize < 1:
		return Usagef(cmd, "--entry-size %d: want at least 1 byte", f.entrySize)
	case f.maxOutstanding < 1:
		return Usagef(cmd, "--max-outstanding %d: want at least 1", f.maxOutstanding)
	case f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0):
		return Usagef(cmd, "--rate %g: want 0 (unlimited) or a positive number of entries per second", f.rate)
	case f.duration <= 0:
		return Usagef(cmd, "--duration %v: want a positive Go duration (10s, 2m)", f.duration)
	}
	return nil
}

func (f *benchWriteFlags) options(password []byte, progress func(bench.Progress)) bench.WriteOptions {
	return bench.WriteOptions{
		Ledgers: f.ledgers,
		Ledger: client.LedgerOptions{EnsembleSize: f.ensemble, WriteQuorumSize: f.writeQuorum,
			AckQuorumSize: f.ackQuorum, Password: password},
		EntrySize: f.entrySize, MaxOutstanding: f.maxOutstanding, Rate: f.rate, Duration: f.duration,
		Progress: progress,
	}
}

func (f *benchWriteFlags) config() BenchConfig {
	return BenchConfig{Ledgers: f.ledgers, EnsembleSize: f.ensemble, WriteQuorum: f.writeQuorum,
		AckQuorum: f.ackQuorum, EntrySize: f.entrySize, MaxOutstanding: f.maxOutstanding,
		Rate: f.rate, Duration: f.duration.String()}
}

// BenchConfig is the configuration of a run, as JSON reports it.
type BenchConfig struct {
	Ledgers        int     `json:"ledgers,omitempty"`
	EnsembleSize   int     `json:"ensemble_size,omitempty"`
	WriteQuorum    int     `json:"write_quorum,omitempty"`
	AckQuorum      int     `json:"ack_quorum,omitempty"`
	EntrySize      int     `json:"entry_size,omitempty"`
	MaxOutstanding int     `json:"max_outstanding,omitempty"`
	Rate           float64 `json:"rate"`
	Batch          int     `json:"batch,omitempty"`
	Duration       string  `json:"duration"`
}

// BenchView is the result of a `folio bench` run: the JSON object of -o
// json and the source of the table. The percentiles are of Latency: "add"
// (append to acknowledgement), "read" (one read request of Batch
// entries) or "tail lag" (the writer's acknowledgement to the tailing
// reader's delivery); in tail mode Write holds the writer's own figures.
type BenchView struct {
	Mode             string      `json:"mode"`
	Latency          string      `json:"latency"`
	Entries          int64       `json:"entries"`
	Bytes            int64       `json:"bytes"`
	DurationS        float64     `json:"duration_s"`
	EntriesPerSecond float64     `json:"entries_per_second"`
	MBPerSecond      float64     `json:"mb_per_second"`
	P50us            int64       `json:"p50_us"`
	P95us            int64       `json:"p95_us"`
	P99us            int64       `json:"p99_us"`
	P999us           int64       `json:"p999_us"`
	MaxUs            int64       `json:"max_us"`
	Failed           int64       `json:"failed"`
	Error            string      `json:"error,omitempty"`
	Interrupted      bool        `json:"interrupted"`
	Ledgers          []int64     `json:"ledgers"`
	Kept             bool        `json:"kept"`
	Config           BenchConfig `json:"config"`
	Write            *BenchView  `json:"write,omitempty"`
}

func benchView(mode, latency string, r bench.Result) BenchView {
	us := func(d time.Duration) int64 { return d.Microseconds() }
	v := BenchView{
		Mode: mode, Latency: latency, Entries: r.Entries, Bytes: r.Bytes, DurationS: r.Elapsed.Seconds(),
		EntriesPerSecond: r.EntriesPerSecond(), MBPerSecond: r.MBPerSecond(),
		P50us: us(r.Latency.P50), P95us: us(r.Latency.P95), P99us: us(r.Latency.P99),
		P999us: us(r.Latency.P999), MaxUs: us(r.Latency.Max),
		Failed: r.Failed, Interrupted: r.Interrupted, Ledgers: r.Ledgers,
	}
	if v.Ledgers == nil {
		v.Ledgers = []int64{}
	}
	if r.FirstError != nil {
		v.Error = r.FirstError.Error()
	}
	return v
}

// benchProgress returns the status-line reporter (nil when stderr is not
// a terminal) and the function that clears the line.
func benchProgress(o *ShellOptions, mode string) (func(bench.Progress), func()) {
	if !isTerminal(o.env.Stderr) {
		return nil, func() {}
	}
	w := o.env.Stderr
	var last bench.Progress
	return func(p bench.Progress) {
			rate := float64(p.Entries-last.Entries) / max((p.Elapsed-last.Elapsed).Seconds(), 1e-9)
			last = p
			fmt.Fprintf(w, "\r\033[K%s %s: %d entries, %.0f/s, p99 %s, failed %d",
				mode, p.Elapsed.Truncate(time.Second), p.Entries, rate, fmtLatency(p.P99), p.Failed)
		}, func() {
			fmt.Fprint(w, "\r\033[K")
		}
}

// fmtLatency prints a latency for the table: µs below 1 ms, else ms or s
// with two decimals.
func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// writeBenchTable renders views as one table, a row each.
func writeBenchTable(w io.Writer, views ...BenchView) error {
	t := Table{Headers: []string{"OP", "ENTRIES", "ENTRIES/S", "MB/S", "P50", "P95", "P99", "P99.9", "MAX", "FAILED"}}
	for _, v := range views {
		us := func(n int64) string { return fmtLatency(time.Duration(n) * time.Microsecond) }
		t.Append(v.Latency, v.Entries, fmt.Sprintf("%.0f", v.EntriesPerSecond), fmt.Sprintf("%.2f", v.MBPerSecond),
			us(v.P50us), us(v.P95us), us(v.P99us), us(v.P999us), us(v.MaxUs), v.Failed)
	}
	_, err := t.WriteTo(w)
	return err
}

// benchLedgersLine says what became of the ledgers a run created.
func benchLedgersLine(w io.Writer, v BenchView, deleteErr error) {
	switch {
	case len(v.Ledgers) == 0:
	case v.Kept:
		fmt.Fprintf(w, "kept %d ledger(s); read them back with: folio bench read --ledger %s\n", len(v.Ledgers), joinIDs(v.Ledgers))
	case deleteErr != nil:
		fmt.Fprintf(w, "ledgers %s: not all deleted (see the error)\n", joinIDs(v.Ledgers))
	default:
		fmt.Fprintf(w, "deleted %d ledger(s)\n", len(v.Ledgers))
	}
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// deleteBenchLedgers deletes the run's ledgers, also after ctx ended.
func deleteBenchLedgers(ctx context.Context, c *client.Client, ids []int64) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
	defer cancel()
	var errs []error
	for _, id := range ids {
		if err := c.DeleteLedger(dctx, id); err != nil && !errors.Is(err, client.ErrNoSuchLedger) {
			errs = append(errs, fmt.Errorf("delete ledger %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// benchClient connects with room in the client for the run's adds in
// flight, and some to spare: the client frees an add's place just after
// its future completes, so a limit equal to --max-outstanding would make
// the next append wait inside the client.
func benchClient(ctx context.Context, o *ShellOptions, maxOutstanding int) (*client.Client, error) {
	return newClientWith(ctx, o, func(cfg *client.Config) {
		cfg.MaxOutstandingAdds = max(cfg.MaxOutstandingAdds, client.DefaultMaxOutstandingAdds, 2*maxOutstanding)
	})
}

// Hints of failed runs.
const (
	benchWriteHint = "check the bookies (`folio shell listbookies`): a ledger needs -e writable bookies, and replacing a lost one needs a spare"
	benchReadHint  = "check the ledger ids (`folio shell listledgers`), --password, and the bookies (`folio shell listbookies`)"
)

// benchOutcome turns a run's failures into the command's error, after the
// results were printed: failed operations, then a run error, then the
// cleanup's, then an interrupt.
func benchOutcome(v BenchView, what, hint string, runErr, deleteErr error) error {
	var errs []error
	if v.Failed > 0 {
		errs = append(errs, WithHint(fmt.Errorf("%d %s failed; first failure: %s", v.Failed, what, v.Error), hint))
	}
	if runErr != nil {
		errs = append(errs, runErr)
	}
	if deleteErr != nil {
		errs = append(errs, WithHint(deleteErr, "delete them with `folio shell deleteledger <id>`"))
	}
	if len(errs) == 0 && v.Interrupted {
		errs = append(errs, errors.New("interrupted: the figures cover the run until then"))
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// benchSetupError is the error of a run that failed before measuring
// anything (nothing is printed on stdout then).
func benchSetupError(runErr, deleteErr error) error {
	if errors.Is(runErr, client.ErrNotEnoughBookies) {
		runErr = WithHint(runErr, "each ledger needs -e writable bookies: lower -e (and -w, -a) or start more bookies (`folio shell listbookies` lists them)")
	}
	if deleteErr != nil {
		return errors.Join(runErr, WithHint(deleteErr, "delete them with `folio shell deleteledger <id>`"))
	}
	return runErr
}

func newBenchWriteCommand(o *ShellOptions) *cobra.Command {
	var f benchWriteFlags
	var password string
	cmd := &cobra.Command{
		Use:   "write",
		Short: "Append to new ledgers and report throughput and add latency",
		Long: "Create --ledgers ledgers (E -e, Qw -w, Qa -a), append entries of --entry-size bytes\n" +
			"to them in turn for --duration with at most --max-outstanding adds in flight\n" +
			"(at --rate entries/s, or as fast as possible), then close the ledgers and\n" +
			"delete them unless --keep. Latency is per add, from the append to its\n" +
			"acknowledgement by an ack quorum. Any failed add makes the exit code 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			progress, finish := benchProgress(o, "write")
			opts := f.options([]byte(password), progress)
			ctx := cmd.Context()
			c, err := benchClient(ctx, o, f.maxOutstanding)
			if err != nil {
				return err
			}
			defer c.Close()
			res, runErr := bench.Write(ctx, c, opts)
			finish()
			var deleteErr error
			if !f.keep {
				deleteErr = deleteBenchLedgers(ctx, c, res.Ledgers)
			}
			if !res.Measured {
				return benchSetupError(runErr, deleteErr)
			}
			v := benchView("write", "add", res)
			v.Kept, v.Config = f.keep, f.config()
			if err := o.Printer(cmd).Print(v, func(w io.Writer) error {
				fmt.Fprintf(w, "write: %d ledger(s), E%d Qw%d Qa%d, %d-byte entries, %d outstanding, %s, %.1fs measured\n",
					f.ledgers, f.ensemble, f.writeQuorum, f.ackQuorum, f.entrySize, f.maxOutstanding, rateText(f.rate), v.DurationS)
				if err := writeBenchTable(w, v); err != nil {
					return err
				}
				benchLedgersLine(w, v, deleteErr)
				return nil
			}); err != nil {
				return err
			}
			return benchOutcome(v, "adds", benchWriteHint, runErr, deleteErr)
		},
	}
	fs := cmd.Flags()
	f.register(fs, 0)
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to append (a Go duration: 30s, 2m)")
	fs.StringVar(&password, "password", "", "password of the ledgers created")
	return cmd
}

func rateText(rate float64) string {
	if rate == 0 {
		return "unlimited rate"
	}
	return fmt.Sprintf("%g entries/s", rate)
}

func newBenchReadCommand(o *ShellOptions) *cobra.Command {
	var f benchWriteFlags
	var ledgers []int64
	var batch int
	var tail bool
	var password string
	cmd := &cobra.Command{
		Use:   "read (--ledger ID[,ID…] | --tail)",
		Short: "Catch-up read of existing ledgers, or tailing lag behind a writer",
		Long: "Catch-up: read the ledgers --ledger (for instance those `folio bench write\n" +
			"--keep` printed) from entry 0 to their last add confirmed, one reader per\n" +
			"ledger, --batch entries per request, for at most --duration (default: all).\n" +
			"Latency is per read request. The ledgers are not fenced, closed or deleted.\n" +
			"\n" +
			"--tail: write new ledgers as `bench write` does (its flags; --rate default\n" +
			"1000, --duration default 10s) and follow each with a tailing reader in the\n" +
			"same process. Latency is the tailing lag: from the writer's acknowledgement\n" +
			"of an entry to the reader's delivery of it. An entry is visible to readers\n" +
			"once a later add carries a LAC covering it, so the lag includes the gap to\n" +
			"the next add. The ledgers are deleted unless --keep.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			if tail {
				for _, n := range []string{"ledger", "batch"} {
					if fs.Changed(n) {
						return Usagef(cmd, "--%s is for catch-up reads: --tail writes and follows its own ledgers", n)
					}
				}
				if !fs.Changed("duration") {
					f.duration = benchTailDefaultDuration
				}
				return runBenchTail(cmd, o, &f, []byte(password))
			}
			for _, n := range writerFlagNames {
				if fs.Changed(n) {
					return Usagef(cmd, "--%s applies to --tail only (catch-up reads read existing ledgers)", n)
				}
			}
			if len(ledgers) == 0 {
				return Usagef(cmd, "give the ledgers to read with --ledger (e.g. the ids `folio bench write --keep` printed), or --tail")
			}
			progress, finish := benchProgress(o, "read")
			opts := bench.ReadOptions{Ledgers: ledgers, Password: []byte(password), Batch: batch,
				Duration: f.duration, Progress: progress}
			if err := opts.Validate(); err != nil {
				return Usagef(cmd, "%v", err)
			}
			ctx := cmd.Context()
			c, err := newClient(ctx, o)
			if err != nil {
				return err
			}
			defer c.Close()
			res, runErr := bench.Read(ctx, c, opts)
			finish()
			v := benchView("read", fmt.Sprintf("read (%d per request)", batch), res)
			v.Kept = true
			v.Config = BenchConfig{Batch: batch, Duration: f.duration.String()}
			if err := o.Printer(cmd).Print(v, func(w io.Writer) error {
				fmt.Fprintf(w, "catch-up read: %d ledger(s), %d entries per request, %.1fs measured\n", len(ledgers), batch, v.DurationS)
				return writeBenchTable(w, v)
			}); err != nil {
				return err
			}
			return benchOutcome(v, "entries", benchReadHint, runErr, nil)
		},
	}
	fs := cmd.Flags()
	f.register(fs, 1000)
	fs.DurationVar(&f.duration, "duration", 0, "catch-up: stop after this long (default: read everything); --tail: how long to write (default 10s)")
	fs.Int64SliceVar(&ledgers, "ledger", nil, "ledger ids to read (comma-separated or repeated)")
	fs.IntVar(&batch, "batch", 100, "entries per read request (catch-up)")
	fs.BoolVar(&tail, "tail", false, "measure the tailing lag behind a writer in this process instead")
	fs.StringVar(&password, "password", "", "password of the ledgers")
	return cmd
}

// runBenchTail is `bench read --tail`.
func runBenchTail(cmd *cobra.Command, o *ShellOptions, f *benchWriteFlags, password []byte) error {
	if err := f.check(cmd); err != nil {
		return err
	}
	progress, finish := benchProgress(o, "tail")
	opts := f.options(password, progress)
	ctx := cmd.Context()
	c, err := benchClient(ctx, o, f.maxOutstanding)
	if err != nil {
		return err
	}
	defer c.Close()
	res, runErr := bench.Tail(ctx, c, opts)
	finish()
	var deleteErr error
	if !f.keep {
		deleteErr = deleteBenchLedgers(ctx, c, res.Write.Ledgers)
	}
	if !res.Write.Measured {
		return benchSetupError(runErr, deleteErr)
	}
	wv := benchView("write", "add", res.Write)
	wv.Kept, wv.Config = f.keep, f.config()
	v := benchView("tail", "tail lag", res.Tail)
	v.Kept, v.Config, v.Write = f.keep, f.config(), &wv
	if err := o.Printer(cmd).Print(v, func(w io.Writer) error {
		fmt.Fprintf(w, "tail: %d ledger(s), E%d Qw%d Qa%d, %d-byte entries, %s, %.1fs measured\n",
			f.ledgers, f.ensemble, f.writeQuorum, f.ackQuorum, f.entrySize, rateText(f.rate), v.DurationS)
		if err := writeBenchTable(w, wv, v); err != nil {
			return err
		}
		benchLedgersLine(w, v, deleteErr)
		return nil
	}); err != nil {
		return err
	}
	return benchOutcome(v, "adds or deliveries", benchWriteHint, runErr, deleteErr)
}
