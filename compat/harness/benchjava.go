package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/benchbase"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
)

// Apache BookKeeper's own benchmark tools (org.apache.bookkeeper:
// bookkeeper-benchmark, the version of java/pom.xml) against Java bookies
// and against Folio bookies, one cluster after the other on one ZooKeeper,
// in one run, with the machine's raw fdatasync rate measured first
// (`make bench-java`; not part of CI). The tools find their cluster with
// -zookeeper HOST:PORT/CHROOT (they know no metadata service URI): each
// cluster's ledgers root is <chroot>/ledgers, which BookKeeper derives from
// that connect string (zk+hierarchical://HOST:PORT<chroot>/ledgers).

// benchSettings are the knobs of BenchJava, read from the environment
// (FOLIO_BENCH_*), with defaults that keep a run within about five
// minutes on a 2-core machine.
type benchSettings struct {
	seconds   int // BenchThroughputLatency -time (FOLIO_BENCH_SECONDS, 30)
	entrySize int // -entrysize / -size (FOLIO_BENCH_ENTRY_SIZE, 1024)
	// BenchThroughputLatency -throttle, one run per value
	// (FOLIO_BENCH_THROTTLES, "10000,100000"). The tool's client both
	// keeps at most that many adds in flight and, through the BookKeeper
	// client's own `throttle` setting, sends at most that many adds per
	// second: its default, 10000, is a fixed offered load; a large value
	// measures the highest rate.
	throttles []int
	bookies   int // bookies per cluster (FOLIO_BENCH_BOOKIES, 3)
	// order is which cluster runs first (FOLIO_BENCH_ORDER,
	// "Java,Folio"): on a shared machine, running it both ways shows
	// whether the load of the moment favoured one.
	order       []string
	latencyN    int // BenchBookie -latencyCount (FOLIO_BENCH_LATENCY_COUNT, 5000, the tool's default)
	throughputN int // BenchBookie -throughputCount (FOLIO_BENCH_THROUGHPUT_COUNT, 50000, the tool's default)
}

func benchSettingsFromEnv(t *testing.T) benchSettings {
	t.Helper()
	get := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	var throttles []int
	list := os.Getenv("FOLIO_BENCH_THROTTLES")
	if list == "" {
		list = "10000,100000"
	}
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("FOLIO_BENCH_THROTTLES=%q: want positive integers separated by commas", list)
		}
		throttles = append(throttles, n)
	}
	order := strings.Split(os.Getenv("FOLIO_BENCH_ORDER"), ",")
	if len(order) == 1 && order[0] == "" {
		order = []string{"Java", "Folio"}
	}
	if !slices.Equal(order, []string{"Java", "Folio"}) && !slices.Equal(order, []string{"Folio", "Java"}) {
		t.Fatalf("FOLIO_BENCH_ORDER=%q: want Java,Folio or Folio,Java", os.Getenv("FOLIO_BENCH_ORDER"))
	}
	return benchSettings{
		order:       order,
		seconds:     get("FOLIO_BENCH_SECONDS", 30),
		entrySize:   get("FOLIO_BENCH_ENTRY_SIZE", 1024),
		throttles:   throttles,
		bookies:     get("FOLIO_BENCH_BOOKIES", 3),
		latencyN:    get("FOLIO_BENCH_LATENCY_COUNT", 5000),
		throughputN: get("FOLIO_BENCH_THROUGHPUT_COUNT", 50000),
	}
}

// benchJVM are the JVM options of the Java bookies and the tools in a
// benchmark: the full JIT (not the harness's first tier only), G1 with
// short pauses and a fixed heap, as BookKeeper's bin/bookkeeper runs a
// bookie (smaller: six JVMs share the machine's memory in turn).
var benchJVM = []string{"-Xms512m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m", "-XX:+UseG1GC",
	"-XX:MaxGCPauseMillis=10", "-XX:+DisableExplicitGC", "-Djava.net.preferIPv4Stack=true"}

// benchLog4j prints the benchmark tools' own lines (INFO) on stdout and
// the rest at WARN on stderr.
const benchLog4j = `<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="%msg%n"/></Console>
    <Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="%d{HH:mm:ss.SSS} %-5level %c{1} - %msg%n"/></Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.bookkeeper.benchmark" level="info" additivity="false"><AppenderRef ref="out"/></Logger>
    <Root level="warn"><AppenderRef ref="err"/></Root>
  </Loggers>
</Configuration>
`

// benchResult is what the two tools reported for one cluster.
type benchResult struct {
	impl string
	runs []throughputRun // BenchThroughputLatency, one per throttle
	// BenchBookie (one bookie, no replication): mean latency of
	// sequential adds, and throughput with every add in flight.
	bookieLatencyMs float64
	bookieOpsPerSec int64
}

