package testcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
)

// rawClient speaks the bookie protocol (v3) over one TCP connection, one
// request at a time: enough to check what a bookie stored.
type rawClient struct {
	t     *testing.T
	conn  net.Conn
	codec *codec.ClientCodec
	fr    *wire.FrameReader
	txn   uint64
}

func dial(t *testing.T, addr string) *rawClient {
	t.Helper()
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if conn, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cc, err := codec.NewClientCodec(wire.ProtocolV3, false)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, conn: conn, codec: cc, fr: wire.NewFrameReader(bufio.NewReader(conn))}
	t.Cleanup(func() { conn.Close() })
	return c
}

func (c *rawClient) call(req *wire.Request) *wire.Response {
	c.t.Helper()
	c.txn++
	req.Header.Version = wire.VersionThree
	req.Header.TxnID = c.txn
	frame, err := c.codec.EncodeRequest(nil, req)
	if err != nil {
		c.t.Fatal(err)
	}
	_ = c.conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.conn.Write(frame); err != nil {
		c.t.Fatal(err)
	}
	payload, err := c.fr.Next()
	if err != nil {
		c.t.Fatalf("read response to %v: %v", req.Header.Op, err)
	}
	resp := &wire.Response{}
	if err := c.codec.DecodeResponse(payload, resp); err != nil {
		c.t.Fatal(err)
	}
	c.fr.Detach() // resp aliases the payload
	if resp.Header.TxnID != c.txn {
		c.t.Fatalf("response txn %d, want %d", resp.Header.TxnID, c.txn)
	}
	return resp
}

var (
	password  = []byte("testcluster")
	masterKey = digest.MasterKey(password)
)

func entryBody(t *testing.T, ledgerID, entryID int64) []byte {
	t.Helper()
	dg, err := digest.New(digest.CRC32C, password)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(fmt.Sprintf("ledger %d entry %d", ledgerID, entryID))
	return dg.AppendEntry(nil, ledgerID, entryID, entryID-1, int64(len(payload))*(entryID+1), payload)
}

func (c *rawClient) add(ledgerID, entryID int64, recovery bool) wire.Status {
	c.t.Helper()
	req := &wire.Request{Header: wire.Header{Op: wire.OpAddEntry}, Has: wire.BodyAdd,
		Add: wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: masterKey[:], Body: entryBody(c.t, ledgerID, entryID)}}
	if recovery {
		req.Add.Flag = wire.AddFlagRecoveryAdd
	}
	resp := c.call(req)
	if resp.Status != wire.StatusOK {
		return resp.Status
	}
	return resp.Add.Status
}

func (c *rawClient) read(ledgerID, entryID int64, fence bool) (wire.Status, []byte) {
	c.t.Helper()
	req := &wire.Request{Header: wire.Header{Op: wire.OpReadEntry}, Has: wire.BodyRead,
		Read: wire.ReadRequest{LedgerID: ledgerID, EntryID: entryID}}
	if fence {
		req.Read.Flag = wire.ReadFlagFenceLedger
		req.Read.MasterKey, req.Read.HasMasterKey = masterKey[:], true
	}
	resp := c.call(req)
	if resp.Status != wire.StatusOK {
		return resp.Status, nil
	}
	return resp.Read.Status, resp.Read.Body
}

