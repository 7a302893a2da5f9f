package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runFolio(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	return out.String() + errb.String(), code
}

// stripElapsed drops the final wall-clock line, the only one that may
// differ between two runs of a seed.
func stripElapsed(s string) string {
	i := strings.LastIndex(s, "elapsed ")
	if i < 0 {
		return s
	}
	return s[:i]
}

// TestSimFlagSpellings: -seed N, --seed N and -seed=N all mean the same,
// and the output is the same byte for byte apart from the elapsed line.
func TestSimFlagSpellings(t *testing.T) {
	var want string
	for i, args := range [][]string{
		{"sim", "-seed", "7", "-steps", "40"},
		{"sim", "--seed", "7", "--steps", "40"},
		{"sim", "-seed=7", "-steps=40"},
		{"sim", "--seed=7", "--steps=40"},
	} {
		out, code := runFolio(t, args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
		if !strings.HasPrefix(out, "folio sim: seed=7 workload=mixed steps=40") || !strings.Contains(out, "\nelapsed ") {
			t.Fatalf("%v: unexpected output:\n%s", args, out)
		}
		got := stripElapsed(out)
		if i == 0 {
			want = got
		} else if got != want {
			t.Fatalf("%v: output differs from the first spelling:\n%s\nvs\n%s", args, got, want)
		}
	}
}

func TestSimUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "-seed", "x"},
		{"sim", "-faults", "bogus"},
		{"sim", "-mutation", "bogus"},
		{"sim", "-workload", "bogus"},
		{"sim", "extra"},
	} {
		if out, code := runFolio(t, args...); code != ExitUsage {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, ExitUsage, out)
		}
	}
}

// TestSimViolationExitsNonZero: a mutation's violation fails the command
// and prints the replay line.
func TestSimViolationExitsNonZero(t *testing.T) {
	out, code := runFolio(t, "sim", "-seed", "20", "-mutation", "start-at-lac", "-trace", t.TempDir()+"/trace.txt")
	if code != ExitFail || !strings.Contains(out, "VIOLATION NoInvalidFragments") || !strings.Contains(out, "replay: folio sim -seed 20 -workload mixed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runFolio(t, "sim", "-seed", "16", "-workload", "recovery-race", "-mutation", "piggyback-recovery-lac", "-trace", t.TempDir()+"/trace.txt")
	if code != ExitFail || !strings.Contains(out, "VIOLATION NoDirtyReads") || !strings.Contains(out, "replay: folio sim -seed 16 -workload recovery-race -steps 40") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
