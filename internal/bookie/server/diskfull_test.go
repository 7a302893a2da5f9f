package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// usageFS is the OS file system with the disk usage the test says: a
// directory it marks full reports 99% used, every other one 50% (a real
// disk cannot be filled on demand, and the test machine's own usage must
// not decide). Everything else is the OS's.
type usageFS struct {
	vfs.FS
	mu   sync.Mutex
	full []string // configured directories reported full
}

func newUsageFS() *usageFS { return &usageFS{FS: vfs.Default} }

// setFull makes exactly dirs report full.
func (f *usageFS) setFull(dirs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full = slices.Clone(dirs)
}

func (f *usageFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const total = 100 << 30
	for _, d := range f.full {
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
			return vfs.DiskUsage{TotalBytes: total, AvailBytes: total / 100, UsedBytes: total - total/100}, nil
		}
	}
	return vfs.DiskUsage{TotalBytes: total, AvailBytes: total / 2, UsedBytes: total / 2}, nil
}

// payloadOf is entry e of ledger l's payload: unique, so that the test
// can find where the bookie stored it.
func payloadOf(l, e int64) []byte {
	return []byte(fmt.Sprintf("disk-full-test ledger %d entry %d %s", l, e, strings.Repeat("x", 200)))
}

// writeLedgers writes n closed ledgers of entries entries each (E=Qw=Qa=1)
// through a real client and returns their ids.
func writeLedgers(t *testing.T, c *client.Client, n, entries int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []int64
	for range n {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(entries) {
			if _, err := w.Append(ctx, payloadOf(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID())
	}
	return ids
}

// readLedgers reads every entry of ids back through a new client.
func readLedgers(t *testing.T, uri string, ids []int64, entries int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, id := range ids {
		r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Read(ctx, 0, int64(entries-1))
		if err != nil {
			t.Fatalf("read ledger %d: %v", id, err)
		}
		for e, en := range got {
			if !bytes.Equal(en.Payload, payloadOf(id, int64(e))) {
				t.Fatalf("ledger %d entry %d: %q", id, e, en.Payload)
			}
		}
		if len(got) != entries {
			t.Fatalf("ledger %d: %d entries, want %d", id, len(got), entries)
		}
	}
}

// filesHolding returns the files under root (relative to it) that contain
// data.
func filesHolding(t *testing.T, root string, data []byte) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, data) {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gauge returns the value of the gauge name with labels (nil: none) in
// reg, and whether it exists.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
					continue next
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func newTestClient(t *testing.T, uri string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestProcessLedgerDirFullSpills: a bookie with two ledger directories,
// one reported full, stays writable; the entries of the full directory's
// ledgers land in the other one (found there by their bytes, not in the
// full one) and read back through a real client, also after a restart.
// With both full the bookie turns read-only (registration, metrics naming
// the directories); one freed (below the low-water mark) makes it
// writable again.
func TestProcessLedgerDirFullSpills(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold = 0.95, 0.9
	cfg.DiskCheckInterval = time.Hour // the test checks when it says
	ufs := newUsageFS()
	reg := prometheus.NewRegistry()
	p := procStart(t, cfg, ProcessOptions{FS: ufs, Registry: reg})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	c := newTestClient(t, uri)
	const entries = 20
	// A first ledger says which shard the metadata store's ledger ids
	// fall in (ledger id mod 2): its directory is the one to fill.
	probe := writeLedgers(t, c, 1, entries)
	shard := int(probe[0] % 2)
	full, other := cfg.LedgerDirs[shard], cfg.LedgerDirs[1-shard]

	ufs.setFull(full)
	if p.state.Check() {
		t.Fatal("read-only with one of two ledger directories full")
	}
	if v, ok := gauge(t, reg, "folio_bookie_dir_full", map[string]string{"kind": "ledger", "dir": full}); !ok || v != 1 {
		t.Fatalf("folio_bookie_dir_full of %s: %v %v", full, v, ok)
	}
	if v, _ := gauge(t, reg, "bookie_ledger_writable_dirs", nil); v != 1 {
		t.Fatalf("bookie_ledger_writable_dirs %v, want 1", v)
	}
	if v, ok := gauge(t, reg, javaDirUsageName(full), nil); !ok || v < 95 {
		t.Fatalf("%s: %v %v", javaDirUsageName(full), v, ok)
	}

	ids := writeLedgers(t, c, 8, entries)
	if !slices.ContainsFunc(ids, func(id int64) bool { return int(id%2) == shard }) {
		t.Fatalf("no ledger of the full directory's shard among %v", ids)
	}
	if err := p.Store().(*ledgerstore.Store).FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		for _, e := range []int64{0, entries - 1} {
			data := payloadOf(id, e)
			if in := filesHolding(t, filepath.Join(CurrentDir(full), "entrylogs"), data); len(in) > 0 {
				t.Fatalf("ledger %d entry %d went to the full directory: %v", id, e, in)
			}
			if in := filesHolding(t, CurrentDir(other), data); len(in) != 1 {
				t.Fatalf("ledger %d entry %d: in %v of %s, want one entry log", id, e, in, other)
			}
		}
	}
	files, err := p.DiskFiles() // list_disk_file
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files["entrylog"], func(f string) bool { return strings.HasPrefix(f, fmt.Sprintf("entrylogs-shard-%d/", shard)) }) {
		t.Fatalf("list_disk_file's entry logs %v lack the spilled ones", files["entrylog"])
	}
	ids = append(ids, probe...)
	readLedgers(t, uri, ids, entries)

	cfg.BookiePort = procPort(p)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg = prometheus.NewRegistry()
	p = procStart(t, cfg, ProcessOptions{FS: ufs, Registry: reg})
	waitFor(t, "writable registration after the restart", func() bool { w, _ := registered(t, md, p.ID()); return w })
	readLedgers(t, uri, ids, entries)

	ufs.setFull(full, other)
	if !p.state.Check() {
		t.Fatal("writable with every ledger directory full")
	}
	waitFor(t, "read-only registration", func() bool { _, r := registered(t, md, p.ID()); return r })
	if v, _ := gauge(t, reg, "bookie_READ_ONLY_CAUSE", map[string]string{"cause": "disk_full"}); v != 1 {
		t.Fatalf("bookie_READ_ONLY_CAUSE{disk_full} %v", v)
	}
	for _, d := range []string{full, other} {
		if v, _ := gauge(t, reg, "folio_bookie_dir_full", map[string]string{"kind": "ledger", "dir": d}); v != 1 {
			t.Fatalf("folio_bookie_dir_full of %s: %v", d, v)
		}
	}
	readLedgers(t, uri, ids, entries) // a read-only bookie serves reads

	ufs.setFull(full)
	if p.state.Check() {
		t.Fatal("read-only after a ledger directory freed up")
	}
	waitFor(t, "writable registration again", func() bool { w, _ := registered(t, md, p.ID()); return w })
	if v, _ := gauge(t, reg, "folio_bookie_dir_full", map[string]string{"kind": "ledger", "dir": other}); v != 0 {
		t.Fatalf("folio_bookie_dir_full of %s after it freed up: %v", other, v)
	}
}

// TestProcessDiskFullPolicies: a full journal directory makes the bookie
// read-only with its ledger directories writable; with
// readOnlyModeOnAnyDiskFullEnabled=true one full ledger directory of two
// does.
func TestProcessDiskFullPolicies(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.DiskCheckInterval = time.Hour
	ufs := newUsageFS()
	p := procStart(t, cfg, ProcessOptions{FS: ufs})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	ufs.setFull(cfg.JournalDirs[0])
	if !p.state.Check() {
		t.Fatal("writable with its journal directory full")
	}
	waitFor(t, "read-only registration", func() bool { _, r := registered(t, md, p.ID()); return r })
	if w := p.state.WritableLedgerDirs(); w != 2 {
		t.Fatalf("%d writable ledger directories with only the journal full", w)
	}
	ufs.setFull()
	if p.state.Check() {
		t.Fatal("read-only after the journal directory freed up")
	}

	cfg.BookiePort = procPort(p)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.ReadOnlyModeOnAnyDiskFull = true
	p = procStart(t, cfg, ProcessOptions{FS: ufs})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	ufs.setFull(cfg.LedgerDirs[1])
	if !p.state.Check() {
		t.Fatal("writable with a full ledger directory and readOnlyModeOnAnyDiskFullEnabled=true")
	}
	waitFor(t, "read-only registration", func() bool { _, r := registered(t, md, p.ID()); return r })
}

// TestProcessStorageExpansion: a bookie with data and one ledger directory
// is started with a second one appended. Without allowStorageExpansion it
// is refused, naming the key and the directory, before anything is
// written. With it, it starts: the cookie in the metadata store and in
// every directory lists the new directory, every entry reads back through
// a real client, and with the old directory full new entries land in the
// new one. The key is needed once: a restart without it starts (the
// cookie lists the directory); the configuration of before is refused (a
// directory cannot be removed).
func TestProcessStorageExpansion(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.LedgerDirs = cfg.LedgerDirs[:1]
	cfg.DiskCheckInterval = time.Hour
	p := procStart(t, cfg, ProcessOptions{})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	c := newTestClient(t, uri)
	const entries = 10
	before := writeLedgers(t, c, 4, entries)
	cfg.BookiePort = procPort(p)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	old, added := cfg.LedgerDirs[0], filepath.Join(t.TempDir(), "ledgers-new")
	exp := cfg
	exp.LedgerDirs = []string{old, added}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	q, err := StartProcess(ctx, exp, ProcessOptions{})
	cancel()
	if err == nil {
		q.Shutdown(context.Background())
		t.Fatal("a bookie with data started with an added ledger directory without allowStorageExpansion")
	}
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "allowStorageExpansion") || !strings.Contains(err.Error(), added) {
		t.Fatalf("%v, want a cookie error naming allowStorageExpansion and %s", err, added)
	}
	if _, err := os.Stat(CurrentDir(added)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start wrote into the new directory: %v", err)
	}

	exp.AllowStorageExpansion = true
	ufs := newUsageFS()
	p = procStart(t, exp, ProcessOptions{FS: ufs})
	waitFor(t, "writable registration after the expansion", func() bool { w, _ := registered(t, md, p.ID()); return w })
	wantStoredCookie(t, md, p.ID(), &exp)
	readLedgers(t, uri, before, entries)

	ufs.setFull(old)
	if p.state.Check() {
		t.Fatal("read-only with the new directory empty")
	}
	after := writeLedgers(t, c, 4, entries)
	if err := p.Store().(*ledgerstore.Store).FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	for _, id := range after {
		data := payloadOf(id, entries-1)
		if in := filesHolding(t, CurrentDir(added), data); len(in) != 1 {
			t.Fatalf("ledger %d: in %v of the new directory, want one entry log", id, in)
		}
		if in := filesHolding(t, filepath.Join(CurrentDir(old), "entrylogs"), data); len(in) > 0 {
			t.Fatalf("ledger %d went to the full directory: %v", id, in)
		}
	}
	all := slices.Concat(before, after)
	readLedgers(t, uri, all, entries)

	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.AllowStorageExpansion = false
	p = procStart(t, exp, ProcessOptions{})
	waitFor(t, "writable registration without the key", func() bool { w, _ := registered(t, md, p.ID()); return w })
	readLedgers(t, uri, all, entries)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	q, err = StartProcess(ctx, cfg, ProcessOptions{})
	cancel()
	if err == nil {
		q.Shutdown(context.Background())
		t.Fatal("the bookie started without a ledger directory its entry logs are on")
	}
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), added) {
		t.Fatalf("%v, want a cookie error naming %s", err, added)
	}
}

