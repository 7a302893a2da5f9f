// Package metadatatest is the contract suite every metadata driver passes
// (STYLE.md rule 6): memory, etcd and ZooKeeper. A driver is
// finished when Run passes against it.
//
//	func TestContract(t *testing.T) {
//		metadatatest.Run(t, func(t *testing.T) *metadatatest.Harness { ... })
//	}
package metadatatest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// RawWriter plants bytes at a ledger's key without validation, so the suite
// can check how drivers report corrupt values.
type RawWriter interface {
	// PutLedgerRaw stores value as ledger id's metadata and returns the full
	// store key it wrote (errors must name it).
	PutLedgerRaw(ctx context.Context, ledgerID int64, value []byte) (key string, err error)
}

// CheckTimeRawWriter plants bytes as a periodic check's last completion
// time without validation. A harness whose driver implements
// metadata.AutoRecoveryDriver must give a Raw that implements it too.
type CheckTimeRawWriter interface {
	// PutCheckTimeRaw stores value as check's last completion time and
	// returns the full store key it wrote (errors must name it).
	PutCheckTimeRaw(ctx context.Context, check metadata.PeriodicCheck, value []byte) (key string, err error)
}

// Harness is what a driver gives the suite for one subtest: a driver on a
// fresh, empty store (or a fresh scope), which the harness closes in
// t.Cleanup.
type Harness struct {
	Driver metadata.Driver
	// Open opens another driver on the same store, as another process
	// would; the harness closes it in t.Cleanup.
	Open func(t *testing.T) metadata.Driver
	// Raw writes raw values to the same store.
	Raw RawWriter
	// SessionTTL is the lease TTL the suite asks for: short, so expiry
	// tests are quick (etcd: a couple of seconds).
	SessionTTL time.Duration
	// ExpireSession makes s's lease lapse as if its process had died
	// (keepalives stop, or the lease is revoked behind the session's back).
	// It may return before the store has acted: the suite waits for
	// s.Done() and for the registration to disappear.
	ExpireSession func(t *testing.T, s metadata.Session)
	// DelayGranularity is the step in which the store keeps lost-bookie
	// recovery delays: 0 means to the millisecond (etcd, memory);
	// ZooKeeper keeps whole seconds, as Java reads them, and refuses a
	// delay that is not a multiple.
	DelayGranularity time.Duration
}

// Timeout bounds every wait in the suite; reaching it is a failure, never a
// pacing device.
var Timeout = 30 * time.Second

// Run runs the contract suite. newHarness is called once per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) *Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *Harness)
	}{
		{"LedgerCRUD", testLedgerCRUD},
		{"VersionsIncreaseAcrossRecreate", testVersionsIncrease},
		{"InvalidMetadataIsNotWritten", testInvalidMetadata},
		{"ListLedgers", testListLedgers},
		{"ConcurrentCAS", testConcurrentCAS},
		{"ConcurrentCreateUniqueIDs", testConcurrentCreate},
		{"GenerateLedgerIDAcrossDrivers", testGenerateAcrossDrivers},
		{"CorruptValues", testCorruptValues},
		{"WatchLedger", testWatchLedger},
		{"WatchLedgerCancel", testWatchLedgerCancel},
		{"Registration", testRegistration},
		{"RegistrationConflict", testRegistrationConflict},
		{"BookieServiceInfo", testBookieServiceInfo},
		{"LeaseExpiry", testLeaseExpiry},
		{"WatchBookies", testWatchBookies},
		{"Cookies", testCookies},
		{"Cluster", testCluster},
		{"Format", testFormat},
		// AutoRecovery (autorecovery.go); skipped without AutoRecoveryDriver.
		{"URRecords", testURRecords},
		{"URLocks", testURLocks},
		{"ReplicationSwitch", testReplicationSwitch},
		{"LostBookieDelay", testLostBookieDelay},
		{"AuditorElection", testAuditorElection},
		{"CheckTimes", testCheckTimes},
		{"CorruptCheckTimes", testCorruptCheckTimes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness(t)) })
	}
}

