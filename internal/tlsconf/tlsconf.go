// Package tlsconf builds the TLS configurations of bookie connections from
// PEM files, as BookKeeper's TLSContextFactory does with
// tlsKeyStoreType=PEM and tlsTrustStoreType=PEM (spec/security.md §2):
//
//   - a server (the bookie) presents its certificate chain and, when asked to
//     authenticate clients (tlsClientAuthentication), requires a client
//     certificate that verifies against its CA file;
//   - a client verifies the bookie's chain against its CA file, without a
//     host name check unless asked (Java's tlsHostnameVerificationEnabled is
//     off by default), and presents its own certificate when it has one.
//
// # Reloading
//
// With Options.RefreshPeriod > 0 the files are re-read at most once per
// period, when a connection is set up (Java checks when it creates a
// connection's TLS handler too): if any file's contents changed and the new
// set loads, new connections use it; connections already up keep theirs. A
// set that fails to load (a half-written file, a key that does not match its
// certificate) is logged and the previous one stays in use, as in Java.
// Period 0 reads the files once.
//
// Sessions are never resumed: every connection makes a full handshake, so a
// rotated CA or certificate applies to every new connection.
package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
)

// Files are the PEM files of one end of a connection.
type Files struct {
	// Cert is the certificate chain, leaf first (Java's tlsCertificatePath),
	// and Key its private key (Java's tlsKeyStore with type PEM): PKCS#8, as
	// Java reads it; PKCS#1 and SEC1 keys are read too. Both or neither.
	Cert, Key string
	// CA holds the certificates the peer's chain must verify against
	// (Java's tlsTrustStore with type PEM).
	CA string
}

// Names say what each file is called where it was configured
// ("tlsCertificatePath", "--tls-cert"); errors name the file by it. Empty
// names default to "certificate", "private key" and "CA certificates".
type Names struct {
	Cert, Key, CA string
}

// Options configure a server or client configuration.
type Options struct {
	Files
	Names Names
	// ClientAuth (servers) requires a client certificate that verifies
	// against Files.CA (Java's tlsClientAuthentication on a bookie).
	// Without it the server asks for none.
	ClientAuth bool
	// VerifyHostname (clients) checks the bookie's certificate against the
	// host it was dialled by, tls.Config.ServerName (Java's
	// tlsHostnameVerificationEnabled). Off: only the chain is verified.
	VerifyHostname bool
	// Restrictions limit the protocol versions and cipher suites (Java's
	// tlsEnabledProtocols and tlsEnabledCipherSuites; ParseRestrictions).
	// The zero value is Go's defaults.
	Restrictions Restrictions
	// RefreshPeriod re-reads the files at most this often (Java's
	// tlsCertFilesRefreshDurationSeconds); 0 never.
	RefreshPeriod time.Duration
	// Clock measures RefreshPeriod; nil is the wall clock.
	Clock clock.Clock
	// Logger receives reloads and failed reloads; nil discards.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Names.Cert == "" {
		o.Names.Cert = "certificate"
	}
	if o.Names.Key == "" {
		o.Names.Key = "private key"
	}
	if o.Names.CA == "" {
		o.Names.CA = "CA certificates"
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// NewServer returns the configuration of a TLS server (a bookie accepting
// START_TLS). Files.Cert and Files.Key are required, Files.CA too with
// ClientAuth. The files are read now: an error names the file and what is
// wrong with it.
func NewServer(o Options) (*tls.Config, error) {
	o.setDefaults()
	if o.Cert == "" || o.Key == "" {
		return nil, fmt.Errorf("a TLS server needs its %s and %s files", o.Names.Cert, o.Names.Key)
	}
	if o.ClientAuth && o.CA == "" {
		return nil, fmt.Errorf("authenticating TLS clients needs the %s file that verifies them", o.Names.CA)
	}
	if !o.ClientAuth {
		// Unused by a server that asks for no client certificate; Java
		// does not read it either.
		o.CA = ""
	}
	s, err := newSource(o, true)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		// Each connection gets the configuration of the files as last
		// (re)loaded.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current().server, nil
		},
	}, nil
}

