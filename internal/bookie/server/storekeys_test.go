package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/wire"
)

// loadConf writes a bk_server.conf with lines (and the test's metadata
// URI) and loads it.
func loadConf(t *testing.T, lines ...string) (Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bk_server.conf")
	body := "metadataServiceUri=etcd://127.0.0.1:2379/ledgers\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadConfig(p, Overrides{}, srvQuietLogger())
}

// TestStoreKeysDefaultsAndMapping: BookKeeper's defaults, and each key
// reaching the storage configuration in BookKeeper's units.
func TestStoreKeysDefaultsAndMapping(t *testing.T) {
	cfg, err := loadConf(t)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := StorageConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := ledgerstore.CompactionPolicy{MinorThreshold: 0.2, MinorInterval: time.Hour, MajorThreshold: 0.8, MajorInterval: 24 * time.Hour}
	if sc.MaxEntryLogBytes != 1<<30 || sc.JournalMaxFileBytes != 2048<<20 || sc.JournalMaxBackups != 5 ||
		sc.GCInterval != DefaultGCWaitTime || *sc.Compaction != want || cfg.ForceReadOnlyBookie || cfg.ReadOnlyModeOnAnyDiskFull || cfg.AllowStorageExpansion {
		t.Fatalf("defaults: %+v, compaction %+v", sc, *sc.Compaction)
	}

	cfg, err = loadConf(t,
		"logSizeLimit=65536", "journalMaxSizeMB=3", "journalMaxBackups=0", "gcWaitTime=60000",
		"minorCompactionThreshold=0.1", "minorCompactionInterval=120", "majorCompactionThreshold=0.5", "majorCompactionInterval=600",
		"isForceGCAllowWhenNoSpace=true", "forceAllowCompaction=true", "forceReadOnlyBookie=true",
		"readOnlyModeOnAnyDiskFullEnabled=true", "allowStorageExpansion=true")
	if err != nil {
		t.Fatal(err)
	}
	if sc, err = StorageConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	want = ledgerstore.CompactionPolicy{MinorThreshold: 0.1, MinorInterval: 2 * time.Minute, MajorThreshold: 0.5, MajorInterval: 10 * time.Minute, ForceAllowed: true, ForceWhenNoSpace: true}
	if sc.MaxEntryLogBytes != 65536 || sc.JournalMaxFileBytes != 3<<20 || sc.JournalMaxBackups != 0 || sc.GCInterval != time.Minute ||
		*sc.Compaction != want || !cfg.ForceReadOnlyBookie || !cfg.ReadOnlyModeOnAnyDiskFull || !cfg.AllowStorageExpansion {
		t.Fatalf("set: %+v, compaction %+v", sc, *sc.Compaction)
	}

	// ledgerStateMaxIdleTime: seconds; 0 never evicts; unset takes the
	// store's default (10 minutes, BookKeeper's fixed period).
	if sc.LedgerIdleTime != 0 {
		t.Fatalf("ledgerStateMaxIdleTime unset: %v", sc.LedgerIdleTime)
	}
	for v, want := range map[string]time.Duration{"90": 90 * time.Second, "0": -1} {
		if cfg, err = loadConf(t, "ledgerStateMaxIdleTime="+v); err != nil {
			t.Fatal(err)
		}
		if sc, err = StorageConfig(&cfg); err != nil || sc.LedgerIdleTime != want {
			t.Fatalf("ledgerStateMaxIdleTime=%s: %v, %v; want %v", v, sc.LedgerIdleTime, err, want)
		}
	}
	if cfg, err = loadConf(t, "ledgerStateMaxIdleTime=-5"); err == nil {
		if _, err = StorageConfig(&cfg); err == nil {
			t.Fatal("ledgerStateMaxIdleTime=-5 accepted")
		}
	}

	// Folio's older name for logSizeLimit still works; a disagreement is refused.
	if cfg, err = loadConf(t, "entryLogSizeLimit=131072"); err != nil || cfg.EntryLogSizeLimit != 131072 {
		t.Fatalf("entryLogSizeLimit alias: %v %v", cfg.EntryLogSizeLimit, err)
	}
	if cfg, err = loadConf(t, "entryLogSizeLimit=131072", "logSizeLimit=131072"); err != nil {
		t.Fatalf("agreeing alias refused: %v", err)
	}
	// Compaction disabled by a zero interval or threshold, as in Java.
	if _, err = loadConf(t, "minorCompactionInterval=0", "majorCompactionThreshold=0"); err != nil {
		t.Fatalf("compaction disabled: %v", err)
	}
}

