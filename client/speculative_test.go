package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// TestSpeculativeReads: with one bookie of every write set SIGSTOPped,
// reads finish, and later reads ask the stopped bookie last.
//
// Nothing here is timed. The read timeout is set beyond the test's context,
// so a read waiting for the stopped bookie never finishes: finishing at all
// shows that the speculative read went to the next replica. The stopped
// bookie's connection is tapped, and the second round (other entries than
// the first) must send it no read at all.
func TestSpeculativeReads(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := testCtx(t)
	pw := []byte("pw")
	w := newClient(t, cl, nil)
	wh, err := w.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, wh, 0, 30)
	if err := wh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := cl.Bookies[0]
	tap := &readTap{target: b.Addr()}
	c := newClient(t, cl, func(cfg *client.Config) {
		cfg.SpeculativeReadTimeout = 300 * time.Millisecond
		cfg.ReadEntryTimeout = 10 * time.Minute
		cfg.Dialer = tap.dial
	})
	r, err := c.OpenLedger(ctx, wh.ID(), client.OpenOptions{Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	b.Pause()
	t.Cleanup(b.Resume)
	for round, first := range []int64{0, 15} {
		start := time.Now()
		es, err := r.Read(ctx, first, first+14)
		if err != nil || len(es) != 15 {
			t.Fatalf("round %d: read %d entries, %v", round, len(es), err)
		}
		for i, e := range es {
			if !bytes.Equal(e.Payload, payloadOf(wh.ID(), first+int64(i))) {
				t.Fatalf("entry %d differs", first+int64(i))
			}
		}
		t.Logf("round %d: 15 entries in %v with %s stopped", round, time.Since(start), b.ID)
	}
	asked := tap.entries()
	var early, late []int64
	for _, e := range asked {
		if e >= 15 {
			late = append(late, e)
		} else if e >= 0 {
			early = append(early, e)
		}
	}
	if len(early) == 0 {
		t.Fatalf("the stopped bookie was asked for no entry of the first round (reads %v): no speculation tested", asked)
	}
	if len(late) != 0 {
		t.Fatalf("the second round asked the stopped bookie for entries %v; it should be asked last", late)
	}
}

// readTap records the entry ids of the READ requests the client writes to
// one bookie (frames decoded as the bookie would).
type readTap struct {
	target string
	mu     sync.Mutex
	reads  []int64
}

func (tp *readTap) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil || addr != tp.target {
		return c, err
	}
	return &tapConn{Conn: c, tap: tp}, nil
}

func (tp *readTap) entries() []int64 {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]int64(nil), tp.reads...)
}

type tapConn struct {
	net.Conn
	tap *readTap
	// buf holds the bytes of an incomplete frame; dec keeps the
	// connection's protocol. Writes come from one goroutine at a time.
	buf []byte
	dec codec.ServerDecoder
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= wire.FramePrefixSize {
		n := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < wire.FramePrefixSize+n {
			break
		}
		var req wire.Request
		if err := c.dec.DecodeRequest(c.buf[wire.FramePrefixSize:wire.FramePrefixSize+n], &req); err == nil && req.Header.Op == wire.OpReadEntry {
			c.tap.mu.Lock()
			c.tap.reads = append(c.tap.reads, req.Read.EntryID)
			c.tap.mu.Unlock()
		}
		c.buf = c.buf[wire.FramePrefixSize+n:]
	}
	return c.Conn.Write(p)
}
