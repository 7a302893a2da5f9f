package rereplication

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/wire"
)

// fakeBookies stores digested entries per bookie and records each read.
type fakeBookies struct {
	dig *digest.Digester
	id  int64

	mu     sync.Mutex
	stored map[metadata.BookieID]map[int64][]byte
	errs   map[metadata.BookieID]map[int64]error // answers instead of the entry
	reads  map[metadata.BookieID][]int64
}

func newFakeBookies(t *testing.T, id int64) *fakeBookies {
	dig, err := digest.New(digest.CRC32C, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return &fakeBookies{dig: dig, id: id, stored: map[metadata.BookieID]map[int64][]byte{},
		errs: map[metadata.BookieID]map[int64]error{}, reads: map[metadata.BookieID][]int64{}}
}

// write stores entries [first, last] on the write-set members of m's
// segment holding them, by an independent reckoning of spec §1.2: entry e
// goes to indexes (e + j) mod E for j < Qw.
func (f *fakeBookies) write(m *metadata.LedgerMetadata, first, last int64) {
	for e := first; e <= last; e++ {
		seg := m.Ensembles[m.SegmentIndex(e)]
		for j := range m.WriteQuorum {
			b := seg.Ensemble[(int(e)+j)%m.EnsembleSize]
			if f.stored[b] == nil {
				f.stored[b] = map[int64][]byte{}
			}
			f.stored[b][e] = f.dig.AppendEntry(nil, f.id, e, e-1, 0, []byte("payload"))
		}
	}
}

func (f *fakeBookies) fail(b metadata.BookieID, e int64, err error) {
	if f.errs[b] == nil {
		f.errs[b] = map[int64]error{}
	}
	f.errs[b][e] = err
}

func (f *fakeBookies) ReadStoredEntry(ctx context.Context, b metadata.BookieID, id, e int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[b] = append(f.reads[b], e)
	if err := f.errs[b][e]; err != nil {
		return nil, err
	}
	if id != f.id {
		return nil, wire.ErrNoSuchLedger
	}
	body, ok := f.stored[b][e]
	if !ok {
		return nil, wire.ErrNoSuchEntry
	}
	return slices.Clone(body), nil
}

func (f *fakeBookies) readsOf(b metadata.BookieID) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.reads[b])
	slices.Sort(out)
	return out
}

func (f *fakeBookies) resetReads() {
	f.mu.Lock()
	clear(f.reads)
	f.mu.Unlock()
}

// held is the oracle: the entries of [first, last] index idx stores.
func held(m *metadata.LedgerMetadata, idx int, first, last int64) []int64 {
	var out []int64
	for e := first; e <= last; e++ {
		for j := range m.WriteQuorum {
			if (int(e)+j)%m.EnsembleSize == idx {
				out = append(out, e)
			}
		}
	}
	return out
}

func closedLedger(e, w, a int, last int64, segKeys ...int64) *metadata.LedgerMetadata {
	m := metadatatest.NewLedgerMetadata(e, w, a)
	for k, key := range segKeys {
		if k == 0 {
			continue
		}
		seg := metadata.Segment{FirstEntryID: key}
		for i := range e {
			seg.Ensemble = append(seg.Ensemble, metadata.BookieID(fmt.Sprintf("10.0.%d.%d:3181", k, i+1)))
		}
		m.Ensembles = append(m.Ensembles, seg)
	}
	m.State, m.LastEntryID, m.Length = metadata.LedgerClosed, last, 7*(last+1)
	return m
}