func TestBookieSurvivesKillWithEntriesAndFence(t *testing.T) {
	start := time.Now()
	c := Start(t, 1)
	b := c.Bookies[0]
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))

	const ledger, fenced = int64(7), int64(8)
	cl := dial(t, b.Addr())
	for e := int64(0); e < 20; e++ {
		if st := cl.add(ledger, e, false); st != wire.StatusOK {
			t.Fatalf("add %d: %v", e, st)
		}
		if st := cl.add(fenced, e, false); st != wire.StatusOK {
			t.Fatalf("add %d to the fenced ledger: %v", e, st)
		}
	}
	if st, _ := cl.read(fenced, -1, true); st != wire.StatusOK {
		t.Fatalf("fence read: %v", st)
	}
	if st := cl.add(fenced, 20, false); st != wire.StatusFenced {
		t.Fatalf("add after fence: %v, want EFENCED", st)
	}

	restart := time.Now()
	b.Restart() // SIGKILL, start again, wait for registration
	t.Logf("SIGKILL + restart + registration in %v", time.Since(restart).Round(time.Millisecond))

	cl = dial(t, b.Addr())
	for _, l := range []int64{ledger, fenced} {
		for e := int64(0); e < 20; e++ {
			st, body := cl.read(l, e, false)
			if st != wire.StatusOK || !bytes.Equal(body, entryBody(t, l, e)) {
				t.Fatalf("ledger %d entry %d after restart: %v, %d bytes", l, e, st, len(body))
			}
		}
	}
	if st := cl.add(fenced, 20, false); st != wire.StatusFenced {
		t.Fatalf("add to the fenced ledger after restart: %v, want EFENCED (the fence must survive)", st)
	}
	if st := cl.add(fenced, 20, true); st != wire.StatusOK {
		t.Fatalf("recovery add after restart: %v", st)
	}
	if st := cl.add(ledger, 20, false); st != wire.StatusOK {
		t.Fatalf("add to the unfenced ledger after restart: %v", st)
	}

	// SIGSTOP/SIGCONT: the process resumes serving. Pause returns once
	// the kernel reports the process stopped, Resume once it runs.
	b.Pause()
	if st, err := procState(b.cmd.Process.Pid); err == nil && st != 'T' {
		t.Fatalf("process state %c after Pause, want T (stopped)", st)
	}
	b.Resume()
	if st, _ := cl.read(ledger, 20, false); st != wire.StatusOK {
		t.Fatalf("read after SIGCONT: %v", st)
	}

	// A graceful stop deregisters and exits 0.
	took := b.Terminate()
	t.Logf("SIGTERM stop in %v", took.Round(time.Millisecond))
	w, err := c.MD.WritableBookies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range w {
		if id == b.ID {
			t.Fatal("still registered after SIGTERM")
		}
	}
}

func TestBookieRefusesWipedDirectoryAsProcess(t *testing.T) {
	c := Start(t, 1)
	b := c.Bookies[0]
	b.Kill()
	if err := os.RemoveAll(filepath.Join(b.Dir, "ledgers")); err != nil {
		t.Fatal(err)
	}
	b.Start()
	exited, err := b.Exited(30 * time.Second)
	if !exited || err == nil {
		t.Fatalf("bookie with a wiped directory: exited %v, err %v", exited, err)
	}
	log, _ := os.ReadFile(b.LogPath())
	for _, want := range []string{"cookie check failed", "no cookie", "hint:"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
}

func TestStandaloneLifecycle(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	s := StartStandalone(t, dir, "--bookies", "2")
	t.Logf("standalone ready in %v: %s", time.Since(start).Round(time.Millisecond), s.ReadyLine)
	if len(s.BookieIDs) != 2 || !strings.HasPrefix(s.URI, "etcd://127.0.0.1:") || !strings.HasSuffix(s.URI, "/ledgers") {
		t.Fatalf("readiness line %q", s.ReadyLine)
	}
	first := s.ReadyLine

	cl := dial(t, s.BookieIDs[1])
	for e := int64(0); e < 10; e++ {
		if st := cl.add(3, e, false); st != wire.StatusOK {
			t.Fatalf("add %d: %v", e, st)
		}
	}

	// SIGKILL and restart from the same directory: same ports, same data,
	// stale registrations cleaned.
	s.Kill()
	restart := time.Now()
	s.Start()
	t.Logf("restart after SIGKILL ready in %v", time.Since(restart).Round(time.Millisecond))
	if s.ReadyLine != first {
		t.Fatalf("after restart: %q, want the same ports %q", s.ReadyLine, first)
	}
	cl = dial(t, s.BookieIDs[1])
	for e := int64(0); e < 10; e++ {
		st, body := cl.read(3, e, false)
		if st != wire.StatusOK || !bytes.Equal(body, entryBody(t, 3, e)) {
			t.Fatalf("entry %d after restart: %v", e, st)
		}
	}

	// Terminate fails the test unless the process exits 0 (within
	// StopTimeout, its guard against a hang); how long it took is logged,
	// not judged.
	took, rest := s.Terminate()
	t.Logf("SIGTERM stop in %v", took.Round(time.Millisecond))
	if len(rest) != 0 {
		t.Errorf("stdout after the readiness line: %q (want exactly one line)", rest)
	}
}

// exitStatus is the exit code of an exited process's error (0 for nil).
func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("not an exit status: %v", err)
	}
	return ee.ExitCode()
}

