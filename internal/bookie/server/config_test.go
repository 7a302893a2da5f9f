package server

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
	v2 "github.com/foliodb/folio/internal/wire/v2"
)

func TestParsePropertiesJavaSyntax(t *testing.T) {
	in := "# comment\n! bang comment\n  \n" +
		"a=1\n" +
		"b : 2\n" +
		"c 3\n" +
		"d=\n" +
		"e=x\\\n    y\\\n  z\n" +
		"f\\=g=h\\:i\n" +
		"t=tab\\there\n" +
		"u=\\u0041\\u00e9\n" +
		"   lead = spaced value  \n" +
		"trail=ends with backslash\\\\\n" +
		"colon:=v\n"
	props, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range props {
		got[p.Key] = p.Value
	}
	want := map[string]string{
		"a": "1", "b": "2", "c": "3", "d": "", "e": "xyz", "f=g": "h:i", "t": "tab\there",
		"u": "Aé", "lead": "spaced value  ", "trail": `ends with backslash\`, "colon": "=v",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d keys %v, want %d", len(got), got, len(want))
	}
}

func TestLoadConfigSampleOverridesAndWarnings(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	env := map[string]string{
		"FOLIO_BOOKIE_PORT":          "3999",
		"FOLIO_METADATA_SERVICE_URI": "etcd://127.0.0.1:2379/c1",
	}
	cfg, err := LoadConfig("testdata/bk_server.conf", Overrides{
		Getenv: func(k string) string { return env[k] },
		Set:    []string{"gcWaitTime=1000", "httpServerPort=0"},
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BookiePort != 3999 {
		t.Errorf("BookiePort = %d, want the environment's 3999", cfg.BookiePort)
	}
	if cfg.MetadataServiceURI != "etcd://127.0.0.1:2379/c1" {
		t.Errorf("MetadataServiceURI = %q", cfg.MetadataServiceURI)
	}
	if cfg.GCWaitTime != time.Second || cfg.HTTPServerPort != 0 {
		t.Errorf("flag overrides not applied: gc %v http %d", cfg.GCWaitTime, cfg.HTTPServerPort)
	}
	if !slices.Equal(cfg.JournalDirs, []string{"/data/bk/journal1", "/data/bk/journal2"}) {
		t.Errorf("JournalDirs = %q", cfg.JournalDirs)
	}
	if !slices.Equal(cfg.LedgerDirs, []string{"/data/bk/ledgers"}) {
		t.Errorf("LedgerDirs = %q", cfg.LedgerDirs)
	}
	if cfg.AdvertisedAddress != "10.0.0.5" || !cfg.HTTPServerEnabled || cfg.SessionTTL != 4*time.Second {
		t.Errorf("advertised %q http %v ttl %v", cfg.AdvertisedAddress, cfg.HTTPServerEnabled, cfg.SessionTTL)
	}
	if cfg.DiskUsageThreshold != 0.9 || cfg.DiskUsageLwmThreshold != 0.8 || cfg.DiskCheckInterval != 5*time.Second {
		t.Errorf("disk %v %v %v", cfg.DiskUsageThreshold, cfg.DiskUsageLwmThreshold, cfg.DiskCheckInterval)
	}
	if cfg.Props["some odd=key"] != "café" {
		t.Errorf("escaped key: %q", cfg.Props["some odd=key"])
	}
	id, err := cfg.BookieID(3181)
	if err != nil || id != "10.0.0.5:3181" {
		t.Errorf("BookieID = %q, %v", id, err)
	}
	sc, err := StorageConfig(&cfg)
	if err != nil || sc.WriteCacheBytes != 32<<20 || sc.JournalMaxGroupWait != 2*time.Millisecond {
		t.Errorf("storage config %+v, %v", sc, err)
	}
	out := logs.String()
	for _, k := range []string{"folioNoSuchKnob", `"some odd=key"`} {
		if !strings.Contains(out, "key="+k) {
			t.Errorf("no warning for unknown key %s in:\n%s", k, out)
		}
	}
	for _, k := range []string{"ledgerStorageClass", "journalFormatVersionToWrite", "bookiePort"} {
		if strings.Contains(out, "key="+k+" ") || strings.Contains(out, "key="+k+"\n") {
			t.Errorf("warned about known key %s:\n%s", k, out)
		}
	}
}

func TestConfigErrorsAndBookieHost(t *testing.T) {
	if _, err := LoadConfig("", Overrides{Set: []string{"bookiePort=abc"}}, nil); err == nil || !strings.Contains(err.Error(), "bookiePort") {
		t.Errorf("bad port: %v", err)
	}
	if _, err := LoadConfig("", Overrides{Set: []string{"diskUsageThreshold=0.5", "diskUsageLwmThreshold=0.6"}}, nil); err == nil {
		t.Error("lwm above threshold accepted")
	}
	if _, err := LoadConfig("/nonexistent/bk_server.conf", Overrides{}, nil); err == nil {
		t.Error("missing file accepted")
	}
	c := DefaultConfig()
	c.AdvertisedAddress = "127.0.0.1"
	if _, err := c.BookieHost(); err == nil || !strings.Contains(err.Error(), "allowLoopback") {
		t.Errorf("loopback without allowLoopback: %v", err)
	}
	c.AllowLoopback = true
	if h, err := c.BookieHost(); err != nil || h != "127.0.0.1" {
		t.Errorf("loopback allowed: %q %v", h, err)
	}
	c.AdvertisedAddress = ""
	if h, err := c.BookieHost(); err != nil || h == "" {
		t.Errorf("default host: %q %v", h, err)
	}
	if EnvName("metadataServiceUri") != "FOLIO_METADATA_SERVICE_URI" || EnvName("bookiePort") != "FOLIO_BOOKIE_PORT" ||
		EnvName("useHostNameAsBookieID") != "FOLIO_USE_HOST_NAME_AS_BOOKIE_ID" {
		t.Errorf("EnvName: %s %s %s", EnvName("metadataServiceUri"), EnvName("bookiePort"), EnvName("useHostNameAsBookieID"))
	}
}

// The AutoRecovery keys: BookKeeper's names, units and defaults
// (ServerConfiguration: intervals and lostBookieRecoveryDelay in seconds,
// openLedgerRereplicationGracePeriod and rwRereplicateBackoffMs in
// milliseconds, replicationRateByBytes in bytes/s, -1 unlimited), the
// FOLIO_* override of the switch, and bad values naming their key.
func TestAutoRecoveryKeys(t *testing.T) {
	def := DefaultConfig().AutoRecovery
	wantDef := AutoRecoveryConfig{
		Enabled: false, LostBookieRecoveryDelay: 0,
		BookieCheckInterval: 86400 * time.Second, LedgerCheckInterval: 604800 * time.Second,
		LedgerVerificationPercentage: 0, PlacementPolicyCheckInterval: 0,
		OpenLedgerRereplicationGracePeriod: 30 * time.Second, RereplicateBackoff: 5 * time.Second,
		RateLimitBytesPerSecond: -1, PollInterval: time.Second,
	}
	if def != wantDef {
		t.Errorf("defaults:\n got %+v\nwant %+v", def, wantDef)
	}

	var logs bytes.Buffer
	cfg, err := LoadConfig("testdata/bk_server.conf", Overrides{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := AutoRecoveryConfig{
		Enabled: true, LostBookieRecoveryDelay: time.Minute,
		BookieCheckInterval: time.Hour, LedgerCheckInterval: 0,
		LedgerVerificationPercentage: 10, PlacementPolicyCheckInterval: 24 * time.Hour,
		OpenLedgerRereplicationGracePeriod: 45 * time.Second, RereplicateBackoff: 2500 * time.Millisecond,
		RateLimitBytesPerSecond: 1 << 20, PollInterval: time.Second,
	}
	if cfg.AutoRecovery != want {
		t.Errorf("from the file:\n got %+v\nwant %+v", cfg.AutoRecovery, want)
	}
	for _, k := range []string{"autoRecoveryDaemonEnabled", "lostBookieRecoveryDelay", "auditorPeriodicCheckInterval",
		"replicationRateByBytes", "rereplicationEntryBatchSize", "lockReleaseOfFailedLedgerGracePeriod"} {
		if strings.Contains(logs.String(), "key="+k) {
			t.Errorf("warned about AutoRecovery key %s:\n%s", k, logs.String())
		}
	}

	// The environment turns it off, --set (Folio's poll interval) last.
	env := map[string]string{"FOLIO_AUTO_RECOVERY_DAEMON_ENABLED": "false", "FOLIO_LOST_BOOKIE_RECOVERY_DELAY": "5"}
	cfg, err = LoadConfig("testdata/bk_server.conf", Overrides{
		Getenv: func(k string) string { return env[k] },
		Set:    []string{"autoRecoveryPollInterval=100", "replicationRateByBytes=-1"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ar := cfg.AutoRecovery; ar.Enabled || ar.LostBookieRecoveryDelay != 5*time.Second || ar.PollInterval != 100*time.Millisecond || ar.RateLimitBytesPerSecond != -1 {
		t.Errorf("overrides: %+v", ar)
	}
	if EnvName("autoRecoveryDaemonEnabled") != "FOLIO_AUTO_RECOVERY_DAEMON_ENABLED" {
		t.Errorf("EnvName: %s", EnvName("autoRecoveryDaemonEnabled"))
	}

	for _, kv := range []string{"autoRecoveryDaemonEnabled=yes please", "lostBookieRecoveryDelay=-1", "lostBookieRecoveryDelay=1.5",
		"auditorPeriodicBookieCheckInterval=1d", "auditorLedgerVerificationPercentage=101", "auditorLedgerVerificationPercentage=-1",
		"openLedgerRereplicationGracePeriod=30s", "rwRereplicateBackoffMs=-5", "replicationRateByBytes=fast", "autoRecoveryPollInterval=x"} {
		k, _, _ := strings.Cut(kv, "=")
		if _, err := LoadConfig("", Overrides{Set: []string{kv}}, nil); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s: %v, want an error naming the key", kv, err)
		}
	}
}

// TestLegacyZooKeeperKeys: without metadataServiceUri, zkServers and
// zkLedgersRootPath (as Pulsar's bookkeeper.conf sets them) name a
// ZooKeeper cluster the way BookKeeper's getMetadataServiceUri builds the
// URI; an explicit metadataServiceUri wins; zkEnableSecurity is refused.
func TestLegacyZooKeeperKeys(t *testing.T) {
	base := []string{"journalDirectories=/j", "ledgerDirectories=/l"}
	load := func(set ...string) (Config, error) {
		return LoadConfig("", Overrides{Set: append(append([]string{}, base...), set...)}, nil)
	}
	cases := []struct {
		set  []string
		want string
	}{
		{[]string{"zkServers=zk1:2181,zk2:2181,zk3:2181", "zkLedgersRootPath=/pulsar/ledgers"}, "zk+null://zk1:2181;zk2:2181;zk3:2181/pulsar/ledgers"},
		{[]string{"zkServers=zk1:2181"}, "zk+null://zk1:2181/ledgers"},
		{[]string{"zkServers=zk1:2181", "ledgerManagerFactoryClass=org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"}, "zk+hierarchical://zk1:2181/ledgers"},
		{[]string{"zkServers=zk1:2181", "metadataServiceUri=zk://other:2181/ledgers"}, "zk://other:2181/ledgers"},
		{nil, DefaultMetadataURI},
	}
	for _, c := range cases {
		cfg, err := load(c.set...)
		if err != nil || cfg.MetadataServiceURI != c.want {
			t.Errorf("%v: MetadataServiceURI %q, %v; want %q", c.set, cfg.MetadataServiceURI, err, c.want)
		}
	}
	if _, err := load("zkServers=zk1:2181", "zkEnableSecurity=true"); err == nil || !strings.Contains(err.Error(), "zkEnableSecurity") {
		t.Errorf("zkEnableSecurity=true: %v, want a refusal naming it", err)
	}
	if _, err := load("zkServers=zk1:2181", "ledgerManagerFactoryClass=com.example.Custom"); err == nil {
		t.Error("an unknown ledgerManagerFactoryClass was accepted")
	}
}

// TestNettyMaxFrameSizeBytes: the frame limit is read (Pulsar's 5253120),
// defaults to BookKeeper's 5242880, and a value outside the bounds a frame
// reader accepts is refused naming the key.
func TestNettyMaxFrameSizeBytes(t *testing.T) {
	c := DefaultConfig()
	if c.MaxFrameSize != 5242880 {
		t.Fatalf("default %d", c.MaxFrameSize)
	}
	if err := c.Set("nettyMaxFrameSizeBytes", "5253120", nil); err != nil || c.MaxFrameSize != 5253120 {
		t.Fatalf("set: %v %d", err, c.MaxFrameSize)
	}
	for _, bad := range []string{"1000", "2147483647"} {
		c := DefaultConfig()
		if err := c.Set("nettyMaxFrameSizeBytes", bad, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "nettyMaxFrameSizeBytes") {
			t.Errorf("nettyMaxFrameSizeBytes=%s: Validate %v", bad, err)
		}
	}
}

// TestAnswersCarryEntriesAcceptedAtTheLimit: an entry that came in a v2
// add frame of exactly the bookie's limit (Pulsar's 5253120, from a Java
// v2 client) must be readable: the read, READ_LAC and batch read answers
// that carry it are a few bytes longer than the add, and the bookie
// encodes its answers with maxResponseFrame, not its request limit.
func TestAnswersCarryEntriesAcceptedAtTheLimit(t *testing.T) {
	const limit = 5253120
	d, err := digest.New(digest.CRC32C, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	mk := digest.MasterKey([]byte("pw"))
	addFrame := func(body []byte) int {
		c, _ := codec.NewClientCodec(wire.ProtocolV2, false)
		c.SetMaxFrameSize(wire.MaxFrameSizeLimit)
		out, err := c.EncodeRequest(nil, &wire.Request{Header: wire.Header{Version: v2.CurrentVersion, Op: wire.OpAddEntry}, Has: wire.BodyAdd,
			Add: wire.AddRequest{LedgerID: 1<<56 | 1, EntryID: 123456, MasterKey: mk[:], Body: body}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out)
	}
	probe := d.AppendEntry(nil, 1<<56|1, 123456, 123455, 1, []byte{0})
	payload := bytes.Repeat([]byte{7}, limit-(addFrame(probe)-len(probe))-len(probe)+1)
	body := d.AppendEntry(nil, 1<<56|1, 123456, 123455, int64(len(payload)), payload)
	if n := addFrame(body); n != limit {
		t.Fatalf("add frame %d, want exactly %d", n, limit)
	}
	for _, resp := range []wire.Response{
		{Protocol: wire.ProtocolV2, Header: wire.Header{Version: v2.CurrentVersion, Op: wire.OpReadEntry}, Has: wire.BodyRead,
			Read: wire.ReadResponse{LedgerID: 1<<56 | 1, EntryID: 123456, Body: body, HasBody: true}},
		{Protocol: wire.ProtocolV3, Header: wire.Header{Version: wire.VersionThree, Op: wire.OpReadEntry, TxnID: 1 << 40}, Has: wire.BodyRead,
			Read: wire.ReadResponse{LedgerID: 1<<56 | 1, EntryID: 123456, Body: body, HasBody: true, MaxLAC: 123455, HasMaxLAC: true}},
		{Protocol: wire.ProtocolV3, Header: wire.Header{Version: wire.VersionThree, Op: wire.OpReadLAC, TxnID: 1 << 40}, Has: wire.BodyReadLAC,
			ReadLAC: wire.ReadLACResponse{LedgerID: 1<<56 | 1, LastEntryBody: body, HasLastEntryBody: true}},
		{Protocol: wire.ProtocolV2, Header: wire.Header{Version: v2.CurrentVersion, Op: wire.OpBatchReadEntry, TxnID: 9}, Has: wire.BodyBatchRead,
			BatchRead: wire.BatchReadResponse{LedgerID: 1<<56 | 1, StartEntryID: 123456, Entries: [][]byte{body}}},
	} {
		out, err := codec.EncodeResponseMax(nil, &resp, maxResponseFrame)
		if err != nil {
			t.Errorf("%v %v: the answer carrying an entry accepted at the limit: %v", resp.Protocol, resp.Header.Op, err)
			continue
		}
		if len(out) <= limit-64 {
			t.Errorf("%v %v: answer of %d bytes does not carry the entry", resp.Protocol, resp.Header.Op, len(out))
		}
	}
}
