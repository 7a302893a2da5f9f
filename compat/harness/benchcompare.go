package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/bench"
	"github.com/foliodb/folio/internal/benchbase"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
	"github.com/foliodb/folio/internal/testcluster"
)

// The side-by-side benchmark (`make bench-compare`, compat/benchcompare;
// docs/performance.md "Side-by-side harness"; issue 22 §1): Apache
// BookKeeper 4.17 bookies in two configurations and Folio bookies, all on
// one ZooKeeper, each cluster driven in turn by Apache BookKeeper's own Java
// code (java/.../BenchDriver.java: BookieClientImpl for one bookie, the
// BookKeeper client for three) and by Folio's Go client (internal/bench, in
// this process), one workload at a time, never two at once. Each row
// reports throughput, latency percentiles, the bookies' CPU seconds per
// 10,000 entries (from /proc/<pid>/stat) and the driver's own CPU; the run
// also measures the machine's raw fdatasync and loopback round trip, and
// ends with a Markdown side-by-side table (printed and written to a file).

// cmpSettings are the knobs of BenchCompare, from FOLIO_BCMP_* variables.
type cmpSettings struct {
	quick    bool
	seconds  int      // measured seconds per write row (FOLIO_BCMP_SECONDS: 30, quick 5)
	warmup   int      // Java driver warm-up adds per row (FOLIO_BCMP_WARMUP: 20000, at least 20000)
	goWarmup int      // Go driver warm-up seconds per row (FOLIO_BCMP_GO_WARMUP: 3, quick 1)
	rows     []string // workload names (FOLIO_BCMP_ROWS: all)
	clusters []string // cluster names in run order (FOLIO_BCMP_CLUSTERS: java-default,java-tuned,folio)
	drivers  []string // java, go (FOLIO_BCMP_DRIVERS: java,go)
	// Catch-up read: MiB written over catchupLedgers ledgers of
	// catchupEntry-byte entries (FOLIO_BCMP_CATCHUP_MB: 4096, quick 128;
	// FOLIO_BCMP_CATCHUP_LEDGERS: 8; FOLIO_BCMP_CATCHUP_ENTRY: 1024).
	catchupMB, catchupLedgers, catchupEntry int
	tailRate                                int    // tailing row's adds/s (FOLIO_BCMP_TAIL_RATE: 1000)
	out                                     string // Markdown file (FOLIO_BCMP_OUT: $TMPDIR/folio-bench-compare-<time>.md)
}

// cmpWorkload is one row of the comparison.
type cmpWorkload struct {
	name        string
	what        string
	kind        string // "bookie" (adds to one bookie), "write" (three bookies), "read" (catch-up), "tail"
	e, w, a     int
	size        int
	outstanding int
}

// cmpWorkloads are every workload, in run order.
var cmpWorkloads = []cmpWorkload{
	{name: "one-o1", what: "1 bookie, 1 KiB, 1 outstanding", kind: "bookie", e: 1, w: 1, a: 1, size: 1024, outstanding: 1},
	{name: "one-o256", what: "1 bookie, 1 KiB, 256 outstanding", kind: "bookie", e: 1, w: 1, a: 1, size: 1024, outstanding: 256},
	{name: "e3w2a2-o1000", what: "3 bookies E3 Qw2 Qa2, 1 KiB, 1000 outstanding", kind: "write", e: 3, w: 2, a: 2, size: 1024, outstanding: 1000},
	{name: "e3w3a2-o1", what: "3 bookies E3 Qw3 Qa2, 1 KiB, 1 outstanding", kind: "write", e: 3, w: 3, a: 2, size: 1024, outstanding: 1},
	{name: "e3w2a2-100b", what: "3 bookies E3 Qw2 Qa2, 100 B, 1000 outstanding", kind: "write", e: 3, w: 2, a: 2, size: 100, outstanding: 1000},
	{name: "e3w2a2-64k", what: "3 bookies E3 Qw2 Qa2, 64 KiB, 64 outstanding", kind: "write", e: 3, w: 2, a: 2, size: 64 << 10, outstanding: 64},
	{name: "catchup", what: "catch-up read (W7), E3 Qw2 Qa2, 100 entries a request", kind: "read", e: 3, w: 2, a: 2},
	{name: "tail", what: "tailing reader's lag, E3 Qw2 Qa2, 1 KiB", kind: "tail", e: 3, w: 2, a: 2, size: 1024, outstanding: 1000},
}

// cmpClusterNames are the clusters BenchCompare knows, with their labels.
var cmpClusterNames = map[string]string{
	"java-default": "Java 4.17 default",
	"java-tuned":   "Java 4.17 journalFlushWhenQueueEmpty",
	"folio":        "Folio",
}