// startRefused starts b expecting it to exit with status 1, with stderr
// naming path and carrying the wanted phrases.
func startRefused(t *testing.T, b *Bookie, path string, want ...string) string {
	t.Helper()
	b.Start()
	exited, err := b.Exited(StartTimeout)
	if !exited {
		t.Fatalf("bookie did not exit although %s is lost", path)
	}
	if code := exitStatus(t, err); code != 1 {
		t.Fatalf("bookie exited with status %d (%v), want 1", code, err)
	}
	log, _ := os.ReadFile(b.LogPath())
	for _, w := range append([]string{path, "refusing to open the store", "bookieformat"}, want...) {
		if !strings.Contains(string(log), w) {
			t.Errorf("stderr lacks %q:\n%s", w, log)
		}
	}
	return string(log)
}

// TestBookieRefusesLostIndexOrCheckpointAsProcess: a `folio bookie` whose
// ledger directory lost only its index, or whose journal directory lost
// only its CHECKPOINT (cookies, entry logs and the rest in place), exits
// with status 1 naming the path, instead of answering "no such ledger" and
// accepting adds to the ledger it fenced; with the files back it serves
// every entry and keeps the fence.
func TestBookieRefusesLostIndexOrCheckpointAsProcess(t *testing.T) {
	c := Start(t, 1)
	b := c.Bookies[0]
	const ledger, fenced = int64(7), int64(8)
	cl := dial(t, b.Addr())
	for e := int64(0); e < 10; e++ {
		for _, l := range []int64{ledger, fenced} {
			if st := cl.add(l, e, false); st != wire.StatusOK {
				t.Fatalf("add %d to ledger %d: %v", e, l, st)
			}
		}
	}
	if st, _ := cl.read(fenced, -1, true); st != wire.StatusOK {
		t.Fatalf("fence read: %v", st)
	}
	b.Terminate()

	index := filepath.Join(b.Dir, "ledgers", "current", "index")
	if err := os.Rename(index, index+".saved"); err != nil {
		t.Fatal(err)
	}
	log := startRefused(t, b, index, "index", "is missing")
	t.Logf("stderr of the refused start:\n%s", log)
	if err := os.Rename(index+".saved", index); err != nil {
		t.Fatal(err)
	}

	ckpt := filepath.Join(b.Dir, "journal", "current", "CHECKPOINT")
	if err := os.Rename(ckpt, ckpt+".saved"); err != nil {
		t.Fatal(err)
	}
	startRefused(t, b, ckpt, "CHECKPOINT is missing")
	if err := os.Rename(ckpt+".saved", ckpt); err != nil {
		t.Fatal(err)
	}

	b.Start()
	b.WaitRegistered(false)
	cl = dial(t, b.Addr())
	for e := int64(0); e < 10; e++ {
		for _, l := range []int64{ledger, fenced} {
			if st, body := cl.read(l, e, false); st != wire.StatusOK || !bytes.Equal(body, entryBody(t, l, e)) {
				t.Fatalf("ledger %d entry %d after the restored start: %v", l, e, st)
			}
		}
	}
	if st := cl.add(fenced, 10, false); st != wire.StatusFenced {
		t.Fatalf("add to the fenced ledger: %v, want EFENCED", st)
	}
}

// TestStandaloneRefusesLostIndex: `folio standalone` refuses too (exit
// status 1, the path named) when one of its bookies lost its index.
func TestStandaloneRefusesLostIndex(t *testing.T) {
	dir := t.TempDir()
	s := StartStandalone(t, dir, "--bookies", "1")
	cl := dial(t, s.BookieIDs[0])
	for e := int64(0); e < 5; e++ {
		if st := cl.add(3, e, false); st != wire.StatusOK {
			t.Fatalf("add %d: %v", e, st)
		}
	}
	s.Terminate()
	index := filepath.Join(dir, "bookie-0", "ledgers", "current", "index")
	if err := os.RemoveAll(index); err != nil {
		t.Fatal(err)
	}
	err, log := s.StartFails()
	if code := exitStatus(t, err); code != 1 {
		t.Fatalf("standalone exited with status %d (%v), want 1; log:\n%s", code, err, log)
	}
	for _, w := range []string{index, "is missing", "refusing to open the store"} {
		if !strings.Contains(log, w) {
			t.Errorf("stderr lacks %q:\n%s", w, log)
		}
	}
	if _, err := os.Stat(index); err == nil {
		t.Error("the refused start recreated the index")
	}
}
