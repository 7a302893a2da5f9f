package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/admin"
	iadmin "github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/bookie/server"
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

// BookieView is one row of listbookies: admin.Bookie's id and state,
// and with --hostnames the bookie's address resolved both ways.
type BookieView struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// IP, Port and Hostname are set with --hostnames, as BookKeeper's
	// "BookieID:…, IP:…, Port:…, Hostname:…" (UNKNOWN when not resolved).
	IP       string `json:"ip,omitempty"`
	Port     int    `json:"port,omitempty"`
	Hostname string `json:"hostname,omitempty"`
}

// stateDown is the --all state of a bookie with a cookie that is not
// registered (not running).
const stateDown = "down"

func newListBookiesCommand(o *ShellOptions) *cobra.Command {
	var rw, ro, all, hostnames bool
	cmd := &cobra.Command{
		Use:   "listbookies [--readwrite|--readonly|--all] [--hostnames]",
		Short: "List the registered bookies",
		Long: "List the bookies registered in the metadata store: writable ones, then\n" +
			"read-only ones. --readwrite or --readonly lists one kind only (BookKeeper's\n" +
			"-rw / -ro); by default both. --all (-a) lists every bookie that has a cookie,\n" +
			"as BookKeeper's -a does, with state \"down\" for those not registered.\n" +
			"--hostnames (BookKeeper's -h) also resolves each bookie's address: its IP and\n" +
			"host name (UNKNOWN when the name does not resolve).\n" +
			"With -o json: [{\"id\": \"127.0.0.1:3181\", \"state\": \"writable\"|\"readonly\"|\"down\",\n" +
			"\"ip\"?, \"port\"?, \"hostname\"?}, ...].",
		Annotations: map[string]string{BKFlagsAnnotation: "-rw=--readwrite,-readwrite=--readwrite,-ro=--readonly,-readonly=--readonly," +
			"-a=--all,-all=--all,-h=--hostnames,-hostnames=--hostnames"},
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{rw, ro, all} {
				if b {
					n++
				}
			}
			if n > 1 {
				return Usagef(cmd, "give at most one of --readwrite, --readonly and --all")
			}
			ctx := cmd.Context()
			a, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer a.Close()
			bookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{WritableOnly: rw, ReadOnlyOnly: ro, All: all})
			if err != nil {
				return err
			}
			rows := []BookieView{}
			for _, b := range bookies {
				rows = append(rows, BookieView{ID: b.ID, State: string(b.State)})
			}
			if hostnames {
				for i := range rows {
					resolveBookieAddress(ctx, &rows[i])
				}
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				if hostnames {
					for _, r := range rows {
						if _, err := fmt.Fprintf(w, "BookieID:%s, IP:%s, Port:%d, Hostname:%s, State:%s\n", r.ID, r.IP, r.Port, r.Hostname, r.State); err != nil {
							return err
						}
					}
					return nil
				}
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
	cmd.Flags().BoolVar(&all, "all", false, "list every bookie with a cookie, running or not")
	cmd.Flags().BoolVar(&hostnames, "hostnames", false, "also print each bookie's IP and host name")
	return cmd
}

// unknownAddress is BookKeeper's word for an address part that does not
// resolve.
const unknownAddress = "UNKNOWN"

// resolveBookieAddress fills v's IP, port and host name from its id
// (host:port), as BookKeeper's listbookies -h: an IP is looked up in reverse,
// a name forward. Lookups are bounded so that a dead DNS server cannot
// hang the command.
func resolveBookieAddress(ctx context.Context, v *BookieView) {
	v.IP, v.Hostname = unknownAddress, unknownAddress
	host, port, err := net.SplitHostPort(v.ID)
	if err != nil {
		return // a custom bookie id that is no address
	}
	v.Port, _ = strconv.Atoi(port)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ip := net.ParseIP(host); ip != nil {
		v.IP = ip.String()
		if names, err := net.DefaultResolver.LookupAddr(ctx, v.IP); err == nil && len(names) > 0 {
			v.Hostname = strings.TrimSuffix(names[0], ".")
		} else {
			v.Hostname = v.IP // Java's getCanonicalHostName falls back to the IP
		}
		return
	}
	v.Hostname = host
	if ips, err := net.DefaultResolver.LookupHost(ctx, host); err == nil && len(ips) > 0 {
		v.IP = ips[0]
	}
}

// BookieInfoView is one row of bookieinfo: a bookie's disk space
// (admin.DiskInfo), or why it did not answer.
type BookieInfoView struct {
	ID                string `json:"id"`
	FreeDiskSpace     int64  `json:"freeDiskSpace"`
	TotalDiskCapacity int64  `json:"totalDiskCapacity"`
	Error             string `json:"error,omitempty"`
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
			a, err := openAdmin(ctx, o)
			if err != nil {
				return err
			}
			defer a.Close()
			bookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{DiskInfo: true})
			if err != nil {
				return err
			}
			rows := make([]BookieInfoView, len(bookies))
			for i, b := range bookies {
				rows[i] = BookieInfoView{ID: b.ID, FreeDiskSpace: b.Disk.FreeBytes, TotalDiskCapacity: b.Disk.TotalBytes}
				if b.Disk.Err != nil {
					rows[i].Error = b.Disk.Err.Error()
				}
			}
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
	var bookie, conf string
	var entries int
	cmd := &cobra.Command{
		Use:   "bookiesanity",
		Short: "Write and read back entries on one bookie",
		Long: "BookKeeper's bookiesanity: create a ledger whose ensemble is one bookie alone,\n" +
			"add entries to it directly, read them back, compare, delete the ledger.\n" +
			"--bookie names the bookie (host:port); without it every writable bookie is\n" +
			"checked in turn. --conf FILE checks the bookie that bk_server.conf (with its\n" +
			"$FOLIO_* variables) describes, as BookKeeper's bookiesanity checks the local\n" +
			"bookie: its id, and its metadataServiceUri and metadata store security unless\n" +
			"the flags or their variables give them (a container health check).\n" +
			"Exit code 1 if any check fails.\n" +
			"With -o json: [{\"bookie\", \"ledgerId\", \"entriesWritten\", \"entriesRead\", \"ok\", \"error\"?}, ...].",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if entries < 1 {
				return Usagef(cmd, "--entries must be at least 1, got %d", entries)
			}
			if conf != "" {
				if bookie != "" {
					return Usagef(cmd, "--conf and --bookie both name the bookie to check: give one")
				}
				id, err := o.useBookieConfig(conf)
				if err != nil {
					return err
				}
				bookie = id
			}
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			targets := []string{bookie}
			if bookie == "" {
				bookies, err := iadmin.ListBookies(ctx, d, true, false)
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
			rows := []iadmin.SanityResult{}
			failed := 0
			for _, b := range targets {
				r, err := iadmin.BookieSanity(ctx, d, bk, b, entries)
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
	cmd.Flags().StringVar(&conf, "conf", "", "check the bookie this bk_server.conf describes (its id; its metadata store unless given)")
	cmd.Flags().IntVarP(&entries, "entries", "n", 10, "entries to write and read")
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-e=--entries,-entries=--entries"}
	return cmd
}

// useBookieConfig reads the bookie configuration file conf (with the
// $FOLIO_* variables, as `folio bookie` reads it) and returns the bookie id
// it describes. The file's metadataServiceUri and metadata store security
// settings become the shell's, unless the flags or their variables give
// them.
func (o *ShellOptions) useBookieConfig(conf string) (string, error) {
	cfg, err := server.LoadConfig(conf, server.Overrides{Getenv: o.env.Getenv}, warnLogger(o))
	if err != nil {
		return "", WithHint(err, "--conf names the bookie's configuration file (bk_server.conf)")
	}
	id, err := cfg.BookieID(cfg.BookiePort)
	if err != nil {
		return "", WithHint(fmt.Errorf("%s: the bookie id: %w", conf, err), "check bookiePort, advertisedAddress and listeningInterface in "+conf)
	}
	if o.MetadataServiceURI == "" && (o.env.Getenv == nil || o.env.Getenv(MetadataURIEnv) == "") {
		o.MetadataServiceURI = cfg.MetadataServiceURI
		if !o.metadataSec.given() && o.security == nil {
			sec, err := cfg.LoadMetadataSecurity()
			if err != nil {
				return "", err
			}
			o.security = &sec
		}
	}
	return string(id), nil
}
