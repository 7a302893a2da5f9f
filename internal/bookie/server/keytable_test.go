package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The configuration fixtures: what operators run Java bookies with.
var confFixtures = []string{
	"testdata/bookkeeper-4.17.4-bk_server.conf",
	"testdata/pulsar-bookkeeper.conf",
	"testdata/pulsar-helm-bookkeeper.conf",
}

// fixtureDirs points a fixture's directories at a test directory: the
// only adaptation the fixtures get.
func fixtureDirs(t *testing.T) []string {
	d := t.TempDir()
	return []string{
		"journalDirectories=" + filepath.Join(d, "journal"),
		"journalDirectory=" + filepath.Join(d, "journal"),
		"ledgerDirectories=" + filepath.Join(d, "ledgers"),
		"indexDirectories=",
	}
}

// jsonLogs captures a logger's records.
type jsonLogs struct{ buf bytes.Buffer }

func (l *jsonLogs) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *jsonLogs) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// bkSampleKeys returns every key of BookKeeper's sample file, set or
// commented out ("#key=value", "# key=value").
func bkSampleKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/bookkeeper-4.17.4-bk_server.conf")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^#? ?([a-zA-Z][a-zA-Z0-9_.]*)=`)
	var keys []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(keys, m[1]) {
			keys = append(keys, m[1])
		}
	}
	if len(keys) < 200 {
		t.Fatalf("found only %d keys in the sample", len(keys))
	}
	return keys
}

// TestKeyTableCoversBookKeeper417: every key of BookKeeper 4.17's sample
// bk_server.conf, set or commented out, is in the table.
func TestKeyTableCoversBookKeeper417(t *testing.T) {
	for _, k := range bkSampleKeys(t) {
		if _, ok := LookupKey(k); !ok {
			t.Errorf("BookKeeper 4.17 key %s is not in the key table (keytable.go)", k)
		}
	}
	// Keys ServerConfiguration reads that the sample does not mention.
	for _, k := range []string{"auditorReplicasCheckInterval", "localScrubInterval", "localScrubRateLimit",
		"localConsistencyCheckOnStartup", "dataIntegrityChecking", "replicationRateByBytes", "maxAddsInProgressLimit",
		"repairedPlacementPolicyNotAdheringBookieEnabled", "underreplicatedLedgerRecoveryGracePeriod", "skipReplayJournalInvalidRecord"} {
		if _, ok := LookupKey(k); !ok {
			t.Errorf("BookKeeper 4.17 key %s is not in the key table", k)
		}
	}
}

// TestKeyTableConsistency: the table's implemented keys are exactly the
// keys with a setter or a reader; every entry has a reason; the checks the
// issue asks about are classified as documented.
func TestKeyTableConsistency(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range bkKeys {
		if seen[k.Name] {
			t.Errorf("%s is in the table twice", k.Name)
		}
		seen[k.Name] = true
		if strings.TrimSpace(k.Reason) == "" {
			t.Errorf("%s has no reason", k.Name)
		}
		impl := implementedKey(k.Name)
		sasl := slices.Contains(unsupportedSecurityKeys, k.Name)
		switch {
		case sasl && k.Class != NotSupported:
			t.Errorf("%s: a SASL key (refused by its setter) must be classed not supported", k.Name)
		case !sasl && impl && k.Class != Implemented:
			t.Errorf("%s is implemented (configKeys, storageKeys or propsKeys) but classed %q in keytable.go: make it impl(...) with its default and reason", k.Name, k.Class)
		case !impl && k.Class == Implemented:
			t.Errorf("%s is classed implemented but nothing reads it", k.Name)
		}
		if k.Class != NotSupported && (k.RefuseWhen != nil || k.WarnWhen != nil) {
			t.Errorf("%s: only not-supported keys refuse or warn", k.Name)
		}
		if k.Class == NotSupported && k.RefuseWhen == nil && k.WarnWhen == nil {
			t.Errorf("%s: a not-supported key must refuse or warn", k.Name)
		}
	}
	for _, name := range knownKeyNames() {
		if !seen[name] {
			t.Errorf("implemented key %s is not in the key table (keytable.go)", name)
		}
	}
	// The three: none is implemented; each refuses a value that
	// enables it and accepts the disabled (and, for over-replicated GC,
	// the default) value.
	for _, c := range []struct{ key, refused, accepted string }{
		{"auditorReplicasCheckInterval", "3600", "0"},
		{"localScrubInterval", "86400", "0"},
		{"gcOverreplicatedLedgerWaitTime", "3600000", "86400000"},
		{"gcOverreplicatedLedgerWaitTime", "3600000", "0"},
	} {
		k, _ := LookupKey(c.key)
		if k.Class != NotSupported || k.RefuseWhen == nil || !k.RefuseWhen.Holds(c.refused) || k.RefuseWhen.Holds(c.accepted) {
			t.Errorf("%s: class %q, want not supported, refusing %s and accepting %s", c.key, k.Class, c.refused, c.accepted)
		}
	}
}

