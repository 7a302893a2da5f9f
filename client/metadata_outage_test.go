package client_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
)

// cutProxy forwards TCP to target until cut.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
}

// TestMetadataOutageLeavesHostPortBookiesReachable: default (host:port)
// bookie ids. The client's metadata store becomes unreachable (an etcd
// leader election, a partition from etcd only) and every bookie
// connection drops; the client reconnects. A connect resolves the id
// through the store, but a host:port id falls back to itself when the
// store does not answer (its identity is its address), so the read of a
// closed, already open ledger still succeeds, as with Java's clients.
func TestMetadataOutageLeavesHostPortBookiesReachable(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	addr := cl.Etcd.ClientAddr()
	px := newCutProxy(t, addr)
	uri := strings.Replace(cl.URI, addr, px.ln.Addr().String(), 1)

	var mu sync.Mutex
	var bookieConns []net.Conn
	c := newClient(t, cl, func(cfg *client.Config) {
		cfg.MetadataServiceURI = uri
		cfg.ConnectTimeout = 2 * time.Second
		cfg.Dialer = func(ctx context.Context, network, a string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, a)
			if err == nil {
				mu.Lock()
				bookieConns = append(bookieConns, conn)
				mu.Unlock()
			}
			return conn, err
		}
	})
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, w, 0, 10)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Read(ctx, 0, 9); err != nil {
		t.Fatal(err)
	}

	px.Cut() // metadata unreachable for this client only
	mu.Lock()
	for _, conn := range bookieConns {
		conn.Close() // every bookie connection drops (e.g. a network blip)
	}
	mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := r.Read(rctx, 0, 9); err != nil {
		t.Errorf("read of a closed ledger while only the metadata store is unreachable, all bookies up at their host:port ids: %v", err)
	}
}
