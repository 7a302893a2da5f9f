package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
	"github.com/foliodb/folio/internal/cli"
	"github.com/foliodb/folio/internal/testcluster"
)

// benchKeys are the keys `folio bench -o json` promises.
var benchKeys = []string{"entries_per_second", "mb_per_second", "p50_us", "p95_us", "p99_us", "p999_us", "max_us", "failed",
	"entries", "bytes", "duration_s", "ledgers", "config"}

// bench runs `folio bench <args>` in this process against uri; ctx is the
// command's context (cancelling it is what Ctrl-C does).
func bench(ctx context.Context, uri string, args ...string) (code int, stdout, stderr string) {
	return benchEnv(ctx, nil, append([]string{args[0], "--metadata-service-uri", uri}, args[1:]...)...)
}

// benchEnv runs `folio bench <args>` with env as the environment.
func benchEnv(ctx context.Context, env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(ctx, append([]string{"bench"}, args...), cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

// benchJSON parses stdout as exactly one JSON object holding every key of
// benchKeys, into a generic map and into the typed view.
func benchJSON(t *testing.T, stdout string) cli.BenchView {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, stdout)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout holds more than one JSON value:\n%s", stdout)
	}
	for _, k := range benchKeys {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON lacks %q:\n%s", k, stdout)
		}
	}
	var v cli.BenchView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// ledgerState returns whether the ledger exists and whether it is closed.
func ledgerState(ctx context.Context, t *testing.T, c *client.Client, id int64) (exists, closed bool) {
	t.Helper()
	md, err := c.LedgerMetadata(ctx, id)
	if errors.Is(err, client.ErrNoSuchLedger) {
		return false, false
	}
	if err != nil {
		t.Fatalf("ledger %d: %v", id, err)
	}
	return true, md.IsClosed()
}

