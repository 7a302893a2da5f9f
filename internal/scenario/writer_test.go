package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// The writer is this test binary re-executed with these variables set: a
// separate process, so that it can be SIGKILLed, and whose record of
// acknowledged ids outlives it on disk.
const (
	envWriterDir = "FOLIO_SCENARIO_WRITER" // output directory; its presence selects writer mode
	envURI       = "FOLIO_SCENARIO_URI"
	envQuorum    = "FOLIO_SCENARIO_QUORUM" // "E,Qw,Qa"
	envMode      = "FOLIO_SCENARIO_MODE"   // "sync:N", "pipe:N", "async:N" or "stream:N"
	envProbe     = "FOLIO_SCENARIO_PROBE"  // "1": after the mode, wait for the probe file and try appends
)

// Files in the writer's directory.
const (
	fileLedger = "ledger"      // the ledger id, written (by rename) before the first append
	fileLog    = "log"         // one line per completed append, in completion order: "ok <id>" or "err <class> <msg>"
	fileReady  = "ready"       // the mode's appends are done
	fileProbe  = "probe"       // created by the test: try appendsAfterError appends now
	fileCut    = "cut"         // created by the test: bookie addresses the writer can no longer reach
	fileCutSet = "cut-applied" // by the writer: the addresses it has cut off (sorted, one a line), after closing their connections
	fileDone   = "done"        // the writer finished normally
	fileStop   = "stop"        // created by the test: "stream" mode stops appending and closes the ledger
	fileClosed = "closed"      // "stream" mode's close: "ok <lastEntryId>" or "err <class> <msg>"
)

// appendsAfterError is how many more appends the writer tries after its
// first failed one (or in the probe): each must fail too.
const appendsAfterError = 5

// pipeWindow is the number of appends "pipe" mode keeps outstanding.
const pipeWindow = 32