// NewLedgerMetadata returns valid OPEN metadata with ensemble size e over
// bookies 10.0.0.1:3181, 10.0.0.2:3181, ...
func NewLedgerMetadata(e, w, a int) *metadata.LedgerMetadata {
	md := &metadata.LedgerMetadata{
		EnsembleSize: e, WriteQuorum: w, AckQuorum: a,
		State: metadata.LedgerOpen, LastEntryID: -1, Ctime: -1,
		HasPassword: true, DigestType: metadata.DigestCRC32C, Password: []byte("pw"),
		CustomMetadata: map[string][]byte{"application": []byte("metadatatest")},
	}
	seg := metadata.Segment{}
	for i := range e {
		seg.Ensemble = append(seg.Ensemble, metadata.BookieID(fmt.Sprintf("10.0.0.%d:3181", i+1)))
	}
	md.Ensembles = []metadata.Segment{seg}
	return md
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testLedgerCRUD(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	md := NewLedgerMetadata(3, 2, 2)
	id, v1, err := d.CreateLedger(ctx, md)
	must(t, "CreateLedger", err)
	if id < 1 || id > metadata.MaxLedgerID {
		t.Fatalf("CreateLedger: id %d out of range", id)
	}
	got, v, err := d.ReadLedger(ctx, id)
	must(t, "ReadLedger", err)
	if v != v1 || !got.Equal(md) {
		t.Fatalf("ReadLedger: version %d (created %d), metadata %+v", v, v1, got)
	}
	if got.FormatVersion != metadata.CurrentMetadataFormat {
		t.Fatalf("stored format %d", got.FormatVersion)
	}

	_, err = d.CreateLedgerMetadata(ctx, id, md)
	wantErr(t, "CreateLedgerMetadata on an existing id", err, metadata.ErrLedgerExists)

	closed := md.Clone()
	closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 9, 1000
	v2, err := d.WriteLedger(ctx, id, closed, v1)
	must(t, "WriteLedger", err)
	if v2 <= v1 {
		t.Fatalf("WriteLedger: new version %d not above %d", v2, v1)
	}
	_, err = d.WriteLedger(ctx, id, md, v1)
	wantErr(t, "WriteLedger with a stale version", err, metadata.ErrBadVersion)
	got, v, err = d.ReadLedger(ctx, id)
	must(t, "ReadLedger", err)
	if v != v2 || !got.Equal(closed) {
		t.Fatalf("after write: version %d want %d, metadata %+v", v, v2, got)
	}

	err = d.DeleteLedger(ctx, id, v1)
	wantErr(t, "DeleteLedger with a stale version", err, metadata.ErrBadVersion)
	must(t, "DeleteLedger", d.DeleteLedger(ctx, id, v2))
	_, _, err = d.ReadLedger(ctx, id)
	wantErr(t, "ReadLedger after delete", err, metadata.ErrNoSuchLedger)
	wantErr(t, "DeleteLedger twice", d.DeleteLedger(ctx, id, metadata.VersionAny), metadata.ErrNoSuchLedger)
	_, err = d.WriteLedger(ctx, id, md, v2)
	wantErr(t, "WriteLedger of a deleted ledger", err, metadata.ErrNoSuchLedger)

	// A caller-chosen id, and delete with VersionAny.
	const fixed = 5<<56 | 1
	_, err = d.CreateLedgerMetadata(ctx, fixed, md)
	must(t, "CreateLedgerMetadata", err)
	must(t, "DeleteLedger(VersionAny)", d.DeleteLedger(ctx, fixed, metadata.VersionAny))

	for _, bad := range []int64{-1, metadata.MaxLedgerID + 1} {
		_, _, err = d.ReadLedger(ctx, bad)
		wantErr(t, fmt.Sprintf("ReadLedger(%d)", bad), err, metadata.ErrInvalidLedgerID)
		_, err = d.CreateLedgerMetadata(ctx, bad, md)
		wantErr(t, fmt.Sprintf("CreateLedgerMetadata(%d)", bad), err, metadata.ErrInvalidLedgerID)
	}
}

func testVersionsIncrease(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	md := NewLedgerMetadata(1, 1, 1)
	const id = 77
	v1, err := d.CreateLedgerMetadata(ctx, id, md)
	must(t, "create", err)
	must(t, "delete", d.DeleteLedger(ctx, id, v1))
	v2, err := d.CreateLedgerMetadata(ctx, id, md)
	must(t, "re-create", err)
	if v2 <= v1 {
		t.Fatalf("version after re-create %d not above %d: a stale CAS could succeed", v2, v1)
	}
	_, err = d.WriteLedger(ctx, id, md, v1)
	wantErr(t, "WriteLedger with the previous incarnation's version", err, metadata.ErrBadVersion)
}

func testInvalidMetadata(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	good := NewLedgerMetadata(3, 2, 2)
	v, err := d.CreateLedgerMetadata(ctx, 1, good)
	must(t, "create", err)
	bad := []func(md *metadata.LedgerMetadata){
		func(md *metadata.LedgerMetadata) { md.AckQuorum = 3 },
		func(md *metadata.LedgerMetadata) { md.Ensembles = nil },
		func(md *metadata.LedgerMetadata) { md.Ensembles[0].Ensemble = md.Ensembles[0].Ensemble[:2] },
		func(md *metadata.LedgerMetadata) { md.Ensembles[0].Ensemble[0] = "bad id:1" },
		func(md *metadata.LedgerMetadata) { md.HasPassword = false },
		func(md *metadata.LedgerMetadata) {
			md.Ensembles = append(md.Ensembles, metadata.Segment{FirstEntryID: 0, Ensemble: md.Ensembles[0].Ensemble})
		},
	}
	for i, mod := range bad {
		md := good.Clone()
		mod(md)
		_, err := d.WriteLedger(ctx, 1, md, v)
		wantErr(t, fmt.Sprintf("WriteLedger of invalid metadata #%d", i), err, metadata.ErrInvalidMetadata)
		_, _, err = d.CreateLedger(ctx, md)
		wantErr(t, fmt.Sprintf("CreateLedger of invalid metadata #%d", i), err, metadata.ErrInvalidMetadata)
	}
	got, v2, err := d.ReadLedger(ctx, 1)
	must(t, "read", err)
	if v2 != v || !got.Equal(good) {
		t.Fatal("an invalid write changed the stored value")
	}
}

func listAll(t *testing.T, ctx context.Context, d metadata.Driver, page int) []int64 {
	t.Helper()
	var all []int64
	for start := int64(0); ; {
		ids, err := d.ListLedgers(ctx, start, page)
		must(t, "ListLedgers", err)
		if len(ids) == 0 {
			return all
		}
		if len(ids) > page {
			t.Fatalf("ListLedgers returned %d ids, limit %d", len(ids), page)
		}
		all = append(all, ids...)
		start = ids[len(ids)-1] + 1
	}
}

func testListLedgers(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	if ids, err := d.ListLedgers(ctx, 0, 10); err != nil || len(ids) != 0 {
		t.Fatalf("empty store: %v %v", ids, err)
	}
	want := []int64{0, 1, 2, 15, 16, 255, 256, 1 << 40, 5<<56 | 1, 127<<56 | 3, metadata.MaxLedgerID}
	md := NewLedgerMetadata(1, 1, 1)
	for _, i := range []int{4, 0, 9, 2, 7, 1, 10, 3, 8, 5, 6} { // not in order
		_, err := d.CreateLedgerMetadata(ctx, want[i], md)
		must(t, fmt.Sprint("create ", want[i]), err)
	}
	for _, page := range []int{1, 2, 3, 100} {
		if got := listAll(t, ctx, d, page); !slices.Equal(got, want) {
			t.Fatalf("page %d: listed %v, want %v", page, got, want)
		}
	}
	ids, err := d.ListLedgers(ctx, 17, 2)
	must(t, "ListLedgers", err)
	if !slices.Equal(ids, []int64{255, 256}) {
		t.Fatalf("ListLedgers(17, 2) = %v", ids)
	}
}

func testConcurrentCAS(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	drivers := []metadata.Driver{d}
	if h.Open != nil {
		drivers = append(drivers, h.Open(t))
	}
	md := NewLedgerMetadata(3, 3, 2)
	const id, writers, rounds = 42, 8, 10
	_, err := d.CreateLedgerMetadata(ctx, id, md)
	must(t, "create", err)
	for round := range rounds {
		cur, v, err := d.ReadLedger(ctx, id)
		must(t, "read", err)
		var wins, conflicts int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := cur.Clone()
				next.CustomMetadata = map[string][]byte{"writer": []byte(fmt.Sprint(w))}
				_, err := drivers[w%len(drivers)].WriteLedger(ctx, id, next, v)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, metadata.ErrBadVersion):
					conflicts++
				default:
					t.Errorf("round %d writer %d: %v", round, w, err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != writers-1 {
			t.Fatalf("round %d: %d writers won, %d conflicted; want exactly one winner", round, wins, conflicts)
		}
	}
}

func testConcurrentCreate(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	drivers := []metadata.Driver{d}
	if h.Open != nil {
		drivers = append(drivers, h.Open(t))
	}
	const workers, perWorker = 16, 125 // 2000 ledgers
	md := NewLedgerMetadata(1, 1, 1)
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				id, _, err := drivers[w%len(drivers)].CreateLedger(ctx, md)
				if err != nil {
					t.Errorf("worker %d: CreateLedger: %v", w, err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int64]bool{}
	for _, l := range ids {
		for _, id := range l {
			if seen[id] {
				t.Fatalf("ledger id %d handed out twice", id)
			}
			if id < 1 || id > metadata.MaxLedgerID {
				t.Fatalf("ledger id %d out of range", id)
			}
			seen[id] = true
		}
	}
	listed := listAll(t, ctx, d, 500)
	if len(listed) != workers*perWorker {
		t.Fatalf("listed %d ledgers, created %d", len(listed), workers*perWorker)
	}
	for _, id := range listed {
		if !seen[id] {
			t.Fatalf("listed ledger %d was not created", id)
		}
	}
}

func testGenerateAcrossDrivers(t *testing.T, h *Harness) {
	if h.Open == nil {
		t.Skip("driver has no second handle")
	}
	ctx := ctxOf(t)
	drivers := []metadata.Driver{h.Driver, h.Open(t), h.Open(t)}
	seen := map[int64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, d := range drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 300 {
				id, err := d.GenerateLedgerID(ctx)
				if err != nil {
					t.Errorf("GenerateLedgerID: %v", err)
					return
				}
				mu.Lock()
				dup := seen[id]
				seen[id] = true
				mu.Unlock()
				if dup || id < 1 || id > metadata.MaxLedgerID {
					t.Errorf("GenerateLedgerID gave %d (duplicate %v)", id, dup)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func testCorruptValues(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	if h.Raw == nil {
		t.Fatal("the harness has no RawWriter")
	}
	good, err := metadata.SerializeLedgerMetadata(NewLedgerMetadata(3, 2, 2))
	must(t, "serialize", err)
	unsorted := []byte("BookieMetadataFormatVersion\t1\n1\n1\n0\n5\ta:1\n0\tb:1\n")
	cases := map[string][]byte{
		"empty value":          {},
		"garbage":              []byte("\x00\x01garbage"),
		"truncated":            good[:len(good)-7],
		"unknown version":      []byte("BookieMetadataFormatVersion\t9\n" + string(good[len("BookieMetadataFormatVersion\t3\n"):])),
		"unsorted ensembles":   unsorted,
		"header without value": []byte("BookieMetadataFormatVersion\t3\n"),
	}
	id := int64(1000)
	for name, value := range cases {
		id++
		key, err := h.Raw.PutLedgerRaw(ctx, id, value)
		must(t, "PutLedgerRaw", err)
		_, _, err = d.ReadLedger(ctx, id)
		if err == nil || !errors.Is(err, metadata.ErrCorruptMetadata) || errors.Is(err, metadata.ErrNoSuchLedger) {
			t.Errorf("%s: ReadLedger error %v, want ErrCorruptMetadata and not ErrNoSuchLedger", name, err)
			continue
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %q does not name the key %q", name, err, key)
		}
		// A corrupt value is still a ledger: it is listed, and a watch
		// reports the corruption rather than pretending it is absent.
		ids, err := d.ListLedgers(ctx, id, 1)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Errorf("%s: ListLedgers = %v, %v; want [%d]", name, ids, err, id)
		}
		wctx, cancel := context.WithCancel(ctx)
		ch, err := d.WatchLedger(wctx, id)
		switch {
		case err != nil:
			if !errors.Is(err, metadata.ErrCorruptMetadata) {
				t.Errorf("%s: WatchLedger: %v, want ErrCorruptMetadata", name, err)
			}
		default:
			ev := recv(t, ch, "corrupt ledger watch")
			if !errors.Is(ev.Err, metadata.ErrCorruptMetadata) {
				t.Errorf("%s: watch event %+v, want Err ErrCorruptMetadata", name, ev)
			}
		}
		cancel()
		if ch != nil {
			drain(ch)
		}
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return ev
	case <-timer.C:
		t.Fatalf("%s: no event within %v", what, Timeout)
	}
	panic("unreachable")
}

// drain reads ch until the driver closes it (after a cancel).
func drain[T any](ch <-chan T) {
	for range ch {
	}
}

func testWatchLedger(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	_, err := d.WatchLedger(ctx, 12345)
	wantErr(t, "WatchLedger of an absent ledger", err, metadata.ErrNoSuchLedger)

	md := NewLedgerMetadata(2, 2, 1)
	id, v1, err := d.CreateLedger(ctx, md)
	must(t, "create", err)
	ch, err := d.WatchLedger(ctx, id)
	must(t, "WatchLedger", err)
	ev := recv(t, ch, "first watch event")
	if ev.Err != nil || ev.Deleted || ev.Version != v1 || !ev.Metadata.Equal(md) {
		t.Fatalf("first event %+v, want the current value at version %d", ev, v1)
	}

	writer := d
	if h.Open != nil {
		writer = h.Open(t) // the change comes from another process
	}
	rec := md.Clone()
	rec.State = metadata.LedgerInRecovery
	v2, err := writer.WriteLedger(ctx, id, rec, v1)
	must(t, "write", err)
	closed := rec.Clone()
	closed.State, closed.LastEntryID, closed.Length = metadata.LedgerClosed, 3, 40
	v3, err := writer.WriteLedger(ctx, id, closed, v2)
	must(t, "write", err)

	// Intermediate versions may be coalesced; versions only increase and
	// the last state arrives.
	last := v1
	for last != v3 {
		ev := recv(t, ch, "update event")
		if ev.Err != nil || ev.Deleted || ev.Version <= last {
			t.Fatalf("update event %+v after version %d", ev, last)
		}
		switch ev.Version {
		case v2:
			if !ev.Metadata.Equal(rec) {
				t.Fatalf("event at %d: %+v", v2, ev.Metadata)
			}
		case v3:
			if !ev.Metadata.Equal(closed) {
				t.Fatalf("event at %d: %+v", v3, ev.Metadata)
			}
		default:
			t.Fatalf("event at unknown version %d (wrote %d, %d)", ev.Version, v2, v3)
		}
		last = ev.Version
	}
	must(t, "delete", writer.DeleteLedger(ctx, id, v3))
	ev = recv(t, ch, "delete event")
	if !ev.Deleted {
		t.Fatalf("event %+v, want Deleted", ev)
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch channel not closed after Deleted")
	}
}

func testWatchLedgerCancel(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	id, _, err := d.CreateLedger(ctx, NewLedgerMetadata(1, 1, 1))
	must(t, "create", err)
	wctx, cancel := context.WithCancel(ctx)
	ch, err := d.WatchLedger(wctx, id)
	must(t, "WatchLedger", err)
	recv(t, ch, "first event")
	cancel()
	done := make(chan struct{})
	go func() { drain(ch); close(done) }()
	select {
	case <-done:
	case <-time.After(Timeout):
		t.Fatal("watch channel not closed after the context was cancelled")
	}
}

func openSession(t *testing.T, ctx context.Context, d metadata.Driver, ttl time.Duration) metadata.Session {
	t.Helper()
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: ttl})
	must(t, "OpenSession", err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func bookies(t *testing.T, ctx context.Context, d metadata.Driver) (w, ro []metadata.BookieID) {
	t.Helper()
	w, err := d.WritableBookies(ctx)
	must(t, "WritableBookies", err)
	ro, err = d.ReadOnlyBookies(ctx)
	must(t, "ReadOnlyBookies", err)
	return w, ro
}

func wantBookies(t *testing.T, ctx context.Context, d metadata.Driver, w, ro []metadata.BookieID) {
	t.Helper()
	gw, gro := bookies(t, ctx, d)
	if !slices.Equal(gw, w) || !slices.Equal(gro, ro) {
		t.Fatalf("bookies: writable %v read-only %v; want %v and %v", gw, gro, w, ro)
	}
}

func testRegistration(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	wantBookies(t, ctx, d, nil, nil)
	s := openSession(t, ctx, d, h.SessionTTL)
	b1, b2 := metadata.BookieID("127.0.0.1:3182"), metadata.BookieID("127.0.0.1:3181")
	must(t, "register b1", s.RegisterBookie(ctx, b1, false))
	must(t, "register b1 again", s.RegisterBookie(ctx, b1, false))
	must(t, "register b2", s.RegisterBookie(ctx, b2, false))
	wantBookies(t, ctx, d, []metadata.BookieID{b2, b1}, nil)

	// Read-only and back: a bookie is in exactly one set.
	must(t, "register b1 read-only", s.RegisterBookie(ctx, b1, true))
	wantBookies(t, ctx, d, []metadata.BookieID{b2}, []metadata.BookieID{b1})
	must(t, "register b1 writable", s.RegisterBookie(ctx, b1, false))
	wantBookies(t, ctx, d, []metadata.BookieID{b2, b1}, nil)

	must(t, "unregister b2", s.UnregisterBookie(ctx, b2, false))
	must(t, "unregister b2 again", s.UnregisterBookie(ctx, b2, false))
	wantBookies(t, ctx, d, []metadata.BookieID{b1}, nil)

	// Another process sees the same membership.
	if h.Open != nil {
		wantBookies(t, ctx, h.Open(t), []metadata.BookieID{b1}, nil)
	}

	// Closing the session removes what it registered.
	must(t, "close session", s.Close(ctx))
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	wantBookies(t, ctx, d, nil, nil)
	err := s.RegisterBookie(ctx, b1, false)
	wantErr(t, "RegisterBookie on a closed session", err, metadata.ErrSessionExpired)

	if err := openSession(t, ctx, d, h.SessionTTL).RegisterBookie(ctx, "bad id:1", false); err == nil {
		t.Fatal("registered an invalid bookie id")
	}
}

// testBookieServiceInfo: a bookie with a custom id registers with the
// info naming its address; readers resolve the id through it, in either
// mode, and not after it unregistered. A host:port id without info resolves
// to itself (the legacy rule).
func testBookieServiceInfo(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	r, ok := d.(metadata.ServiceInfoReader)
	if !ok {
		t.Fatalf("%T does not implement metadata.ServiceInfoReader", d)
	}
	id := metadata.BookieID("bookie-0")
	info := metadata.BookieServiceInfo{Endpoints: []metadata.BookieEndpoint{
		{ID: metadata.BookieEndpointID, Host: "10.1.2.3", Port: 3181, Protocol: metadata.BookieRPCProtocol},
		{ID: metadata.HTTPServerEndpointID, Host: "10.1.2.3", Port: 8080, Protocol: metadata.HTTPProtocol},
	}, Properties: map[string]string{"rack": "/r1"}}
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: h.SessionTTL, ServiceInfo: &info})
	must(t, "OpenSession", err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	_, err = r.ReadBookieServiceInfo(ctx, id)
	wantErr(t, "service info of an unregistered bookie", err, metadata.ErrNotFound)
	_, err = metadata.ResolveBookie(ctx, d, id)
	wantErr(t, "resolving an unregistered custom id", err, metadata.ErrBookieNotResolved)
	for _, ro := range []bool{false, true} {
		must(t, "register", s.RegisterBookie(ctx, id, ro))
		got, err := r.ReadBookieServiceInfo(ctx, id)
		must(t, "ReadBookieServiceInfo", err)
		if !reflect.DeepEqual(got, info) {
			t.Fatalf("read-only=%v: service info %+v, want %+v", ro, got, info)
		}
		addr, err := metadata.ResolveBookie(ctx, d, id)
		if err != nil || addr != "10.1.2.3:3181" {
			t.Fatalf("read-only=%v: ResolveBookie = %q, %v", ro, addr, err)
		}
	}
	must(t, "unregister", s.UnregisterBookie(ctx, id, true))
	_, err = r.ReadBookieServiceInfo(ctx, id)
	wantErr(t, "service info after unregistering", err, metadata.ErrNotFound)

	legacy := metadata.BookieID("127.0.0.1:3181")
	plain := openSession(t, ctx, d, h.SessionTTL)
	must(t, "register", plain.RegisterBookie(ctx, legacy, false))
	got, err := r.ReadBookieServiceInfo(ctx, legacy)
	must(t, "ReadBookieServiceInfo", err)
	if addr, err := got.BookieAddress(); err != nil || addr != string(legacy) {
		t.Fatalf("legacy registration: %+v (%q, %v)", got, addr, err)
	}
	if addr, err := metadata.ResolveBookie(ctx, d, "10.9.9.9:3181"); err != nil || addr != "10.9.9.9:3181" {
		t.Fatalf("unregistered host:port id resolves to %q, %v", addr, err)
	}
}

func testRegistrationConflict(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	s1 := openSession(t, ctx, d, h.SessionTTL)
	s2 := openSession(t, ctx, d, h.SessionTTL)
	b := metadata.BookieID("127.0.0.1:3181")
	must(t, "register", s1.RegisterBookie(ctx, b, false))
	err := s2.RegisterBookie(ctx, b, false)
	wantErr(t, "a second session registering the same bookie", err, metadata.ErrBookieRegistered)
	wantBookies(t, ctx, d, []metadata.BookieID{b}, nil)
	// Once the first session is gone the id is free.
	must(t, "close", s1.Close(ctx))
	must(t, "register after the first session closed", s2.RegisterBookie(ctx, b, false))
	wantBookies(t, ctx, d, []metadata.BookieID{b}, nil)
}

func testLeaseExpiry(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	observer := d
	if h.Open != nil {
		observer = h.Open(t)
	}
	ch, err := observer.WatchBookies(ctx)
	must(t, "WatchBookies", err)
	recv(t, ch, "first membership")

	s := openSession(t, ctx, d, h.SessionTTL)
	keep := openSession(t, ctx, d, h.SessionTTL)
	b, other := metadata.BookieID("127.0.0.1:3181"), metadata.BookieID("127.0.0.1:3182")
	must(t, "register", s.RegisterBookie(ctx, b, false))
	must(t, "register other", keep.RegisterBookie(ctx, other, true))
	waitMembership(t, ch, []metadata.BookieID{b}, []metadata.BookieID{other})

	h.ExpireSession(t, s)
	waitMembership(t, ch, nil, []metadata.BookieID{other})
	select {
	case <-s.Done():
	case <-time.After(Timeout):
		t.Fatal("session Done not closed after its lease expired")
	}
	wantBookies(t, ctx, observer, nil, []metadata.BookieID{other})
	err = s.RegisterBookie(ctx, b, false)
	wantErr(t, "RegisterBookie on an expired session", err, metadata.ErrSessionExpired)
}

// waitMembership reads events until one shows exactly w and ro.
func waitMembership(t *testing.T, ch <-chan metadata.BookiesEvent, w, ro []metadata.BookieID) {
	t.Helper()
	for {
		ev := recv(t, ch, fmt.Sprintf("membership writable=%v read-only=%v", w, ro))
		if ev.Err != nil {
			t.Fatalf("WatchBookies: %v", ev.Err)
		}
		if slices.Equal(ev.Writable, w) && slices.Equal(ev.ReadOnly, ro) {
			return
		}
	}
}

func testWatchBookies(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	s := openSession(t, ctx, d, h.SessionTTL)
	b1, b2 := metadata.BookieID("10.0.0.1:3181"), metadata.BookieID("10.0.0.2:3181")
	must(t, "register", s.RegisterBookie(ctx, b1, false))

	wctx, cancel := context.WithCancel(ctx)
	ch, err := d.WatchBookies(wctx)
	must(t, "WatchBookies", err)
	ev := recv(t, ch, "first membership")
	if !slices.Equal(ev.Writable, []metadata.BookieID{b1}) || len(ev.ReadOnly) != 0 {
		t.Fatalf("first membership %+v", ev)
	}
	must(t, "join", s.RegisterBookie(ctx, b2, false))
	waitMembership(t, ch, []metadata.BookieID{b1, b2}, nil)
	must(t, "read-only", s.RegisterBookie(ctx, b2, true))
	waitMembership(t, ch, []metadata.BookieID{b1}, []metadata.BookieID{b2})
	must(t, "leave", s.UnregisterBookie(ctx, b1, false))
	waitMembership(t, ch, nil, []metadata.BookieID{b2})
	cancel()
	drain(ch)
}

func testCookies(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	b := metadata.BookieID("127.0.0.1:3181")
	_, _, err := d.ReadCookie(ctx, b)
	wantErr(t, "ReadCookie of an absent cookie", err, metadata.ErrNoSuchCookie)
	_, err = d.WriteCookie(ctx, b, []byte("x"), 5)
	wantErr(t, "CAS WriteCookie of an absent cookie", err, metadata.ErrNoSuchCookie)

	c1 := []byte("5\nbookieHost: \"127.0.0.1:3181\"\n")
	v1, err := d.WriteCookie(ctx, b, c1, metadata.VersionNew)
	must(t, "create cookie", err)
	_, err = d.WriteCookie(ctx, b, c1, metadata.VersionNew)
	wantErr(t, "creating a cookie twice", err, metadata.ErrCookieExists)
	got, v, err := d.ReadCookie(ctx, b)
	must(t, "ReadCookie", err)
	if string(got) != string(c1) || v != v1 {
		t.Fatalf("ReadCookie = %q@%d, want %q@%d", got, v, c1, v1)
	}
	c2 := append(slices.Clone(c1), "instanceId: \"x\"\n"...)
	v2, err := d.WriteCookie(ctx, b, c2, v1)
	must(t, "CAS cookie", err)
	if v2 <= v1 {
		t.Fatalf("cookie version %d not above %d", v2, v1)
	}
	_, err = d.WriteCookie(ctx, b, c1, v1)
	wantErr(t, "stale cookie CAS", err, metadata.ErrBadVersion)

	_, err = d.WriteCookie(ctx, "127.0.0.1:3182", c1, metadata.VersionNew)
	must(t, "second cookie", err)
	ids, err := d.ListCookies(ctx)
	must(t, "ListCookies", err)
	if !slices.Equal(ids, []metadata.BookieID{"127.0.0.1:3181", "127.0.0.1:3182"}) {
		t.Fatalf("ListCookies = %v", ids)
	}

	wantErr(t, "stale cookie delete", d.DeleteCookie(ctx, b, v1), metadata.ErrBadVersion)
	must(t, "delete cookie", d.DeleteCookie(ctx, b, v2))
	wantErr(t, "deleting twice", d.DeleteCookie(ctx, b, metadata.VersionAny), metadata.ErrNoSuchCookie)
	_, _, err = d.ReadCookie(ctx, b)
	wantErr(t, "ReadCookie after delete", err, metadata.ErrNoSuchCookie)
	must(t, "delete any", d.DeleteCookie(ctx, "127.0.0.1:3182", metadata.VersionAny))
}

func testCluster(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	_, err := d.ReadInstanceID(ctx)
	wantErr(t, "ReadInstanceID before init", err, metadata.ErrNoCluster)
	id, err := d.InitNewCluster(ctx)
	must(t, "InitNewCluster", err)
	if len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Fatalf("instance id %q is not a UUID", id)
	}
	_, err = d.InitNewCluster(ctx)
	wantErr(t, "InitNewCluster twice", err, metadata.ErrClusterExists)
	for i := range 2 {
		got, err := d.ReadInstanceID(ctx)
		must(t, "ReadInstanceID", err)
		if got != id {
			t.Fatalf("read %d: instance id %q, init returned %q", i, got, id)
		}
	}
	if h.Open != nil {
		other := h.Open(t)
		got, err := other.ReadInstanceID(ctx)
		must(t, "ReadInstanceID from another driver", err)
		if got != id {
			t.Fatalf("another driver reads instance id %q, want %q", got, id)
		}
		_, err = other.InitNewCluster(ctx)
		wantErr(t, "InitNewCluster from another driver", err, metadata.ErrClusterExists)
	}
	layout, err := d.ReadLayout(ctx)
	must(t, "ReadLayout", err)
	if !strings.HasPrefix(layout, "2\n") {
		t.Fatalf("layout %q", layout)
	}
}

func testFormat(t *testing.T, h *Harness) {
	ctx, d := ctxOf(t), h.Driver
	id1, err := d.Format(ctx, false) // nothing there: same as init
	must(t, "Format of an empty store", err)
	_, err = d.Format(ctx, false)
	wantErr(t, "Format without force", err, metadata.ErrClusterExists)

	lid, _, err := d.CreateLedger(ctx, NewLedgerMetadata(1, 1, 1))
	must(t, "create", err)
	_, err = d.WriteCookie(ctx, "127.0.0.1:3181", []byte("c"), metadata.VersionNew)
	must(t, "cookie", err)
	s := openSession(t, ctx, d, h.SessionTTL)
	must(t, "register", s.RegisterBookie(ctx, "127.0.0.1:3181", true))
	_, err = d.Format(ctx, true)
	wantErr(t, "Format while a bookie is registered", err, metadata.ErrBookiesRegistered)
	if got, _ := d.ReadInstanceID(ctx); got != id1 {
		t.Fatal("a refused Format changed the instance id")
	}
	must(t, "close session", s.Close(ctx))

	id2, err := d.Format(ctx, true)
	must(t, "Format with force", err)
	if id2 == id1 {
		t.Fatal("Format kept the instance id")
	}
	if got, err := d.ReadInstanceID(ctx); err != nil || got != id2 {
		t.Fatalf("ReadInstanceID after format = %q, %v; want %q", got, err, id2)
	}
	_, _, err = d.ReadLedger(ctx, lid)
	wantErr(t, "ReadLedger after format", err, metadata.ErrNoSuchLedger)
	_, _, err = d.ReadCookie(ctx, "127.0.0.1:3181")
	wantErr(t, "ReadCookie after format", err, metadata.ErrNoSuchCookie)
	if ids := listAll(t, ctx, d, 10); len(ids) != 0 {
		t.Fatalf("ledgers after format: %v", ids)
	}
}
