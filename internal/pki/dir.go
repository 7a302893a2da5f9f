package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files of a local CA directory (`folio standalone --tls-dir DIR`).
// Keys are PKCS#8 PEM, mode 0600; certificates PEM, mode 0644.
const (
	CAFile         = "ca.pem"
	CAKeyFile      = "ca-key.pem"
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server-key.pem"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client-key.pem"
)

// Names in the certificates of a local CA directory.
const (
	LocalCAName     = "Folio local CA"
	LocalServerName = "folio-server"
	LocalClientName = "folio-client"
	// LocalClientRole is the client certificate's role for BookKeeper's
	// BookieAuthZFactory (subject OU "0:folio"): a bookie with
	// authorizedRoles=folio admits it.
	LocalClientRole = "folio"
)

// LocalHosts are the names the server certificate of a local CA directory
// is valid for: the loopback addresses a standalone listens on.
var LocalHosts = []string{"127.0.0.1", "::1", "localhost"}

// Dir is a local CA directory: a CA, one server certificate for every
// listener of a local cluster (etcd, the admin HTTP server, the bookies)
// and one client certificate for its clients, shell and tools.
type Dir struct {
	// Path is the directory, absolute.
	Path string
}

// CA, CAKey, ServerCert, ServerKey, ClientCert and ClientKey are the
// files' absolute paths.
func (d Dir) CA() string         { return filepath.Join(d.Path, CAFile) }
func (d Dir) CAKey() string      { return filepath.Join(d.Path, CAKeyFile) }
func (d Dir) ServerCert() string { return filepath.Join(d.Path, ServerCertFile) }
func (d Dir) ServerKey() string  { return filepath.Join(d.Path, ServerKeyFile) }
func (d Dir) ClientCert() string { return filepath.Join(d.Path, ClientCertFile) }
func (d Dir) ClientKey() string  { return filepath.Join(d.Path, ClientKeyFile) }

func (d Dir) files() []string {
	return []string{d.CA(), d.CAKey(), d.ServerCert(), d.ServerKey(), d.ClientCert(), d.ClientKey()}
}

// EnsureDir returns the local CA directory at path, generating it when it
// holds none of its files (created is then true) and otherwise reusing
// what is there after checking it: every file present and readable, both
// certificates signed by the CA, valid now, with the usages they need and
// their keys. A directory with only some of the files, or whose files do
// not check, is an error: generating new ones over them would lock out
// every client given the old CA. now is the time the check uses.
func EnsureDir(path string, now time.Time) (d Dir, created bool, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Dir{}, false, err
	}
	d = Dir{Path: abs}
	var present, missing []string
	for _, f := range d.files() {
		switch _, err := os.Stat(f); {
		case err == nil:
			present = append(present, filepath.Base(f))
		case errors.Is(err, os.ErrNotExist):
			missing = append(missing, filepath.Base(f))
		default:
			return d, false, fmt.Errorf("TLS directory %s: %w", abs, err)
		}
	}
	switch {
	case len(present) == 0:
		return d, true, d.generate()
	case len(missing) > 0:
		return d, false, fmt.Errorf("TLS directory %s holds %s but not %s: restore the missing files, or remove the directory to generate a new CA (every client must then be given the new %s)",
			abs, strings.Join(present, ", "), strings.Join(missing, ", "), CAFile)
	}
	return d, false, d.check(now)
}

func (d Dir) generate() error {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("TLS directory: %w", err)
	}
	ca, err := NewCA(LocalCAName, Validity{})
	if err != nil {
		return err
	}
	var ips []net.IP
	var dns []string
	for _, h := range LocalHosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	server, err := ca.Issue(LeafOptions{CommonName: LocalServerName, DNSNames: dns, IPAddresses: ips, Server: true, Client: true})
	if err != nil {
		return err
	}
	client, err := ca.Issue(LeafOptions{CommonName: LocalClientName, OrganizationalUnit: []string{"0:" + LocalClientRole}, Client: true})
	if err != nil {
		return err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	// Keys first, the CA certificate last: a crash part-way leaves a
	// directory that EnsureDir reports as incomplete, never one that
	// looks whole with a certificate missing its key.
	writes := []struct {
		path string
		data []byte
		perm os.FileMode
	}{
		{d.CAKey(), caKey, 0o600},
		{d.ServerKey(), server.KeyPEM, 0o600},
		{d.ClientKey(), client.KeyPEM, 0o600},
		{d.ServerCert(), server.CertPEM, 0o644},
		{d.ClientCert(), client.CertPEM, 0o644},
		{d.CA(), ca.CertPEM(), 0o644},
	}
	for _, w := range writes {
		if err := WriteFile(w.path, w.data, w.perm); err != nil {
			return fmt.Errorf("TLS directory: write %s: %w", w.path, err)
		}
	}
	return nil
}

// check verifies a directory written by generate (or by an operator who
// placed files of the same shape there).
func (d Dir) check(now time.Time) error {
	ca, err := LoadCA(d.CA(), d.CAKey())
	if err != nil {
		return fmt.Errorf("TLS directory %s: %w", d.Path, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, leaf := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{
		{d.ServerCert(), d.ServerKey(), x509.ExtKeyUsageServerAuth},
		{d.ClientCert(), d.ClientKey(), x509.ExtKeyUsageClientAuth},
	} {
		pair, err := LoadKeyPair("certificate", leaf.cert, "key", leaf.key)
		if err != nil {
			return fmt.Errorf("TLS directory %s: %w", d.Path, err)
		}
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{leaf.usage}}); err != nil {
			return fmt.Errorf("TLS directory %s: %s does not check against %s: %w (remove the directory to generate new certificates; every client must then be given the new %s)",
				d.Path, filepath.Base(leaf.cert), CAFile, err, CAFile)
		}
	}
	return nil
}
