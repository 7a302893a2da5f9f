package cli

import (
	"fmt"
	"io"
	"os"
)

// isTerminal reports whether w is a terminal (a character device), the
// test for showing progress: piped or redirected output stays quiet.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressFunc returns a progress reporter for a long operation: when the
// command's stdout is a terminal it rewrites one status line on stderr
// (stderr, so a terminal user can still redirect the result); otherwise it
// returns nil and nothing is printed. done clears the line.
func progressFunc(o *ShellOptions) (report func(phase string, done, total int), finish func()) {
	if !isTerminal(o.env.Stdout) {
		return nil, func() {}
	}
	w := o.env.Stderr
	shown := false
	return func(phase string, done, total int) {
			fmt.Fprintf(w, "\r%s: %d/%d entries  ", phase, done, total)
			shown = true
		}, func() {
			if shown {
				fmt.Fprint(w, "\r\033[K")
			}
		}
}
