package zk_test

import (
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/metadata/zk"
)

// TestLedgerPathsGolden pins ledger id → znode for every manager against
// Java's StringUtils (getShortHierarchicalLedgerPath,
// getLongHierarchicalLedgerPath, getHybridHierarchicalLedgerPath) and
// FlatLedgerManager.
func TestLedgerPathsGolden(t *testing.T) {
	cases := []struct {
		m    zk.Manager
		id   int64
		want string
	}{
		{zk.Hierarchical, 0, "/ledgers/00/0000/L0000"},
		{zk.Hierarchical, 12345, "/ledgers/00/0001/L2345"},
		{zk.Hierarchical, 1234567890, "/ledgers/12/3456/L7890"},
		{zk.Hierarchical, math.MaxInt32 - 1, "/ledgers/21/4748/L3646"},
		// Integer.MAX_VALUE and above: the long form.
		{zk.Hierarchical, math.MaxInt32, "/ledgers/000/0000/0021/4748/L3647"},
		{zk.Hierarchical, 1<<32 | 5, "/ledgers/000/0000/0042/9496/L7301"},
		{zk.Hierarchical, 360287970189639681, "/ledgers/036/0287/9701/8963/L9681"},
		{zk.Hierarchical, metadata.MaxLedgerID, "/ledgers/922/3372/0368/5477/L5806"},
		{zk.LongHierarchical, 12345, "/ledgers/000/0000/0000/0001/L2345"},
		{zk.LongHierarchical, 360287970189639681, "/ledgers/036/0287/9701/8963/L9681"},
		{zk.LegacyHierarchical, 12345, "/ledgers/00/0001/L2345"},
		{zk.LegacyHierarchical, 9_999_999_999, "/ledgers/99/9999/L9999"},
		{zk.Flat, 12345, "/ledgers/L0000012345"},
		{zk.Flat, 360287970189639681, "/ledgers/L360287970189639681"},
	}
	for _, c := range cases {
		got, err := c.m.LedgerPath("/ledgers", c.id)
		if err != nil || got != c.want {
			t.Errorf("%v ledger %d: %q, %v; want %q", c.m, c.id, got, err, c.want)
		}
	}
	if p, err := zk.LegacyHierarchical.LedgerPath("/ledgers", 10_000_000_000); err == nil {
		t.Errorf("legacy hierarchical path of an 11-digit id: %q, want an error", p)
	}
}

// TestLayoutGolden pins LAYOUT's bytes (LedgerLayout.serialize) and the
// parser's answers, including Java's format 1 and what Folio refuses.
func TestLayoutGolden(t *testing.T) {
	want := map[zk.Manager]string{
		zk.Hierarchical:       "2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1",
		zk.LongHierarchical:   "2\norg.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory:1",
		zk.LegacyHierarchical: "2\norg.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory:1",
		zk.Flat:               "2\norg.apache.bookkeeper.meta.FlatLedgerManagerFactory:1",
	}
	for m, v := range want {
		if got := m.LayoutValue(); got != v {
			t.Errorf("%v: LAYOUT %q, want %q", m, got, v)
		}
		if got, err := zk.ParseLayout([]byte(v)); err != nil || got != m {
			t.Errorf("ParseLayout(%q) = %v, %v", v, got, err)
		}
	}
	for v, m := range map[string]zk.Manager{"1\nhierarchical:1": zk.Hierarchical, "1\nflat:1": zk.Flat} {
		if got, err := zk.ParseLayout([]byte(v)); err != nil || got != m {
			t.Errorf("ParseLayout(%q) = %v, %v; want %v", v, got, err, m)
		}
	}
	for _, bad := range []string{
		"", "x", "3\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1",
		"2\norg.apache.bookkeeper.meta.MSLedgerManagerFactory:1",
		"2\ncom.example.CustomLedgerManagerFactory:1",
		"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:2",
		"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory",
		"2\nhierarchical:1",
	} {
		if m, err := zk.ParseLayout([]byte(bad)); err == nil {
			t.Errorf("ParseLayout(%q) = %v, want an error", bad, m)
		}
	}
}

