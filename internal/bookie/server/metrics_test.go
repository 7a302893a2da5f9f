package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/clientprom"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/metadata"
)

// series parses a Prometheus text exposition into series (name with
// labels, as written) → value, and the set of metric family names.
func series(body string) (map[string]string, map[string]bool) {
	vals, names := map[string]string{}, map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			names[strings.Fields(line)[2]] = true
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		vals[line[:i]] = line[i+1:]
	}
	return vals, names
}

// exported reports whether a dashboard's series name is in the scrape: a
// family, or a summary's _count/_sum.
func exported(names map[string]bool, name string) bool {
	if names[name] {
		return true
	}
	for _, suf := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suf); ok && names[base] {
			return true
		}
	}
	return false
}

// TestMetricsAtStartup: BookKeeper's series exist at 0 before any traffic,
// OpStatsLogger summaries with both success values.
func TestMetricsAtStartup(t *testing.T) {
	uri, _ := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.HTTPServerEnabled = true
	reg := prometheus.NewRegistry()
	reg.MustRegister(autorecovery.NewMetrics(nil))
	p := procStart(t, cfg, ProcessOptions{Registry: reg})
	<-p.Registered()
	_, body := httpDo(t, "GET", "http://"+p.HTTPAddr()+"/metrics", "")
	vals, _ := series(body)
	for _, s := range []string{
		"bookie_WRITE_BYTES", "bookie_READ_BYTES", "bookie_ledgers_count", "bookie_DELETED_LEDGER_TOTAL",
		`bookkeeper_server_ADD_ENTRY_REQUEST_count{success="true"}`, `bookkeeper_server_ADD_ENTRY_REQUEST_count{success="false"}`,
		`bookkeeper_server_READ_ENTRY_count{success="false"}`, `bookie_journal_JOURNAL_ADD_ENTRY_count{success="true"}`,
		`bookie_journal_JOURNAL_SYNC_count{success="true"}`, "bookie_MINOR_COMPACTION_TOTAL",
		`auditor_AUDIT_BOOKIES_TIME_count{success="true"}`, `auditor_NUM_UNDER_REPLICATED_LEDGERS_count{success="true"}`,
		"auditor_NUM_LEDGERS_CHECKED", "replication_worker_NUM_ENTRIES_WRITTEN",
		`replication_worker_NUM_BYTES_WRITTEN_sum{success="true"}`, "folio_autorecovery_under_replicated_ledgers",
	} {
		if v, ok := vals[s]; !ok || v != "0" {
			t.Errorf("%s = %q at start-up, want 0", s, v)
		}
	}
	if vals["bookie_ledger_writable_dirs"] != "2" || vals["bookie_SERVER_STATUS"] != "1" {
		t.Errorf("writable dirs %q, status %q", vals["bookie_ledger_writable_dirs"], vals["bookie_SERVER_STATUS"])
	}

	// The client's, at 0 too.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creg := prometheus.NewRegistry()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri, Metrics: clientprom.New(creg)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mfs, err := creg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	for _, want := range []string{"bookkeeper_client_ADD_ENTRY", "bookkeeper_client_READ_ENTRY", "bookkeeper_client_LEDGER_CREATE",
		"bookkeeper_client_LEDGER_OPEN", "bookkeeper_client_LEDGER_DELETE"} {
		if !slices.Contains(got, want) {
			t.Errorf("client metrics lack %s: %v", want, got)
		}
	}
}

