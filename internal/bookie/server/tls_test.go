package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/tlsconf"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
	v3 "github.com/foliodb/folio/internal/wire/v3"
)

// testPKI is a test CA with the bookie's files and a factory of client
// configurations.
type testPKI struct {
	t      *testing.T
	ca     *tlstest.CA
	bookie tlstest.Files
}

func newPKI(t *testing.T) *testPKI {
	ca := tlstest.NewCA(t, "folio-test-ca")
	return &testPKI{t: t, ca: ca, bookie: ca.Write(t, t.TempDir(), "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "bookie", OU: "0:bookie"}))}
}

// server returns the bookie's TLS configuration.
func (p *testPKI) server(clientAuth bool, refresh time.Duration, clk clock.Clock) *tls.Config {
	p.t.Helper()
	cfg, err := tlsconf.NewServer(tlsconf.Options{Files: tlsconf.Files{Cert: p.bookie.Cert, Key: p.bookie.Key, CA: p.bookie.CA},
		ClientAuth: clientAuth, RefreshPeriod: refresh, Clock: clk})
	if err != nil {
		p.t.Fatal(err)
	}
	return cfg
}

// client returns a client configuration trusting the CA, presenting a
// certificate issued with leaf unless noCert.
func (p *testPKI) client(leaf tlstest.Leaf, noCert bool) *tls.Config {
	p.t.Helper()
	o := tlsconf.Options{Files: tlsconf.Files{CA: p.bookie.CA}}
	if !noCert {
		f := p.ca.Write(p.t, p.t.TempDir(), "client", p.ca.Issue(p.t, leaf))
		o.Cert, o.Key = f.Cert, f.Key
	}
	cfg, err := tlsconf.NewClient(o)
	if err != nil {
		p.t.Fatal(err)
	}
	return cfg
}

// sendStartTLS sends a v3 START_TLS (whatever the client's protocol) and
// returns its txnId.
func (c *rawClient) sendStartTLS() uint64 {
	c.t.Helper()
	c.txn++
	req := wire.Request{Header: wire.Header{Version: wire.VersionThree, Op: wire.OpStartTLS, TxnID: c.txn}, Has: wire.BodyStartTLS}
	enc, _ := codec.NewClientCodec(wire.ProtocolV3, false)
	out, err := enc.EncodeRequest(nil, &req)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(out); err != nil {
		c.t.Fatal(err)
	}
	return c.txn
}

// recvV3 reads one v3 response.
func (c *rawClient) recvV3() wire.Response {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	payload, err := c.fr.Next()
	if err != nil {
		c.t.Fatalf("receive: %v", err)
	}
	var resp wire.Response
	if err := v3.DecodeResponse(append([]byte(nil), payload...), &resp); err != nil {
		c.t.Fatalf("decode v3: %v", err)
	}
	return resp
}

// upgrade runs the TLS client handshake on the connection (after the
// START_TLS answer) and returns its error; on success the client speaks
// inside TLS.
func (c *rawClient) upgrade(cfg *tls.Config) error {
	c.t.Helper()
	tc := tls.Client(c.nc, tlsconf.ForHost(cfg, "127.0.0.1"))
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		return err
	}
	tc.SetDeadline(time.Time{})
	c.nc, c.fr = tc, wire.NewFrameReader(bufio.NewReader(tc))
	return nil
}

// startTLS does the whole upgrade and fails the test unless it works.
func (c *rawClient) startTLS(cfg *tls.Config) {
	c.t.Helper()
	txn := c.sendStartTLS()
	resp := c.recvV3()
	if resp.Header.Op != wire.OpStartTLS || resp.Header.TxnID != txn || resp.Status != wire.StatusOK || resp.Has&wire.BodyStartTLS == 0 {
		c.t.Fatalf("START_TLS answer: %+v", resp)
	}
	if err := c.upgrade(cfg); err != nil {
		c.t.Fatalf("TLS handshake: %v", err)
	}
}

// addAndRead writes entry e of ledger l and reads it back over c.
func addAndRead(t *testing.T, c *rawClient, l, e int64) {
	t.Helper()
	c.send(rawAdd(l, e, []byte("payload"), false))
	if st := rawStatus(c.recv()); st != wire.StatusOK {
		t.Fatalf("add %d/%d: %v", l, e, st)
	}
	c.send(rawRead(l, e))
	resp := c.recv()
	if st := rawStatus(resp); st != wire.StatusOK || !strings.Contains(string(resp.Read.Body), "payload") {
		t.Fatalf("read %d/%d: %v %q", l, e, st, resp.Read.Body)
	}
}

// START_TLS opens the connection as a v3 frame for both protocols; the
// protocol detection goes on inside TLS, and the session carries requests.
func TestTLSUpgradeV3AndV2(t *testing.T) {
	p := newPKI(t)
	h := newSrvHarness(t, Options{TLS: p.server(true, 0, nil)})
	cli := p.client(tlstest.Leaf{OU: "0:writer"}, false)
	for i, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
		c := h.dial(proto)
		c.startTLS(cli)
		if _, ok := c.nc.(*tls.Conn); !ok {
			t.Fatal("not upgraded")
		}
		addAndRead(t, c, int64(100+i), 0)
		addAndRead(t, c, int64(100+i), 1)
	}
	// A plaintext client of the same bookie: TLS is opt-in per connection
	// without an Authorizer (spec §1.4).
	addAndRead(t, h.dial(wire.ProtocolV3), 102, 0)
	// START_TLS later in a connection: EBADREQ, the connection goes on.
	c := h.dial(wire.ProtocolV3)
	addAndRead(t, c, 103, 0)
	txn := c.sendStartTLS()
	if resp := c.recvV3(); resp.Status != wire.StatusBadRequest || resp.Header.TxnID != txn {
		t.Fatalf("late START_TLS: %+v", resp)
	}
	addAndRead(t, c, 103, 1)
}

