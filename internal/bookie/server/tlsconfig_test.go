package server

import (
	"context"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/tlsconf/tlstest"
)

// secConf loads a configuration from key=value overrides on top of valid
// directories and an unreachable metadata store.
func secConf(t *testing.T, kv ...string) (Config, error) {
	t.Helper()
	dir := t.TempDir()
	base := []string{
		"journalDirectories=" + filepath.Join(dir, "j"), "ledgerDirectories=" + filepath.Join(dir, "l"),
		"metadataServiceUri=etcd://127.0.0.1:1/ledgers",
	}
	return LoadConfig("", Overrides{Set: append(base, kv...)}, srvQuietLogger())
}

// pemKeys are the keys of a working PEM setup (spec/security.md §2).
func pemKeys(f tlstest.Files) []string {
	return []string{
		"tlsProviderFactoryClass=" + TLSContextFactory, "tlsProvider=OpenSSL",
		"tlsKeyStoreType=PEM", "tlsKeyStore=" + f.Key, "tlsCertificatePath=" + f.Cert,
		"tlsTrustStoreType=PEM", "tlsTrustStore=" + f.CA, "tlsClientAuthentication=true",
	}
}

func TestSecurityConfigAccepted(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	f := ca.Write(t, t.TempDir(), "bookie", ca.Issue(t, tlstest.Leaf{OU: "0:bookie"}))
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := secConf(t, append(pemKeys(f),
		"tlsEnabledProtocols=TLSv1.2,TLSv1.3", "tlsCertFilesRefreshDurationSeconds=300",
		"tlsTrustStorePasswordPath=/ignored/with/PEM",
		"bookieAuthProviderFactoryClass="+BookieAuthZFactory, "authorizedRoles=writer, bookie",
		"autoRecoveryDaemonEnabled=true", "tlsHostnameVerificationEnabled=true", "startTLSTimeoutSecs=3",
		"permittedStartupUsers=nobody-else,"+u.Username)...)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Security
	if !s.TLSEnabled() || s.TLSCertFilesRefresh != 300*time.Second || s.StartTLSTimeoutOrDefault() != 3*time.Second ||
		strings.Join(s.AuthorizedRoles, "|") != "writer|bookie" {
		t.Fatalf("security config: %+v", s)
	}
	srv, auth, err := s.ServerTLS(nil, nil)
	if err != nil || srv == nil {
		t.Fatalf("ServerTLS: %v", err)
	}
	if ra, ok := auth.(RoleAuthorizer); !ok || strings.Join(ra.Roles, ",") != "writer,bookie" {
		t.Fatalf("authorizer %#v", auth)
	}
	cli, err := s.ClientTLS(nil, nil)
	if err != nil || cli == nil {
		t.Fatalf("ClientTLS: %v", err)
	}
	// The registration marks the endpoint "tls", as Java's BookieService.
	info, err := serviceInfo(&cfg, "127.0.0.1:3181", true)
	if err != nil || len(info.Endpoints) != 1 || strings.Join(info.Endpoints[0].Extensions, ",") != "tls" {
		t.Fatalf("service info %+v: %v", info, err)
	}

	// Without TLS keys: no TLS, nothing to build; Pulsar's default
	// tlsCertFilesRefreshDurationSeconds=300 alone is fine.
	cfg, err = secConf(t, "tlsCertFilesRefreshDurationSeconds=300", "tlsProvider=OpenSSL", "tlsKeyStoreType=JKS")
	if err != nil {
		t.Fatal(err)
	}
	if srv, auth, err := cfg.Security.ServerTLS(nil, nil); srv != nil || auth != nil || err != nil {
		t.Fatalf("no TLS: %v %v %v", srv, auth, err)
	}

	// The FOLIO_<KEY> variables set the security keys too.
	env := map[string]string{}
	for _, kv := range pemKeys(f) {
		k, v, _ := strings.Cut(kv, "=")
		env[EnvName(k)] = v
	}
	if env["FOLIO_TLS_KEY_STORE"] != f.Key || env["FOLIO_TLS_PROVIDER_FACTORY_CLASS"] != TLSContextFactory {
		t.Fatalf("env names: %v", env)
	}
	dir := t.TempDir()
	cfg, err = LoadConfig("", Overrides{Getenv: func(k string) string { return env[k] }, Set: []string{
		"journalDirectories=" + filepath.Join(dir, "j"), "ledgerDirectories=" + filepath.Join(dir, "l")}}, srvQuietLogger())
	if err != nil || cfg.Security.TLSKeyStore != f.Key || !cfg.Security.TLSClientAuthentication {
		t.Fatalf("from the environment: %v %+v", err, cfg.Security)
	}
}

