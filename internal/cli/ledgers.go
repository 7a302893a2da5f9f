package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	// The metadata drivers a URI can name register themselves.
	_ "github.com/foliodb/folio/internal/metadata/etcd"
	_ "github.com/foliodb/folio/internal/metadata/zk"
)

func init() {
	shellSubcommands = append(shellSubcommands, newListLedgersCommand, newLedgerMetadataCommand)
}

// openMetadata opens the driver the shell options name, with a hint when the
// store cannot be reached or the URI is wrong.
func openMetadata(ctx context.Context, o *ShellOptions) (metadata.Driver, error) {
	return openMetadataLogged(ctx, o, nil)
}

// openMetadataLogged is openMetadata for a long-running command: the
// driver's warnings (requests retried while the store fails over) go to log.
func openMetadataLogged(ctx context.Context, o *ShellOptions, log *slog.Logger) (metadata.Driver, error) {
	uri := o.MetadataURI()
	sec, err := o.MetadataSecurity()
	if err != nil {
		return nil, err
	}
	d, err := metadata.Open(ctx, uri, metadata.Options{Logger: log, Security: sec})
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, metadata.ErrBadURI), errors.Is(err, metadata.ErrNotBuilt):
		return nil, WithHint(err, "set --metadata-service-uri or $"+MetadataURIEnv+", e.g. "+DefaultMetadataURI)
	case securityHint(err) != "":
		return nil, WithHint(fmt.Errorf("cannot open the metadata store %s: %w", uri, err), securityHint(err))
	}
	return nil, WithHint(fmt.Errorf("cannot open the metadata store %s: %w", uri, err),
		"check that the metadata store is running and reachable")
}

// listLedgersPage is how many ids one ListLedgers call fetches.
const listLedgersPage = 1000

// LedgerListRow is one row of `listledgers`; its JSON is {"ledgerId":N}.
type LedgerListRow struct {
	LedgerID int64 `json:"ledgerId"`
}

