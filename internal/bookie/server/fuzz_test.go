package server

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// pipeListener hands out in-memory connections (net.Pipe) to a Server.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// dial returns the client end of a new connection to the server.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// fuzzSeeds are frames of every kind, valid and not.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	enc := func(proto wire.Protocol, reqs ...wire.Request) []byte {
		cc, _ := codec.NewClientCodec(proto, false)
		var out []byte
		for i, r := range reqs {
			if proto == wire.ProtocolV3 {
				r.Header.Version, r.Header.TxnID = 3, uint64(i+1)
			} else {
				r.Header.Version = 2
			}
			out, _ = cc.EncodeRequest(out, &r)
		}
		return out
	}
	fence := rawRead(1, -1)
	fence.Read.Flag, fence.Read.MasterKey, fence.Read.HasMasterKey = wire.ReadFlagFenceLedger, rawKey, true
	poll := rawRead(1, -1)
	poll.Read.Flag, poll.Read.PreviousLAC, poll.Read.HasPreviousLAC, poll.Read.TimeoutMs, poll.Read.HasTimeout = wire.ReadFlagEntryPiggyback, 0, true, 5, true
	batch := wire.Request{Header: wire.Header{Op: wire.OpBatchReadEntry, TxnID: 9}, Has: wire.BodyBatchRead,
		BatchRead: wire.BatchReadRequest{LedgerID: 1, MaxCount: 3, MaxSize: 1 << 20}}
	auth := wire.Request{Header: wire.Header{Op: wire.OpAuth}, Has: wire.BodyAuth, Auth: wire.AuthMessage{PluginName: "x", Payload: []byte{}}}
	lac := wire.Request{Header: wire.Header{Op: wire.OpReadLAC}, Has: wire.BodyReadLAC, ReadLACLedgerID: 1}
	list := wire.Request{Header: wire.Header{Op: wire.OpGetListOfEntriesOfLedger}, Has: wire.BodyGetListOfEntries, ListEntriesLedgerID: 1}
	seeds = append(seeds,
		enc(wire.ProtocolV3, rawAdd(1, 0, []byte("a"), false), rawRead(1, 0), fence, rawAdd(1, 1, []byte("b"), true), poll, lac, list, auth),
		enc(wire.ProtocolV2, rawAdd(1, 0, []byte("a"), false), rawRead(1, -1), fence, batch, auth),
		[]byte{0, 0, 0, 0},
		[]byte{0xff, 0xff, 0xff, 0xff},
		[]byte("\x00\x00\x00\x05hello"),
	)
	return seeds
}

// FuzzServerConn feeds arbitrary bytes to a server connection as a client
// would send them. The server must neither panic nor hang: every
// connection ends once the client has closed its side.
func FuzzServerConn(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	store := newSrvStore(f)
	b, err := bookie.New(store, bookie.Config{Clock: clock.Real{}, Logger: srvQuietLogger(), MaxLongPollTimeout: 10 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	srv := New(b, Options{Logger: srvQuietLogger(), MaxInFlightPerConn: 16})
	ln := newPipeListener()
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	f.Fuzz(func(t *testing.T, data []byte) {
		client := ln.dial()
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, client)
			close(drained)
		}()
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(data) // fails once the server closes on bad input
		client.Close()
		<-drained
		deadline := time.Now().Add(10 * time.Second)
		for {
			srv.mu.Lock()
			n := len(srv.mu.conns)
			srv.mu.Unlock()
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("connection still open 10 s after the client closed (input %x)", data)
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
}
