package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/foliodb/folio/internal/metadata"
)

// Metadata service URI defaults (DESIGN.md §1).
const (
	MetadataURIEnv     = "FOLIO_METADATA_SERVICE_URI"
	DefaultMetadataURI = "etcd://127.0.0.1:2379/ledgers"
)

// ShellOptions are the flags every `folio shell` command shares.
type ShellOptions struct {
	// MetadataServiceURI selects the metadata store; see MetadataURI.
	MetadataServiceURI string
	Output             OutputFormat
	// BookieTLS secures the bookie connections (shelltls.go).
	BookieTLS bookieTLSFlags
	env       Env

	// metadataSec are the metadata store's TLS and authentication flags
	// (metadatasec.go); security caches what they resolved to.
	metadataSec metadataSecurityFlags
	security    *metadata.Security
}

// MetadataURI is the URI the command should use: the flag when given, else
// the environment variable, else the default.
func (o *ShellOptions) MetadataURI() string {
	if o.MetadataServiceURI != "" {
		return o.MetadataServiceURI
	}
	if v := o.env.Getenv(MetadataURIEnv); v != "" {
		return v
	}
	return DefaultMetadataURI
}

// Printer prints a result to stdout in the chosen format.
func (o *ShellOptions) Printer(cmd *cobra.Command) Printer {
	return Printer{W: cmd.OutOrStdout(), Format: o.Output}
}

// register adds the flags that reach a cluster (the metadata store URI,
// its TLS and authentication, TLS to bookies) and -o to fs: `folio shell`
// and `folio bench` share them.
func (o *ShellOptions) register(pf *pflag.FlagSet) {
	pf.StringVar(&o.MetadataServiceURI, "metadata-service-uri", "",
		"metadata store URI, e.g. etcd://host1:2379;host2:2379/ledgers (default $"+MetadataURIEnv+", then "+DefaultMetadataURI+")")
	pf.VarP(&o.Output, "output", "o", "output format: text or json")
	o.BookieTLS.register(pf)
	o.metadataSec.register(pf)
}

// shellSubcommands are the constructors of the `folio shell` commands. Each
// command file adds its constructor here from an init function, so that the
// group needs no edit when a command arrives.
var shellSubcommands []func(*ShellOptions) *cobra.Command

func newShellCommand(env Env) *cobra.Command {
	opts := &ShellOptions{Output: OutputText, env: env}
	cmd := &cobra.Command{
		Use:   "shell",
		Short: "Administer a cluster: the BookKeeper shell commands",
		Long: "Administer a Folio or BookKeeper cluster. Every command reads the metadata\n" +
			"store named by --metadata-service-uri or $" + MetadataURIEnv + "\n" +
			"(default " + DefaultMetadataURI + ").\n" +
			"Exit codes: 0 success, 1 failure, 2 usage error.",
	}
	opts.register(cmd.PersistentFlags())
	for _, newCmd := range shellSubcommands {
		cmd.AddCommand(newCmd(opts))
	}
	return groupCommand(cmd)
}
