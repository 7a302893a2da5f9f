package autorecovery_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/testcluster"
)

// Process-level AutoRecovery tests with `folio autorecovery` daemons as
// processes: auditor failover, a worker killed mid-copy, read-only bookies.

// waitFor polls cond every 100 ms until it holds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeClosedLedgers(ctx context.Context, t *testing.T, c *client.Client, n, entries, size int) map[int64]int64 {
	t.Helper()
	ends := map[int64]int64{}
	for range n {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(entries) {
			if _, err := w.Append(ctx, bigPayload(w.ID(), e, size)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ends[w.ID()] = int64(entries - 1)
	}
	return ends
}

// bigPayload is payload padded to at least size bytes.
func bigPayload(id, e int64, size int) []byte {
	p := payload(id, e)
	if len(p) < size {
		p = append(p, bytes.Repeat([]byte{'.'}, size-len(p))...)
	}
	return p
}

// refs counts the segments of the ledgers naming b.
func refs(ctx context.Context, t *testing.T, md metadata.Driver, ends map[int64]int64, b metadata.BookieID) int {
	t.Helper()
	n := 0
	for id := range ends {
		m, _, err := md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Ensembles {
			if slices.Contains(s.Ensemble, b) {
				n++
			}
		}
	}
	return n
}

func underReplicated(ctx context.Context, t *testing.T, md metadata.Driver) []metadata.UnderReplicatedLedger {
	t.Helper()
	ur, err := md.(metadata.AutoRecoveryDriver).ListUnderReplicatedLedgers(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ur
}

// checkIntact checks each ledger: closed at its end, segments as before
// (same count and first entries, E distinct bookies each, none of gone),
// and every entry stored, verified, on each bookie of its write set.
func checkIntact(ctx context.Context, t *testing.T, md metadata.Driver, ends map[int64]int64, firsts map[int64][]int64, size int, gone ...metadata.BookieID) {
	t.Helper()
	for id, last := range ends {
		m, _, err := md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !m.IsClosed() || m.LastEntryID != last {
			t.Fatalf("ledger %d: state %v end %d, want closed at %d", id, m.State, m.LastEntryID, last)
		}
		var fs []int64
		for _, s := range m.Ensembles {
			fs = append(fs, s.FirstEntryID)
			u := slices.Clone(s.Ensemble)
			slices.Sort(u)
			if len(slices.Compact(u)) != m.EnsembleSize || len(s.Ensemble) != m.EnsembleSize {
				t.Fatalf("ledger %d: ensemble %v is not %d distinct bookies", id, s.Ensemble, m.EnsembleSize)
			}
			for _, g := range gone {
				if slices.Contains(s.Ensemble, g) {
					t.Fatalf("ledger %d still names %s: %v", id, g, m.Ensembles)
				}
			}
		}
		if firsts != nil && !slices.Equal(fs, firsts[id]) {
			t.Fatalf("ledger %d: segments start at %v, want %v", id, fs, firsts[id])
		}
		testcluster.CheckStored(ctx, t, md, id, []byte("pw"), func(e int64) []byte { return bigPayload(id, e, size) })
	}
}

func segmentFirsts(ctx context.Context, t *testing.T, md metadata.Driver, ends map[int64]int64) map[int64][]int64 {
	t.Helper()
	out := map[int64][]int64{}
	for id := range ends {
		m, _, err := md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Ensembles {
			out[id] = append(out[id], s.FirstEntryID)
		}
	}
	return out
}

// underReplicationKeys returns the values of the keys under
// <scope>/underreplication/<node>/ in etcd (node "auditorelection": the
// auditor candidates' ids; "locks": the owners of ledger locks).
func underReplicationKeys(ctx context.Context, t *testing.T, md metadata.Driver, node string) []string {
	t.Helper()
	ed := md.(*etcd.Driver)
	resp, err := ed.Client().Get(ctx, ed.Scope()+"/underreplication/"+node+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Value))
	}
	return out
}

func auditorIs(ctx context.Context, md metadata.Driver, id string) bool {
	a, err := md.(metadata.AutoRecoveryDriver).Auditor(ctx)
	return err == nil && string(a) == id
}

