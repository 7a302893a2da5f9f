package cli

import (
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// logFlags are --log-level and --log-format of the commands that run
// services (bookie, autorecovery, standalone).
type logFlags struct {
	level, format string
}

func (f *logFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.level, "log-level", "", "log level: debug, info, warn or error (default info, or the configuration's logLevel)")
	cmd.Flags().StringVar(&f.format, "log-format", "", "log format on standard error: text or json (default text, or the configuration's logFormat)")
}

// check refuses flag values that are not a level or a format.
func (f *logFlags) check(cmd *cobra.Command) error {
	if _, ok := parseLogLevel(f.level); !ok && f.level != "" {
		return Usagef(cmd, "--log-level %q: want debug, info, warn or error", f.level)
	}
	if l := strings.ToLower(f.format); l != "" && l != "text" && l != "json" {
		return Usagef(cmd, "--log-format %q: want text or json", f.format)
	}
	return nil
}

// logger returns the logger writing to w: the flags, else the given
// defaults (a configuration's logLevel and logFormat; "" for info, text).
func (f *logFlags) logger(w io.Writer, level, format string) *slog.Logger {
	if f.level != "" {
		level = f.level
	}
	if f.format != "" {
		format = f.format
	}
	lv, _ := parseLogLevel(level)
	opts := &slog.HandlerOptions{Level: lv}
	if strings.EqualFold(format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// parseLogLevel maps a level word to slog's; "" is info.
func parseLogLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, true
	case "", "info":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return slog.LevelInfo, false
}
