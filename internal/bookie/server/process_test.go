package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/memory"
)

// procConfig is a bookie configuration for tests: free ports on loopback,
// directories under a fresh temporary directory, short timings.
func procConfig(t *testing.T, uri string) Config {
	t.Helper()
	dir := t.TempDir()
	c := DefaultConfig()
	c.BookiePort = 0
	c.ListenHost = "127.0.0.1"
	c.AllowLoopback = true
	c.AdvertisedAddress = "127.0.0.1"
	c.JournalDirs = []string{filepath.Join(dir, "journal")}
	c.LedgerDirs = []string{filepath.Join(dir, "ledgers1"), filepath.Join(dir, "ledgers2")}
	c.MetadataServiceURI = uri
	c.SessionTTL = 2 * time.Second
	c.RegistrationRetry = 100 * time.Millisecond
	c.HTTPServerHost = "127.0.0.1"
	c.HTTPServerPort = 0
	c.GCWaitTime = time.Hour
	c.DiskCheckInterval = 100 * time.Millisecond
	c.ShutdownTimeout = 2 * time.Second
	return c
}

func procEtcd(t *testing.T) (uri string, md metadata.Driver) {
	t.Helper()
	srv := etcdtest.Start(t)
	uri = etcdtest.URI(srv, etcdtest.Scope(t))
	ctx := context.Background()
	d, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	return uri, d
}

func procStart(t *testing.T, cfg Config, opts ProcessOptions) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := StartProcess(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func registered(t *testing.T, md metadata.Driver, id metadata.BookieID) (writable, readOnly bool) {
	t.Helper()
	w, err := md.WritableBookies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r, err := md.ReadOnlyBookies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(w, id), slices.Contains(r, id)
}

func procPort(p *Process) int { return p.Addr().(*net.TCPAddr).Port }

func TestProcessRefusesWipedDirectory(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	p := procStart(t, cfg, ProcessOptions{})
	cfg.BookiePort = procPort(p) // the same id on restart
	waitFor(t, "registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w, r := registered(t, md, p.ID()); w || r {
		t.Fatal("still registered after shutdown")
	}
	for _, d := range cfg.AllDirs() {
		if _, err := os.Stat(filepath.Join(d, "current", "VERSION")); err != nil {
			t.Fatalf("cookie missing in %s: %v", d, err)
		}
	}
	// A clean restart passes the check.
	p2 := procStart(t, cfg, ProcessOptions{})
	if err := p2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Wipe one ledger directory: the bookie must refuse to start, and say
	// why and what to do.
	if err := os.RemoveAll(cfg.LedgerDirs[1]); err != nil {
		t.Fatal(err)
	}
	_, err := StartProcess(context.Background(), cfg, ProcessOptions{})
	var ce *CookieError
	if !errors.As(err, &ce) {
		t.Fatalf("start after wipe: %v, want a *CookieError", err)
	}
	msg := err.Error() + " " + ce.Hint
	for _, want := range []string{cfg.LedgerDirs[1], "no cookie", "wiped", "cookie delete", "bookieformat"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not mention %q: %s", want, msg)
		}
	}
	if w, r := registered(t, md, p.ID()); w || r {
		t.Fatal("a refused bookie registered")
	}

	// A directory swapped in from another bookie is refused too.
	other := procConfig(t, uri)
	po := procStart(t, other, ProcessOptions{})
	if err := po.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other.LedgerDirs[1], cfg.LedgerDirs[1]); err != nil {
		t.Fatal(err)
	}
	_, err = StartProcess(context.Background(), cfg, ProcessOptions{})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("start with a swapped directory: %v", err)
	}

	// bookieformat resets it deliberately: then it starts as a new bookie.
	if err := FormatBookie(context.Background(), md, &cfg, p.ID()); err != nil {
		t.Fatal(err)
	}
	p3 := procStart(t, cfg, ProcessOptions{})
	waitFor(t, "registration after format", func() bool { w, _ := registered(t, md, p3.ID()); return w })
}