// TestImplementedDefaults: setting an implemented key to its documented
// default changes nothing, so the table's defaults are the code's.
func TestImplementedDefaults(t *testing.T) {
	// Keys whose documented default is BookKeeper's spelling of what the
	// zero value means in Config.
	skip := []string{"journalDirectory"} // an alias: checked through journalDirectories
	def := DefaultConfig()
	for _, k := range bkKeys {
		if k.Class != Implemented || k.Default == "" || slices.Contains(skip, k.Name) {
			continue
		}
		if _, ok := findKey(k.Name); !ok {
			continue // storage and props keys: read where used
		}
		c := DefaultConfig()
		if err := c.Set(k.Name, k.Default, nil); err != nil {
			t.Errorf("%s=%s: %v", k.Name, k.Default, err)
			continue
		}
		c.Props, c.Sources = def.Props, def.Sources
		if !reflect.DeepEqual(c, def) {
			t.Errorf("%s: the documented default %q differs from the code's", k.Name, k.Default)
		}
	}
}

// TestFixturesLoad: each fixture loads, every key honoured or classed
// irrelevant: no unknown key, no refusal, the irrelevant keys listed in
// one INFO line.
func TestFixturesLoad(t *testing.T) {
	for _, f := range confFixtures {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var logs jsonLogs
			cfg, err := LoadConfig(f, Overrides{Set: fixtureDirs(t)}, logs.logger())
			if err != nil {
				t.Fatal(err)
			}
			infos := 0
			for _, r := range logs.records(t) {
				msg, _ := r["msg"].(string)
				if strings.Contains(msg, "unknown configuration key") {
					t.Errorf("unknown key: %v", r)
				}
				if strings.Contains(msg, "no meaning for Folio") {
					infos++
					if r["level"] != "INFO" || r["keys"] == "" {
						t.Errorf("irrelevant keys line: %v", r)
					}
				}
				if r["level"] == "WARN" && !strings.Contains(msg, "not supported by Folio; accepted without effect") {
					t.Errorf("unexpected warning: %v", r)
				}
			}
			if infos != 1 {
				t.Errorf("%d lines listing irrelevant keys, want 1:\n%s", infos, logs.buf.String())
			}
			for k, src := range cfg.Sources {
				if !strings.HasPrefix(src, f+":") && src != "--set" {
					t.Errorf("%s: source %q", k, src)
				}
			}
		})
	}
}

