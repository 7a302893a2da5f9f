package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/admin"
	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
)

func init() {
	shellSubcommands = append(shellSubcommands, newRecoverLedgerCommand)
}

// RecoverLedgerView is what `recoverledger` prints: the ledger's end after
// recovery, as stored in the metadata.
type RecoverLedgerView struct {
	LedgerID            int64          `json:"ledgerId"`
	State               string         `json:"state"`
	LastEntryID         int64          `json:"lastEntryId"`
	Length              int64          `json:"length"`
	AlreadyClosed       bool           `json:"alreadyClosed"`
	Forced              bool           `json:"forced"`
	PreviousLastEntryID *int64         `json:"previousLastEntryId,omitempty"`
	Version             int64          `json:"version"`
	Ensembles           []EnsembleView `json:"ensembles"`
}

func (v RecoverLedgerView) writeText(w io.Writer) error {
	t := Table{}
	t.Append("ledgerId", v.LedgerID)
	t.Append("state", v.State)
	t.Append("lastEntryId", v.LastEntryID)
	t.Append("length", v.Length)
	switch {
	case v.AlreadyClosed:
		t.Append("recovery", "not needed: the ledger was already closed (use --force to recover it again)")
	case v.Forced:
		t.Append("recovery", fmt.Sprintf("forced: the end was entry %d before", *v.PreviousLastEntryID))
	default:
		t.Append("recovery", "done")
	}
	for _, e := range v.Ensembles {
		t.Append(fmt.Sprintf("ensemble@%d", e.FirstEntryID), strings.Join(e.Bookies, ","))
	}
	_, err := t.WriteTo(w)
	return err
}

var recoverDigestNames = map[string]client.DigestType{
	"crc32": client.DigestCRC32, "hmac": client.DigestHMAC, "mac": client.DigestHMAC,
	"crc32c": client.DigestCRC32C, "dummy": client.DigestDummy,
}

func newRecoverLedgerCommand(o *ShellOptions) *cobra.Command {
	var (
		force    bool
		password string
		digest   string
	)
	cmd := &cobra.Command{
		Use:   "recoverledger <ledger-id>",
		Short: "Recover a ledger: fence it, find its end, close it",
		Long: "Recover one ledger as BookKeeper's ledger recovery does: mark it IN_RECOVERY,\n" +
			"fence its bookies (its writer, if alive, can add nothing more), find its last\n" +
			"entry and close it there. Prints the end, the length and the ensembles.\n" +
			"A closed ledger is left as it is unless --force is given: force recovery moves\n" +
			"it back to IN_RECOVERY and recovers it again, which may move its end; use it\n" +
			"only to repair a ledger closed at a wrong point.\n" +
			"The password and digest are the ledger's own, from its metadata; --password and\n" +
			"--digest are for legacy ledgers whose metadata stores none.\n" +
			"If recovery fails the ledger stays IN_RECOVERY; run the command again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id < 0 || id > metadata.MaxLedgerID {
				return Usagef(cmd, "bad ledger id %q: want an integer in [0, %d]", args[0], int64(metadata.MaxLedgerID))
			}
			var opts admin.RecoverLedgerOptions
			opts.Force = force
			if cmd.Flags().Changed("password") {
				opts.Password = []byte(password)
			}
			if digest != "" {
				dt, ok := recoverDigestNames[strings.ToLower(digest)]
				if !ok {
					return Usagef(cmd, "unknown digest %q: use crc32, crc32c, hmac or dummy", digest)
				}
				opts.DigestType = dt
			}
			ctx := cmd.Context()
			adm, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer adm.Close()
			res, err := adm.RecoverLedger(ctx, id, opts)
			switch {
			case errors.Is(err, admin.ErrNoSuchLedger):
				return fmt.Errorf("ledger %d does not exist", id)
			case errors.Is(err, admin.ErrNoPassword):
				return WithHint(err, "pass --password (and --digest if it is not crc32c)")
			case errors.Is(err, client.ErrUnauthorized):
				return WithHint(fmt.Errorf("recovering ledger %d: %w", id, err),
					"the bookies refused the password: give the ledger's password with --password")
			case errors.Is(err, client.ErrLedgerRecovery):
				return WithHint(fmt.Errorf("recovering ledger %d: %w", id, err),
					"the ledger stays IN_RECOVERY; bring its bookies back (see `folio shell ledgermetadata`) and run the command again")
			case err != nil:
				return fmt.Errorf("recovering ledger %d: %w", id, err)
			}
			view := RecoverLedgerView{
				LedgerID: res.LedgerID, State: res.State, LastEntryID: res.LastEntryID, Length: res.Length,
				AlreadyClosed: res.AlreadyClosed, Forced: res.Forced, Version: res.Version, Ensembles: []EnsembleView{},
			}
			if res.Forced {
				view.PreviousLastEntryID = &res.PreviousLastEntryID
			}
			for _, e := range res.Ensembles {
				view.Ensembles = append(view.Ensembles, EnsembleView{FirstEntryID: e.FirstEntryID, Bookies: e.Bookies})
			}
			return o.Printer(cmd).Print(view, view.writeText)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&force, "force", false, "recover a CLOSED ledger again (CLOSED → IN_RECOVERY → CLOSED); may move its end")
	f.StringVar(&password, "password", "", "password of a legacy ledger whose metadata stores none (ignored otherwise)")
	f.StringVar(&digest, "digest", "", "digest of a legacy ledger without a stored password: crc32, crc32c (default), hmac, dummy")
	return cmd
}
