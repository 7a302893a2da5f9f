package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// AutoRecovery on ZooKeeper with both implementations: Java's
// AutoRecoveryMain and `folio autorecovery` campaign in one election
// (underreplication/auditorelection), and the workers of both take
// under-replicated ledgers (underreplication/ledgers, locks).

// recoveryTimeout bounds each wait for re-replication.
const recoveryTimeout = 3 * time.Minute

// autoRecoveryLog4j prints what the replication package logs at INFO (the
// election, the audits, "Ledger replicated successfully") and the rest at
// WARN, to the daemon's log file.
const autoRecoveryLog4j = `<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="%d{HH:mm:ss.SSS} %-5level %c{1} - %msg%n"/></Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.bookkeeper.replication" level="info" additivity="false"><AppenderRef ref="err"/></Logger>
    <Root level="warn"><AppenderRef ref="err"/></Root>
  </Loggers>
</Configuration>
`

// zkRecoveryCluster is a cluster on ZooKeeper with Java and Folio bookies
// and the means to watch its AutoRecovery.
type zkRecoveryCluster struct {
	classpath string
	uri       string
	root      string
	raw       *gozk.Conn
	md        metadata.Driver
	ar        metadata.AutoRecoveryDriver
	folio     *testcluster.Cluster
	java      []javaBookie
	log4j     string // autoRecoveryLog4j's file
}

// ledgerSet is ledgers of known content: ledger id -> seed of payload.
type ledgerSet map[int64]int64

// writeBoth writes per ledgers with each client (every digest type in
// turn; E=3, Qw=2, Qa=2, n entries), closed, and returns them with the
// Java-written ones first.
func (c *zkRecoveryCluster) writeBoth(t *testing.T, seed int64, per int, n int64) (all ledgerSet, javaIDs, folioIDs []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all = ledgerSet{}
	var names []string
	for i := range per {
		names = append(names, digests[i%len(digests)].java)
	}
	for _, r := range runDriver(t, c.classpath, c.uri, "v3", "write", "--digest", strings.Join(names, ","), "--password", password,
		"--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed)) {
		all[r.int("ledgerId")] = seed
		javaIDs = append(javaIDs, r.int("ledgerId"))
	}
	fc := newFolioClient(t, c.uri, "v3")
	e := interopEnv{fc: fc, where: "Java and Folio bookies on ZooKeeper"}
	for i := range per {
		id := folioWrite(ctx, t, e, digests[i%len(digests)].folio, seed+1, n)
		all[id] = seed + 1
		folioIDs = append(folioIDs, id)
	}
	return all, javaIDs, folioIDs
}