func mustCheck(t *testing.T, c *LedgerChecker, r CheckRequest) []CheckedFragment {
	t.Helper()
	frags, err := c.Check(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return frags
}

func badOf(frags []CheckedFragment) [][]int {
	var out [][]int
	for _, f := range frags {
		out = append(out, f.Bad)
	}
	return out
}

// With E > Qw each bookie holds only the entries whose write sets name it:
// with 100% the check reads exactly those, with 0% exactly the first and
// the last of them, per segment.
func TestCheckerEntriesPerBookie(t *testing.T) {
	m := closedLedger(3, 2, 2, 12, 0, 7) // segments [0,6], [7,12]
	fb := newFakeBookies(t, 5)
	fb.write(m, 0, 12)
	for _, pct := range []int{100, 0} {
		fb.resetReads()
		c := &LedgerChecker{Reader: fb, Percentage: pct, Concurrency: 3}
		frags := mustCheck(t, c, CheckRequest{LedgerID: 5, Metadata: m})
		if len(frags) != 2 || frags[0].First != 0 || frags[0].Last != 6 || frags[1].First != 7 || frags[1].Last != 12 || !frags[0].Closed || !frags[1].Closed {
			t.Fatalf("fragments %+v", frags)
		}
		if bad := BadBookies(frags); len(bad) != 0 {
			t.Fatalf("%d%%: bad %v on intact bookies", pct, bad)
		}
		for fi, f := range frags {
			for i, b := range f.Ensemble {
				want := held(m, i, f.First, f.Last)
				if pct == 0 {
					want = []int64{want[0], want[len(want)-1]}
				}
				if got := fb.readsOf(b); !slices.Equal(got, want) {
					t.Errorf("%d%%: fragment %d bookie %d (%s) read %v, want %v", pct, fi, i, b, got, want)
				}
			}
		}
	}
}

// Sampling reads the first, the last and k = n·pct/100 evenly spread
// entries of the n a bookie holds, each one it holds, none twice.
func TestCheckerSampling(t *testing.T) {
	m := closedLedger(3, 2, 2, 299, 0) // each bookie holds 200 entries
	fb := newFakeBookies(t, 5)
	fb.write(m, 0, 299)
	for _, pct := range []int{1, 10, 50, 99, 100} {
		fb.resetReads()
		r := rand.New(rand.NewPCG(uint64(pct), 7))
		c := &LedgerChecker{Reader: fb, Percentage: pct, Rand: r.Int64N}
		if bad := BadBookies(mustCheck(t, c, CheckRequest{LedgerID: 5, Metadata: m})); len(bad) != 0 {
			t.Fatalf("bad %v", bad)
		}
		for i, b := range m.Ensembles[0].Ensemble {
			all := held(m, i, 0, 299)
			got := fb.readsOf(b)
			k := len(all) * pct / 100
			if len(got) < k || len(got) > min(k+2, len(all)) {
				t.Errorf("%d%%: bookie %d read %d entries, want %d..%d", pct, i, len(got), k, k+2)
			}
			if got[0] != all[0] || got[len(got)-1] != all[len(all)-1] {
				t.Errorf("%d%%: bookie %d read %d..%d, want its first and last %d..%d", pct, i, got[0], got[len(got)-1], all[0], all[len(all)-1])
			}
			if len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Errorf("%d%%: bookie %d read an entry twice", pct, i)
			}
			for _, e := range got {
				if !slices.Contains(all, e) {
					t.Errorf("%d%%: bookie %d read entry %d it does not hold", pct, i, e)
				}
			}
		}
	}
}

// Any failed read makes the bookie bad in that fragment: a missing last
// entry, a corrupt body, an I/O error; an unavailable bookie is bad without
// a read; a bookie with nothing to hold in a fragment is good if available.
func TestCheckerBadBookies(t *testing.T) {
	m := closedLedger(3, 2, 2, 9, 0, 9) // segments [0,8] and [9,9]
	b := func(seg, i int) metadata.BookieID { return m.Ensembles[seg].Ensemble[i] }
	t.Run("missing last entry", func(t *testing.T) {
		fb := newFakeBookies(t, 5)
		fb.write(m, 0, 9)
		// Index 1 of segment 0 holds 0,1,3,4,6,7: lose 7.
		delete(fb.stored[b(0, 1)], 7)
		frags := mustCheck(t, &LedgerChecker{Reader: fb}, CheckRequest{LedgerID: 5, Metadata: m})
		if got := badOf(frags); !slices.Equal(got[0], []int{1}) || len(got[1]) != 0 {
			t.Fatalf("bad %v, want [[1] []]", got)
		}
	})
	t.Run("corrupt and failing", func(t *testing.T) {
		fb := newFakeBookies(t, 5)
		fb.write(m, 0, 9)
		fb.stored[b(0, 0)][0][40] ^= 1                                   // first entry of index 0: payload flipped
		fb.fail(b(0, 2), 8, errors.New("read timed out"))                // last of index 2
		fb.stored[b(1, 0)][9] = fb.dig.AppendEntry(nil, 5, 8, 7, 0, nil) // another entry's body
		frags := mustCheck(t, &LedgerChecker{Reader: fb}, CheckRequest{LedgerID: 5, Metadata: m})
		if got := badOf(frags); !slices.Equal(got[0], []int{0, 2}) || !slices.Equal(got[1], []int{0}) {
			t.Fatalf("bad %v, want [[0 2] [0]]", got)
		}
	})
	t.Run("unavailable", func(t *testing.T) {
		fb := newFakeBookies(t, 5)
		fb.write(m, 0, 9)
		// Segment 1 holds only entry 9, on indexes 0 and 1: index 2 holds
		// nothing; unavailable it is still bad (spec §6.4), available
		// it is good without a read.
		down := []metadata.BookieID{b(0, 1), b(1, 2)}
		frags := mustCheck(t, &LedgerChecker{Reader: fb}, CheckRequest{LedgerID: 5, Metadata: m,
			Available: func(x metadata.BookieID) bool { return !slices.Contains(down, x) }})
		if got := badOf(frags); !slices.Equal(got[0], []int{1}) || !slices.Equal(got[1], []int{2}) {
			t.Fatalf("bad %v, want [[1] [2]]", got)
		}
		for _, x := range down {
			if r := fb.readsOf(x); len(r) != 0 {
				t.Fatalf("unavailable %s was read: %v", x, r)
			}
		}
	})
	t.Run("only some bookies", func(t *testing.T) {
		fb := newFakeBookies(t, 5)
		fb.write(m, 0, 9)
		delete(fb.stored[b(0, 1)], 7)
		delete(fb.stored[b(0, 2)], 8)
		frags := mustCheck(t, &LedgerChecker{Reader: fb}, CheckRequest{LedgerID: 5, Metadata: m, Bookies: []metadata.BookieID{b(0, 2)}})
		if got := badOf(frags); !slices.Equal(got[0], []int{2}) || len(got[1]) != 0 {
			t.Fatalf("bad %v, want [[2] []]", got)
		}
		if r := fb.readsOf(b(0, 1)); len(r) != 0 {
			t.Fatalf("a bookie outside the request was read: %v", r)
		}
	})
}

