package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
)

func TestRolesAsBookKeeperReadsThem(t *testing.T) {
	cases := []struct {
		ou   string
		want []string
	}{
		{"0:writer", []string{"writer"}},
		{"0:writer;1:cluster-a", []string{"writer"}},
		{"1:cluster-a;0:reader", []string{"reader"}},
		{"0: a , b ", []string{"a", "b"}},
		{"0:a,", []string{"a"}},    // trailing empty names dropped (String.split)
		{"0:,,", nil},              // all empty: no role
		{"0:", []string{""}},       // one empty role
		{"0:a;0:b", []string{"b"}}, // the last code-0 part wins (HashMap.put)
		{"writer", nil},            // not code:value
		{"x0:writer", nil},
		{" 0:writer", nil}, // the code must start the part
		{"1:cluster-a", nil},
		{"0:writer\n", []string{"writer"}}, // Java's $ before a final line terminator
	}
	for _, c := range cases {
		cert := &x509.Certificate{Subject: pkix.Name{Names: []pkix.AttributeTypeAndValue{
			{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "cn"},
			{Type: asn1.ObjectIdentifier(oidOU), Value: c.ou},
			{Type: asn1.ObjectIdentifier(oidOU), Value: "0:second-ou-ignored"},
		}}}
		if got := Roles(cert); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("Roles(OU=%q) = %q, want %q", c.ou, got, c.want)
		}
	}
	if got := Roles(&x509.Certificate{Subject: pkix.Name{CommonName: "no-ou"}}); got != nil {
		t.Errorf("Roles without OU = %q", got)
	}
	// A certificate issued with an OU carries it in its parsed subject.
	ca := tlstest.NewCA(t, "ca")
	kp := ca.Issue(t, tlstest.Leaf{OU: "0:writer;1:c"})
	if got := Roles(kp.Cert); !slices.Equal(got, []string{"writer"}) {
		t.Errorf("issued certificate roles = %q", got)
	}
}

