package cli

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// parsed is what cobra made of a command line: the command, every flag's
// value and whether it was set, and the positional arguments.
type parsed struct {
	Path  string
	Flags map[string]string
	Args  []string
}

func (p parsed) String() string {
	keys := slices.Sorted(maps.Keys(p.Flags))
	var b strings.Builder
	fmt.Fprintf(&b, "%s args=%q", p.Path, p.Args)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, p.Flags[k])
	}
	return b.String()
}

// parseShell rewrites and parses args as Main does, without running the
// command.
func parseShell(t *testing.T, args ...string) (parsed, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRootCommand(Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	rw, err := rewriteBKArgs(root, args)
	if err != nil {
		return parsed{}, err
	}
	cmd, rest, err := root.Find(rw)
	if err != nil {
		return parsed{}, err
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return parsed{}, err
	}
	p := parsed{Path: cmd.CommandPath(), Flags: map[string]string{}, Args: cmd.Flags().Args()}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			p.Flags[f.Name] = f.Value.String()
		}
	})
	return p, nil
}

func mustParse(t *testing.T, args ...string) parsed {
	t.Helper()
	p, err := parseShell(t, args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return p
}

// shellCommands returns every command under `folio shell` (groups included).
func shellCommands(t *testing.T) []*cobra.Command {
	t.Helper()
	root := NewRootCommand(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }})
	shell, _, err := root.Find([]string{"shell"})
	if err != nil {
		t.Fatal(err)
	}
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Name() == "help" {
				continue
			}
			all = append(all, s)
			walk(s)
		}
	}
	walk(shell)
	return all
}

// sampleValue is a valid value for a flag of f's type.
func sampleValue(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "int", "int64", "int32", "uint", "uint64":
		return "7"
	case "duration":
		return "5s"
	case "bool", "true|false": // "true|false": a boolean that takes its value (BookKeeper's -v true)
		return "true"
	case "format":
		return "json"
	}
	return "x7"
}

// TestBKFlagsEveryCommand is the table test of every command's declared
// BookKeeper spellings, generated from the annotations so that no spelling
// goes untested: for each command and spelling, the BookKeeper form (-x,
// and --x where that is not a GNU flag of the command), with -o json in
// the mix, parses to the same command, flags and arguments as the GNU form.
func TestBKFlagsEveryCommand(t *testing.T) {
	declared := 0
	for _, c := range shellCommands(t) {
		m := bkFlags(c)
		path := strings.Fields(c.CommandPath())[1:] // without "folio"
		t.Run(strings.Join(path[1:], "_"), func(t *testing.T) {
			if len(m) == 0 {
				// No BookKeeper spellings: -o json and --help still parse.
				mustParse(t, append(slices.Clone(path), "-o", "json")...)
				return
			}
			for _, sp := range bkSpellings(m) {
				mp := m[sp]
				declared++
				var bk, gnu []string
				if mp.gnu == "" {
					bk, gnu = []string{sp, "7"}, []string{"7"}
				} else {
					f := c.Flags().Lookup(mp.gnu)
					if f == nil {
						t.Fatalf("%s maps %s to --%s, which it does not have", c.CommandPath(), sp, mp.gnu)
					}
					if f.NoOptDefVal != "" {
						bk, gnu = []string{sp}, []string{"--" + mp.gnu}
					} else {
						v := sampleValue(f)
						bk, gnu = []string{sp, v}, []string{"--" + mp.gnu, v}
					}
				}
				forms := [][]string{bk}
				if lookupFlag(c, "-"+sp) == nil {
					forms = append(forms, append([]string{"-" + sp}, bk[1:]...)) // --rw, as Commons CLI takes it
				}
				want := mustParse(t, append(append(slices.Clone(path), gnu...), "-o", "json")...)
				for _, form := range forms {
					got := mustParse(t, append(append(slices.Clone(path), form...), "-o", "json")...)
					if got.String() != want.String() {
						t.Errorf("%q parses to\n  %v\nwant (as %q)\n  %v", form, got, gnu, want)
					}
					// Mixed order: -o json first.
					got = mustParse(t, append(append(slices.Clone(path), "-o", "json"), form...)...)
					if got.String() != want.String() {
						t.Errorf("-o json %q parses to\n  %v\nwant\n  %v", form, got, want)
					}
				}
			}
		})
	}
	if declared < 40 {
		t.Fatalf("only %d BookKeeper spellings declared over all commands", declared)
	}
}

