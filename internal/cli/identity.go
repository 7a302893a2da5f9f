package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/metadata"
)

// Bookie identity commands: endpointinfo, updatecookie, updateledgers,
// updateBookieInLedger (BookKeeper's, with its single-dash spellings).

func init() {
	shellSubcommands = append(shellSubcommands, newEndpointInfoCommand, newUpdateCookieCommand,
		newUpdateLedgersCommand, newUpdateBookieInLedgerCommand)
}

// bkFlagsAnnotation is the annotation key under which a command declares
// BookKeeper's single-dash flag spellings (`-single=--gnu`, comma-separated;
// `-x=#0` for the first positional argument).
const bkFlagsAnnotation = BKFlagsAnnotation

// EndpointView is one endpoint of `endpointinfo`.
type EndpointView struct {
	ID         string   `json:"id"`
	Host       string   `json:"host"`
	Port       int      `json:"port"`
	Protocol   string   `json:"protocol"`
	Auth       []string `json:"auth"`
	Extensions []string `json:"extensions"`
}

// EndpointInfoView is what `endpointinfo` prints: the BookieServiceInfo the
// bookie published with its registration.
type EndpointInfoView struct {
	BookieID   string            `json:"bookieId"`
	Endpoints  []EndpointView    `json:"endpoints"`
	Properties map[string]string `json:"properties"`
}