func TestParseRestrictions(t *testing.T) {
	all13 := []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
	gcm := "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
	cases := []struct {
		name              string
		protocols, suites []string
		want              Restrictions
		err               string
	}{
		{name: "defaults"},
		{name: "1.2 only", protocols: []string{"TLSv1.2"}, want: Restrictions{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}},
		{name: "1.2 and 1.3", protocols: []string{"TLSv1.3", "TLSv1.2"}, want: Restrictions{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}},
		{name: "gap", protocols: []string{"TLSv1", "TLSv1.2"}, err: "gap"},
		{name: "sslv3", protocols: []string{"SSLv3"}, err: "SSLv3 is not supported"},
		{name: "unknown protocol", protocols: []string{"TLS1.2"}, err: `unknown protocol "TLS1.2"`},
		{name: "1.2 suite only: no 1.3", suites: []string{gcm},
			want: Restrictions{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
		{name: "1.3 suites only: no 1.2", suites: all13, want: Restrictions{MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}},
		{name: "both", suites: append([]string{gcm, "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"}, all13...),
			want: Restrictions{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
		{name: "some 1.3 suites", suites: []string{"TLS_AES_256_GCM_SHA384", gcm}, err: "only some of the TLS 1.3 suites"},
		{name: "some 1.3 suites, 1.3 off", protocols: []string{"TLSv1.2"}, suites: []string{"TLS_AES_256_GCM_SHA384", gcm},
			want: Restrictions{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
		{name: "1.3 suites with 1.2 only", protocols: []string{"TLSv1.2"}, suites: all13, err: "leave no protocol version"},
		{name: "unknown suite", suites: []string{"TLS_NOPE"}, err: `cipher suite "TLS_NOPE"`},
	}
	for _, c := range cases {
		got, err := ParseRestrictions(c.protocols, c.suites, "tlsEnabledProtocols", "tlsEnabledCipherSuites")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "tlsEnabled") {
				t.Errorf("%s: err = %v, want one containing %q and the key", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.MinVersion != c.want.MinVersion || got.MaxVersion != c.want.MaxVersion || !slices.Equal(got.CipherSuites, c.want.CipherSuites) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// handshake runs a TLS handshake between a server and a client config over
// a real TCP connection and returns the errors of both ends and the
// certificate the client saw.
func handshake(t *testing.T, srv, cli *tls.Config) (srvErr, cliErr error, served *x509.Certificate) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, srv)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3: the server verifies the client's certificate in
			// the handshake, the client learns of a refusal on its
			// first read. Write one byte so that the client's read
			// below ends either way.
			_, err = tc.Write([]byte{1})
		}
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, cli)
	cliErr = tc.Handshake()
	if cliErr == nil {
		if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
			served = pc[0]
		}
		_, cliErr = tc.Read(make([]byte, 1))
	}
	return <-done, cliErr, served
}

func TestServerAndClientFromPEM(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	bf := ca.Write(t, dir, "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "bookie"}))
	cf := ca.Write(t, dir, "client", ca.Issue(t, tlstest.Leaf{CommonName: "client", OU: "0:writer"}))
	srv, err := NewServer(Options{Files: Files{Cert: bf.Cert, Key: bf.Key, CA: bf.CA}, ClientAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := NewClient(Options{Files: Files{Cert: cf.Cert, Key: cf.Key, CA: cf.CA}})
	if err != nil {
		t.Fatal(err)
	}
	if se, ce, served := handshake(t, srv, cli); se != nil || ce != nil || served.Subject.CommonName != "bookie" {
		t.Fatalf("mutual TLS: server %v, client %v, served %v", se, ce, served)
	}

	// A client without a certificate: refused by a server that requires one.
	bare, err := NewClient(Options{Files: Files{CA: cf.CA}})
	if err != nil {
		t.Fatal(err)
	}
	if se, ce, _ := handshake(t, srv, bare); se == nil || ce == nil {
		t.Fatalf("client without a certificate: server %v, client %v; want both to fail", se, ce)
	}
	// ... accepted by one that asks for none.
	open, err := NewServer(Options{Files: Files{Cert: bf.Cert, Key: bf.Key}})
	if err != nil {
		t.Fatal(err)
	}
	if se, ce, _ := handshake(t, open, bare); se != nil || ce != nil {
		t.Fatalf("server without client auth: server %v, client %v", se, ce)
	}

	// An expired client certificate, and a certificate from another CA.
	expired := ca.Write(t, t.TempDir(), "expired", ca.Issue(t, tlstest.Leaf{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}))
	other := tlstest.NewCA(t, "other")
	stranger := other.Write(t, t.TempDir(), "stranger", other.Issue(t, tlstest.Leaf{}))
	for name, f := range map[string]tlstest.Files{"expired": expired, "other CA": {CA: cf.CA, Cert: stranger.Cert, Key: stranger.Key}} {
		c, err := NewClient(Options{Files: Files{Cert: f.Cert, Key: f.Key, CA: cf.CA}})
		if err != nil {
			t.Fatal(err)
		}
		if se, _, _ := handshake(t, srv, c); se == nil {
			t.Errorf("%s client certificate accepted", name)
		}
	}
	// The client refuses a bookie certificate from another CA.
	strangerSrv, err := NewServer(Options{Files: Files{Cert: stranger.Cert, Key: stranger.Key}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ce, _ := handshake(t, strangerSrv, bare); ce == nil || !strings.Contains(ce.Error(), "does not verify") {
		t.Errorf("client accepted a bookie of another CA: %v", ce)
	}

	// Host name verification: off by default (the certificate names
	// 127.0.0.1 and localhost); on, ServerName must match.
	strict, err := NewClient(Options{Files: Files{CA: cf.CA}, VerifyHostname: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ce, _ := handshake(t, open, ForHost(strict, "bookie.example.com")); ce == nil || !strings.Contains(ce.Error(), "bookie.example.com") {
		t.Errorf("host name verification passed for a wrong name: %v", ce)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if se, ce, _ := handshake(t, open, ForHost(strict, host)); se != nil || ce != nil {
			t.Errorf("host name verification of %s: server %v, client %v", host, se, ce)
		}
	}
	if _, ce, _ := handshake(t, open, strict); ce == nil || !strings.Contains(ce.Error(), "host name") {
		t.Errorf("host name verification without a host: %v", ce)
	}
	// Without VerifyHostname the name does not matter.
	if se, ce, _ := handshake(t, open, ForHost(bare, "bookie.example.com")); se != nil || ce != nil {
		t.Errorf("without host name verification: server %v, client %v", se, ce)
	}
	// A configuration of the caller's own: Go's verification, by host.
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	own := &tls.Config{RootCAs: roots}
	if _, ce, _ := handshake(t, open, ForHost(own, "bookie.example.com")); ce == nil {
		t.Error("Go's verification accepted a wrong host name")
	}
	if se, ce, _ := handshake(t, open, ForHost(own, "127.0.0.1")); se != nil || ce != nil {
		t.Errorf("Go's verification of 127.0.0.1: server %v, client %v", se, ce)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	f := ca.Write(t, dir, "bookie", ca.Issue(t, tlstest.Leaf{}))
	other := ca.Issue(t, tlstest.Leaf{})
	mismatched := filepath.Join(dir, "other-key.pem")
	tlstest.WriteFile(t, mismatched, other.KeyPEM)
	encrypted := filepath.Join(dir, "encrypted.pem")
	tlstest.WriteFile(t, encrypted, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"))
	garbage := filepath.Join(dir, "garbage.pem")
	tlstest.WriteFile(t, garbage, []byte("not pem"))
	missing := filepath.Join(dir, "missing.pem")
	names := Names{Cert: "tlsCertificatePath", Key: "tlsKeyStore", CA: "tlsTrustStore"}
	cases := []struct {
		name string
		o    Options
		want []string
	}{
		{"missing cert", Options{Files: Files{Cert: missing, Key: f.Key}}, []string{"tlsCertificatePath", missing, "no such file"}},
		{"missing key", Options{Files: Files{Cert: f.Cert, Key: missing}}, []string{"tlsKeyStore", missing}},
		{"garbage cert", Options{Files: Files{Cert: garbage, Key: f.Key}}, []string{"tlsCertificatePath", garbage, "no PEM CERTIFICATE"}},
		{"mismatched key", Options{Files: Files{Cert: f.Cert, Key: mismatched}}, []string{"tlsKeyStore", mismatched, "does not match"}},
		{"encrypted key", Options{Files: Files{Cert: f.Cert, Key: encrypted}}, []string{"tlsKeyStore", encrypted, "encrypted"}},
		{"garbage CA", Options{Files: Files{Cert: f.Cert, Key: f.Key, CA: garbage}, ClientAuth: true}, []string{"tlsTrustStore", garbage}},
		{"no CA with client auth", Options{Files: Files{Cert: f.Cert, Key: f.Key}, ClientAuth: true}, []string{"tlsTrustStore"}},
		{"no key", Options{Files: Files{Cert: f.Cert}}, []string{"tlsKeyStore"}},
	}
	for _, c := range cases {
		c.o.Names = names
		_, err := NewServer(c.o)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
	if _, err := NewClient(Options{Names: names}); err == nil || !strings.Contains(err.Error(), "tlsTrustStore") {
		t.Errorf("client without CA: %v", err)
	}
	if _, err := NewClient(Options{Names: names, Files: Files{CA: f.CA, Cert: f.Cert}}); err == nil || !strings.Contains(err.Error(), "tlsKeyStore") {
		t.Errorf("client cert without key: %v", err)
	}
}

// The files are re-read once the refresh period has passed on the clock,
// at the next connection: new connections get the new certificate, a
// broken replacement keeps the old one, and without a period nothing is
// re-read.
func TestReloadAtThePeriod(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	f := ca.Write(t, dir, "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "first"}))
	clk := clock.NewManual(time.Unix(1000, 0))
	srv, err := NewServer(Options{Files: Files{Cert: f.Cert, Key: f.Key}, RefreshPeriod: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := NewServer(Options{Files: Files{Cert: f.Cert, Key: f.Key}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := NewClient(Options{Files: Files{CA: f.CA}})
	if err != nil {
		t.Fatal(err)
	}
	served := func(s *tls.Config) string {
		t.Helper()
		se, ce, c := handshake(t, s, cli)
		if se != nil || ce != nil {
			t.Fatalf("handshake: server %v, client %v", se, ce)
		}
		return c.Subject.CommonName
	}
	ca.Write(t, dir, "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "second"}))
	if got := served(srv); got != "first" {
		t.Fatalf("before the period: served %q", got)
	}
	clk.Advance(time.Minute)
	if got := served(srv); got != "second" {
		t.Fatalf("after the period: served %q", got)
	}
	if got := served(fixed); got != "first" {
		t.Fatalf("without a period: served %q", got)
	}
	// A half-written replacement: the loaded certificate stays.
	tlstest.WriteFile(t, f.Key, []byte("-----BEGIN PRIVATE KEY-----\ntruncated"))
	clk.Advance(time.Minute)
	if got := served(srv); got != "second" {
		t.Fatalf("after a broken replacement: served %q", got)
	}
	// Files removed: the loaded certificate stays too.
	if err := os.Remove(f.Cert); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if got := served(srv); got != "second" {
		t.Fatalf("after the files went away: served %q", got)
	}
}
