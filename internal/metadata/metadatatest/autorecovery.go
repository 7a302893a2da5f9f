package metadatatest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// The AutoRecovery part of the contract (metadata.AutoRecoveryDriver):
// under-replication records, their locks, the replication switch, the
// lost-bookie recovery delay and the auditor election. A driver without it
// skips these cases.

func arDriver(t *testing.T, d metadata.Driver) metadata.AutoRecoveryDriver {
	t.Helper()
	ar, ok := d.(metadata.AutoRecoveryDriver)
	if !ok {
		t.Skip("driver does not implement metadata.AutoRecoveryDriver")
	}
	return ar
}

func ids(b ...string) []metadata.BookieID {
	out := make([]metadata.BookieID, len(b))
	for i, s := range b {
		out[i] = metadata.BookieID(s)
	}
	return out
}

func testURRecords(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	_, err := ar.ReadUnderReplicatedLedger(ctx, 7)
	wantErr(t, "read absent record", err, metadata.ErrNotFound)
	err = ar.MarkLedgerReplicated(ctx, 7, 1)
	wantErr(t, "clear absent record", err, metadata.ErrNotFound)

	must(t, "mark", ar.MarkLedgerUnderReplicated(ctx, 7, ids("10.0.0.2:3181")))
	r1, err := ar.ReadUnderReplicatedLedger(ctx, 7)
	must(t, "read", err)
	if r1.LedgerID != 7 || !slices.Equal(r1.MissingReplicas, ids("10.0.0.2:3181")) || r1.Version <= 0 {
		t.Fatalf("record %+v", r1)
	}
	// Marking again with nothing new keeps the version.
	must(t, "mark again", ar.MarkLedgerUnderReplicated(ctx, 7, ids("10.0.0.2:3181")))
	r, err := ar.ReadUnderReplicatedLedger(ctx, 7)
	must(t, "read", err)
	if r.Version != r1.Version {
		t.Fatalf("re-marking the same bookie changed the version %d -> %d", r1.Version, r.Version)
	}
	// A new missing bookie merges and bumps the version.
	must(t, "mark another", ar.MarkLedgerUnderReplicated(ctx, 7, ids("10.0.0.1:3181")))
	r2, err := ar.ReadUnderReplicatedLedger(ctx, 7)
	must(t, "read", err)
	if !slices.Equal(r2.MissingReplicas, ids("10.0.0.1:3181", "10.0.0.2:3181")) || r2.Version <= r1.Version {
		t.Fatalf("merged record %+v (first %+v)", r2, r1)
	}
	if r2.Ctime.IsZero() || !r2.Ctime.Equal(r1.Ctime) && r2.Ctime.UnixMilli() != r1.Ctime.UnixMilli() {
		t.Fatalf("ctime changed on merge: %v -> %v", r1.Ctime, r2.Ctime)
	}
	// Clearing with the old version fails, the record stays.
	err = ar.MarkLedgerReplicated(ctx, 7, r1.Version)
	wantErr(t, "clear with a stale version", err, metadata.ErrBadVersion)
	if _, err := ar.ReadUnderReplicatedLedger(ctx, 7); err != nil {
		t.Fatalf("record gone after a failed clear: %v", err)
	}
	must(t, "clear", ar.MarkLedgerReplicated(ctx, 7, r2.Version))
	_, err = ar.ReadUnderReplicatedLedger(ctx, 7)
	wantErr(t, "read cleared record", err, metadata.ErrNotFound)

	// Listing pages in id order.
	want := []int64{1, 2, 5, 1 << 40, 5<<56 | 3}
	for _, id := range slices.Backward(want) {
		must(t, "mark", ar.MarkLedgerUnderReplicated(ctx, id, ids("10.0.0.9:3181")))
	}
	var got []int64
	for start := int64(0); ; {
		page, err := ar.ListUnderReplicatedLedgers(ctx, start, 2)
		must(t, "list", err)
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("page of %d > limit 2", len(page))
		}
		for _, r := range page {
			got = append(got, r.LedgerID)
			if !slices.Equal(r.MissingReplicas, ids("10.0.0.9:3181")) {
				t.Fatalf("listed record %+v", r)
			}
		}
		start = page[len(page)-1].LedgerID + 1
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func testURLocks(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	other := h.Driver
	if h.Open != nil {
		other = h.Open(t)
	}
	ar2 := arDriver(t, other)
	s1 := openSession(t, ctx, h.Driver, h.SessionTTL)
	s2 := openSession(t, ctx, other, h.SessionTTL)
	w1, w2 := metadata.BookieID("10.0.0.1:3181"), metadata.BookieID("10.0.0.2:3181")

	_, err := ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	wantErr(t, "lock without a record", err, metadata.ErrNotFound)
	must(t, "mark", ar.MarkLedgerUnderReplicated(ctx, 3, ids("10.0.0.5:3181")))

	rw, ok := h.Driver.(metadata.ReplicationWorkerReader)
	if !ok {
		t.Fatalf("%T does not implement metadata.ReplicationWorkerReader", h.Driver)
	}
	_, err = rw.ReplicationWorker(ctx, 3)
	wantErr(t, "worker of an unlocked ledger", err, metadata.ErrNotFound)
	l1, err := ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	must(t, "lock", err)
	if got, err := rw.ReplicationWorker(ctx, 3); err != nil || got != w1 {
		t.Fatalf("ReplicationWorker = %q, %v; want %s", got, err, w1)
	}
	_, err = ar2.LockUnderReplicatedLedger(ctx, s2, 3, w2)
	wantErr(t, "second lock from another session", err, metadata.ErrLocked)
	_, err = ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	wantErr(t, "second lock from the same session", err, metadata.ErrLocked)
	select {
	case <-l1.Done():
		t.Fatal("lock Done closed while held")
	default:
	}
	must(t, "unlock", l1.Unlock(ctx))
	must(t, "unlock again", l1.Unlock(ctx))
	recvClosed(t, l1.Done(), "lock Done after Unlock")
	_, err = rw.ReplicationWorker(ctx, 3)
	wantErr(t, "worker after unlock", err, metadata.ErrNotFound)

	// The other session takes it, loses its session: the lock goes with it.
	l2, err := ar2.LockUnderReplicatedLedger(ctx, s2, 3, w2)
	must(t, "lock from the other session", err)
	_, err = ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	wantErr(t, "lock held by the other session", err, metadata.ErrLocked)
	h.ExpireSession(t, s2)
	recvClosed(t, s2.Done(), "session Done after expiry")
	recvClosed(t, l2.Done(), "lock Done after its session expired")
	l3 := eventually(t, "lock after the holder's session expired", func() (metadata.Lock, error) {
		return ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	})
	_, err = ar2.LockUnderReplicatedLedger(ctx, s2, 3, w2)
	if err == nil {
		t.Fatal("lock under an expired session succeeded")
	}

	// Clearing the record releases the lock even on a version mismatch.
	r, err := ar.ReadUnderReplicatedLedger(ctx, 3)
	must(t, "read", err)
	err = ar.MarkLedgerReplicated(ctx, 3, r.Version+1000)
	wantErr(t, "clear with a wrong version", err, metadata.ErrBadVersion)
	recvClosed(t, l3.Done(), "lock Done after MarkLedgerReplicated")
	l4, err := ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	must(t, "lock after a failed clear", err)
	must(t, "clear", ar.MarkLedgerReplicated(ctx, 3, r.Version))
	recvClosed(t, l4.Done(), "lock Done after the record was cleared")
	_, err = ar.LockUnderReplicatedLedger(ctx, s1, 3, w1)
	wantErr(t, "lock after clear", err, metadata.ErrNotFound)
}

func testReplicationSwitch(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	on, err := ar.ReplicationEnabled(ctx)
	must(t, "enabled", err)
	if !on {
		t.Fatal("replication disabled in a fresh store")
	}
	must(t, "disable", ar.SetReplicationEnabled(ctx, false))
	must(t, "disable again", ar.SetReplicationEnabled(ctx, false))
	if on, err := ar.ReplicationEnabled(ctx); err != nil || on {
		t.Fatalf("after disable: %v, %v", on, err)
	}
	must(t, "enable", ar.SetReplicationEnabled(ctx, true))
	if on, err := ar.ReplicationEnabled(ctx); err != nil || !on {
		t.Fatalf("after enable: %v, %v", on, err)
	}
}

func testLostBookieDelay(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	_, err := ar.LostBookieRecoveryDelay(ctx)
	wantErr(t, "delay never set", err, metadata.ErrNotFound)
	err = ar.SetLostBookieRecoveryDelay(ctx, -time.Second)
	if err == nil {
		t.Fatal("negative delay accepted")
	}

	observer := arDriver(t, h.Driver)
	if h.Open != nil {
		observer = arDriver(t, h.Open(t))
	}
	wctx, cancel := context.WithCancel(ctx)
	ch, err := observer.WatchLostBookieRecoveryDelay(wctx)
	must(t, "watch", err)
	if ev := recv(t, ch, "first delay event"); ev.Set || ev.Err != nil {
		t.Fatalf("first event %+v, want not set", ev)
	}
	delays := []time.Duration{0, 60 * time.Second, 250 * time.Millisecond, 250 * time.Millisecond}
	if g := h.DelayGranularity; g > 0 {
		delays = []time.Duration{0, 60 * time.Second, 2 * g, 2 * g}
		if err := ar.SetLostBookieRecoveryDelay(ctx, g+g/4); err == nil {
			t.Fatalf("delay %v accepted by a store that keeps multiples of %v", g+g/4, g)
		}
	}
	for _, d := range delays {
		must(t, "set", ar.SetLostBookieRecoveryDelay(ctx, d))
		got, err := ar.LostBookieRecoveryDelay(ctx)
		if err != nil || got != d {
			t.Fatalf("delay %v, %v after setting %v", got, err, d)
		}
		// Every set is an event, also one repeating the value.
		ev := recv(t, ch, "delay event")
		if ev.Err != nil || !ev.Set || ev.Delay != d {
			t.Fatalf("event %+v after setting %v", ev, d)
		}
	}
	cancel()
	drain(ch)
}

func testAuditorElection(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	_, err := ar.Auditor(ctx)
	wantErr(t, "auditor before any election", err, metadata.ErrNotFound)

	type cand struct {
		id  metadata.BookieID
		ar  metadata.AutoRecoveryDriver
		s   metadata.Session
		won chan metadata.Lock
	}
	var cs []*cand
	for i, id := range ids("10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181") {
		d := h.Driver
		if h.Open != nil && i > 0 {
			d = h.Open(t)
		}
		c := &cand{id: id, ar: arDriver(t, d), s: openSession(t, ctx, d, h.SessionTTL), won: make(chan metadata.Lock, 1)}
		cs = append(cs, c)
	}
	// The first campaigns alone and wins at once.
	l0, err := cs[0].ar.CampaignAuditor(ctx, cs[0].s, cs[0].id)
	must(t, "campaign", err)
	if a, err := ar.Auditor(ctx); err != nil || a != cs[0].id {
		t.Fatalf("auditor %q, %v; want %q", a, err, cs[0].id)
	}
	errs := make(chan error, 2)
	for _, c := range cs[1:] {
		go func() {
			l, err := c.ar.CampaignAuditor(ctx, c.s, c.id)
			if err != nil {
				errs <- err
				return
			}
			c.won <- l
		}()
	}
	// Nobody else wins while the leader holds it.
	time.Sleep(200 * time.Millisecond)
	for _, c := range cs[1:] {
		select {
		case <-c.won:
			t.Fatalf("%s elected while %s leads", c.id, cs[0].id)
		case err := <-errs:
			t.Fatalf("campaign: %v", err)
		default:
		}
	}
	// The leader's session is lost: exactly one other takes over.
	h.ExpireSession(t, cs[0].s)
	recvClosed(t, l0.Done(), "leadership Done after the session expired")
	var next *cand
	var nextLock metadata.Lock
	select {
	case nextLock = <-cs[1].won:
		next = cs[1]
	case nextLock = <-cs[2].won:
		next = cs[2]
	case err := <-errs:
		t.Fatalf("campaign: %v", err)
	case <-time.After(Timeout):
		t.Fatal("no new auditor after the leader's session expired")
	}
	last := cs[1]
	if next == cs[1] {
		last = cs[2]
	}
	select {
	case <-last.won:
		t.Fatal("two auditors at once")
	default:
	}
	eventuallyAuditor(t, ar, next.id)
	// Resigning hands over to the last one.
	must(t, "resign", nextLock.Unlock(ctx))
	recvClosed(t, nextLock.Done(), "leadership Done after resign")
	select {
	case l := <-last.won:
		eventuallyAuditor(t, ar, last.id)
		must(t, "resign", l.Unlock(ctx))
	case err := <-errs:
		t.Fatalf("campaign: %v", err)
	case <-time.After(Timeout):
		t.Fatal("no auditor after resign")
	}
	eventually(t, "no auditor after everyone resigned", func() (struct{}, error) {
		if a, err := ar.Auditor(ctx); !errors.Is(err, metadata.ErrNotFound) {
			return struct{}{}, errors.New("auditor " + string(a))
		}
		return struct{}{}, nil
	})

	// A campaign cancelled while waiting returns the context's error.
	lead, err := cs[1].ar.CampaignAuditor(ctx, cs[1].s, cs[1].id)
	must(t, "campaign", err)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := cs[2].ar.CampaignAuditor(cctx, cs[2].s, cs[2].id); err == nil {
		t.Fatal("second campaign won while the first leads")
	}
	must(t, "resign", lead.Unlock(ctx))
}

func eventuallyAuditor(t *testing.T, ar metadata.AutoRecoveryDriver, want metadata.BookieID) {
	t.Helper()
	eventually(t, "auditor "+string(want), func() (struct{}, error) {
		a, err := ar.Auditor(context.Background())
		if err == nil && a != want {
			err = errors.New("auditor is " + string(a))
		}
		return struct{}{}, err
	})
}

func recvClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Timeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// eventually retries f (every 20 ms) until it succeeds or Timeout passes.
func eventually[T any](t *testing.T, what string, f func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		v, err := f()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// javaCheckTime is 1700000000000 ms as Java's ZooKeeper manager stores a
// check time: a binary *CheckFormat, field 1 as a varint.
var javaCheckTime = []byte{0x08, 0x80, 0xd0, 0x95, 0xff, 0xbc, 0x31}

func wantCheckTime(t *testing.T, ar metadata.AutoRecoveryDriver, check metadata.PeriodicCheck, want time.Time) {
	t.Helper()
	got, err := ar.LastCheckTime(ctxOf(t), check)
	if err != nil {
		t.Fatalf("%s: LastCheckTime: %v", check, err)
	}
	if !got.Equal(want) {
		t.Fatalf("%s: LastCheckTime = %v, want %v", check, got, want)
	}
}

// testCheckTimes: the periodic checks' last completion times are absent
// ("never", the zero Time) until set, kept to the millisecond, independent
// per check, seen by other processes, and overwritten by every set (also
// with an earlier time).
func testCheckTimes(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	other := ar
	if h.Open != nil {
		other = arDriver(t, h.Open(t))
	}
	for _, c := range metadata.PeriodicChecks {
		wantCheckTime(t, ar, c, time.Time{})
	}

	t1 := time.Unix(1_700_000_000, 123_456_789) // sub-millisecond part dropped
	must(t, "set", ar.SetLastCheckTime(ctx, metadata.LedgerCheck, t1))
	wantCheckTime(t, ar, metadata.LedgerCheck, time.UnixMilli(1_700_000_000_123))
	wantCheckTime(t, other, metadata.LedgerCheck, time.UnixMilli(1_700_000_000_123))
	wantCheckTime(t, ar, metadata.PlacementPolicyCheck, time.Time{})
	wantCheckTime(t, ar, metadata.ReplicasCheck, time.Time{})

	// Overwrite, also backwards (a set is not a max).
	t2 := time.UnixMilli(1_600_000_000_000)
	must(t, "overwrite", other.SetLastCheckTime(ctx, metadata.LedgerCheck, t2))
	wantCheckTime(t, ar, metadata.LedgerCheck, t2)
	t3 := time.UnixMilli(1_800_000_000_001)
	must(t, "set placement", ar.SetLastCheckTime(ctx, metadata.PlacementPolicyCheck, t3))
	must(t, "set replicas", ar.SetLastCheckTime(ctx, metadata.ReplicasCheck, time.UnixMilli(0)))
	wantCheckTime(t, ar, metadata.LedgerCheck, t2)
	wantCheckTime(t, other, metadata.PlacementPolicyCheck, t3)
	wantCheckTime(t, other, metadata.ReplicasCheck, time.UnixMilli(0))

	// "Never" cannot be stored, nor a time before 1970; the old value stays.
	for _, bad := range []time.Time{{}, time.UnixMilli(-1)} {
		if err := ar.SetLastCheckTime(ctx, metadata.LedgerCheck, bad); err == nil {
			t.Fatalf("SetLastCheckTime(%v) succeeded", bad)
		}
	}
	wantCheckTime(t, ar, metadata.LedgerCheck, t2)
	for _, c := range []metadata.PeriodicCheck{0, 99} {
		if err := ar.SetLastCheckTime(ctx, c, t1); err == nil {
			t.Fatalf("SetLastCheckTime(%v) succeeded", c)
		}
		if _, err := ar.LastCheckTime(ctx, c); err == nil {
			t.Fatalf("LastCheckTime(%v) succeeded", c)
		}
	}
}

// testCorruptCheckTimes: Java's bytes read back; a value that does not
// parse as the check's format is ErrCorruptMetadata naming the key, never
// the zero Time ("never", which would make an auditor run the check at
// once forever); a set repairs it.
func testCorruptCheckTimes(t *testing.T, h *Harness) {
	ctx := ctxOf(t)
	ar := arDriver(t, h.Driver)
	raw, ok := h.Raw.(CheckTimeRawWriter)
	if !ok {
		t.Fatal("the harness's Raw does not implement CheckTimeRawWriter")
	}
	for _, c := range metadata.PeriodicChecks {
		_, err := raw.PutCheckTimeRaw(ctx, c, javaCheckTime)
		must(t, "PutCheckTimeRaw", err)
		wantCheckTime(t, ar, c, time.UnixMilli(1_700_000_000_000))
	}
	cases := map[string][]byte{
		"empty value (no time field)": {},
		"garbage":                     []byte("\xff\xfe garbage"),
		"decimal text":                []byte("1700000000000"),
		"TextFormat":                  []byte("checkAllLedgersCTime: 1700000000000"),
		"truncated varint":            javaCheckTime[:4],
		"unknown field only":          {0x10, 0x01},
		"time plus unknown field":     append(append([]byte{}, javaCheckTime...), 0x10, 0x01),
		"wrong wire type":             {0x0a, 0x01, 0x00},
		"negative time":               {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, value := range cases {
		for _, c := range metadata.PeriodicChecks {
			key, err := raw.PutCheckTimeRaw(ctx, c, value)
			must(t, "PutCheckTimeRaw", err)
			got, err := ar.LastCheckTime(ctx, c)
			if err == nil || !errors.Is(err, metadata.ErrCorruptMetadata) {
				t.Errorf("%s, %s: LastCheckTime = %v, %v; want ErrCorruptMetadata", name, c, got, err)
				continue
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("%s, %s: error %q does not name the key %q", name, c, err, key)
			}
		}
	}
	want := time.UnixMilli(1_700_000_000_042)
	must(t, "set over a corrupt value", ar.SetLastCheckTime(ctx, metadata.LedgerCheck, want))
	wantCheckTime(t, ar, metadata.LedgerCheck, want)
}