// A client that sends its ClientHello right behind START_TLS, without
// waiting for the answer, is served: the bookie's TLS server reads the
// bytes already buffered.
func TestTLSClientHelloPipelined(t *testing.T) {
	p := newPKI(t)
	h := newSrvHarness(t, Options{TLS: p.server(false, 0, nil)})
	c := h.dial(wire.ProtocolV3)
	txn := c.sendStartTLS()
	// The handshake's first flight goes out now; the START_TLS answer is
	// read from the plaintext stream before the TLS records.
	answered := make(chan wire.Response, 1)
	br := bufio.NewReader(c.nc)
	pr := &prefixReader{Conn: c.nc, br: br, frames: wire.NewFrameReader(br), answered: answered}
	tc := tls.Client(pr, tlsconf.ForHost(p.client(tlstest.Leaf{}, true), "127.0.0.1"))
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("pipelined handshake: %v", err)
	}
	if resp := <-answered; resp.Status != wire.StatusOK || resp.Header.TxnID != txn {
		t.Fatalf("START_TLS answer: %+v", resp)
	}
	tc.SetDeadline(time.Time{})
	c.nc, c.fr = tc, wire.NewFrameReader(bufio.NewReader(tc))
	addAndRead(t, c, 110, 0)
}

// prefixReader passes writes through at once (the ClientHello follows
// START_TLS unasked) and, on the first read, takes the START_TLS answer
// frame off the stream before handing the rest to TLS.
type prefixReader struct {
	net.Conn
	br       *bufio.Reader
	frames   *wire.FrameReader
	answered chan wire.Response
	once     sync.Once
}

func (r *prefixReader) Read(b []byte) (int, error) {
	var err error
	r.once.Do(func() {
		var payload []byte
		if payload, err = r.frames.Next(); err != nil {
			return
		}
		var resp wire.Response
		err = v3.DecodeResponse(payload, &resp)
		r.answered <- resp
	})
	if err != nil {
		return 0, err
	}
	return r.br.Read(b)
}