func newEndpointInfoCommand(o *ShellOptions) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "endpointinfo --bookieid ID",
		Short: "Print the endpoints a bookie published with its registration",
		Long: "Print the BookieServiceInfo of a registered bookie: its endpoints (the bookie\n" +
			"protocol's address, the admin HTTP server's) and properties, as BookKeeper's\n" +
			"endpointinfo does. This is where clients look up a bookie whose id is not\n" +
			"host:port (bookieId). A bookie that is not registered has none: the command\n" +
			"fails. A bookie registered without info (a Java bookie on etcd) shows the\n" +
			"address its host:port id names.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{bkFlagsAnnotation: "-bookieid=--bookieid"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" {
				return Usagef(cmd, "--bookieid is required")
			}
			b := metadata.BookieID(id)
			if err := metadata.ValidateBookieID(b); err != nil {
				return Usagef(cmd, "--bookieid: %v", err)
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			r, ok := d.(metadata.ServiceInfoReader)
			if !ok {
				return fmt.Errorf("endpointinfo: %w", metadata.ErrNotSupported)
			}
			info, err := r.ReadBookieServiceInfo(ctx, b)
			if errors.Is(err, metadata.ErrNotFound) {
				return WithHint(fmt.Errorf("bookie %s is not registered: it published no endpoints", id),
					"list the registered bookies with `folio shell listbookies`")
			}
			if err != nil {
				return fmt.Errorf("reading the service info of %s: %w", id, err)
			}
			view := EndpointInfoView{BookieID: id, Endpoints: []EndpointView{}, Properties: info.Properties}
			if view.Properties == nil {
				view.Properties = map[string]string{}
			}
			for _, e := range info.Endpoints {
				ev := EndpointView{ID: e.ID, Host: e.Host, Port: e.Port, Protocol: e.Protocol, Auth: e.Auth, Extensions: e.Extensions}
				if ev.Auth == nil {
					ev.Auth = []string{}
				}
				if ev.Extensions == nil {
					ev.Extensions = []string{}
				}
				view.Endpoints = append(view.Endpoints, ev)
			}
			if len(view.Endpoints) == 0 {
				return fmt.Errorf("bookie %s published no endpoints", id)
			}
			return o.Printer(cmd).Print(view, func(w io.Writer) error {
				t := Table{Headers: []string{"ENDPOINT", "PROTOCOL", "ADDRESS", "AUTH", "EXTENSIONS"}}
				for _, e := range view.Endpoints {
					t.Append(e.ID, e.Protocol, fmt.Sprintf("%s:%d", e.Host, e.Port), strings.Join(e.Auth, ","), strings.Join(e.Extensions, ","))
				}
				fmt.Fprintf(w, "bookie %s\n", view.BookieID)
				if _, err := t.WriteTo(w); err != nil {
					return err
				}
				for k, v := range view.Properties {
					fmt.Fprintf(w, "property %s = %s\n", k, v)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&id, "bookieid", "b", "", "the bookie id (required)")
	return cmd
}

// openBookieMetadata opens the metadata store of a bookie configuration:
// the shell's --metadata-service-uri if given, else the configuration's
// metadataServiceUri, with the configuration's metadata store security
// unless the shell's flags say otherwise.
func openBookieMetadata(ctx context.Context, cmd *cobra.Command, o *ShellOptions, cfg *server.Config) (metadata.Driver, error) {
	if fl := cmd.Flag("metadata-service-uri"); fl != nil && fl.Changed {
		cfg.MetadataServiceURI = o.MetadataServiceURI
	}
	so := *o
	so.MetadataServiceURI = cfg.MetadataServiceURI
	if !o.metadataSec.given() {
		sec, err := cfg.LoadMetadataSecurity()
		if err != nil {
			return nil, WithHint(err, "fix the configuration file or give the shell's --metadata-tls-* and --metadata-user flags")
		}
		if !sec.IsZero() {
			so.security = &sec
		}
	}
	return openMetadata(ctx, &so)
}

// oldAndNewIDs returns the bookie's ids under the other choice of
// useHostNameAsBookieID (old) and under the configuration (new), checking
// that the configuration agrees with the requested choice, as BookKeeper's
// updatecookie and updateledgers do.
func oldAndNewIDs(cmd *cobra.Command, cfg server.Config, choice string) (oldID, newID metadata.BookieID, err error) {
	var hostname bool
	switch choice {
	case "hostname":
		hostname = true
	case "ip":
	case "":
		return "", "", Usagef(cmd, "--bookieid hostname|ip is required")
	default:
		return "", "", Usagef(cmd, "--bookieid %q: want hostname or ip", choice)
	}
	if cfg.UseHostNameAsBookieID != hostname {
		return "", "", WithHint(fmt.Errorf("--bookieid %s expects useHostNameAsBookieID=%v in the configuration", choice, hostname),
			"set useHostNameAsBookieID to the id the bookie is to have from now on, then run the command again")
	}
	if newID, err = cfg.BookieID(cfg.BookiePort); err != nil {
		return "", "", WithHint(err, "the bookie id comes from advertisedAddress, useHostNameAsBookieID and bookiePort")
	}
	prev := cfg
	prev.UseHostNameAsBookieID = !hostname
	if oldID, err = prev.BookieID(cfg.BookiePort); err != nil {
		return "", "", WithHint(err, "the previous bookie id comes from advertisedAddress, useHostNameAsBookieID and bookiePort")
	}
	return oldID, newID, nil
}

// UpdateCookieView is what `updatecookie` prints.
type UpdateCookieView struct {
	Action   string `json:"action"`
	BookieID string `json:"bookieId"`
	// OldBookieID is the id replaced (-bookieId).
	OldBookieID string `json:"oldBookieId,omitempty"`
	// Directories whose cookie file was written (-bookieId,
	// -expandstorage: the added ones) or deleted (-delete).
	Directories []string `json:"directories"`
	// LocalCookies are the cookie files found (-list) or deleted (-delete).
	LocalCookies []string `json:"localCookies"`
	// StoredCookie: the metadata store has a cookie for the bookie (-list),
	// or had one and it was deleted (-delete).
	StoredCookie    bool   `json:"storedCookie"`
	StoredCookieKey string `json:"storedCookieKey,omitempty"`
}

func newUpdateCookieCommand(o *ShellOptions) *cobra.Command {
	var (
		f                         bookieFlags
		idChoice, fromID          string
		expand, list, del, forced bool
	)
	cmd := &cobra.Command{
		Use:   "updatecookie --conf FILE (--bookieid hostname|ip | --expandstorage | --list | --delete [--force])",
		Short: "Change a stopped bookie's cookie: its id, its directories; list or delete it",
		Long: "Work on the cookie of a stopped bookie, from its configuration and directories,\n" +
			"as BookKeeper's updatecookie does (exactly one action):\n" +
			"  --bookieid hostname|ip  the bookie changes id from its IP address to its host\n" +
			"                          name (or back); useHostNameAsBookieID in the\n" +
			"                          configuration must already say the new choice. The\n" +
			"                          cookie in every directory and in the metadata store\n" +
			"                          is rewritten under the new id and the old one deleted.\n" +
			"                          Then rewrite the ledgers: `updateledgers`.\n" +
			"  --from-bookieid OLD     (Folio) the bookie was OLD and its configuration now\n" +
			"                          gives another id (advertisedAddress, bookieId or a\n" +
			"                          new IP): move the cookie as --bookieid does. Then\n" +
			"                          `updateBookieInLedger --srcBookie OLD --destBookie NEW`.\n" +
			"  --expandstorage         add the configuration's new (empty) ledger or index\n" +
			"                          directories to the cookie (new ledger directories\n" +
			"                          go after the existing ones); the bookie's storage\n" +
			"                          takes them at its next start. Same as starting it\n" +
			"                          once with allowStorageExpansion=true.\n" +
			"  --list                  print the cookie files and whether the store has one.\n" +
			"  --delete --force        delete the cookie files and the stored cookie (the\n" +
			"                          data stays; the bookie will refuse it until formatted).\n" +
			"Refuses while the bookie is registered (running).",
		Args: func(cmd *cobra.Command, args []string) error {
			// BookKeeper spells the forced delete `-delete force`.
			if len(args) == 1 && args[0] == "force" && del {
				return nil
			}
			return cobra.NoArgs(cmd, args)
		},
		Annotations: map[string]string{bkFlagsAnnotation: "-bookieId=--bookieid,-bookieid=--bookieid,-expandstorage=--expandstorage,-list=--list,-delete=--delete,-force=--force"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				forced = true
			}
			n := 0
			for _, on := range []bool{idChoice != "", fromID != "", expand, list, del} {
				if on {
					n++
				}
			}
			if n != 1 {
				return Usagef(cmd, "give exactly one of --bookieid, --from-bookieid, --expandstorage, --list, --delete")
			}
			if fromID != "" {
				if err := metadata.ValidateBookieID(metadata.BookieID(fromID)); err != nil {
					return Usagef(cmd, "--from-bookieid: %v", err)
				}
			}
			if del && !forced {
				return Usagef(cmd, "--delete removes the bookie's cookies; confirm with --force")
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
			cfg, err := f.load(o.env, log)
			if err != nil {
				return err
			}
			id, err := cfg.BookieID(cfg.BookiePort)
			if err != nil {
				return WithHint(err, "the bookie id comes from bookieId, or advertisedAddress and bookiePort, in the configuration")
			}
			oldID := metadata.BookieID(fromID)
			if idChoice != "" {
				if oldID, id, err = oldAndNewIDs(cmd, cfg, idChoice); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			d, err := openBookieMetadata(ctx, cmd, o, &cfg)
			if err != nil {
				return err
			}
			defer d.Close()
			view := UpdateCookieView{BookieID: string(id), Directories: []string{}, LocalCookies: []string{}}
			switch {
			case oldID != "":
				view.Action, view.OldBookieID = "bookieId", string(oldID)
				res, err := server.UpdateCookieBookieID(ctx, d, &cfg, oldID, id)
				if err != nil {
					return cookieHint(fmt.Errorf("updating the cookie of %s to %s: %w", oldID, id, err))
				}
				view.Directories = append(view.Directories, res.Directories...)
				view.StoredCookie, view.StoredCookieKey = true, metadata.CookieKeyOf(d, id)
			case expand:
				view.Action = "expandstorage"
				res, err := server.ExpandStorage(ctx, d, &cfg, id)
				if err != nil {
					return cookieHint(fmt.Errorf("expanding the storage of %s: %w", id, err))
				}
				view.Directories = append(view.Directories, res.Added...)
				view.StoredCookie, view.StoredCookieKey = true, metadata.CookieKeyOf(d, id)
			case list:
				view.Action = "list"
				files, err := server.CookieFiles(&cfg)
				if err != nil {
					return err
				}
				view.LocalCookies = append(view.LocalCookies, files...)
				_, _, err = d.ReadCookie(ctx, id)
				switch {
				case err == nil:
					view.StoredCookie, view.StoredCookieKey = true, metadata.CookieKeyOf(d, id)
				case !errors.Is(err, metadata.ErrNoSuchCookie):
					return fmt.Errorf("reading the cookie of %s: %w", id, err)
				}
			case del:
				view.Action = "delete"
				files, stored, err := server.DeleteCookies(ctx, d, &cfg, id)
				if err != nil {
					return cookieHint(fmt.Errorf("deleting the cookies of %s: %w", id, err))
				}
				view.LocalCookies = append(view.LocalCookies, files...)
				view.StoredCookie = stored
				if stored {
					view.StoredCookieKey = metadata.CookieKeyOf(d, id)
				}
			}
			return o.Printer(cmd).Print(view, func(w io.Writer) error { return view.writeText(w) })
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&idChoice, "bookieid", "b", "", "hostname or ip: move the cookie to the id the configuration now gives")
	fl.StringVar(&fromID, "from-bookieid", "", "the bookie's previous id: move its cookie to the id the configuration now gives")
	fl.BoolVarP(&expand, "expandstorage", "e", false, "add the configuration's new empty directories to the cookie")
	fl.BoolVarP(&list, "list", "l", false, "list the cookie files and the stored cookie")
	fl.BoolVarP(&del, "delete", "d", false, "delete the cookie files and the stored cookie (with --force)")
	fl.BoolVarP(&forced, "force", "f", false, "confirm --delete")
	return cmd
}

func (v UpdateCookieView) writeText(w io.Writer) error {
	var err error
	switch v.Action {
	case "bookieId":
		_, err = fmt.Fprintf(w, "cookie of %s is now the cookie of %s (%d directories rewritten, stored at %s)\n",
			v.OldBookieID, v.BookieID, len(v.Directories), v.StoredCookieKey)
	case "expandstorage":
		if len(v.Directories) == 0 {
			_, err = fmt.Fprintf(w, "cookie of %s already lists every configured directory: nothing to add\n", v.BookieID)
			break
		}
		_, err = fmt.Fprintf(w, "cookie of %s now lists the added directories %s; the bookie uses them from its next start\n", v.BookieID, strings.Join(v.Directories, ", "))
	case "list", "delete":
		verb := "found"
		if v.Action == "delete" {
			verb = "deleted"
		}
		for _, f := range v.LocalCookies {
			fmt.Fprintf(w, "%s local cookie %s\n", verb, f)
		}
		if len(v.LocalCookies) == 0 {
			fmt.Fprintf(w, "no local cookies of bookie %s\n", v.BookieID)
		}
		if v.StoredCookie {
			_, err = fmt.Fprintf(w, "%s stored cookie %s\n", verb, v.StoredCookieKey)
		} else {
			_, err = fmt.Fprintf(w, "no cookie of %s in the metadata store\n", v.BookieID)
		}
	}
	return err
}

// ledgerUpdateFlags are the flags updateledgers and updateBookieInLedger
// share with BookKeeper: -updatespersec, -maxOutstandingReads, -limit,
// -verbose, -printprogress. -verbose takes a value (true|false) as in
// BookKeeper.
type ledgerUpdateFlags struct {
	perSec, maxReads, limit int
	verbose                 bool
	printProgress           int
}

const ledgerUpdateBKFlags = "-updatespersec=--updatespersec,-maxOutstandingReads=--maxOutstandingReads,-limit=--limit,-verbose=--verbose,-printprogress=--printprogress"

func (f *ledgerUpdateFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVarP(&f.perSec, "updatespersec", "s", admin.DefaultUpdatesPerSecond, "ledger metadata updates per second")
	fl.IntVarP(&f.maxReads, "maxOutstandingReads", "r", 0, "accepted for BookKeeper compatibility: ledgers are read one at a time")
	fl.IntVarP(&f.limit, "limit", "l", 0, "most ledgers to examine (0: all)")
	fl.VarP(boolValue{&f.verbose}, "verbose", "v", "true: print each ledger updated and progress every --printprogress seconds (a value, as BookKeeper's -v true)")
	fl.IntVarP(&f.printProgress, "printprogress", "p", 10, "seconds between progress lines with --verbose true")
}

func (f *ledgerUpdateFlags) options(cmd *cobra.Command) (admin.ReplaceBookieOptions, error) {
	if f.perSec <= 0 {
		return admin.ReplaceBookieOptions{}, Usagef(cmd, "--updatespersec %d: want > 0", f.perSec)
	}
	if f.limit < 0 {
		return admin.ReplaceBookieOptions{}, Usagef(cmd, "--limit %d: want > 0", f.limit)
	}
	if f.maxReads < 0 {
		return admin.ReplaceBookieOptions{}, Usagef(cmd, "--maxOutstandingReads %d: want > 0", f.maxReads)
	}
	o := admin.ReplaceBookieOptions{UpdatesPerSecond: f.perSec, Limit: f.limit}
	if f.verbose && f.printProgress > 0 {
		w := cmd.ErrOrStderr()
		every := time.Duration(f.printProgress) * time.Second
		last := time.Now()
		o.Progress = func(examined, updated int) {
			if time.Since(last) >= every {
				fmt.Fprintf(w, "ledgers examined=%d, updated=%d\n", examined, updated)
				last = time.Now()
			}
		}
	}
	return o, nil
}

// boolValue is a boolean flag that takes its value as the next argument
// (`--verbose true`), as BookKeeper's -verbose does.
type boolValue struct{ b *bool }

func (v boolValue) String() string {
	if v.b == nil {
		return "false"
	}
	return strconv.FormatBool(*v.b)
}
func (v boolValue) Type() string { return "true|false" }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, not %q", s)
	}
	*v.b = b
	return nil
}

// UpdateLedgersView is what updateledgers and updateBookieInLedger print.
type UpdateLedgersView struct {
	From     string  `json:"srcBookie"`
	To       string  `json:"destBookie"`
	Examined int     `json:"ledgersExamined"`
	Updated  []int64 `json:"ledgersUpdated"`
}

func printLedgerUpdate(cmd *cobra.Command, o *ShellOptions, verbose bool, from, to metadata.BookieID, res admin.ReplaceBookieResult, err error) error {
	view := UpdateLedgersView{From: string(from), To: string(to), Examined: res.Examined, Updated: res.Updated}
	if err != nil {
		return WithHint(fmt.Errorf("replacing %s by %s in ledger metadata (%d ledgers examined, %d updated so far): %w",
			from, to, res.Examined, len(res.Updated), err), "fix the cause and run the command again: ledgers already updated are skipped")
	}
	return o.Printer(cmd).Print(view, func(w io.Writer) error {
		if verbose {
			for _, id := range view.Updated {
				fmt.Fprintf(w, "updated ledger %d: %s -> %s\n", id, from, to)
			}
		}
		_, err := fmt.Fprintf(w, "ledgers examined=%d, updated=%d (%s -> %s)\n", view.Examined, len(view.Updated), from, to)
		return err
	})
}

func newUpdateLedgersCommand(o *ShellOptions) *cobra.Command {
	var (
		f        bookieFlags
		idChoice string
		uf       ledgerUpdateFlags
	)
	cmd := &cobra.Command{
		Use:   "updateledgers --conf FILE --bookieid hostname|ip",
		Short: "Rewrite the ledgers' ensembles after a bookie changed id between IP and host name",
		Long: "After `updatecookie --bookieid hostname|ip`, rewrite every ledger's ensembles\n" +
			"that name the bookie's previous id (its IP address, or its host name) to name\n" +
			"the id its configuration now gives, as BookKeeper's updateledgers does.\n" +
			"useHostNameAsBookieID in the configuration must say the new choice. Each\n" +
			"ledger is a compare-and-set on its metadata, retried if a writer changed it\n" +
			"meanwhile; at most --updatespersec writes a second. Entries do not move. It\n" +
			"may be run again after a failure.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{bkFlagsAnnotation: "-bookieId=--bookieid,-bookieid=--bookieid," + ledgerUpdateBKFlags},
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := uf.options(cmd)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
			cfg, err := f.load(o.env, log)
			if err != nil {
				return err
			}
			oldID, newID, err := oldAndNewIDs(cmd, cfg, idChoice)
			if err != nil {
				return err
			}
			if oldID == newID {
				return WithHint(fmt.Errorf("the configuration gives bookie id %s with either choice of useHostNameAsBookieID", newID),
					"advertisedAddress or bookieId fixes the id; re-address it with `folio shell updateBookieInLedger --srcBookie OLD --destBookie NEW`")
			}
			ctx := cmd.Context()
			d, err := openBookieMetadata(ctx, cmd, o, &cfg)
			if err != nil {
				return err
			}
			defer d.Close()
			res, err := admin.ReplaceBookieInLedgers(ctx, d, oldID, newID, opts)
			return printLedgerUpdate(cmd, o, uf.verbose, oldID, newID, res, err)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&idChoice, "bookieid", "b", "", "hostname or ip: the bookie's new kind of id (required)")
	uf.register(cmd)
	return cmd
}

func newUpdateBookieInLedgerCommand(o *ShellOptions) *cobra.Command {
	var (
		src, dst string
		uf       ledgerUpdateFlags
	)
	cmd := &cobra.Command{
		Use:   "updateBookieInLedger --srcBookie OLD --destBookie NEW",
		Short: "Re-address a bookie in every ledger's ensembles (after an IP change)",
		Long: "Rewrite every ledger's ensembles that name OLD to name NEW, as BookKeeper's\n" +
			"updateBookieInLedger does: the usual fix when a bookie (the same disks) comes\n" +
			"back under a new address, e.g. a Kubernetes pod with a new IP. NEW must be the\n" +
			"same bookie, already running under its new id with its cookie moved; entries\n" +
			"do not move. Refuses while OLD is still registered (writable or read-only),\n" +
			"as BookKeeper does. Each ledger is a compare-and-set on its metadata, retried\n" +
			"if a writer changed it meanwhile; at most --updatespersec writes a second. It\n" +
			"may be run again after a failure.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{bkFlagsAnnotation: "-sb=--srcBookie,-db=--destBookie,-srcBookie=--srcBookie,-destBookie=--destBookie," + ledgerUpdateBKFlags},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if src == "" || dst == "" {
				return Usagef(cmd, "--srcBookie and --destBookie are required")
			}
			if src == dst {
				return Usagef(cmd, "--srcBookie and --destBookie can't be the same")
			}
			from, to := metadata.BookieID(src), metadata.BookieID(dst)
			for _, b := range []metadata.BookieID{from, to} {
				if err := metadata.ValidateBookieID(b); err != nil {
					return Usagef(cmd, "%v", err)
				}
			}
			opts, err := uf.options(cmd)
			if err != nil {
				return err
			}
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
			for _, b := range bookies {
				if b.ID == src {
					return WithHint(fmt.Errorf("%w: %s is registered %s", admin.ErrSourceBookieActive, src, b.State),
						"stop the bookie under its old id first (its registration goes when its session expires)")
				}
			}
			res, err := admin.ReplaceBookieInLedgers(ctx, d, from, to, opts)
			return printLedgerUpdate(cmd, o, uf.verbose, from, to, res, err)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&src, "srcBookie", "", "the bookie id to replace (required)")
	fl.StringVar(&dst, "destBookie", "", "the bookie id that replaces it (required)")
	uf.register(cmd)
	return cmd
}