func cmpSettingsFromEnv(t *testing.T) cmpSettings {
	t.Helper()
	quick := os.Getenv("FOLIO_BCMP_QUICK") == "1"
	pick := func(full, q int) int {
		if quick {
			return q
		}
		return full
	}
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
	list := func(name string, def, allowed []string) []string {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		var out []string
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(allowed, f) {
				t.Fatalf("%s=%q: %q is not one of %s", name, v, f, strings.Join(allowed, ", "))
			}
			out = append(out, f)
		}
		return out
	}
	var rowNames []string
	for _, w := range cmpWorkloads {
		rowNames = append(rowNames, w.name)
	}
	s := cmpSettings{
		quick:          quick,
		seconds:        get("FOLIO_BCMP_SECONDS", pick(30, 5)),
		warmup:         get("FOLIO_BCMP_WARMUP", 20000),
		goWarmup:       get("FOLIO_BCMP_GO_WARMUP", pick(3, 1)),
		rows:           list("FOLIO_BCMP_ROWS", rowNames, rowNames),
		clusters:       list("FOLIO_BCMP_CLUSTERS", []string{"java-default", "java-tuned", "folio"}, []string{"java-default", "java-tuned", "folio"}),
		drivers:        list("FOLIO_BCMP_DRIVERS", []string{"java", "go"}, []string{"java", "go"}),
		catchupMB:      get("FOLIO_BCMP_CATCHUP_MB", pick(4096, 128)),
		catchupLedgers: get("FOLIO_BCMP_CATCHUP_LEDGERS", 8),
		catchupEntry:   get("FOLIO_BCMP_CATCHUP_ENTRY", 1024),
		tailRate:       get("FOLIO_BCMP_TAIL_RATE", 1000),
		out:            os.Getenv("FOLIO_BCMP_OUT"),
	}
	if s.warmup < 20000 {
		t.Fatalf("FOLIO_BCMP_WARMUP=%d: the Java side needs at least 20000 warm-up adds (issue 22)", s.warmup)
	}
	if s.out == "" {
		s.out = filepath.Join(os.TempDir(), "folio-bench-compare-"+time.Now().UTC().Format("20060102T150405Z")+".md")
	}
	return s
}

// cmpRow is one measured row: a workload, a driver, a cluster.
type cmpRow struct {
	workload cmpWorkload
	driver   string // "Java" or "Go"
	cluster  string // key of cmpClusterNames
	entries  int64
	bytes    int64
	failed   int64
	elapsed  time.Duration
	p50      time.Duration
	p99      time.Duration
	p999     time.Duration
	// bookieCPU is the CPU time of every bookie process of the cluster
	// over the measured span; driverCPU the driver's own.
	bookieCPU, driverCPU time.Duration
	note                 string
	err                  string
}

func (r cmpRow) entriesPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.entries) / r.elapsed.Seconds()
}

func (r cmpRow) mbPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.bytes) / 1e6 / r.elapsed.Seconds()
}

// driverCores is the driver's CPU over the measured span, in cores.
func (r cmpRow) driverCores() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return r.driverCPU.Seconds() / r.elapsed.Seconds()
}

// driverCPUMicrosPerEntry is the driver's CPU per entry, in microseconds.
func (r cmpRow) driverCPUMicrosPerEntry() float64 {
	if r.entries == 0 {
		return 0
	}
	return float64(r.driverCPU.Microseconds()) / float64(r.entries)
}

// driverBound: the driver used about a whole core, so the row may measure
// the driver rather than the bookies.
func (r cmpRow) driverBound() bool { return r.driverCores() >= 0.9 }

func (r cmpRow) bookieCPUPer10k() float64 {
	if r.entries == 0 {
		return 0
	}
	return r.bookieCPU.Seconds() / float64(r.entries) * 1e4
}

// cmpBookie is one bookie process of a cluster: its configuration stays,
// so that a restart comes back on the same directories and port.
type cmpBookie struct {
	addr, dir, confPath string
	runs                int
	proc                *javaServer
}

// cmpCluster is one cluster of three bookies on the shared ZooKeeper.
type cmpCluster struct {
	key     string
	uri     string
	java    bool
	bookies []*cmpBookie
	start   func(t *testing.T, b *cmpBookie) // starts b's process (not waiting)
}

func (c *cmpCluster) addrs() []string {
	var out []string
	for _, b := range c.bookies {
		out = append(out, b.addr)
	}
	return out
}

// cpu is the user+system CPU time of the cluster's bookie processes.
func (c *cmpCluster) cpu(t *testing.T) time.Duration {
	var sum time.Duration
	for _, b := range c.bookies {
		d, err := procCPU(b.proc.cmd.Process.Pid)
		if err != nil {
			t.Errorf("bookie %s: %v", b.addr, err)
		}
		sum += d
	}
	return sum
}

// startAll starts every bookie and waits until each listens and is
// registered writable.
func (c *cmpCluster) startAll(t *testing.T) {
	t.Helper()
	for _, b := range c.bookies {
		c.start(t, b)
	}
	for _, b := range c.bookies {
		b.waitListening(t)
	}
	waitRegistered(t, c.uri, c.addrs())
}

// waitListening waits until the bookie accepts connections; it fails the
// test if the process exits first, or after 90 s.
func (b *cmpBookie) waitListening(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if !b.proc.running() {
			t.Fatalf("bookie %s exited: %v\n%s", b.addr, b.proc.err, tailFile(b.logPath(), 60))
		}
		if conn, err := net.DialTimeout("tcp", b.addr, time.Second); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bookie %s not listening within 90 s\n%s", b.addr, tailFile(b.logPath(), 60))
		}
		time.Sleep(200 * time.Millisecond) // polling a port: there is nothing to wait on
	}
}

