package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity of what NewCA and Issue make when the options leave it open.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultLeafValidity = 2 * 365 * 24 * time.Hour
	// backdate tolerates clocks of other machines that run a little behind.
	backdate = time.Hour
)

// CA is a certificate authority held in memory: a self-signed ECDSA P-256
// certificate and its key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Validity bounds a certificate; zero values mean "from an hour ago" and
// "for the default validity".
type Validity struct {
	NotBefore, NotAfter time.Time
}

func (v Validity) resolve(def time.Duration) (time.Time, time.Time) {
	nb, na := v.NotBefore, v.NotAfter
	if nb.IsZero() {
		nb = time.Now().Add(-backdate)
	}
	if na.IsZero() {
		na = nb.Add(backdate + def)
	}
	return nb, na
}

// NewCA makes a new CA with a fresh key.
func NewCA(commonName string, v Validity) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	nb, na := v.resolve(DefaultCAValidity)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Folio"}},
		NotBefore:             nb,
		NotAfter:              na,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return serial, nil
}

// LeafOptions describe a certificate Issue makes.
type LeafOptions struct {
	CommonName string
	// OrganizationalUnit is the subject's OU. BookKeeper's
	// BookieAuthZFactory reads a client's role from it, in the form
	// "0:<role>" (spec/security.md §3).
	OrganizationalUnit []string
	// DNSNames and IPAddresses are the subject alternative names a server
	// certificate is valid for.
	DNSNames    []string
	IPAddresses []net.IP
	// Server and Client set the extended key usages (TLS server and client
	// authentication); a certificate may have both.
	Server, Client bool
	Validity       Validity
}

// Issued is a certificate and its key in PEM: the certificate alone (the
// CA's is not appended; clients and servers are given the CA as their
// trust store) and the key as PKCS#8, which Java's PEM key stores require.
type Issued struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// Issue makes a certificate with a fresh ECDSA P-256 key, signed by ca.
func (ca *CA) Issue(o LeafOptions) (Issued, error) {
	if !o.Server && !o.Client {
		return Issued{}, errors.New("pki: a certificate needs the server or the client usage")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, fmt.Errorf("pki: key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return Issued{}, err
	}
	nb, na := o.Validity.resolve(DefaultLeafValidity)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: o.CommonName, OrganizationalUnit: o.OrganizationalUnit, Organization: []string{"Folio"}},
		NotBefore:    nb,
		NotAfter:     na,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPAddresses,
	}
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("pki: certificate %q: %w", o.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Issued{}, err
	}
	keyPEM, err := keyToPEM(key)
	if err != nil {
		return Issued{}, err
	}
	return Issued{CertPEM: certToPEM(cert), KeyPEM: keyPEM, Cert: cert}, nil
}

// CertPEM is the CA's certificate in PEM: a trust store.
func (ca *CA) CertPEM() []byte { return certToPEM(ca.Cert) }

// KeyPEM is the CA's key, PKCS#8 PEM.
func (ca *CA) KeyPEM() ([]byte, error) { return keyToPEM(ca.Key) }

func certToPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyToPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// LoadCA reads a CA written by WriteDir (or any ECDSA CA in PEM).
func LoadCA(certPath, keyPath string) (*CA, error) {
	certs, err := LoadCertificates("CA certificate", certPath)
	if err != nil {
		return nil, err
	}
	key, err := LoadPrivateKey("CA key", keyPath)
	if err != nil {
		return nil, err
	}
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok || !publicKeyEqual(certs[0].PublicKey, key.Public()) {
		return nil, fileErr("CA key", keyPath, fmt.Errorf("not the ECDSA key of the CA certificate in %s", certPath))
	}
	if !certs[0].IsCA {
		return nil, fileErr("CA certificate", certPath, errors.New("not a CA certificate"))
	}
	return &CA{Cert: certs[0], Key: ek}, nil
}

// WriteFile writes data to path atomically and durably (a temporary file,
// fsync, rename, fsync of the directory), with mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