// TestURITypes: the URI types Java accepts, and what is refused with a
// message naming it.
func TestURITypes(t *testing.T) {
	ok := map[string]zk.Manager{"": 0, "null": 0, "hierarchical": zk.Hierarchical, "longhierarchical": zk.LongHierarchical, "flat": zk.Flat}
	for typ, want := range ok {
		if m, err := zk.ManagerFromURIType(typ); err != nil || m != want {
			t.Errorf("zk+%s: %v, %v", typ, m, err)
		}
	}
	for _, typ := range []string{"ms", "legacyhierarchical", "etcd", "bogus"} {
		_, err := zk.ManagerFromURIType(typ)
		if err == nil || !strings.Contains(err.Error(), typ) {
			t.Errorf("zk+%s: %v, want an error naming it", typ, err)
		}
	}
	ctx := ctxOf(t)
	for _, uri := range []string{"zk+ms://127.0.0.1:1/ledgers", "zk+bogus://127.0.0.1:1/ledgers", "zk://user:secret@127.0.0.1:1/ledgers"} {
		_, err := metadata.Open(ctx, uri, metadata.Options{})
		if !errors.Is(err, metadata.ErrBadURI) {
			t.Errorf("%s: %v, want ErrBadURI", uri, err)
		}
		if strings.Contains(uri, "secret") && (err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "authentication")) {
			t.Errorf("%s: %v: want a refusal that names authentication and does not print the password", uri, err)
		}
	}
	// TLS and user/password settings are refused before any connection:
	// the driver has neither.
	for _, sec := range []metadata.Security{{TLS: &tls.Config{}}, {User: "u", Password: "p"}} {
		_, err := metadata.Open(ctx, "zk://127.0.0.1:1/ledgers", metadata.Options{Security: sec})
		if !errors.Is(err, metadata.ErrBadSecurity) || !strings.Contains(err.Error(), "ZooKeeper driver supports neither TLS nor authentication") {
			t.Errorf("security %+v: %v", sec, err)
		}
	}
}