// Flags are checked before anything connects: the metadata store here is
// a closed port, so reaching it would fail with another message.
func TestBenchRefusesBadFlags(t *testing.T) {
	const uri = "etcd://127.0.0.1:1/ledgers"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write", "-e", "3", "-w", "2", "-a", "3"}, "ensemble size (-e) ≥ write quorum (-w) ≥ ack quorum (-a)"},
		{[]string{"write", "-e", "2", "-w", "3", "-a", "2"}, "ensemble size (-e) ≥ write quorum (-w)"},
		{[]string{"write", "-a", "0"}, "each must be at least 1"},
		{[]string{"write", "--entry-size", "0"}, "--entry-size 0"},
		{[]string{"write", "--entry-size", "-5"}, "--entry-size -5"},
		{[]string{"write", "--rate", "-1"}, "--rate -1"},
		{[]string{"write", "--duration", "0s"}, "--duration 0s"},
		{[]string{"write", "--duration", "ten"}, "invalid argument"},
		{[]string{"write", "--ledgers", "0"}, "--ledgers 0"},
		{[]string{"write", "--max-outstanding", "0"}, "--max-outstanding 0"},
		{[]string{"write", "-o", "yaml"}, "unknown output format"},
		{[]string{"write", "extra"}, "unknown command"},
		{[]string{"read"}, "give the ledgers to read with --ledger"},
		{[]string{"read", "--ledger", "x"}, "invalid argument"},
		{[]string{"read", "--ledger", "-1"}, "ledger id -1"},
		{[]string{"read", "--ledger", "1", "--batch", "0"}, "batch 0"},
		{[]string{"read", "--ledger", "1", "--duration", "-1s"}, "duration -1s"},
		{[]string{"read", "--ledger", "1", "--entry-size", "10"}, "--entry-size applies to --tail only"},
		{[]string{"read", "--ledger", "1", "--keep"}, "--keep applies to --tail only"},
		{[]string{"read", "--tail", "--ledger", "1"}, "--ledger is for catch-up reads"},
		{[]string{"read", "--tail", "--rate", "-3"}, "--rate -3"},
		{[]string{"read", "--tail", "-w", "4"}, "ensemble size (-e) ≥ write quorum (-w)"},
	} {
		code, out, errOut := bench(context.Background(), uri, tc.args...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("folio bench %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := bench(context.Background(), uri, "write", "-a", "3"); !strings.Contains(errOut, "Run 'folio bench write --help'") {
		t.Errorf("usage error without the help line: %d %q", code, errOut)
	}
	// The shell's TLS flags, with its checks.
	if code, out, errOut := bench(context.Background(), uri, "write", "--tls-cert", "c.pem"); code != cli.ExitFail || out != "" || !strings.Contains(errOut, "needs --tls-ca") {
		t.Errorf("--tls-cert without --tls-ca: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// One in-process cluster serves the runs: write (-o json, deleted), write
// --keep then a catch-up read of those ledgers, a tailing run, the text
// table, an interrupt, and a create refused for lack of bookies.
func TestBenchAgainstCluster(t *testing.T) {
	uri := foliotest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("write json deletes", func(t *testing.T) {
		code, out, errOut := bench(ctx, uri, "write", "-o", "json", "--duration", "200ms", "--ledgers", "2", "--entry-size", "100", "--max-outstanding", "64")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q (piped stderr: no progress line either)", code, errOut)
		}
		v := benchJSON(t, out)
		if v.Mode != "write" || v.Entries == 0 || v.Failed != 0 || v.EntriesPerSecond <= 0 || v.MBPerSecond <= 0 ||
			v.Bytes != 100*v.Entries || v.P50us <= 0 || v.P50us > v.P99us || v.P99us > v.MaxUs || len(v.Ledgers) != 2 || v.Kept {
			t.Fatalf("bad result: %+v", v)
		}
		if v.Config.EnsembleSize != 3 || v.Config.WriteQuorum != 2 || v.Config.AckQuorum != 2 || v.Config.EntrySize != 100 {
			t.Fatalf("config: %+v", v.Config)
		}
		for _, id := range v.Ledgers {
			if exists, _ := ledgerState(ctx, t, c, id); exists {
				t.Errorf("ledger %d still exists without --keep", id)
			}
		}
	})

	t.Run("write keep then read", func(t *testing.T) {
		code, out, errOut := bench(ctx, uri, "write", "-o", "json", "--duration", "200ms", "--ledgers", "2", "--keep",
			"--rate", "2000", "--max-outstanding", "10", "--password", "pw")
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		w := benchJSON(t, out)
		if !w.Kept || w.Entries == 0 || len(w.Ledgers) != 2 {
			t.Fatalf("bad result: %+v", w)
		}
		// The n-th add starts no earlier than n/rate after the first.
		if limit := 2000*w.DurationS + 1; float64(w.Entries) > limit {
			t.Fatalf("%d entries in %.3fs at --rate 2000", w.Entries, w.DurationS)
		}
		ids := make([]string, len(w.Ledgers))
		for i, id := range w.Ledgers {
			ids[i] = strconv.FormatInt(id, 10)
			if exists, closed := ledgerState(ctx, t, c, id); !exists || !closed {
				t.Fatalf("kept ledger %d: exists %v, closed %v", id, exists, closed)
			}
		}
		code, out, errOut = bench(ctx, uri, "read", "-o", "json", "--ledger", strings.Join(ids, ","), "--batch", "7", "--password", "pw")
		if code != 0 {
			t.Fatalf("read: exit %d, stderr %q", code, errOut)
		}
		r := benchJSON(t, out)
		if r.Mode != "read" || r.Entries != w.Entries || r.Bytes != w.Bytes || r.Failed != 0 || r.P50us <= 0 || r.Config.Batch != 7 {
			t.Fatalf("read %+v after writing %d entries", r, w.Entries)
		}
		for _, id := range w.Ledgers {
			if exists, _ := ledgerState(ctx, t, c, id); !exists {
				t.Errorf("a catch-up read deleted ledger %d", id)
			}
		}
		// A wrong password fails every ledger: exit 1, failed > 0.
		code, out, errOut = bench(ctx, uri, "read", "-o", "json", "--ledger", ids[0], "--password", "wrong")
		if r := benchJSON(t, out); code != 1 || r.Failed == 0 || !strings.Contains(errOut, "entries failed") {
			t.Fatalf("read with a wrong password: exit %d, %+v, stderr %q", code, r, errOut)
		}
	})

	t.Run("tail", func(t *testing.T) {
		code, out, errOut := bench(ctx, uri, "read", "--tail", "-o", "json", "--duration", "300ms", "--rate", "500", "--ledgers", "2")
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		v := benchJSON(t, out)
		if v.Mode != "tail" || v.Latency != "tail lag" || v.Entries == 0 || v.Failed != 0 || v.MaxUs <= 0 || v.P50us > v.MaxUs {
			t.Fatalf("bad tail result: %+v", v)
		}
		if v.Write == nil || v.Write.Entries < v.Entries || v.Write.Latency != "add" {
			t.Fatalf("writer's figures: %+v", v.Write)
		}
		for _, id := range v.Ledgers {
			if exists, _ := ledgerState(ctx, t, c, id); exists {
				t.Errorf("ledger %d still exists without --keep", id)
			}
		}
	})

	t.Run("text table", func(t *testing.T) {
		code, out, errOut := bench(ctx, uri, "write", "--duration", "100ms", "-e", "2", "-w", "2", "-a", "1", "--max-outstanding", "64")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		for _, want := range []string{"E2 Qw2 Qa1", "ENTRIES/S", "MB/S", "P99.9", "FAILED", "deleted 1 ledger(s)"} {
			if !strings.Contains(out, want) {
				t.Errorf("text output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("uri from the environment", func(t *testing.T) {
		code, out, errOut := benchEnv(ctx, map[string]string{cli.MetadataURIEnv: uri}, "write", "-o", "json", "--duration", "50ms", "--max-outstanding", "64")
		if v := benchJSON(t, out); code != 0 || v.Entries == 0 {
			t.Fatalf("exit %d, %+v, stderr %q", code, v, errOut)
		}
	})

	t.Run("interrupt deletes and reports", func(t *testing.T) {
		before := listLedgers(ctx, t, c)
		runCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		type outcome struct {
			code     int
			out, err string
		}
		done := make(chan outcome, 1)
		go func() {
			code, out, errOut := bench(runCtx, uri, "write", "-o", "json", "--duration", "2m", "--rate", "1000")
			done <- outcome{code, out, errOut}
		}()
		id := waitNewLedgerWithEntries(ctx, t, c, before)
		interrupt()
		res := <-done
		v := benchJSON(t, res.out)
		if res.code != 1 || !v.Interrupted || v.Entries == 0 || !strings.Contains(res.err, "interrupted") {
			t.Fatalf("interrupted run: exit %d, %+v, stderr %q", res.code, v, res.err)
		}
		if exists, _ := ledgerState(ctx, t, c, id); exists {
			t.Errorf("ledger %d survived the interrupt", id)
		}
	})

	t.Run("not enough bookies", func(t *testing.T) {
		code, out, errOut := bench(ctx, uri, "write", "-o", "json", "-e", "4", "--duration", "100ms")
		if code != 1 || out != "" || !strings.Contains(errOut, "not enough writable bookies") || !strings.Contains(errOut, "hint:") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

func listLedgers(ctx context.Context, t *testing.T, c *client.Client) map[int64]bool {
	t.Helper()
	ids := map[int64]bool{}
	for id, err := range c.ListLedgers(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

// waitNewLedgerWithEntries waits until a ledger not in before exists and
// has confirmed entries (a running bench), and returns it.
func waitNewLedgerWithEntries(ctx context.Context, t *testing.T, c *client.Client, before map[int64]bool) int64 {
	t.Helper()
	for {
		for id := range listLedgers(ctx, t, c) {
			if before[id] {
				continue
			}
			r, err := c.OpenLedger(ctx, id, client.OpenOptions{})
			if err != nil {
				continue // not written yet, or deleted meanwhile
			}
			lac, err := r.ReadLastAddConfirmed(ctx)
			r.Close()
			if err == nil && lac >= 10 {
				return id
			}
		}
		if ctx.Err() != nil {
			t.Fatal("no bench ledger with entries appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A bookie killed under a run whose ack quorum is the whole ensemble, on a
// cluster with no spare bookie: adds fail, the run stops, reports
// failed > 0 and exits 1, and its ledger is still deleted.
func TestBenchFailedAdds(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level: kills a bookie")
	}
	cl := testcluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type outcome struct {
		code     int
		out, err string
	}
	done := make(chan outcome, 1)
	go func() {
		code, out, errOut := bench(ctx, cl.URI, "write", "-o", "json", "-e", "3", "-w", "3", "-a", "3", "--duration", "2m", "--rate", "500")
		done <- outcome{code, out, errOut}
	}()
	id := waitNewLedgerWithEntries(ctx, t, c, map[int64]bool{})
	cl.Bookies[1].Kill()
	res := <-done
	v := benchJSON(t, res.out)
	if res.code != 1 || v.Failed == 0 || v.Error == "" || v.Interrupted || !strings.Contains(res.err, "adds failed") {
		t.Fatalf("exit %d, %+v\nstderr %s", res.code, v, res.err)
	}
	if exists, _ := ledgerState(ctx, t, c, id); exists {
		t.Errorf("ledger %d survived the failed run", id)
	}
	t.Logf("%d adds, %d failed: %s", v.Entries, v.Failed, v.Error)
}