// Mutual TLS: a client without a certificate, with an expired one, or with
// one of another CA fails the handshake and is disconnected; the bookie
// keeps serving the others and loses nothing.
func TestTLSClientCertificateRequired(t *testing.T) {
	p := newPKI(t)
	h := newSrvHarness(t, Options{TLS: p.server(true, 0, nil)})
	good := h.dial(wire.ProtocolV3)
	good.startTLS(p.client(tlstest.Leaf{}, false))
	addAndRead(t, good, 120, 0)

	other := tlstest.NewCA(t, "other-ca")
	strangerFiles := other.Write(t, t.TempDir(), "stranger", other.Issue(t, tlstest.Leaf{}))
	stranger, err := tlsconf.NewClient(tlsconf.Options{Files: tlsconf.Files{CA: p.bookie.CA, Cert: strangerFiles.Cert, Key: strangerFiles.Key}})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]*tls.Config{
		"no certificate": p.client(tlstest.Leaf{}, true),
		"expired":        p.client(tlstest.Leaf{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Minute)}, false),
		"not yet valid":  p.client(tlstest.Leaf{NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(2 * time.Hour)}, false),
		"other CA":       stranger,
	}
	for name, cfg := range bad {
		c := h.dial(wire.ProtocolV3)
		c.sendStartTLS()
		if resp := c.recvV3(); resp.Status != wire.StatusOK {
			t.Fatalf("%s: START_TLS answer %+v", name, resp)
		}
		if err := c.upgrade(cfg); err == nil {
			// TLS 1.3: the client finishes first; the refusal arrives
			// as an alert on its first read.
			c.send(rawAdd(121, 0, []byte("x"), false))
			if _, err := c.tryRecv(10 * time.Second); err == nil {
				t.Fatalf("%s: a request was answered", name)
			}
		}
		c.expectClosed()
	}
	addAndRead(t, good, 120, 1)
	addAndRead(t, h.dial(wire.ProtocolV3), 120, 2) // a new plaintext connection too
	c := h.dial(wire.ProtocolV3)
	for e := int64(0); e < 3; e++ {
		c.send(rawRead(120, e))
		if st := rawStatus(c.recv()); st != wire.StatusOK {
			t.Fatalf("entry %d after the refusals: %v", e, st)
		}
	}
}

// Bad input on the TLS path: a TLS ClientHello sent without START_TLS (to a
// plaintext bookie and to a TLS bookie), and garbage where the handshake
// should be, close that connection only.
func TestTLSBadInputClosesOnlyThatConnection(t *testing.T) {
	p := newPKI(t)
	for _, withTLS := range []bool{false, true} {
		opts := Options{}
		if withTLS {
			opts.TLS = p.server(false, 0, nil)
		}
		h := newSrvHarness(t, opts)
		good := h.dial(wire.ProtocolV3)
		addAndRead(t, good, 130, 0)

		// A TLS client that skips START_TLS: its ClientHello is a bad frame.
		nc, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(nc, tlsconf.ForHost(p.client(tlstest.Leaf{}, true), "127.0.0.1"))
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err == nil {
			t.Fatalf("tls=%v: a TLS handshake without START_TLS succeeded", withTLS)
		}
		nc.Close()

		if withTLS {
			// Garbage after a granted START_TLS.
			c := h.dial(wire.ProtocolV3)
			c.sendStartTLS()
			if resp := c.recvV3(); resp.Status != wire.StatusOK {
				t.Fatalf("START_TLS answer %+v", resp)
			}
			if _, err := c.nc.Write([]byte("this is not a TLS record, just bytes\x00\x00\x00\x00")); err != nil {
				t.Fatal(err)
			}
			c.expectClosed()
			// A client that says START_TLS and goes silent is cut off at
			// the handshake timeout (checked in TestTLSHandshakeTimeout).
		}
		addAndRead(t, good, 130, 1)
		c := h.dial(wire.ProtocolV3)
		c.send(rawRead(130, 0))
		if st := rawStatus(c.recv()); st != wire.StatusOK {
			t.Fatalf("tls=%v: entry 0 after bad input: %v", withTLS, st)
		}
	}
}

func TestTLSHandshakeTimeout(t *testing.T) {
	p := newPKI(t)
	h := newSrvHarness(t, Options{TLS: p.server(false, 0, nil), TLSHandshakeTimeout: 50 * time.Millisecond})
	c := h.dial(wire.ProtocolV3)
	c.sendStartTLS()
	if resp := c.recvV3(); resp.Status != wire.StatusOK {
		t.Fatalf("START_TLS answer %+v", resp)
	}
	c.expectClosed() // no ClientHello: closed by the handshake deadline
}