// TestFixtureValues spot-checks that the fixtures mean the same in Folio.
func TestFixtureValues(t *testing.T) {
	load := func(f string, set ...string) Config {
		t.Helper()
		cfg, err := LoadConfig(f, Overrides{Set: append(fixtureDirs(t), set...)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	bk := load("testdata/bookkeeper-4.17.4-bk_server.conf")
	if bk.MetadataServiceURI != "zk+hierarchical://localhost:2181/ledgers" || bk.HTTPServerEnabled || bk.HTTPServerPort != 8080 ||
		bk.BookiePort != 3181 || bk.SessionTTL.Milliseconds() != 10000 {
		t.Errorf("BookKeeper sample: %+v", bk)
	}
	p := load("testdata/pulsar-bookkeeper.conf")
	if p.MetadataServiceURI != "zk+null://localhost:2181/ledgers" || p.SessionTTL.Milliseconds() != 30000 ||
		p.GCWaitTime.Milliseconds() != 900000 || !p.AutoRecovery.Enabled || p.HTTPServerEnabled {
		t.Errorf("Pulsar conf: %+v", p)
	}
	h := load("testdata/pulsar-helm-bookkeeper.conf")
	if h.MetadataServiceURI != "zk+hierarchical://pulsar-zookeeper:2181/ledgers" || !h.HTTPServerEnabled || h.HTTPServerPort != 8000 ||
		!h.UseHostNameAsBookieID || h.AutoRecovery.Enabled || h.DiskUsageLwmThreshold != 0.85 || h.DiskCheckInterval.Milliseconds() != 1800 {
		t.Errorf("Pulsar chart: %+v", h)
	}
}

// TestFixturesRefuseNotSupportedKeys: each fixture with one refusing key
// added, for every refusing key of the table, is refused with a message
// naming the key and the file.
func TestFixturesRefuseNotSupportedKeys(t *testing.T) {
	var refusing []KeyInfo
	for _, k := range bkKeys {
		if k.RefuseWhen != nil {
			refusing = append(refusing, k)
		}
	}
	if len(refusing) < 15 {
		t.Fatalf("only %d refusing keys", len(refusing))
	}
	for _, f := range confFixtures {
		base, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range refusing {
			t.Run(filepath.Base(f)+"/"+k.Name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), filepath.Base(f))
				conf := string(base) + "\n" + k.Name + "=" + k.RefuseWhen.Example + "\n"
				if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
					t.Fatal(err)
				}
				_, err := LoadConfig(path, Overrides{Set: fixtureDirs(t)}, nil)
				if err == nil {
					t.Fatalf("%s=%s was accepted", k.Name, k.RefuseWhen.Example)
				}
				if msg := err.Error(); !strings.Contains(msg, k.Name) || !strings.Contains(msg, path) {
					t.Errorf("refusal does not name the key and the file: %v", err)
				}
			})
		}
	}
}