// minRowFreeBytes is the free space a write row needs on the bookies'
// disk to start: a 20 s row of 64 KiB entries writes about 12 GiB
// (payload × Qw 2 × journal and entry log) on the faster bookies.
const minRowFreeBytes = 16 << 30

// destroy stops the cluster's bookies and removes their data (the logs
// stay until the test ends). Each row runs on a cluster of its own: data
// left by one row (tens of GiB for the 64 KiB rows, with Java's five 2 GiB
// journal backups per bookie) must neither fill the disk under the next
// nor leave it garbage collection or compaction to do while it is
// measured.
func (c *cmpCluster) destroy(t *testing.T) {
	t.Helper()
	for _, b := range c.bookies {
		b.proc.terminate()
		for _, sub := range []string{"journal", "ledgers"} {
			if err := os.RemoveAll(filepath.Join(b.dir, sub)); err != nil {
				t.Errorf("remove %s: %v", sub, err)
			}
		}
	}
}

// restart stops every bookie gracefully and starts them again.
func (c *cmpCluster) restart(t *testing.T) {
	t.Helper()
	for _, b := range c.bookies {
		b.proc.terminate()
	}
	c.startAll(t)
}

func (b *cmpBookie) logPath() string {
	return filepath.Join(b.dir, fmt.Sprintf("bookie.%d.log", b.runs))
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// procCPU is utime+stime of a process from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(3) ... utime(14) stime(15), so f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startBenchProcess starts argv with its output in logPath, until the test
// ends; it dies with the test binary (Pdeathsig).
func startBenchProcess(t *testing.T, argv []string, logPath string) *javaServer {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	p := &javaServer{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(p.terminate)
	return p
}

// newCmpCluster prepares (and starts) the three bookies of cluster key on
// the ZooKeeper srv, under chroot /bcmp-<tag>. Both implementations get
// their journal and ledger directories in one temporary directory (one
// disk) and the same write and read-ahead cache sizes.
func newCmpCluster(t *testing.T, key, tag, classpath string, srv *zktest.Server, raw *gozk.Conn) *cmpCluster {
	t.Helper()
	chroot := "/bcmp-" + tag
	c := &cmpCluster{key: key, uri: zkURI(srv, "hierarchical", chroot+"/ledgers"), java: key != "folio"}
	common := map[string]string{
		"advertisedAddress":                 "127.0.0.1",
		"allowLoopback":                     "true",
		"metadataServiceUri":                c.uri,
		"httpServerEnabled":                 "false",
		"zkTimeout":                         "10000",
		"dbStorage_writeCacheMaxSizeMb":     "64",
		"dbStorage_readAheadCacheMaxSizeMb": "16",
		// Both implementations turn read-only at 95 % of the volume by
		// default; a shared benchmark machine's disk may be fuller than
		// that before the run starts. The same thresholds for both.
		"diskUsageThreshold":     "0.999",
		"diskUsageWarnThreshold": "0.998",
	}
	if c.java {
		// Java's initnewcluster creates the ledgers root but not its parents.
		if _, err := raw.Create(chroot, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", chroot, err)
		}
		runJavaShell(t, classpath, c.uri, "initnewcluster")
		common["ledgerStorageClass"] = "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"
		if key == "java-tuned" {
			common["journalFlushWhenQueueEmpty"] = "true"
		}
		c.start = func(t *testing.T, b *cmpBookie) {
			b.runs++
			b.proc = startJavaServer(t, classpath, "org.apache.bookkeeper.server.Main", b.confPath, b.logPath(), benchJVM)
		}
	} else {
		if out, err := folioShellRaw(t, c.uri, "initnewcluster"); err != nil {
			t.Fatalf("folio shell initnewcluster: %v\n%s", err, out)
		}
		common["listenHost"] = "127.0.0.1"
		bin := testcluster.Binary(t)
		c.start = func(t *testing.T, b *cmpBookie) {
			b.runs++
			b.proc = startBenchProcess(t, []string{bin, "bookie", "--conf", b.confPath}, b.logPath())
		}
	}
	for range 3 {
		dir := t.TempDir()
		port := freePort(t)
		conf := map[string]string{
			"bookiePort":         fmt.Sprint(port),
			"journalDirectories": filepath.Join(dir, "journal"),
			"ledgerDirectories":  filepath.Join(dir, "ledgers"),
		}
		for k, v := range common {
			conf[k] = v
		}
		b := &cmpBookie{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, confPath: filepath.Join(dir, "bk_server.conf")}
		writeConf(t, b.confPath, conf)
		c.bookies = append(c.bookies, b)
	}
	c.startAll(t)
	return c
}

// BenchCompare (compat/benchcompare, `make bench-compare`) runs every
// workload of cmpWorkloads with every driver against each cluster in turn
// and prints the side-by-side table.
func BenchCompare(t *testing.T) {
	requireJava(t)
	s := cmpSettingsFromEnv(t)
	classpath := zkClasspath(buildJava(t))
	dir := t.TempDir()
	load := loadAverage()
	disk, err := benchbase.MeasureFdatasync(dir, 3000, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rtt50, rtt99, err := loopbackRTT(10000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raw 1 KiB write+fdatasync: %.0f/s p50 %v p99 %v; loopback TCP round trip p50 %v p99 %v", disk.OpsPerSec, disk.P50, disk.P99, rtt50, rtt99)
	srv := zktest.Start(t)
	raw := rawZK(t, srv)
	log4j := filepath.Join(dir, "log4j2-bench.xml")
	if err := os.WriteFile(log4j, []byte(benchLog4j), 0o644); err != nil {
		t.Fatal(err)
	}
	var rows []cmpRow
	cacheState := map[string]string{}
	for _, key := range s.clusters {
		t.Run(key, func(t *testing.T) {
			for _, w := range cmpWorkloads {
				if !slices.Contains(s.rows, w.name) {
					continue
				}
				switch w.kind {
				case "read":
					c := newCmpCluster(t, key, key+"-"+w.name, classpath, srv, raw)
					rs, state := runCatchup(t, c, w, s, classpath, log4j)
					rows = append(rows, rs...)
					cacheState[key] = state
					c.destroy(t)
				default:
					for _, d := range s.drivers {
						r := cmpRow{workload: w, cluster: key, driver: "Go"}
						if d == "java" {
							r.driver = "Java"
						}
						c := newCmpCluster(t, key, key+"-"+w.name+"-"+d, classpath, srv, raw)
						if free := freeBytes(c.bookies[0].dir); free < minRowFreeBytes {
							r.err = fmt.Sprintf("not run: %d MiB free on the bookies' disk, fewer than %d MiB", free>>20, minRowFreeBytes>>20)
						} else if d == "java" {
							runJavaRow(t, c, w, s, classpath, log4j, &r)
						} else {
							runGoRow(t, c, w, s, &r)
						}
						c.destroy(t)
						logRow(t, r)
						rows = append(rows, r)
					}
				}
			}
		})
	}
	report := cmpReport(t, s, rows, disk, rtt50, rtt99, load, cacheState)
	fmt.Println(report)
	if err := os.WriteFile(s.out, []byte(report), 0o644); err != nil {
		t.Errorf("write %s: %v", s.out, err)
	} else {
		fmt.Printf("side-by-side table written to %s\n", s.out)
	}
}

func logRow(t *testing.T, r cmpRow) {
	t.Helper()
	if r.err != "" {
		t.Errorf("%s / %s driver / %s: %s", r.workload.name, r.driver, r.cluster, r.err)
		return
	}
	t.Logf("%s / %s driver / %s: %.0f entries/s, %.1f MB/s, p50 %v p99 %v p99.9 %v, bookie CPU %.3f s/10k, driver %.2f cores%s",
		r.workload.name, r.driver, r.cluster, r.entriesPerSec(), r.mbPerSec(), r.p50, r.p99, r.p999,
		r.bookieCPUPer10k(), r.driverCores(), map[bool]string{true: " (driver-bound)", false: ""}[r.driverBound()])
}

// javaResult is BenchDriver's final JSON line.
type javaResult struct {
	Entries    int64  `json:"entries"`
	Bytes      int64  `json:"bytes"`
	Failed     int64  `json:"failed"`
	ElapsedNs  int64  `json:"elapsed_ns"`
	CPUNs      int64  `json:"cpu_ns"`
	P50us      int64  `json:"p50_us"`
	P99us      int64  `json:"p99_us"`
	P999us     int64  `json:"p999_us"`
	FirstError string `json:"first_error"`
}

// runBenchDriver runs BenchDriver with args, snapshots the bookies' CPU
// when it starts measuring and when it reports, and fills r.
func runBenchDriver(t *testing.T, c *cmpCluster, classpath, log4j string, timeout time.Duration, r *cmpRow, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	jvm := append(slices.Clone(benchJVM), "-Dlog4j2.configurationFile="+log4j, "-cp", classpath, "org.foliodb.compat.BenchDriver")
	cmd := exec.CommandContext(ctx, "java", append(jvm, args...)...)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	stderrPath := filepath.Join(cmd.Dir, "driver.stderr")
	errf, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var cpu0, cpu1 time.Duration
	var res *javaResult
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		switch {
		case line == "MEASURE start":
			cpu0 = c.cpu(t)
		case strings.HasPrefix(line, "{"):
			cpu1 = c.cpu(t)
			var jr javaResult
			if err := json.Unmarshal([]byte(line), &jr); err != nil {
				r.err = fmt.Sprintf("BenchDriver result %q: %v", line, err)
			} else {
				res = &jr
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if res == nil {
		if r.err == "" {
			r.err = fmt.Sprintf("BenchDriver %v: no result (%v); stdout: %s; stderr tail:\n%s", args, werr, tail(strings.Join(lines, "\n"), 10), tailFile(stderrPath, 20))
		}
		return
	}
	r.entries, r.bytes, r.failed = res.Entries, res.Bytes, res.Failed
	r.elapsed = time.Duration(res.ElapsedNs)
	r.driverCPU = time.Duration(res.CPUNs)
	r.p50, r.p99, r.p999 = time.Duration(res.P50us)*time.Microsecond, time.Duration(res.P99us)*time.Microsecond, time.Duration(res.P999us)*time.Microsecond
	r.bookieCPU = cpu1 - cpu0
	if res.Failed > 0 {
		r.err = fmt.Sprintf("%d failed: %s", res.Failed, res.FirstError)
	}
}

func runJavaRow(t *testing.T, c *cmpCluster, w cmpWorkload, s cmpSettings, classpath, log4j string, r *cmpRow) {
	t.Helper()
	timeout := time.Duration(s.seconds)*time.Second + 5*time.Minute
	common := []string{"--entry-size", fmt.Sprint(w.size), "--seconds", fmt.Sprint(s.seconds), "--warmup", fmt.Sprint(s.warmup)}
	switch w.kind {
	case "bookie":
		r.note = "BookieClientImpl"
		runBenchDriver(t, c, classpath, log4j, timeout, r, append([]string{"bookie", "--bookie", c.bookies[0].addr,
			"--outstanding", fmt.Sprint(w.outstanding)}, common...)...)
	case "write":
		r.note = "BookKeeper client"
		runBenchDriver(t, c, classpath, log4j, timeout, r, append([]string{"client", "--uri", c.uri,
			"--ensemble", fmt.Sprint(w.e), "--write-quorum", fmt.Sprint(w.w), "--ack-quorum", fmt.Sprint(w.a),
			"--outstanding", fmt.Sprint(w.outstanding)}, common...)...)
	case "tail":
		r.note = fmt.Sprintf("lag at %d adds/s", s.tailRate)
		runBenchDriver(t, c, classpath, log4j, timeout, r, append([]string{"tail", "--uri", c.uri,
			"--ensemble", fmt.Sprint(w.e), "--write-quorum", fmt.Sprint(w.w), "--ack-quorum", fmt.Sprint(w.a),
			"--rate", fmt.Sprint(s.tailRate)}, common...)...)
	}
}

// goClient is a Folio client on the cluster with room for outstanding adds.
func goClient(t *testing.T, c *cmpCluster, outstanding int) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fc, err := client.New(ctx, client.Config{MetadataServiceURI: c.uri,
		MaxOutstandingAdds: max(client.DefaultMaxOutstandingAdds, 2*outstanding)})
	if err != nil {
		t.Fatalf("folio client on %s: %v", c.uri, err)
	}
	return fc
}

var cmpPassword = []byte("folio-bench")

func runGoRow(t *testing.T, c *cmpCluster, w cmpWorkload, s cmpSettings, r *cmpRow) {
	t.Helper()
	fc := goClient(t, c, w.outstanding)
	defer fc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.seconds+s.goWarmup)*time.Second+5*time.Minute)
	defer cancel()
	o := bench.WriteOptions{Ledgers: 1, Ledger: client.LedgerOptions{EnsembleSize: w.e, WriteQuorumSize: w.w,
		AckQuorumSize: w.a, DigestType: client.DigestCRC32C, Password: cmpPassword},
		EntrySize: w.size, MaxOutstanding: w.outstanding, Duration: time.Duration(s.goWarmup) * time.Second}
	var ledgers []int64
	defer func() {
		for _, id := range ledgers {
			_ = fc.DeleteLedger(ctx, id)
		}
	}()
	// Warm-up at the row's own settings, not measured.
	warm, err := bench.Write(ctx, fc, o)
	ledgers = append(ledgers, warm.Ledgers...)
	if err != nil || warm.Failed > 0 {
		r.err = fmt.Sprintf("warm-up: %v (failed %d: %v)", err, warm.Failed, warm.FirstError)
		return
	}
	o.Duration = time.Duration(s.seconds) * time.Second
	switch w.kind {
	case "bookie":
		r.note = "client, E1 Qw1 Qa1"
	case "write":
		r.note = "client"
	}
	cpu0, self0 := c.cpu(t), selfCPU()
	var res bench.Result
	if w.kind == "tail" {
		r.note = fmt.Sprintf("lag at %d adds/s", s.tailRate)
		o.Rate = float64(s.tailRate)
		var tr bench.TailResult
		tr, err = bench.Tail(ctx, fc, o)
		res = tr.Tail
		res.Failed += tr.Write.Failed
		ledgers = append(ledgers, tr.Write.Ledgers...)
	} else {
		res, err = bench.Write(ctx, fc, o)
		ledgers = append(ledgers, res.Ledgers...)
	}
	r.bookieCPU, r.driverCPU = c.cpu(t)-cpu0, selfCPU()-self0
	fillGoRow(r, res)
	if err != nil {
		r.err = err.Error()
	} else if res.Failed > 0 {
		r.err = fmt.Sprintf("%d failed: %v", res.Failed, res.FirstError)
	}
}

func fillGoRow(r *cmpRow, res bench.Result) {
	r.entries, r.bytes, r.failed, r.elapsed = res.Entries, res.Bytes, res.Failed, res.Elapsed
	r.p50, r.p99, r.p999 = res.Latency.P50, res.Latency.P99, res.Latency.P999
}

// runCatchup is W7: write s.catchupMB MiB over s.catchupLedgers ledgers
// (Folio's client), then for each driver restart the bookies, drop the
// page cache if the machine lets this process, and read every ledger from
// entry 0. It returns the rows and "cold" (page cache dropped) or "warm
// (<why>)".
func runCatchup(t *testing.T, c *cmpCluster, w cmpWorkload, s cmpSettings, classpath, log4j string) ([]cmpRow, string) {
	t.Helper()
	// Each entry is stored twice (Qw2), in a journal and a ledger
	// directory each, on this one disk.
	if need := 4 * int64(s.catchupMB) << 20; freeBytes(c.bookies[0].dir) < need {
		t.Errorf("catch-up on %s: %d MiB needs about %d MiB free on the bookies' disk, which has %d MiB: set FOLIO_BCMP_CATCHUP_MB lower",
			c.key, s.catchupMB, need>>20, freeBytes(c.bookies[0].dir)>>20)
		return nil, "not run"
	}
	fc := goClient(t, c, 64*s.catchupLedgers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	start := time.Now()
	ids, err := fillLedgers(ctx, fc, w, s.catchupLedgers, int64(s.catchupMB)<<20/int64(s.catchupEntry)/int64(s.catchupLedgers), s.catchupEntry)
	// A ledger each driver reads whole, unmeasured, before the measured
	// read: the JIT of the Java driver and bookies compiles the read path.
	var warmID []int64
	if err == nil {
		warmID, err = fillLedgers(ctx, fc, w, 1, int64(s.warmup), s.catchupEntry)
	}
	fc.Close()
	if err != nil {
		t.Errorf("catch-up fill on %s: %v", c.key, err)
		return nil, "not run"
	}
	t.Logf("catch-up: wrote %d MiB over %d ledgers of %d-byte entries in %v", s.catchupMB, len(ids), s.catchupEntry, time.Since(start).Round(time.Millisecond))
	var idList []string
	for _, id := range ids {
		idList = append(idList, fmt.Sprint(id))
	}
	state := "cold"
	var rows []cmpRow
	for _, d := range s.drivers {
		c.restart(t)
		if why := dropCaches(); why != "" {
			state = "warm (" + why + ")"
		}
		r := cmpRow{workload: w, cluster: c.key, note: state}
		if d == "java" {
			r.driver = "Java"
			r.note = "BookKeeper client, " + state
			runBenchDriver(t, c, classpath, log4j, time.Hour, &r, "read", "--uri", c.uri, "--ledgers", strings.Join(idList, ","), "--batch", "100",
				"--warmup-ledger", fmt.Sprint(warmID[0]))
		} else {
			r.driver = "Go"
			r.note = "client, " + state
			rc := goClient(t, c, 1)
			if warm, err := bench.Read(ctx, rc, bench.ReadOptions{Ledgers: warmID, Password: cmpPassword, Batch: 100}); err != nil || warm.Failed > 0 {
				t.Errorf("catch-up warm-up read on %s: %v (failed %d: %v)", c.key, err, warm.Failed, warm.FirstError)
			}
			cpu0, self0 := c.cpu(t), selfCPU()
			res, err := bench.Read(ctx, rc, bench.ReadOptions{Ledgers: ids, Password: cmpPassword, Batch: 100})
			r.bookieCPU, r.driverCPU = c.cpu(t)-cpu0, selfCPU()-self0
			rc.Close()
			fillGoRow(&r, res)
			if err != nil {
				r.err = err.Error()
			} else if res.Failed > 0 {
				r.err = fmt.Sprintf("%d failed: %v", res.Failed, res.FirstError)
			}
		}
		logRow(t, r)
		rows = append(rows, r)
	}
	return rows, state
}

// fillLedgers writes perLedger size-byte entries to each of n new ledgers
// (64 adds in flight each, the ledgers at once) and closes them.
func fillLedgers(ctx context.Context, fc *client.Client, w cmpWorkload, n int, perLedger int64, size int) ([]int64, error) {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	ids := make([]int64, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			wh, err := fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: w.e, WriteQuorumSize: w.w, AckQuorumSize: w.a,
				DigestType: client.DigestCRC32C, Password: cmpPassword})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = wh.ID()
			window := make(chan *client.AppendFuture, 64)
			done := make(chan error, 1)
			go func() {
				var first error
				for f := range window {
					if _, err := f.Wait(ctx); err != nil && first == nil {
						first = err
					}
				}
				done <- first
			}()
			for range perLedger {
				window <- wh.AppendAsync(payload)
			}
			close(window)
			if err := <-done; err != nil {
				errs <- err
				return
			}
			errs <- wh.Close(ctx)
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return ids, first
}

// freeBytes is the space available to this process on dir's volume (0 if
// unknown).
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}

// dropCaches syncs and drops the page cache; it returns "" when done, or
// why not.
func dropCaches() string {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil {
		return "page cache not dropped: " + err.Error()
	}
	return ""
}

// loopbackRTT measures rounds 1-byte TCP round trips over 127.0.0.1
// (after 1000 unmeasured ones): p50 and p99.
func loopbackRTT(rounds int) (p50, p99 time.Duration, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, conn)
	}()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	h := benchbase.NewLatencyHist()
	buf := []byte{1}
	for i := range rounds + 1000 {
		t0 := time.Now()
		if _, err := conn.Write(buf); err != nil {
			return 0, 0, err
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0, 0, err
		}
		if i >= 1000 {
			_ = h.RecordValue(max(time.Since(t0).Microseconds(), 1))
		}
	}
	return time.Duration(h.ValueAtQuantile(50)) * time.Microsecond, time.Duration(h.ValueAtQuantile(99)) * time.Microsecond, nil
}