// holding returns the ledgers of ids whose ensembles include bookie.
func (c *zkRecoveryCluster) holding(ctx context.Context, t *testing.T, bookie string, ids []int64) []int64 {
	t.Helper()
	var out []int64
	for _, id := range ids {
		md, _, err := c.md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatalf("read ledger %d: %v", id, err)
		}
		for _, s := range md.Ensembles {
			if slices.Contains(s.Ensemble, metadata.BookieID(bookie)) {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// pickVictim returns the bookie of candidates that holds the most ledgers
// written by each client (at least one of each; the test fails if none
// does), with the ledgers it holds.
func (c *zkRecoveryCluster) pickVictim(t *testing.T, candidates []string, javaIDs, folioIDs []int64) (string, []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	best, bestScore := "", 0
	var bestHeld []int64
	for _, b := range candidates {
		j, f := c.holding(ctx, t, b, javaIDs), c.holding(ctx, t, b, folioIDs)
		if len(j) == 0 || len(f) == 0 {
			continue
		}
		if score := min(len(j), len(f)); score > bestScore {
			best, bestScore, bestHeld = b, score, append(j, f...)
		}
	}
	if best == "" {
		t.Fatalf("no bookie of %v holds ledgers written by both clients (Java %v, Folio %v)", candidates, javaIDs, folioIDs)
	}
	return best, bestHeld
}

// votes returns the auditor election's votes, (znode, voter id), in
// sequence order: the first voter is the auditor.
func (c *zkRecoveryCluster) votes() ([][2]string, error) {
	dir := c.root + "/underreplication/auditorelection"
	kids, _, err := c.raw.Children(dir)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", dir, err)
	}
	seq := func(name string) int64 {
		n, _ := strconv.ParseInt(name[strings.LastIndex(name, "_")+1:], 10, 64)
		return n
	}
	slices.SortFunc(kids, func(a, b string) int { return int(seq(a) - seq(b)) })
	var out [][2]string
	for _, k := range kids {
		v, _, err := c.raw.Get(dir + "/" + k)
		if errors.Is(err, gozk.ErrNoNode) {
			continue // its session ended between the two reads
		}
		if err != nil {
			return nil, err
		}
		m := auditorVote.FindSubmatch(v)
		if m == nil {
			return nil, fmt.Errorf("vote %s/%s: %q is not an AuditorVoteFormat", dir, k, v)
		}
		out = append(out, [2]string{k, string(m[1])})
	}
	return out, nil
}

var auditorVote = regexp.MustCompile(`^bookieId: "([^"]*)"\n?$`)

// waitLeader waits until the election holds exactly the voters want (in
// any order) with leader's vote first, and both shells' whoisauditor name
// leader: one auditor, seen the same from every side.
func (c *zkRecoveryCluster) waitLeader(t *testing.T, leader string, want ...string) {
	t.Helper()
	var last [][2]string
	var lastErr error
	waitFor(t, 2*time.Minute, fmt.Sprintf("%s to lead the election of %v", leader, want), func() bool {
		last, lastErr = c.votes()
		if lastErr != nil || len(last) != len(want) || last[0][1] != leader {
			return false
		}
		var ids []string
		for _, v := range last {
			ids = append(ids, v[1])
		}
		return slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want)))
	}, func() string { return fmt.Sprintf("votes %v (%v)", last, lastErr) })

	outs := runJavaShell(t, c.classpath, c.uri, "whoisauditor")
	var javaSays string
	for _, line := range strings.Split(outs[0], "\n") {
		if m := shellAuditor.FindStringSubmatch(line); m != nil {
			javaSays = m[1]
		}
	}
	var folioSays struct {
		Auditor string `json:"auditor"`
	}
	folioShell(t, c.uri, &folioSays, "whoisauditor")
	if javaSays != leader || folioSays.Auditor != leader {
		t.Fatalf("whoisauditor: Java says %q, Folio says %q; the election's first vote is %s (votes %v)", javaSays, folioSays.Auditor, leader, last)
	}
	t.Logf("auditor %s: first of the votes %v; Java's and Folio's whoisauditor agree", leader, last)
}

// waitRereplicated waits until no ledger of ls has victim in an ensemble
// and no under-replication record or lock is left, then checks the
// ledgers (checkLedgers).
func (c *zkRecoveryCluster) waitRereplicated(t *testing.T, victim string, ls ledgerSet, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), recoveryTimeout)
	defer cancel()
	ids := slices.Sorted(mapKeys(ls))
	var held []int64
	var recs []metadata.UnderReplicatedLedger
	var locks []string
	start := time.Now()
	waitFor(t, recoveryTimeout, "re-replication of "+victim+"'s ledgers", func() bool {
		held = c.holding(ctx, t, victim, ids)
		var err error
		recs, err = c.ar.ListUnderReplicatedLedgers(ctx, 0, 1000)
		if err != nil {
			t.Fatalf("list under-replicated ledgers: %v", err)
		}
		locks, _, err = c.raw.Children(c.root + "/underreplication/locks")
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			t.Fatalf("locks: %v", err)
		}
		return len(held) == 0 && len(recs) == 0 && len(locks) == 0
	}, func() string {
		return fmt.Sprintf("ledgers still on %s: %v; under-replicated: %v; locks: %v", victim, held, recs, locks)
	})
	t.Logf("every ledger re-replicated off %s within %v of the check starting", victim, time.Since(start).Round(time.Millisecond))
	c.checkLedgers(t, ls, n)
}

