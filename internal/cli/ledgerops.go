package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/admin"
	"github.com/foliodb/folio/client"
	iadmin "github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

func init() {
	shellSubcommands = append(shellSubcommands, newReadLedgerCommand, newDeleteLedgerCommand,
		newSimpleTestCommand, newInspectLedgerCommand)
}

// parseLedgerID parses a ledger id argument (a usage error when malformed).
func parseLedgerID(cmd *cobra.Command, raw string) (int64, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 || id > metadata.MaxLedgerID {
		return 0, Usagef(cmd, "bad ledger id %q: want an integer in [0, %d]", raw, int64(metadata.MaxLedgerID))
	}
	return id, nil
}

// newClient connects a client to the shell's metadata store, with the same
// hints as openMetadata.
func newClient(ctx context.Context, o *ShellOptions) (*client.Client, error) {
	return newClientWith(ctx, o, nil)
}

// newClientWith is newClient with adjust, when not nil, applied to the
// configuration before the client starts.
func newClientWith(ctx context.Context, o *ShellOptions, adjust func(*client.Config)) (*client.Client, error) {
	uri := o.MetadataURI()
	cfg, err := o.clientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Logger = warnLogger(o)
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := client.New(ctx, cfg)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, metadata.ErrBadURI), errors.Is(err, metadata.ErrNotBuilt):
		return nil, WithHint(err, "set --metadata-service-uri or $"+MetadataURIEnv+", e.g. "+DefaultMetadataURI)
	case securityHint(err) != "":
		return nil, WithHint(fmt.Errorf("cannot connect to the cluster at %s: %w", uri, err), securityHint(err))
	}
	return nil, WithHint(fmt.Errorf("cannot connect to the cluster at %s: %w", uri, err),
		"check that the metadata store is running and reachable")
}

// ledgerError gives the usual ledger failures a message and a hint.
func ledgerError(id int64, err error) error {
	switch {
	case errors.Is(err, client.ErrNoSuchLedger), errors.Is(err, metadata.ErrNoSuchLedger):
		return WithHint(fmt.Errorf("ledger %d does not exist", id), "`folio shell listledgers` lists the ledgers")
	case errors.Is(err, client.ErrUnauthorized) && errors.Is(err, wire.ErrUnauthorized):
		// A bookie's EUA: a wrong master key, or a bookie that authorises
		// clients by TLS certificate.
		return WithHint(fmt.Errorf("ledger %d: a bookie refused this client (unauthorized): %w", id, err),
			"check the password (--password); bookies with TLS and BookieAuthZFactory need --tls-ca, --tls-cert and --tls-key ($"+TLSCAEnv+", $"+TLSCertEnv+", $"+TLSKeyEnv+") with an authorised role")
	case errors.Is(err, client.ErrUnauthorized):
		return WithHint(fmt.Errorf("ledger %d: wrong password", id), "give the ledger's password with --password")
	}
	return fmt.Errorf("ledger %d: %w", id, err)
}

// EntryView is one entry as readledger prints it. In JSON the payload is
// base64 (encoding/json's []byte encoding).
type EntryView struct {
	EntryID int64  `json:"entryId"`
	Length  int    `json:"length"`
	Payload []byte `json:"payload"`
}

// payloadText renders a payload for a terminal: as text when it is valid
// UTF-8 without control characters, else as hex; hex forces hex.
func payloadText(p []byte, hex bool) string {
	if !hex && utf8.Valid(p) && !strings.ContainsFunc(string(p), func(r rune) bool { return unicode.IsControl(r) }) {
		return strconv.Quote(string(p))
	}
	return fmt.Sprintf("0x%x", p)
}

