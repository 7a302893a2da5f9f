package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// HTTPShapes (compat/httpshapes) compares Folio's admin HTTP routes and
// metrics with a Java bookie's on one ZooKeeper cluster (ZooKeeper, so that
// Java's AutoRecovery routes work: its etcd driver has no under-replication
// manager). One Java bookie runs BookKeeper's admin HTTP server (vertx) and
// its Prometheus provider, one `folio bookie` its own admin server, and
// Java's AutoRecoveryMain is the auditor. For each route both answer the
// same request: the status codes must agree, and the JSON bodies must have
// the same shape (key sets and value types; for routes about the cluster,
// the same keys, e.g. the same bookie ids). For /metrics, every family
// both export has the same type.
func HTTPShapes(t *testing.T) {
	srv, classpath := startZooKeeper(t)
	uri := zkURI(srv, "hierarchical", "/ledgers")
	runJavaShell(t, classpath, uri, "initnewcluster")

	javaHTTP := freePort(t)
	waitJava := startJavaBookieConf(t, classpath, uri, map[string]string{
		"httpServerEnabled":  "true",
		"httpServerPort":     fmt.Sprint(javaHTTP),
		"httpServerClass":    "org.apache.bookkeeper.http.vertx.VertxHttpServer",
		"statsProviderClass": "org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider",
	})
	folio := startFolioBookies(t, uri, 1)
	jb := waitJava()
	ar := startJavaAutoRecovery(t, classpath, uri)
	defer func() {
		if t.Failed() {
			t.Logf("--- Java bookie log (tail) ---\n%s", tailFile(jb.logPath, 60))
			t.Logf("--- Java AutoRecovery log (tail) ---\n%s", tailFile(ar.logPath, 30))
		}
	}()
	java := fmt.Sprintf("http://127.0.0.1:%d", javaHTTP)
	fol := "http://" + folio.Bookies[0].HTTPAddr()
	waitRegisteredZK(t, uri, []string{jb.addr, folio.Bookies[0].Addr()})

	// A ledger on both bookies (E=2), written by the Folio client with the
	// empty password BookKeeperAdmin reads with.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newFolioClient(t, uri, "v3")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte{}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for i := range 5 {
		if _, err := w.Append(ctx, []byte(fmt.Sprintf("entry-%d", i))); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	id := w.ID()

	// Both serve once the auditor is elected.
	waitFor(t, time.Minute, "an auditor elected", func() bool {
		code, _ := httpGetBody(ctx, java+"/api/v1/autorecovery/who_is_auditor")
		return code == 200
	}, nil)

	get := func(path string) (jc int, jbody string, fc int, fbody string) {
		t.Helper()
		jc, jbody = httpGetBody(ctx, java+path)
		fc, fbody = httpGetBody(ctx, fol+path)
		if jc != fc {
			t.Errorf("%s: Java answers %d, Folio %d\nJava:  %s\nFolio: %s", path, jc, fc, jbody, fbody)
		}
		return
	}
	// sameShape compares the JSON shapes of both answers; keysToo also
	// wants the same keys at the top level (cluster routes).
	sameShape := func(path string, keysToo bool) {
		t.Helper()
		jc, jbody, fc, fbody := get(path)
		if jc != 200 || fc != 200 {
			t.Errorf("%s: Java %d, Folio %d", path, jc, fc)
			return
		}
		jv, fv := decodeJSON(t, path, "Java", jbody), decodeJSON(t, path, "Folio", fbody)
		if keysToo {
			if jk, fk := topKeys(jv), topKeys(fv); !slices.Equal(jk, fk) {
				t.Errorf("%s: keys differ\nJava:  %v\nFolio: %v", path, jk, fk)
			}
		}
		if js, fs := shape(jv, !keysToo), shape(fv, !keysToo); !reflect.DeepEqual(js, fs) {
			t.Errorf("%s: shapes differ\nJava:  %v\nFolio: %v\nJava body:  %s\nFolio body: %s", path, js, fs, jbody, fbody)
		}
	}

	// The readiness probe.
	if jc, jbody, _, fbody := get("/api/v1/bookie/is_ready"); jc != 200 || strings.TrimSpace(jbody) != strings.TrimSpace(fbody) {
		t.Errorf("is_ready: Java %q, Folio %q", jbody, fbody)
	}
	sameShape("/api/v1/bookie/list_bookies", true)
	sameShape("/api/v1/bookie/list_bookies?type=rw&print_hostnames=true", true)
	sameShape("/api/v1/bookie/list_bookies?type=ro", true)
	sameShape("/api/v1/bookie/list_bookie_info", true)
	sameShape("/api/v1/bookie/last_log_mark", false)
	sameShape("/api/v1/bookie/list_disk_file", true)
	sameShape("/api/v1/bookie/list_disk_file?file_type=journal", true)
	sameShape("/api/v1/bookie/gc_details", true)
	sameShape("/api/v1/bookie/gc/suspend_compaction", true)
	sameShape("/api/v1/ledger/list", true)
	sameShape(fmt.Sprintf("/api/v1/ledger/metadata?ledger_id=%d", id), true)
	sameShape("/api/v1/ledger/list?print_metadata=true&decode_meta=true", true)
	sameShape(fmt.Sprintf("/api/v1/ledger/read?ledger_id=%d", id), true)
	sameShape("/api/v1/autorecovery/status", true)

	// The last log mark: one journal each, Java's key and value patterns.
	_, jbody, _, fbody := get("/api/v1/bookie/last_log_mark")
	for who, body := range map[string]string{"Java": jbody, "Folio": fbody} {
		var m map[string]string
		if err := json.Unmarshal([]byte(body), &m); err != nil || len(m) != 1 {
			t.Errorf("last_log_mark (%s): %v %s", who, err, body)
		}
		for k, v := range m {
			if !strings.HasPrefix(k, "LastLogMark: Journal Id - ") || !strings.HasPrefix(v, "Pos - ") {
				t.Errorf("last_log_mark (%s): %q: %q", who, k, v)
			}
		}
	}
	// server_config: both list the keys every bookie is configured with.
	_, jbody, _, fbody = get("/api/v1/config/server_config")
	for who, body := range map[string]string{"Java": jbody, "Folio": fbody} {
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Errorf("server_config (%s): %v", who, err)
		}
		for _, k := range []string{"bookiePort", "journalDirectories", "ledgerDirectories", "metadataServiceUri", "httpServerEnabled"} {
			if _, ok := m[k].(string); !ok {
				t.Errorf("server_config (%s) lacks %s as a string", who, k)
			}
		}
	}
	// Plain-text answers: the same text.
	for _, path := range []string{"/api/v1/autorecovery/who_is_auditor", "/api/v1/autorecovery/lost_bookie_recovery_delay"} {
		if jc, jbody, _, fbody := get(path); jc == 200 && jbody != fbody {
			t.Errorf("%s: Java %q, Folio %q", path, jbody, fbody)
		}
	}
	if jc, jbody, _, fbody := get("/api/v1/autorecovery/list_under_replicated_ledger"); jc != 404 || jbody != fbody {
		t.Errorf("list_under_replicated_ledger: Java %d %q, Folio %q", jc, jbody, fbody)
	}

	// Metrics: every family both export has the same type; BookKeeper's
	// names Folio promises are Java's names too.
	// Java, like Folio, serves them on the admin HTTP server when it runs
	// (its provider then opens no listener of its own).
	_, jm := httpGetBody(ctx, java+"/metrics")
	_, fm := httpGetBody(ctx, fol+"/metrics")
	jt, ft := metricTypes(jm), metricTypes(fm)
	common := 0
	for name, typ := range ft {
		if jtyp, ok := jt[name]; ok {
			common++
			if jtyp != typ {
				t.Errorf("metric %s: Java's is a %s, Folio's a %s", name, jtyp, typ)
			}
		}
	}
	for _, name := range []string{"bookie_WRITE_BYTES", "bookie_READ_BYTES", "bookkeeper_server_ADD_ENTRY_REQUEST",
		"bookkeeper_server_READ_ENTRY_REQUEST", "bookkeeper_server_ADD_ENTRY", "bookkeeper_server_READ_ENTRY",
		"bookie_journal_JOURNAL_ADD_ENTRY", "bookie_journal_JOURNAL_SYNC", "bookie_SERVER_STATUS", "bookie_journal_JOURNAL_QUEUE_SIZE",
		"bookie_gc_DELETED_LEDGER_TOTAL", "bookie_gc_MINOR_COMPACTION_TOTAL", "bookie_gc_MAJOR_COMPACTION_TOTAL",
		"bookie_gc_RECLAIMED_COMPACTION_SPACE_BYTES", "bookie_ledger_num_dirs", "bookkeeper_server_READ_LAC",
		"bookkeeper_server_WRITE_LAC", "bookkeeper_server_FORCE_LEDGER", "bookkeeper_server_GET_BOOKIE_INFO"} {
		if jt[name] == "" || ft[name] == "" {
			t.Errorf("metric %s: Java exports it as %q, Folio as %q", name, jt[name], ft[name])
		}
	}
	var javaOnly []string
	for name := range jt {
		if ft[name] == "" && !strings.HasPrefix(name, "jvm_") {
			javaOnly = append(javaOnly, name)
		}
	}
	sort.Strings(javaOnly)
	t.Logf("compat: %d metric families in common, %d Java, %d Folio; Java's without a Folio counterpart: %v", common, len(jt), len(ft), javaOnly)
}