// BookieAuthZFactory: only a TLS connection whose certificate's first role
// is authorised is served. A certificate without a role, or with another
// role, gets EIO on its START_TLS after the handshake and EUA on every
// request; a plaintext client gets EUA (v3, v2 ADD and READ) or is
// disconnected (other v2 requests, v2 AUTH); nothing is stored for them.
func TestBookieAuthZRoles(t *testing.T) {
	p := newPKI(t)
	h := newSrvHarness(t, Options{TLS: p.server(true, 0, nil), Authorizer: RoleAuthorizer{Roles: []string{"writer", "admin"}}})

	for i, ou := range []string{"0:writer", "0:admin;1:cluster-a", "0:writer,reader"} {
		for j, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
			c := h.dial(proto)
			c.startTLS(p.client(tlstest.Leaf{OU: ou}, false))
			addAndRead(t, c, int64(200+2*i+j), 0)
		}
	}

	refusedRole := func(ou string, proto wire.Protocol, ledger int64) {
		t.Helper()
		c := h.dial(proto)
		txn := c.sendStartTLS()
		if resp := c.recvV3(); resp.Status != wire.StatusOK {
			t.Fatalf("OU %q: START_TLS answer %+v", ou, resp)
		}
		if err := c.upgrade(p.client(tlstest.Leaf{OU: ou}, false)); err != nil {
			t.Fatalf("OU %q: handshake: %v", ou, err)
		}
		resp := c.recvV3()
		if resp.Header.Op != wire.OpStartTLS || resp.Header.TxnID != txn || resp.Status != wire.StatusIOError {
			t.Fatalf("OU %q: want START_TLS EIO after the handshake, got %+v", ou, resp)
		}
		c.send(rawAdd(ledger, 0, []byte("x"), false))
		if st := rawStatus(c.recv()); st != wire.StatusUnauthorized {
			t.Fatalf("OU %q %v: add answered %v, want EUA", ou, proto, st)
		}
		c.send(rawRead(ledger, 0))
		if st := rawStatus(c.recv()); st != wire.StatusUnauthorized {
			t.Fatalf("OU %q %v: read answered %v, want EUA", ou, proto, st)
		}
	}
	refusedRole("0:reader", wire.ProtocolV3, 300)
	refusedRole("0:reader,writer", wire.ProtocolV3, 301) // only the first role counts
	refusedRole("1:cluster-a", wire.ProtocolV3, 302)     // no role
	refusedRole("", wire.ProtocolV3, 303)                // no OU
	refusedRole("0:reader", wire.ProtocolV2, 304)

	// Plaintext, v3: every request EUA, header echoed; the connection stays.
	c := h.dial(wire.ProtocolV3)
	for _, req := range []wire.Request{
		rawAdd(310, 0, []byte("x"), false), rawRead(310, 0),
		{Header: wire.Header{Op: wire.OpGetBookieInfo}, Has: wire.BodyGetBookieInfo},
		{Header: wire.Header{Op: wire.OpAuth}, Has: wire.BodyAuth, Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}},
		{Header: wire.Header{Op: wire.OpAuth}, Has: wire.BodyAuth, Auth: wire.AuthMessage{PluginName: "BookieAuthZFactory", Payload: []byte{}}},
	} {
		txn := c.send(req)
		resp := c.recv()
		if resp.Status != wire.StatusUnauthorized || resp.Header.TxnID != txn || resp.Header.Op != req.Header.Op {
			t.Fatalf("plaintext v3 %v: %+v", req.Header.Op, resp)
		}
	}
	// A START_TLS that is not the first frame: EBADREQ.
	txn := c.sendStartTLS()
	if resp := c.recvV3(); resp.Status != wire.StatusBadRequest || resp.Header.TxnID != txn {
		t.Fatalf("late START_TLS: %+v", resp)
	}

	// Plaintext, v2: ADD and READ get EUA in their own shape.
	c2 := h.dial(wire.ProtocolV2)
	c2.send(rawAdd(311, 0, []byte("x"), false))
	if resp := c2.recv(); resp.Header.Op != wire.OpAddEntry || rawStatus(resp) != wire.StatusUnauthorized || resp.Add.LedgerID != 311 {
		t.Fatalf("plaintext v2 add: %+v", resp)
	}
	c2.send(rawRead(311, 0))
	if resp := c2.recv(); resp.Header.Op != wire.OpReadEntry || rawStatus(resp) != wire.StatusUnauthorized {
		t.Fatalf("plaintext v2 read: %+v", resp)
	}
	// ... a v2 BATCH_READ or AUTH closes the connection.
	c2.send(wire.Request{Header: wire.Header{Op: wire.OpBatchReadEntry, TxnID: 1}, Has: wire.BodyBatchRead,
		BatchRead: wire.BatchReadRequest{LedgerID: 311, StartEntryID: 0, MaxCount: 1, MaxSize: 1024}})
	c2.expectClosed()
	c3 := h.dial(wire.ProtocolV2)
	c3.send(wire.Request{Header: wire.Header{Op: wire.OpAuth}, Has: wire.BodyAuth, Auth: wire.AuthMessage{PluginName: "AuthDisabledPlugin", Payload: []byte{}}})
	c3.expectClosed()

	// Nothing of the refused clients was stored; the authorised data is
	// intact.
	ok := h.dial(wire.ProtocolV3)
	ok.startTLS(p.client(tlstest.Leaf{OU: "0:writer"}, false))
	for l := int64(300); l <= 311; l++ {
		ok.send(rawRead(l, 0))
		if st := rawStatus(ok.recv()); st != wire.StatusNoLedger && st != wire.StatusNoEntry {
			t.Fatalf("ledger %d of a refused client: %v", l, st)
		}
	}
	for l := int64(200); l < 206; l++ {
		ok.send(rawRead(l, 0))
		if st := rawStatus(ok.recv()); st != wire.StatusOK {
			t.Fatalf("authorised ledger %d: %v", l, st)
		}
	}
	if n := h.store.adds.Load(); n != 6 {
		t.Fatalf("the store saw %d adds, want the 6 authorised ones", n)
	}
}