// checkLedgers checks every entry of each ledger of ls on every bookie of
// its write set (digest-verified, byte-exact) and reads every ledger
// through both clients: n entries each.
func (c *zkRecoveryCluster) checkLedgers(t *testing.T, ls ledgerSet, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := slices.Sorted(mapKeys(ls))
	for _, id := range ids {
		seed := ls[id]
		testcluster.CheckStored(ctx, t, c.md, id, []byte(password), func(e int64) []byte { return payload(seed, e) })
	}
	fc := newFolioClient(t, c.uri, "v3")
	var args []string
	for _, id := range ids {
		_, got := folioReadAll(ctx, t, fc, id, false)
		checkPayloads(t, "folio read after re-replication", id, ls[id], got, n)
		args = append(args, fmt.Sprint(id))
	}
	for _, r := range runDriver(t, c.classpath, c.uri, "v3", "read", "--ledger", strings.Join(args, ","), "--password", password) {
		checkPayloads(t, "java read after re-replication", r.int("ledgerId"), ls[r.int("ledgerId")], javaEntries(t, r), n)
	}
}

var (
	javaReplicated  = regexp.MustCompile(`Ledger replicated successfully\. ledger id is: (\d+)`)
	folioReplicated = regexp.MustCompile(`msg="re-replicated fragment" .*\bledger=(\d+) .*\bskipped=false`)
)

// logMark is the sizes of log files at a point in time, so that workers
// reads only what was logged after it.
type logMark map[string]int64

func markLogs(paths ...string) logMark {
	m := logMark{}
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			m[p] = fi.Size()
		}
	}
	return m
}

// workers reports which worker completed which ledgers since mark, from
// the daemons' logs: Java's logs "Ledger replicated successfully" when it
// clears a ledger's record (also one another worker had repaired already
// and an audit marked again meanwhile), Folio's "re-replicated fragment"
// for each fragment it copied (skipped=false).
func workers(mark logMark, javaLogs, folioLogs []string) string {
	var b strings.Builder
	scan := func(kind string, logs []string, re *regexp.Regexp) {
		for _, p := range logs {
			data, err := os.ReadFile(p)
			if err != nil {
				fmt.Fprintf(&b, " %s %s: %v;", kind, filepath.Base(p), err)
				continue
			}
			data = data[min(mark[p], int64(len(data))):]
			seen := map[string]bool{}
			var ids []string
			for _, m := range re.FindAllSubmatch(data, -1) {
				if !seen[string(m[1])] {
					seen[string(m[1])] = true
					ids = append(ids, string(m[1]))
				}
			}
			fmt.Fprintf(&b, " %s worker (%s): ledgers %v;", kind, p, ids)
		}
	}
	scan("Java", javaLogs, javaReplicated)
	scan("Folio", folioLogs, folioReplicated)
	return strings.TrimSuffix(strings.TrimSpace(b.String()), ";")
}