func newReadLedgerCommand(o *ShellOptions) *cobra.Command {
	var from, to int64
	var password string
	var hex bool
	cmd := &cobra.Command{
		Use:   "readledger <ledger-id> [--from N] [--to M]",
		Short: "Read a ledger's entries",
		Long: "Read entries --from … --to (inclusive; default the whole ledger up to its last\n" +
			"add confirmed) without recovering or fencing the ledger. Text output prints\n" +
			"one entry per line: id, length, payload as a quoted string when it is\n" +
			"printable UTF-8, else as 0x-hex (--hex always hex).\n" +
			"With -o json: [{\"entryId\": N, \"length\": n, \"payload\": \"<base64>\"}, ...].",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLedgerID(cmd, args[0])
			if err != nil {
				return err
			}
			if from < 0 || (to >= 0 && to < from) {
				return Usagef(cmd, "bad range --from %d --to %d", from, to)
			}
			ctx := cmd.Context()
			c, err := newClient(ctx, o)
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte(password)})
			if err != nil {
				return ledgerError(id, err)
			}
			defer r.Close()
			lac, err := r.ReadLastAddConfirmed(ctx)
			if err != nil {
				return ledgerError(id, err)
			}
			last := to
			if last < 0 {
				last = lac
			}
			if last > lac {
				return WithHint(fmt.Errorf("ledger %d: --to %d is past the last add confirmed %d", id, last, lac),
					"entries past the LAC may not be durable; read up to the LAC")
			}
			views := []EntryView{}
			if from > last {
				// Nothing in range (an empty ledger, or --from past the end).
				return o.Printer(cmd).Print(views, func(io.Writer) error { return nil })
			}
			w := cmd.OutOrStdout()
			progress, finish := progressFunc(o)
			defer finish()
			total := int(last - from + 1)
			for e, err := range r.Entries(ctx, from, last) {
				if err != nil {
					return ledgerError(id, err)
				}
				if o.Output == OutputJSON {
					views = append(views, EntryView{EntryID: e.ID, Length: len(e.Payload), Payload: e.Payload})
					if progress != nil && len(views)%1000 == 0 {
						progress("read", len(views), total)
					}
					continue
				}
				// Text streams: a long ledger prints as it is read.
				if _, err := fmt.Fprintf(w, "%d\t%d\t%s\n", e.ID, len(e.Payload), payloadText(e.Payload, hex)); err != nil {
					return err
				}
			}
			finish()
			if o.Output == OutputJSON {
				return o.Printer(cmd).Print(views, nil)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "first entry id")
	cmd.Flags().Int64Var(&to, "to", -1, "last entry id (default: the last add confirmed)")
	cmd.Flags().StringVar(&password, "password", "", "the ledger's password")
	cmd.Flags().BoolVar(&hex, "hex", false, "print payloads as hex")
	// BookKeeper's -m prints the entries' bodies; Folio always does.
	cmd.Flags().Bool("msg", false, "accepted for BookKeeper's -m: payloads are always printed")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-l=#0,-ledgerid=#0,-fe=--from,-firstentryid=--from,-le=--to,-lastentryid=--to,-m=--msg,-msg=--msg"}
	return cmd
}

// DeleteLedgerView is deleteledger's -o json document.
type DeleteLedgerView struct {
	LedgerID int64 `json:"ledgerId"`
	Deleted  bool  `json:"deleted"`
}

func newDeleteLedgerCommand(o *ShellOptions) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "deleteledger <ledger-id> --force",
		Short: "Delete a ledger",
		Long: "Delete a ledger's metadata; bookies garbage-collect its entries later. The\n" +
			"deletion cannot be undone, so it needs --force (-f), as BookKeeper's\n" +
			"deleteledger -force; without it nothing is deleted (exit code 2). A writer\n" +
			"still appending is not stopped: recover the ledger first if one may be.\n" +
			"With -o json: {\"ledgerId\": N, \"deleted\": true}.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLedgerID(cmd, args[0])
			if err != nil {
				return err
			}
			if !force {
				return Usagef(cmd, "refusing to delete ledger %d without --force: deletion cannot be undone", id)
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := d.DeleteLedger(ctx, id, metadata.VersionAny); err != nil {
				return ledgerError(id, err)
			}
			v := DeleteLedgerView{LedgerID: id, Deleted: true}
			return o.Printer(cmd).Print(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted ledger %d\n", id)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "confirm the deletion")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-l=#0,-ledgerid=#0,-f=--force,-force=--force"}
	return cmd
}