func TestRoleAuthorizerMessages(t *testing.T) {
	a := RoleAuthorizer{Roles: []string{"writer"}}
	ca := tlstest.NewCA(t, "ca")
	cases := []struct {
		state *tls.ConnectionState
		want  string
	}{
		{nil, "AuthZ failed: Bookie side channel is not secured"},
		{&tls.ConnectionState{}, "AuthZ failed: Certificate missing"},
		{&tls.ConnectionState{PeerCertificates: []*x509.Certificate{ca.Issue(t, tlstest.Leaf{OU: "1:c"}).Cert}}, "AuthZ failed: No cert role in OU field"},
		{&tls.ConnectionState{PeerCertificates: []*x509.Certificate{ca.Issue(t, tlstest.Leaf{OU: "0:reader"}).Cert}}, "AuthZ failed: Cert role [reader]"},
		{&tls.ConnectionState{PeerCertificates: []*x509.Certificate{ca.Issue(t, tlstest.Leaf{OU: "0:writer"}).Cert}}, ""},
	}
	for _, c := range cases {
		err := a.Authorize(c.state)
		if c.want == "" {
			if err != nil {
				t.Errorf("authorised certificate refused: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// Rotation: with a refresh period, a replaced certificate is served to
// connections made after the period; connections already up keep working.
func TestTLSCertificateRotation(t *testing.T) {
	p := newPKI(t)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	h := newSrvHarness(t, Options{TLS: p.server(true, time.Minute, clk)})
	cli := p.client(tlstest.Leaf{}, false)
	served := func(c *rawClient) string {
		return c.nc.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	before := h.dial(wire.ProtocolV3)
	before.startTLS(cli)
	addAndRead(t, before, 400, 0)
	if got := served(before); got != "bookie" {
		t.Fatalf("served %q", got)
	}

	p.ca.Write(t, filepath.Dir(p.bookie.Cert), "bookie", p.ca.Issue(t, tlstest.Leaf{CommonName: "bookie-rotated"}))
	early := h.dial(wire.ProtocolV3)
	early.startTLS(cli)
	if got := served(early); got != "bookie" {
		t.Fatalf("before the refresh period: served %q", got)
	}
	clk.Advance(time.Minute)
	after := h.dial(wire.ProtocolV3)
	after.startTLS(cli)
	if got := served(after); got != "bookie-rotated" {
		t.Fatalf("after the refresh period: served %q", got)
	}
	addAndRead(t, after, 400, 1)
	addAndRead(t, before, 400, 2) // the old session works on
	addAndRead(t, early, 400, 3)
}
