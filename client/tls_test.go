package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// tlsCluster is three `folio bookie` processes serving TLS with mutual
// authentication and BookieAuthZFactory (roles writer and bookie), their
// files re-read every second; every bookie uses the same files in dir.
type tlsCluster struct {
	cl  *testcluster.Cluster
	ca  *tlstest.CA
	dir string // ca.pem, bookie.pem, bookie-key.pem
}

func startTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	ca := tlstest.NewCA(t, "folio-test-ca")
	dir := t.TempDir()
	f := ca.Write(t, dir, "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "bookie", OU: "0:bookie"}))
	cl := testcluster.Start(t, 3, testcluster.WithSettings(
		"tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory", "tlsProvider=JDK",
		"tlsKeyStoreType=PEM", "tlsKeyStore="+f.Key, "tlsCertificatePath="+f.Cert,
		"tlsTrustStoreType=PEM", "tlsTrustStore="+f.CA, "tlsClientAuthentication=true",
		"tlsCertFilesRefreshDurationSeconds=1",
		"bookieAuthProviderFactoryClass=org.apache.bookkeeper.tls.BookieAuthZFactory", "authorizedRoles=writer,bookie",
	))
	return &tlsCluster{cl: cl, ca: ca, dir: dir}
}

// clientTLS returns a client TLS configuration trusting ca, with a
// certificate issued by ca for leaf (nil: none).
func clientTLS(t *testing.T, ca *tlstest.CA, leaf *tlstest.Leaf) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	var cert, key string
	if leaf != nil {
		f := ca.Write(t, dir, "client", ca.Issue(t, *leaf))
		cert, key = f.Cert, f.Key
	}
	cfg, err := client.TLSConfigFromPEM(caFile, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// writeAndRead writes n entries on every bookie (E=Qw=Qa=3), closes the
// ledger and reads them back.
func writeAndRead(t *testing.T, ctx context.Context, c *client.Client, n int64) int64 {
	t.Helper()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	appendAll(t, ctx, w, 0, n)
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	checkLedger(t, ctx, c, w.ID(), n)
	return w.ID()
}

func checkLedger(t *testing.T, ctx context.Context, c *client.Client, id, n int64) {
	t.Helper()
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatalf("open %d: %v", id, err)
	}
	got, err := r.Read(ctx, 0, n-1)
	if err != nil {
		t.Fatalf("read %d: %v", id, err)
	}
	for i, e := range got {
		if e.ID != int64(i) || !bytes.Equal(e.Payload, payloadOf(id, int64(i))) {
			t.Fatalf("ledger %d entry %d: wrong entry %d", id, i, e.ID)
		}
	}
	if int64(len(got)) != n {
		t.Fatalf("ledger %d: read %d entries, want %d", id, len(got), n)
	}
}