// TestBKFlagsRunbookLines are command lines from BookKeeper runbooks and the
// Pulsar chart, each against its GNU equivalent.
func TestBKFlagsRunbookLines(t *testing.T) {
	for _, tc := range []struct{ bk, gnu []string }{
		{[]string{"shell", "listbookies", "-rw"}, []string{"shell", "listbookies", "--readwrite"}},
		{[]string{"shell", "listbookies", "-ro", "-o", "json"}, []string{"shell", "listbookies", "--readonly", "-o", "json"}},
		{[]string{"shell", "-o", "json", "listbookies", "-a", "-h"}, []string{"shell", "listbookies", "--all", "--hostnames", "-o", "json"}},
		{[]string{"shell", "listbookies", "-readwrite", "-hostnames"}, []string{"shell", "listbookies", "--readwrite", "--hostnames"}},
		{[]string{"shell", "ledgermetadata", "-ledgerid", "12"}, []string{"shell", "ledgermetadata", "--ledgerid", "12"}},
		{[]string{"shell", "ledgermetadata", "-l", "12", "-o", "json"}, []string{"shell", "ledgermetadata", "--ledgerid=12", "-o", "json"}},
		{[]string{"shell", "bookieformat", "--conf", "bk.conf", "-nonInteractive", "-force", "-deleteCookie"},
			[]string{"shell", "bookieformat", "--conf", "bk.conf", "--non-interactive", "--force", "--delete-cookie"}},
		{[]string{"shell", "-conf", "bk.conf", "bookieformat", "-n", "-f", "-d"},
			[]string{"shell", "bookieformat", "--conf", "bk.conf", "--non-interactive", "--force", "--delete-cookie"}},
		{[]string{"shell", "bookieformat", "-conf", "bk.conf", "--nonInteractive", "--force", "--deleteCookie"},
			[]string{"shell", "bookieformat", "--conf", "bk.conf", "--non-interactive", "--force", "--delete-cookie"}},
		{[]string{"shell", "readledger", "-ledgerid", "3", "-firstentryid", "2", "-lastentryid", "9", "-msg"},
			[]string{"shell", "readledger", "3", "--from", "2", "--to", "9", "--msg"}},
		{[]string{"shell", "readledger", "-fe", "2", "-l", "3", "-le", "9"}, []string{"shell", "readledger", "3", "--from", "2", "--to", "9"}},
		// A dash-leading value stays the flag's value.
		{[]string{"shell", "readledger", "-l", "3", "-le", "-1"}, []string{"shell", "readledger", "3", "--to=-1"}},
		{[]string{"shell", "deleteledger", "-ledgerid", "5", "-force"}, []string{"shell", "deleteledger", "5", "--force"}},
		{[]string{"shell", "simpletest", "-ensemble", "3", "-writeQuorum", "2", "-ackQuorum", "2", "-numEntries", "100"},
			[]string{"shell", "simpletest", "-e", "3", "-w", "2", "-a", "2", "-n", "100"}},
		{[]string{"shell", "listfilesondisc", "-conf", "bk.conf", "-txn", "-log", "-idx"},
			[]string{"shell", "listfilesondisc", "--conf", "bk.conf", "--journal", "--entrylog", "--index"}},
		{[]string{"shell", "lostbookierecoverydelay", "-set", "60"}, []string{"shell", "lostbookierecoverydelay", "--set", "1m"}},
		{[]string{"shell", "lostbookierecoverydelay", "-get"}, []string{"shell", "lostbookierecoverydelay", "--get"}},
		{[]string{"shell", "autorecovery", "-enable"}, []string{"shell", "autorecovery", "--enable"}},
		{[]string{"shell", "listunderreplicated", "-mr", "h:1", "-o", "json"}, []string{"shell", "listunderreplicated", "--missingreplica", "h:1", "-o", "json"}},
		{[]string{"shell", "decommissionbookie", "-bookieid", "h:3181"}, []string{"shell", "decommissionbookie", "--bookie-id", "h:3181"}},
		{[]string{"shell", "readjournal", "-dir", "/j"}, []string{"shell", "readjournal", "/j"}},
		{[]string{"shell", "readlog", "-ledgerid", "4", "-entryid", "2", "/l.log"}, []string{"shell", "readlog", "/l.log", "--ledger", "4", "--entry", "2"}},
		{[]string{"shell", "cookie_get", "h:3181", "-o", "json"}, []string{"shell", "cookie", "get", "h:3181", "-o", "json"}},
		{[]string{"shell", "cookie_delete", "h:3181"}, []string{"shell", "cookie", "delete", "h:3181"}},
		{[]string{"shell", "cookie_update", "-cf", "c.txt", "h:3181"}, []string{"shell", "cookie", "update", "h:3181", "--cookie-file", "c.txt"}},
		{[]string{"shell", "rebuild-db-ledger-locations-index", "--conf", "bk.conf"}, []string{"shell", "rebuild-index", "--conf", "bk.conf"}},
		// GNU spellings and shorthand clusters are left alone.
		{[]string{"shell", "bookiesanity", "-n5", "-ojson"}, []string{"shell", "bookiesanity", "--entries", "5", "-o", "json"}},
		{[]string{"shell", "metaformat", "-nonInteractive", "-f"}, []string{"shell", "metaformat", "--non-interactive", "--force"}},
	} {
		t.Run(strings.Join(tc.bk, " "), func(t *testing.T) {
			got, want := mustParse(t, tc.bk...), mustParse(t, tc.gnu...)
			if got.String() != want.String() {
				t.Fatalf("%q parses to\n  %v\nwant (as %q)\n  %v", tc.bk, got, tc.gnu, want)
			}
		})
	}
}

