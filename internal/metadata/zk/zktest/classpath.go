package zktest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ClasspathEnv names the environment variable that gives the Java classpath
// of a ZooKeeper server (the zookeeper 3.9.x jar, zookeeper-jute, netty,
// slf4j and a logger, and io.dropwizard.metrics:metrics-core 4.1.x, which
// ZooKeeper's server needs and Apache BookKeeper's dependency tree
// excludes). .ci/run sets it from compat/java's Maven build.
const ClasspathEnv = "FOLIO_ZK_CLASSPATH"

// RequireEnv and its value RequireValue make a missing ZooKeeper a test
// failure instead of a skip (CI sets FOLIO_COMPAT=require, as for the Java
// interop harness).
const (
	RequireEnv   = "FOLIO_COMPAT"
	RequireValue = "require"
)

// debianJars is where Debian's `zookeeper` package installs its jar and
// its dependencies; debianConf holds its log4j configuration.
const (
	debianJars = "/usr/share/java"
	debianConf = "/etc/zookeeper/conf"
)

// ErrUnavailable: this machine cannot run a ZooKeeper server (no Java).
// Tests skip on it, unless RequireEnv says otherwise.
var ErrUnavailable = errors.New("zktest: no ZooKeeper server can run here")

var classpathOnce struct {
	sync.Once
	cp  string
	err error
}

// Classpath returns the Java classpath of a ZooKeeper server, found in this
// order: $FOLIO_ZK_CLASSPATH; compat/java's Maven classpath
// (compat/java/target/classpath.txt when it is newer than the pom and
// names a zookeeper jar, else `mvn dependency:build-classpath`, offline
// first); Debian's `zookeeper` package (/usr/share/java/zookeeper.jar).
// ErrUnavailable (wrapped) when there is no `java` at all; any other error
// says why a Java machine has no classpath. The result is computed once per
// process.
func Classpath() (string, error) {
	classpathOnce.Do(func() { classpathOnce.cp, classpathOnce.err = findClasspath() })
	return classpathOnce.cp, classpathOnce.err
}

func findClasspath() (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("%w: `java` is not on PATH (install a JDK 17+, e.g. Debian's openjdk-17-jdk-headless, or Debian's zookeeper package)", ErrUnavailable)
	}
	if cp := strings.TrimSpace(os.Getenv(ClasspathEnv)); cp != "" {
		return cp, nil
	}
	var why []string
	if cp, err := mavenClasspath(); err == nil {
		return cp, nil
	} else {
		why = append(why, err.Error())
	}
	if _, err := os.Stat(filepath.Join(debianJars, "zookeeper.jar")); err == nil {
		// Debian's own zkEnv classpath: the jar's manifest names its
		// dependencies (Class-Path), all packaged in /usr/share/java.
		return debianConf + string(os.PathListSeparator) + filepath.Join(debianJars, "zookeeper.jar"), nil
	}
	why = append(why, "Debian's zookeeper package is not installed ("+filepath.Join(debianJars, "zookeeper.jar")+" absent)")
	return "", fmt.Errorf("zktest: no ZooKeeper classpath: $%s is empty; %s", ClasspathEnv, strings.Join(why, "; "))
}

// mavenClasspath returns compat/java's runtime classpath.
func mavenClasspath() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "compat", "java")
	pom := filepath.Join(dir, "pom.xml")
	pomInfo, err := os.Stat(pom)
	if err != nil {
		return "", fmt.Errorf("no %s: %v", pom, err)
	}
	// The compile build (`mvn compile`, as .ci/run and the compat harness
	// run it) leaves the classpath in target/classpath.txt.
	built := filepath.Join(dir, "target", "classpath.txt")
	if info, err := os.Stat(built); err == nil && info.ModTime().After(pomInfo.ModTime()) {
		if b, err := os.ReadFile(built); err == nil && serverClasspath(string(b)) {
			return strings.TrimSpace(string(b)), nil
		}
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("`mvn` is not on PATH and %s is missing or stale (run `mvn -f %s compile`)", built, pom)
	}
	out, err := os.CreateTemp("", "folio-zk-classpath-*.txt")
	if err != nil {
		return "", err
	}
	out.Close()
	defer os.Remove(out.Name())
	var lastErr error
	for _, offline := range []bool{true, false} {
		args := []string{"-q", "-B"}
		if offline {
			args = append(args, "-o")
		}
		args = append(args, "-f", pom, "dependency:build-classpath",
			"-Dmdep.outputFile="+out.Name(), "-Dmdep.includeScope=runtime")
		cmd := exec.Command("mvn", args...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			lastErr = fmt.Errorf("mvn %s: %v\n%s", strings.Join(args, " "), err, b)
			continue
		}
		cp, err := os.ReadFile(out.Name())
		if err != nil {
			return "", err
		}
		if !serverClasspath(string(cp)) {
			return "", fmt.Errorf("compat/java's Maven classpath lacks zookeeper or metrics-core jars (see %s)", pom)
		}
		return strings.TrimSpace(string(cp)), nil
	}
	return "", lastErr
}

// serverClasspath reports whether cp names what QuorumPeerMain needs.
func serverClasspath(cp string) bool {
	return strings.Contains(cp, "/zookeeper-3.") && strings.Contains(cp, "/metrics-core-")
}

// moduleRoot walks up from the working directory (a test runs in its
// package's directory) to the directory whose go.mod declares Folio's
// module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			s := bufio.NewScanner(f)
			isFolio := s.Scan() && strings.TrimSpace(s.Text()) == "module github.com/foliodb/folio"
			f.Close()
			if isFolio {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside Folio's source tree (no go.mod of github.com/foliodb/folio above the working directory)")
		}
		dir = parent
	}
}

// Required reports whether tests must fail rather than skip when ZooKeeper
// cannot run (RequireEnv=RequireValue).
func Required() bool { return os.Getenv(RequireEnv) == RequireValue }