// wantStoredCookie fails unless the metadata store's cookie of id lists
// cfg's ledger directories and every directory carries the same bytes.
func wantStoredCookie(t *testing.T, md metadata.Driver, id metadata.BookieID, cfg *Config) {
	t.Helper()
	data, _, err := md.ReadCookie(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := metadata.ParseCookie(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.LedgerDirs, cfg.LedgerDirs) {
		t.Fatalf("stored cookie lists %v, want %v", c.LedgerDirs, cfg.LedgerDirs)
	}
	for _, d := range cfg.AllDirs() {
		local, err := os.ReadFile(filepath.Join(CurrentDir(d), VersionFile))
		if err != nil || !bytes.Equal(local, data) {
			t.Fatalf("cookie in %s: %q %v, want the stored one", d, local, err)
		}
	}
}

// TestProcessExpandStorageOffline: `updatecookie --expandstorage` with the
// bookie stopped (ExpandStorage) adds the directory to the cookies; the
// bookie then starts without allowStorageExpansion, its storage takes the
// directory, every entry reads back; PUT /api/v1/bookie/expand_storage on
// the running bookie re-checks the cookies (Java's), and fails once they
// no longer match.
func TestProcessExpandStorageOffline(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.LedgerDirs = cfg.LedgerDirs[:1]
	cfg.HTTPServerEnabled = true
	p := procStart(t, cfg, ProcessOptions{})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	c := newTestClient(t, uri)
	const entries = 5
	ids := writeLedgers(t, c, 3, entries)
	cfg.BookiePort = procPort(p)
	id := p.ID()

	exp := cfg
	exp.LedgerDirs = []string{cfg.LedgerDirs[0], filepath.Join(t.TempDir(), "ledgers-new")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ExpandStorage(ctx, md, &exp, id); err == nil || !strings.Contains(err.Error(), "registered (running)") {
		t.Fatalf("expandstorage on a running bookie: %v", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "deregistration", func() bool { w, r := registered(t, md, id); return !w && !r })
	res, err := ExpandStorage(ctx, md, &exp, id)
	if err != nil || !slices.Equal(res.Added, exp.LedgerDirs[1:]) {
		t.Fatalf("expandstorage: %+v %v", res, err)
	}
	wantStoredCookie(t, md, id, &exp)
	if res, err := ExpandStorage(ctx, md, &exp, id); err != nil || len(res.Added) != 0 {
		t.Fatalf("expandstorage again: %+v %v", res, err)
	}

	p = procStart(t, exp, ProcessOptions{})
	waitFor(t, "writable registration after the expansion", func() bool { w, _ := registered(t, md, p.ID()); return w })
	readLedgers(t, uri, ids, entries)
	if _, err := os.Stat(filepath.Join(CurrentDir(exp.LedgerDirs[1]), "LAYOUT")); err != nil {
		t.Fatalf("the storage did not take the new directory: %v", err)
	}
	base := "http://" + p.HTTPAddr()
	if body := wantCode(t, "PUT", base+"/api/v1/bookie/expand_storage", "", 200); body != "Success expand storage" {
		t.Fatalf("expand_storage: %q", body)
	}
	// A directory's cookie replaced behind the bookie's back: the check
	// fails.
	if err := os.WriteFile(filepath.Join(CurrentDir(exp.LedgerDirs[1]), VersionFile), []byte("4\nbookieHost: \"10.0.0.1:3181\"\njournalDir: \"x\"\nledgerDirs: \"1\\tx\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "PUT", base+"/api/v1/bookie/expand_storage", "", 500)
}