func TestRegistrarModesAndSessionLoss(t *testing.T) {
	ms := memory.NewStore(memory.Options{})
	md := ms.Open()
	defer md.Close()
	id := metadata.BookieID("127.0.0.1:3181")
	r := NewRegistrar(md, id, false, RegistrarOptions{SessionTTL: time.Second, Retry: 10 * time.Millisecond, Logger: slog.Default()})
	ctx, cancel := context.WithCancel(context.Background())
	go r.Run(ctx)
	<-r.Ready()
	if w, ro := registered(t, md, id); !w || ro {
		t.Fatalf("writable %v read-only %v", w, ro)
	}
	r.SetReadOnly(true)
	waitFor(t, "read-only key", func() bool { w, ro := registered(t, md, id); return !w && ro })
	r.SetReadOnly(false)
	waitFor(t, "writable key", func() bool { w, ro := registered(t, md, id); return w && !ro })

	// The lease expires (a partition, a paused process): the registrar
	// opens a new session and registers again.
	r.mu.Lock()
	sess := r.mu.session
	r.mu.Unlock()
	ms.ExpireSession(sess)
	waitFor(t, "re-registration", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.session != sess && r.mu.registered
	})
	if w, _ := registered(t, md, id); !w {
		t.Fatal("not registered after session loss")
	}
	cancel()
	<-r.Done()
	if err := r.Deregister(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w, ro := registered(t, md, id); w || ro {
		t.Fatal("still registered after Deregister")
	}
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProcessHTTPEndpoints(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.HTTPServerEnabled = true
	cfg.HTTPSecurity.PprofEnabled = true
	p := procStart(t, cfg, ProcessOptions{})
	base := "http://" + p.HTTPAddr()
	waitFor(t, "registration", func() bool { w, _ := registered(t, md, p.ID()); return w })

	if code, body := httpDo(t, "GET", base+"/heartbeat", ""); code != 200 || body != "OK\n" {
		t.Errorf("heartbeat: %d %q", code, body)
	}
	code, body := httpDo(t, "GET", base+"/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, name := range []string{
		"bookkeeper_server_ADD_ENTRY_REQUEST", "bookkeeper_server_READ_ENTRY_REQUEST", "bookkeeper_server_READ_ENTRY_FENCE_REQUEST",
		"bookkeeper_server_ADD_ENTRY", "bookie_SERVER_STATUS 1", "bookie_journal_JOURNAL_QUEUE_SIZE", "bookie_journal_JOURNAL_SYNC",
		"bookkeeper_server_REQUESTS_IN_PROGRESS", "bookie_DELETED_LEDGER_COUNT", "go_goroutines",
	} {
		if !strings.Contains(body, name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	code, body = httpDo(t, "GET", base+"/api/v1/bookie/info", "")
	var info BookieInfo
	if code != 200 || json.Unmarshal([]byte(body), &info) != nil || info.TotalSpace == 0 {
		t.Errorf("info: %d %s", code, body)
	}
	if code, body := httpDo(t, "GET", base+"/api/v1/bookie/is_ready", ""); code != 200 || body != "OK\n" {
		t.Errorf("is_ready: %d %q", code, body)
	}
	var st BookieState
	code, body = httpDo(t, "GET", base+"/api/v1/bookie/state", "")
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || !st.Running || st.ReadOnly {
		t.Errorf("state: %d %s", code, body)
	}

	// The admin's read-only switch moves the registration.
	if code, body := httpDo(t, "PUT", base+"/api/v1/bookie/state/readonly", `{"readOnly": true}`); code != 200 || !strings.Contains(body, "true") {
		t.Fatalf("PUT readonly: %d %s", code, body)
	}
	waitFor(t, "read-only registration", func() bool { w, ro := registered(t, md, p.ID()); return !w && ro })
	if code, body := httpDo(t, "GET", base+"/api/v1/bookie/state/readonly", ""); code != 200 || !strings.Contains(body, "true") {
		t.Errorf("GET readonly: %d %s", code, body)
	}
	if _, body := httpDo(t, "GET", base+"/metrics", ""); !strings.Contains(body, "bookie_SERVER_STATUS 0") {
		t.Error("SERVER_STATUS not 0 when read-only")
	}
	if code, _ := httpDo(t, "PUT", base+"/api/v1/bookie/state/readonly", `{"readOnly": false}`); code != 200 {
		t.Fatalf("PUT writable: %d", code)
	}
	waitFor(t, "writable registration", func() bool { w, ro := registered(t, md, p.ID()); return w && !ro })
	if code, _ := httpDo(t, "PUT", base+"/api/v1/bookie/state/readonly", `nonsense`); code != 400 {
		t.Errorf("bad body: %d", code)
	}
	if code, _ := httpDo(t, "DELETE", base+"/api/v1/bookie/state", ""); code != 405 {
		t.Errorf("DELETE state: %d", code)
	}

	// PUT gc runs a pass now.
	if code, _ := httpDo(t, "PUT", base+"/api/v1/bookie/gc", ""); code != 200 {
		t.Errorf("PUT gc: %d", code)
	}
	waitFor(t, "triggered gc pass", func() bool { _, n := p.GC().Last(); return n == 1 })
	if code, body := httpDo(t, "GET", base+"/api/v1/bookie/gc", ""); code != 200 || !strings.Contains(body, "is_in_force_gc") {
		t.Errorf("GET gc: %d %s", code, body)
	}
	if code, _ := httpDo(t, "GET", base+"/debug/pprof/", ""); code != 200 {
		t.Errorf("pprof: %d", code)
	}
}