// Every security setting Folio cannot honour stops the bookie with an
// error naming the key (these are the messages an operator sees).
func TestSecurityConfigFailsClosed(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	f := ca.Write(t, t.TempDir(), "bookie", ca.Issue(t, tlstest.Leaf{}))
	pem := pemKeys(f)
	with := func(kv ...string) []string { return append(append([]string(nil), pem...), kv...) }
	missing := filepath.Join(t.TempDir(), "missing.pem")
	cases := []struct {
		name string
		kv   []string
		want []string
	}{
		{"JKS by default", []string{"tlsProviderFactoryClass=" + TLSContextFactory, "tlsKeyStore=/k.jks"},
			[]string{"tlsKeyStoreType=JKS (Java's default when unset)", "PEM files only"}},
		{"JKS", with("tlsKeyStoreType=JKS"), []string{"tlsKeyStoreType=JKS", "set tlsKeyStoreType=PEM"}},
		{"PKCS12", with("tlsKeyStoreType=PKCS12"), []string{"tlsKeyStoreType=PKCS12"}},
		{"trust JKS", with("tlsTrustStoreType=JKS"), []string{"tlsTrustStoreType=JKS"}},
		{"unknown store type", with("tlsKeyStoreType=BCFKS"), []string{"tlsKeyStoreType=BCFKS: unknown store type"}},
		{"other provider class", with("tlsProviderFactoryClass=com.example.MyTLS"), []string{"tlsProviderFactoryClass=com.example.MyTLS"}},
		{"key password", with("tlsKeyStorePasswordPath=/etc/pw"), []string{"tlsKeyStorePasswordPath=/etc/pw", "encrypted private keys are not supported"}},
		{"no key", []string{"tlsProviderFactoryClass=" + TLSContextFactory, "tlsKeyStoreType=PEM", "tlsCertificatePath=" + f.Cert},
			[]string{"tlsKeyStore is required"}},
		{"no cert", []string{"tlsProviderFactoryClass=" + TLSContextFactory, "tlsKeyStoreType=PEM", "tlsKeyStore=" + f.Key},
			[]string{"tlsCertificatePath is required"}},
		{"no trust store with client auth", []string{"tlsProviderFactoryClass=" + TLSContextFactory, "tlsKeyStoreType=PEM",
			"tlsKeyStore=" + f.Key, "tlsCertificatePath=" + f.Cert, "tlsClientAuthentication=true", "tlsTrustStoreType=PEM"},
			[]string{"tlsTrustStore is required with tlsClientAuthentication=true"}},
		{"missing key file", with("tlsKeyStore=" + missing), []string{"tlsKeyStore", missing, "no such file"}},
		{"missing trust file", with("tlsTrustStore=" + missing), []string{"tlsTrustStore", missing}},
		{"protocol", with("tlsEnabledProtocols=SSLv3"), []string{"tlsEnabledProtocols: SSLv3 is not supported"}},
		{"cipher", with("tlsEnabledCipherSuites=TLS_RSA_WITH_NULL_SHA"), []string{"tlsEnabledCipherSuites", "TLS_RSA_WITH_NULL_SHA"}},
		{"TLS keys without TLS", []string{"tlsKeyStore=" + f.Key}, []string{"tlsKeyStore is set but tlsProviderFactoryClass is not"}},
		{"client auth without TLS", []string{"tlsClientAuthentication=true"}, []string{"tlsClientAuthentication=true but tlsProviderFactoryClass is not set"}},
		{"AuthZ without roles", with("bookieAuthProviderFactoryClass=" + BookieAuthZFactory),
			[]string{"no roles set for configuration field 'authorizedRoles'"}},
		{"AuthZ empty role", with("bookieAuthProviderFactoryClass="+BookieAuthZFactory, "authorizedRoles=a,,b"), []string{"authorizedRoles=a,,b: an empty role"}},
		{"AuthZ without TLS", []string{"bookieAuthProviderFactoryClass=" + BookieAuthZFactory, "authorizedRoles=a"},
			[]string{"but TLS is off", "tlsProviderFactoryClass="}},
		{"AuthZ without client auth", with("bookieAuthProviderFactoryClass="+BookieAuthZFactory, "authorizedRoles=a", "tlsClientAuthentication=false"),
			[]string{"set tlsClientAuthentication=true"}},
		{"SASL provider", []string{"bookieAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory"},
			[]string{"bookieAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory", "not supported"}},
		{"null provider", []string{"bookieAuthProviderFactoryClass=null"}, []string{"bookieAuthProviderFactoryClass=null"}},
		{"client auth provider", []string{"clientAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLClientProviderFactory"},
			[]string{"clientAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLClientProviderFactory"}},
		{"SASL key", []string{"saslJaasClientAllowedIds=.*bookkeeper.*"}, []string{"saslJaasClientAllowedIds", "SASL and Kerberos"}},
		{"kerberos key", []string{"kerberos.kinit=/usr/bin/kinit"}, []string{"kerberos.kinit"}},
		{"AutoRecovery client without trust store", []string{"tlsProviderFactoryClass=" + TLSContextFactory, "tlsKeyStoreType=PEM",
			"tlsKeyStore=" + f.Key, "tlsCertificatePath=" + f.Cert, "autoRecoveryDaemonEnabled=true"},
			[]string{"AutoRecovery's client verifies bookies", "tlsTrustStoreType=JKS"}},
		{"AutoRecovery client alias", with("autoRecoveryDaemonEnabled=true", "clientTrustStoreType=JKS"), []string{"clientTrustStoreType=JKS"}},
		{"AutoRecovery client missing file", with("autoRecoveryDaemonEnabled=true", "clientTrustStore="+missing), []string{"clientTrustStore", missing}},
		{"not a permitted user", []string{"permittedStartupUsers=somebody-else"},
			[]string{"System cannot start because current user isn't in permittedStartupUsers", "somebody-else"}},
		{"empty permitted users", []string{"permittedStartupUsers="}, []string{"isn't in permittedStartupUsers"}},
	}
	for _, c := range cases {
		_, err := secConf(t, c.kv...)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
}

// A bookie whose security configuration is wrong exits before it touches
// the metadata store (here an address where nothing listens: trying it
// would fail differently, after a dial timeout).
func TestStartProcessChecksSecurityFirst(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	f := ca.Write(t, t.TempDir(), "bookie", ca.Issue(t, tlstest.Leaf{}))
	cfg := procConfig(t, "etcd://127.0.0.1:1/ledgers")
	cfg.Security = SecurityConfig{TLSProviderFactoryClass: TLSContextFactory, TLSKeyStoreType: "PEM", TLSKeyStore: f.Key,
		TLSCertificatePath: filepath.Join(t.TempDir(), "gone.pem")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := StartProcess(ctx, cfg, ProcessOptions{Logger: srvQuietLogger()})
	if err == nil || !strings.Contains(err.Error(), "tlsCertificatePath") || strings.Contains(err.Error(), "metadata") {
		t.Fatalf("StartProcess: %v", err)
	}
}
