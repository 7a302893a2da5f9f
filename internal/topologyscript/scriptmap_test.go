package topologyscript

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// script writes an executable shell script into a temp dir; every run
// appends a line to the returned log of runs.
func script(t *testing.T, body string) (path, runs string) {
	t.Helper()
	dir := t.TempDir()
	runs = filepath.Join(dir, "runs")
	path = filepath.Join(dir, "topology.sh")
	src := "#!/bin/sh\necho \"$@\" >> '" + runs + "'\n" + body + "\n"
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, runs
}

func runLines(t *testing.T, runs string) []string {
	t.Helper()
	b, err := os.ReadFile(runs)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// One location per host, in order; answers are cached; arguments are
// batched by MaxArgs.
func TestResolveCachesAndBatches(t *testing.T) {
	path, runs := script(t, `for h in "$@"; do echo "/zone-$h/ud"; done`)
	r := &Resolver{Script: path, MaxArgs: 2, Default: "/default-region/default-rack"}
	bs := []metadata.BookieID{"h1:3181", "h2:3181", "h3:3181", "h2:3181", "custom-id"}
	got := r.Locations(context.Background(), bs)
	want := map[metadata.BookieID]string{"h1:3181": "/zone-h1/ud", "h2:3181": "/zone-h2/ud", "h3:3181": "/zone-h3/ud", "custom-id": "/zone-custom-id/ud"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for b, l := range want {
		if got[b] != l {
			t.Fatalf("%s: got %q, want %q", b, got[b], l)
		}
	}
	// Batches run in parallel: in either order.
	if l := runLines(t, runs); len(l) != 2 || !slices.Contains(l, "h1 h2") || !slices.Contains(l, "h3 custom-id") {
		t.Fatalf("runs %q: want two runs of at most 2 hosts", l)
	}
	r.Locations(context.Background(), bs[:3])
	if l := runLines(t, runs); len(l) != 2 {
		t.Fatalf("cached bookies ran the script again: %q", l)
	}
}

// Bad output, a failing script and a hung one give a clear error from Run
// and the default location from Locations, which is cached for FailureTTL
// (on the resolver's clock) and asked again after it.
func TestResolveFailuresFallBack(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"wrong count", `echo /r/a`, "printed 1 locations for 2 bookies"},
		{"no slash", `echo /r/a rack2`, `location "rack2" of bookie h2:3181 does not start with "/"`},
		{"exit status", `echo boom >&2; exit 3`, `exit status 3 (stderr "boom")`},
		{"timeout", `exec sleep 60`, "context deadline exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, runs := script(t, c.body)
			now := time.Unix(1000, 0)
			r := &Resolver{Script: path, Default: "/default-region/default-rack", FailureTTL: time.Minute,
				Now: func() time.Time { return now }}
			if c.name == "timeout" {
				// Only the hung script gets a timeout: the others must
				// fail for their own reason however loaded the machine.
				r.Timeout = 200 * time.Millisecond
			}
			bs := []metadata.BookieID{"h1:3181", "h2:3181"}
			_, err := r.Run(context.Background(), bs)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Run: %v; want an error naming %s and %q", err, path, c.want)
			}
			got := r.Locations(context.Background(), bs)
			for _, b := range bs {
				if got[b] != r.Default {
					t.Fatalf("%s: %q, want the default", b, got[b])
				}
			}
			now = now.Add(time.Minute - time.Nanosecond)
			r.Locations(context.Background(), bs)
			if l := runLines(t, runs); len(l) != 2 {
				t.Fatalf("runs %q: a failure must be cached for FailureTTL", l)
			}
			now = now.Add(time.Nanosecond)
			r.Locations(context.Background(), bs)
			if l := runLines(t, runs); len(l) != 3 {
				t.Fatalf("runs %q: a failure must be asked again after FailureTTL", l)
			}
		})
	}
}

func TestMissingScript(t *testing.T) {
	r := &Resolver{Script: filepath.Join(t.TempDir(), "absent.sh"), Default: "/d/r"}
	if _, err := r.Run(context.Background(), []metadata.BookieID{"h:1"}); err == nil || !strings.Contains(err.Error(), "absent.sh") {
		t.Fatalf("Run: %v", err)
	}
	if got := r.Locations(context.Background(), []metadata.BookieID{"h:1"}); got["h:1"] != "/d/r" {
		t.Fatalf("%v", got)
	}
}

// A timed-out script is killed with its process group: a child it started
// does not outlive it.
func TestTimeoutKillsChildren(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	path, _ := script(t, "sleep 300 >/dev/null 2>&1 &\necho $! > '"+pidFile+"'\nexec sleep 300")
	r := &Resolver{Script: path, Timeout: 500 * time.Millisecond}
	if _, err := r.Run(context.Background(), []metadata.BookieID{"h1:3181"}); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("Run: %v, want a timeout", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// SIGKILL is delivered with the kill of the group; the child is gone
	// (or a zombie awaiting its new parent's wait) once the kernel has
	// processed it, which the test waits for (a live child sleeps 300 s).
	for !deadOrZombie(pid) {
		if t.Context().Err() != nil {
			t.Fatalf("child %d of the timed-out script is still running", pid)
		}
		runtime.Gosched()
	}
}

func deadOrZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// A script printing more than MaxOutput fails with an error saying so,
// and the resolver keeps at most MaxOutput of it.
func TestOutputCapped(t *testing.T) {
	path, _ := script(t, "yes /r/a | head -c 3000000")
	r := &Resolver{Script: path}
	_, err := r.Run(context.Background(), []metadata.BookieID{"h1:3181"})
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("Run: %v, want the output limit error", err)
	}
}

// Batches run in parallel: each run waits until both have started, which
// sequential runs never satisfy (the script then fails).
func TestBatchesRunInParallel(t *testing.T) {
	dir := t.TempDir()
	path, _ := script(t, "touch '"+dir+"'/started.$1\ni=0\nwhile [ $(ls '"+dir+"' | grep -c started) -lt 2 ]; do\n  i=$((i+1)); [ $i -gt 200 ] && exit 1\n  sleep 0.05\ndone\necho /r/$1")
	r := &Resolver{Script: path, MaxArgs: 1, Parallelism: 2, Default: "/d/d"}
	got := r.Locations(context.Background(), []metadata.BookieID{"h1:3181", "h2:3181"})
	if got["h1:3181"] != "/r/h1" || got["h2:3181"] != "/r/h2" {
		t.Fatalf("got %v: the batches did not run at once", got)
	}
}

// Retain forgets bookies that left; Cached is a copy.
func TestRetainAndCached(t *testing.T) {
	path, _ := script(t, `for h in "$@"; do echo "/z/$h"; done`)
	r := &Resolver{Script: path}
	r.Locations(context.Background(), []metadata.BookieID{"h1:1", "h2:1"})
	r.Retain(func(b metadata.BookieID) bool { return b == "h1:1" })
	c := r.Cached()
	if len(c) != 1 || c["h1:1"] != "/z/h1" {
		t.Fatalf("cache %v after retaining h1", c)
	}
	c["h3:1"] = "/x/y"
	if len(r.Cached()) != 1 {
		t.Fatal("Cached returned the resolver's own map")
	}
}