// TestPrometheusStatsListener: statsProviderClass naming BookKeeper's
// Prometheus provider opens prometheusStatsHttpAddress:Port when the admin
// HTTP server is off, and only then.
func TestPrometheusStatsListener(t *testing.T) {
	uri, _ := procEtcd(t)
	cfg := procConfig(t, uri)
	for k, v := range map[string]string{
		"statsProviderClass":         PrometheusProviderClass,
		"prometheusStatsHttpAddress": "127.0.0.1",
		"prometheusStatsHttpPort":    "0",
	} {
		if err := cfg.Set(k, v, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	p := procStart(t, cfg, ProcessOptions{})
	if p.MetricsAddr() == "" || p.HTTPAddr() != "" {
		t.Fatalf("metrics listener %q, admin server %q", p.MetricsAddr(), p.HTTPAddr())
	}
	code, body := httpDo(t, "GET", "http://"+p.MetricsAddr()+"/metrics", "")
	if code != 200 || !strings.Contains(body, "bookie_WRITE_BYTES") {
		t.Errorf("metrics listener: %d", code)
	}
	if code, _ := httpDo(t, "GET", "http://"+p.MetricsAddr()+"/api/v1/bookie/state", ""); code != 404 {
		t.Errorf("admin route on the metrics listener: %d", code)
	}
	addr := p.MetricsAddr()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Error("metrics listener still serving after shutdown")
	}

	// No provider class: no listener at all (the default).
	plain := procStart(t, procConfig(t, uri), ProcessOptions{})
	if plain.MetricsAddr() != "" {
		t.Errorf("a metrics listener without statsProviderClass: %s", plain.MetricsAddr())
	}
	// With the admin HTTP server, /metrics is there and nothing else
	// listens.
	cfg3 := procConfig(t, uri)
	cfg3.HTTPServerEnabled = true
	cfg3.Stats.ProviderClass = PrometheusProviderClass
	cfg3.Stats.PrometheusPort = 0
	p3 := procStart(t, cfg3, ProcessOptions{})
	if p3.MetricsAddr() != "" {
		t.Errorf("a metrics listener next to the admin server: %s", p3.MetricsAddr())
	}
	if code, _ := httpDo(t, "GET", "http://"+p3.HTTPAddr()+"/metrics", ""); code != 200 {
		t.Errorf("admin /metrics: %d", code)
	}

	bad := procConfig(t, uri)
	if err := bad.Set("prometheusStatsHttpPort", "x", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "prometheusStatsHttpPort") {
		t.Errorf("bad port: %v", err)
	}
	bad.Stats.PrometheusPort = 70000
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "prometheusStatsHttpPort") {
		t.Errorf("port out of range: %v", err)
	}
}

// dashboardSeries are the series stock BookKeeper/Pulsar Grafana
// dashboards query, with their source:
//
//	SN:  streamnative/apache-pulsar-grafana-dashboard dashboards/bookkeeper.json
//	SNK: same repository, dashboards.kubernetes/bookkeeper.json
//	SNR: same repository, dashboards.kubernetes/recovery.json
//
// (commit 9a61a26a8416c7646016c5bd90f415688bded0eb, Aug 2026). Each is
// exported by a busy Folio bookie with AutoRecovery, except those in
// dashboardNotExported.
var dashboardSeries = []string{
	"bookie_SERVER_STATUS",                       // SN, SNK
	"bookkeeper_server_ADD_ENTRY_count",          // SN, SNK
	"bookkeeper_server_READ_ENTRY_count",         // SN, SNK
	"bookkeeper_server_ADD_ENTRY",                // SN, SNK
	"bookkeeper_server_READ_ENTRY",               // SN
	"bookkeeper_server_ADD_ENTRY_REQUEST",        // SN
	"bookkeeper_server_READ_ENTRY_REQUEST",       // SN, SNK
	"bookkeeper_server_ADD_ENTRY_REQUEST_count",  // SN
	"bookkeeper_server_READ_ENTRY_REQUEST_count", // SN, SNK
	"bookie_WRITE_BYTES",                         // SN, SNK
	"bookie_READ_BYTES",                          // SN, SNK
	"bookie_journal_JOURNAL_SYNC",                // SN, SNK
	"bookie_journal_JOURNAL_SYNC_count",          // SN, SNK
	"bookie_journal_JOURNAL_ADD_ENTRY",           // SN, SNK
	"bookie_journal_JOURNAL_ADD_ENTRY_count",     // SN, SNK
	"bookie_journal_JOURNAL_QUEUE_SIZE",          // SN, SNK
	"bookie_ledgers_count",                       // SN, SNK
	"bookie_ledger_writable_dirs",                // SN, SNK
	"bookie_DELETED_LEDGER_COUNT",                // SN
	"bookie_DELETED_LEDGER_TOTAL",                // SNK
	"bookie_MAJOR_COMPACTION_TOTAL",              // SNK
	"bookie_RECLAIMED_COMPACTION_SPACE_BYTES",    // SNK
	"auditor_NUM_UNDER_REPLICATED_LEDGERS_count", // SNR
	"replication_worker_NUM_ENTRIES_READ",        // SNR
	"replication_worker_NUM_ENTRIES_WRITTEN",     // SNR
	"replication_worker_NUM_BYTES_READ_sum",      // SNR
	"replication_worker_NUM_BYTES_WRITTEN_sum",   // SNR
}

