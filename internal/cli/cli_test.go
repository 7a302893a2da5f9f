package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

type ledgerRow struct {
	LedgerID int64 `json:"ledgerId"`
}

// probeCommand is a shell command used only by these tests: it reports the
// metadata URI it would use and prints ledger ids, or fails on request.
func probeCommand(o *ShellOptions) *cobra.Command {
	var fail bool
	cmd := &cobra.Command{
		Use:  "probe",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fail {
				return WithHint(errors.New("cannot reach the metadata store at "+o.MetadataURI()), "check that etcd is running")
			}
			rows := []ledgerRow{{1}, {5<<56 | 1}, {math.MaxInt64 - 1}}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				t := Table{Headers: []string{"LEDGER ID", "URI"}}
				for _, r := range rows {
					t.Append(r.LedgerID, o.MetadataURI())
				}
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&fail, "fail", false, "fail")
	return cmd
}

func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	saved := shellSubcommands
	shellSubcommands = append(shellSubcommands[:len(shellSubcommands):len(shellSubcommands)], probeCommand)
	defer func() { shellSubcommands = saved }()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	})
	return code, out.String(), errb.String()
}

func TestShellMetadataURIPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default", nil, nil, DefaultMetadataURI},
		{"env", map[string]string{MetadataURIEnv: "etcd://10.0.0.1:2379/c1"}, nil, "etcd://10.0.0.1:2379/c1"},
		{"flag beats env", map[string]string{MetadataURIEnv: "etcd://10.0.0.1:2379/c1"},
			[]string{"--metadata-service-uri", "etcd://h1:2379;h2:2379/ledgers"}, "etcd://h1:2379;h2:2379/ledgers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.env, append([]string{"shell", "probe"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output %q does not mention %q", out, tc.want)
			}
		})
	}
}

func TestShellJSONIdsAreExactIntegers(t *testing.T) {
	code, out, errOut := run(t, nil, "shell", "probe", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{`"ledgerId": 1`, `"ledgerId": 360287970189639681`, `"ledgerId": 9223372036854775806`} {
		if !strings.Contains(out, want) {
			t.Errorf("JSON output lacks %s:\n%s", want, out)
		}
	}
	var rows []ledgerRow
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil || len(rows) != 3 || rows[1].LedgerID != 5<<56|1 {
		t.Fatalf("decode %v: %+v", err, rows)
	}
}

func TestShellTextTable(t *testing.T) {
	code, out, _ := run(t, nil, "shell", "probe")
	if code != ExitOK {
		t.Fatal(code)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "LEDGER ID") || !strings.HasPrefix(lines[2], "360287970189639681") {
		t.Fatalf("unexpected table:\n%s", out)
	}
}

func TestExitCodesAndErrorStyle(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		stderrHave []string
	}{
		{[]string{"shell", "probe", "--fail"}, ExitFail, []string{"folio: cannot reach the metadata store at " + DefaultMetadataURI, "hint: check that etcd is running"}},
		{[]string{"shell", "probe", "--bogus"}, ExitUsage, []string{"folio: unknown flag: --bogus", "folio shell probe --help"}},
		{[]string{"shell", "probe", "-o", "yaml"}, ExitUsage, []string{`unknown output format "yaml"`}},
		{[]string{"shell", "probe", "extra"}, ExitUsage, []string{"folio: unknown command \"extra\""}},
		{[]string{"shell"}, ExitUsage, []string{"needs a subcommand"}},
		{[]string{"shell", "nosuch"}, ExitUsage, []string{`unknown command "nosuch"`}},
		{[]string{"nosuch"}, ExitUsage, []string{`unknown command "nosuch"`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := run(t, nil, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if out != "" {
				t.Errorf("stdout should be empty on error, got %q", out)
			}
			for _, s := range tc.stderrHave {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr %q lacks %q", errOut, s)
				}
			}
			if strings.Contains(errOut, "goroutine ") || strings.Contains(errOut, ".go:") {
				t.Errorf("stderr looks like a stack trace: %q", errOut)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, nil, "version")
	if code != ExitOK || !strings.HasPrefix(out, "folio ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	code, out, _ = run(t, nil, "version", "-o", "json")
	var v VersionInfo
	if err := json.Unmarshal([]byte(out), &v); code != ExitOK || err != nil || v.Version == "" || v.Protocol != "4.17" {
		t.Fatalf("exit %d, %v, %+v", code, err, v)
	}
}

// TestVersionLinked: the version and commit `make release` links in are
// what `folio version` reports, ahead of the build information.
func TestVersionLinked(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	v := BuildVersion()
	if v.Version != "v1.2.3" || v.Commit != commit || v.Modified || v.Protocol != "4.17" {
		t.Fatalf("BuildVersion with linked values: %+v", v)
	}
	code, out, _ := run(t, nil, "version")
	if want := "folio v1.2.3 (BookKeeper 4.17 protocol, " + v.GoVersion + ", commit " + commit + ")\n"; code != ExitOK || out != want {
		t.Fatalf("version: exit %d, %q, want %q", code, out, want)
	}
}

func ExampleTable() {
	t := Table{Headers: []string{"BOOKIE", "STATE"}}
	t.Append("127.0.0.1:3181", "writable")
	t.Append("127.0.0.1:3182", "read-only")
	var b bytes.Buffer
	_, _ = t.WriteTo(&b)
	fmt.Print(b.String())
	// Output:
	// BOOKIE          STATE
	// 127.0.0.1:3181  writable
	// 127.0.0.1:3182  read-only
}