// TestRefusalFollowsTheLastSource: a refusing value in the file that the
// environment or --set turns off is accepted; the source named is the
// one that won.
func TestRefusalFollowsTheLastSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bk_server.conf")
	if err := os.WriteFile(path, []byte("localScrubInterval=3600\nauditorReplicasCheckInterval=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := fixtureDirs(t)
	if _, err := LoadConfig(path, Overrides{Set: append(dirs, "localScrubInterval=0")}, nil); err != nil {
		t.Errorf("turned off by --set: %v", err)
	}
	env := map[string]string{"BK_auditorReplicasCheckInterval": "60"}
	_, err := LoadConfig(path, Overrides{Getenv: func(k string) string { return env[k] }, Set: append(dirs, "localScrubInterval=0")}, nil)
	if err == nil || !strings.Contains(err.Error(), "BK_auditorReplicasCheckInterval: auditorReplicasCheckInterval=60") {
		t.Errorf("enabled by BK_: %v", err)
	}
	_, err = LoadConfig(path, Overrides{Set: dirs}, nil)
	if err == nil || !strings.Contains(err.Error(), path+":1: localScrubInterval=3600") {
		t.Errorf("from the file: %v", err)
	}
}

// TestUnknownKeyNearest: a typo draws a warning naming the nearest key,
// a case mistake the key itself; neither is an error.
func TestUnknownKeyNearest(t *testing.T) {
	for _, c := range []struct{ typo, want string }{
		{"bookiPort", "bookiePort"},
		{"BOOKIEPORT", "bookiePort"},
		{"journalDirectoriess", "journalDirectories"},
		{"ledgerDirectory", "ledgerDirectories"},
		{"metadataServiceURI", "metadataServiceUri"},
		{"gcWaitTimeMs", "gcWaitTime"},
		{"autoRecoveryDaemonEnable", "autoRecoveryDaemonEnabled"},
	} {
		if got := NearestKey(c.typo); got != c.want {
			t.Errorf("NearestKey(%s) = %s, want %s", c.typo, got, c.want)
		}
		var logs jsonLogs
		if _, err := LoadConfig("", Overrides{Set: append(fixtureDirs(t), c.typo+"=1")}, logs.logger()); err != nil {
			t.Errorf("%s: %v", c.typo, err)
		}
		rs := logs.records(t)
		if len(rs) != 1 || rs[0]["level"] != "WARN" || rs[0]["key"] != c.typo || rs[0]["nearest"] != c.want ||
			!strings.Contains(rs[0]["msg"].(string), "did you mean "+c.want) {
			t.Errorf("%s: logs %v", c.typo, rs)
		}
	}
}

// TestEnvironmentPrecedence: file < BK_<key> < PULSAR_PREFIX_<key> <
// FOLIO_<KEY> < --set, each source recorded; BK_ variables that are not
// keys (the image's own) are ignored; Pulsar's prefix adds unknown keys.
func TestEnvironmentPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bk_server.conf")
	if err := os.WriteFile(path, []byte("gcWaitTime=1000\nzkTimeout=2000\ndiskCheckInterval=3000\nbookiePort=4000\nflushInterval=5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"BK_zkTimeout": "2001", "BK_diskCheckInterval": "3001", "BK_bookiePort": "4001", "BK_flushInterval": "5001",
		"PULSAR_PREFIX_diskCheckInterval": " 3002 ", "PULSAR_PREFIX_bookiePort": "4002", "PULSAR_PREFIX_flushInterval": "5002",
		"FOLIO_BOOKIE_PORT": "4003", "FOLIO_FLUSH_INTERVAL": "5003",
		"BK_DATA_DIR": "/data/bookkeeper", "BK_USER": "bookkeeper", "BK_zkServers": "",
		"PULSAR_PREFIX_someNewKey": "x", "PULSAR_MEM": "-Xmx1g",
	}
	environ := func() []string {
		var out []string
		for k, v := range env {
			out = append(out, k+"="+v)
		}
		return out
	}
	want := map[string][2]string{
		"gcWaitTime":        {"1000", path + ":1"},
		"zkTimeout":         {"2001", "BK_zkTimeout"},
		"diskCheckInterval": {"3002", "PULSAR_PREFIX_diskCheckInterval"},
		"bookiePort":        {"4003", "FOLIO_BOOKIE_PORT"},
		"flushInterval":     {"5004", "--set"},
	}
	for _, ov := range []Overrides{
		{Environ: environ, Set: append(fixtureDirs(t), "flushInterval=5004")},
		{Getenv: func(k string) string { return env[k] }, Set: append(fixtureDirs(t), "flushInterval=5004")},
	} {
		var logs jsonLogs
		cfg, err := LoadConfig(path, ov, logs.logger())
		if err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			if cfg.Props[k] != w[0] || cfg.Sources[k] != w[1] {
				t.Errorf("environ %v: %s = %q from %q, want %q from %q", ov.Environ != nil, k, cfg.Props[k], cfg.Sources[k], w[0], w[1])
			}
		}
		if cfg.BookiePort != 4003 || cfg.DiskCheckInterval.Milliseconds() != 3002 {
			t.Errorf("values: port %d, disk check %v", cfg.BookiePort, cfg.DiskCheckInterval)
		}
		for _, k := range []string{"DATA_DIR", "USER", "zkServers"} {
			if _, ok := cfg.Props[k]; ok {
				t.Errorf("BK_%s applied", k)
			}
		}
		_, added := cfg.Props["someNewKey"]
		if added != (ov.Environ != nil) {
			t.Errorf("environ %v: PULSAR_PREFIX_someNewKey applied: %v", ov.Environ != nil, added)
		}
		if added && !strings.Contains(logs.buf.String(), "unknown configuration key someNewKey") {
			t.Errorf("the unknown key added by PULSAR_PREFIX_ was not warned about:\n%s", logs.buf.String())
		}
	}
	if _, err := LoadConfig(path, Overrides{Getenv: func(k string) string {
		return map[string]string{"BK_gcWaitTime": "soon"}[k]
	}, Set: fixtureDirs(t)}, nil); err == nil || !strings.Contains(err.Error(), "BK_gcWaitTime") {
		t.Errorf("a bad BK_ value: %v, want an error naming the variable", err)
	}
}