// dashboardNotExported are the dashboards' series Folio has nothing to
// measure for, and why.
var dashboardNotExported = map[string]string{
	"bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE":             "one journal queue: no separate force-write queue (JOURNAL_QUEUE_SIZE covers it)",
	"bookie_journal_JOURNAL_CB_QUEUE_SIZE":                      "no callback thread queue: completions run on the journal's sync",
	"bookie_write_cache_size":                                   "DbLedgerStorage's write cache; Folio's write cache is per ledger directory and not exported yet",
	"bookie_read_cache_size":                                    "DbLedgerStorage's read-ahead cache; not exported yet",
	"bookie_read_cache_hits":                                    "as bookie_read_cache_size",
	"bookie_read_cache_misses":                                  "as bookie_read_cache_size",
	"bookie_entries_count":                                      "would need a walk of the whole index per scrape",
	"bookie_MINOR_COMPACTION_COUNT":                             "a name older than 4.17's bookie_MINOR_COMPACTION_TOTAL, which Folio exports",
	"bookie_RECLAIMED_DELETION_SPACE_BYTES":                     "entry logs removed whole are counted, their bytes are not",
	"bookkeeper_server_ADD_ENTRY_IN_PROGRESS":                   "Folio counts requests in progress together: bookkeeper_server_REQUESTS_IN_PROGRESS",
	"bookkeeper_server_READ_ENTRY_IN_PROGRESS":                  "as ADD_ENTRY_IN_PROGRESS",
	"bookkeeper_server_ADD_ENTRY_BLOCKED":                       "Folio pauses reading a connection instead: bookkeeper_server_READS_PAUSED",
	"bookkeeper_server_READ_ENTRY_BLOCKED":                      "as ADD_ENTRY_BLOCKED",
	"bookie_ledger_dir__pulsar_data_bookkeeper_ledgers_0_usage": "a per-directory name built from the path: Folio exports it for its own ledger directories (javaDirUsageName), not for the chart's path",
}

