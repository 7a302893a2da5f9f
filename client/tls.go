package client

import (
	"crypto/tls"

	"github.com/foliodb/folio/internal/tlsconf"
)

// TLSConfigFromPEM returns a Config.TLS built from PEM files as Java's
// client builds its TLS from tlsTrustStoreType=PEM and tlsKeyStoreType=PEM
// (spec/security.md §2): every bookie's certificate must verify against the
// CA certificates in caFile (tlsTrustStore; host names are not checked, as
// with Java's default tlsHostnameVerificationEnabled=false), and certFile
// with its PKCS#8 keyFile (tlsCertificatePath, tlsKeyStore; both empty for
// none) is presented to bookies that require a client certificate
// (tlsClientAuthentication). The files are read once, now; an error names
// the file.
func TLSConfigFromPEM(caFile, certFile, keyFile string) (*tls.Config, error) {
	return tlsconf.NewClient(tlsconf.Options{
		Files: tlsconf.Files{CA: caFile, Cert: certFile, Key: keyFile},
		Names: tlsconf.Names{CA: "CA file", Cert: "certificate file", Key: "key file"},
	})
}
