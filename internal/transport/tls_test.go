package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/tlsconf"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
	"github.com/foliodb/folio/internal/wire"
)

// realBookie is a Folio bookie (bookie.Bookie on a ledgerstore over an
// in-memory file system) behind the real listener, on 127.0.0.1.
type realBookie struct {
	addr string
	// tls counts the connections that completed a TLS handshake; requests
	// counts the requests the bookie served (refused ones excluded).
	tls, served atomic.Int64
}

type countingMetrics struct {
	server.NopMetrics
	b *realBookie
}

func (m countingMetrics) ConnectionSecurity(e server.SecurityEvent) {
	if e == server.SecurityTLS {
		m.b.tls.Add(1)
	}
}

type countingBookieMetrics struct {
	bookie.NopMetrics
	b *realBookie
}

func (m countingBookieMetrics) RequestCompleted(bookie.RequestKind, wire.Status, time.Duration) {
	m.b.served.Add(1)
}

func startRealBookie(t *testing.T, opts server.Options) *realBookie {
	t.Helper()
	return startRealBookieWith(t, opts, nil)
}

// startRealBookieWith is startRealBookie with mod applied to the bookie's
// Config.
func startRealBookieWith(t *testing.T, opts server.Options, mod func(*bookie.Config)) *realBookie {
	t.Helper()
	st, err := ledgerstore.Open(vfs.NewMem(), ledgerstore.Config{
		JournalDirs: []string{"/journal"}, LedgerDirs: []string{"/ledgers"}, Clock: clock.Real{},
		WriteCacheBytes: 8 << 20, ReadCacheBytes: 1 << 20, IndexCacheBytes: 1 << 20,
		MaxEntryLogBytes: 4 << 20, JournalPreallocBytes: 64 << 10, JournalMaxFileBytes: 4 << 20, Manual: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	rb := &realBookie{}
	quiet := slog.New(slog.DiscardHandler)
	bcfg := bookie.Config{Clock: clock.Real{}, Metrics: countingBookieMetrics{b: rb}, Logger: quiet}
	if mod != nil {
		mod(&bcfg)
	}
	b, err := bookie.New(st, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics, opts.Logger = countingMetrics{b: rb}, quiet
	srv := server.New(b, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		b.Close()
		st.Close()
	})
	rb.addr = ln.Addr().String()
	return rb
}

var tlsPassword = []byte("pw")

func tlsAdd(ledgerID, entryID int64) *wire.Request {
	d, _ := digest.New(digest.CRC32C, tlsPassword)
	key := digest.MasterKey(tlsPassword)
	return &wire.Request{Header: wire.Header{Op: wire.OpAddEntry}, Has: wire.BodyAdd, Add: wire.AddRequest{
		LedgerID: ledgerID, EntryID: entryID, MasterKey: key[:],
		Body: d.AppendEntry(nil, ledgerID, entryID, entryID-1, 5*(entryID+1), []byte("entry")),
	}}
}

// call sends req and waits for its answer: the top-level or op status, or
// the error.
func call(t *testing.T, tr *Transport, addr string, req *wire.Request) (wire.Status, error) {
	t.Helper()
	ch := make(chan result, 1)
	tr.Send(addr, req.Add.LedgerID, req, func(resp *wire.Response, err error) {
		if err != nil {
			ch <- result{err: err}
			return
		}
		st := resp.Status
		if st == wire.StatusOK && resp.Has&wire.BodyAdd != 0 {
			st = resp.Add.Status
		}
		ch <- result{status: st}
	})
	r := recv(t, ch)
	return r.status, r.err
}

type tlsPKI struct {
	t    *testing.T
	ca   *tlstest.CA
	srv  tlstest.Files
	conf func(clientAuth bool) *tls.Config
}

func newTLSPKI(t *testing.T) *tlsPKI {
	ca := tlstest.NewCA(t, "ca")
	p := &tlsPKI{t: t, ca: ca, srv: ca.Write(t, t.TempDir(), "bookie", ca.Issue(t, tlstest.Leaf{CommonName: "bookie"}))}
	return p
}

func (p *tlsPKI) server(clientAuth bool) *tls.Config {
	cfg, err := tlsconf.NewServer(tlsconf.Options{Files: tlsconf.Files{Cert: p.srv.Cert, Key: p.srv.Key, CA: p.srv.CA}, ClientAuth: clientAuth})
	if err != nil {
		p.t.Fatal(err)
	}
	return cfg
}

// client returns a client configuration with a certificate for leaf, or
// none.
func (p *tlsPKI) client(leaf *tlstest.Leaf) *tls.Config {
	o := tlsconf.Options{Files: tlsconf.Files{CA: p.srv.CA}}
	if leaf != nil {
		f := p.ca.Write(p.t, p.t.TempDir(), "client", p.ca.Issue(p.t, *leaf))
		o.Cert, o.Key = f.Cert, f.Key
	}
	cfg, err := tlsconf.NewClient(o)
	if err != nil {
		p.t.Fatal(err)
	}
	return cfg
}

// The transport upgrades every connection before its first request, for
// both protocols, and the bookie serves them inside TLS.
func TestTLSBothProtocols(t *testing.T) {
	p := newTLSPKI(t)
	b := startRealBookie(t, server.Options{TLS: p.server(true), Authorizer: server.RoleAuthorizer{Roles: []string{"writer"}}})
	for i, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
		tr := newTransport(t, Config{Protocol: proto, TLS: p.client(&tlstest.Leaf{OU: "0:writer"})})
		for e := int64(0); e < 5; e++ {
			if st, err := call(t, tr, b.addr, tlsAdd(int64(10+i), e)); err != nil || st != wire.StatusOK {
				t.Fatalf("%v add %d: %v %v", proto, e, st, err)
			}
		}
		tr.Close()
	}
	if n := b.tls.Load(); n != 2 {
		t.Fatalf("%d TLS connections, want 2", n)
	}
}

// The client never continues in plaintext: a bookie without TLS answers
// START_TLS EBADREQ and the request fails with ErrTLS, unsent.
func TestTLSRefusesPlaintextBookie(t *testing.T) {
	p := newTLSPKI(t)
	b := startRealBookie(t, server.Options{})
	for _, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
		tr := newTransport(t, Config{Protocol: proto, TLS: p.client(nil)})
		_, err := call(t, tr, b.addr, tlsAdd(20, 0))
		tr.Close()
		if !errors.Is(err, ErrTLS) || !errors.Is(err, ErrBookieUnavailable) || !strings.Contains(err.Error(), "refusing to continue in plaintext") {
			t.Fatalf("%v: %v", proto, err)
		}
	}
	// The bookie answered START_TLS (EBADREQ) and nothing else.
	if n := b.served.Load(); n != 2 {
		t.Fatalf("the bookie served %d requests, want the 2 START_TLS", n)
	}
}