// BenchJava (compat/benchjava, `make bench-java`) runs BenchThroughputLatency
// (E=3 Qw=2 Qa=2 ledgers, CRC32, the tool's warm-up first) and BenchBookie
// (raw adds to one bookie) against a cluster of Java bookies (DbLedgerStorage,
// journal fsync on: BookKeeper's production settings) and then against a
// cluster of Folio bookies (fsync always), on one ZooKeeper, and prints the
// figures with the machine's raw 1 KiB write+fdatasync baseline of the
// same run.
func BenchJava(t *testing.T) {
	requireJava(t)
	classpath := zkClasspath(buildJava(t))
	s := benchSettingsFromEnv(t)
	dir := t.TempDir()
	disk, err := benchbase.MeasureFdatasync(dir, 3000, 1024)
	if err != nil {
		t.Fatal(err)
	}
	load := loadAverage()
	srv := zktest.Start(t)
	raw := rawZK(t, srv)
	log4j := filepath.Join(dir, "log4j2-bench.xml")
	if err := os.WriteFile(log4j, []byte(benchLog4j), 0o644); err != nil {
		t.Fatal(err)
	}
	var results []benchResult
	for _, impl := range s.order {
		t.Run(impl, func(t *testing.T) {
			chroot := "/bench-" + strings.ToLower(impl)
			uri := zkURI(srv, "hierarchical", chroot+"/ledgers")
			var bookies []string
			var stop func()
			if impl == "Java" {
				// Java's initnewcluster creates the ledgers root but
				// not its parents (Folio's creates them).
				if _, err := raw.Create(chroot, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
					t.Fatalf("create %s: %v", chroot, err)
				}
				runJavaShell(t, classpath, uri, "initnewcluster")
				var waits []func() javaBookie
				for range s.bookies {
					waits = append(waits, startJavaBookieWith(t, classpath, uri, map[string]string{
						"ledgerStorageClass":                "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
						"dbStorage_writeCacheMaxSizeMb":     "64",
						"dbStorage_readAheadCacheMaxSizeMb": "32",
						"zkTimeout":                         "10000",
					}, benchJVM))
				}
				var jbs []javaBookie
				for _, w := range waits {
					jb := w()
					jbs = append(jbs, jb)
					bookies = append(bookies, jb.addr)
				}
				stop = func() {
					for _, jb := range jbs {
						jb.proc.terminate()
					}
				}
			} else {
				if out, err := folioShellRaw(t, uri, "initnewcluster"); err != nil {
					t.Fatalf("folio shell initnewcluster: %v\n%s", err, out)
				}
				cl := startFolioBookies(t, uri, s.bookies)
				for _, b := range cl.Bookies {
					bookies = append(bookies, b.Addr())
				}
				stop = func() {
					for _, b := range cl.Bookies {
						b.Terminate()
					}
				}
			}
			waitRegistered(t, uri, bookies)
			zkArg := srv.Addr() + chroot
			r := benchResult{impl: impl}
			for _, th := range s.throttles {
				r.runs = append(r.runs, runThroughputLatency(t, classpath, log4j, zkArg, s, impl, th))
			}
			runBenchBookie(t, classpath, log4j, zkArg, bookies[0], s, &r)
			stop()
			results = append(results, r)
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nApache BookKeeper %s benchmark tools, %d bookies per cluster, %d-byte entries, %d CPUs, load average before the run %s\n",
		bookkeeperVersion(t), s.bookies, s.entrySize, runtime.NumCPU(), load)
	fmt.Fprintf(&b, "raw 1 KiB write+fdatasync (benchbase, same directory tree): %.0f/s, p50 %v, p99 %v\n\n",
		disk.OpsPerSec, disk.P50, disk.P99)
	fmt.Fprintf(&b, "BenchThroughputLatency, E=3 Qw=2 Qa=2, CRC32, %d s after the tool's warm-up:\n\n", s.seconds)
	b.WriteString("| bookies | -throttle | adds/s | completions | p50 | p95 | p99 | p99.9 |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		for _, x := range r.runs {
			fmt.Fprintf(&b, "| %s | %d | %d | %d in %d ms | %v | %v | %v | %v |\n",
				r.impl, x.throttle, x.opsPerSec, x.completions, x.durationMs, x.p50, x.p95, x.p99, x.p999)
		}
	}
	fmt.Fprintf(&b, "\nBenchBookie, one bookie, %d sequential adds then %d in flight:\n\n", s.latencyN, s.throughputN)
	b.WriteString("| bookie | mean add latency, sequential | adds/s, all in flight |\n|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.3f ms | %d |\n", r.impl, r.bookieLatencyMs, r.bookieOpsPerSec)
	}
	t.Log(b.String())
	fmt.Println(b.String())
}

// throughputRun is one BenchThroughputLatency run: its throttle, the
// completions over the run, its duration, its ops/s, and latency
// percentiles from its latency dump.
type throughputRun struct {
	throttle                           int
	completions, durationMs, opsPerSec int64
	p50, p95, p99, p999                time.Duration
}

