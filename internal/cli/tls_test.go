package cli_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
)

// shellEnv runs `folio shell <args>` with extra environment variables.
func shellEnv(t *testing.T, uri string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), append([]string{"shell", "--metadata-service-uri", uri}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("folio shell %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// Bookies with TLS, client certificates and BookieAuthZFactory: the shell
// reaches them with --tls-ca/--tls-cert/--tls-key or $FOLIO_TLS_*, and is
// refused without; AutoRecovery re-replicates over TLS, first as a
// `folio autorecovery` daemon with the TLS flags, then inside bookies from
// their own tls* keys (their certificate's role is authorised on the
// others, as Java's AutoRecovery needs).
func TestTLSShellAndAutoRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	ca := tlstest.NewCA(t, "folio-test-ca")
	dir := t.TempDir()
	bf := ca.Write(t, dir, "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "bookie", OU: "0:bookie"}))
	admf := ca.Write(t, dir, "admin", ca.Issue(t, tlstest.Leaf{CommonName: "admin", OU: "0:admin"}))
	settings := append([]string{
		"tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory",
		"tlsKeyStoreType=PEM", "tlsKeyStore=" + bf.Key, "tlsCertificatePath=" + bf.Cert,
		"tlsTrustStoreType=PEM", "tlsTrustStore=" + bf.CA, "tlsClientAuthentication=true",
		"bookieAuthProviderFactoryClass=org.apache.bookkeeper.tls.BookieAuthZFactory", "authorizedRoles=admin,bookie",
	}, autoRecoveryBookieSettings...)
	cl := testcluster.Start(t, 4, testcluster.WithSettings(settings...))
	adminTLS, err := client.TLSConfigFromPEM(admf.CA, admf.Cert, admf.Key)
	if err != nil {
		t.Fatal(err)
	}
	tlsFlags := []string{"--tls-ca", admf.CA, "--tls-cert", admf.Cert, "--tls-key", admf.Key}
	tlsEnv := []string{"FOLIO_TLS_CA=" + admf.CA, "FOLIO_TLS_CERT=" + admf.Cert, "FOLIO_TLS_KEY=" + admf.Key}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI, TLS: adminTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeLedgers(ctx, t, c, cl.MD, 6, 10)
	var some int64
	for id := range ends {
		some = id
		break
	}

	// The shell: flags, then the environment; every command that talks to
	// bookies.
	out := mustShell(t, cl.URI, append(tlsFlags, "bookieinfo", "-o", "json")...)
	if strings.Contains(out, `"error"`) {
		t.Fatalf("bookieinfo over TLS: %s", out)
	}
	mustShell(t, cl.URI, append(tlsFlags, "bookiesanity")...)
	for _, args := range [][]string{
		{"readledger", strconv.FormatInt(some, 10), "--password", "pw"}, {"inspectledger", strconv.FormatInt(some, 10)}, {"simpletest", "--entries", "5"},
	} {
		if code, out, errOut := shellEnv(t, cl.URI, tlsEnv, args...); code != 0 {
			t.Fatalf("folio shell %v with $FOLIO_TLS_*: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	// Without TLS the bookies refuse (EUA): the command fails and says so.
	if code, _, errOut := shell(t, cl.URI, "readledger", strconv.FormatInt(some, 10), "--password", "pw"); code == 0 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("readledger without TLS: exit %d: %s", code, errOut)
	}
	if code, out, _ := shell(t, cl.URI, "bookieinfo", "-o", "json"); code == 0 || !strings.Contains(out, "unauthorized") {
		t.Fatalf("bookieinfo without TLS: exit %d: %s", code, out)
	}
	// A certificate without a CA is a usage mistake, named as such.
	if code, _, errOut := shell(t, cl.URI, "--tls-cert", admf.Cert, "--tls-key", admf.Key, "bookieinfo"); code == 0 || !strings.Contains(errOut, "--tls-ca") {
		t.Fatalf("--tls-cert without --tls-ca: exit %d: %s", code, errOut)
	}
	if code, _, errOut := shell(t, cl.URI, "--tls-ca", filepath.Join(dir, "missing.pem"), "bookieinfo"); code == 0 || !strings.Contains(errOut, "missing.pem") {
		t.Fatalf("missing --tls-ca file: exit %d: %s", code, errOut)
	}

	// `folio autorecovery` with the TLS flags re-replicates a killed
	// bookie's ledgers (its auditor's first ledger check finds the
	// entries missing; every read and copy goes over TLS, which these
	// bookies require).
	daemon := cl.StartAutoRecovery("127.0.0.1:1", tlsFlags...)
	rereplicated(ctx, t, cl, c, ends, cl.Bookies[3], adminTLS)
	daemon.Kill()

	// AutoRecovery inside the bookies, from their own tls* keys.
	for _, b := range cl.Bookies[:2] {
		b.Terminate()
		b.Start("--autorecovery")
		b.WaitRegistered(false)
	}
	nb := cl.NewBookie()
	nb.Start()
	nb.WaitRegistered(false)
	rereplicated(ctx, t, cl, c, ends, cl.Bookies[2], adminTLS)
}

// rereplicated kills victim and waits until no ledger references it and
// nothing is under-replicated, then checks every entry on its write set
// over TLS.
func rereplicated(ctx context.Context, t *testing.T, cl *testcluster.Cluster, c *client.Client, ends map[int64]int64, victim *testcluster.Bookie, cfg *tls.Config) {
	t.Helper()
	victim.Kill()
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	start := time.Now()
	waitUntil(ctx, t, "re-replication off "+victim.Addr(), func() bool {
		on, err := admin.LedgersOnBookie(ctx, cl.MD, victim.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(on) == 0 && len(ur) == 0
	})
	t.Logf("re-replicated off %s over TLS in %v", victim.Addr(), time.Since(start))
	for id, last := range ends {
		m, _, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !m.IsClosed() || m.LastEntryID != last {
			t.Fatalf("ledger %d: state %v end %d, want closed at %d", id, m.State, m.LastEntryID, last)
		}
		for _, s := range m.Ensembles {
			if slices.Contains(s.Ensemble, victim.ID) {
				t.Fatalf("ledger %d still names %s", id, victim.ID)
			}
		}
		testcluster.CheckStoredTLS(ctx, t, cl.MD, id, []byte("pw"), func(e int64) []byte { return entryPayload(id, e) }, cfg)
	}
}