// TestBKFlagsErrors: what is neither a declared spelling nor GNU fails as a
// usage error that names it and the spellings the command takes.
func TestBKFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"shell", "listbookies", "-rwx"}, []string{`unknown flag -rwx for "folio shell listbookies"`, "-ro -rw"}},
		{[]string{"shell", "whoisauditor", "-force"}, []string{`unknown flag -force for "folio shell whoisauditor"`, "no BookKeeper single-dash spellings"}},
		{[]string{"shell", "readledger", "-l"}, []string{"flag -l needs a value"}},
		{[]string{"shell", "readledger", "-le"}, []string{"flag -le needs a value"}},
		{[]string{"shell", "-conf", "bk.conf", "listbookies"}, []string{"takes no -conf"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseShell(t, tc.args...)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v, want a usage error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Through Main: exit code 2 and the message.
	code, _, errOut := run(t, nil, "shell", "listbookies", "-rwx")
	if code != ExitUsage || !strings.Contains(errOut, "unknown flag -rwx") || !strings.Contains(errOut, "Run 'folio shell listbookies --help'") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// Other command lines are not touched.
	for _, args := range [][]string{{"bookie", "--conf", "x"}, {"version"}, {"shell"}} {
		got, err := rewriteBKArgs(NewRootCommand(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}), args)
		if err != nil || !slices.Equal(got, args) {
			t.Fatalf("%q rewritten to %q, %v", args, got, err)
		}
	}
}

// TestBKFlagsHelp: a command's help lists its BookKeeper spellings.
func TestBKFlagsHelp(t *testing.T) {
	code, out, _ := run(t, nil, "shell", "bookieformat", "--help")
	if code != ExitOK || !strings.Contains(out, "-deleteCookie (--delete-cookie)") || !strings.Contains(out, "-nonInteractive (--non-interactive)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, nil, "shell", "readledger", "-help")
	if code != ExitOK || !strings.Contains(out, "-ledgerid (argument 1)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