// NewClient returns the configuration of a TLS client (a bookie client
// after START_TLS). Files.CA is required (Java: "CA Certificate required");
// Files.Cert and Files.Key are presented when a server asks for a client
// certificate. The files are read now. Give each connection
// ForHost(config, host): with VerifyHostname the check needs the host, which
// a handshake with an IP address does not carry (no SNI).
func NewClient(o Options) (*tls.Config, error) {
	o.setDefaults()
	if o.CA == "" {
		return nil, fmt.Errorf("a TLS client needs the %s file that verifies the bookies", o.Names.CA)
	}
	if (o.Cert == "") != (o.Key == "") {
		return nil, fmt.Errorf("a client certificate needs both its %s and its %s file", o.Names.Cert, o.Names.Key)
	}
	s, err := newSource(o, false)
	if err != nil {
		return nil, err
	}
	c := &clientSource{s: s, verifyHost: o.VerifyHostname, restrict: o.Restrictions}
	base := c.config("")
	clients.Store(base, c)
	return base, nil
}

// clients maps the configurations NewClient returned to their sources, for
// ForHost. Entries stay for the life of the process: make one configuration
// per set of files (a client, a shell command), not one per connection.
var clients sync.Map // *tls.Config → *clientSource

type clientSource struct {
	s          *source
	verifyHost bool
	restrict   Restrictions
}

// config returns a client configuration for a connection to host ("": the
// host is tls.Config.ServerName as the handshake saw it).
func (c *clientSource) config(host string) *tls.Config {
	cfg := &tls.Config{
		ServerName: host,
		// Verification is VerifyConnection's, against the CA as last
		// (re)loaded: Go's built-in check would also insist on the host
		// name, which Java does not check by default.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			name := ""
			if c.verifyHost {
				name = host
				if name == "" {
					name = cs.ServerName
				}
				if name == "" {
					return errors.New("tls: host name verification needs the bookie's host name (use tlsconf.ForHost)")
				}
			}
			return verifyChain(cs.PeerCertificates, c.s.current().roots, x509.ExtKeyUsageServerAuth, name)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert := c.s.current().cert; cert != nil {
				return cert, nil
			}
			return &tls.Certificate{}, nil // none: the server decides
		},
		DynamicRecordSizingDisabled: true, // as the server's
	}
	c.restrict.apply(cfg)
	return cfg
}

// ForHost returns the configuration for one connection to host (a host
// name or IP address, without port). For a configuration NewClient made it
// is a fresh one whose checks know the host; for any other it is a clone
// with ServerName set to host unless already set, so that Go's own
// verification checks the bookie's certificate against that name.
func ForHost(cfg *tls.Config, host string) *tls.Config {
	if c, ok := clients.Load(cfg); ok {
		return c.(*clientSource).config(host)
	}
	out := cfg.Clone()
	if out.ServerName == "" {
		out.ServerName = host
	}
	return out
}

// verifyChain verifies a peer's chain (leaf first) against roots, for the
// usage, and the host name unless it is empty.
func verifyChain(chain []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage, host string) error {
	if len(chain) == 0 {
		return errors.New("tls: the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return fmt.Errorf("tls: the peer's certificate (subject %q) does not verify: %w", chain[0].Subject.String(), err)
	}
	return nil
}

// material is one loaded set of files.
type material struct {
	raw    [3][]byte // contents of Cert, Key, CA: what a reload compares
	cert   *tls.Certificate
	roots  *x509.CertPool
	server *tls.Config // servers only
}

// source holds the current material and reloads it.
type source struct {
	o      Options
	server bool
	mu     struct {
		sync.Mutex
		cur     *material
		checked time.Time // when the files were last read
	}
}

func newSource(o Options, server bool) (*source, error) {
	s := &source{o: o, server: server}
	raw, err := s.read()
	if err != nil {
		return nil, err
	}
	m, err := s.build(raw)
	if err != nil {
		return nil, err
	}
	s.warnValidity(m)
	s.mu.cur, s.mu.checked = m, o.Clock.Now()
	return s, nil
}

// current returns the material to use for a new connection, re-reading the
// files first if a refresh period has passed since they were last read.
func (s *source) current() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.o.RefreshPeriod <= 0 {
		return s.mu.cur
	}
	now := s.o.Clock.Now()
	if now.Sub(s.mu.checked) < s.o.RefreshPeriod {
		return s.mu.cur
	}
	s.mu.checked = now
	raw, err := s.read()
	if err != nil {
		s.o.Logger.Error("cannot re-read the TLS files; new connections keep the loaded ones", "err", err)
		return s.mu.cur
	}
	if sameContents(raw, s.mu.cur.raw) {
		return s.mu.cur
	}
	m, err := s.build(raw)
	if err != nil {
		s.o.Logger.Error("the TLS files changed but do not load; new connections keep the loaded ones", "err", err)
		return s.mu.cur
	}
	s.mu.cur = m
	s.o.Logger.Info("TLS files reloaded; new connections use them", "cert", s.o.Cert, "key", s.o.Key, "ca", s.o.CA)
	s.warnValidity(m)
	return m
}

