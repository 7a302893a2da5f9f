package cli_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// autoRecoveryBookieSettings are short AutoRecovery timings for bookies
// (zkTimeout, the session TTL, is testcluster's 2 s).
var autoRecoveryBookieSettings = []string{
	"lostBookieRecoveryDelay=0", "autoRecoveryPollInterval=100",
	"openLedgerRereplicationGracePeriod=1000", "rwRereplicateBackoffMs=500",
}

// whoIsAuditor is `folio shell whoisauditor`'s answer, "" while none is
// elected.
func whoIsAuditor(t *testing.T, uri string) string {
	t.Helper()
	code, out, _ := shell(t, uri, "whoisauditor", "-o", "json")
	if code != 0 {
		return ""
	}
	var v struct{ Auditor string }
	mustJSON(t, out, &v)
	return v.Auditor
}

// Four `folio bookie` processes run AutoRecovery inside
// (autoRecoveryDaemonEnabled, two by --autorecovery, two by the key), and
// no `folio autorecovery` daemon runs: one of them is the auditor. Its
// bookie is SIGKILLed; another bookie takes over the election and the
// bookies' workers re-replicate: no ledger references it, nothing is
// under-replicated, every entry is on its write set. A SIGTERMed bookie
// stops its AutoRecovery and exits cleanly, and the election moves on.
func TestAutoRecoveryInsideBookies(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level")
	}
	cl := testcluster.Start(t, 0, testcluster.WithSettings(autoRecoveryBookieSettings...))
	for i := range 4 {
		b := cl.NewBookie()
		if i < 2 {
			b.Start("--autorecovery")
		} else {
			b.Start("--set", "autoRecoveryDaemonEnabled=true")
		}
		b.WaitRegistered(false)
	}
	ids := func(bs []*testcluster.Bookie) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Addr())
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cl.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ends := writeLedgers(ctx, t, c, cl.MD, 10, 10)

	// The auditor is one of the bookies, and says so in its metrics.
	var auditor string
	waitUntil(ctx, t, "an auditor among the bookies", func() bool {
		auditor = whoIsAuditor(t, cl.URI)
		return auditor != ""
	})
	i := slices.Index(ids(cl.Bookies), auditor)
	if i < 0 {
		t.Fatalf("auditor %q is none of the bookies %v", auditor, ids(cl.Bookies))
	}
	victim := cl.Bookies[i]
	if m := httpGet(ctx, t, "http://"+victim.HTTPAddr()+"/metrics"); !strings.Contains(m, "folio_autorecovery_is_auditor 1") {
		t.Errorf("the auditor's bookie does not serve folio_autorecovery_is_auditor 1")
	}

	victim.Kill()
	start := time.Now()
	ar := cl.MD.(metadata.AutoRecoveryDriver)
	waitUntil(ctx, t, "re-replication off "+victim.Addr(), func() bool {
		on, err := admin.LedgersOnBookie(ctx, cl.MD, victim.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		ur, err := ar.ListUnderReplicatedLedgers(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(on) == 0 && len(ur) == 0
	})
	t.Logf("re-replicated after %v", time.Since(start))
	checkReplicated(ctx, t, cl.MD, ends, victim.ID)
	live := slices.DeleteFunc(slices.Clone(cl.Bookies), func(b *testcluster.Bookie) bool { return b == victim })
	auditor = whoIsAuditor(t, cl.URI)
	i = slices.Index(ids(live), auditor)
	if i < 0 {
		t.Fatalf("after the kill the auditor is %q, not one of the live bookies %v", auditor, ids(live))
	}

	// SIGTERM: AutoRecovery stops first (the auditor resigns), the bookie
	// exits 0, another bookie becomes the auditor.
	took := live[i].Terminate()
	t.Logf("the auditor's bookie stopped in %v", took)
	rest := slices.Delete(slices.Clone(live), i, i+1)
	waitUntil(ctx, t, "a new auditor", func() bool {
		return slices.Contains(ids(rest), whoIsAuditor(t, cl.URI))
	})
}

// waitUntil polls cond every 100 ms until it holds; it fails the test when
// ctx ends.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpGet(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