// cmpReport renders the run as Markdown: the machine's baseline, every
// row, and the side-by-side ratios Folio / Java (the better Java
// configuration of each row: higher entries/s, and separately lower p99).
func cmpReport(t *testing.T, s cmpSettings, rows []cmpRow, disk benchbase.Disk, rtt50, rtt99 time.Duration, load string, cache map[string]string) string {
	var b strings.Builder
	mode := "full"
	if s.quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "### Side-by-side run, %s (%s mode)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), mode)
	fmt.Fprintf(&b, "Apache BookKeeper %s (DbLedgerStorage, journal fsync on) vs Folio, on one ZooKeeper; %d CPUs, load average before the run %s; "+
		"%d s per write row after warm-up (Java driver: %d adds; Go driver: %d s); 64 MiB write cache, 16 MiB read-ahead cache; journal and ledgers on one disk.\n\n",
		bookkeeperVersion(t), runtime.NumCPU(), load, s.seconds, s.warmup, s.goWarmup)
	fmt.Fprintf(&b, "Machine, same run: raw 1 KiB write+fdatasync %.0f/s, p50 %v, p99 %v; loopback TCP round trip p50 %v, p99 %v.\n\n",
		disk.OpsPerSec, disk.P50, disk.P99, rtt50, rtt99)
	if slices.Contains(s.rows, "catchup") {
		fmt.Fprintf(&b, "Catch-up read: %d MiB over %d ledgers of %d-byte entries, bookies restarted before each driver's read (which first reads a warm-up ledger whole, unmeasured); page cache:", s.catchupMB, s.catchupLedgers, s.catchupEntry)
		for _, k := range s.clusters {
			fmt.Fprintf(&b, " %s %s;", k, cache[k])
		}
		b.WriteString("\n\n")
	}
	b.WriteString("Bookie CPU is the sum over the cluster's three bookie processes (utime+stime, /proc/<pid>/stat) over the measured span, per 10,000 entries; " +
		"driver CPU is the driver process's own, in cores; **driver-bound** marks a driver at ≥ 0.9 core (the row may measure the driver). " +
		"For the tail row the latency is the lag from an add's completion to its delivery by the reader.\n\n")
	b.WriteString("| workload | driver | bookies | entries/s | MB/s | p50 | p99 | p99.9 | bookie CPU s/10k | driver CPU | note |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.err != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | failed: %s |||||||\n", r.workload.name, r.driver, cmpClusterNames[r.cluster], strings.ReplaceAll(r.err, "|", "/"))
			continue
		}
		note := r.note
		if r.driverBound() {
			note += ", **driver-bound**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.1f | %s | %s | %s | %.3f | %.2f | %s |\n", r.workload.name, r.driver, cmpClusterNames[r.cluster],
			r.entriesPerSec(), r.mbPerSec(), fmtDur(r.p50), fmtDur(r.p99), fmtDur(r.p999), r.bookieCPUPer10k(), r.driverCores(), note)
	}
	b.WriteString("\nSide by side (Folio / Java: entries/s over the better Java configuration's; p99 over the better Java p99, lower is better; * = a driver-bound row in the pair):\n\n")
	b.WriteString("| workload | driver | Java default entries/s, p50 / p99 | Java tuned entries/s, p50 / p99 | Folio entries/s, p50 / p99 | Folio/Java entries/s | Folio/Java p99 |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	find := func(w, d, c string) *cmpRow {
		for i := range rows {
			if rows[i].workload.name == w && rows[i].driver == d && rows[i].cluster == c && rows[i].err == "" {
				return &rows[i]
			}
		}
		return nil
	}
	cell := func(r *cmpRow) string {
		if r == nil {
			return "—"
		}
		s := fmt.Sprintf("%.0f, %s / %s", r.entriesPerSec(), fmtDur(r.p50), fmtDur(r.p99))
		if r.driverBound() {
			s += " *"
		}
		return s
	}
	for _, w := range cmpWorkloads {
		for _, d := range []string{"Java", "Go"} {
			jd, jt, f := find(w.name, d, "java-default"), find(w.name, d, "java-tuned"), find(w.name, d, "folio")
			if jd == nil && jt == nil && f == nil {
				continue
			}
			ratio, p99ratio := "—", "—"
			var bestRate float64
			var bestP99 time.Duration
			for _, j := range []*cmpRow{jd, jt} {
				if j == nil {
					continue
				}
				bestRate = max(bestRate, j.entriesPerSec())
				if bestP99 == 0 || (j.p99 > 0 && j.p99 < bestP99) {
					bestP99 = j.p99
				}
			}
			if f != nil && bestRate > 0 {
				ratio = fmt.Sprintf("%.2f×", f.entriesPerSec()/bestRate)
			}
			if f != nil && bestP99 > 0 {
				p99ratio = fmt.Sprintf("%.2f", f.p99.Seconds()/bestP99.Seconds())
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", w.name, d, cell(jd), cell(jt), cell(f), ratio, p99ratio)
		}
	}
	b.WriteString(cmpTargets(rows, disk, rtt50))
	b.WriteString("\nWorkloads:\n\n")
	for _, w := range cmpWorkloads {
		if slices.Contains(s.rows, w.name) {
			fmt.Fprintf(&b, "- `%s`: %s\n", w.name, w.what)
		}
	}
	return b.String()
}

