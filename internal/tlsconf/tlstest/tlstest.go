// Package tlstest generates certificates for tests at test time: a CA, and
// bookie and client certificates it signs, with chosen roles (the subject's
// OU, as BookKeeper's BookieAuthZFactory reads it) and validity. Nothing is
// stored in the repository, so nothing expires. Keys are ECDSA P-256 in
// PKCS#8 PEM, which both Folio and Java's PEM trust and key stores read.
package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(time.Now().UnixNano() + serial.Add(1)) }

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	return k
}

// NewCA returns a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Folio tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Leaf describes a certificate to issue. The zero value is a certificate
// for 127.0.0.1 and localhost, usable by servers and clients, valid from an
// hour ago for a day, without an OU.
type Leaf struct {
	CommonName string
	// OU is the subject's organizational unit; BookieAuthZFactory reads the
	// role from it: "0:writer" has role writer.
	OU string
	// NotBefore and NotAfter override the validity when not zero.
	NotBefore, NotAfter time.Time
	// IPs and DNSNames are the subject alternative names; both empty means
	// 127.0.0.1 and localhost.
	IPs      []net.IP
	DNSNames []string
}

// KeyPair is an issued certificate and its key, PEM-encoded.
type KeyPair struct {
	Cert *x509.Certificate
	// CertPEM is the certificate, KeyPEM the PKCS#8 private key.
	CertPEM, KeyPEM []byte
}

// Issue signs a certificate described by l.
func (ca *CA) Issue(t testing.TB, l Leaf) KeyPair {
	t.Helper()
	key := newKey(t)
	if l.CommonName == "" {
		l.CommonName = "folio-test"
	}
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if len(l.IPs) == 0 && len(l.DNSNames) == 0 {
		l.IPs, l.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
	}
	subj := pkix.Name{CommonName: l.CommonName, Organization: []string{"Folio tests"}}
	if l.OU != "" {
		subj.OrganizationalUnit = []string{l.OU}
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      subj,
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  l.IPs,
		DNSNames:     l.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatalf("tlstest: issue %s: %v", l.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return KeyPair{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
}

// Files are the paths of a CA file and a key pair's files.
type Files struct {
	CA, Cert, Key string
}

// Write writes the CA certificate and kp into dir as ca.pem, <name>.pem
// and <name>-key.pem (replacing them atomically if they exist, as a
// certificate rotation would) and returns their paths.
func (ca *CA) Write(t testing.TB, dir, name string, kp KeyPair) Files {
	t.Helper()
	f := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	WriteFile(t, f.CA, ca.PEM)
	WriteFile(t, f.Cert, kp.CertPEM)
	WriteFile(t, f.Key, kp.KeyPEM)
	return f
}

// WriteFile replaces path with b atomically (write a temporary file, then
// rename).
func WriteFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
