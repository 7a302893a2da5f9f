package client_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// TestStaleRegistrationDoesNotRouteToAnotherBookie: bookie A (a custom id)
// is SIGKILLed; its registration lingers until its lease expires. Another
// bookie, with another id, starts on A's old address (a new pod given A's
// old IP). A client resolving A's id through the lingering registration
// dials that address; were the new bookie to answer, its "no such ledger"
// would count as A's and recovery would close the ledger short of
// acknowledged entries (DESIGN.md §6, invariants 1 and 6). The new bookie
// therefore serves nothing while another id's registration names its
// address: recovery cannot decide (A and the paused C do not answer) and
// fails, and the ledger keeps every acknowledged entry.
func TestStaleRegistrationDoesNotRouteToAnotherBookie(t *testing.T) {
	cl := testcluster.Start(t, 3, testcluster.WithCustomBookieIDs(), testcluster.WithSettings("zkTimeout=60000"))
	ctx := testCtx(t)
	wc := newClient(t, cl, nil)
	w, err := wc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	md, _, err := cl.MD.ReadLedger(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	ens := md.Ensembles[0].Ensemble
	// Entry 9's write set is {ens[0], ens[1]} (9 % 3 == 0).
	appendAll(t, ctx, w, 0, 10)
	const lastAcked = 9
	wc.Close() // the writer goes away, the ledger stays open

	byID := map[metadata.BookieID]*testcluster.Bookie{}
	for _, b := range cl.Bookies {
		byID[b.ID] = b
	}
	a, c := byID[ens[0]], byID[ens[1]]
	a.Kill() // its registration lingers for the 60 s lease
	c.Pause()
	defer c.Resume()

	other := cl.NewBookie()
	conf, err := os.ReadFile(other.ConfPath)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(conf), "bookiePort="+strconv.Itoa(other.Port), "bookiePort="+strconv.Itoa(a.Port))
	s = strings.ReplaceAll(s, "bookieId="+string(other.ID), "bookieId=newcomer")
	if err := os.WriteFile(other.ConfPath, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	other.Port, other.ID = a.Port, "newcomer"
	other.Start()
	// It neither serves nor registers while A's registration names its
	// address, and says so.
	for {
		log, _ := os.ReadFile(other.LogPath())
		if strings.Contains(string(log), "another bookie's registration names this bookie's address") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the newcomer never said why it is not serving:\n%s", log)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if w, _ := cl.MD.WritableBookies(ctx); slices.Contains(w, "newcomer") {
		t.Fatalf("the newcomer registered while not serving: %v", w)
	}
	if addr, err := metadata.ResolveBookie(ctx, cl.MD, a.ID); err != nil || addr != "127.0.0.1:"+strconv.Itoa(a.Port) {
		t.Fatalf("the dead bookie %s resolves to %s (%v), want its old address, now the newcomer's", a.ID, addr, err)
	}

	rc := newClient(t, cl, func(cfg *client.Config) { cfg.ReadEntryTimeout = 2 * time.Second })
	r, err := rc.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: []byte("pw"), Recovery: true})
	if err == nil {
		r.Close()
	}
	md, _, rerr := cl.MD.ReadLedger(ctx, w.ID())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if md.State == metadata.LedgerClosed && md.LastEntryID < lastAcked {
		t.Fatalf("recovery closed the ledger at %d, but entries up to %d were acknowledged: the newcomer answered for %s", md.LastEntryID, lastAcked, a.ID)
	}
	t.Logf("recovery while A's registration lingers: %v (ledger %v, last entry %d)", err, md.State, md.LastEntryID)
}