// TestBusyBookieServesDashboardSeries scrapes a bookie under real traffic
// (adds, reads, a deletion and a garbage collection pass, AutoRecovery
// re-replicating a lost bookie's ledgers) and checks every series the
// stock dashboards query.
func TestBusyBookieServesDashboardSeries(t *testing.T) {
	uri, md := procEtcd(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	arMetrics := autorecovery.NewMetrics(nil)
	reg.MustRegister(arMetrics)
	var procs []*Process
	for i := range 4 {
		cfg := procConfig(t, uri)
		opts := ProcessOptions{}
		if i == 0 {
			cfg.HTTPServerEnabled = true
			opts.Registry = reg
		}
		procs = append(procs, procStart(t, cfg, opts))
	}
	for _, p := range procs {
		<-p.Registered()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri, Metrics: clientprom.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "four writable bookies", func() bool { w, err := md.WritableBookies(ctx); return err == nil && len(w) == 4 })

	// AutoRecovery in this process, under the first bookie's id.
	ar := md.(metadata.AutoRecoveryDriver)
	if err := ar.SetReplicationEnabled(ctx, true); err != nil {
		t.Fatal(err)
	}
	svc, err := autorecovery.StartService(ctx, autorecovery.ServiceConfig{
		Driver: md, MetadataServiceURI: uri, ID: procs[0].ID(), Logger: slog.New(slog.DiscardHandler), Metrics: arMetrics,
		Auditor: autorecovery.AuditorConfig{SessionTTL: 2 * time.Second, RetryInterval: 100 * time.Millisecond},
		Worker: autorecovery.WorkerConfig{SessionTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond,
			FailureBackoff: 100 * time.Millisecond, OpenLedgerRereplicationGracePeriod: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(context.Background())

	// Traffic: every ledger on all four bookies except one, so that each
	// bookie, the first included, stores and serves entries.
	var ids []int64
	for range 8 {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if _, err := w.Append(ctx, []byte(fmt.Sprintf("entry %d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID())
	}
	for _, id := range ids {
		r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(ctx, 0, 49); err != nil {
			t.Fatal(err)
		}
	}
	// Delete a ledger the first bookie stores, so that its collection
	// drops it.
	del := int64(-1)
	for _, id := range ids {
		m, _, err := md.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(m.Ensembles[0].Ensemble, procs[0].ID()) {
			del = id
			break
		}
	}
	if err := c.DeleteLedger(ctx, del); err != nil {
		t.Fatal(err)
	}
	_, before := procs[0].GC().Last()
	procs[0].GC().Trigger()
	waitFor(t, "a garbage collection pass", func() bool { _, n := procs[0].GC().Last(); return n > before })

	// A bookie is lost: the auditor marks its ledgers, the worker copies
	// them elsewhere.
	victim := procs[3].ID()
	if err := procs[3].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, time.Minute, "the lost bookie's ledgers re-replicated", func() bool {
		on, err := admin.LedgersOnBookie(ctx, md, victim, true)
		return err == nil && len(on) == 0
	})

	_, body := httpDo(t, "GET", "http://"+procs[0].HTTPAddr()+"/metrics", "")
	vals, names := series(body)
	for _, s := range dashboardSeries {
		if !exported(names, s) {
			t.Errorf("dashboard series %s is not exported", s)
		}
	}
	for s := range dashboardNotExported {
		if exported(names, s) {
			t.Errorf("%s is exported: remove it from dashboardNotExported", s)
		}
	}
	// Every series the shipped dashboard queries is exported here (the
	// bookie's, AutoRecovery's and the client's collectors share this
	// registry).
	for _, name := range dashboardMetrics(t, "../../../deploy/grafana/folio-cluster.json") {
		if !exported(names, name) {
			t.Errorf("deploy/grafana/folio-cluster.json queries %s, which is not exported", name)
		}
	}

	// The traffic shows.
	for _, s := range []string{"bookie_WRITE_BYTES", "bookie_READ_BYTES", `bookkeeper_server_ADD_ENTRY_REQUEST_count{success="true"}`,
		`bookie_journal_JOURNAL_ADD_ENTRY_count{success="true"}`, `auditor_AUDIT_BOOKIES_TIME_count{success="true"}`,
		"replication_worker_NUM_ENTRIES_WRITTEN", `bookkeeper_client_ADD_ENTRY_count{success="true"}`,
		`bookkeeper_client_READ_ENTRY_count{success="true"}`, "bookie_DELETED_LEDGER_TOTAL"} {
		if v := vals[s]; v == "" || v == "0" {
			t.Errorf("%s = %q after traffic", s, v)
		}
	}
}

// promQLWords are PromQL's functions, aggregations and keywords: the
// identifiers of an expression that are not metric names.
var promQLWords = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "rate": true, "irate": true, "increase": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "bool": true,
	"and": true, "or": true, "unless": true, "vector": true, "histogram_quantile": true, "topk": true, "bottomk": true,
	"clamp_min": true, "clamp_max": true, "abs": true, "offset": true, "label_values": true,
}

var (
	promLabels   = regexp.MustCompile(`\{[^}]*\}`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring)\s*\([^)]*\)`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// dashboardMetrics returns the metric names a Grafana dashboard's panel
// queries use.
func dashboardMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			e := promLabels.ReplaceAllString(tg.Expr, "")
			e = promGrouping.ReplaceAllString(e, "")
			e = promRange.ReplaceAllString(e, "")
			for _, m := range promIdent.FindAllStringIndex(e, -1) {
				id := e[m[0]:m[1]]
				if promQLWords[id] || m[1] < len(e) && e[m[1]] == '(' || m[0] > 0 && (e[m[0]-1] >= '0' && e[m[0]-1] <= '9') {
					continue
				}
				if !seen[id] {
					seen[id] = true
					out = append(out, id)
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("%s: only %d metric names found: %v", path, len(out), out)
	}
	return out
}

// waitWithin polls cond until it holds or d passes (waitFor with a bound
// for work that takes several steps: an audit, then copies).
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
