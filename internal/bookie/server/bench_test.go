package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/benchbase"
	"github.com/foliodb/folio/internal/bookie"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
	"github.com/foliodb/folio/internal/tlsconf"
	"github.com/foliodb/folio/internal/tlsconf/tlstest"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// BenchmarkBookieServer measures a single bookie over loopback TCP: a real
// ledgerstore on the test's temp directory (vfs.Default, real fdatasync),
// the server, and one raw client connection keeping 1 or 256 adds of 1 KiB
// outstanding, in v2 and v3. It reports entries/s, latency percentiles
// (send to answer, HdrHistogram) and allocations per entry (the whole
// process: client, server, bookie and storage), and the process's CPU time
// per entry (getrusage). The "baseline" run reports,
// on the same machine and directory, the loopback round trip and the raw
// fdatasync rate, so the add figures can be read against them. The "-tls"
// runs are the same over TLS (START_TLS, then TLS 1.3 with a client
// certificate, ECDSA P-256, as BookKeeper's tlsClientAuthentication):
// TLS's cost is the difference to the plaintext run of the same protocol.
//
//	go test -run '^$' -bench BenchmarkBookieServer -benchtime 20000x ./internal/bookie/server/
func BenchmarkBookieServer(b *testing.B) {
	dir := b.TempDir()
	b.Run("baseline", func(b *testing.B) {
		rtt := loopbackRTT(b, 5000)
		disk, err := benchbase.MeasureFdatasync(dir, 2000, 1024)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rtt.Microseconds()), "loopback-rtt-p50-µs")
		b.ReportMetric(disk.OpsPerSec, "fdatasync/s")
		b.ReportMetric(float64(disk.P50.Microseconds()), "fdatasync-p50-µs")
	})
	for _, proto := range []wire.Protocol{wire.ProtocolV2, wire.ProtocolV3} {
		for _, outstanding := range []int{1, 256} {
			for _, withTLS := range []bool{false, true} {
				name := proto.String()
				if withTLS {
					name += "-tls"
				}
				name += "/outstanding=" + itoa(outstanding)
				b.Run(name, func(b *testing.B) {
					benchAdds(b, filepath.Join(dir, name), proto, outstanding, withTLS)
				})
			}
		}
	}
}

// benchTLS returns the bookie's and the client's TLS configurations for a
// benchmark: a fresh CA, mutual authentication.
func benchTLS(b *testing.B) (srv, cli *tls.Config) {
	ca := tlstest.NewCA(b, "bench-ca")
	bf := ca.Write(b, b.TempDir(), "bookie", ca.Issue(b, tlstest.Leaf{}))
	cf := ca.Write(b, b.TempDir(), "client", ca.Issue(b, tlstest.Leaf{OU: "0:writer"}))
	srv, err := tlsconf.NewServer(tlsconf.Options{Files: tlsconf.Files{Cert: bf.Cert, Key: bf.Key, CA: bf.CA}, ClientAuth: true})
	if err != nil {
		b.Fatal(err)
	}
	cli, err = tlsconf.NewClient(tlsconf.Options{Files: tlsconf.Files{Cert: cf.Cert, Key: cf.Key, CA: cf.CA}})
	if err != nil {
		b.Fatal(err)
	}
	return srv, tlsconf.ForHost(cli, "127.0.0.1")
}

// benchStartTLS upgrades a benchmark client connection as the Java client
// does: a v3 START_TLS, its answer, the handshake.
func benchStartTLS(b *testing.B, nc net.Conn, cfg *tls.Config) net.Conn {
	enc, _ := codec.NewClientCodec(wire.ProtocolV3, false)
	out, err := enc.EncodeRequest(nil, &wire.Request{Header: wire.Header{Version: wire.VersionThree, Op: wire.OpStartTLS, TxnID: 1 << 40}, Has: wire.BodyStartTLS})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		b.Fatal(err)
	}
	payload, err := wire.NewFrameReader(nc).Next()
	if err != nil {
		b.Fatal(err)
	}
	var resp wire.Response
	if err := enc.DecodeResponse(payload, &resp); err != nil || resp.Status != wire.StatusOK {
		b.Fatalf("START_TLS: %v %v", err, resp.Status)
	}
	tc := tls.Client(nc, cfg)
	if err := tc.Handshake(); err != nil {
		b.Fatal(err)
	}
	return tc
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var s []byte
	for ; n > 0; n /= 10 {
		s = append([]byte{byte('0' + n%10)}, s...)
	}
	return string(s)
}

