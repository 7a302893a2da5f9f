package cli

import (
	"strings"
	"testing"
)

func TestRecoverAndDecommissionUsage(t *testing.T) {
	uri, _ := memoryStore(t)
	env := map[string]string{MetadataURIEnv: uri}
	for _, args := range [][]string{
		{"shell", "recover"},
		{"shell", "decommissionbookie"},
	} {
		if code, _, _ := run(t, env, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// The memory store has no auditor: decommissioning an unregistered
	// bookie refuses, and its (absent) cookie is untouched.
	code, _, errOut := run(t, env, "shell", "decommissionbookie", "--bookie-id", "127.0.0.1:3181")
	if code != 1 || !strings.Contains(errOut, "no auditor") {
		t.Fatalf("decommission without an auditor: exit %d, %q", code, errOut)
	}
	// Nothing references the bookie: recover has nothing to do.
	code, out, errOut := run(t, env, "shell", "recover", "127.0.0.1:3181", "-o", "json")
	if code != 0 || !strings.Contains(out, `"ledgersRecovered": 0`) {
		t.Fatalf("recover of an unused bookie: exit %d, %q %q", code, out, errOut)
	}
}
