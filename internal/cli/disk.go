package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/storage/journal"
)

func init() {
	shellSubcommands = append(shellSubcommands, newReadJournalCommand)
}

// JournalRecordView is one journal record as readjournal prints it.
type JournalRecordView struct {
	// File and Offset are the position just after the record (journal
	// file id, byte offset).
	File     uint64 `json:"file"`
	Offset   int64  `json:"offset"`
	Type     string `json:"type"`
	LedgerID int64  `json:"ledgerId"`
	// EntryID is set for ADD_ENTRY records only (-1 otherwise).
	EntryID int64 `json:"entryId"`
	Length  int   `json:"length"`
}

func newReadJournalCommand(o *ShellOptions) *cobra.Command {
	var ledger int64
	cmd := &cobra.Command{
		Use:   "readjournal <journal-dir>",
		Short: "Print the records of a stopped bookie's journal",
		Long: "Read the journal files in <journal-dir> (a bookie's journalDirectories entry\n" +
			"followed by /current, e.g. folio-data/bookie-0/journal/current) offline and\n" +
			"print one line per record: position after it, type, ledger, entry, body\n" +
			"length. The bookie must be stopped. A torn tail is cut silently, as at\n" +
			"replay; damage elsewhere is an error (exit 1). --ledger keeps one ledger's\n" +
			"records. The metadata store is not used.\n" +
			"With -o json: [{\"file\", \"offset\", \"type\", \"ledgerId\", \"entryId\", \"length\"}, ...].",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return WithHint(fmt.Errorf("%s is not a directory", dir), "give the journal directory, e.g. folio-data/bookie-0/journal/current")
			}
			rows := []JournalRecordView{}
			w := cmd.OutOrStdout()
			t := Table{Headers: []string{"FILE", "OFFSET", "TYPE", "LEDGER ID", "ENTRY ID", "LENGTH"}}
			err := journal.Replay(vfs.Default, dir, journal.Position{}, func(pos journal.Position, rec journal.Record) error {
				if ledger >= 0 && rec.LedgerID != ledger {
					return nil
				}
				v := JournalRecordView{File: pos.File, Offset: pos.Offset, Type: rec.Type.String(), LedgerID: rec.LedgerID, EntryID: -1, Length: len(rec.Body)}
				if rec.Type == journal.TypeAddEntry {
					v.EntryID = rec.EntryID
				}
				if o.Output == OutputJSON {
					rows = append(rows, v)
				} else {
					t.Append(v.File, v.Offset, v.Type, v.LedgerID, v.EntryID, v.Length)
				}
				return nil
			})
			if err != nil {
				if errors.Is(err, journal.ErrCorrupt) {
					return WithHint(fmt.Errorf("journal %s: %w", dir, err), "keep a copy of the journal files for the support case; the bookie will refuse to start on it too")
				}
				return fmt.Errorf("journal %s: %w", dir, err)
			}
			return o.Printer(cmd).Print(rows, func(io.Writer) error {
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	cmd.Flags().Int64Var(&ledger, "ledger", -1, "print only this ledger's records")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-dir=#0"}
	return cmd
}