func TestStoreKeysRefused(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{"logSizeLimit=2147483648"}, "logSizeLimit"},
		{[]string{"logSizeLimit=0"}, "logSizeLimit"},
		{[]string{"entryLogSizeLimit=1000", "logSizeLimit=2000"}, "disagree"},
		{[]string{"journalMaxSizeMB=0"}, "journalMaxSizeMB"},
		{[]string{"journalMaxBackups=-1"}, "journalMaxBackups"},
		{[]string{"majorCompactionThreshold=1.5"}, "majorCompactionThreshold"},
		{[]string{"minorCompactionThreshold=abc"}, "minorCompactionThreshold"},
		{[]string{"gcWaitTime=600000", "minorCompactionInterval=60"}, "minorCompactionInterval"},
		{[]string{"gcWaitTime=600000", "majorCompactionInterval=60"}, "majorCompactionInterval"},
		{[]string{"minorCompactionThreshold=0.9"}, "more frequent and less aggressive"},
		{[]string{"minorCompactionInterval=86400"}, "more frequent and less aggressive"},
		{[]string{"forceReadOnlyBookie=true", "readOnlyModeEnabled=false"}, "forceReadOnlyBookie"},
		{[]string{"forceReadOnlyBookie=yes please"}, "forceReadOnlyBookie"},
	} {
		_, err := loadConf(t, tc.lines...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.lines, err, tc.want)
		}
	}
}

func countFiles(t *testing.T, dir, suffix string) int {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range names {
		if strings.HasSuffix(e.Name(), suffix) {
			n++
		}
	}
	return n
}

// writeRaw adds entries 0..n-1 of each ledger through the bookie protocol
// and checks every add was acknowledged.
func writeRaw(t *testing.T, addr string, ledgers []int64, n int, payload []byte) {
	t.Helper()
	c := rawDial(t, addr, wire.ProtocolV3)
	for e := int64(0); e < int64(n); e++ {
		for _, l := range ledgers {
			c.queue(rawAdd(l, e, payload, false))
		}
		c.flush()
		for range ledgers {
			if st := rawStatus(c.recv()); st != wire.StatusOK {
				t.Fatalf("add at entry %d: %v", e, st)
			}
		}
	}
}

// readRaw reads entry e of ledger l through the bookie protocol.
func readRaw(t *testing.T, addr string, l, e int64) (wire.Status, []byte) {
	t.Helper()
	c := rawDial(t, addr, wire.ProtocolV3)
	c.send(rawRead(l, e))
	r := c.recv()
	return rawStatus(r), r.Read.Body
}

// TestForceReadOnlyBookie: a bookie with data restarted with
// forceReadOnlyBookie=true registers read-only, refuses adds, serves its
// entries, and stays read-only when the admin asks for writable.
func TestForceReadOnlyBookie(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.HTTPServerEnabled = true
	p := procStart(t, cfg, ProcessOptions{})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	payload := []byte("written before the restart")
	writeRaw(t, p.Addr().String(), []int64{7, 8}, 3, payload)
	cfg.BookiePort = procPort(p)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	cfg.ForceReadOnlyBookie = true
	p = procStart(t, cfg, ProcessOptions{})
	waitFor(t, "read-only registration", func() bool { w, ro := registered(t, md, p.ID()); return !w && ro })
	addr := p.Addr().String()
	c := rawDial(t, addr, wire.ProtocolV3)
	c.send(rawAdd(9, 0, payload, false))
	if st := rawStatus(c.recv()); st != wire.StatusReadOnly {
		t.Fatalf("add to a forceReadOnlyBookie bookie: %v, want EREADONLY", st)
	}
	for _, l := range []int64{7, 8} {
		for e := int64(0); e < 3; e++ {
			st, body := readRaw(t, addr, l, e)
			if want := rawEntry(l, e, payload); st != wire.StatusOK || string(body) != string(want) {
				t.Fatalf("read %d/%d: %v %q", l, e, st, body)
			}
		}
	}
	base := "http://" + p.HTTPAddr()
	if code, body := httpDo(t, "PUT", base+"/api/v1/bookie/state/readonly", `{"readOnly": false}`); code == 200 || !strings.Contains(body, "forceReadOnly") {
		t.Fatalf("PUT writable on a forceReadOnlyBookie bookie: %d %s", code, body)
	}
	if _, err := p.SetReadOnly(false); !errors.Is(err, ErrForceReadOnly) {
		t.Fatalf("SetReadOnly(false): %v", err)
	}
	p.state.Check()
	if !p.Bookie().ReadOnly() {
		t.Fatal("writable after the admin's request and a disk check")
	}
	if w, ro := registered(t, md, p.ID()); w || !ro {
		t.Fatalf("registration after the admin's request: writable %v read-only %v", w, ro)
	}
	if st := p.State(); !st.ReadOnly {
		t.Fatalf("state: %+v", st)
	}
}