// TestInitNewClusterGolden: the znodes and values initnewcluster writes,
// read back from the server, then what a bookie, a ledger, the id
// generator and AutoRecovery add, at Java's paths.
func TestInitNewClusterGolden(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	d := e.open(t, e.uri)
	instanceID, err := d.InitNewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(instanceID) {
		t.Fatalf("instance id %q", instanceID)
	}
	want := map[string]string{
		e.root:                              "",
		e.root + "/LAYOUT":                  "2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1",
		e.root + "/INSTANCEID":              instanceID,
		e.root + "/available":               "",
		e.root + "/available/readonly":      "",
		e.root + "/cookies":                 "",
		e.root + "/underreplication":        "",
		e.root + "/underreplication/LAYOUT": "type: \"BASIC\"\nversion: 1\n",
	}
	got := e.tree(t, e.root)
	if !equalMaps(got, want) {
		t.Fatalf("after init:\n got %q\nwant %q", got, want)
	}

	// A ledger: the id comes from idgen/ID-, the znode is at the short
	// path, the value is format 3.
	md := metadatatest.NewLedgerMetadata(1, 1, 1)
	id, _, err := d.CreateLedger(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := zk.Hierarchical.LedgerPath(e.root, id)
	b, _, err := e.raw.Get(lp)
	if err != nil {
		t.Fatalf("ledger %d not at %s: %v", id, lp, err)
	}
	if wantB, _ := metadata.SerializeLedgerMetadata(md); string(b) != string(wantB) {
		t.Fatalf("ledger value %q, want %q", b, wantB)
	}
	if kids, _, _ := e.raw.Children(e.root + "/idgen"); len(kids) != 0 {
		t.Fatalf("idgen znodes left behind: %v", kids)
	}

	// A registration: the ephemeral znode holds BookieServiceInfoFormat.
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: sessionTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.RegisterBookie(ctx, "10.1.2.3:3181", false); err != nil {
		t.Fatal(err)
	}
	b, st, err := e.raw.Get(e.root + "/available/10.1.2.3:3181")
	if err != nil || st.EphemeralOwner != s.(interface{ SessionID() int64 }).SessionID() {
		t.Fatalf("registration: %v, owner %#x", err, st.EphemeralOwner)
	}
	// endpoints { id "bookie" port 3181 host "10.1.2.3" protocol "bookie-rpc" }
	wantInfo := "3221" + "0a06" + hex.EncodeToString([]byte("bookie")) + "10ed18" + "1a08" + hex.EncodeToString([]byte("10.1.2.3")) +
		"220a" + hex.EncodeToString([]byte("bookie-rpc"))
	if got := hex.EncodeToString(b); got != wantInfo {
		t.Fatalf("registration value %s, want %s", got, wantInfo)
	}

	// AutoRecovery records and locks at Java's paths and in its formats.
	if err := d.MarkLedgerUnderReplicated(ctx, 1<<32|0x1234, []metadata.BookieID{"10.0.0.2:3181", "10.0.0.1:3181"}); err != nil {
		t.Fatal(err)
	}
	rec := e.root + "/underreplication/ledgers/0000/0001/0000/1234/urL4294971956"
	b, _, err = e.raw.Get(rec)
	if err != nil {
		t.Fatalf("record not at %s: %v", rec, err)
	}
	if !regexp.MustCompile(`^replica: "10.0.0.1:3181"\nreplica: "10.0.0.2:3181"\nctime: \d+\n$`).Match(b) {
		t.Fatalf("record %q", b)
	}
	l, err := d.LockUnderReplicatedLedger(ctx, s, 1<<32|0x1234, "10.1.2.3:3181")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err = e.raw.Get(e.root + "/underreplication/locks/urL4294971956")
	if err != nil || string(b) != "bookieId: \"10.1.2.3:3181\"\n" {
		t.Fatalf("lock: %q, %v", b, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.SetLostBookieRecoveryDelay(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if b, _, err := e.raw.Get(e.root + "/underreplication/lostBookieRecoveryDelay"); err != nil || string(b) != "90" {
		t.Fatalf("delay %q, %v", b, err)
	}
	if err := d.SetReplicationEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := e.raw.Exists(e.root + "/underreplication/disable"); !ok {
		t.Fatal("disable znode missing")
	}
	if err := d.SetLastCheckTime(ctx, metadata.LedgerCheck, time.UnixMilli(1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := e.raw.Get(e.root + "/underreplication/checkallledgersctime"); hex.EncodeToString(b) != "0880d095ffbc31" {
		t.Fatalf("check time %x", b)
	}
	vote, err := d.CampaignAuditor(ctx, s, "10.1.2.3:3181")
	if err != nil {
		t.Fatal(err)
	}
	votes, _, _ := e.raw.Children(e.root + "/underreplication/auditorelection")
	if len(votes) != 1 || !regexp.MustCompile(`^V_\d{10}$`).MatchString(votes[0]) {
		t.Fatalf("votes %v", votes)
	}
	b, _, _ = e.raw.Get(e.root + "/underreplication/auditorelection/" + votes[0])
	if string(b) != "bookieId: \"10.1.2.3:3181\"\n" {
		t.Fatalf("vote %q", b)
	}
	if err := vote.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// tree returns every znode at or below p with its value.
func (e *env) tree(t *testing.T, p string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(string)
	walk = func(p string) {
		b, _, err := e.raw.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		out[p] = string(b)
		kids, _, err := e.raw.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	walk(p)
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestIDGeneration: ids come from idgen/ID- sequence numbers (0 is
// skipped); once idgen-long exists, from idgen-long/HOB-0000000001/ID-,
// above 2^32, as Java's LongZkLedgerIdGenerator. Ledgers created there
// live at the long path.
func TestIDGeneration(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	d := e.open(t, e.uri)
	if _, err := d.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	var short []int64
	for range 3 {
		id, err := d.GenerateLedgerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		short = append(short, id)
	}
	// The counter is idgen's child sequence number: 0 (skipped), 1, 2, 3.
	if !slices.Equal(short, []int64{1, 2, 3}) {
		t.Fatalf("short ids %v, want [1 2 3]", short)
	}
	// Switch to 63-bit ids as Java does after the 31-bit ones run out.
	e.put(t, e.root+"/idgen-long", nil)
	d2 := e.open(t, e.uri)
	id, v, err := d2.CreateLedger(ctx, metadatatest.NewLedgerMetadata(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if id>>32 != 1 || id&0xffffffff > 10 {
		t.Fatalf("long id %#x, want HOB 1 in the high half", id)
	}
	if ok, _, _ := e.raw.Exists(e.root + "/idgen-long/HOB-0000000001"); !ok {
		t.Fatal("HOB-0000000001 missing")
	}
	lp, _ := zk.Hierarchical.LedgerPath(e.root, id)
	if !strings.HasPrefix(lp, e.root+"/000/0000/0042/") {
		t.Fatalf("long ledger path %s", lp)
	}
	if ok, _, _ := e.raw.Exists(lp); !ok {
		t.Fatalf("ledger %#x not at %s", id, lp)
	}
	if ids, err := d2.ListLedgers(ctx, 0, 10); err != nil || !slices.Equal(ids, []int64{id}) {
		t.Fatalf("ListLedgers = %v, %v", ids, err)
	}
	if err := d2.DeleteLedger(ctx, id, v); err != nil {
		t.Fatal(err)
	}
	// The emptied long-path parents go with the ledger.
	if ok, _, _ := e.raw.Exists(e.root + "/000"); ok {
		t.Fatal("empty parents of a deleted ledger left behind")
	}
}

// TestBadInput: a LAYOUT naming an unknown manager, a LAYOUT at odds with
// the URI's type, malformed names in the ledger tree, a bad delay: clear
// errors naming the znode, nothing taken for absent.
func TestBadInput(t *testing.T) {
	ctx := ctxOf(t)
	t.Run("UnknownLayout", func(t *testing.T) {
		e := newEnv(t)
		e.put(t, e.root+"/LAYOUT", []byte("2\norg.apache.bookkeeper.meta.MSLedgerManagerFactory:1"))
		d := e.open(t, e.uri)
		_, _, err := d.ReadLedger(ctx, 1)
		if !errors.Is(err, metadata.ErrCorruptMetadata) || !strings.Contains(err.Error(), e.root+"/LAYOUT") || errors.Is(err, metadata.ErrNoSuchLedger) {
			t.Fatalf("ReadLedger under an MS layout: %v", err)
		}
		if _, err := d.ListLedgers(ctx, 0, 10); !errors.Is(err, metadata.ErrCorruptMetadata) {
			t.Fatalf("ListLedgers under an MS layout: %v", err)
		}
	})
	t.Run("LayoutMismatch", func(t *testing.T) {
		e := newEnv(t)
		e.put(t, e.root+"/LAYOUT", []byte(zk.Flat.LayoutValue()))
		d := e.open(t, "zk+hierarchical://"+e.srv.Addr()+e.root)
		_, _, err := d.CreateLedger(ctx, metadatatest.NewLedgerMetadata(1, 1, 1))
		if err == nil || !strings.Contains(err.Error(), "flat") || !strings.Contains(err.Error(), e.root+"/LAYOUT") {
			t.Fatalf("hierarchical URI on a flat layout: %v", err)
		}
		// zk+null:// and zk:// take the layout's manager.
		for _, scheme := range []string{"zk+null", "zk"} {
			d := e.open(t, scheme+"://"+e.srv.Addr()+e.root)
			id, _, err := d.CreateLedger(ctx, metadatatest.NewLedgerMetadata(1, 1, 1))
			if err != nil {
				t.Fatal(err)
			}
			if ok, _, _ := e.raw.Exists(fmt.Sprintf("%s/L%010d", e.root, id)); !ok {
				t.Fatalf("%s: ledger %d not at the flat path", scheme, id)
			}
		}
	})
	t.Run("MalformedTree", func(t *testing.T) {
		e := newEnv(t)
		d := e.open(t, e.uri)
		if _, err := d.CreateLedgerMetadata(ctx, 7, metadatatest.NewLedgerMetadata(1, 1, 1)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{e.root + "/00/0000/Lxyz", e.root + "/00/00a0", e.root + "/000/0000/0000/0000/junk"} {
			e.put(t, bad, nil)
			_, err := d.ListLedgers(ctx, 0, 100)
			if !errors.Is(err, metadata.ErrCorruptMetadata) || !strings.Contains(err.Error(), bad) {
				t.Fatalf("listing with %s: %v", bad, err)
			}
			if err := e.raw.Delete(bad, -1); err != nil && err != gozk.ErrNoNode {
				t.Fatal(err)
			}
		}
		// Special znodes at the top are not ledgers.
		if ids, err := d.ListLedgers(ctx, 0, 100); err != nil || !slices.Equal(ids, []int64{7}) {
			t.Fatalf("ListLedgers = %v, %v", ids, err)
		}
	})
	t.Run("BadDelay", func(t *testing.T) {
		e := newEnv(t)
		d := e.open(t, e.uri)
		e.put(t, e.root+"/underreplication/lostBookieRecoveryDelay", []byte("0.5"))
		if _, err := d.LostBookieRecoveryDelay(ctx); !errors.Is(err, metadata.ErrCorruptMetadata) || !strings.Contains(err.Error(), "lostBookieRecoveryDelay") {
			t.Fatalf("delay 0.5: %v", err)
		}
		if err := d.SetLostBookieRecoveryDelay(ctx, 1500*time.Millisecond); err == nil {
			t.Fatal("a sub-second delay was stored")
		}
	})
}
