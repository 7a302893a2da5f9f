package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timeouts of the smoke test. The Maven build is bounded by the CI job, not
// here: a cold ~/.m2 downloads about 100 MB.
const (
	standaloneStartTimeout = 60 * time.Second
	standaloneStopTimeout  = 15 * time.Second
	javaRunTimeout         = 5 * time.Minute
)

// jvmFlags go before every java command line: the JIT's first tier only and
// the serial collector. The harness's JVMs are short-lived or lightly loaded,
// and on a 2-core machine full C2 compilation and parallel GC threads cost
// more CPU than they save (a Driver write: about 45 % less CPU time).
var jvmFlags = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

// javaArgs is jvmFlags followed by args.
func javaArgs(args ...string) []string { return append(slices.Clone(jvmFlags), args...) }

// readyPrefix starts the one line `folio standalone` prints once every bookie
// is registered (DESIGN.md §3).
const readyPrefix = "folio standalone ready: "

// JavaBookieClientSmoke (TestJavaBookieClientSmoke) runs Apache BookKeeper 4.17's own low-level bookie
// client (BookieClientImpl, with its DigestManager building and verifying the
// entry bodies) against one Folio bookie, once with the v3 protocol and once
// with useV2WireProtocol=true. The Java program (java/src/main/java/.../
// BookieSmoke.java) prints a PASS/FAIL line per step and exits non-zero on
// any failure.
func JavaBookieClientSmoke(t *testing.T) {
	requireJava(t)
	classpath := buildJava(t)
	cluster := startStandalone(t, 1)
	bookie := struct{ addr, logPath string }{cluster.bookies[0], cluster.logPath}

	for i, mode := range []string{"v3", "v2"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), javaRunTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, "java", javaArgs("-cp", classpath, "org.foliodb.compat.BookieSmoke",
				"--bookie", bookie.addr, "--protocol", mode,
				"--ledger-base", fmt.Sprint(int64(i+1)*1_000_000))...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			for _, line := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
				t.Log(line)
			}
			if err != nil {
				t.Errorf("Java BookieSmoke (%s) against Folio bookie %s: %v\n--- java stderr (tail) ---\n%s\n--- folio standalone log %s (tail) ---\n%s",
					mode, bookie.addr, err, tail(stderr.String(), 60), bookie.logPath, tailFile(bookie.logPath, 40))
			}
		})
	}
}

// compatDir is the compat module's directory (this file's parent), whatever
// the directory of the test package running.
func compatDir(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("compat: cannot locate the harness sources")
	}
	return filepath.Dir(filepath.Dir(file))
}

// requireJava skips the test, with a message saying what is missing, on a
// machine without Java or Maven, and fails it there if FOLIO_COMPAT=require
// (.ci/run sets that: CI must run the interop tests). FOLIO_COMPAT=off skips
// it deliberately.
func requireJava(t *testing.T) {
	t.Helper()
	mode := os.Getenv("FOLIO_COMPAT")
	if mode == "off" {
		t.Skip("FOLIO_COMPAT=off: the Java interop tests are switched off")
	}
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("compat: %q not found in PATH, so the Java interop tests cannot run. They need Java 17+ and Maven "+
				"(Debian: apt-get install openjdk-17-jdk-headless maven) and Maven Central or a filled ~/.m2", tool)
			if mode == "require" {
				t.Fatal(msg + " (FOLIO_COMPAT=require)")
			}
			t.Skip("SKIPPED: " + msg + "; FOLIO_COMPAT=require makes this a failure")
		}
	}
}

// buildJava compiles the Java programs (offline first, from ~/.m2; online if
// that fails) and returns their classpath.
func buildJava(t *testing.T) string {
	t.Helper()
	javaBuild.Lock()
	defer javaBuild.Unlock()
	if javaBuild.classpath == "" {
		javaBuild.classpath = buildJavaOnce(t)
	}
	return javaBuild.classpath
}

// javaBuild memoises buildJava over the tests of one run.
var javaBuild struct {
	sync.Mutex
	classpath string
}

func buildJavaOnce(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(compatDir(t), "java")
	mvn := func(args ...string) ([]byte, error) {
		cmd := exec.Command("mvn", append([]string{"-q", "-B"}, args...)...)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	if _, err := mvn("-o", "compile"); err != nil {
		t.Log("compat: offline Maven build failed; building online (downloads from Maven Central)")
		if out, err := mvn("compile"); err != nil {
			t.Fatalf("compat: mvn compile in %s: %v\n%s", dir, err, out)
		}
	}
	deps, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		t.Fatalf("compat: the Maven build wrote no classpath: %v", err)
	}
	// target/lib holds the etcd metadata driver jar, fetched outside Maven's
	// dependency graph (java/pom.xml says why).
	return strings.Join([]string{
		filepath.Join(dir, "target", "classes"),
		filepath.Join(dir, "target", "lib", "*"),
		strings.TrimSpace(string(deps)),
	}, string(os.PathListSeparator))
}

type standalone struct {
	uri     string   // the metadata service URI, etcd://127.0.0.1:PORT/ledgers
	bookies []string // the bookies' host:port (their bookie ids)
	logPath string
	bin     string // the folio binary
}

// startStandalone builds folio from the parent module and runs
// `folio standalone --bookies n` with every port picked free, until the test
// ends (then SIGTERM).
func startStandalone(t *testing.T, n int) standalone {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "folio")
	build := exec.Command("go", "build", "-o", bin, "./cmd/folio")
	build.Dir = filepath.Dir(compatDir(t)) // the parent module, whose cmd/folio this is
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("compat: go build folio: %v\n%s", err, out)
	}

	s := standalone{logPath: filepath.Join(tmp, "standalone.log"), bin: bin}
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "standalone", "--bookies", fmt.Sprint(n), "--data-dir", filepath.Join(tmp, "data"),
		"--etcd-client-port", "0", "--etcd-peer-port", "0", "--bookie-port-base", "0", "--http-port", "0")
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("compat: start %v: %v", cmd.Args, err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // only the first line matters
			}
		}
		close(lines)
		exited <- cmd.Wait()
		logf.Close()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Logf("compat: folio standalone exited after SIGTERM: %v", err)
			}
		case <-time.After(standaloneStopTimeout):
			_ = cmd.Process.Kill()
			<-exited
			t.Logf("compat: folio standalone did not stop within %v; killed", standaloneStopTimeout)
		}
	})

	var ready string
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("compat: folio standalone exited before it was ready; log %s:\n%s", s.logPath, tailFile(s.logPath, 40))
		}
		ready = line
	case <-time.After(standaloneStartTimeout):
		t.Fatalf("compat: folio standalone not ready within %v; log %s:\n%s", standaloneStartTimeout, s.logPath, tailFile(s.logPath, 40))
	}
	rest, ok := strings.CutPrefix(ready, readyPrefix)
	if !ok {
		t.Fatalf("compat: first stdout line of folio standalone is not the readiness line: %q", ready)
	}
	for _, f := range strings.Fields(rest) {
		if v, ok := strings.CutPrefix(f, "bookies="); ok && v != "" {
			s.bookies = strings.Split(v, ",")
		}
		if v, ok := strings.CutPrefix(f, "metadata-service-uri="); ok {
			s.uri = v
		}
	}
	if len(s.bookies) != n || s.uri == "" {
		t.Fatalf("compat: the readiness line %q does not name %d bookies and the metadata service URI", ready, n)
	}
	t.Logf("compat: %s", ready)
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return err.Error()
	}
	return tail(string(b), n)
}
