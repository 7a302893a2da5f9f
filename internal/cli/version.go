package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X github.com/foliodb/folio/internal/cli.version=v0.1.0".
var version = ""

// VersionInfo describes the running binary.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
	// Protocol is the BookKeeper release whose protocol and formats Folio speaks.
	Protocol string `json:"bookkeeperCompatibility"`
}

// BuildVersion returns the binary's version information.
func BuildVersion() VersionInfo {
	v := VersionInfo{Version: version, GoVersion: runtime.Version(), Protocol: "4.17"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Commit = s.Value
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
