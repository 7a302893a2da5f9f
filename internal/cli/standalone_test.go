package cli

import (
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/pki"
	"github.com/foliodb/folio/internal/standalone"
)

func TestStandaloneScreen(t *testing.T) {
	var b strings.Builder
	writeStandaloneScreen(&b, standalone.Info{
		MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers",
		EtcdClientAddr:     "127.0.0.1:2379", EtcdPeerAddr: "127.0.0.1:2380",
		EtcdDataDir: "/d/etcd", EtcdLogFile: "/d/etcd/etcd.log",
		HTTPAddr: "127.0.0.1:8080", DataDir: "/d",
		Bookies: []standalone.BookieInfo{
			{ID: "127.0.0.1:3181", JournalDir: "/d/bookie-0/journal", LedgerDir: "/d/bookie-0/ledgers"},
			{ID: "127.0.0.1:3182", JournalDir: "/d/bookie-1/journal", LedgerDir: "/d/bookie-1/ledgers"},
		},
	})
	out := b.String()
	for _, want := range []string{
		"etcd://127.0.0.1:2379/ledgers", "peers 127.0.0.1:2380", "/d/etcd/etcd.log",
		"127.0.0.1:3181", "/d/bookie-1/ledgers", "http://127.0.0.1:8080", "/metrics",
		"export FOLIO_METADATA_SERVICE_URI='etcd://127.0.0.1:2379/ledgers'", "folio shell simpletest",
		`client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("screen lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, standalone.ReadyPrefix) {
		t.Error("the screen repeats the readiness line (it belongs on stdout, once)")
	}
}

func TestStandaloneScreenAutoRecoveryAndNoBookies(t *testing.T) {
	var b strings.Builder
	writeStandaloneScreen(&b, standalone.Info{
		MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers", HTTPAddr: "127.0.0.1:8080",
		AutoRecoveryID: "127.0.0.1:8080", AutoRecoveryWorkers: 1,
	})
	out := b.String()
	for _, want := range []string{"0 bookie(s) and AutoRecovery", "none here (--bookies 0)", "folio bookie --set metadataServiceUri=etcd://127.0.0.1:2379/ledgers",
		"autorecovery id 127.0.0.1:8080 (auditor candidate, 1 replication worker(s))", "ledger/info"} {
		if !strings.Contains(out, want) {
			t.Errorf("screen lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	writeStandaloneScreen(&b, standalone.Info{MetadataServiceURI: "etcd://x:1/l", Bookies: []standalone.BookieInfo{{ID: "127.0.0.1:3181"}}})
	if out := b.String(); !strings.Contains(out, "autorecovery off") || strings.Contains(out, "none here") {
		t.Errorf("screen without AutoRecovery:\n%s", out)
	}
}

func TestStandaloneScreenTLS(t *testing.T) {
	var b strings.Builder
	d := pki.Dir{Path: "/tls"}
	writeStandaloneScreen(&b, standalone.Info{
		MetadataServiceURI: "etcd+https://127.0.0.1:2379/ledgers", HTTPAddr: "127.0.0.1:8080", HTTPScheme: "https", TLS: &d,
	})
	out := b.String()
	for _, want := range []string{
		"https://127.0.0.1:8080", "tls        /tls: CA ca.pem, client certificate client.pem, key client-key.pem",
		"export FOLIO_METADATA_SERVICE_URI='etcd+https://127.0.0.1:2379/ledgers'",
		"export FOLIO_METADATA_SERVICE_TLS_CA_FILE='/tls/ca.pem'",
		"export FOLIO_METADATA_SERVICE_TLS_CERT_FILE='/tls/client.pem'",
		"export FOLIO_METADATA_SERVICE_TLS_KEY_FILE='/tls/client-key.pem'",
		"curl --cacert /tls/ca.pem --cert /tls/client.pem --key /tls/client-key.pem https://127.0.0.1:8080/heartbeat",
		"MetadataTLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},",
		"TLS:         &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}})",
		"export FOLIO_TLS_CA='/tls/ca.pem'", "export FOLIO_TLS_CERT='/tls/client.pem'", "export FOLIO_TLS_KEY='/tls/client-key.pem'",
		"--set metadataServiceTlsCaFile=/tls/ca.pem --set metadataServiceTlsCertFile=/tls/client.pem --set metadataServiceTlsKeyFile=/tls/client-key.pem",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("screen lacks %q:\n%s", want, out)
		}
	}
}
