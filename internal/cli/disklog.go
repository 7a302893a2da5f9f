package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

func init() {
	shellSubcommands = append(shellSubcommands, newReadLogCommand, newListFilesOnDiscCommand)
}

// EntryLogRecordView is one entry log record as readlog prints it.
type EntryLogRecordView struct {
	// Offset is the byte offset of the record header in the file.
	Offset   int64 `json:"offset"`
	LedgerID int64 `json:"ledgerId"`
	EntryID  int64 `json:"entryId"`
	// Length is the entry body's length in bytes (BookKeeper's entry
	// header, digest and payload, as the bookie stored it).
	Length int `json:"length"`
}

func newReadLogCommand(o *ShellOptions) *cobra.Command {
	var ledger, entry int64
	cmd := &cobra.Command{
		Use:   "readlog <entry-log-file> [--ledger N] [--entry E]",
		Short: "Print the records of one entry log file",
		Long: "Read one entry log file (e.g. folio-data/bookie-0/ledgers/current/entrylogs/\n" +
			"0000000000000001.log) offline and print one line per record: its offset,\n" +
			"ledger, entry and body length. Nothing is changed and the metadata store is\n" +
			"not used; a sealed log can be read while its bookie runs. --ledger keeps one\n" +
			"ledger's records, --entry (with --ledger) one entry's.\n" +
			"If the file does not verify to its end, the records before the damage are\n" +
			"printed and the command fails (exit 1) naming the offset: the bookie treats\n" +
			"that point as the end of the log's data.\n" +
			"With -o json: [{\"offset\", \"ledgerId\", \"entryId\", \"length\"}, ...].",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if entry >= 0 && ledger < 0 {
				return Usagef(cmd, "--entry needs --ledger")
			}
			if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
				return WithHint(fmt.Errorf("%s is not an entry log file", path), "give a file from a ledger directory, e.g. folio-data/bookie-0/ledgers/current/entrylogs/0000000000000001.log (folio shell listfilesondisc --entrylog lists them)")
			}
			rows := []EntryLogRecordView{}
			scanErr := entrylog.ScanFile(vfs.Default, path, func(r entrylog.Record) error {
				if (ledger >= 0 && r.LedgerID != ledger) || (entry >= 0 && r.EntryID != entry) {
					return nil
				}
				rows = append(rows, EntryLogRecordView{Offset: r.Offset, LedgerID: r.LedgerID, EntryID: r.EntryID, Length: len(r.Body)})
				return nil
			})
			var ce *entrylog.CorruptionError
			if scanErr != nil && !errors.As(scanErr, &ce) {
				return scanErr
			}
			// Print what verified, then report the damage (exit 1).
			if err := o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"OFFSET", "LEDGER ID", "ENTRY ID", "LENGTH"}}
				for _, r := range rows {
					t.Append(r.Offset, r.LedgerID, r.EntryID, r.Length)
				}
				_, err := t.WriteTo(w)
				return err
			}); err != nil {
				return err
			}
			if ce != nil {
				return WithHint(scanErr, "if the bookie was writing this log when it stopped, this is a torn tail and harmless (the bookie ignores it); otherwise keep a copy of the file for the support case")
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&ledger, "ledger", -1, "print only this ledger's records")
	cmd.Flags().Int64Var(&entry, "entry", -1, "print only this entry's records (needs --ledger)")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-l=--ledger,-ledgerid=--ledger,-e=--entry,-entryid=--entry"}
	return cmd
}

// DiskFileView is one file as listfilesondisc prints it.
type DiskFileView struct {
	// Kind is journal, entrylog or index.
	Kind string `json:"kind"`
	Path string `json:"path"`
	Size int64  `json:"size"`
}

func newListFilesOnDiscCommand(o *ShellOptions) *cobra.Command {
	var f bookieFlags
	var journal, entrylogs, index bool
	cmd := &cobra.Command{
		Use:   "listfilesondisc --conf FILE [--journal] [--entrylog] [--index]",
		Short: "List a bookie's journal, entry log and index files",
		Long: "List the files of the bookie whose configuration is given: journal files\n" +
			"(and CHECKPOINT) in each journalDirectories entry's current/, entry logs in\n" +
			"each ledgerDirectories entry's current/entrylogs/ (and entrylogs-shard-<i>/:\n" +
			"other shards' logs spilled there), and the Pebble index files\n" +
			"in current/index/ (Folio keeps the index with the ledgers; indexDirectories\n" +
			"only carry a cookie). Without a selection flag, all three are listed. Read\n" +
			"only; the metadata store is not used. For a standalone bookie:\n" +
			"  --set journalDirectories=folio-data/bookie-0/journal \\\n" +
			"  --set ledgerDirectories=folio-data/bookie-0/ledgers\n" +
			"With -o json: [{\"kind\", \"path\", \"size\"}, ...].",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load(o.env, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError})))
			if err != nil {
				return err
			}
			if !journal && !entrylogs && !index {
				journal, entrylogs, index = true, true, true
			}
			rows := []DiskFileView{}
			add := func(kind, dir string) error {
				got, err := listRegularFiles(kind, dir)
				rows = append(rows, got...)
				return err
			}
			if journal {
				for _, d := range cfg.JournalDirs {
					if err := add("journal", server.CurrentDir(d)); err != nil {
						return err
					}
				}
			}
			for _, d := range cfg.LedgerDirs {
				cur := server.CurrentDir(d)
				if entrylogs {
					// entrylogs/ holds the directory's own shard's logs;
					// entrylogs-shard-<i>/, those other shards spilled here
					// (a full directory, a storage expansion).
					logDirs, err := ledgerstore.EntryLogDirs(vfs.Default, cur)
					if err != nil {
						return err
					}
					for _, ld := range logDirs {
						if err := add("entrylog", ld); err != nil {
							return err
						}
					}
				}
				if index {
					if err := add("index", filepath.Join(cur, "index")); err != nil {
						return err
					}
				}
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"KIND", "PATH", "SIZE"}}
				for _, r := range rows {
					t.Append(r.Kind, r.Path, r.Size)
				}
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&journal, "journal", false, "list journal files")
	cmd.Flags().BoolVar(&entrylogs, "entrylog", false, "list entry log files")
	cmd.Flags().BoolVar(&index, "index", false, "list index files")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-txn=--journal,-journal=--journal,-log=--entrylog,-entrylog=--entrylog,-idx=--index,-index=--index,-conf=--conf"}
	return cmd
}

// listRegularFiles lists the regular files of dir, sorted by name. A
// missing directory is an empty list (a bookie that never started, or a
// ledger directory without entry logs yet).
func listRegularFiles(kind, dir string) ([]DiskFileView, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var out []DiskFileView
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile (a running bookie's compaction)
		}
		out = append(out, DiskFileView{Kind: kind, Path: filepath.Join(dir, e.Name()), Size: fi.Size()})
	}
	slices.SortFunc(out, func(a, b DiskFileView) int { return cmp.Compare(a.Path, b.Path) })
	return out, nil
}
