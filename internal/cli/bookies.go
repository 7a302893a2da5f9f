package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/admin"
)

func init() {
	shellSubcommands = append(shellSubcommands, newListBookiesCommand, newBookieInfoCommand, newBookieSanityCommand)
}

// warnLogger is the logger shell commands give the client and transport:
// warnings and errors on stderr, nothing else, so output stays readable.
func warnLogger(o *ShellOptions) *slog.Logger {
	w := o.env.Stderr
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newListBookiesCommand(o *ShellOptions) *cobra.Command {
	var rw, ro bool
	cmd := &cobra.Command{
		Use:   "listbookies [--readwrite|--readonly]",
		Short: "List the registered bookies",
		Long: "List the bookies registered in the metadata store: writable ones, then\n" +
			"read-only ones. --readwrite or --readonly lists one kind only (BookKeeper's\n" +
			"-rw / -ro); by default both.\n" +
			"With -o json: [{\"id\": \"127.0.0.1:3181\", \"state\": \"writable\"|\"readonly\"}, ...].",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rw && ro {
				return Usagef(cmd, "give at most one of --readwrite and --readonly")
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			rows, err := admin.ListBookies(ctx, d, !ro, !rw)
			if err != nil {
				return err
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"BOOKIE ID", "STATE"}}
				for _, r := range rows {
					t.Append(r.ID, r.State)
				}
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&rw, "readwrite", false, "list only writable bookies")
	cmd.Flags().BoolVar(&ro, "readonly", false, "list only read-only bookies")
	return cmd
}

func newBookieInfoCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "bookieinfo",
		Short: "Show each registered bookie's disk space",
		Long: "Ask every registered bookie (writable and read-only) for its free and total\n" +
			"disk space with GET_BOOKIE_INFO, as BookKeeper's bookieinfo does. A bookie\n" +
			"that does not answer is listed with its error and the exit code is 1.\n" +
			"With -o json: [{\"id\", \"freeDiskSpace\", \"totalDiskCapacity\", \"error\"?}, ...],\n" +
			"sizes in bytes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			bookies, err := admin.ListBookies(ctx, d, true, true)
			if err != nil {
				return err
			}
			ids := make([]string, len(bookies))
			for i, b := range bookies {
				ids[i] = b.ID
			}
			bk, err := o.newBookies(warnLogger(o), d)
			if err != nil {
				return err
			}
			defer bk.Close()
			rows := bk.Info(ctx, ids)
			failed := 0
			for _, r := range rows {
				if r.Error != "" {
					failed++
				}
			}
			err = o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"BOOKIE ID", "FREE", "TOTAL", "USED", "ERROR"}}
				for _, r := range rows {
					if r.Error != "" {
						t.Append(r.ID, "-", "-", "-", r.Error)
						continue
					}
					used := "-"
					if r.TotalDiskCapacity > 0 {
						used = fmt.Sprintf("%.1f%%", 100*float64(r.TotalDiskCapacity-r.FreeDiskSpace)/float64(r.TotalDiskCapacity))
					}
					t.Append(r.ID, humanBytes(r.FreeDiskSpace), humanBytes(r.TotalDiskCapacity), used, "")
				}
				_, err := t.WriteTo(w)
				return err
			})
			if err == nil && failed > 0 {
				err = WithHint(fmt.Errorf("%d of %d bookies did not answer", failed, len(rows)), "check that those bookies are running and reachable from here")
			}
			return err
		},
	}
}

// humanBytes formats n bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func newBookieSanityCommand(o *ShellOptions) *cobra.Command {
	var bookie string
	var entries int
	cmd := &cobra.Command{
		Use:   "bookiesanity",
		Short: "Write and read back entries on one bookie",
		Long: "BookKeeper's bookiesanity: create a ledger whose ensemble is one bookie alone,\n" +
			"add entries to it directly, read them back, compare, delete the ledger.\n" +
			"--bookie names the bookie (host:port); without it every writable bookie is\n" +
			"checked in turn. Exit code 1 if any check fails.\n" +
			"With -o json: [{\"bookie\", \"ledgerId\", \"entriesWritten\", \"entriesRead\", \"ok\", \"error\"?}, ...].",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if entries < 1 {
				return Usagef(cmd, "--entries must be at least 1, got %d", entries)
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			targets := []string{bookie}
			if bookie == "" {
				bookies, err := admin.ListBookies(ctx, d, true, false)
				if err != nil {
					return err
				}
				if len(bookies) == 0 {
					return WithHint(errors.New("no writable bookie is registered"), "start a bookie, or name one with --bookie")
				}
				targets = targets[:0]
				for _, b := range bookies {
					targets = append(targets, b.ID)
				}
			}
			bk, err := o.newBookies(warnLogger(o), d)
			if err != nil {
				return err
			}
			defer bk.Close()
			rows := []admin.SanityResult{}
			failed := 0
			for _, b := range targets {
				r, err := admin.BookieSanity(ctx, d, bk, b, entries)
				if err != nil {
					failed++
				}
				rows = append(rows, r)
			}
			err = o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"BOOKIE ID", "RESULT", "WRITTEN", "READ", "ERROR"}}
				for _, r := range rows {
					res := "ok"
					if !r.OK {
						res = "FAILED"
					}
					t.Append(r.Bookie, res, r.EntriesWritten, r.EntriesRead, r.Error)
				}
				_, err := t.WriteTo(w)
				return err
			})
			if err == nil && failed > 0 {
				err = WithHint(fmt.Errorf("bookie sanity check failed on %d of %d bookies", failed, len(rows)),
					"look at the failing bookie's log; `folio shell bookieinfo` shows whether it answers at all")
			}
			return err
		},
	}
	cmd.Flags().StringVar(&bookie, "bookie", "", "the bookie to check, host:port (default: every writable bookie)")
	cmd.Flags().IntVarP(&entries, "entries", "n", 10, "entries to write and read")
	return cmd
}
