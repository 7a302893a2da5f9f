package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/metadata"
)

func init() {
	shellSubcommands = append(shellSubcommands, newCookieCommand)
}

// CookieView is what `cookie get` prints.
type CookieView struct {
	BookieID    string   `json:"bookieId"`
	Version     int64    `json:"version"`
	Layout      int      `json:"layoutVersion"`
	JournalDirs []string `json:"journalDirs"`
	LedgerDirs  []string `json:"ledgerDirs"`
	IndexDirs   []string `json:"indexDirs,omitempty"`
	InstanceID  string   `json:"instanceId,omitempty"`
	Text        string   `json:"text"`
}

func newCookieCommand(o *ShellOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cookie",
		Short: "Read, replace or delete a bookie's cookie in the metadata store",
		Long: "A bookie's cookie records its id, directories and cluster instance id, in\n" +
			"the metadata store and in <dir>/current/VERSION of each of its directories.\n" +
			"A bookie whose directories and stored cookie disagree refuses to start.\n" +
			"Change the stored cookie only deliberately: after replacing a disk or\n" +
			"changing an address, once the bookie's ledgers are safe elsewhere.",
	}
	cmd.AddCommand(newCookieGetCommand(o), newCookieUpdateCommand(o), newCookieDeleteCommand(o))
	return groupCommand(cmd)
}

func bookieIDArg(cmd *cobra.Command, arg string) (metadata.BookieID, error) {
	id := metadata.BookieID(arg)
	if err := metadata.ValidateBookieID(id); err != nil {
		return "", Usagef(cmd, "%v", err)
	}
	return id, nil
}

func noCookieHint(err error, id metadata.BookieID) error {
	if errors.Is(err, metadata.ErrNoSuchCookie) {
		return WithHint(fmt.Errorf("bookie %s has no cookie", id), "list the bookies with cookies: `folio shell listbookies -a` (when available), or check --metadata-service-uri")
	}
	return err
}

func newCookieGetCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "get <bookieId>",
		Short: "Print a bookie's cookie",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := bookieIDArg(cmd, args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			data, v, err := d.ReadCookie(ctx, id)
			if err != nil {
				return noCookieHint(fmt.Errorf("reading the cookie of %s: %w", id, err), id)
			}
			view := CookieView{BookieID: string(id), Version: int64(v), Text: string(data)}
			if c, err := metadata.ParseCookie(data); err == nil {
				view.Layout, view.JournalDirs, view.LedgerDirs = c.LayoutVersion, c.JournalDirs, c.LedgerDirs
				view.IndexDirs, view.InstanceID = c.IndexDirs, c.InstanceID
			}
			return o.Printer(cmd).Print(view, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "# cookie of %s, version %d\n%s", id, v, data)
				return err
			})
		},
	}
}

func newCookieUpdateCommand(o *ShellOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "update <bookieId> --cookie-file FILE",
		Short: "Replace a bookie's stored cookie with a file's content",
		Long: "Replace the stored cookie of a bookie with the content of FILE (a cookie as\n" +
			"in <dir>/current/VERSION, naming the same bookie), as a compare-and-set on\n" +
			"the version just read. The bookie's directories must hold the same cookie,\n" +
			"or it still refuses to start.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := bookieIDArg(cmd, args[0])
			if err != nil {
				return err
			}
			if file == "" {
				return Usagef(cmd, "--cookie-file is required")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("reading the new cookie: %w", err)
			}
			c, err := metadata.ParseCookie(data)
			if err != nil {
				return WithHint(fmt.Errorf("%s: %w", file, err), "give a cookie file such as a bookie directory's current/VERSION")
			}
			if c.BookieID != id {
				return WithHint(fmt.Errorf("%s is the cookie of %s, not of %s", file, c.BookieID, id), "cookies are stored under the bookie id they name")
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			_, v, err := d.ReadCookie(ctx, id)
			if err != nil {
				return noCookieHint(fmt.Errorf("reading the cookie of %s: %w", id, err), id)
			}
			nv, err := d.WriteCookie(ctx, id, data, v)
			if errors.Is(err, metadata.ErrBadVersion) {
				return WithHint(fmt.Errorf("the cookie of %s changed while updating it", id), "read it again with `cookie get` and retry")
			}
			if err != nil {
				return fmt.Errorf("writing the cookie of %s: %w", id, err)
			}
			return o.Printer(cmd).Print(map[string]any{"bookieId": id, "version": int64(nv)}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "updated the cookie of %s (version %d)\n", id, nv)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&file, "cookie-file", "", "file holding the new cookie")
	// BookKeeper's spellings (bkflags.go): its cookie_update -cf FILE.
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-cf=--cookie-file"}
	return cmd
}

func newCookieDeleteCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <bookieId>",
		Short: "Delete a bookie's stored cookie",
		Long: "Delete the stored cookie of a bookie. A bookie with wiped directories may\n" +
			"then start as a new bookie; one whose directories still hold cookies will\n" +
			"refuse to start until they are wiped too (bookieformat).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := bookieIDArg(cmd, args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := d.DeleteCookie(ctx, id, metadata.VersionAny); err != nil {
				return noCookieHint(fmt.Errorf("deleting the cookie of %s: %w", id, err), id)
			}
			return o.Printer(cmd).Print(map[string]any{"bookieId": id, "deleted": true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted the cookie of %s\n", id)
				return err
			})
		},
	}
}