// The Folio client and Folio bookie processes over TLS, with both
// protocols; the clients the bookies must refuse are refused and write
// nothing; the bookies' certificate is rotated under connected clients.
func TestTLSWithBookieProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	tc := startTLSCluster(t)
	ctx := testCtx(t)
	writer := &tlstest.Leaf{CommonName: "app", OU: "0:writer;1:cluster-a"}

	var written []int64
	for _, v2 := range []bool{false, true} {
		c := newClient(t, tc.cl, func(cfg *client.Config) { cfg.TLS, cfg.UseV2WireProtocol = clientTLS(t, tc.ca, writer), v2 })
		written = append(written, writeAndRead(t, ctx, c, 20))
	}

	// Refused: no client certificate, an expired one, one of another CA
	// (the handshake fails: as in Java, a bookie failure, and with every
	// bookie refusing, no bookie is left to replace it), a role not listed
	// and no TLS at all (the bookies answer EUA: unrecoverable, as Java's
	// UnauthorizedAccessException). Each fails its first append.
	// A client that trusts the bookies but presents a certificate another
	// CA signed.
	other := tlstest.NewCA(t, "other-ca")
	of := other.Write(t, t.TempDir(), "stranger", other.Issue(t, *writer))
	otherCfg, err := client.TLSConfigFromPEM(filepath.Join(tc.dir, "ca.pem"), of.Cert, of.Key)
	if err != nil {
		t.Fatal(err)
	}
	const security = "bookie connection security failed"
	refused := []struct {
		name string
		tls  *tls.Config
		want error
		says string
	}{
		{"no certificate", clientTLS(t, tc.ca, nil), client.ErrNotEnoughBookies, "certificate required"},
		{"expired certificate", clientTLS(t, tc.ca, &tlstest.Leaf{OU: "0:writer", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}),
			client.ErrNotEnoughBookies, "expired certificate"},
		{"certificate of another CA", otherCfg, client.ErrNotEnoughBookies, "unknown certificate authority"},
		{"role not listed", clientTLS(t, tc.ca, &tlstest.Leaf{OU: "0:reader"}), client.ErrUnauthorized, "its certificate is not authorized there"},
		{"plaintext", nil, client.ErrUnauthorized, "unauthorized"},
	}
	for _, r := range refused {
		c := newClient(t, tc.cl, func(cfg *client.Config) { cfg.TLS = r.tls })
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
		if err != nil {
			t.Fatalf("%s: create: %v", r.name, err)
		}
		_, err = w.Append(ctx, []byte("must not be stored"))
		if err == nil || !errors.Is(err, r.want) || !strings.Contains(err.Error(), r.says) || (r.tls != nil && !strings.Contains(err.Error(), security)) {
			t.Fatalf("%s: append: %v, want %v saying %q", r.name, err, r.want, r.says)
		}
		t.Logf("%s: %v (code %d)", r.name, err, client.Code(err))
	}

	// Bad input at a bookie process: a TLS ClientHello without START_TLS,
	// and garbage where the handshake should be, each on its own
	// connection, which the bookie closes; it serves everyone else on.
	badInput(t, tc.cl.Bookies[0].Addr())

	// Rotation: the bookies' certificate is replaced by one of a new CA
	// (their trust store now holds both CAs). A client that trusts only
	// the new CA gets through once the bookies re-read their files;
	// connections made before keep working.
	old := newClient(t, tc.cl, func(cfg *client.Config) { cfg.TLS = clientTLS(t, tc.ca, writer) })
	w, err := old.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, w, 0, 10) // connected to all three bookies

	next := tlstest.NewCA(t, "folio-test-ca-2")
	tlstest.WriteFile(t, filepath.Join(tc.dir, "ca.pem"), append(append([]byte(nil), tc.ca.PEM...), next.PEM...))
	rotated := next.Issue(t, tlstest.Leaf{CommonName: "bookie-2", OU: "0:bookie"})
	tlstest.WriteFile(t, filepath.Join(tc.dir, "bookie-key.pem"), rotated.KeyPEM)
	tlstest.WriteFile(t, filepath.Join(tc.dir, "bookie.pem"), rotated.CertPEM)

	fresh := newClient(t, tc.cl, func(cfg *client.Config) { cfg.TLS = clientTLS(t, next, writer) })
	deadline := time.Now().Add(60 * time.Second)
	var freshID int64
	for {
		fw, err := fresh.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 3, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = fw.Append(ctx, payloadOf(fw.ID(), 0))
		if err == nil {
			appendAll(t, ctx, fw, 1, 9)
			if err := fw.Close(ctx); err != nil {
				t.Fatal(err)
			}
			freshID = fw.ID()
			break
		}
		if !errors.Is(err, client.ErrNotEnoughBookies) {
			// Refused by the bookies, or their connections in backoff.
			t.Fatalf("client of the new CA: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bookies still serve the old certificate after 60 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // polling a condition: the bookies re-read every second
	}
	appendAll(t, ctx, w, 10, 10) // the old client's connections work on
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkLedger(t, ctx, fresh, freshID, 10)
	checkLedger(t, ctx, old, w.ID(), 20)
	for _, id := range written {
		checkLedger(t, ctx, old, id, 20)
	}
}

// badInput sends a bookie a TLS ClientHello without START_TLS, then, on
// another connection, a START_TLS followed by bytes that are no TLS
// record, and checks that the bookie closes both connections.
func badInput(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatal("a TLS handshake without START_TLS succeeded")
	}
	nc.Close()

	nc, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	enc, _ := codec.NewClientCodec(wire.ProtocolV3, false)
	out, err := enc.EncodeRequest(nil, &wire.Request{Header: wire.Header{Version: wire.VersionThree, Op: wire.OpStartTLS, TxnID: 7}, Has: wire.BodyStartTLS})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	payload, err := wire.NewFrameReader(nc).Next()
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.Response
	if err := enc.DecodeResponse(payload, &resp); err != nil || resp.Status != wire.StatusOK {
		t.Fatalf("START_TLS answer: %v %+v", err, resp)
	}
	if _, err := nc.Write([]byte("GET / HTTP/1.1\r\nHost: bookie\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(nc); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the bookie did not close a connection with garbage for a handshake")
		}
	}
}
