package topologyscript

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	if l := runLines(t, runs); len(l) != 2 || l[0] != "h1 h2" || l[1] != "h3 custom-id" {
		t.Fatalf("runs %q: want two runs of at most 2 hosts", l)
	}
	r.Locations(context.Background(), bs[:3])
	if l := runLines(t, runs); len(l) != 2 {
		t.Fatalf("cached bookies ran the script again: %q", l)
	}
}

// Bad output, a failing script and a hung one give a clear error from Run
// and the default location from Locations, which is not cached.
func TestResolveFailuresFallBack(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"wrong count", `echo /r/a`, "printed 1 locations for 2 bookies"},
		{"no slash", `echo /r/a rack2`, `location "rack2" of bookie h2:3181 does not start with "/"`},
		{"exit status", `echo boom >&2; exit 3`, `exit status 3 (stderr "boom")`},
		{"timeout", `exec sleep 60`, "context deadline exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, runs := script(t, c.body)
			r := &Resolver{Script: path, Default: "/default-region/default-rack"}
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
			r.Locations(context.Background(), bs)
			if l := runLines(t, runs); len(l) != 3 {
				t.Fatalf("runs %q: a failure must not be cached", l)
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