// Auditor failover: the auditor's process is SIGKILLed and a bookie dies
// right after; the other daemon becomes the auditor, audits, and its
// workers re-replicate everything.
func TestAuditorProcessFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeClosedLedgers(ctx, t, c, 12, 15, 0)
	firsts := segmentFirsts(ctx, t, cl.MD, ends)

	a := cl.StartAutoRecovery("127.0.0.1:1", "--workers", "0")
	waitFor(ctx, t, "daemon 1 elected", func() bool { return auditorIs(ctx, cl.MD, "127.0.0.1:1") })
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	cl.StartAutoRecovery("127.0.0.1:2", "--workers", "2", "--metrics-address", metricsAddr)
	// Daemon 2 stands as a candidate: from then on an election that let it
	// take over from a live auditor would show.
	waitFor(ctx, t, "daemon 2 a candidate", func() bool {
		return slices.Contains(underReplicationKeys(ctx, t, cl.MD, "auditorelection"), "127.0.0.1:2")
	})
	if v := scrape(ctx, t, metricsAddr); v["folio_autorecovery_is_auditor"] != "0" {
		t.Fatalf("standby daemon: is_auditor %q", v["folio_autorecovery_is_auditor"])
	}
	if !auditorIs(ctx, cl.MD, "127.0.0.1:1") {
		t.Fatal("the auditor changed with a second candidate")
	}
	a.Kill()
	victim := cl.Bookies[2]
	victim.Kill()
	start := time.Now()
	waitFor(ctx, t, "daemon 2 elected", func() bool { return auditorIs(ctx, cl.MD, "127.0.0.1:2") })
	t.Logf("failover after %v", time.Since(start))
	waitFor(ctx, t, "re-replication", func() bool {
		return refs(ctx, t, cl.MD, ends, victim.ID) == 0 && len(underReplicated(ctx, t, cl.MD)) == 0
	})
	t.Logf("re-replicated after %v", time.Since(start))
	checkIntact(ctx, t, cl.MD, ends, firsts, 0, victim.ID)
	v := scrape(ctx, t, metricsAddr)
	for name, ok := range map[string]func(string) bool{
		"folio_autorecovery_is_auditor":                             func(s string) bool { return s == "1" },
		`auditor_AUDIT_BOOKIES_TIME_count{success="true"}`:          func(s string) bool { return s != "" && s != "0" },
		`auditor_NUM_UNDER_REPLICATED_LEDGERS_sum{success="true"}`:  func(s string) bool { return s != "" && s != "0" },
		"folio_autorecovery_ledgers_marked_total":                   func(s string) bool { return s != "" && s != "0" },
		"folio_autorecovery_fragments_replicated_total":             func(s string) bool { return s != "" && s != "0" },
		"replication_worker_NUM_ENTRIES_WRITTEN":                    func(s string) bool { return s != "" && s != "0" },
		`replication_worker_NUM_BYTES_WRITTEN_sum{success="true"}`:  func(s string) bool { return s != "" && s != "0" },
		"replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED": func(s string) bool { return s != "" && s != "0" },
		// A cached count, refreshed by the auditor's checks (not at scrape
		// time): present, as of the last audit.
		"folio_autorecovery_under_replicated_ledgers": func(s string) bool { return s != "" },
	} {
		if !ok(v[name]) {
			t.Errorf("metric %s = %q", name, v[name])
		}
	}
}

// scrape reads http://addr/metrics into name → value (unlabelled samples).
func scrape(ctx context.Context, t *testing.T, addr string) map[string]string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	for {
		resp, err = http.DefaultClient.Do(req)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			out[f[0]] = f[1]
		}
	}
	return out
}