// An OPEN ledger whose LAC is below its last segment's key: entry key is
// probed on its write set; the segment is skipped only if every member
// answers an explicit negative.
func TestCheckerOpenLedgerProbe(t *testing.T) {
	m := closedLedger(3, 2, 2, 0, 0, 10) // segments at 0 and 10
	m.State, m.LastEntryID, m.Length = metadata.LedgerOpen, -1, 0
	seg := m.Ensembles[1].Ensemble
	ws := []metadata.BookieID{seg[10%3], seg[(10+1)%3]} // entry 10's write set
	lac := int64(9)
	for _, tc := range []struct {
		name    string
		answers []error // of ws[0], ws[1] for entry 10; nil: the entry
		last    bool    // the last segment is checked
		bad     []int
	}{
		{"all explicit negatives", []error{wire.ErrNoSuchEntry, wire.ErrNoSuchLedger}, false, nil},
		{"one timeout", []error{wire.ErrNoSuchEntry, errors.New("timed out")}, true, []int{1, 2}},
		{"one holds it", []error{nil, wire.ErrNoSuchEntry}, true, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBookies(t, 5)
			fb.write(m, 0, 9)
			for k, err := range tc.answers {
				if err == nil {
					fb.stored[ws[k]] = map[int64][]byte{10: fb.dig.AppendEntry(nil, 5, 10, 9, 0, nil)}
				} else {
					fb.fail(ws[k], 10, err)
				}
			}
			frags := mustCheck(t, &LedgerChecker{Reader: fb}, CheckRequest{LedgerID: 5, Metadata: m, LAC: lac})
			if !frags[0].Closed || frags[0].First != 0 || frags[0].Last != 9 || len(frags[0].Bad) != 0 {
				t.Fatalf("first fragment %+v", frags[0])
			}
			if !tc.last {
				if len(frags) != 1 {
					t.Fatalf("fragments %+v, want the last segment skipped", frags)
				}
				return
			}
			if len(frags) != 2 || frags[1].Closed || frags[1].First != 10 || frags[1].Last != 10 {
				t.Fatalf("fragments %+v, want the open fragment [10, 10]", frags)
			}
			if !slices.Equal(frags[1].Bad, tc.bad) {
				t.Fatalf("bad %v, want %v", frags[1].Bad, tc.bad)
			}
		})
	}
	// A LAC at or past the key bounds the last fragment; no probe.
	fb := newFakeBookies(t, 5)
	fb.write(m, 0, 12)
	frags := mustCheck(t, &LedgerChecker{Reader: fb}, CheckRequest{LedgerID: 5, Metadata: m, LAC: 12})
	if len(frags) != 2 || frags[1].Closed || frags[1].First != 10 || frags[1].Last != 12 || len(BadBookies(frags)) != 0 {
		t.Fatalf("fragments %+v", frags)
	}
}

// A cancelled check is an error, not a verdict.
func TestCheckerCancelled(t *testing.T) {
	m := closedLedger(3, 2, 2, 99, 0)
	fb := newFakeBookies(t, 5)
	fb.write(m, 0, 99)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&LedgerChecker{Reader: fb, Percentage: 100}).Check(ctx, CheckRequest{LedgerID: 5, Metadata: m}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}
