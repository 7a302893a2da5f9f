package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at link time (`make release`, deploy/Dockerfile):
//
//	-ldflags "-X github.com/foliodb/folio/internal/cli.version=v0.1.0 -X github.com/foliodb/folio/internal/cli.commit=<sha>"
//
// Without them the build information stands in: the module version and,
// when the build recorded it (-buildvcs), the VCS revision.
var version, commit = "", ""

// VersionInfo describes the running binary.
type VersionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Modified: the build's working tree had uncommitted changes.
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	// Protocol is the BookKeeper release whose protocol and formats Folio speaks.
	Protocol string `json:"bookkeeperCompatibility"`
}

// BuildVersion returns the binary's version information.
func BuildVersion() VersionInfo {
	v := VersionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Protocol: "4.17"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && commit == "":
				v.Commit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true" && commit == "":
				v.Modified = true
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

func newVersionCommand() *cobra.Command {
	out := OutputText
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this folio binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := BuildVersion()
			return Printer{W: cmd.OutOrStdout(), Format: out}.Print(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "folio %s (BookKeeper %s protocol, %s", v.Version, v.Protocol, v.GoVersion)
				if err == nil && v.Commit != "" {
					_, err = fmt.Fprintf(w, ", commit %s", v.Commit)
				}
				if err == nil && v.Modified {
					_, err = fmt.Fprint(w, ", modified")
				}
				if err == nil {
					_, err = fmt.Fprintln(w, ")")
				}
				return err
			})
		},
	}
	cmd.Flags().VarP(&out, "output", "o", "output format: text or json")
	return cmd
}
