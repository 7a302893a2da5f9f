package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/foliodb/folio/admin"
	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/testcluster"
)

// shared is one in-process cluster for the tests that only read or switch
// cluster-wide settings they restore.
var shared struct {
	uri string
}

func TestMain(m *testing.M) {
	c, err := foliotest.New(foliotest.Bookies(3))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared.uri = c.URI()
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}

func newAdmin(t *testing.T, uri string) *admin.Admin {
	t.Helper()
	ctx := context.Background()
	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: uri}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return a
}

// writeLedger creates a closed ledger of n entries on 3 bookies (Qw 2).
func writeLedger(t *testing.T, uri string, n int) (int64, client.LedgerMetadata) {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append(ctx, fmt.Appendf(nil, "entry-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return w.ID(), w.Metadata()
}

func TestListBookiesAndDiskInfo(t *testing.T) {
	ctx := context.Background()
	a := newAdmin(t, shared.uri)
	all, err := a.ListBookies(ctx, admin.ListBookiesOptions{DiskInfo: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("ListBookies: %d bookies, want 3: %+v", len(all), all)
	}
	for _, b := range all {
		if b.State != admin.BookieWritable {
			t.Errorf("%s: state %q, want writable", b.ID, b.State)
		}
		if b.Disk == nil || b.Disk.Err != nil || b.Disk.TotalBytes <= 0 || b.Disk.FreeBytes < 0 || b.Disk.FreeBytes > b.Disk.TotalBytes {
			t.Errorf("%s: disk %+v", b.ID, b.Disk)
		}
	}
	if ro, err := a.ListBookies(ctx, admin.ListBookiesOptions{ReadOnlyOnly: true}); err != nil || len(ro) != 0 {
		t.Errorf("read-only bookies: %v, %v; want none", ro, err)
	}
	withCookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{All: true})
	if err != nil || len(withCookies) != 3 {
		t.Errorf("All: %v, %v; want the 3 bookies", withCookies, err)
	}
	if _, err := a.ListBookies(ctx, admin.ListBookiesOptions{All: true, WritableOnly: true}); err == nil {
		t.Error("All with WritableOnly: no error")
	}
	d, err := a.DiskInfo(ctx, all[0].ID)
	if err != nil || d.TotalBytes <= 0 {
		t.Errorf("DiskInfo(%s) = %+v, %v", all[0].ID, d, err)
	}
	if _, err := a.DiskInfo(ctx, "127.0.0.1:1"); !errors.Is(err, admin.ErrNoSuchBookie) {
		t.Errorf("DiskInfo of an unregistered bookie: %v, want ErrNoSuchBookie", err)
	}
	for _, bad := range []string{"", "readonly", "a b:1", "host/x:1"} {
		if _, err := a.DiskInfo(ctx, bad); !errors.Is(err, admin.ErrInvalidBookieID) {
			t.Errorf("DiskInfo(%q): %v, want ErrInvalidBookieID", bad, err)
		}
		if _, err := a.RecoverBookie(ctx, []string{bad}, admin.RecoverBookieOptions{DryRun: true}); !errors.Is(err, admin.ErrInvalidBookieID) {
			t.Errorf("RecoverBookie(%q): %v, want ErrInvalidBookieID", bad, err)
		}
		if err := a.DecommissionBookie(ctx, bad, admin.DecommissionOptions{}); !errors.Is(err, admin.ErrInvalidBookieID) {
			t.Errorf("DecommissionBookie(%q): %v, want ErrInvalidBookieID", bad, err)
		}
		if _, err := a.LedgersContainingBookies(ctx, bad); !errors.Is(err, admin.ErrInvalidBookieID) {
			t.Errorf("LedgersContainingBookies(%q): %v, want ErrInvalidBookieID", bad, err)
		}
	}
	withInfo, err := a.ListBookies(ctx, admin.ListBookiesOptions{ServiceInfo: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range withInfo {
		if b.ServiceInfo == nil {
			t.Fatalf("%s: no service info", b.ID)
		}
		e, ok := b.ServiceInfo.Endpoint("bookie")
		if !ok || e.Protocol != "bookie-rpc" || net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) != b.ID {
			t.Errorf("%s: bookie endpoint %+v (%v) in %+v", b.ID, e, ok, b.ServiceInfo)
		}
	}
	if _, err := a.BookieServiceInfo(ctx, "127.0.0.1:1"); !errors.Is(err, admin.ErrNoSuchBookie) {
		t.Errorf("BookieServiceInfo of an unregistered bookie: %v, want ErrNoSuchBookie", err)
	}
	if _, err := a.BookieServiceInfo(ctx, "a b"); !errors.Is(err, admin.ErrInvalidBookieID) {
		t.Errorf("BookieServiceInfo of a malformed id: %v, want ErrInvalidBookieID", err)
	}
	if _, err := a.DeleteCookie(ctx, all[0].ID); !errors.Is(err, admin.ErrStillRegistered) {
		t.Errorf("DeleteCookie of a running bookie: %v, want ErrStillRegistered", err)
	}
}

func TestInspectAndUnknownLedger(t *testing.T) {
	ctx := context.Background()
	a := newAdmin(t, shared.uri)
	id, md := writeLedger(t, shared.uri, 5)
	in, err := a.InspectLedger(ctx, id, admin.InspectLedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.State != "CLOSED" || in.LastEntryID != 4 || in.Recovery.Outcome != admin.RecoveryClosed || len(in.Fragments) != 1 {
		t.Fatalf("inspection: %+v", in)
	}
	var held int64
	for _, b := range in.Fragments[0].Bookies {
		if b.MissingCount != 0 || b.Held != b.Expected || !b.Reachable {
			t.Errorf("fragment bookie %+v: want every expected entry held", b)
		}
		held += b.Held
	}
	if held != 5*2 {
		t.Errorf("fragment holds %d copies, want 10 (5 entries, Qw 2)", held)
	}
	if in.Fragments[0].Bookies[0].ID != md.Ensembles()[0].Bookies[0] {
		t.Errorf("fragment bookies %v, metadata %v", in.Fragments[0].Bookies, md.Ensembles())
	}
	for _, bad := range []int64{-1, metadata.MaxLedgerID + 1} {
		if _, err := a.InspectLedger(ctx, bad, admin.InspectLedgerOptions{}); !errors.Is(err, admin.ErrInvalidLedgerID) {
			t.Errorf("InspectLedger(%d): %v, want ErrInvalidLedgerID", bad, err)
		}
		if _, err := a.RecoverLedger(ctx, bad, admin.RecoverLedgerOptions{}); !errors.Is(err, admin.ErrInvalidLedgerID) {
			t.Errorf("RecoverLedger(%d): %v, want ErrInvalidLedgerID", bad, err)
		}
	}
	if got, err := a.LedgerMetadata(ctx, id); err != nil || !got.Equal(md) {
		t.Errorf("LedgerMetadata = %v, %v; want %v", got, err, md)
	}
	listed := false
	for l, err := range a.ListLedgers(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		listed = listed || l == id
	}
	if !listed {
		t.Errorf("ListLedgers did not list ledger %d", id)
	}
	const unknown = 1 << 40
	if _, err := a.LedgerMetadata(ctx, unknown); !errors.Is(err, admin.ErrNoSuchLedger) {
		t.Errorf("LedgerMetadata of an unknown ledger: %v, want ErrNoSuchLedger", err)
	}
	if _, err := a.LedgerMetadata(ctx, -1); !errors.Is(err, admin.ErrInvalidLedgerID) {
		t.Errorf("LedgerMetadata(-1): %v, want ErrInvalidLedgerID", err)
	}
	if _, err := a.InspectLedger(ctx, unknown, admin.InspectLedgerOptions{}); !errors.Is(err, admin.ErrNoSuchLedger) || !errors.Is(err, client.ErrNoSuchLedger) {
		t.Errorf("InspectLedger of an unknown ledger: %v, want ErrNoSuchLedger", err)
	}
	if _, err := a.RecoverLedger(ctx, unknown, admin.RecoverLedgerOptions{}); !errors.Is(err, admin.ErrNoSuchLedger) {
		t.Errorf("RecoverLedger of an unknown ledger: %v, want ErrNoSuchLedger", err)
	}
	if _, ok, err := a.UnderReplication(ctx, unknown); ok || err != nil {
		t.Errorf("UnderReplication of an unknown ledger: %v, %v; want not marked", ok, err)
	}
	// A closed ledger is left alone without Force.
	r, err := a.RecoverLedger(ctx, id, admin.RecoverLedgerOptions{})
	if err != nil || !r.AlreadyClosed || r.LastEntryID != 4 || r.Forced {
		t.Errorf("RecoverLedger of a closed ledger: %+v, %v", r, err)
	}
}

func TestAutoRecoverySwitchAndDelay(t *testing.T) {
	ctx := context.Background()
	a := newAdmin(t, shared.uri)
	if on, err := a.IsAutoRecoveryEnabled(ctx); err != nil || !on {
		t.Fatalf("IsAutoRecoveryEnabled = %v, %v; want enabled (never set)", on, err)
	}
	if err := a.DisableAutoRecovery(ctx); err != nil {
		t.Fatal(err)
	}
	if on, err := a.IsAutoRecoveryEnabled(ctx); err != nil || on {
		t.Fatalf("after disable: %v, %v", on, err)
	}
	if err := a.TriggerAudit(ctx); !errors.Is(err, admin.ErrAutoRecoveryDisabled) {
		t.Errorf("TriggerAudit while disabled: %v, want ErrAutoRecoveryDisabled", err)
	}
	if err := a.EnableAutoRecovery(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.TriggerAudit(ctx); !errors.Is(err, admin.ErrNoAuditor) {
		t.Errorf("TriggerAudit without AutoRecovery running: %v, want ErrNoAuditor", err)
	}
	if _, err := a.Auditor(ctx); !errors.Is(err, admin.ErrNoAuditor) {
		t.Errorf("Auditor: %v, want ErrNoAuditor", err)
	}
	if err := a.DecommissionBookie(ctx, "127.0.0.1:1", admin.DecommissionOptions{}); !errors.Is(err, admin.ErrNoAuditor) {
		t.Errorf("DecommissionBookie without an auditor: %v, want ErrNoAuditor", err)
	}
	bookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DecommissionBookie(ctx, bookies[0].ID, admin.DecommissionOptions{}); !errors.Is(err, admin.ErrStillRegistered) {
		t.Errorf("DecommissionBookie of a running bookie: %v, want ErrStillRegistered", err)
	}
	if err := a.SetLostBookieRecoveryDelay(ctx, -time.Second); err == nil {
		t.Error("a negative delay was accepted")
	}
	if err := a.SetLostBookieRecoveryDelay(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, stored, err := a.LostBookieRecoveryDelay(ctx); err != nil || !stored || d != 90*time.Second {
		t.Errorf("LostBookieRecoveryDelay = %v, %v, %v; want 90s stored", d, stored, err)
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: shared.uri}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := a.ListBookies(ctx, admin.ListBookiesOptions{}); !errors.Is(err, admin.ErrClosed) {
		t.Errorf("ListBookies after Close: %v", err)
	}
	if _, err := a.RecoverLedger(ctx, 1, admin.RecoverLedgerOptions{}); !errors.Is(err, admin.ErrClosed) {
		t.Errorf("RecoverLedger after Close: %v", err)
	}
	if _, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: "nosuch://x"}}); !errors.Is(err, client.ErrInvalidConfig) {
		t.Errorf("New with a bad URI: %v, want client.ErrInvalidConfig", err)
	}
}

// TestRecoverBookie recovers the data of a killed bookie process: a query
// and a dry run first, which change nothing (the open ledger's writer still
// appends after them), then the recovery, which fences and closes the open
// ledger after its last acknowledged entry, after which no ledger names the
// bookie and every acknowledged entry reads back.
func TestRecoverBookie(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bookie processes")
	}
	ctx := context.Background()
	c := testcluster.Start(t, 4)
	a := newAdmin(t, c.URI)
	closedID, md := writeLedger(t, c.URI, 20)
	failed := md.Ensembles()[0].Bookies[1]

	// Two open ledgers on the same bookie, their writers alive: one keeps
	// appending after the dry run (so it replaces the dead bookie itself),
	// the other stays idle (so recovery must fence and close it).
	cl, err := client.New(ctx, client.Config{MetadataServiceURI: c.URI, AddEntryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	openOn := func() *client.WriteHandle {
		for {
			h, err := cl.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(h.Metadata().Ensembles()[0].Bookies, failed) {
				return h
			}
			if err := h.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendTo := func(w *client.WriteHandle, n int) {
		t.Helper()
		for range n {
			if _, err := w.Append(ctx, fmt.Appendf(nil, "entry-%d", w.LastAddConfirmed()+1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	w, idle := openOn(), openOn()
	openID, idleID := w.ID(), idle.ID()
	appendTo(w, 5)
	appendTo(idle, 4)
	for _, b := range c.Bookies {
		if b.Addr() == failed {
			b.Kill()
			b.WaitUnregistered()
		}
	}
	versions := map[int64]metadata.Version{}
	for _, id := range []int64{closedID, openID, idleID} {
		_, v, err := c.MD.ReadLedger(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		versions[id] = v
	}

	// Both listings are in ascending id order, which is not creation order.
	on, err := a.LedgersContainingBookies(ctx, failed)
	states := map[int64]string{}
	for i, l := range on {
		states[l.LedgerID] = l.State
		if i > 0 && on[i-1].LedgerID >= l.LedgerID {
			t.Errorf("LedgersContainingBookies: not ascending: %+v", on)
		}
	}
	if err != nil || len(on) != 3 || states[closedID] != "CLOSED" || states[openID] != "OPEN" || states[idleID] != "OPEN" {
		t.Fatalf("LedgersContainingBookies(%s) = %+v, %v", failed, on, err)
	}
	plan, err := a.RecoverBookie(ctx, []string{failed}, admin.RecoverBookieOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Plan) != 3 || plan.Entries != 0 || plan.Ledgers != 0 {
		t.Fatalf("dry run: %+v", plan)
	}
	planned := map[int64]admin.PlannedLedger{}
	for _, p := range plan.Plan {
		planned[p.LedgerID] = p
	}
	if p := planned[closedID]; p.Fence || len(p.Fragments) != 1 ||
		!slices.Equal(p.Fragments[0].Replace, []string{failed}) || p.Fragments[0].LastEntryID != 19 {
		t.Errorf("dry run plan of the closed ledger: %+v", p)
	}
	if p := planned[openID]; !p.Fence || p.Skip || len(p.Fragments) != 1 || p.Fragments[0].LastEntryID != -1 {
		t.Errorf("dry run plan of the open ledger: %+v", p)
	}
	if p := planned[idleID]; !p.Fence || p.Skip {
		t.Errorf("dry run plan of the idle ledger: %+v", p)
	}
	for id, v0 := range versions {
		if _, v, err := c.MD.ReadLedger(ctx, id); err != nil || v != v0 {
			t.Fatalf("the dry run changed ledger %d's metadata: version %v → %v (%v)", id, v0, v, err)
		}
	}
	// Nothing was fenced: the writer goes on (replacing the dead bookie
	// itself as it needs).
	appendTo(w, 3)
	acked := idle.LastAddConfirmed()

	var progress []admin.Progress
	res, err := a.RecoverBookie(ctx, []string{failed}, admin.RecoverBookieOptions{DeleteCookies: true,
		Progress: func(p admin.Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries == 0 || len(res.Failed) != 0 || !slices.Equal(res.DeletedCookies, []string{failed}) {
		t.Fatalf("RecoverBookie: %+v", res)
	}
	if n := len(progress); n == 0 || progress[n-1].Op != "recover" || progress[n-1].LedgersDone != progress[n-1].Ledgers || progress[n-1].EntriesCopied != res.Entries {
		t.Errorf("progress: %+v", progress)
	}
	if on, err := a.LedgersContainingBookies(ctx, failed); err != nil || len(on) != 0 {
		t.Errorf("after recovery, ledgers naming %s: %+v, %v", failed, on, err)
	}
	// The idle ledger was fenced and closed at (or after: an append may
	// have been in flight) its last acknowledged entry; nothing
	// acknowledged is lost, and its writer can add nothing more.
	m, _, err := c.MD.ReadLedger(ctx, idleID)
	if err != nil || !m.IsClosed() || m.LastEntryID < acked {
		t.Fatalf("idle ledger after recovery: %+v, %v; want closed at ≥ %d", m, err, acked)
	}
	if _, err := idle.Append(ctx, []byte("late")); !errors.Is(err, client.ErrLedgerFenced) && !errors.Is(err, client.ErrLedgerClosed) {
		t.Errorf("append to the idle ledger after recovery: %v, want fenced", err)
	}
	// The other one's writer had replaced the bookie in its last ensemble:
	// only its first fragment was copied, and it goes on.
	appendTo(w, 2)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{closedID, openID, idleID} {
		in, err := a.InspectLedger(ctx, id, admin.InspectLedgerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range in.Fragments {
			for _, b := range f.Bookies {
				if b.ID == failed || b.MissingCount != 0 || b.Held != b.Expected {
					t.Errorf("ledger %d after recovery: %+v", id, b)
				}
			}
		}
		testcluster.CheckStored(ctx, t, c.MD, id, []byte("pw"), func(e int64) []byte { return fmt.Appendf(nil, "entry-%d", e) })
	}

	// Again: nothing left to do.
	res, err = a.RecoverBookie(ctx, []string{failed}, admin.RecoverBookieOptions{})
	if err != nil || res.Ledgers != 0 || res.Entries != 0 {
		t.Errorf("second RecoverBookie: %+v, %v", res, err)
	}
}

// TestDecommissionBookie drains a stopped bookie through a running
// AutoRecovery and deletes its cookie, reporting progress.
func TestDecommissionBookie(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bookie and AutoRecovery processes")
	}
	ctx := context.Background()
	c := testcluster.Start(t, 4)
	a := newAdmin(t, c.URI)
	id, md := writeLedger(t, c.URI, 10)
	victim := md.Ensembles()[0].Bookies[0]
	var vb *testcluster.Bookie
	for _, b := range c.Bookies {
		if b.Addr() == victim {
			vb = b
		}
	}
	if err := a.DecommissionBookie(ctx, victim, admin.DecommissionOptions{}); !errors.Is(err, admin.ErrStillRegistered) {
		t.Fatalf("decommission of a running bookie: %v, want ErrStillRegistered", err)
	}
	vb.Kill()
	vb.WaitUnregistered()
	c.StartAutoRecovery("127.0.0.1:4998", "--lost-bookie-recovery-delay", "0s")
	waitAuditor(t, a)
	var progress []admin.Progress
	if err := a.DecommissionBookie(ctx, victim, admin.DecommissionOptions{PollInterval: 100 * time.Millisecond,
		Progress: func(p admin.Progress) { progress = append(progress, p) }}); err != nil {
		t.Fatal(err)
	}
	if n := len(progress); n == 0 || progress[n-1].Op != "decommission" || progress[n-1].LedgersRemaining != 0 || progress[n-1].UnderReplicated != 0 {
		t.Errorf("progress: %+v", progress)
	}
	if on, err := a.LedgersContainingBookies(ctx, victim); err != nil || len(on) != 0 {
		t.Errorf("after decommission, ledgers naming %s: %+v, %v", victim, on, err)
	}
	if _, _, err := c.MD.ReadCookie(ctx, metadata.BookieID(victim)); !errors.Is(err, metadata.ErrNoSuchCookie) {
		t.Errorf("cookie after decommission: %v, want none", err)
	}
	if deleted, err := a.DeleteCookie(ctx, victim); err != nil || deleted {
		t.Errorf("DeleteCookie after decommission: %v, %v; want nothing to delete", deleted, err)
	}
	testcluster.CheckStored(ctx, t, c.MD, id, []byte("pw"), func(e int64) []byte { return fmt.Appendf(nil, "entry-%d", e) })
}

// waitAuditor waits until an auditor is elected.
func waitAuditor(t *testing.T, a *admin.Admin) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.StartTimeout)
	defer cancel()
	for {
		got, err := a.Auditor(ctx)
		if err == nil {
			return got
		}
		if !errors.Is(err, admin.ErrNoAuditor) {
			t.Fatalf("Auditor: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("no auditor elected")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestUnderReplicatedAndAuditor: records marked in the store are listed
// and filtered, and the auditor of a running AutoRecovery is named.
func TestUnderReplicatedAndAuditor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bookie and AutoRecovery processes")
	}
	ctx := context.Background()
	c := testcluster.Start(t, 3)
	a := newAdmin(t, c.URI)
	// AutoRecovery off: the auditor stays elected but marks nothing of its
	// own, so the listing is exactly what is marked here.
	if err := a.DisableAutoRecovery(ctx); err != nil {
		t.Fatal(err)
	}
	ar := c.MD.(metadata.AutoRecoveryDriver)
	for id, missing := range map[int64][]metadata.BookieID{7: {"10.0.0.1:3181"}, 9: {"10.0.0.1:3181", "10.0.0.2:3181"}, 12: {"10.0.0.2:3181"}} {
		if err := ar.MarkLedgerUnderReplicated(ctx, id, missing); err != nil {
			t.Fatal(err)
		}
	}
	list := func(o admin.UnderReplicatedOptions) []int64 {
		var ids []int64
		for u, err := range a.UnderReplicatedLedgers(ctx, o) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, u.LedgerID)
		}
		return ids
	}
	if got := list(admin.UnderReplicatedOptions{ReplicationWorker: true}); !slices.Equal(got, []int64{7, 9, 12}) {
		t.Errorf("under-replicated: %v", got)
	}
	if got := list(admin.UnderReplicatedOptions{MissingReplica: "10.0.0.1:3181"}); !slices.Equal(got, []int64{7, 9}) {
		t.Errorf("missing 10.0.0.1: %v", got)
	}
	if got := list(admin.UnderReplicatedOptions{ExcludingMissingReplica: "10.0.0.1:3181"}); !slices.Equal(got, []int64{12}) {
		t.Errorf("excluding 10.0.0.1: %v", got)
	}
	u, ok, err := a.UnderReplication(ctx, 9)
	if err != nil || !ok || !slices.Equal(u.MissingReplicas, []string{"10.0.0.1:3181", "10.0.0.2:3181"}) || u.Marked.IsZero() {
		t.Errorf("UnderReplication(9) = %+v, %v, %v", u, ok, err)
	}

	c.StartAutoRecovery("127.0.0.1:4999")
	if got := waitAuditor(t, a); got != "127.0.0.1:4999" {
		t.Fatalf("Auditor = %q", got)
	}
}

// TestInspectFenceState reads the bookies' fence bits from their admin
// HTTP servers: not fenced while the writer is live, fenced after
// RecoverLedger, which closes the ledger after its acknowledged entries.
func TestInspectFenceState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bookie processes")
	}
	ctx := context.Background()
	c := testcluster.Start(t, 3)
	a := newAdmin(t, c.URI)
	httpOf := map[string]string{}
	for _, b := range c.Bookies {
		httpOf[b.Addr()] = b.HTTPAddr()
	}
	cl, err := client.New(ctx, client.Config{MetadataServiceURI: c.URI})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w, err := cl.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := w.Append(ctx, fmt.Appendf(nil, "entry-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	fenced := func() map[string]*bool {
		t.Helper()
		in, err := a.InspectLedger(ctx, w.ID(), admin.InspectLedgerOptions{AdminHTTP: httpOf})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*bool{}
		for _, b := range in.Bookies {
			out[b.ID] = b.Fenced
			if b.Fenced != nil && b.FenceSource == "" {
				t.Errorf("%s: fence state without its source", b.ID)
			}
		}
		return out
	}
	for b, f := range fenced() {
		if f == nil || *f {
			t.Errorf("live ledger: bookie %s fenced = %v, want false", b, f)
		}
	}
	// Without admin HTTP servers the fence bit is unknown.
	in, err := a.InspectLedger(ctx, w.ID(), admin.InspectLedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range in.Bookies {
		if b.Fenced != nil {
			t.Errorf("%s: fence state %v without an admin HTTP server", b.ID, *b.Fenced)
		}
	}
	if in.Recovery.Outcome != admin.RecoveryEnd || in.Recovery.LastEntryID != 3 {
		t.Errorf("prediction for the live ledger: %+v, want end at 3", in.Recovery)
	}

	r, err := a.RecoverLedger(ctx, w.ID(), admin.RecoverLedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "CLOSED" || r.LastEntryID != 3 || r.AlreadyClosed {
		t.Fatalf("RecoverLedger: %+v, want closed at 3", r)
	}
	for b, f := range fenced() {
		if f == nil || !*f {
			t.Errorf("recovered ledger: bookie %s fenced = %v, want true", b, f)
		}
	}
	if _, err := w.Append(ctx, []byte("late")); !errors.Is(err, client.ErrLedgerFenced) && !errors.Is(err, client.ErrLedgerClosed) {
		t.Errorf("append after recovery: %v, want fenced", err)
	}
	if _, err := a.InspectLedger(ctx, w.ID(), admin.InspectLedgerOptions{SharedAdminHTTP: []string{"no-port"}}); err == nil {
		t.Error("a malformed admin HTTP address was accepted")
	}
	if _, err := a.InspectLedger(ctx, w.ID(), admin.InspectLedgerOptions{AdminHTTP: map[string]string{"a b": "127.0.0.1:1"}}); !errors.Is(err, admin.ErrInvalidBookieID) {
		t.Errorf("admin HTTP server of a malformed bookie id: %v, want ErrInvalidBookieID", err)
	}
}
