package index

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func open(t testing.TB, fs vfs.FS) *Index {
	t.Helper()
	x, err := Open(fs, "index", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func loc(l, e int64) Location {
	return Location{LogID: uint64(l%7 + 1), Offset: 32 + e%1000*100, Size: uint32(e%50 + 1)}
}

func put(t testing.TB, x *Index, l int64, entries ...int64) {
	t.Helper()
	ps := make([]Placement, 0, len(entries))
	for _, e := range entries {
		ps = append(ps, Placement{LedgerID: l, EntryID: e, Loc: loc(l, e)})
	}
	if err := x.PutLocations(ps); err != nil {
		t.Fatal(err)
	}
}

func lastEntry(t *testing.T, x *Index, l int64) (int64, bool) {
	t.Helper()
	e, got, err := x.LastEntry(l)
	if errors.Is(err, ErrNoEntry) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != loc(l, e) {
		t.Fatalf("ledger %d entry %d: location %v, want %v", l, e, got, loc(l, e))
	}
	return e, true
}

func TestPutGetLastEntry(t *testing.T) {
	x := open(t, vfs.NewMem())
	defer x.Close()
	put(t, x, 10, 0, 1, 2, 300, 7)
	put(t, x, 11, 0, 5000) // the next ledger must never be seen as 10's
	put(t, x, 9, 1<<40)
	put(t, x, 13, 4)
	for _, c := range []struct {
		l    int64
		last int64
		ok   bool
	}{{10, 300, true}, {11, 5000, true}, {9, 1 << 40, true}, {12, 0, false}, {8, 0, false}, {14, 0, false}} {
		got, ok := lastEntry(t, x, c.l)
		if ok != c.ok || got != c.last {
			t.Fatalf("LastEntry(%d) = %d, %v; want %d, %v", c.l, got, ok, c.last, c.ok)
		}
	}
	got, err := x.Get(10, 7)
	if err != nil || got != loc(10, 7) {
		t.Fatalf("Get(10, 7) = %v, %v", got, err)
	}
	if _, err := x.Get(10, 8); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("Get of a missing entry: %v", err)
	}
	var ids []int64
	if err := x.Entries(10, 2, func(e int64, l Location) bool {
		if l != loc(10, e) {
			t.Fatalf("entry %d: wrong location", e)
		}
		ids = append(ids, e)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != 2 || ids[1] != 7 || ids[2] != 300 {
		t.Fatalf("Entries(10, from 2) = %v", ids)
	}
	if _, err := x.Get(-1, 0); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("negative id: %v", err)
	}
}

func TestExtremeIDs(t *testing.T) {
	x := open(t, vfs.NewMem())
	defer x.Close()
	const maxID = math.MaxInt64
	put(t, x, 0, 0)
	put(t, x, 1, 3)
	put(t, x, maxID, 0, maxID-1, maxID)
	put(t, x, maxID-1, 9)
	for _, c := range [][2]int64{{0, 0}, {1, 3}, {maxID, maxID}, {maxID - 1, 9}} {
		if got, ok := lastEntry(t, x, c[0]); !ok || got != c[1] {
			t.Fatalf("LastEntry(%d) = %d, %v; want %d", c[0], got, ok, c[1])
		}
	}
	n := 0
	if err := x.Entries(maxID, 0, func(int64, Location) bool { n++; return true }); err != nil || n != 3 {
		t.Fatalf("Entries(max) = %d, %v", n, err)
	}
	if err := x.DeleteLedger(maxID); err != nil {
		t.Fatal(err)
	}
	if _, ok := lastEntry(t, x, maxID); ok {
		t.Fatal("entries of the deleted last ledger remain")
	}
	if got, ok := lastEntry(t, x, maxID-1); !ok || got != 9 {
		t.Fatal("deleting ledger max touched ledger max-1")
	}
	if err := x.DeleteLedger(0); err != nil {
		t.Fatal(err)
	}
	if got, ok := lastEntry(t, x, 1); !ok || got != 3 {
		t.Fatal("deleting ledger 0 touched ledger 1")
	}
}

func TestStateAndDelete(t *testing.T) {
	mem := vfs.NewCrashableMem()
	x := open(t, mem)
	key := bytes.Repeat([]byte{0xab}, 20)
	if _, err := x.LedgerState(1); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("state of an unknown ledger: %v", err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(x.PutState(1, State{MasterKey: key, ExplicitLAC: []byte("lac-body")}))
	must(x.PutState(2, State{MasterKey: key, Fenced: true, ExplicitLAC: []byte{}}))
	must(x.PutState(3, State{MasterKey: key}))
	put(t, x, 1, 0, 1, 2)
	put(t, x, 2, 0, 1)
	put(t, x, 3, 0)
	st, err := x.LedgerState(1)
	must(err)
	if !bytes.Equal(st.MasterKey, key) || string(st.ExplicitLAC) != "lac-body" || st.Fenced || st.Deleted {
		t.Fatalf("state 1 = %+v", st)
	}
	st, err = x.LedgerState(2)
	must(err)
	if !st.Fenced || st.ExplicitLAC == nil || len(st.ExplicitLAC) != 0 {
		t.Fatalf("state 2 = %+v (an empty explicit LAC is not absent)", st)
	}

	must(x.DeleteLedger(1)) // unfenced: forgotten
	must(x.DeleteLedger(2)) // fenced: remembered as fenced
	must(x.DeleteLedger(99))
	if _, err := x.LedgerState(1); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("deleted unfenced ledger: %v", err)
	}
	if _, ok := lastEntry(t, x, 2); ok {
		t.Fatal("entries of the deleted ledger remain")
	}
	var ids []int64
	must(x.Ledgers(func(l int64, st State) bool { ids = append(ids, l); return true }))
	if len(ids) != 2 || ids[0] != 2 || ids[1] != 3 {
		t.Fatalf("Ledgers = %v", ids)
	}
	must(x.Sync())

	// Fenced-and-deleted survives a crash (after Sync) and a reopen.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	must(x.Close())
	for _, fs := range []vfs.FS{crashed, mem} {
		y := open(t, fs)
		st, err := y.LedgerState(2)
		must(err)
		if !st.Fenced || !st.Deleted || !bytes.Equal(st.MasterKey, key) || st.ExplicitLAC != nil {
			t.Fatalf("fenced-and-deleted after reopen: %+v", st)
		}
		if _, ok := lastEntry(t, y, 2); ok {
			t.Fatal("deleted entries came back")
		}
		if got, ok := lastEntry(t, y, 3); !ok || got != 0 {
			t.Fatal("ledger 3 lost")
		}
		must(y.Close())
	}
}

func TestCorruptValueNamesKey(t *testing.T) {
	x := open(t, vfs.NewMem())
	defer x.Close()
	put(t, x, 42, 0, 1)
	if err := x.db.Set(entryKey(42, 1), []byte("garbage"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := x.db.Set(stateKey(42), []byte{1, 0, 0, 0, 1, 2, 3, 4}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	check := func(err error, want string) {
		t.Helper()
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNoEntry) || errors.Is(err, ErrNoLedger) {
			t.Fatalf("got %v, want a CorruptionError", err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not name %q", err, want)
		}
	}
	_, err := x.Get(42, 1)
	check(err, "ledger 42 entry 1")
	_, _, err = x.LastEntry(42)
	check(err, "ledger 42 entry 1")
	check(x.Entries(42, 0, func(int64, Location) bool { return true }), "ledger 42 entry 1")
	_, err = x.LedgerState(42)
	check(err, "state of ledger 42")
	check(x.Ledgers(func(int64, State) bool { return true }), "state of ledger 42")
	if _, err := x.Get(42, 0); err != nil {
		t.Fatalf("intact neighbour: %v", err)
	}
}

// TestDurability: writes are not synced per put; Sync makes everything
// before it survive a crash, however much unsynced data the crash keeps.
func TestDurability(t *testing.T) {
	for seed := uint64(0); seed < 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		mem := vfs.NewCrashableMem()
		x := open(t, mem)
		for e := int64(0); e < 100; e++ {
			put(t, x, 5, e)
		}
		if err := x.PutState(5, State{MasterKey: []byte("k"), Fenced: true}); err != nil {
			t.Fatal(err)
		}
		if err := x.Sync(); err != nil {
			t.Fatal(err)
		}
		put(t, x, 5, 100, 101)
		put(t, x, 6, 0)

		// Nothing unsynced survives a crash that keeps no unsynced data.
		none := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		some := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
		x.Close()
		for i, fs := range []vfs.FS{none, some} {
			y := open(t, fs)
			for e := int64(0); e < 100; e++ {
				if got, err := y.Get(5, e); err != nil || got != loc(5, e) {
					t.Fatalf("seed %d: synced entry %d lost: %v", seed, e, err)
				}
			}
			if st, err := y.LedgerState(5); err != nil || !st.Fenced {
				t.Fatalf("seed %d: synced fence lost: %+v %v", seed, st, err)
			}
			if i == 0 {
				if _, err := y.Get(6, 0); !errors.Is(err, ErrNoEntry) {
					t.Fatalf("seed %d: an unsynced put survived a crash keeping nothing unsynced: %v", seed, err)
				}
			}
			y.Close()
		}
	}
}

func TestRelocate(t *testing.T) {
	x := open(t, vfs.NewMem())
	defer x.Close()
	put(t, x, 1, 0, 1, 2)
	moved := Location{LogID: 100, Offset: 32, Size: loc(1, 0).Size}
	rs := []Relocation{
		{LedgerID: 1, EntryID: 0, Old: loc(1, 0), New: moved},                               // applies
		{LedgerID: 1, EntryID: 1, Old: Location{LogID: 99, Offset: 1, Size: 1}, New: moved}, // stale: index moved on
		{LedgerID: 7, EntryID: 0, Old: loc(7, 0), New: moved},                               // deleted ledger: not resurrected
	}
	n, err := x.Relocate(rs)
	if err != nil || n != 1 {
		t.Fatalf("Relocate = %d, %v", n, err)
	}
	if got, _ := x.Get(1, 0); got != moved {
		t.Fatalf("entry 0 at %v", got)
	}
	if got, _ := x.Get(1, 1); got != loc(1, 1) {
		t.Fatalf("entry 1 moved to %v", got)
	}
	if _, err := x.Get(7, 0); !errors.Is(err, ErrNoEntry) {
		t.Fatal("relocation resurrected a deleted entry")
	}
	if n, err := x.Relocate(nil); err != nil || n != 0 {
		t.Fatalf("empty Relocate = %d, %v", n, err)
	}
}

// TestStampAndMustExist: a stamp survives a reopen; MustExist refuses a
// missing directory without creating it, and a directory without a
// database.
func TestStampAndMustExist(t *testing.T) {
	fs := vfs.NewMem()
	if _, err := Open(fs, "index", Options{MustExist: true}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("MustExist on a missing directory: %v", err)
	}
	if _, err := fs.Stat("index"); err == nil {
		t.Fatal("a refused MustExist open created the directory")
	}
	if ok, err := Exists(fs, "index"); ok || err != nil {
		t.Fatalf("Exists on a missing directory: %v %v", ok, err)
	}
	if err := fs.MkdirAll("index", 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(fs, "index"); ok || err != nil {
		t.Fatalf("Exists on an empty directory: %v %v", ok, err)
	}
	if _, err := Open(fs, "index", Options{MustExist: true}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("MustExist on an empty directory: %v", err)
	}
	x := open(t, fs)
	if ok, err := Exists(fs, "index"); !ok || err != nil {
		t.Fatalf("Exists on an open index: %v %v", ok, err)
	}
	if _, ok, err := x.Stamp(); ok || err != nil {
		t.Fatalf("new index has a stamp: %v %v", ok, err)
	}
	st := Stamp{StoreID: [16]byte{9: 7}, Shard: 2, Shards: 4}
	if err := x.SetStamp(Stamp{Shards: 1}); err == nil {
		t.Fatal("zero store id accepted")
	}
	if err := x.SetStamp(st); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x, err := Open(fs, "index", Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if got, ok, err := x.Stamp(); !ok || err != nil || got != st {
		t.Fatalf("stamp after reopen: %+v %v %v", got, ok, err)
	}
}

// TestStampIsSynced: SetStamp is durable when it returns (the ledger store
// records the store id elsewhere only after it).
func TestStampIsSynced(t *testing.T) {
	mem := vfs.NewCrashableMem()
	x := open(t, mem)
	st := Stamp{StoreID: [16]byte{1}, Shard: 0, Shards: 1}
	if err := x.SetStamp(st); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	x.Close()
	y, err := Open(crashed, "index", Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if got, ok, err := y.Stamp(); !ok || err != nil || got != st {
		t.Fatalf("stamp after a crash: %+v %v %v", got, ok, err)
	}
}