func newListLedgersCommand(o *ShellOptions) *cobra.Command {
	var (
		bookie string
		meta   bool
	)
	cmd := &cobra.Command{
		Use:   "listledgers",
		Short: "List the ids of all ledgers, ascending",
		Long: "List the ids of all ledgers in the metadata store, in ascending order.\n" +
			"With -o json: [{\"ledgerId\": N}, ...], ids as exact integers.\n" +
			"--bookieid keeps the ledgers that store entries on that bookie (BookKeeper's\n" +
			"areEntriesOfLedgerStoredInTheBookie); -m prints each ledger's metadata (with\n" +
			"-o json, ledgermetadata's object per ledger).",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{bkFlagsAnnotation: "-bookieid=--bookieid,-id=--bookieid,-meta=--meta"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bookie != "" {
				if err := metadata.ValidateBookieID(metadata.BookieID(bookie)); err != nil {
					return Usagef(cmd, "--bookieid: %v", err)
				}
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			rows := []LedgerListRow{} // `[]`, not `null`, when there are none
			metas := []LedgerMetadataView{}
			for start := int64(0); ; {
				ids, err := d.ListLedgers(ctx, start, listLedgersPage)
				if err != nil {
					return fmt.Errorf("listing ledgers: %w", err)
				}
				if len(ids) == 0 {
					break
				}
				for _, id := range ids {
					if !meta && bookie == "" {
						rows = append(rows, LedgerListRow{LedgerID: id})
						continue
					}
					md, v, err := d.ReadLedger(ctx, id)
					if errors.Is(err, metadata.ErrNoSuchLedger) {
						continue // deleted meanwhile
					}
					if err != nil {
						return fmt.Errorf("reading ledger %d: %w", id, err)
					}
					if bookie != "" && !admin.StoresEntriesOn(md, metadata.BookieID(bookie)) {
						continue
					}
					rows = append(rows, LedgerListRow{LedgerID: id})
					if meta {
						metas = append(metas, newLedgerMetadataView(id, md, v))
					}
				}
				start = ids[len(ids)-1] + 1
			}
			if meta {
				return o.Printer(cmd).Print(metas, func(w io.Writer) error {
					for i, m := range metas {
						if i > 0 {
							fmt.Fprintln(w)
						}
						if err := m.writeText(w); err != nil {
							return err
						}
					}
					return nil
				})
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"LEDGER ID"}}
				for _, r := range rows {
					t.Append(r.LedgerID)
				}
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&bookie, "bookieid", "", "only ledgers that store entries on this bookie")
	cmd.Flags().BoolVarP(&meta, "meta", "m", false, "print each ledger's metadata")
	return cmd
}

// LedgerMetadataView is what `ledgermetadata` prints: the ledger's metadata
// as stored, with its version. The password is never printed (as Java's
// LedgerMetadata.toString omits it); customMetadata values are bytes, in
// JSON as base64.
type LedgerMetadataView struct {
	LedgerID        int64             `json:"ledgerId"`
	Version         int64             `json:"version"`
	FormatVersion   int               `json:"formatVersion"`
	State           string            `json:"state"`
	EnsembleSize    int               `json:"ensembleSize"`
	WriteQuorumSize int               `json:"writeQuorumSize"`
	AckQuorumSize   int               `json:"ackQuorumSize"`
	LastEntryID     int64             `json:"lastEntryId"`
	Length          int64             `json:"length"`
	DigestType      string            `json:"digestType,omitempty"`
	HasPassword     bool              `json:"hasPassword"`
	Ensembles       []EnsembleView    `json:"ensembles"`
	CustomMetadata  map[string][]byte `json:"customMetadata,omitempty"`
	Ctime           *int64            `json:"ctime,omitempty"`
	CToken          int64             `json:"cToken"`
}

// EnsembleView is one segment: the bookies storing entries from FirstEntryID.
type EnsembleView struct {
	FirstEntryID int64    `json:"firstEntryId"`
	Bookies      []string `json:"bookies"`
}

func newLedgerMetadataView(id int64, md *metadata.LedgerMetadata, v metadata.Version) LedgerMetadataView {
	view := LedgerMetadataView{
		LedgerID: id, Version: int64(v), FormatVersion: md.FormatVersion, State: md.State.String(),
		EnsembleSize: md.EnsembleSize, WriteQuorumSize: md.WriteQuorum, AckQuorumSize: md.AckQuorum,
		LastEntryID: md.LastEntryID, Length: md.Length,
		HasPassword: md.HasPassword, CustomMetadata: md.CustomMetadata, CToken: md.CToken,
		Ensembles: []EnsembleView{},
	}
	if md.HasPassword {
		view.DigestType = md.DigestType.String()
	}
	if md.StoreCtime {
		view.Ctime = &md.Ctime
	}
	for _, s := range md.Ensembles {
		e := EnsembleView{FirstEntryID: s.FirstEntryID, Bookies: []string{}}
		for _, b := range s.Ensemble {
			e.Bookies = append(e.Bookies, string(b))
		}
		view.Ensembles = append(view.Ensembles, e)
	}
	return view
}

func (v LedgerMetadataView) writeText(w io.Writer) error {
	t := Table{}
	t.Append("ledgerId", v.LedgerID)
	t.Append("version", v.Version)
	t.Append("formatVersion", v.FormatVersion)
	t.Append("state", v.State)
	t.Append("ensembleSize", v.EnsembleSize)
	t.Append("writeQuorumSize", v.WriteQuorumSize)
	t.Append("ackQuorumSize", v.AckQuorumSize)
	t.Append("lastEntryId", v.LastEntryID)
	t.Append("length", v.Length)
	if v.HasPassword {
		t.Append("digestType", v.DigestType)
		t.Append("password", "(present, not shown)")
	} else {
		t.Append("digestType", "(none: no password stored)")
	}
	for _, e := range v.Ensembles {
		t.Append(fmt.Sprintf("ensemble@%d", e.FirstEntryID), strings.Join(e.Bookies, ","))
	}
	for _, k := range slices.Sorted(maps.Keys(v.CustomMetadata)) {
		t.Append("custom["+strconv.Quote(k)+"]", strconv.Quote(string(v.CustomMetadata[k])))
	}
	if v.Ctime != nil {
		t.Append("ctime", *v.Ctime)
	}
	t.Append("cToken", v.CToken)
	_, err := t.WriteTo(w)
	return err
}

func newLedgerMetadataCommand(o *ShellOptions) *cobra.Command {
	var (
		flagID          string
		dumpTo, restore string
		update          bool
	)
	cmd := &cobra.Command{
		Use:   "ledgermetadata <ledger-id>",
		Short: "Print a ledger's metadata; dump it to a file or restore it from one",
		Long: "Print the metadata of one ledger as stored in the metadata store, with its\n" +
			"version (the etcd mod revision). The id may also be given as --ledgerid, as\n" +
			"in BookKeeper's shell. The password is never printed.\n" +
			"--dumptofile F writes the metadata to F in BookKeeper's binary form (as Java's\n" +
			"-dumptofile; it holds the password: F is created mode 0600).\n" +
			"--restorefromfile F stores F's metadata as the ledger's: created if the ledger\n" +
			"has none; if it has, refused unless --update, which replaces it (a\n" +
			"compare-and-set on the version just read).",
		Args:        cobra.MaximumNArgs(1),
		Annotations: map[string]string{bkFlagsAnnotation: "-ledgerid=--ledgerid,-dumptofile=--dumptofile,-restorefromfile=--restorefromfile,-update=--update"},
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := flagID
			switch {
			case len(args) == 1 && flagID != "":
				return Usagef(cmd, "give the ledger id once: as an argument or as --ledgerid")
			case len(args) == 1:
				raw = args[0]
			case flagID == "":
				return Usagef(cmd, "missing ledger id")
			}
			id, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || id < 0 || id > metadata.MaxLedgerID {
				return Usagef(cmd, "bad ledger id %q: want an integer in [0, %d]", raw, int64(metadata.MaxLedgerID))
			}
			if dumpTo != "" && restore != "" {
				return Usagef(cmd, "give only one of --dumptofile and --restorefromfile")
			}
			if update && restore == "" {
				return Usagef(cmd, "--update goes with --restorefromfile")
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			if restore != "" {
				return restoreLedgerMetadata(cmd, o, d, id, restore, update)
			}
			if dumpTo != "" {
				return dumpLedgerMetadata(cmd, o, d, id, dumpTo)
			}
			md, v, err := d.ReadLedger(ctx, id)
			switch {
			case errors.Is(err, metadata.ErrNoSuchLedger):
				return fmt.Errorf("ledger %d does not exist", id)
			case errors.Is(err, metadata.ErrCorruptMetadata):
				return WithHint(fmt.Errorf("ledger %d: %w", id, err),
					"the stored value cannot be read by Folio or Java BookKeeper; inspect the key with etcdctl")
			case err != nil:
				return fmt.Errorf("reading ledger %d: %w", id, err)
			}
			view := newLedgerMetadataView(id, md, v)
			return o.Printer(cmd).Print(view, view.writeText)
		},
	}
	cmd.Flags().StringVarP(&flagID, "ledgerid", "l", "", "the ledger id (alternative to the argument)")
	cmd.Flags().StringVarP(&dumpTo, "dumptofile", "d", "", "write the ledger's metadata to this file (BookKeeper's binary form)")
	cmd.Flags().StringVarP(&restore, "restorefromfile", "r", "", "store this file's metadata (BookKeeper's binary form) as the ledger's")
	cmd.Flags().BoolVarP(&update, "update", "u", false, "with --restorefromfile: replace existing metadata")
	return cmd
}

// LedgerMetadataFileView is what ledgermetadata --dumptofile and
// --restorefromfile print.
type LedgerMetadataFileView struct {
	LedgerID int64  `json:"ledgerId"`
	File     string `json:"file"`
	Action   string `json:"action"` // dumped, created, updated
	Bytes    int    `json:"bytes"`
	Version  int64  `json:"version,omitempty"`
}

func dumpLedgerMetadata(cmd *cobra.Command, o *ShellOptions, d metadata.Driver, id int64, path string) error {
	b, err := admin.DumpLedgerMetadata(cmd.Context(), d, id)
	switch {
	case errors.Is(err, metadata.ErrNoSuchLedger):
		return fmt.Errorf("ledger %d does not exist", id)
	case err != nil:
		return fmt.Errorf("reading ledger %d: %w", id, err)
	}
	if err := writeFileSynced(path, b, 0o600); err != nil {
		return err
	}
	v := LedgerMetadataFileView{LedgerID: id, File: path, Action: "dumped", Bytes: len(b)}
	return o.Printer(cmd).Print(v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "dumped the metadata of ledger %d to %s (%d bytes)\n", id, path, len(b))
		return err
	})
}

func restoreLedgerMetadata(cmd *cobra.Command, o *ShellOptions, d metadata.Driver, id int64, path string, update bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the metadata file: %w", err)
	}
	res, err := admin.RestoreLedgerMetadata(cmd.Context(), d, id, b, update)
	switch {
	case errors.Is(err, metadata.ErrLedgerExists):
		return WithHint(fmt.Errorf("ledger %d already has metadata; not overwriting it", id),
			"add --update to replace it (check it first with `folio shell ledgermetadata "+strconv.FormatInt(id, 10)+"`)")
	case errors.Is(err, metadata.ErrCorruptMetadata):
		return fmt.Errorf("%s is not BookKeeper ledger metadata: %w", path, err)
	case err != nil:
		return fmt.Errorf("restoring ledger %d from %s: %w", id, path, err)
	}
	v := LedgerMetadataFileView{LedgerID: id, File: path, Action: "updated", Bytes: len(b), Version: res.Version}
	if res.Created {
		v.Action = "created"
	}
	return o.Printer(cmd).Print(v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s the metadata of ledger %d from %s (version %d)\n", v.Action, id, path, v.Version)
		return err
	})
}

// writeFileSynced writes data to path with mode perm and fsyncs it.
func writeFileSynced(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
