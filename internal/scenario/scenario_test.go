package scenario_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/cli"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
	"github.com/foliodb/folio/internal/wire"
)

// checkProbe: the writer's probe appends (after recovery) all failed with
// ErrLedgerFenced or ErrLedgerClosed.
func checkProbe(t *testing.T, w *writer) {
	t.Helper()
	if err := os.WriteFile(w.path(fileProbe), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitExit()
	res := w.results()
	errs := res.errors()
	if len(errs) < appendsAfterError {
		t.Fatalf("writer: %d failed appends after recovery, want ≥ %d; log %v", len(errs), appendsAfterError, res.lines)
	}
	for _, e := range errs {
		if e != "fenced" && e != "closed" {
			t.Errorf("writer append after recovery failed with %q, want fenced or closed; log %v", e, res.lines)
		}
	}
}

// TestScenarios runs the process-level scenarios of spec §8.2 for fencing
// and recovery on one cluster of 4 bookie processes (one more than the
// ensembles, so that a recovery rewrite has a replacement). Subtests run
// one after another: some kill and restart bookies.
func TestScenarios(t *testing.T) {
	cl := testcluster.Start(t, 4)
	checker := newClient(t, cl, nil)

	// #1 Basic fence: 100 acknowledged entries, recovery ends at 99, the
	// writer's later appends all fail Fenced/Closed.
	t.Run("1-BasicFence", func(t *testing.T) {
		w := startWriter(t, cl, "3,3,2", "sync:100", true)
		id := w.ledgerID()
		w.waitFor("ready", func() bool { return w.exists(fileReady) })
		end := mustRecover(t, newClient(t, cl, nil), id)
		if end != 99 {
			t.Fatalf("recovered end %d, want 99", end)
		}
		checkProbe(t, w)
		checkU(t, cl, checker, id, w, end)
		checkRecoveryHistory(t, cl, id, true, end)
	})

	// Wrong password: fails with ErrUnauthorized and changes nothing (the
	// metadata version and state stay, the writer goes on succeeding).
	t.Run("WrongPassword", func(t *testing.T) {
		w := startWriter(t, cl, "3,3,2", "sync:20", true)
		id := w.ledgerID()
		w.waitFor("ready", func() bool { return w.exists(fileReady) })
		ctx := ctxFor(t)
		_, v0, err := cl.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		_, err = newClient(t, cl, nil).OpenLedger(ctx, id, client.OpenOptions{Password: []byte("wrong"), Recovery: true})
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("recovery with a wrong password: %v, want ErrUnauthorized", err)
		}
		md, v1, err := cl.MD.ReadLedger(ctx, id)
		if err != nil || v1 != v0 || md.State != metadata.LedgerOpen {
			t.Fatalf("after a wrong-password recovery: state %v version %d (was %d), %v", md.State, v1, v0, err)
		}
		if err := os.WriteFile(w.path(fileProbe), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		w.waitExit()
		res := w.results()
		if len(res.errors()) != 0 || len(res.acked) != 20+appendsAfterError {
			t.Fatalf("writer disturbed by a wrong-password recovery: %v", res.lines)
		}
		end := mustRecover(t, checker, id)
		checkU(t, cl, checker, id, w, end)
		if end != int64(len(res.acked))-1 {
			t.Fatalf("end %d, writer acknowledged %d entries", end, len(res.acked))
		}
		// The refused recovery left no IN_RECOVERY of its own.
		checkRecoveryHistory(t, cl, id, true, end)
	})

	// #3 Tail crash: the writer pipelines 1000 appends and is SIGKILLed at
	// a random moment; recovery keeps every acknowledged entry, no gap.
	t.Run("3-WriterKilledMidPipeline", func(t *testing.T) {
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed))
		w := startWriter(t, cl, "3,2,2", "async:1000", false)
		id := w.ledgerID()
		w.waitAcked(1 + rng.IntN(400))
		w.kill()
		end := mustRecover(t, newClient(t, cl, nil), id)
		md := checkU(t, cl, checker, id, w, end)
		if acked := w.results().acked; len(acked) > 0 && md.LastEntryID < acked[len(acked)-1] {
			t.Fatalf("end %d below the last acknowledged %d", md.LastEntryID, acked[len(acked)-1])
		}
		checkRecoveryHistory(t, cl, id, true, end)
	})

	// #5 Writer vs recoverer: the writer appends in a tight pipelined loop,
	// R recovers mid-stream, then 3 more recoverers at once.
	t.Run("5-WriterVsRecoverers", func(t *testing.T) {
		raceOnce(t, cl, checker, rand.Uint64(), 3)
	})

	// #7 The old writer is cut off from two of its three bookies (its own
	// Dialer); R recovers through them; the network heals. The writer gets
	// no new acknowledgement it could lose.
	t.Run("7-WriterCutOff", func(t *testing.T) {
		w := startWriter(t, cl, "3,3,2", "pipe:1000000", false)
		id := w.ledgerID()
		w.waitAcked(50)
		ens := ensembleOf(t, cl, id)
		cut := ens[1].Addr() + "\n" + ens[2].Addr() + "\n"
		if err := os.WriteFile(w.path(fileCut), []byte(cut), 0o644); err != nil {
			t.Fatal(err)
		}
		want := cutSet(map[string]bool{ens[1].Addr(): true, ens[2].Addr(): true})
		w.waitFor("the cut in force", func() bool {
			b, err := os.ReadFile(w.path(fileCutSet))
			return err == nil && string(b) == want
		})
		end := mustRecover(t, newClient(t, cl, nil), id)
		if err := os.Remove(w.path(fileCut)); err != nil {
			t.Fatal(err)
		}
		w.waitExit()
		if len(w.results().errors()) == 0 {
			t.Fatal("the cut-off writer never failed")
		}
		checkU(t, cl, checker, id, w, end)
		// The writer saw two bookies fail: it may have changed its ensemble
		// before the recovery, never after.
		checkRecoveryHistory(t, cl, id, false, end)
	})

	// #9 Ten concurrent recoveries of a ledger whose tail is half written
	// converge on one end; with no bookie failure, the metadata history is
	// the create, one IN_RECOVERY and one CLOSED, nothing after it.
	t.Run("9-TenConcurrentRecoveries", func(t *testing.T) {
		w := startWriter(t, cl, "3,2,2", "async:1000", false)
		id := w.ledgerID()
		w.waitAcked(100)
		w.kill()
		ends := make([]int64, 10)
		errs := make([]error, 10)
		clients := make([]*client.Client, 10)
		for i := range clients {
			clients[i] = newClient(t, cl, nil)
		}
		var wg sync.WaitGroup
		ctx := ctxFor(t)
		for i := range ends {
			wg.Go(func() { ends[i], errs[i] = recoverLedger(ctx, clients[i], id) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("recoverer %d: %v", i, err)
			}
		}
		checkU(t, cl, checker, id, w, ends...)
		checkRecoveryHistory(t, cl, id, true, ends...)
	})

	// #15 Empty ledger: closed at -1, length 0; also an E=2 Qw=2 Qa=2 one
	// with one of its bookies down.
	t.Run("15-EmptyLedger", func(t *testing.T) {
		w := startWriter(t, cl, "3,3,2", "sync:0", false)
		id := w.ledgerID()
		w.waitExit()
		if end := mustRecover(t, newClient(t, cl, nil), id); end != -1 {
			t.Fatalf("empty ledger recovered at %d", end)
		}
		md := checkU(t, cl, checker, id, w, -1)
		if md.LastEntryID != -1 || md.Length != 0 {
			t.Fatalf("empty ledger closed at %d length %d", md.LastEntryID, md.Length)
		}
		checkRecoveryHistory(t, cl, id, true, -1)

		w2 := startWriter(t, cl, "2,2,2", "sync:0", false)
		id2 := w2.ledgerID()
		w2.waitExit()
		down := ensembleOf(t, cl, id2)[1]
		down.Kill()
		defer down.Restart()
		end := mustRecover(t, newClient(t, cl, nil), id2)
		if end != -1 {
			t.Fatalf("empty E=2 ledger with a bookie down recovered at %d", end)
		}
		checkU(t, cl, checker, id2, w2, end)
		checkRecoveryHistory(t, cl, id2, false, end)
	})

	// #13 Recovery with bookies down (E=3 Qw=3 Qa=2): one down succeeds at
	// the last acknowledged entry; two down fails and leaves IN_RECOVERY,
	// and the writer cannot add; one back, a retry succeeds at the same end.
	t.Run("13-BookiesDown", func(t *testing.T) {
		w := startWriter(t, cl, "3,3,2", "sync:50", true)
		id := w.ledgerID()
		w.waitFor("ready", func() bool { return w.exists(fileReady) })
		ens := ensembleOf(t, cl, id)
		ens[2].Kill()
		end := mustRecover(t, newClient(t, cl, nil), id)
		if end != 49 {
			t.Fatalf("recovery with one bookie down ended at %d, want 49", end)
		}
		checkProbe(t, w)
		checkU(t, cl, checker, id, w, end)
		// The recovery may have replaced the dead bookie in the close.
		checkRecoveryHistory(t, cl, id, false, end)
		ens[2].Restart()

		w2 := startWriter(t, cl, "3,3,2", "sync:50", true)
		id2 := w2.ledgerID()
		w2.waitFor("ready", func() bool { return w2.exists(fileReady) })
		ens2 := ensembleOf(t, cl, id2)
		ens2[1].Kill()
		ens2[2].Kill()
		_, err := recoverLedger(ctxFor(t), newClient(t, cl, nil), id2)
		if !errors.Is(err, client.ErrLedgerRecovery) {
			t.Fatalf("recovery with two of three bookies down: %v, want ErrLedgerRecovery", err)
		}
		md, _, err := cl.MD.ReadLedger(ctxFor(t), id2)
		if err != nil || md.State != metadata.LedgerInRecovery {
			t.Fatalf("after a failed recovery the ledger is %v (%v), want IN_RECOVERY", md.State, err)
		}
		checkProbe(t, w2)
		ens2[1].Restart()
		end2 := mustRecover(t, newClient(t, cl, nil), id2)
		if end2 != 49 {
			t.Fatalf("retried recovery ended at %d, want 49", end2)
		}
		checkU(t, cl, checker, id2, w2, end2)
		// The failed recovery and the retry marked IN_RECOVERY once.
		checkRecoveryHistory(t, cl, id2, false, end2)
		ens2[2].Restart()
	})

	// `folio shell recoverledger`: recovers, prints the end; --force
	// re-recovers a closed ledger (CLOSED → IN_RECOVERY → CLOSED) at the
	// same end here, since nothing was written past it.
	t.Run("ShellRecoverLedger", func(t *testing.T) {
		w := startWriter(t, cl, "3,2,2", "sync:30", false)
		id := w.ledgerID()
		w.waitExit()
		for _, force := range []bool{false, false, true} {
			args := []string{"shell", "--metadata-service-uri", cl.URI, "recoverledger", strconv.FormatInt(id, 10), "-o", "json"}
			if force {
				args = append(args, "--force")
			}
			var out, errb bytes.Buffer
			code := cli.Main(ctxFor(t), args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
			if code != 0 {
				t.Fatalf("recoverledger %v: exit %d: %s", args, code, errb.String())
			}
			var v cli.RecoverLedgerView
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			if v.State != "CLOSED" || v.LastEntryID != 29 || v.Forced != force || len(v.Ensembles) == 0 {
				t.Fatalf("recoverledger (force %v) printed %+v", force, v)
			}
		}
		checkU(t, cl, checker, id, w)
		// The second recoverledger found the ledger closed and wrote
		// nothing; --force marked and closed it once more.
		h, err := cl.LedgerHistory(ctxFor(t), id)
		if err != nil {
			t.Fatalf("metadata history: %v", err)
		}
		var states []string
		for _, v := range h {
			states = append(states, v.Metadata.State.String())
		}
		if got, want := strings.Join(states, " "), "OPEN IN_RECOVERY CLOSED IN_RECOVERY CLOSED"; got != want {
			t.Fatalf("metadata history %s: states %s, want %s", testcluster.FormatHistory(h), got, want)
		}
	})

	// #2 The fence survives SIGKILL and restart of every bookie: the old
	// writer still fails, and a bookie-level normal add gets EFENCED.
	t.Run("2-FenceSurvivesRestart", func(t *testing.T) {
		w := startWriter(t, cl, "3,3,2", "sync:100", true)
		id := w.ledgerID()
		w.waitFor("ready", func() bool { return w.exists(fileReady) })
		end := mustRecover(t, newClient(t, cl, nil), id)
		if end != 99 {
			t.Fatalf("recovered end %d, want 99", end)
		}
		// Recovery returns once a covering set has the fence; the request
		// reached every bookie of the ensemble, so wait until each reports
		// it before killing them (only a fence a bookie confirmed must
		// survive its restart).
		for _, b := range ensembleOf(t, cl, id) {
			waitFenced(t, b, id)
		}
		restartAll(cl)
		checkProbe(t, w)
		for _, b := range ensembleOf(t, cl, id) {
			if st := rawAdd(t, b.Addr(), id, 100); st != wire.StatusFenced {
				t.Errorf("bookie %s after restart: normal add answered %v, want EFENCED", b.ID, st)
			}
		}
		checkU(t, cl, checker, id, w, end)
		// The restarts came after the close.
		checkRecoveryHistory(t, cl, id, true, end)
	})
}

// waitFenced waits until bookie b reports ledger id fenced on its admin
// HTTP server (GET /api/v1/bookie/ledger/info reads without fencing).
func waitFenced(t *testing.T, b *testcluster.Bookie, id int64) {
	t.Helper()
	ctx := ctxFor(t)
	url := fmt.Sprintf("http://%s/api/v1/bookie/ledger/info?ledger_id=%d", b.HTTPAddr(), id)
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err != nil {
			last = err.Error()
		} else {
			var info server.LedgerInfoBody
			err := json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if err == nil && info.Fenced {
				return
			}
			last = fmt.Sprintf("%d %+v %v", resp.StatusCode, info, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bookie %s never reported ledger %d fenced: %s", b.ID, id, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// restartAll SIGKILLs every bookie, then restarts them all.
func restartAll(cl *testcluster.Cluster) {
	for _, b := range cl.Bookies {
		b.Kill()
	}
	for _, b := range cl.Bookies {
		b.WaitUnregistered()
	}
	for _, b := range cl.Bookies {
		b.Start()
	}
	for _, b := range cl.Bookies {
		b.WaitRegistered(false)
	}
}

// raceOnce is spec §8.2 #5 with timing from seed: the writer appends in a
// pipelined loop, R recovers after a random number of acknowledgements,
// and extra more recoverers (0–3 at random if extra < 0) start at random
// moments. U1–U4 and the writer's
// log are checked.
func raceOnce(t *testing.T, cl *testcluster.Cluster, checker *client.Client, seed uint64, extra int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	quorums := []string{"3,3,2", "3,2,2", "2,2,2", "3,3,3"}
	quorum := quorums[rng.IntN(len(quorums))]
	if extra < 0 {
		extra = rng.IntN(4)
	}
	wait := rng.IntN(300)
	t.Logf("seed %d: quorum %s, recover after %d acks, %d extra recoverers", seed, quorum, wait, extra)
	w := startWriter(t, cl, quorum, "pipe:1000000", false)
	id := w.ledgerID()
	w.waitAcked(wait)
	clients := make([]*client.Client, 1+extra)
	for i := range clients {
		clients[i] = newClient(t, cl, nil)
	}
	ctx := ctxFor(t)
	ends := make([]int64, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i := range clients {
		delay := 0
		if i > 0 {
			delay = rng.IntN(20)
		}
		wg.Go(func() {
			for range delay {
				// A random head start in scheduler yields rather than sleeps:
				// each costs microseconds, so recoverers overlap.
				runtimeYield()
			}
			ends[i], errs[i] = recoverLedger(ctx, clients[i], id)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("seed %d: recoverer %d: %v", seed, i, err)
		}
	}
	w.waitExit()
	res := w.results()
	if errs := res.errors(); len(errs) == 0 || !slices.ContainsFunc(errs, func(e string) bool { return e == "fenced" || e == "closed" }) {
		t.Fatalf("seed %d: the writer never got Fenced/Closed: %v", seed, errs)
	}
	checkU(t, cl, checker, id, w, ends...)
	// No bookie failed: the create, one IN_RECOVERY, one CLOSED (a
	// recoverer's or the fenced writer's own close), nothing after it.
	checkRecoveryHistory(t, cl, id, true, ends...)
}
