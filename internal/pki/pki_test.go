package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnsureDirGeneratesOnceAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	d, created, err := EnsureDir(dir, time.Now())
	if err != nil || !created {
		t.Fatalf("EnsureDir: created %v, %v", created, err)
	}
	before := map[string][]byte{}
	for _, f := range d.files() {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
		st, _ := os.Stat(f)
		if strings.HasSuffix(f, "-key.pem") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	d2, created, err := EnsureDir(dir, time.Now())
	if err != nil || created || d2 != d {
		t.Fatalf("second EnsureDir: %v created %v, %v", d2, created, err)
	}
	for _, f := range d.files() {
		if b, _ := os.ReadFile(f); !bytes.Equal(b, before[f]) {
			t.Errorf("%s changed on reuse", f)
		}
	}

	// The files make a working mutual TLS pair, and the client carries
	// BookieAuthZFactory's role.
	srvFiles := TLSFiles{CAFile: d.CA(), CertFile: d.ServerCert(), KeyFile: d.ServerKey(), CASetting: "ca", CertSetting: "cert", KeySetting: "key"}
	srvCfg, err := srvFiles.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err := TLSFiles{CAFile: d.CA(), CertFile: d.ClientCert(), KeyFile: d.ClientKey()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if ou := cliCfg.Certificates[0].Leaf.Subject.OrganizationalUnit; len(ou) != 1 || ou[0] != "0:"+LocalClientRole {
		t.Errorf("client OU %v", ou)
	}
	serverConf := &tls.Config{Certificates: srvCfg.Certificates, ClientCAs: srvCfg.RootCAs, ClientAuth: tls.RequireAndVerifyClientCert}
	handshake(t, serverConf, cliCfg, "127.0.0.1")
	handshake(t, serverConf, cliCfg, "localhost")
}

// handshake runs a TLS handshake over an in-memory pipe and fails the test
// unless both sides succeed.
func handshake(t *testing.T, server, client *tls.Config, serverName string) {
	t.Helper()
	c := client.Clone()
	c.ServerName = serverName
	if err := tryHandshake(server, c); err != nil {
		t.Fatalf("handshake with %s: %v", serverName, err)
	}
}

func tryHandshake(server, client *tls.Config) error {
	// Real loopback TCP: net.Pipe is unbuffered, and both sides' closing
	// alerts would wait for each other.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		a, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		s := tls.Server(a, server)
		err = s.Handshake()
		if err == nil {
			// TLS 1.3: the client learns of a refused certificate on its
			// first read; answer one byte so that it has something to read.
			_, err = s.Write([]byte{1})
		}
		s.Close()
		errc <- err
	}()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	cl := tls.Client(b, client)
	err = cl.Handshake()
	if err == nil {
		_, err = cl.Read(make([]byte, 1))
	}
	cl.Close()
	return errors.Join(err, <-errc)
}

