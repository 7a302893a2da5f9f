package autorecovery_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/placement"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/memory"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/storage"
)

// Tests of the auditor's ledger check and placement check with the
// worker's repairs, on real bookies run in this process (so that a test can
// reach into one bookie's storage and damage its copy) over a real etcd.

// inProcCluster is an embedded etcd and bookies running in this process.
type inProcCluster struct {
	uri     string
	md      metadata.Driver
	bookies map[metadata.BookieID]*server.Process
}

func startInProcCluster(t *testing.T, n int) *inProcCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	cl := &inProcCluster{uri: etcdtest.URI(srv, etcdtest.Scope(t)), bookies: map[metadata.BookieID]*server.Process{}}
	md, err := metadata.Open(ctx, cl.uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	cl.md = md
	for range n {
		dir := t.TempDir()
		c := server.DefaultConfig()
		c.BookiePort, c.ListenHost, c.AdvertisedAddress, c.AllowLoopback = 0, "127.0.0.1", "127.0.0.1", true
		c.JournalDirs, c.LedgerDirs = []string{filepath.Join(dir, "journal")}, []string{filepath.Join(dir, "ledgers")}
		c.MetadataServiceURI = cl.uri
		c.SessionTTL, c.RegistrationRetry = 2*time.Second, 100*time.Millisecond
		c.HTTPServerEnabled = false
		c.GCWaitTime = time.Hour // no garbage collection behind the test's back
		c.ShutdownTimeout = 2 * time.Second
		p, err := server.StartProcess(ctx, c, server.ProcessOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
		select {
		case <-p.Registered():
		case <-ctx.Done():
			t.Fatal("bookie did not register")
		}
		cl.bookies[p.ID()] = p
	}
	return cl
}

// addDone receives one storage add's outcome.
type addDone chan error

func (d addDone) AddComplete(err error) { d <- err }

// dropLastHeldEntry loses, on bookie b only, the last entry of ledger id
// that b should hold (as a partly lost index would): it deletes the ledger
// from b's storage and stores the other entries again, byte for byte. It
// returns the first and the last entry b should hold.
func dropLastHeldEntry(t *testing.T, p *server.Process, m *metadata.LedgerMetadata, id int64) (first, last int64) {
	t.Helper()
	ctx := context.Background()
	st := p.Store()
	q := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}
	idx := slices.Index(m.Ensembles[0].Ensemble, p.ID())
	bodies := map[int64][]byte{}
	first = -1
	for e := int64(0); e <= m.LastEntryID; e++ {
		if q.WriteSetPosition(e, idx) < 0 {
			continue
		}
		body, err := st.ReadEntry(id, e)
		if err != nil {
			t.Fatalf("entry %d on %s before the damage: %v", e, p.ID(), err)
		}
		bodies[e] = body
		if first < 0 {
			first = e
		}
		last = e
	}
	if err := st.DeleteLedger(ctx, id); err != nil {
		t.Fatal(err)
	}
	mk := digest.MasterKey(m.Password)
	for e, body := range bodies {
		if e == last {
			continue
		}
		done := make(addDone, 1)
		st.AddEntry(id, e, mk[:], body, storage.AddOptions{Recovery: true}, done)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ReadEntry(id, last); !errors.Is(err, storage.ErrNoEntry) {
		t.Fatalf("entry %d on %s after the damage: %v, want no such entry", last, p.ID(), err)
	}
	if _, err := st.ReadEntry(id, first); err != nil {
		t.Fatalf("entry %d on %s after the damage: %v", first, p.ID(), err)
	}
	return first, last
}

// repairAll steps a worker until no ledger is under-replicated.
func repairAll(ctx context.Context, t *testing.T, md metadata.Driver, w *autorecovery.Worker) {
	t.Helper()
	s, err := md.OpenSession(ctx, metadata.SessionOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.WithoutCancel(ctx))
	for len(underReplicated(ctx, t, md)) > 0 {
		if ctx.Err() != nil {
			t.Fatalf("still under-replicated: %+v", underReplicated(ctx, t, md))
		}
		if _, err := w.Step(ctx, s); err != nil {
			t.Fatalf("worker step: %v", err)
		}
	}
}

// gathered returns the value of an unlabelled counter or gauge.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName()+"_count" == name {
			return float64(successCount(mf))
		}
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// One live bookie loses the last entry it should hold of one ledger. The
// elected auditor's periodic ledger check (first and last entries only)
// marks exactly that ledger with exactly that bookie; a worker re-checks
// it, copies the fragment's entries from the other replicas to a bookie
// outside the ensemble and swaps it in by CAS, and clears the record; then
// every entry is on its Qw bookies again and a new check finds nothing.
//
// Reading only the first entry would miss this damage: the test fails if
// the checker skips the last entry of a bookie's range.
func TestLedgerCheckRepairsEntriesMissingOnLiveBookie(t *testing.T) {
	cl := startInProcCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeClosedLedgers(ctx, t, c, 3, 20, 0)
	victim := slices.Min(slices.Collect(maps.Keys(ends)))
	m, _, err := cl.md.ReadLedger(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Ensembles) != 1 {
		t.Fatalf("ledger %d has %d segments", victim, len(m.Ensembles))
	}
	bad := m.Ensembles[0].Ensemble[1]
	first, last := dropLastHeldEntry(t, cl.bookies[bad], m, victim)
	t.Logf("ledger %d: %s lost entry %d (it holds %d..%d)", victim, bad, last, first, last)

	// The elected auditor checks every LedgerCheckInterval (manual clock),
	// the first one an interval after the last check stored in the
	// metadata: one "just ran" (else it would run at once; BookKeeper's
	// AuditorLedgerCheckerTest stores the time the same way).
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	if err := cl.md.(metadata.AutoRecoveryDriver).SetLastCheckTime(ctx, metadata.LedgerCheck, clk.Now()); err != nil {
		t.Fatal(err)
	}
	metrics := autorecovery.NewMetrics(nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	bks := rereplication.NewBookies(2*time.Second, nil)
	defer bks.Close()
	a, err := autorecovery.NewAuditor(autorecovery.AuditorConfig{Driver: cl.md, ID: "127.0.0.1:1", Clock: clk,
		SessionTTL: 2 * time.Second, BookieCheckInterval: -1, LedgerCheckInterval: time.Hour, Bookies: bks, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(ctx)
	adone := make(chan struct{})
	go func() { a.Run(actx); close(adone) }()
	waitFor(ctx, t, "the auditor elected and its ledger check scheduled", func() bool {
		return auditorIs(ctx, cl.md, "127.0.0.1:1") && clk.Waiters() > 0
	})
	if ur := underReplicated(ctx, t, cl.md); len(ur) != 0 {
		t.Fatalf("marked before the ledger check: %+v", ur)
	}
	clk.Advance(time.Hour)
	waitFor(ctx, t, "the periodic ledger check", func() bool {
		return gathered(t, reg, "auditor_CHECK_ALL_LEDGERS_TIME_count") == 1
	})
	acancel()
	<-adone
	ur := underReplicated(ctx, t, cl.md)
	if len(ur) != 1 || ur[0].LedgerID != victim || !slices.Equal(ur[0].MissingReplicas, []metadata.BookieID{bad}) {
		t.Fatalf("under-replicated %+v, want ledger %d missing %s", ur, victim, bad)
	}
	for name, want := range map[string]float64{
		"auditor_NUM_LEDGERS_CHECKED":                          3,
		"folio_autorecovery_ledger_check_ledgers_marked_total": 1,
		"folio_autorecovery_ledgers_marked_total":              1,
	} {
		if got := gathered(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// A worker repairs it: the bad bookie is registered, so only the
	// ledger check's record says something is wrong.
	w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{Driver: cl.md, Client: c, Bookies: bks, ID: "127.0.0.1:100",
		SessionTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, FailureBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	repairAll(ctx, t, cl.md, w)
	t.Logf("repaired in %v", time.Since(start))
	after, _, err := cl.md.ReadLedger(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Ensembles) != 1 || slices.Contains(after.Ensembles[0].Ensemble, bad) {
		t.Fatalf("ensembles after the repair %v, want %s replaced", after.Ensembles, bad)
	}
	for i, b := range after.Ensembles[0].Ensemble {
		if i != 1 && b != m.Ensembles[0].Ensemble[i] {
			t.Fatalf("ensemble %v: only index 1 should change from %v", after.Ensembles[0].Ensemble, m.Ensembles[0].Ensemble)
		}
	}
	checkIntact(ctx, t, cl.md, map[int64]int64{victim: ends[victim]}, nil, 0, bad)
	delete(ends, victim)
	checkIntact(ctx, t, cl.md, ends, nil, 0)

	res, err := a.CheckAllLedgers(ctx)
	if err != nil || res.Ledgers != 3 || len(res.Marked) != 0 || len(res.Failed) != 0 || res.Skipped {
		t.Fatalf("check after the repair: %+v, %v", res, err)
	}
}

// A record naming a registered bookie whose copies are intact (a transient
// read failure during the check, say) is cleared without moving anything.
func TestWorkerClearsRecordOfIntactBookie(t *testing.T) {
	cl := startInProcCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeClosedLedgers(ctx, t, c, 1, 10, 0)
	id := slices.Collect(maps.Keys(ends))[0]
	m, v, err := cl.md.ReadLedger(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ar := cl.md.(metadata.AutoRecoveryDriver)
	if err := ar.MarkLedgerUnderReplicated(ctx, id, m.Ensembles[0].Ensemble[:1]); err != nil {
		t.Fatal(err)
	}
	bks := rereplication.NewBookies(2*time.Second, nil)
	defer bks.Close()
	w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{Driver: cl.md, Client: c, Bookies: bks, ID: "127.0.0.1:100",
		LedgerVerificationPercentage: 100})
	if err != nil {
		t.Fatal(err)
	}
	repairAll(ctx, t, cl.md, w)
	if _, v2, err := cl.md.ReadLedger(ctx, id); err != nil || v2 != v {
		t.Fatalf("metadata changed (version %v → %v, %v) for an intact bookie", v, v2, err)
	}
}

// The placement check judges closed ledgers by the configured rack
// locations: a ledger whose ensemble sits in one rack does not adhere, one
// spread over two does, an open one is not judged. With RepairPlacement
// the auditor marks the first with a bookie to move, and a worker with the
// same policy moves it to the other rack, data intact.
func TestPlacementCheckAndRepair(t *testing.T) {
	cl := startInProcCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	write := func() (int64, []metadata.BookieID) {
		w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
		if err != nil {
			t.Fatal(err)
		}
		for e := range int64(10) {
			if _, err := w.Append(ctx, payload(w.ID(), e)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		m, _, err := cl.md.ReadLedger(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		return w.ID(), m.Ensembles[0].Ensemble
	}
	// Rack a is where the first ledger was written; rack b the rest. The
	// second ledger must span both racks: rewrite it until it does.
	oneRack, ensA := write()
	locs := map[metadata.BookieID]string{}
	for b := range cl.bookies {
		locs[b] = "/region/b"
		if slices.Contains(ensA, b) {
			locs[b] = "/region/a"
		}
	}
	var spread int64 = -1
	for range 30 {
		id, ens := write()
		if locs[ens[0]] != locs[ens[1]] {
			spread = id
			break
		}
		if err := c.DeleteLedger(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if spread < 0 {
		t.Fatal("no ledger spread over both racks in 30 tries")
	}
	open, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(ctx)

	policy := placement.NewRackAware(rand.NewPCG(1, 2), locs, false)
	metrics := autorecovery.NewMetrics(nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	auditor := func(repair bool) *autorecovery.Auditor {
		a, err := autorecovery.NewAuditor(autorecovery.AuditorConfig{Driver: cl.md, ID: "127.0.0.1:1", PlacementPolicy: policy,
			RepairPlacement: repair, Metrics: metrics})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	res, err := auditor(false).CheckPlacement(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ledgers != 2 || !slices.Equal(res.NotAdhering, []int64{oneRack}) || res.NotAdheringSegments != 1 ||
		len(res.SoftlyAdhering) != 0 || len(res.Marked) != 0 {
		t.Fatalf("placement check %+v, want 2 closed ledgers with only %d not adhering", res, oneRack)
	}
	if n := gathered(t, reg, "auditor_NUM_LEDGERS_NOT_ADHERING_TO_PLACEMENT_POLICY"); n != 1 {
		t.Fatalf("placement_not_adhering_ledgers = %v", n)
	}
	if ur := underReplicated(ctx, t, cl.md); len(ur) != 0 {
		t.Fatalf("marked without RepairPlacement: %+v", ur)
	}

	res, err = auditor(true).CheckPlacement(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := res.Marked[oneRack]
	if len(res.Marked) != 1 || len(moved) != 1 || !slices.Contains(ensA, moved[0]) {
		t.Fatalf("marked %v, want ledger %d with one of %v", res.Marked, oneRack, ensA)
	}
	bks := rereplication.NewBookies(2*time.Second, nil)
	defer bks.Close()
	w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{Driver: cl.md, Client: c, Bookies: bks, ID: "127.0.0.1:100",
		PlacementPolicy: policy, RepairPlacement: true})
	if err != nil {
		t.Fatal(err)
	}
	repairAll(ctx, t, cl.md, w)
	m, _, err := cl.md.ReadLedger(ctx, oneRack)
	if err != nil {
		t.Fatal(err)
	}
	if got := policy.Adheres(m.Ensembles[0].Ensemble, m.WriteQuorum, m.AckQuorum); got != placement.MeetsStrict {
		t.Fatalf("ledger %d after the repair: ensemble %v %v", oneRack, m.Ensembles[0].Ensemble, got)
	}
	checkIntact(ctx, t, cl.md, map[int64]int64{oneRack: 9}, nil, 0, moved[0])
	checkIntact(ctx, t, cl.md, map[int64]int64{spread: 9}, nil, 0)
	res, err = auditor(false).CheckPlacement(ctx)
	if err != nil || len(res.NotAdhering) != 0 {
		t.Fatalf("placement check after the repair: %+v, %v", res, err)
	}
}

// The ledger check marks nothing while replication is disabled; enabled,
// unregistered bookies are bad without a read (here: no bookie at all, so
// the test needs no network).
func TestLedgerCheckSkippedWhileDisabled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md := memory.NewStore(memory.Options{}).Open()
	defer md.Close()
	m := metadatatest.NewLedgerMetadata(3, 2, 2)
	m.State, m.LastEntryID, m.Length = metadata.LedgerClosed, 10, 100
	id, _, err := md.CreateLedger(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	a, err := autorecovery.NewAuditor(autorecovery.AuditorConfig{Driver: md, ID: "127.0.0.1:1", LedgerCheckConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := md.SetReplicationEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	res, err := a.CheckAllLedgers(ctx)
	if err != nil || !res.Skipped || len(res.Marked) != 0 || len(underReplicated(ctx, t, md)) != 0 {
		t.Fatalf("disabled: %+v, %v", res, err)
	}
	if err := md.SetReplicationEnabled(ctx, true); err != nil {
		t.Fatal(err)
	}
	res, err = a.CheckAllLedgers(ctx)
	if err != nil || res.Skipped || res.Ledgers != 1 || !slices.Equal(res.Marked[id], m.Ensembles[0].Ensemble) {
		t.Fatalf("enabled: %+v, %v", res, err)
	}
	if ur := underReplicated(ctx, t, md); len(ur) != 1 || !slices.Equal(ur[0].MissingReplicas, m.Ensembles[0].Ensemble) {
		t.Fatalf("records %+v", ur)
	}
}

// successCount is a BookKeeper OpStatsLogger summary's count of successful
// observations.
func successCount(mf *dto.MetricFamily) uint64 {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "success" && l.GetValue() == "true" {
				return m.GetSummary().GetSampleCount()
			}
		}
	}
	return 0
}