// ZooKeeperAutoRecovery (compat/zkrecovery): on one ZooKeeper, a cluster
// initialised by Java with two Java and two Folio bookies, ledgers written
// by both clients. Java's AutoRecoveryMain and `folio autorecovery` both
// run: exactly one leads (the first vote under auditorelection/, and both
// shells' whoisauditor). Round 1, Java's auditor leading: a Java bookie
// holding ledgers of both clients is killed, and every ledger is
// re-replicated by whichever workers (Java's and Folio's) take them: each
// entry is on each bookie of its write set, and both clients read every
// ledger byte-exact. Round 2: the leading Java daemon is killed, Folio's
// takes over (a fresh Java daemon joins as a standby auditor and worker,
// a fresh Folio bookie adds capacity), a Folio bookie is killed, and the
// same holds.
func ZooKeeperAutoRecovery(t *testing.T) {
	srv, classpath := startZooKeeper(t)
	root := "/ledgers"
	uri := zkURI(srv, "hierarchical", root)
	runJavaShell(t, classpath, uri, "initnewcluster")
	waitJ := []func() javaBookie{startJavaBookie(t, classpath, uri), startJavaBookie(t, classpath, uri)}
	fcl := startFolioBookies(t, uri, 2)
	c := &zkRecoveryCluster{classpath: classpath, uri: uri, root: root, raw: rawZK(t, srv), md: fcl.MD, folio: fcl}
	c.ar = c.md.(metadata.AutoRecoveryDriver)
	for _, w := range waitJ {
		c.java = append(c.java, w())
	}
	c.log4j = filepath.Join(t.TempDir(), "log4j2-autorecovery.xml")
	if err := os.WriteFile(c.log4j, []byte(autoRecoveryLog4j), 0o644); err != nil {
		t.Fatal(err)
	}
	var javaIDs, folioIDs []string
	for _, jb := range c.java {
		javaIDs = append(javaIDs, jb.addr)
	}
	for _, b := range fcl.Bookies {
		folioIDs = append(folioIDs, b.Addr())
	}
	waitRegistered(t, uri, append(slices.Clone(javaIDs), folioIDs...))
	var javaARs []javaAutoRecovery
	var folioARs []*testcluster.AutoRecovery
	defer func() {
		if t.Failed() {
			for _, jb := range c.java {
				t.Logf("--- Java bookie %s log (tail) ---\n%s", jb.addr, tailFile(jb.logPath, 30))
			}
			for _, a := range javaARs {
				t.Logf("--- Java AutoRecoveryMain %s log (tail) ---\n%s", a.id, tailFile(a.logPath, 60))
			}
			for _, a := range folioARs {
				t.Logf("--- folio autorecovery log %s (tail) ---\n%s", a.LogPath(), tailFile(a.LogPath(), 60))
			}
		}
	}()

	const n = 20
	ls, javaLedgers, folioLedgers := c.writeBoth(t, 501, 4, n)
	t.Logf("ledgers written by Java %v and by Folio %v", javaLedgers, folioLedgers)

	// Java's daemon first: it is elected; then Folio's campaigns.
	ja := c.startJavaAutoRecovery(t)
	javaARs = append(javaARs, ja)
	c.waitLeader(t, ja.id, ja.id)
	folioID := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	fa := fcl.StartAutoRecovery(folioID, "--workers", "2")
	folioARs = append(folioARs, fa)
	c.waitLeader(t, ja.id, ja.id, folioID)

	t.Run("JavaAuditorLeads", func(t *testing.T) {
		victim, held := c.pickVictim(t, javaIDs, javaLedgers, folioLedgers)
		t.Logf("killing Java bookie %s, which holds ledgers %v", victim, held)
		mark := markLogs(ja.logPath, fa.LogPath())
		for _, jb := range c.java {
			if jb.addr == victim {
				jb.proc.kill()
			}
		}
		c.waitRereplicated(t, victim, ls, n)
		t.Logf("ledgers per worker:%s", workers(mark, []string{ja.logPath}, []string{fa.LogPath()}))
	})
	if t.Failed() {
		return
	}

	t.Run("FolioAuditorLeads", func(t *testing.T) {
		ja.proc.kill()
		c.waitLeader(t, folioID, folioID)
		fresh := fcl.NewBookie()
		fresh.Start()
		fresh.WaitRegistered(false)
		ja2 := c.startJavaAutoRecovery(t)
		javaARs = append(javaARs, ja2)
		c.waitLeader(t, folioID, folioID, ja2.id)
		victim, held := c.pickVictim(t, folioIDs, javaLedgers, folioLedgers)
		t.Logf("killing Folio bookie %s, which holds ledgers %v", victim, held)
		mark := markLogs(ja2.logPath, fa.LogPath())
		for _, b := range fcl.Bookies {
			if b.Addr() == victim {
				b.Kill()
			}
		}
		c.waitRereplicated(t, victim, ls, n)
		t.Logf("ledgers per worker:%s", workers(mark, []string{ja2.logPath}, []string{fa.LogPath()}))
	})
}

// startJavaAutoRecovery starts Java's AutoRecoveryMain on the cluster,
// logging the replication package at INFO.
func (c *zkRecoveryCluster) startJavaAutoRecovery(t *testing.T) javaAutoRecovery {
	t.Helper()
	return startJavaAutoRecovery(t, c.classpath, c.uri, "-Dlog4j2.configurationFile="+c.log4j)
}