func TestEnsureDirRefusesPartialOrForeignFiles(t *testing.T) {
	dir := t.TempDir()
	d, _, err := EnsureDir(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d.ClientKey()); err != nil {
		t.Fatal(err)
	}
	_, _, err = EnsureDir(dir, time.Now())
	if err == nil || !strings.Contains(err.Error(), "but not client-key.pem") {
		t.Fatalf("partial directory: %v", err)
	}

	// A server certificate of another CA.
	other, _, err := EnsureDir(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	d2, _, err := EnsureDir(dir2, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ServerCertFile, ServerKeyFile} {
		b, _ := os.ReadFile(filepath.Join(other.Path, f))
		write(t, d2.Path, f, b)
	}
	if _, _, err := EnsureDir(dir2, time.Now()); err == nil || !strings.Contains(err.Error(), "server.pem does not check against ca.pem") {
		t.Fatalf("foreign server certificate: %v", err)
	}

	// Expired certificates are refused on reuse.
	if _, _, err := EnsureDir(other.Path, time.Now().Add(DefaultLeafValidity+48*time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired: %v", err)
	}
}

func TestLoadersNameSettingAndFile(t *testing.T) {
	dir := t.TempDir()
	d, _, err := EnsureDir(filepath.Join(dir, "ca"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	jks := write(t, dir, "ks.jks", []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2})
	p12 := write(t, dir, "ks.p12", []byte{0x30, 0x82, 0x0a, 0x01, 0x02})
	empty := write(t, dir, "empty", []byte(" \n"))
	text := write(t, dir, "text", []byte("hello"))
	encrypted := write(t, dir, "enc.pem", []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"))
	caKey, _ := os.ReadFile(d.CAKey())
	keyInTrust := write(t, dir, "keytrust.pem", caKey)

	cases := []struct {
		name string
		err  error
		want string
	}{
		{"missing CA", loadPool("metadataServiceTlsCaFile", filepath.Join(dir, "nope.pem")), "metadataServiceTlsCaFile " + filepath.Join(dir, "nope.pem") + ": cannot read it: no such file or directory"},
		{"JKS trust store", loadPool("httpServerTrustStorePath", jks), "httpServerTrustStorePath " + jks + ": unsupported file format: this is a Java KeyStore (JKS)"},
		{"PKCS12 key", loadKey("httpServerKeyStorePath", p12), "httpServerKeyStorePath " + p12 + ": unsupported file format: this is binary DER"},
		{"empty", loadPool("--metadata-tls-ca", empty), "--metadata-tls-ca " + empty + ": the file is empty"},
		{"not PEM", loadKey("k", text), "k " + text + ": no PEM block in it"},
		{"encrypted key", loadKey("k", encrypted), "k " + encrypted + ": unsupported file format: the key is encrypted"},
		{"key in trust store", loadPool("ca", keyInTrust), `ca ` + keyInTrust + `: PEM block 1 is "PRIVATE KEY", want CERTIFICATE`},
		{"key of another cert", func() error {
			_, err := LoadKeyPair("cert", d.ServerCert(), "key", d.ClientKey())
			return err
		}(), "key " + d.ClientKey() + ": this key does not belong to the certificate in cert " + d.ServerCert()},
		{"cert without key", func() error {
			_, err := TLSFiles{CertFile: d.ClientCert(), CertSetting: "--metadata-tls-cert", KeySetting: "--metadata-tls-key"}.ClientConfig()
			return err
		}(), "--metadata-tls-cert is set but --metadata-tls-key is not"},
		{"secret missing", func() error {
			_, err := ReadSecret("metadataServicePasswordPath", filepath.Join(dir, "pw"))
			return err
		}(),
			"metadataServicePasswordPath " + filepath.Join(dir, "pw") + ": cannot read it"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.want) {
			t.Errorf("%s: got %v\nwant prefix %s", c.name, c.err, c.want)
		}
	}
	var fe *FileError
	if err := loadPool("s", jks); !errors.As(err, &fe) || !errors.Is(err, ErrUnsupportedFormat) || fe.Setting != "s" || fe.Path != jks {
		t.Errorf("FileError: %#v", err)
	}

	pw := write(t, dir, "pw", []byte("  s3cret\n"))
	if s, err := ReadSecret("p", pw); err != nil || s != "s3cret" {
		t.Errorf("ReadSecret: %q, %v", s, err)
	}
	pool, err := LoadCertPool("ca", d.CA())
	if err != nil || !pool.Equal(func() *x509.CertPool {
		p := x509.NewCertPool()
		ca, _ := LoadCA(d.CA(), d.CAKey())
		p.AddCert(ca.Cert)
		return p
	}()) {
		t.Errorf("LoadCertPool: %v", err)
	}
}

func loadPool(setting, path string) error { _, err := LoadCertPool(setting, path); return err }
func loadKey(setting, path string) error  { _, err := LoadPrivateKey(setting, path); return err }