// cmpTargets judges the run against issue #22's targets (docs/performance.md
// keeps them): the physical ones from the machine's limits measured in the
// same run, the ratios against the better Java configuration of each row,
// the Go client against Java's on the same Folio bookies. A target whose
// rows are missing (not run, failed) is reported as such, never as met.
func cmpTargets(rows []cmpRow, disk benchbase.Disk, rtt50 time.Duration) string {
	find := func(w, d, c string) *cmpRow {
		for i := range rows {
			if rows[i].workload.name == w && rows[i].driver == d && rows[i].cluster == c && rows[i].err == "" {
				return &rows[i]
			}
		}
		return nil
	}
	bestJava := func(w, d string) (rate float64, p99 time.Duration, ok bool) {
		for _, c := range []string{"java-default", "java-tuned"} {
			if j := find(w, d, c); j != nil {
				rate = max(rate, j.entriesPerSec())
				if p99 == 0 || (j.p99 > 0 && j.p99 < p99) {
					p99 = j.p99
				}
				ok = true
			}
		}
		return rate, p99, ok
	}
	verdict := func(met bool) string {
		if met {
			return "met"
		}
		return "**not met**"
	}
	var b strings.Builder
	b.WriteString("\nTargets (issue #22 §2; figures from this run):\n\n")
	b.WriteString("| target | driver | measured | verdict |\n|---|---|---|---|\n")
	line := func(target, driver, measured, v string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", target, driver, measured, v)
	}
	for _, d := range []string{"Java", "Go"} {
		if f := find("one-o1", d, "folio"); f != nil {
			limit := disk.P50 + rtt50 + 40*time.Microsecond
			line("one bookie, 1 outstanding: p50 ≤ fdatasync p50 + RTT p50 + 40 µs", d,
				fmt.Sprintf("%s vs %s", fmtDur(f.p50), fmtDur(limit)), verdict(f.p50 <= limit))
			line("one bookie, 1 outstanding: p99 ≤ 3 × fdatasync p99", d,
				fmt.Sprintf("%s vs %s", fmtDur(f.p99), fmtDur(3*disk.P99)), verdict(f.p99 <= 3*disk.P99))
		} else {
			line("one bookie, 1 outstanding (physical)", d, "no Folio row", "not measured")
		}
	}
	for _, w := range cmpWorkloads {
		for _, d := range []string{"Java", "Go"} {
			f := find(w.name, d, "folio")
			rate, p99, ok := bestJava(w.name, d)
			if f == nil || !ok {
				continue
			}
			want := 3.0
			if w.name == "catchup" {
				want = 2
			}
			bound := ""
			if f.driverBound() {
				bound = " (driver-bound)"
			}
			if w.name != "tail" && w.name != "one-o1" && w.name != "e3w3a2-o1" {
				line(fmt.Sprintf("%s: entries/s ≥ %g × better Java", w.name, want), d,
					fmt.Sprintf("%.2f×%s", f.entriesPerSec()/rate, bound), verdict(f.entriesPerSec() >= want*rate))
			}
			if w.name != "tail" && p99 > 0 {
				line(fmt.Sprintf("%s: p99 ≤ ¼ of better Java", w.name), d,
					fmt.Sprintf("%.2f of Java's%s", f.p99.Seconds()/p99.Seconds(), bound), verdict(4*f.p99 <= p99))
			}
		}
	}
	for _, d := range []string{"Java", "Go"} {
		if f := find("tail", d, "folio"); f != nil {
			line("tailing lag p99 ≤ 2 ms at the tail rate", d, fmtDur(f.p99), verdict(f.p99 <= 2*time.Millisecond))
		}
	}
	for _, w := range cmpWorkloads {
		if w.kind != "write" {
			continue
		}
		g, j := find(w.name, "Go", "folio"), find(w.name, "Java", "folio")
		if g == nil || j == nil || j.entriesPerSec() == 0 {
			continue
		}
		line(fmt.Sprintf("%s: Go client ≥ 1.5 × Java client on Folio bookies", w.name), "both",
			fmt.Sprintf("%.2f× (Go driver %.1f CPU-µs/entry, test process)", g.entriesPerSec()/j.entriesPerSec(), g.driverCPUMicrosPerEntry()),
			verdict(g.entriesPerSec() >= 1.5*j.entriesPerSec()))
	}
	return b.String()
}

// fmtDur prints a latency in µs below 1 ms, else in ms (three
// significant digits up to 100 ms).
func fmtDur(d time.Duration) string {
	ms := float64(d.Microseconds()) / 1000
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", ms)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
