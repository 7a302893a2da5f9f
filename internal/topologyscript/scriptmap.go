// Package topologyscript resolves bookies' network locations by running an
// operator's script, as BookKeeper's ScriptBasedMapping
// (networkTopologyScriptFileName): the script gets up to MaxArgs bookie
// hosts as arguments and prints one location per argument, whitespace
// separated, in order. Answers are cached per bookie; failures are cached
// for FailureTTL, so a broken script is not run again for every placement
// and membership change, and asked again afterwards.
package topologyscript

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// DefaultMaxArgs is BookKeeper's networkTopologyScriptNumberArgs default.
const DefaultMaxArgs = 100

// Defaults of the Resolver's knobs.
const (
	DefaultFailureTTL  = time.Minute
	DefaultParallelism = 4
	// MaxOutput bounds what one run may print: a script printing more is
	// broken (a location is a short path per bookie).
	MaxOutput = 1 << 20
)

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
	// FailureTTL is how long bookies whose run failed get Default without
	// running the script again (0: DefaultFailureTTL; < 0: not cached).
	FailureTTL time.Duration
	// Parallelism bounds the runs one Locations call makes at once
	// (≤ 0: DefaultParallelism).
	Parallelism int
	// Now is the clock of FailureTTL; nil: time.Now.
	Now func() time.Time

	mu     sync.Mutex
	cache  map[metadata.BookieID]string
	failed map[metadata.BookieID]time.Time // Default until then
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
// the script, or (when the run fails or its output is bad, or did so
// within FailureTTL) Default, with a logged warning naming the error. It
// never fails: placement goes on with the default location, as
// BookKeeper's DNSResolverDecorator does. Batches of MaxArgs run in
// parallel, at most Parallelism at once.
func (r *Resolver) Locations(ctx context.Context, bookies []metadata.BookieID) map[metadata.BookieID]string {
	out := make(map[metadata.BookieID]string, len(bookies))
	var todo []metadata.BookieID
	now := r.now()
	r.mu.Lock()
	for _, b := range bookies {
		if loc, ok := r.cache[b]; ok {
			out[b] = loc
		} else if until, ok := r.failed[b]; ok && now.Before(until) {
			out[b] = r.Default
		} else if _, dup := out[b]; !dup && !containsID(todo, b) {
			todo = append(todo, b)
		}
	}
	r.mu.Unlock()
	maxArgs := r.MaxArgs
	if maxArgs <= 0 {
		maxArgs = DefaultMaxArgs
	}
	par := r.Parallelism
	if par <= 0 {
		par = DefaultParallelism
	}
	var (
		wg    sync.WaitGroup
		outMu sync.Mutex
		sem   = make(chan struct{}, par)
	)
	for len(todo) > 0 {
		n := min(maxArgs, len(todo))
		batch := todo[:n]
		todo = todo[n:]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			locs, err := r.Run(ctx, batch)
			outMu.Lock()
			defer outMu.Unlock()
			if err != nil {
				r.logger().Warn("network topology script failed; using the default location", "script", r.Script, "default", r.Default, "bookies", batch, "err", err)
				r.fail(batch)
				for _, b := range batch {
					out[b] = r.Default
				}
				return
			}
			r.mu.Lock()
			if r.cache == nil {
				r.cache = map[metadata.BookieID]string{}
			}
			for i, b := range batch {
				out[b] = locs[i]
				r.cache[b] = locs[i]
				delete(r.failed, b)
			}
			r.mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// fail remembers that bookies could not be resolved, for FailureTTL.
func (r *Resolver) fail(bookies []metadata.BookieID) {
	ttl := r.FailureTTL
	if ttl == 0 {
		ttl = DefaultFailureTTL
	}
	if ttl < 0 {
		return
	}
	until := r.now().Add(ttl)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = map[metadata.BookieID]time.Time{}
	}
	for _, b := range bookies {
		r.failed[b] = until
	}
}

// Cached returns a copy of the resolved locations.
func (r *Resolver) Cached() map[metadata.BookieID]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.cache)
}

// Len is the number of bookies the resolver holds an answer or a failure
// for.
func (r *Resolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cache) + len(r.failed)
}

// Retain forgets the answers and failures of the bookies keep reports
// false for (bookies that left the cluster), and expired failures.
func (r *Resolver) Retain(keep func(metadata.BookieID) bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.cache, func(b metadata.BookieID, _ string) bool { return !keep(b) })
	maps.DeleteFunc(r.failed, func(b metadata.BookieID, until time.Time) bool { return !keep(b) || !now.Before(until) })
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
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
	stdout := &cappedBuffer{max: MaxOutput}
	stderr := &cappedBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The script runs in its own process group, killed as a whole on
	// timeout, so its children do not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that left the group may keep the pipes open: stop waiting
	// for it once the script is killed.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if stdout.over {
		return nil, fmt.Errorf("topologyscript: %s printed more than %d bytes of output for %d bookies", r.Script, MaxOutput, len(bookies))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("topologyscript: %s: %w (after %v)", r.Script, ctx.Err(), r.Timeout)
		}
		return nil, fmt.Errorf("topologyscript: %s: %w (stderr %s)", r.Script, err, quote(strings.TrimSpace(stderr.String())))
	}
	locs := strings.Fields(stdout.String())
	if len(locs) != len(bookies) {
		return nil, fmt.Errorf("topologyscript: %s printed %d locations for %d bookies (%s)", r.Script, len(locs), len(bookies), quote(stdout.String()))
	}
	for i, l := range locs {
		if !strings.HasPrefix(l, "/") {
			return nil, fmt.Errorf("topologyscript: %s: location %s of bookie %s does not start with \"/\"", r.Script, quote(l), bookies[i])
		}
	}
	return locs, nil
}

// cappedBuffer keeps at most max bytes and drops the rest (still reading
// it, so the script is not blocked on a full pipe), noting that it did.
// (Not embedding bytes.Buffer: io.Copy would use its ReadFrom and bypass
// the cap.)
type cappedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *cappedBuffer) String() string { return b.buf.String() }

// quote is s quoted for an error message, at most 200 bytes of it.
func quote(s string) string {
	if len(s) > 200 {
		return fmt.Sprintf("%q…", s[:200])
	}
	return fmt.Sprintf("%q", s)
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
