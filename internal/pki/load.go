// Package pki reads and makes the files of Folio's TLS and authentication
// settings: PEM certificates, private keys and trust stores, password and
// token files (load.go), and a local certificate authority that issues
// ECDSA P-256 certificates for `folio standalone --tls-dir` and for tests
// (ca.go).
//
// Every loader takes the name of the setting the path came from (a
// bk_server.conf key such as metadataServiceTlsCaFile, a flag such as
// --metadata-tls-ca) and fails with a *FileError that names it and the
// file, so that a start-up error tells the operator which line to fix.
// Loaders never fall back: a file that is missing, unreadable, empty, in a
// format Folio does not read (a Java KeyStore, PKCS#12), encrypted, or
// whose key does not match its certificate is an error. Security settings
// fail closed.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// FileError is a setting whose file cannot be used.
type FileError struct {
	// Setting names where the path came from: a configuration key
	// (metadataServiceTlsCaFile) or a flag (--metadata-tls-ca).
	Setting string
	// Path is the file as configured.
	Path string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Setting, e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// ErrUnsupportedFormat marks a file in a format Folio does not read (a Java
// KeyStore, PKCS#12, an encrypted key).
var ErrUnsupportedFormat = errors.New("unsupported file format")

func fileErr(setting, path string, err error) error {
	return &FileError{Setting: setting, Path: path, Err: err}
}

// readFile reads a settings file; an empty file is an error.
func readFile(setting, path string) ([]byte, error) {
	if path == "" {
		return nil, fileErr(setting, `""`, errors.New("empty path"))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in FileError already
		}
		return nil, fileErr(setting, path, fmt.Errorf("cannot read it: %w", err))
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fileErr(setting, path, errors.New("the file is empty"))
	}
	return b, nil
}

// checkPEM refuses the binary stores Java tools make, naming them, and
// anything else that holds no PEM block.
func checkPEM(setting, path string, b []byte) error {
	switch {
	case len(b) >= 4 && b[0] == 0xfe && b[1] == 0xed && b[2] == 0xfe && b[3] == 0xed:
		return fileErr(setting, path, fmt.Errorf("%w: this is a Java KeyStore (JKS); Folio reads PEM files: export the key (PKCS#8) and the certificates to PEM, e.g. with keytool -importkeystore to PKCS#12 and then openssl", ErrUnsupportedFormat))
	case len(b) >= 4 && b[0] == 0xce && b[1] == 0xce && b[2] == 0xce && b[3] == 0xce:
		return fileErr(setting, path, fmt.Errorf("%w: this is a Java JCEKS key store; Folio reads PEM files", ErrUnsupportedFormat))
	case len(b) > 0 && b[0] == 0x30 && !bytes.Contains(b, []byte("-----BEGIN")):
		return fileErr(setting, path, fmt.Errorf("%w: this is binary DER (a PKCS#12 key store or a DER certificate or key); Folio reads PEM files: convert it with openssl (openssl pkcs12 -nodes, openssl x509 -inform der)", ErrUnsupportedFormat))
	case !bytes.Contains(b, []byte("-----BEGIN")):
		return fileErr(setting, path, errors.New("no PEM block in it (want -----BEGIN ...-----)"))
	}
	return nil
}

// LoadCertPool reads a PEM file of one or more CA certificates (a trust
// store) into a pool. Blocks other than certificates are an error: a key
// in a trust store is a mistake worth hearing about.
func LoadCertPool(setting, path string) (*x509.CertPool, error) {
	certs, err := LoadCertificates(setting, path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// LoadCertificates reads a PEM file of certificates, in file order.
func LoadCertificates(setting, path string) ([]*x509.Certificate, error) {
	b, err := readFile(setting, path)
	if err != nil {
		return nil, err
	}
	if err := checkPEM(setting, path, b); err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fileErr(setting, path, fmt.Errorf("PEM block %d is %q, want CERTIFICATE", n, block.Type))
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fileErr(setting, path, fmt.Errorf("certificate %d: %w", n, err))
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fileErr(setting, path, errors.New("no certificate in it"))
	}
	return certs, nil
}

// LoadPrivateKey reads an unencrypted PEM private key: PKCS#8 ("PRIVATE
// KEY", what Java's PEM key stores require), PKCS#1 ("RSA PRIVATE KEY") or
// SEC 1 ("EC PRIVATE KEY"). An encrypted key is refused (Folio takes no
// key passwords: protect the file by its permissions).
func LoadPrivateKey(setting, path string) (crypto.Signer, error) {
	b, err := readFile(setting, path)
	if err != nil {
		return nil, err
	}
	if err := checkPEM(setting, path, b); err != nil {
		return nil, err
	}
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fileErr(setting, path, errors.New("no private key in it (want a PEM block PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"))
		}
		if _, encrypted := block.Headers["Proc-Type"]; encrypted || block.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, fileErr(setting, path, fmt.Errorf("%w: the key is encrypted; Folio reads unencrypted keys only (decrypt it with openssl pkcs8 -nocrypt or openssl ec/rsa, and keep the file readable by Folio's user only)", ErrUnsupportedFormat))
		}
		var key any
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			continue // e.g. EC PARAMETERS before the key, or a certificate
		}
		if err != nil {
			return nil, fileErr(setting, path, fmt.Errorf("%s: %w", block.Type, err))
		}
		switch k := key.(type) {
		case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
			return k.(crypto.Signer), nil
		default:
			return nil, fileErr(setting, path, fmt.Errorf("unsupported key type %T", key))
		}
	}
}

// LoadKeyPair reads a certificate chain (leaf first) and its private key
// into a tls.Certificate, checking that the key belongs to the leaf.
func LoadKeyPair(certSetting, certPath, keySetting, keyPath string) (tls.Certificate, error) {
	chain, err := LoadCertificates(certSetting, certPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := LoadPrivateKey(keySetting, keyPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !publicKeyEqual(chain[0].PublicKey, key.Public()) {
		return tls.Certificate{}, fileErr(keySetting, keyPath,
			fmt.Errorf("this key does not belong to the certificate in %s %s (subject %q)", certSetting, certPath, chain[0].Subject.String()))
	}
	out := tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}

func publicKeyEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// ReadSecret reads a password or token file: its content without
// surrounding white space (a trailing newline is what editors and `echo`
// leave). A file that is empty or only white space is an error.
func ReadSecret(setting, path string) (string, error) {
	b, err := readFile(setting, path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// TLSFiles names the PEM files of one TLS endpoint and the settings they
// came from. A setting whose path is empty is not configured.
type TLSFiles struct {
	CAFile, CertFile, KeyFile          string
	CASetting, CertSetting, KeySetting string
}

// Any reports whether any file is configured.
func (f TLSFiles) Any() bool { return f.CAFile != "" || f.CertFile != "" || f.KeyFile != "" }

// ClientConfig builds the tls.Config of a client that verifies its server
// against CAFile (the system's roots when it is empty) and, with CertFile
// and KeyFile, presents that certificate. A certificate without its key,
// or a key without its certificate, is an error naming the missing one.
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pool, err := LoadCertPool(f.CASetting, f.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		pair, err := LoadKeyPair(f.CertSetting, f.CertFile, f.KeySetting, f.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	case f.CertFile != "":
		return nil, fmt.Errorf("%s is set but %s is not: a client certificate needs its private key", f.CertSetting, f.KeySetting)
	case f.KeyFile != "":
		return nil, fmt.Errorf("%s is set but %s is not: a private key needs its certificate", f.KeySetting, f.CertSetting)
	}
	return cfg, nil
}