func TestMain(m *testing.M) {
	if dir := os.Getenv(envWriterDir); dir != "" {
		if err := runWriter(dir); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// payloadOf is what the writer sends as entry i of ledger id: distinct,
// variable-size bytes the checker can recompute.
func payloadOf(ledgerID, i int64) []byte {
	n := 16 + int(i%89)*13
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(int64(j)*29 + i*11 + ledgerID)
	}
	copy(b, fmt.Sprintf("l%d-e%d|", ledgerID, i))
	return b
}

var writerPassword = []byte("scenario-pw")

// errClass names an append error for the log: fenced, closed or other.
func errClass(err error) string {
	switch {
	case errors.Is(err, client.ErrLedgerFenced):
		return "fenced"
	case errors.Is(err, client.ErrLedgerClosed):
		return "closed"
	}
	return "other"
}

// cutter fails connections to the bookies listed in the cut file: dials are
// refused and open connections are closed when an address is added (a
// partition as seen by this process only).
type cutter struct {
	path  string
	mu    sync.Mutex
	cut   map[string]bool
	conns map[string][]net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[addr] {
		return nil, fmt.Errorf("scenario: %s is cut off", addr)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		c.conns[addr] = append(c.conns[addr], conn)
	}
	return conn, err
}

// poll applies the cut file every 10 ms (a file is how the test talks to
// this process) and reports each new cut set in fileCutSet once it is in
// force, so the test waits for that instead of guessing.
func (c *cutter) poll(applied string) {
	last := ""
	for {
		time.Sleep(10 * time.Millisecond) // polling interval
		b, err := os.ReadFile(c.path)
		cut := map[string]bool{}
		if err == nil {
			for _, a := range strings.Fields(string(b)) {
				cut[a] = true
			}
		}
		c.mu.Lock()
		for a := range cut {
			for _, conn := range c.conns[a] {
				conn.Close()
			}
			delete(c.conns, a)
		}
		c.cut = cut
		// Reported under the lock: no dial gets past the cut before the
		// test can know of it.
		if set := cutSet(cut); set != last {
			if err := writeFileAtomic(applied, set); err != nil {
				fmt.Fprintf(os.Stderr, "writer: %v\n", err)
			}
			last = set
		}
		c.mu.Unlock()
	}
}

// cutSet is the fileCutSet form of a set of addresses.
func cutSet(addrs map[string]bool) string {
	var out []string
	for a := range addrs {
		out = append(out, a)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func runWriter(dir string) error {
	var e, qw, qa int
	if _, err := fmt.Sscanf(os.Getenv(envQuorum), "%d,%d,%d", &e, &qw, &qa); err != nil {
		return fmt.Errorf("bad %s: %v", envQuorum, err)
	}
	mode, nStr, _ := strings.Cut(os.Getenv(envMode), ":")
	n, err := strconv.ParseInt(nStr, 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s: %v", envMode, err)
	}
	cut := &cutter{path: filepath.Join(dir, fileCut), cut: map[string]bool{}, conns: map[string][]net.Conn{}}
	go cut.poll(filepath.Join(dir, fileCutSet))
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{
		MetadataServiceURI: os.Getenv(envURI),
		Dialer:             cut.dial,
		AddEntryTimeout:    2 * time.Second,
		// Long enough to ride through a metadata store fail-over: the
		// driver retries until then (the etcd fail-over scenarios).
		MetadataTimeout: 30 * time.Second,
		// Warnings include the metadata driver's "etcd unavailable;
		// retrying", which the fail-over scenarios wait for.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: e, WriteQuorumSize: qw, AckQuorumSize: qa, Password: writerPassword})
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, fileLedger), strconv.FormatInt(w.ID(), 10)); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, fileLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	failed := false
	// record writes one completion to the log before anything else happens:
	// the line of an acknowledged id is in the kernel before the next append
	// starts, so a SIGKILL loses no acknowledged id.
	record := func(f *client.AppendFuture, want int64) {
		id, err := f.Wait(ctx)
		switch {
		case err == nil && id != want:
			fmt.Fprintf(logf, "err other acknowledged as %d, expected %d\n", id, want)
		case err == nil:
			fmt.Fprintf(logf, "ok %d\n", id)
		default:
			failed = true
			fmt.Fprintf(logf, "err %s %s\n", errClass(err), strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	next := int64(0)
	appendNext := func() *client.AppendFuture {
		f := w.AppendAsync(payloadOf(w.ID(), next))
		next++
		return f
	}
	switch mode {
	case "sync": // one append at a time, stop at the first error
		for next < n && !failed {
			want := next
			record(appendNext(), want)
		}
	case "async": // all n appends at once, then their completions in order
		fs := make([]*client.AppendFuture, n)
		for i := range fs {
			fs[i] = appendNext()
		}
		for i, f := range fs {
			record(f, int64(i))
		}
	case "pipe": // pipeWindow outstanding until the first error or n
		var fs []*client.AppendFuture
		base := int64(0)
		for next < n && !failed {
			fs = append(fs, appendNext())
			if len(fs) >= pipeWindow {
				record(fs[0], base)
				fs, base = fs[1:], base+1
			}
		}
		for _, f := range fs {
			record(f, base)
			base++
		}
	case "stream": // as pipe, until the stop file exists; then close the ledger
		stop := filepath.Join(dir, fileStop)
		var fs []*client.AppendFuture
		base := int64(0)
		for next < n && !failed {
			if next%16 == 0 {
				if _, err := os.Stat(stop); err == nil {
					break
				}
			}
			fs = append(fs, appendNext())
			if len(fs) >= pipeWindow {
				record(fs[0], base)
				fs, base = fs[1:], base+1
			}
		}
		for _, f := range fs {
			record(f, base)
			base++
		}
		result := "ok " + strconv.FormatInt(w.LastAddConfirmed(), 10)
		if err := w.Close(ctx); err != nil {
			result = "err " + errClass(err) + " " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		if err := writeFileAtomic(filepath.Join(dir, fileClosed), result); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	if failed {
		// Later appends must fail at once, with the same kind of error.
		for range appendsAfterError {
			want := next
			record(appendNext(), want)
		}
	}
	if err := writeFileAtomic(filepath.Join(dir, fileReady), ""); err != nil {
		return err
	}
	if os.Getenv(envProbe) == "1" {
		for {
			if _, err := os.Stat(filepath.Join(dir, fileProbe)); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for range appendsAfterError {
			want := next
			record(appendNext(), want)
		}
	}
	return writeFileAtomic(filepath.Join(dir, fileDone), "")
}

func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
