package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of the folio binary.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// Env is the process environment as the command tree sees it; tests pass
// their own.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv looks up an environment variable ("" when unset).
	Getenv func(string) string
	// Environ lists the environment as KEY=value (os.Environ); nil: only
	// the variables Getenv is asked for (PULSAR_PREFIX_<key> then applies
	// only to known keys).
	Environ func() []string
}

// Main runs the folio command line args (without the program name) and
// returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	root := NewRootCommand(env)
	args, err := rewriteBKArgs(root, args)
	if err != nil {
		reportError(env.Stderr, err)
		var ue *UsageError
		if errors.As(err, &ue) {
			return ExitUsage
		}
		return ExitFail
	}
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	reportError(env.Stderr, err)
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFail
}

// reportError prints err as `folio: <what failed>` and, when the error carries
// one, a second line `hint: <what to do>`.
func reportError(w io.Writer, err error) {
	fmt.Fprintf(w, "folio: %s\n", strings.TrimSpace(err.Error()))
	var h *HintError
	if errors.As(err, &h) && h.Hint != "" {
		fmt.Fprintf(w, "hint: %s\n", h.Hint)
	}
	var ue *UsageError
	if errors.As(err, &ue) && ue.CommandPath != "" {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", ue.CommandPath)
	}
}

// UsageError is a mistake in the command line: exit code 2.
type UsageError struct {
	Err         error
	CommandPath string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a usage error for cmd.
func Usagef(cmd *cobra.Command, format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...), CommandPath: cmd.CommandPath()}
}

// HintError is a failure with advice on what to do about it.
type HintError struct {
	Err  error
	Hint string
}

func (e *HintError) Error() string { return e.Err.Error() }
func (e *HintError) Unwrap() error { return e.Err }

// WithHint attaches a hint to err (nil stays nil).
func WithHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &HintError{Err: err, Hint: hint}
}

// NewRootCommand builds the whole command tree.
func NewRootCommand(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "folio",
		Short: "Folio: a replicated ledger store compatible with Apache BookKeeper",
		Long: "Folio stores ledgers, replicated append-only logs, on bookies, speaking the\n" +
			"Apache BookKeeper 4.17 protocol and metadata format.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		newVersionCommand(),
		newShellCommand(env),
		newBookieCommand(env),
		newStandaloneCommand(env),
		newSimCommand(env),
		newAutoRecoveryDaemonCommand(env),
		newBenchCommand(env),
	)
	groupCommand(root)
	markUsageErrors(root)
	describeBKFlags(root)
	return root
}

// markUsageErrors makes flag and argument errors of every command usage
// errors (exit code 2).
func markUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: err, CommandPath: c.CommandPath()}
	})
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &UsageError{Err: err, CommandPath: c.CommandPath()}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		markUsageErrors(c)
	}
}

// groupCommand makes cmd a command group: run alone or with an unknown
// subcommand it fails with a usage error instead of printing help and
// succeeding, so that a script's typo never passes silently.
func groupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, a []string) error {
		if len(a) > 0 {
			return fmt.Errorf("unknown command %q for %q", a[0], c.CommandPath())
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		return Usagef(c, "%s needs a subcommand (see --help)", c.CommandPath())
	}
	return cmd
}