// TestPulsarChartAsEnvironment: Pulsar's bookkeeper.conf with the chart's
// ConfigMap applied as PULSAR_PREFIX_ variables (the way to run the
// chart's settings with Folio's image) loads and takes them.
func TestPulsarChartAsEnvironment(t *testing.T) {
	props, err := readFixtureProps("testdata/pulsar-helm-bookkeeper.conf")
	if err != nil {
		t.Fatal(err)
	}
	var environ []string
	for _, p := range props {
		environ = append(environ, EnvPrefixPulsar+p.Key+"="+p.Value)
	}
	var logs jsonLogs
	cfg, err := LoadConfig("testdata/pulsar-bookkeeper.conf", Overrides{Environ: func() []string { return environ }, Set: fixtureDirs(t)}, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetadataServiceURI != "zk+hierarchical://pulsar-zookeeper:2181/ledgers" || !cfg.HTTPServerEnabled || cfg.AutoRecovery.Enabled ||
		cfg.Sources["gcWaitTime"] != "PULSAR_PREFIX_gcWaitTime" || cfg.GCWaitTime.Milliseconds() != 300000 {
		t.Errorf("%+v\nsources %v", cfg, cfg.Sources)
	}
	if strings.Contains(logs.buf.String(), "unknown configuration key") {
		t.Errorf("unknown keys:\n%s", logs.buf.String())
	}
}

func readFixtureProps(path string) ([]Property, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProperties(f)
}

// TestEnvNamesDistinct: no two known keys share a FOLIO_ variable.
func TestEnvNamesDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, k := range knownKeyNames() {
		if other, ok := seen[EnvName(k)]; ok {
			t.Errorf("%s and %s both map to %s", k, other, EnvName(k))
		}
		seen[EnvName(k)] = k
	}
}