func newSimpleTestCommand(o *ShellOptions) *cobra.Command {
	st := iadmin.SimpleTestOptions{}
	cmd := &cobra.Command{
		Use:   "simpletest",
		Short: "Create a ledger, write, read back, close and delete it",
		Long: "BookKeeper's simpletest: create a ledger with the given ensemble size, write\n" +
			"quorum and ack quorum, append --entries entries, close it, read every entry\n" +
			"back and compare, then delete it, unless --keep (the ledger id is printed).\n" +
			"With -o json: {\"ledgerId\": N, \"ensemble\": [...], \"entriesWritten\": n,\n" +
			"\"entriesRead\": n, \"lastEntryId\": n}.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !(st.EnsembleSize >= st.WriteQuorum && st.WriteQuorum >= st.AckQuorum && st.AckQuorum >= 1) {
				return Usagef(cmd, "need ensemble ≥ write quorum ≥ ack quorum ≥ 1, got -e %d -w %d -a %d",
					st.EnsembleSize, st.WriteQuorum, st.AckQuorum)
			}
			if st.Entries < 0 {
				return Usagef(cmd, "--entries must not be negative, got %d", st.Entries)
			}
			ctx := cmd.Context()
			c, err := newClient(ctx, o)
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			var finish func()
			st.Progress, finish = progressFunc(o)
			res, err := iadmin.SimpleTest(ctx, c, d, st)
			finish()
			if err != nil {
				hint := "`folio shell listbookies` shows the writable bookies"
				if errors.Is(err, client.ErrNotEnoughBookies) {
					hint = fmt.Sprintf("the test needs %d writable bookies (-e); `folio shell listbookies --readwrite` lists them", st.EnsembleSize)
				} else if res.LedgerID >= 0 {
					hint = fmt.Sprintf("ledger %d is left for inspection: folio shell inspectledger %d", res.LedgerID, res.LedgerID)
				}
				return WithHint(fmt.Errorf("simpletest failed: %w", err), hint)
			}
			return o.Printer(cmd).Print(res, func(w io.Writer) error {
				fmt.Fprintf(w, "simpletest ok: ledger %d on %s: %d entries written, %d read back, last entry id %d\n",
					res.LedgerID, strings.Join(res.Ensemble, ","), res.EntriesWritten, res.EntriesRead, res.LastEntryID)
				if st.Keep {
					_, err := fmt.Fprintf(w, "kept ledger %d\n", res.LedgerID)
					return err
				}
				_, err := fmt.Fprintf(w, "deleted ledger %d\n", res.LedgerID)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.IntVarP(&st.EnsembleSize, "ensemble", "e", 3, "ensemble size")
	f.IntVarP(&st.WriteQuorum, "write-quorum", "w", 2, "write quorum size")
	f.IntVarP(&st.AckQuorum, "ack-quorum", "a", 2, "ack quorum size")
	f.IntVarP(&st.Entries, "entries", "n", 1000, "entries to write")
	f.BoolVar(&st.Keep, "keep", false, "keep the ledger and print its id instead of deleting it")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-e=--ensemble,-ensemble=--ensemble,-w=--write-quorum,-writeQuorum=--write-quorum,-a=--ack-quorum,-ackQuorum=--ack-quorum,-n=--entries,-numEntries=--entries"}
	return cmd
}

func newInspectLedgerCommand(o *ShellOptions) *cobra.Command {
	var httpFlags []string
	var httpSec adminHTTPFlags
	cmd := &cobra.Command{
		Use:   "inspectledger <ledger-id>",
		Short: "Show what each bookie holds of a ledger and what recovery would conclude",
		Long: "For every bookie of the ledger's ensembles: which entries it holds\n" +
			"(GET_LIST_OF_ENTRIES_OF_LEDGER) and its LAC (READ_LAC); for every fragment and\n" +
			"bookie, the entries of its write sets it lacks; and what a ledger recovery\n" +
			"would conclude. Nothing is changed: no fencing read, no metadata write.\n" +
			"The BookKeeper protocol cannot read a fence bit without setting it, so the\n" +
			"fence state comes from the bookies' admin HTTP servers (GET\n" +
			"/api/v1/bookie/ledger/info, read-only), given with --http: BOOKIE_ID=HOST:PORT\n" +
			"for one bookie, or HOST:PORT for a server of several bookies (folio\n" +
			"standalone's, asked for every bookie). Without an answer it is unknown.\n" +
			"For an https server write https://HOST:PORT; --http-tls-ca, --http-tls-cert,\n" +
			"--http-tls-key and --http-token-file give what a secured server requires.\n" +
			"With -o json: {\"ledgerId\", \"state\", \"bookies\": [...], \"fragments\": [...],\n" +
			"\"recovery\": {\"outcome\": \"closed\"|\"end\"|\"undecided\", \"lastEntryId\", ...}}.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLedgerID(cmd, args[0])
			if err != nil {
				return err
			}
			var eps iadmin.HTTPEndpoints
			for _, h := range httpFlags {
				if err := eps.ParseHTTPEndpoint(h); err != nil {
					return Usagef(cmd, "--http %v", err)
				}
			}
			if err := httpSec.apply(&eps); err != nil {
				return err
			}
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			ins, err := adm.InspectLedger(ctx, id, admin.InspectLedgerOptions{
				AdminHTTP: eps.ByBookie, SharedAdminHTTP: eps.Shared, HTTPClient: eps.Client, HTTPToken: eps.Token})
			if err != nil {
				return ledgerError(id, err)
			}
			return o.Printer(cmd).Print(ins, func(w io.Writer) error { return writeInspection(w, ins) })
		},
	}
	cmd.Flags().StringArrayVar(&httpFlags, "http", nil, "admin HTTP server to read fence bits from: [BOOKIE_ID=][https://]HOST:PORT (repeatable)")
	httpSec.register(cmd.Flags())
	return cmd
}

// maxRunsShown bounds the entry runs a text line lists.
const maxRunsShown = 6

func runsText(runs []admin.EntryRange) string {
	if len(runs) == 0 {
		return "-"
	}
	parts := []string{}
	for i, r := range runs {
		if i == maxRunsShown {
			parts = append(parts, fmt.Sprintf("… (%d runs)", len(runs)))
			break
		}
		if r.First == r.Last {
			parts = append(parts, strconv.FormatInt(r.First, 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	return strings.Join(parts, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func writeInspection(w io.Writer, ins *admin.LedgerInspection) error {
	fmt.Fprintf(w, "ledger %d: state %s, ensemble %d, write quorum %d, ack quorum %d, lastEntryId %d\n\n",
		ins.LedgerID, ins.State, ins.EnsembleSize, ins.WriteQuorumSize, ins.AckQuorumSize, ins.LastEntryID)
	t := Table{Headers: []string{"BOOKIE ID", "REACHABLE", "HAS LEDGER", "ENTRIES", "HELD", "LAC", "FENCED", "ERROR"}}
	for _, b := range ins.Bookies {
		fenced := "unknown"
		if b.Fenced != nil {
			fenced = yesNo(*b.Fenced)
		}
		t.Append(b.ID, yesNo(b.Reachable), yesNo(b.HasLedger), b.EntryCount, runsText(b.Entries), b.LAC, fenced, b.Error)
	}
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	for _, f := range ins.Fragments {
		span := "empty"
		if f.LastEntryID >= 0 {
			span = fmt.Sprintf("entries %d-%d", f.FirstEntryID, f.LastEntryID)
		}
		fmt.Fprintf(w, "\nfragment from entry %d (%s):\n", f.FirstEntryID, span)
		t := Table{Headers: []string{"  BOOKIE ID", "EXPECTED", "HELD", "MISSING"}}
		for _, b := range f.Bookies {
			missing := "-"
			switch {
			case !b.Reachable:
				missing = "unknown (bookie did not answer)"
			case b.MissingCount > 0:
				ids := make([]string, 0, min(len(b.Missing), 10))
				for _, e := range b.Missing[:min(len(b.Missing), 10)] {
					ids = append(ids, strconv.FormatInt(e, 10))
				}
				missing = fmt.Sprintf("%d: %s", b.MissingCount, strings.Join(ids, ","))
				if b.MissingCount > int64(len(ids)) {
					missing += ",…"
				}
			}
			t.Append("  "+b.ID, b.Expected, b.Held, missing)
		}
		if _, err := t.WriteTo(w); err != nil {
			return err
		}
	}
	r := ins.Recovery
	fmt.Fprintln(w)
	switch r.Outcome {
	case admin.RecoveryClosed:
		_, err := fmt.Fprintf(w, "recovery: nothing to do, the ledger is closed at entry %d\n", r.LastEntryID)
		return err
	case admin.RecoveryEnd:
		_, err := fmt.Fprintf(w, "recovery: would close the ledger at entry %d (LAC %d, reading from entry %d); %s\n",
			r.LastEntryID, r.LAC, r.StartEntryID, r.Reason)
		return err
	}
	_, err := fmt.Fprintf(w, "recovery: undecided at entry %d (LAC %d); %s\n", r.UndecidedEntryID, r.LAC, r.Reason)
	return err
}
