// Package topologyscript resolves bookies' network locations by running an
// operator's script, as BookKeeper's ScriptBasedMapping
// (networkTopologyScriptFileName): the script gets up to MaxArgs bookie
// hosts as arguments and prints one location per argument, whitespace
// separated, in order. Answers are cached per bookie; failures are not,
// so a later placement asks again.
package topologyscript

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// DefaultMaxArgs is BookKeeper's networkTopologyScriptNumberArgs default.
const DefaultMaxArgs = 100

// Resolver runs the script. Safe for concurrent use.
type Resolver struct {
	// Script is the executable's path.
	Script string
	// MaxArgs bounds the arguments of one run (≤ 0: DefaultMaxArgs).
	MaxArgs int
	// Timeout bounds one run (≤ 0: none, as BookKeeper).
	Timeout time.Duration
	// Default is the location given to bookies the script fails to
	// resolve (BookKeeper's policy default rack).
	Default string
	// Log receives the warnings of failed runs; nil: slog.Default().
	Log *slog.Logger

	mu    sync.Mutex
	cache map[metadata.BookieID]string
}

// Host is the script argument for bookie b: the host of a "host:port" id,
// else the id itself.
func Host(b metadata.BookieID) string {
	if h, _, err := net.SplitHostPort(string(b)); err == nil {
		return h
	}
	return string(b)
}

// Locations returns the location of each of bookies: cached, resolved by
// the script, or (when the run fails or its output is bad) Default, with a
// logged warning naming the error. It never fails: placement goes on with
// the default location, as BookKeeper's DNSResolverDecorator does.
func (r *Resolver) Locations(ctx context.Context, bookies []metadata.BookieID) map[metadata.BookieID]string {
	out := make(map[metadata.BookieID]string, len(bookies))
	var todo []metadata.BookieID
	r.mu.Lock()
	for _, b := range bookies {
		if loc, ok := r.cache[b]; ok {
			out[b] = loc
		} else if _, dup := out[b]; !dup && !containsID(todo, b) {
			todo = append(todo, b)
		}
	}
	r.mu.Unlock()
	maxArgs := r.MaxArgs
	if maxArgs <= 0 {
		maxArgs = DefaultMaxArgs
	}
	for len(todo) > 0 {
		n := min(maxArgs, len(todo))
		batch := todo[:n]
		todo = todo[n:]
		locs, err := r.Run(ctx, batch)
		if err != nil {
			r.logger().Warn("network topology script failed; using the default location", "script", r.Script, "default", r.Default, "bookies", batch, "err", err)
			for _, b := range batch {
				out[b] = r.Default
			}
			continue
		}
		r.mu.Lock()
		if r.cache == nil {
			r.cache = map[metadata.BookieID]string{}
		}
		for i, b := range batch {
			out[b] = locs[i]
			r.cache[b] = locs[i]
		}
		r.mu.Unlock()
	}
	return out
}

// Run runs the script once for bookies and returns their locations in
// order, or an error naming the script and what was wrong: the run failed
// or timed out, the output has not one location per bookie, or a location
// does not start with "/".
func (r *Resolver) Run(ctx context.Context, bookies []metadata.BookieID) ([]string, error) {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	args := make([]string, len(bookies))
	for i, b := range bookies {
		args[i] = Host(b)
	}
	cmd := exec.CommandContext(ctx, r.Script, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The script's children may keep the pipes open: stop waiting for them
	// once the script is killed.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("topologyscript: %s: %w (after %v)", r.Script, ctx.Err(), r.Timeout)
		}
		return nil, fmt.Errorf("topologyscript: %s: %w (stderr %q)", r.Script, err, strings.TrimSpace(stderr.String()))
	}
	locs := strings.Fields(stdout.String())
	if len(locs) != len(bookies) {
		return nil, fmt.Errorf("topologyscript: %s printed %d locations for %d bookies (%q)", r.Script, len(locs), len(bookies), stdout.String())
	}
	for i, l := range locs {
		if !strings.HasPrefix(l, "/") {
			return nil, fmt.Errorf("topologyscript: %s: location %q of bookie %s does not start with \"/\"", r.Script, l, bookies[i])
		}
	}
	return locs, nil
}

func (r *Resolver) logger() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

func containsID(s []metadata.BookieID, b metadata.BookieID) bool {
	for _, x := range s {
		if x == b {
			return true
		}
	}
	return false
}
