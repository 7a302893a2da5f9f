package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
)

// bkCluster is three real bookies on an embedded etcd; the first serves
// the admin HTTP server with the cluster routes (admin.HTTPCluster).
type bkCluster struct {
	uri   string
	md    metadata.Driver
	procs []*Process
	base  string // the first bookie's admin HTTP server
	c     *client.Client
}

func startBKCluster(t *testing.T) *bkCluster {
	t.Helper()
	uri, md := procEtcd(t)
	cl := &bkCluster{uri: uri, md: md}
	for i := range 3 {
		cfg := procConfig(t, uri)
		opts := ProcessOptions{}
		if i == 0 {
			cfg.HTTPServerEnabled = true
			opts.ClusterAdmin = func(md metadata.Driver) (ClusterAdmin, error) {
				return admin.NewHTTPCluster(md, func(ctx context.Context) (*client.Client, error) {
					return client.New(ctx, client.Config{MetadataServiceURI: uri})
				}, rereplication.NewBookies(0, slog.New(slog.DiscardHandler)), nil), nil
			}
		}
		p := procStart(t, cfg, opts)
		cl.procs = append(cl.procs, p)
	}
	cl.base = "http://" + cl.procs[0].HTTPAddr()
	for _, p := range cl.procs {
		<-p.Registered()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitFor(t, "the client sees three bookies", func() bool {
		w, err := md.WritableBookies(ctx)
		return err == nil && len(w) == 3
	})
	cl.c = c
	return cl
}

// writeLedger writes n entries "entry-<i>" to a new closed ledger (E=2).
func (cl *bkCluster) writeLedger(t *testing.T, n int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := cl.c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append(ctx, []byte(fmt.Sprintf("entry-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return w.ID()
}

// getJSON GETs url and decodes a 200 answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := httpDo(t, "GET", url, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	// A fresh value: Unmarshal merges into an existing map.
	rv := reflect.ValueOf(v).Elem()
	rv.Set(reflect.Zero(rv.Type()))
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// wantCode checks a request's status code.
func wantCode(t *testing.T, method, url, body string, want int) string {
	t.Helper()
	code, got := httpDo(t, method, url, body)
	if code != want {
		t.Errorf("%s %s %s: %d, want %d: %s", method, url, body, code, want, got)
	}
	return got
}

// TestBKBookieRoutes: the bookie's own routes of BookKeeper's admin API
// on a real bookie.
func TestBKBookieRoutes(t *testing.T) {
	cl := startBKCluster(t)
	cl.writeLedger(t, 20)
	base := cl.base

	// is_ready: registered and writable.
	if code, body := httpDo(t, "GET", base+"/api/v1/bookie/is_ready", ""); code != 200 || body != "OK\n" {
		t.Errorf("is_ready: %d %q", code, body)
	}
	wantCode(t, "PUT", base+"/api/v1/bookie/is_ready", "", 405)

	var marks map[string]string
	getJSON(t, base+"/api/v1/bookie/last_log_mark", &marks)
	if len(marks) != 1 {
		t.Errorf("last_log_mark: %v, want one journal", marks)
	}
	for k, v := range marks {
		if !strings.HasPrefix(k, "LastLogMark: Journal Id - ") || !strings.HasPrefix(v, "Pos - ") {
			t.Errorf("last_log_mark: %q: %q", k, v)
		}
	}
	wantCode(t, "POST", base+"/api/v1/bookie/last_log_mark", "", 405)

	var files map[string]string
	getJSON(t, base+"/api/v1/bookie/list_disk_file", &files)
	if got := sortedKeys(files); !slices.Equal(got, []string{"entrylog files", "index files", "journal files"}) {
		t.Errorf("list_disk_file keys: %v", got)
	}
	if !strings.Contains(files["journal files"], ".jnl\t") {
		t.Errorf("list_disk_file: no journal file: %q", files["journal files"])
	}
	getJSON(t, base+"/api/v1/bookie/list_disk_file?file_type=journal", &files)
	if got := sortedKeys(files); !slices.Equal(got, []string{"journal files"}) {
		t.Errorf("list_disk_file?file_type=journal keys: %v", got)
	}
	wantCode(t, "GET", base+"/api/v1/bookie/list_disk_file?file_type=sst", "", 400)

	var gc []map[string]any
	getJSON(t, base+"/api/v1/bookie/gc_details", &gc)
	if len(gc) != 1 || len(gc[0]) != 9 {
		t.Errorf("gc_details: %v", gc)
	}
	for _, k := range []string{"forceCompacting", "majorCompacting", "minorCompacting", "lastMajorCompactionTime",
		"lastMinorCompactionTime", "majorCompactionCounter", "minorCompactionCounter"} {
		if _, ok := gc[0][k]; !ok {
			t.Errorf("gc_details lacks %s: %v", k, gc[0])
		}
	}

	// Suspend and resume compaction.
	susp := base + "/api/v1/bookie/gc/suspend_compaction"
	res := base + "/api/v1/bookie/gc/resume_compaction"
	wantCode(t, "PUT", susp, `{}`, 400)
	wantCode(t, "PUT", susp, `nonsense`, 400)
	wantCode(t, "PUT", susp, ``, 400)
	if body := wantCode(t, "PUT", susp, `{"suspendMajor": true, "suspendMinor": true}`, 200); !strings.Contains(body, "Suspend minorGC") {
		t.Errorf("suspend: %s", body)
	}
	var state map[string]string
	getJSON(t, susp, &state)
	if state["isMajorGcSuspended"] != "true" || state["isMinorGcSuspended"] != "true" {
		t.Errorf("after suspend: %v", state)
	}
	if maj, min := cl.procs[0].CompactionSuspended(); !maj || !min {
		t.Errorf("store not suspended: %v %v", maj, min)
	}
	wantCode(t, "GET", res, "", 405)
	wantCode(t, "PUT", res, `{"other": 1}`, 400)
	wantCode(t, "PUT", res, `{"resumeMajor": true, "resumeMinor": true}`, 200)
	getJSON(t, susp, &state)
	if state["isMajorGcSuspended"] != "false" || state["isMinorGcSuspended"] != "false" {
		t.Errorf("after resume: %v", state)
	}

	if body := wantCode(t, "PUT", base+"/api/v1/bookie/expand_storage", "", 200); body != "Success expand storage" {
		t.Errorf("expand_storage: %q", body)
	}
	wantCode(t, "GET", base+"/api/v1/bookie/expand_storage", "", 405)

	var conf map[string]string
	getJSON(t, base+"/api/v1/config/server_config", &conf)
	for _, k := range []string{"bookiePort", "journalDirectories", "ledgerDirectories", "metadataServiceUri", "httpServerEnabled", "readOnlyModeOnAnyDiskFullEnabled", "allowStorageExpansion"} {
		if conf[k] == "" {
			t.Errorf("server_config lacks %s: %v", k, conf)
		}
	}
	wantCode(t, "PUT", base+"/api/v1/config/server_config", `{"gcWaitTime": "1"}`, 405)

	// is_ready during shutdown: 503.
	p := cl.procs[0]
	h := NewAdminHandler(prometheus.NewRegistry(), func() []AdminTarget { return []AdminTarget{p} }, AdminOptions{})
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/bookie/is_ready", nil))
	if rec.Code != 503 || !strings.HasPrefix(rec.Body.String(), "Bookie is not fully started yet") {
		t.Errorf("is_ready after shutdown: %d %q", rec.Code, rec.Body.String())
	}
}

// TestIsReadyFollowsRegistration: is_ready answers 503 until the
// registration matches the bookie's mode, then 200, also read-only.
func TestIsReadyFollowsRegistration(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.HTTPServerEnabled = true
	p := procStart(t, cfg, ProcessOptions{})
	base := "http://" + p.HTTPAddr()
	<-p.Registered()
	wantCode(t, "GET", base+"/api/v1/bookie/is_ready", "", 200)
	// The read-only switch: ready again once registered read-only.
	if _, err := p.SetReadOnly(true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "read-only registration", func() bool { _, ro := registered(t, md, p.ID()); return ro })
	waitFor(t, "ready read-only", func() bool { code, _ := httpDo(t, "GET", base+"/api/v1/bookie/is_ready", ""); return code == 200 })
	// A target not yet registered answers 503 with the reason.
	h := NewAdminHandler(prometheus.NewRegistry(), func() []AdminTarget { return []AdminTarget{notReady{p}} }, AdminOptions{Token: "t"})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/bookie/is_ready", nil)) // no token: an open path
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "not registered") {
		t.Errorf("is_ready before registration: %d %q", rec.Code, rec.Body.String())
	}
}

type notReady struct{ *Process }

func (notReady) Ready() (bool, string) { return false, "not registered with the metadata store" }

// TestBKClusterRoutes: the cluster routes (bookies, ledgers,
// AutoRecovery) against real bookies and etcd.
func TestBKClusterRoutes(t *testing.T) {
	cl := startBKCluster(t)
	base := cl.base
	ids := []int64{cl.writeLedger(t, 5), cl.writeLedger(t, 1500)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// list_bookies.
	var bookies map[string]*string
	getJSON(t, base+"/api/v1/bookie/list_bookies", &bookies)
	var want []string
	for _, p := range cl.procs {
		want = append(want, string(p.ID()))
	}
	sort.Strings(want)
	if got := sortedKeys(bookies); !slices.Equal(got, want) {
		t.Errorf("list_bookies: %v, want %v", got, want)
	}
	for k, v := range bookies {
		if v != nil {
			t.Errorf("list_bookies without hostnames: %s: %q", k, *v)
		}
	}
	getJSON(t, base+"/api/v1/bookie/list_bookies?type=rw&print_hostnames=true", &bookies)
	for k, v := range bookies {
		if v == nil || *v != "127.0.0.1" {
			t.Errorf("list_bookies with hostnames: %s: %v", k, v)
		}
	}
	getJSON(t, base+"/api/v1/bookie/list_bookies?type=ro", &bookies)
	if len(bookies) != 0 {
		t.Errorf("read-only bookies: %v", bookies)
	}
	wantCode(t, "GET", base+"/api/v1/bookie/list_bookies?type=all", "", 400)
	wantCode(t, "GET", base+"/api/v1/bookie/list_bookies?print_hostnames=yes", "", 400)
	wantCode(t, "DELETE", base+"/api/v1/bookie/list_bookies", "", 405)

	var info map[string]string
	getJSON(t, base+"/api/v1/bookie/list_bookie_info", &info)
	if got := sortedKeys(info); !slices.Equal(got, append(slices.Clone(want), "ClusterInfo: ")) {
		t.Errorf("list_bookie_info: %v", info)
	}
	if !strings.HasPrefix(info[want[0]], ": {Free: ") || !strings.HasPrefix(info["ClusterInfo: "], "{Free: ") {
		t.Errorf("list_bookie_info values: %v", info)
	}

	// Ledgers.
	var list map[string]any
	getJSON(t, base+"/api/v1/ledger/list", &list)
	if len(list) != 2 || list[fmt.Sprint(ids[0])] != nil {
		t.Errorf("ledger/list: %v", list)
	}
	getJSON(t, base+"/api/v1/ledger/list?print_metadata=true&decode_meta=true&page=1", &list)
	if m, ok := list[fmt.Sprint(ids[1])].(map[string]any); !ok || m["ensembleSize"] != 2.0 || m["state"] != "CLOSED" {
		t.Errorf("ledger/list with metadata: %v", list)
	}
	getJSON(t, base+"/api/v1/ledger/list?print_metadata=true&page=2", &list)
	if len(list) != 0 {
		t.Errorf("page 2: %v", list)
	}
	getJSON(t, base+"/api/v1/ledger/list?print_metadata=true", &list)
	if _, ok := list[fmt.Sprint(ids[0])].(string); !ok {
		t.Errorf("ledger/list serialized metadata: %v", list)
	}
	wantCode(t, "GET", base+"/api/v1/ledger/list?page=0&print_metadata=true", "", 400)

	var meta map[string]map[string]any
	getJSON(t, fmt.Sprintf("%s/api/v1/ledger/metadata?ledger_id=%d", base, ids[1]), &meta)
	m := meta[fmt.Sprint(ids[1])]
	if got := sortedKeys(m); !slices.Equal(got, []string{"ackQuorumSize", "allEnsembles", "closed", "ctime", "ctoken", "customMetadata",
		"digestType", "ensembleSize", "lastEntryId", "ledgerId", "length", "metadataFormatVersion", "password", "state", "writeQuorumSize"}) {
		t.Errorf("ledger/metadata keys: %v", got)
	}
	if m["lastEntryId"] != 1499.0 || m["closed"] != true || m["digestType"] != "CRC32C" {
		t.Errorf("ledger/metadata: %v", m)
	}
	if ens, ok := m["allEnsembles"].(map[string]any)["0"].([]any); !ok || len(ens) != 2 || ens[0].(map[string]any)["id"] == "" {
		t.Errorf("allEnsembles: %v", m["allEnsembles"])
	}
	wantCode(t, "GET", base+"/api/v1/ledger/metadata", "", 400)
	wantCode(t, "GET", base+"/api/v1/ledger/metadata?ledger_id=x", "", 400)
	wantCode(t, "GET", base+"/api/v1/ledger/metadata?ledger_id=999999", "", 404)

	var entries map[string]string
	getJSON(t, fmt.Sprintf("%s/api/v1/ledger/read?ledger_id=%d", base, ids[0]), &entries)
	if len(entries) != 5 || entries["4"] != "entry-4" {
		t.Errorf("ledger/read: %v", entries)
	}
	getJSON(t, fmt.Sprintf("%s/api/v1/ledger/read?ledger_id=%d&start_entry_id=1&end_entry_id=2", base, ids[0]), &entries)
	if got := sortedKeys(entries); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("ledger/read range: %v", entries)
	}
	getJSON(t, fmt.Sprintf("%s/api/v1/ledger/read?ledger_id=%d&page=2", base, ids[1]), &entries)
	if len(entries) != 501 || entries["Entries for page: "] != "2" || entries["1499"] != "entry-1499" || entries["999"] != "" {
		t.Errorf("ledger/read page 2: %d entries", len(entries))
	}
	getJSON(t, fmt.Sprintf("%s/api/v1/ledger/read?ledger_id=%d", base, ids[1]), &entries)
	if len(entries) != readEntriesPageSize {
		t.Errorf("ledger/read without a page: %d entries, want at most %d", len(entries), readEntriesPageSize)
	}
	wantCode(t, "GET", fmt.Sprintf("%s/api/v1/ledger/read?ledger_id=%d&start_entry_id=3&end_entry_id=2", base, ids[0]), "", 400)
	wantCode(t, "GET", base+"/api/v1/ledger/read?ledger_id=999999", "", 404)
	wantCode(t, "GET", base+"/api/v1/ledger/read", "", 400)

	wantCode(t, "GET", fmt.Sprintf("%s/api/v1/ledger/delete?ledger_id=%d", base, ids[0]), "", 405)
	if body := wantCode(t, "DELETE", fmt.Sprintf("%s/api/v1/ledger/delete?ledger_id=%d", base, ids[0]), "", 200); !strings.Contains(body, fmt.Sprintf("Deleted ledger: %d", ids[0])) {
		t.Errorf("delete: %s", body)
	}
	if _, _, err := cl.md.ReadLedger(ctx, ids[0]); err == nil {
		t.Error("ledger still there after delete")
	}
	wantCode(t, "DELETE", fmt.Sprintf("%s/api/v1/ledger/delete?ledger_id=%d", base, ids[0]), "", 404)
	wantCode(t, "DELETE", base+"/api/v1/ledger/delete", "", 400)

	// AutoRecovery: no auditor yet.
	ar := cl.md.(metadata.AutoRecoveryDriver)
	if body := wantCode(t, "GET", base+"/api/v1/autorecovery/who_is_auditor", "", 404); body != "No auditor elected" {
		t.Errorf("who_is_auditor: %q", body)
	}
	wantCode(t, "PUT", base+"/api/v1/autorecovery/trigger_audit", "", 409)
	status := base + "/api/v1/autorecovery/status"
	var enabled map[string]bool
	wantCode(t, "PUT", status+"?enabled=false", "", 200)
	getJSON(t, status, &enabled)
	if enabled["enabled"] {
		t.Errorf("status after disabling: %v", enabled)
	}
	wantCode(t, "PUT", status, "", 400)
	wantCode(t, "PUT", status+"?enabled=maybe", "", 400)
	wantCode(t, "DELETE", status, "", 405)
	s, err := cl.md.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := ar.CampaignAuditor(ctx, s, cl.procs[1].ID()); err != nil {
		t.Fatal(err)
	}
	if body := wantCode(t, "GET", base+"/api/v1/autorecovery/who_is_auditor", "", 200); body != "Auditor: "+string(cl.procs[1].ID()) {
		t.Errorf("who_is_auditor: %q", body)
	}
	wantCode(t, "PUT", base+"/api/v1/autorecovery/who_is_auditor", "", 405)
	wantCode(t, "PUT", base+"/api/v1/autorecovery/trigger_audit", "", 409) // disabled
	wantCode(t, "PUT", status+"?enabled=true", "", 200)
	if on, err := ar.ReplicationEnabled(ctx); err != nil || !on {
		t.Fatalf("replication enabled over HTTP: %v %v", on, err)
	}
	if body := wantCode(t, "PUT", base+"/api/v1/autorecovery/trigger_audit", "", 200); body != "Success trigger audit." {
		t.Errorf("trigger_audit: %q", body)
	}
	wantCode(t, "GET", base+"/api/v1/autorecovery/trigger_audit", "", 405)

	delay := base + "/api/v1/autorecovery/lost_bookie_recovery_delay"
	if body := wantCode(t, "PUT", delay, `{"delay_seconds": 42}`, 200); body != "Success set lostBookieRecoveryDelay to 42" {
		t.Errorf("PUT delay: %q", body)
	}
	if body := wantCode(t, "GET", delay, "", 200); body != "lostBookieRecoveryDelay value: 42" {
		t.Errorf("GET delay: %q", body)
	}
	wantCode(t, "PUT", delay, `{"delay": 1}`, 400)
	wantCode(t, "PUT", delay, `{"delay_seconds": -1}`, 400)
	wantCode(t, "PUT", delay, `{"delay_seconds": "x"}`, 400)
	wantCode(t, "DELETE", delay, "", 405)

	urURL := base + "/api/v1/autorecovery/list_under_replicated_ledger"
	if body := wantCode(t, "GET", urURL, "", 404); body != "No under replicated ledgers found" {
		t.Errorf("no under-replicated: %q", body)
	}
	missing := cl.procs[2].ID()
	if err := ar.MarkLedgerUnderReplicated(ctx, ids[1], []metadata.BookieID{missing}); err != nil {
		t.Fatal(err)
	}
	var urIDs []int64
	getJSON(t, urURL, &urIDs)
	if !slices.Equal(urIDs, []int64{ids[1]}) {
		t.Errorf("list_under_replicated_ledger: %v", urIDs)
	}
	var urMap map[string][]string
	getJSON(t, urURL+"?printmissingreplica&missingreplica="+string(missing), &urMap)
	if got := urMap[fmt.Sprint(ids[1])]; !slices.Equal(got, []string{string(missing)}) {
		t.Errorf("printmissingreplica: %v", urMap)
	}
	wantCode(t, "GET", urURL+"?excludingmissingreplica="+string(missing), "", 404)
	wantCode(t, "GET", urURL+"?missingreplica="+string(cl.procs[0].ID()), "", 404)

	// Decommission refuses a registered bookie; recovery of a stopped
	// bookie moves every ledger off it.
	dec := base + "/api/v1/autorecovery/decommission"
	wantCode(t, "PUT", dec, `{}`, 400)
	wantCode(t, "PUT", dec, `{"bookie_src": "`+string(missing)+`"}`, 409)
	wantCode(t, "GET", dec, "", 405)
	rec := base + "/api/v1/autorecovery/bookie"
	wantCode(t, "PUT", rec, `{"bookie_src": []}`, 400)
	wantCode(t, "PUT", rec, `x`, 400)
	wantCode(t, "GET", rec, ``, 405)
	onIt, err := admin.LedgersOnBookie(ctx, cl.md, missing, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(onIt) == 0 {
		// E=2 of 3: write until one ledger lands on it.
		for len(onIt) == 0 {
			cl.writeLedger(t, 3)
			if onIt, err = admin.LedgersOnBookie(ctx, cl.md, missing, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cl.procs[2].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if body := wantCode(t, "PUT", rec, `{"bookie_src": ["`+string(missing)+`"], "delete_cookie": true}`, 200); body != "Success send recovery request command." {
		t.Errorf("recover: %q", body)
	}
	waitWithin(t, time.Minute, "no ledger on the recovered bookie", func() bool {
		on, err := admin.LedgersOnBookie(ctx, cl.md, missing, true)
		return err == nil && len(on) == 0
	})
	waitFor(t, "its cookie deleted", func() bool {
		_, _, err := cl.md.ReadCookie(ctx, missing)
		return err != nil
	})
}

// TestBKRoutesNeedToken: with an admin token, the destructive routes
// answer 401 without it and the probes stay open.
func TestBKRoutesNeedToken(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	p := procStart(t, cfg, ProcessOptions{})
	<-p.Registered()
	h := NewAdminHandler(prometheus.NewRegistry(), func() []AdminTarget { return []AdminTarget{p} },
		AdminOptions{Token: "s3cret", Metadata: md})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, r := range []struct{ method, path, body string }{
		{"DELETE", "/api/v1/ledger/delete?ledger_id=1", ""},
		{"PUT", "/api/v1/autorecovery/decommission", `{"bookie_src": "x:1"}`},
		{"PUT", "/api/v1/autorecovery/bookie", `{"bookie_src": ["x:1"]}`},
		{"PUT", "/api/v1/bookie/expand_storage", ""},
		{"PUT", "/api/v1/bookie/gc/suspend_compaction", `{"suspendMajor": true}`},
		{"PUT", "/api/v1/bookie/gc/resume_compaction", `{"resumeMajor": true}`},
		{"PUT", "/api/v1/autorecovery/lost_bookie_recovery_delay", `{"delay_seconds": 1}`},
		{"PUT", "/api/v1/autorecovery/trigger_audit", ""},
		{"GET", "/api/v1/config/server_config", ""},
		{"GET", "/api/v1/ledger/metadata?ledger_id=1", ""},
	} {
		if code, body := httpDo(t, r.method, srv.URL+r.path, r.body); code != 401 {
			t.Errorf("%s %s without the token: %d %s", r.method, r.path, code, body)
		}
	}
	if maj, min := p.CompactionSuspended(); maj || min {
		t.Error("compaction suspended without the token")
	}
	req, _ := http.NewRequest("PUT", srv.URL+"/api/v1/bookie/gc/suspend_compaction", strings.NewReader(`{"suspendMajor": true}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if maj, _ := p.CompactionSuspended(); resp.StatusCode != 200 || !maj {
		t.Errorf("with the token: %d, suspended %v", resp.StatusCode, maj)
	}
	wantCode(t, "GET", srv.URL+"/api/v1/bookie/is_ready", "", 200)
	// No ClusterAdmin: the client-backed routes say so.
	req, _ = http.NewRequest("GET", srv.URL+"/api/v1/ledger/read?ledger_id=1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("ledger/read without a ClusterAdmin: %d", resp.StatusCode)
	}
}

func TestReadable(t *testing.T) {
	for v, want := range map[uint64]string{0: "", 999: "", 1000: "(1KB)", 1234567: "(1.234MB)", 5_999_999_999_999_999: "(5999.999TB)"} {
		if got := readable(v); got != want {
			t.Errorf("readable(%d) = %q, want %q", v, got, want)
		}
	}
}