// TestProcessEntryLogJournalAndCompactionKeys: through a real bookie on
// real files, logSizeLimit seals small entry logs, journalMaxSizeMB rotates
// journal files and journalMaxBackups keeps two of them after the final
// checkpoint; a manual GC (PUT /api/v1/bookie/gc) deletes the ledger whose
// metadata is gone and compacts (major, by default) the logs it leaves
// half dead, and every entry of the live ledger reads back, also after a
// restart.
func TestProcessEntryLogJournalAndCompactionKeys(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)
	cfg.LedgerDirs = cfg.LedgerDirs[:1]
	cfg.HTTPServerEnabled = true
	cfg.EntryLogSizeLimit = 64 << 10
	cfg.JournalMaxSizeMB = 1
	cfg.JournalMaxBackups = 2
	cfg.Props["flushInterval"] = "3600000" // checkpoints only when the test says
	p := procStart(t, cfg, ProcessOptions{})
	waitFor(t, "writable registration", func() bool { w, _ := registered(t, md, p.ID()); return w })
	gcCreate(t, md, 1) // ledger 2 has no metadata: GC deletes it
	payload := make([]byte, 1000)
	for i := range payload {
		payload[i] = byte(i)
	}
	const entries = 2000 // ~4 MB over two ledgers: several journal files, many entry logs
	writeRaw(t, p.Addr().String(), []int64{1, 2}, entries, payload)
	ledgerDir := filepath.Join(CurrentDir(cfg.LedgerDirs[0]), "entrylogs")
	st := p.Store().(*ledgerstore.Store)
	if err := st.FlushWriteCache(); err != nil {
		t.Fatal(err)
	}
	logsBefore := countFiles(t, ledgerDir, ".log")
	if logsBefore < 10 {
		t.Fatalf("%d entry logs for ~4 MB with logSizeLimit=65536", logsBefore)
	}

	base := "http://" + p.HTTPAddr()
	if code, _ := httpDo(t, "PUT", base+"/api/v1/bookie/gc", ""); code != 200 {
		t.Fatalf("PUT gc: %d", code)
	}
	waitFor(t, "ledger 2 deleted", func() bool { r, n := p.GC().Last(); return n >= 1 && len(r.Deleted) == 1 })
	// The first trigger's compaction may have run before the deletion:
	// trigger again until the half-dead logs are compacted.
	waitFor(t, "compaction of the half-dead logs", func() bool {
		p.TriggerGC()
		return countFiles(t, ledgerDir, ".log") <= logsBefore*2/3
	})
	addr := p.Addr().String()
	check := func(addr string) {
		for e := int64(0); e < entries; e += 37 {
			st, body := readRaw(t, addr, 1, e)
			if want := rawEntry(1, e, payload); st != wire.StatusOK || string(body) != string(want) {
				t.Fatalf("read 1/%d: %v", e, st)
			}
		}
		if st, _ := readRaw(t, addr, 2, 0); st != wire.StatusNoLedger && st != wire.StatusNoEntry {
			t.Fatalf("read of the deleted ledger: %v", st)
		}
	}
	check(addr)
	cfg.BookiePort = procPort(p)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The shutdown's checkpoint dropped the journal files before its
	// position but the two newest of them.
	if n := countFiles(t, CurrentDir(cfg.JournalDirs[0]), ".jnl"); n != 3 {
		t.Fatalf("%d journal files after the final checkpoint, want 2 backups and the current one", n)
	}
	p = procStart(t, cfg, ProcessOptions{})
	check(p.Addr().String())
}

// TestReadAheadKeys: BookKeeper's read-ahead batch keys, with its meanings
// (batch size ≤ 0: no read-ahead; batch bytes -1, its default: no byte
// bound), negative values accepted where BookKeeper gives them one.
func TestReadAheadKeys(t *testing.T) {
	for _, tc := range []struct {
		lines   []string
		entries int
		bytes   int64
	}{
		{nil, 0, 0}, // unset: the store's defaults (100, no byte bound)
		{[]string{"dbStorage_readAheadCacheBatchSize=100", "dbStorage_readAheadCacheBatchBytesSize=-1"}, 100, 0},
		{[]string{"dbStorage_readAheadCacheBatchSize=7", "dbStorage_readAheadCacheBatchBytesSize=65536"}, 7, 65536},
		{[]string{"dbStorage_readAheadCacheBatchSize=0"}, -1, 0},
		{[]string{"dbStorage_readAheadCacheBatchSize=-5"}, -1, 0},
	} {
		cfg, err := loadConf(t, tc.lines...)
		if err != nil {
			t.Fatalf("%v: %v", tc.lines, err)
		}
		sc, err := StorageConfig(&cfg)
		if err != nil {
			t.Fatalf("%v: %v", tc.lines, err)
		}
		if sc.ReadAheadEntries != tc.entries || sc.ReadAheadBytes != tc.bytes {
			t.Errorf("%v: ReadAheadEntries %d ReadAheadBytes %d, want %d %d", tc.lines, sc.ReadAheadEntries, sc.ReadAheadBytes, tc.entries, tc.bytes)
		}
	}
	cfg, err := loadConf(t, "dbStorage_readAheadCacheMaxSizeMb=-1")
	if err == nil {
		_, err = StorageConfig(&cfg)
	}
	if err == nil || !strings.Contains(err.Error(), "dbStorage_readAheadCacheMaxSizeMb") {
		t.Fatalf("negative cache size: %v", err)
	}
}