// A replication worker's process is SIGKILLed while it copies (throttled);
// its locks go with its session, another daemon finishes, and the metadata
// has neither lost entries nor duplicated bookies or segments.
func TestWorkerKilledMidCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 1000
	ends := writeClosedLedgers(ctx, t, c, 8, 20, size)
	firsts := segmentFirsts(ctx, t, cl.MD, ends)
	victim := cl.Bookies[1]
	before := refs(ctx, t, cl.MD, ends, victim.ID)
	victim.Kill()
	victim.WaitUnregistered()

	// About 4 entries a second: one fragment takes seconds.
	slow := cl.StartAutoRecovery("127.0.0.1:1", "--workers", "1", "--rate-limit", "4000")
	start := time.Now()
	waitFor(ctx, t, "the first fragment copied", func() bool { return refs(ctx, t, cl.MD, ends, victim.ID) < before })
	// Now the worker is copying the next ledger: it holds that ledger's
	// lock (read from etcd, without taking it).
	var locks []string
	waitFor(ctx, t, "the worker holding a ledger's lock", func() bool {
		locks = underReplicationKeys(ctx, t, cl.MD, "locks")
		return len(locks) > 0
	})
	if len(locks) != 1 || locks[0] != "127.0.0.1:1" {
		t.Fatalf("ledger locks held by %v while the single worker of 127.0.0.1:1 copies, want one", locks)
	}
	if n := refs(ctx, t, cl.MD, ends, victim.ID); n == 0 {
		t.Fatal("everything copied before the kill; slow the worker down")
	}
	slow.Kill()
	t.Logf("killed the worker after %v with %d of %d segments still on %s", time.Since(start), refs(ctx, t, cl.MD, ends, victim.ID), before, victim.ID)
	cl.StartAutoRecovery("127.0.0.1:2", "--workers", "2")
	waitFor(ctx, t, "re-replication", func() bool {
		return refs(ctx, t, cl.MD, ends, victim.ID) == 0 && len(underReplicated(ctx, t, cl.MD)) == 0
	})
	t.Logf("re-replicated after %v", time.Since(start))
	checkIntact(ctx, t, cl.MD, ends, firsts, size, victim.ID)
}

// #23: a read-only bookie is never treated as lost (an audit marks
// nothing, its ledgers keep it) and serves reads; it gets no new ensembles.
// A bookie that dies meanwhile is re-replicated onto writable bookies only.
func TestReadOnlyBookieNotLost(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeClosedLedgers(ctx, t, c, 12, 10, 0)
	firsts := segmentFirsts(ctx, t, cl.MD, ends)
	ro := cl.Bookies[0]
	roRefs := refs(ctx, t, cl.MD, ends, ro.ID)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	cl.StartAutoRecovery("127.0.0.1:1", "--workers", "2", "--metrics-address", metricsAddr)
	waitFor(ctx, t, "an auditor", func() bool { return auditorIs(ctx, cl.MD, "127.0.0.1:1") })
	audits := func() int {
		n, _ := strconv.Atoi(scrape(ctx, t, metricsAddr)[`auditor_AUDIT_BOOKIES_TIME_count{success="true"}`])
		return n
	}
	waitFor(ctx, t, "the auditor's first audit", func() bool { return audits() > 0 })

	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+ro.HTTPAddr()+"/api/v1/bookie/state/readonly", strings.NewReader(`{"readOnly": true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("set read-only: %s", resp.Status)
	}
	ro.WaitRegistered(true)
	before := audits()
	if err := admin.TriggerAudit(ctx, cl.MD.(metadata.AutoRecoveryDriver)); err != nil {
		t.Fatal(err)
	}
	// The count moves once the audit, and any (wrong) marking, is done; a
	// marked ledger shows as marked, under-replicated or already moved off
	// the read-only bookie.
	waitFor(ctx, t, "the triggered audit", func() bool { return audits() > before })
	if v := scrape(ctx, t, metricsAddr)["folio_autorecovery_ledgers_marked_total"]; v != "0" {
		t.Fatalf("the audit marked %s ledgers with a read-only bookie and none lost", v)
	}
	if ur := underReplicated(ctx, t, cl.MD); len(ur) != 0 {
		t.Fatalf("read-only bookie made ledgers under-replicated: %+v", ur)
	}
	if n := refs(ctx, t, cl.MD, ends, ro.ID); n != roRefs {
		t.Fatalf("segments on the read-only bookie: %d, want %d", n, roRefs)
	}
	checkIntact(ctx, t, cl.MD, ends, firsts, 0) // reads it, too
	for range 5 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := cl.MD.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(m.Ensembles[0].Ensemble, ro.ID) {
			t.Fatalf("new ledger %d placed on read-only %s", w.ID(), ro.ID)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A bookie dies: its data moves to writable bookies, reading from the
	// read-only one where needed; the read-only one keeps its segments.
	dead := cl.Bookies[3]
	dead.Kill()
	start := time.Now()
	waitFor(ctx, t, "re-replication", func() bool {
		return refs(ctx, t, cl.MD, ends, dead.ID) == 0 && len(underReplicated(ctx, t, cl.MD)) == 0
	})
	t.Logf("re-replicated %s after %v", dead.ID, time.Since(start))
	if n := refs(ctx, t, cl.MD, ends, ro.ID); n != roRefs {
		t.Fatalf("segments on the read-only bookie after re-replication: %d, want %d", n, roRefs)
	}
	checkIntact(ctx, t, cl.MD, ends, firsts, 0, dead.ID)
}