// TestEffectiveConfig: every key with its value and source; secrets
// hidden; derived values say so.
func TestEffectiveConfig(t *testing.T) {
	env := map[string]string{"BK_httpServerKeyStorePassword": "hunter2"}
	cfg, err := LoadConfig("testdata/pulsar-bookkeeper.conf", Overrides{
		Getenv: func(k string) string { return env[k] },
		Set:    append(fixtureDirs(t), "passwd=s3cret", "bookiPort=1"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]EffectiveKey{}
	for _, e := range cfg.Effective() {
		got[e.Name] = e
	}
	for _, k := range knownKeyNames() {
		if _, ok := got[k]; !ok {
			t.Errorf("%s missing", k)
		}
	}
	for name, want := range map[string]EffectiveKey{
		"gcWaitTime":                 {Value: "900000", Source: "testdata/pulsar-bookkeeper.conf:37", Class: Implemented},
		"bookieId":                   {Value: "", Source: "default", Class: Implemented},
		"httpServerKeyStorePassword": {Value: "(set)", Source: "BK_httpServerKeyStorePassword", Class: Implemented},
		"passwd":                     {Value: "(set)", Source: "--set", Class: Irrelevant},
		"bookiPort":                  {Value: "1", Source: "--set", Class: "unknown"},
		"metadataServiceUri":         {Value: "zk+null://localhost:2181/ledgers", Source: "derived from zkServers, zkLedgersRootPath", Class: Implemented},
		"diskUsageLwmThreshold":      {Value: "0.95", Source: "default (diskUsageThreshold)", Class: Implemented},
		"localScrubInterval":         {Value: "0", Source: "default", Class: NotSupported},
	} {
		want.Name = name
		if got[name] != want {
			t.Errorf("%s: %+v, want %+v", name, got[name], want)
		}
	}
	var out bytes.Buffer
	if err := cfg.WriteEffective(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "hunter2") || strings.Contains(out.String(), "s3cret") {
		t.Errorf("a secret printed:\n%s", out.String())
	}
}

// TestDiskLwmDefaultsToThreshold: as in Java, a configuration that sets
// only diskUsageThreshold (below 0.95) loads.
func TestDiskLwmDefaultsToThreshold(t *testing.T) {
	cfg, err := LoadConfig("", Overrides{Set: append(fixtureDirs(t), "diskUsageThreshold=0.8")}, nil)
	if err != nil || cfg.DiskUsageLwmThreshold != 0.8 {
		t.Fatalf("lwm %v, %v", cfg.DiskUsageLwmThreshold, err)
	}
	cfg, err = LoadConfig("", Overrides{Set: append(fixtureDirs(t), "diskUsageLwmThreshold=0.7", "diskUsageThreshold=0.8")}, nil)
	if err != nil || cfg.DiskUsageLwmThreshold != 0.7 {
		t.Fatalf("lwm %v, %v", cfg.DiskUsageLwmThreshold, err)
	}
}

// TestHTTPServerOffByDefault: outside standalone the admin HTTP server is
// off unless httpServerEnabled=true, as in Java (no default listener that
// two bookies on one host would fight over).
func TestHTTPServerOffByDefault(t *testing.T) {
	if DefaultConfig().HTTPServerEnabled {
		t.Error("DefaultConfig enables the admin HTTP server")
	}
	cfg, err := LoadConfig("", Overrides{Set: fixtureDirs(t)}, nil)
	if err != nil || cfg.HTTPServerEnabled {
		t.Errorf("LoadConfig without the key: enabled %v, %v", cfg.HTTPServerEnabled, err)
	}
	if k, _ := LookupKey("httpServerEnabled"); k.Default != "false" {
		t.Errorf("table default %q", k.Default)
	}
}

// TestLogKeys: logLevel and logFormat take their words only.
func TestLogKeys(t *testing.T) {
	cfg, err := LoadConfig("", Overrides{Set: append(fixtureDirs(t), "logLevel=DEBUG", "logFormat=json")}, nil)
	if err != nil || cfg.LogLevel != "debug" || cfg.LogFormat != "json" {
		t.Fatalf("%q %q %v", cfg.LogLevel, cfg.LogFormat, err)
	}
	for _, kv := range []string{"logLevel=verbose", "logFormat=xml"} {
		if _, err := LoadConfig("", Overrides{Set: []string{kv}}, nil); err == nil || !strings.Contains(err.Error(), strings.Split(kv, "=")[0]) {
			t.Errorf("%s: %v", kv, err)
		}
	}
}

// TestOperationsDocKeyTable: docs/operations.md carries the key table as
// the code generates it.
func TestOperationsDocKeyTable(t *testing.T) {
	const path = "../../../docs/operations.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceKeyTable(string(b))
	if err != nil {
		t.Fatalf("docs/operations.md: %v", err)
	}
	if want != string(b) {
		t.Errorf("docs/operations.md's bk_server.conf key table differs from the code's (keytable.go); regenerate it with `make docs` (go run ./internal/bookie/server/cmd/keytable -w docs/operations.md)")
	}
}

// TestJournalDirectoriesWins: as in BookKeeper, journalDirectories (when
// it lists a directory) wins over journalDirectory whatever their order,
// so the BookKeeper image's BK_journalDirectory does not override the
// sample's journalDirectories (Java journals to /tmp/bk-txn there too).
func TestJournalDirectoriesWins(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want []string
	}{
		{[]string{"journalDirectories=/a,/b", "journalDirectory=/c"}, []string{"/a", "/b"}},
		{[]string{"journalDirectory=/c", "journalDirectories=/a"}, []string{"/a"}},
		{[]string{"journalDirectory=/c"}, []string{"/c"}},
		{[]string{"journalDirectories=", "journalDirectory=/c"}, []string{"/c"}},
		{[]string{"journalDirectory=/c", "journalDirectories="}, []string{"/c"}},
	} {
		cfg, err := LoadConfig("", Overrides{Set: append([]string{"ledgerDirectories=/l"}, c.set...)}, nil)
		if err != nil || !slices.Equal(cfg.JournalDirs, c.want) {
			t.Errorf("%v: %v, %v; want %v", c.set, cfg.JournalDirs, err, c.want)
		}
	}
	env := map[string]string{"BK_journalDirectory": "/data/bookkeeper/journal", "BK_ledgerDirectories": "/data/bookkeeper/ledgers"}
	cfg, err := LoadConfig("testdata/bookkeeper-4.17.4-bk_server.conf", Overrides{Getenv: func(k string) string { return env[k] }}, nil)
	if err != nil || !slices.Equal(cfg.JournalDirs, []string{"/tmp/bk-txn"}) || !slices.Equal(cfg.LedgerDirs, []string{"/data/bookkeeper/ledgers"}) {
		t.Errorf("BookKeeper image: journal %v ledgers %v, %v", cfg.JournalDirs, cfg.LedgerDirs, err)
	}
}
