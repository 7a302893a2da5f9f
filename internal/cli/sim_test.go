package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	out, code := runFolio(t, "sim", "-seed", "134", "-mutation", "start-at-lac", "-trace", t.TempDir()+"/trace.txt")
	if code != ExitFail || !strings.Contains(out, "VIOLATION NoInvalidFragments") || !strings.Contains(out, "replay: folio sim -seed 134 -workload mixed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runFolio(t, "sim", "-seed", "35", "-workload", "recovery-race", "-mutation", "piggyback-recovery-lac", "-trace", t.TempDir()+"/trace.txt")
	if code != ExitFail || !strings.Contains(out, "VIOLATION NoDirtyReads") || !strings.Contains(out, "replay: folio sim -seed 35 -workload recovery-race -steps 40") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestSimMinimize: -minimize reduces a failing seed, prints the reduced
// schedule and writes the ledger script to -trace; -schedule replays the
// reduced schedule to the same violation; a bad schedule file is an error
// naming the file and line.
func TestSimMinimize(t *testing.T) {
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "script.txt")
	out, code := runFolio(t, "sim", "-seed", "42", "-workload", "recovery-race", "-mutation", "piggyback-recovery-lac", "-minimize", "-trace", scriptPath)
	if code != ExitFail || !strings.Contains(out, "minimized NoDirtyReads in ") || !strings.Contains(out, "ledger script written to "+scriptPath) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "recover r1 read-ahead=") || !strings.HasSuffix(strings.TrimSpace(string(script)), "fragments\n----") {
		t.Fatalf("script:\n%s", script)
	}
	_, rest, ok := strings.Cut(out, "--- reduced schedule (save it to replay with -schedule FILE) ---\n")
	sched, _, ok2 := strings.Cut(rest, "--- trace of the reduced run ---")
	if !ok || !ok2 {
		t.Fatalf("no reduced schedule in:\n%s", out)
	}
	schedPath := filepath.Join(dir, "schedule.txt")
	if err := os.WriteFile(schedPath, []byte(sched), 0o644); err != nil {
		t.Fatal(err)
	}
	_, faultsLine, _ := strings.Cut(out, "replay: folio sim -seed 42 -workload recovery-race -steps 40 -faults ")
	faults, _, _ := strings.Cut(faultsLine, " ")
	out2, code := runFolio(t, "sim", "-seed", "42", "-workload", "recovery-race", "-faults", faults, "-mutation", "piggyback-recovery-lac", "-schedule", schedPath, "-trace", filepath.Join(dir, "trace.txt"))
	if code != ExitFail || !strings.Contains(out2, "VIOLATION NoDirtyReads") {
		t.Fatalf("replaying the schedule: exit %d:\n%s", code, out2)
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("end 1ms\n1 0s explode 0x1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out3, code := runFolio(t, "sim", "-schedule", bad)
	if code == ExitOK || !strings.Contains(out3, bad) || !strings.Contains(out3, "line 2") {
		t.Fatalf("bad schedule: exit %d:\n%s", code, out3)
	}
}