// Refusals by the bookie reach the caller as ErrTLS: no client
// certificate, an expired one, one signed by another CA, and (with
// BookieAuthZFactory) a role not listed, which also matches
// wire.ErrUnauthorized.
func TestTLSRefusedByBookie(t *testing.T) {
	p := newTLSPKI(t)
	b := startRealBookie(t, server.Options{TLS: p.server(true), Authorizer: server.RoleAuthorizer{Roles: []string{"writer"}}})
	other := tlstest.NewCA(t, "other")
	of := other.Write(t, t.TempDir(), "stranger", other.Issue(t, tlstest.Leaf{OU: "0:writer"}))
	stranger, err := tlsconf.NewClient(tlsconf.Options{Files: tlsconf.Files{CA: p.srv.CA, Cert: of.Cert, Key: of.Key}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		cfg          *tls.Config
		unauthorized bool
	}{
		{"no certificate", p.client(nil), false},
		{"expired", p.client(&tlstest.Leaf{OU: "0:writer", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), false},
		{"other CA", stranger, false},
		{"role not listed", p.client(&tlstest.Leaf{OU: "0:reader"}), true},
		{"no role", p.client(&tlstest.Leaf{}), true},
	}
	for _, c := range cases {
		for _, proto := range []wire.Protocol{wire.ProtocolV3, wire.ProtocolV2} {
			tr := newTransport(t, Config{Protocol: proto, TLS: c.cfg})
			_, err := call(t, tr, b.addr, tlsAdd(30, 0))
			tr.Close()
			if !errors.Is(err, ErrTLS) || errors.Is(err, wire.ErrUnauthorized) != c.unauthorized {
				t.Fatalf("%s %v: %v", c.name, proto, err)
			}
			t.Logf("%s %v: %v", c.name, proto, err)
		}
	}
	// The client verifies the bookie too: one whose certificate another
	// CA signed is refused.
	tr := newTransport(t, Config{TLS: func() *tls.Config {
		cfg, err := tlsconf.NewClient(tlsconf.Options{Files: tlsconf.Files{CA: of.CA}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}()})
	defer tr.Close()
	if _, err := call(t, tr, b.addr, tlsAdd(30, 0)); !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("bookie of another CA: %v", err)
	}
	if n := b.served.Load(); n != 0 {
		t.Fatalf("the bookie served %d requests of refused clients", n)
	}
}

// A bookie that never answers START_TLS fails the connection after
// StartTLSTimeout.
func TestStartTLSTimeout(t *testing.T) {
	b := newFakeBookie(t, func(*fakeConn, *wire.Request) {})
	p := newTLSPKI(t)
	tr := newTransport(t, Config{TLS: p.client(nil), StartTLSTimeout: 50 * time.Millisecond, AddTimeout: time.Minute})
	defer tr.Close()
	ch := make(chan result, 1)
	tr.Send(b.addr(), 1, addRequest(1, 0), collect(ch))
	if r := recv(t, ch); !errors.Is(r.err, ErrTLS) || !strings.Contains(r.err.Error(), "no answer to START_TLS") {
		t.Fatalf("%v", r.err)
	}
}