var (
	benchCompletions = regexp.MustCompile(`(?m)^(\d+) completions in (\d+) milliseconds: (\d+) ops/sec$`)
	benchLatency     = regexp.MustCompile(`(?m)^Latency: ([0-9.E-]+)$`)
	benchThroughput  = regexp.MustCompile(`(?m)^Throughput: (\d+)$`)
)

// runTool runs a benchmark tool's main class with args and returns its
// stdout; a non-zero exit fails the test.
func runTool(t *testing.T, classpath, log4j, class string, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	jvm := append(slices.Clone(benchJVM), "-Dlog4j2.configurationFile="+log4j, "-cp", classpath, class)
	cmd := exec.CommandContext(ctx, "java", append(jvm, args...)...)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s", class, args, err, tail(stdout.String(), 30), tail(stderr.String(), 30))
	}
	t.Logf("%s %s: %v", class[strings.LastIndex(class, ".")+1:], strings.Join(args, " "), time.Since(start).Round(time.Second))
	return stdout.String()
}

func runThroughputLatency(t *testing.T, classpath, log4j, zkArg string, s benchSettings, impl string, throttle int) throughputRun {
	t.Helper()
	r := throughputRun{throttle: throttle}
	dump := filepath.Join(t.TempDir(), "latencyDump.dat")
	out := runTool(t, classpath, log4j, "org.apache.bookkeeper.benchmark.BenchThroughputLatency",
		time.Duration(s.seconds)*time.Second+5*time.Minute,
		"-zookeeper", zkArg, "-time", fmt.Sprint(s.seconds), "-entrysize", fmt.Sprint(s.entrySize),
		"-ensemble", "3", "-quorum", "2", "-ackQuorum", "2", "-throttle", fmt.Sprint(throttle),
		"-sendlimit", "5000000", "-latencyFile", dump)
	m := benchCompletions.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("BenchThroughputLatency printed no result line:\n%s", tail(out, 30))
	}
	r.completions, _ = strconv.ParseInt(m[1], 10, 64)
	r.durationMs, _ = strconv.ParseInt(m[2], 10, 64)
	r.opsPerSec, _ = strconv.ParseInt(m[3], 10, 64)
	// The dump is every add's latency in nanoseconds, ascending, one a
	// line ("<ns>\t<ms>ms").
	f, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lat []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ns, err := strconv.ParseInt(strings.SplitN(sc.Text(), "\t", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: line %q: %v", dump, sc.Text(), err)
		}
		lat = append(lat, ns)
	}
	if len(lat) == 0 {
		t.Fatalf("BenchThroughputLatency dumped no latencies")
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		return time.Duration(lat[min(len(lat)-1, int(float64(len(lat))*p))]).Round(time.Microsecond)
	}
	r.p50, r.p95, r.p99, r.p999 = q(0.50), q(0.95), q(0.99), q(0.999)
	t.Logf("%s bookies, throttle %d: BenchThroughputLatency %d adds/s; p50 %v p99 %v", impl, throttle, r.opsPerSec, r.p50, r.p99)
	return r
}

func runBenchBookie(t *testing.T, classpath, log4j, zkArg, bookie string, s benchSettings, r *benchResult) {
	t.Helper()
	host, port, _ := strings.Cut(bookie, ":")
	out := runTool(t, classpath, log4j, "org.apache.bookkeeper.benchmark.BenchBookie", 10*time.Minute,
		"-host", host, "-port", port, "-zookeeper", zkArg, "-size", fmt.Sprint(s.entrySize),
		"-latencyCount", fmt.Sprint(s.latencyN), "-throughputCount", fmt.Sprint(s.throughputN))
	ml, mt := benchLatency.FindStringSubmatch(out), benchThroughput.FindStringSubmatch(out)
	if ml == nil || mt == nil {
		t.Fatalf("BenchBookie printed no latency or throughput line:\n%s", tail(out, 30))
	}
	r.bookieLatencyMs, _ = strconv.ParseFloat(ml[1], 64)
	r.bookieOpsPerSec, _ = strconv.ParseInt(mt[1], 10, 64)
	t.Logf("%s bookie %s: BenchBookie mean add latency %.3f ms, %d adds/s", r.impl, bookie, r.bookieLatencyMs, r.bookieOpsPerSec)
}

// bookkeeperVersion is the bookkeeper.version java/pom.xml pins.
func bookkeeperVersion(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(compatDir(t), "java", "pom.xml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<bookkeeper.version>([^<]+)</bookkeeper.version>`).FindSubmatch(b)
	if m == nil {
		t.Fatal("java/pom.xml pins no bookkeeper.version")
	}
	return string(m[1])
}

// loadAverage is /proc/loadavg's first three fields, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
