package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

func TestCookieGetUpdateDelete(t *testing.T) {
	uri, d := memoryStore(t)
	ctx := context.Background()
	id := metadata.BookieID("10.0.0.5:3181")
	c := &metadata.Cookie{BookieID: id, JournalDirs: []string{"/j"}, LedgerDirs: []string{"/l"}, InstanceID: "abc"}
	data, err := c.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteCookie(ctx, id, data, metadata.VersionNew); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{MetadataURIEnv: uri}

	code, out, errOut := run(t, env, "shell", "cookie", "get", string(id))
	if code != ExitOK || !strings.Contains(out, `bookieHost: "10.0.0.5:3181"`) {
		t.Fatalf("get: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, env, "shell", "cookie", "get", string(id), "-o", "json")
	if code != ExitOK || !strings.Contains(out, `"instanceId": "abc"`) {
		t.Fatalf("get -o json: %d %q", code, out)
	}

	c.LedgerDirs = []string{"/l", "/l2"}
	data, _ = c.MarshalText()
	file := filepath.Join(t.TempDir(), "VERSION")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, env, "shell", "cookie", "update", string(id), "--cookie-file", file); code != ExitOK {
		t.Fatalf("update: %d %q", code, errOut)
	}
	got, _, err := d.ReadCookie(ctx, id)
	if err != nil || !strings.Contains(string(got), `2\t/l\t/l2`) {
		t.Fatalf("stored after update: %q %v", got, err)
	}
	if code, _, errOut := run(t, env, "shell", "cookie", "update", "10.0.0.6:3181", "--cookie-file", file); code != ExitFail || !strings.Contains(errOut, "not of") {
		t.Fatalf("update under another id: %d %q", code, errOut)
	}

	if code, _, errOut := run(t, env, "shell", "cookie", "delete", string(id)); code != ExitOK {
		t.Fatalf("delete: %d %q", code, errOut)
	}
	code, _, errOut = run(t, env, "shell", "cookie", "get", string(id))
	if code != ExitFail || !strings.Contains(errOut, "has no cookie") || !strings.Contains(errOut, "hint:") {
		t.Fatalf("get after delete: %d %q", code, errOut)
	}
	if code, _, _ := run(t, env, "shell", "cookie", "get", "bad id"); code != ExitUsage {
		t.Fatalf("bad id: exit %d, want usage", code)
	}
	if code, _, _ := run(t, env, "shell", "bookieformat"); code != ExitUsage {
		t.Fatalf("bookieformat without --force: exit %d, want usage", code)
	}
}