func benchAdds(b *testing.B, dir string, proto wire.Protocol, outstanding int, withTLS bool) {
	store, err := ledgerstore.Open(vfs.Default, ledgerstore.Config{
		JournalDirs: []string{filepath.Join(dir, "journal")},
		LedgerDirs:  []string{filepath.Join(dir, "ledgers")},
		Clock:       clock.Real{},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	bk, err := bookie.New(store, bookie.Config{Clock: clock.Real{}, Logger: srvQuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	opts := Options{Logger: srvQuietLogger()}
	var cliTLS *tls.Config
	if withTLS {
		opts.TLS, cliTLS = benchTLS(b)
	}
	srv := New(bk, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	if withTLS {
		nc = benchStartTLS(b, nc, cliTLS)
	}
	cc, _ := codec.NewClientCodec(proto, false)
	const ledger = 1
	payload := make([]byte, 1024)
	// Bodies are built before the clock starts: the client's digest work
	// is not the bookie's.
	n := b.N
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = rawEntry(ledger, int64(i), payload)
	}
	sent := make([]time.Time, n)
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	sem := make(chan struct{}, outstanding)
	readerDone := make(chan error, 1)

	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	go func() {
		fr := wire.NewFrameReader(bufio.NewReaderSize(nc, 64<<10))
		var resp wire.Response
		for i := 0; i < n; i++ {
			payload, err := fr.Next()
			if err != nil {
				readerDone <- err
				return
			}
			if err := cc.DecodeResponse(payload, &resp); err != nil {
				readerDone <- err
				return
			}
			if resp.Add.Status != wire.StatusOK || resp.Status != wire.StatusOK {
				readerDone <- resp.Add.Status.Err()
				return
			}
			hist.RecordValue(time.Since(sent[resp.Add.EntryID]).Microseconds())
			<-sem
		}
		readerDone <- nil
	}()
	var out []byte
	req := wire.Request{Header: wire.Header{Version: 2, Op: wire.OpAddEntry}, Has: wire.BodyAdd}
	if proto == wire.ProtocolV3 {
		req.Header.Version = 3
	}
	for i := 0; i < n; {
		sem <- struct{}{}
		out = out[:0]
		for {
			req.Header.TxnID = uint64(i + 1)
			req.Add = wire.AddRequest{LedgerID: ledger, EntryID: int64(i), MasterKey: rawKey, Body: bodies[i]}
			sent[i] = time.Now()
			if out, err = cc.EncodeRequest(out, &req); err != nil {
				b.Fatal(err)
			}
			i++
			if i == n || len(out) > 64<<10 {
				break
			}
			select {
			case sem <- struct{}{}:
				continue
			default:
			}
			break
		}
		if _, err := nc.Write(out); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-readerDone; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-µs")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-µs")
	b.ReportMetric(float64(hist.ValueAtQuantile(99.9)), "p99.9-µs")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(n), "allocs/entry")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n), "cpu-µs/entry")
}

// processCPU is the CPU time (user + system) the process has used: client,
// server, bookie and storage together.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopbackRTT is the median round trip of a 64-byte message over loopback
// TCP to an echo goroutine.
func loopbackRTT(b *testing.B, rounds int) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	hist := hdrhistogram.New(1, int64(time.Second/time.Nanosecond), 3)
	buf := make([]byte, 64)
	for range rounds {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		hist.RecordValue(time.Since(t0).Nanoseconds())
	}
	c.Close()
	wg.Wait()
	return time.Duration(hist.ValueAtQuantile(50))
}