func sameContents(a, b [3][]byte) bool {
	return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) && bytes.Equal(a[2], b[2])
}

// read reads the configured files.
func (s *source) read() ([3][]byte, error) {
	var raw [3][]byte
	paths := [3]string{s.o.Cert, s.o.Key, s.o.CA}
	names := [3]string{s.o.Names.Cert, s.o.Names.Key, s.o.Names.CA}
	for i, p := range paths {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return raw, fmt.Errorf("%s %s: %w", names[i], p, err)
		}
		raw[i] = b
	}
	return raw, nil
}

// build parses one set of files.
func (s *source) build(raw [3][]byte) (*material, error) {
	m := &material{raw: raw}
	if s.o.Cert != "" {
		c, err := parseKeyPair(raw[0], raw[1], s.o.Cert, s.o.Key, s.o.Names)
		if err != nil {
			return nil, err
		}
		m.cert = c
	}
	if s.o.CA != "" {
		pool, err := parseCAs(raw[2], s.o.CA, s.o.Names.CA)
		if err != nil {
			return nil, err
		}
		m.roots = pool
	}
	if s.server {
		cfg := &tls.Config{
			Certificates: []tls.Certificate{*m.cert},
			// No resumption: a rotated CA or revoked client applies to
			// every new connection.
			SessionTicketsDisabled: true,
			// Bookie connections are long-lived streams of batched
			// frames: full-size records from the start cost fewer seals.
			DynamicRecordSizingDisabled: true,
		}
		if s.o.ClientAuth {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
			cfg.ClientCAs = m.roots
		}
		s.o.Restrictions.apply(cfg)
		m.server = cfg
	}
	return m, nil
}

// warnValidity logs when the own certificate is expired or not yet valid:
// peers will refuse it.
func (s *source) warnValidity(m *material) {
	if m.cert == nil || m.cert.Leaf == nil {
		return
	}
	now := time.Now() // certificate validity is wall-clock time
	leaf := m.cert.Leaf
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		s.o.Logger.Warn("the TLS certificate is not valid now; peers will refuse it", "cert", s.o.Cert,
			"subject", leaf.Subject.String(), "notBefore", leaf.NotBefore, "notAfter", leaf.NotAfter)
	}
}

// parseKeyPair reads a PEM certificate chain and its private key.
func parseKeyPair(certPEM, keyPEM []byte, certPath, keyPath string, n Names) (*tls.Certificate, error) {
	if !hasBlock(certPEM, "CERTIFICATE") {
		return nil, fmt.Errorf("%s %s: no PEM CERTIFICATE block", n.Cert, certPath)
	}
	if hasBlock(keyPEM, "ENCRYPTED PRIVATE KEY") {
		return nil, fmt.Errorf("%s %s: the private key is encrypted; Folio reads unencrypted PKCS#8 keys only (protect the file with its permissions instead)", n.Key, keyPath)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s %s with %s %s: %w", n.Cert, certPath, n.Key, keyPath, err)
	}
	return &c, nil
}

// parseCAs reads a PEM bundle of CA certificates; every CERTIFICATE block
// must parse and there must be at least one.
func parseCAs(b []byte, path, name string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s %s: certificate %d: %w", name, path, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s %s: no PEM CERTIFICATE block", name, path)
	}
	return pool, nil
}

func hasBlock(b []byte, typ string) bool {
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}