// httpGetBody GETs url: status and body (0 and the error on failure).
func httpGetBody(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func decodeJSON(t *testing.T, path, who, body string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Errorf("%s (%s): not JSON: %v: %s", path, who, err, body)
	}
	return v
}

func topKeys(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// shape is v's structure: an object's keys with their shapes (with
// anyKey, the top level's keys are dropped and only the value shapes,
// sorted, kept), an array's first element, a scalar's JSON type.
func shape(v any, anyKey bool) any {
	switch x := v.(type) {
	case map[string]any:
		if anyKey {
			var vals []string
			for _, e := range x {
				vals = append(vals, fmt.Sprint(shape(e, false)))
			}
			sort.Strings(vals)
			return slices.Compact(vals)
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e, false)
		}
		return out
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return []any{shape(x[0], false)}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// metricTypes maps each family of a Prometheus text exposition to its type.
func metricTypes(body string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// waitRegisteredZK waits until every bookie of ids is registered writable.
func waitRegisteredZK(t *testing.T, uri string, ids []string) {
	t.Helper()
	d := openMetadata(t, uri)
	waitFor(t, time.Minute, "bookies registered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reg, err := registeredBookies(ctx, d)
		if err != nil {
			return false
		}
		for _, id := range ids {
			if !slices.Contains(reg, id) {
				return false
			}
		}
		return true
	}, nil)
}
