package rereplication

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// The ledger checker (spec/protocol.md §6.4, BookKeeper's LedgerChecker):
// which bookies of a ledger's fragments do not hold, readable and intact,
// the entries the write sets put on them. The auditor's periodic check of
// all ledgers marks what it finds under-replicated; the replication worker
// re-checks before it replaces a bookie that is still registered.
//
// It only reads (READ_ENTRY without fencing), so it never disturbs a
// writer. What it calls bad is a bookie that should hold an entry and did
// not return it intact: replacing such a bookie copies from the others and
// never from it.

// DefaultCheckConcurrency bounds the entry reads in flight of one
// LedgerChecker.Check.
const DefaultCheckConcurrency = 16

// EntryReader reads one stored entry from one bookie. *Bookies implements
// it over the network. The returned body is the caller's. A bookie's
// explicit "no such entry" or "no such ledger" is wire.ErrNoSuchEntry or
// wire.ErrNoSuchLedger (matched with errors.Is).
type EntryReader interface {
	ReadStoredEntry(ctx context.Context, bookie metadata.BookieID, ledgerID, entryID int64) ([]byte, error)
}

// LedgerChecker checks a ledger's fragments on their bookies. Its fields
// are read-only once it is in use; it is then safe for concurrent use.
type LedgerChecker struct {
	// Reader reads the entries (required).
	Reader EntryReader
	// Percentage (0..100) of each bookie's entries in a fragment that are
	// read besides its first and last
	// (auditorLedgerVerificationPercentage); 0 reads only the first and
	// the last, 100 reads all.
	Percentage int
	// Concurrency bounds the reads in flight per Check; ≤ 0 means
	// DefaultCheckConcurrency.
	Concurrency int
	// Rand returns a uniform value in [0, n) for sampling; nil uses
	// math/rand/v2 (safe for concurrent use). Tests pass a seeded one.
	Rand func(n int64) int64
}

// CheckRequest is one ledger to check.
type CheckRequest struct {
	LedgerID int64
	Metadata *metadata.LedgerMetadata
	// LAC is the ledger's last add confirmed as its bookies report it
	// (Bookies.ReadLAC). It bounds the last segment of a ledger that is not
	// closed, and is ignored for a closed one.
	LAC int64
	// Available reports whether a bookie is registered (writable or
	// read-only); an unavailable bookie is bad without a read. Nil: all
	// are available.
	Available func(metadata.BookieID) bool
	// Bookies, if not nil, limits the check to these bookies: others are
	// neither read nor reported.
	Bookies []metadata.BookieID
}

// CheckedFragment is one fragment and the verdict on its bookies.
type CheckedFragment struct {
	Fragment
	// Closed: the range is final (the ledger is closed, or this is not the
	// last segment), so the fragment can be re-replicated. The last
	// fragment of a ledger that is not closed ends at the LAC and may grow.
	Closed bool
	// Bad are the ensemble indexes of the bad bookies, ascending.
	Bad []int
}

// BadBookies returns the distinct bookies that are bad in some fragment,
// ascending.
func BadBookies(frags []CheckedFragment) []metadata.BookieID {
	var out []metadata.BookieID
	for _, f := range frags {
		for _, i := range f.Bad {
			out = append(out, f.Ensemble[i])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Fragments returns the fragments the checker looks at, without I/O except
// for the probe of spec §6.4: one per segment, [key, nextKey-1]; the last
// one [key, LastEntryID] for a closed ledger and [key, lac] otherwise. When
// a ledger is not closed and lac < key, lac says nothing about the last
// segment: entry key is probed on its write set, and the segment is left
// out only if every reply is an explicit NoSuchEntry/NoSuchLedger; any
// other reply (an entry, an error, a timeout) means it may exist, and the
// fragment is [key, key].
func (c *LedgerChecker) Fragments(ctx context.Context, id int64, m *metadata.LedgerMetadata, lac int64) ([]CheckedFragment, error) {
	var out []CheckedFragment
	for _, f := range ClosedFragments(m) {
		out = append(out, CheckedFragment{Fragment: f, Closed: true})
	}
	if m.IsClosed() {
		return out, nil
	}
	last := len(m.Ensembles) - 1
	seg := m.Ensembles[last]
	f := Fragment{Segment: last, First: seg.FirstEntryID, Last: lac, Ensemble: seg.Ensemble}
	if lac < seg.FirstEntryID {
		exists, err := c.mayExist(ctx, id, m, seg)
		if err != nil {
			return nil, err
		}
		if !exists {
			return out, nil
		}
		f.Last = seg.FirstEntryID
	}
	return append(out, CheckedFragment{Fragment: f}), nil
}

// mayExist probes the first entry of segment seg on its write set: false
// only if every member answers an explicit negative.
func (c *LedgerChecker) mayExist(ctx context.Context, id int64, m *metadata.LedgerMetadata, seg metadata.Segment) (bool, error) {
	p := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}
	ws := p.WriteSet(seg.FirstEntryID)
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for k, i := range ws {
		wg.Go(func() {
			_, errs[k] = c.Reader.ReadStoredEntry(ctx, seg.Ensemble[i], id, seg.FirstEntryID)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	for _, err := range errs {
		if !isExplicitNegative(err) {
			return true, nil
		}
	}
	return false, nil
}

func isExplicitNegative(err error) bool {
	return errors.Is(err, wire.ErrNoSuchEntry) || errors.Is(err, wire.ErrNoSuchLedger)
}

// Check returns every fragment of the ledger (see Fragments) with its bad
// bookies: an unavailable bookie is bad; an available one is bad if a read
// of an entry it should hold (its first and last in the fragment and a
// Percentage sample between) fails in any way: an error, an explicit "no
// such entry", a body that is not that entry (digest or id mismatch;
// verified with the ledger's password when the metadata has it, otherwise
// only its ledger and entry ids). A bookie that should hold no entry of a
// fragment is bad only if unavailable. After its first failure a bookie is
// read no more in that fragment.
//
// The error is only ctx's, or one about the metadata (an unknown digest
// type): a bookie's failure is a verdict, not an error.
func (c *LedgerChecker) Check(ctx context.Context, r CheckRequest) ([]CheckedFragment, error) {
	m := r.Metadata
	var dig *digest.Digester
	if m.HasPassword {
		var err error
		if dig, err = digest.New(digest.Type(m.DigestType), m.Password); err != nil {
			return nil, fmt.Errorf("ledger %d: %w", r.LedgerID, err)
		}
	}
	frags, err := c.Fragments(ctx, r.LedgerID, m, r.LAC)
	if err != nil {
		return nil, err
	}
	p := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}

	type job struct {
		frag, idx int
		entry     int64
	}
	var mu sync.Mutex
	bad := make([]map[int]bool, len(frags)) // guarded by mu
	markBad := func(f, i int) {
		mu.Lock()
		if bad[f] == nil {
			bad[f] = map[int]bool{}
		}
		bad[f][i] = true
		mu.Unlock()
	}
	isBad := func(f, i int) bool {
		mu.Lock()
		defer mu.Unlock()
		return bad[f][i]
	}

	jobs := make(chan job)
	workers := c.Concurrency
	if workers <= 0 {
		workers = DefaultCheckConcurrency
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				if isBad(j.frag, j.idx) {
					continue
				}
				b := frags[j.frag].Ensemble[j.idx]
				body, err := c.Reader.ReadStoredEntry(ctx, b, r.LedgerID, j.entry)
				if err == nil {
					err = verifyStored(dig, body, r.LedgerID, j.entry)
				}
				if err != nil && ctx.Err() == nil {
					markBad(j.frag, j.idx)
				}
			}
		})
	}
	// The producer: entries are generated lazily, so memory stays bounded
	// whatever the fragment's length.
produce:
	for fi, f := range frags {
		for i, b := range f.Ensemble {
			if r.Bookies != nil && !slices.Contains(r.Bookies, b) {
				continue
			}
			if r.Available != nil && !r.Available(b) {
				markBad(fi, i)
				continue
			}
			for e := range c.entriesToRead(p, i, f.First, f.Last) {
				if isBad(fi, i) {
					break
				}
				select {
				case jobs <- job{fi, i, e}:
				case <-ctx.Done():
					break produce
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for fi := range frags {
		for i := range bad[fi] {
			frags[fi].Bad = append(frags[fi].Bad, i)
		}
		slices.Sort(frags[fi].Bad)
	}
	return frags, nil
}

// verifyStored checks that body is entry (id, e): its digest when dig is
// not nil, else its header's ids.
func verifyStored(dig *digest.Digester, body []byte, id, e int64) error {
	if dig != nil {
		_, err := dig.VerifyEntry(body, id, e)
		return err
	}
	lid, eid, _, _, err := digest.ParseEntryHeader(body)
	if err != nil {
		return err
	}
	if lid != id || eid != e {
		return fmt.Errorf("stored body is ledger %d entry %d, want ledger %d entry %d", lid, eid, id, e)
	}
	return nil
}

// entriesToRead yields, ascending, the entries of [first, last] that bookie
// index idx should hold (write-set membership, spec §1.2) and that the
// check reads: the first and the last it holds and, with Percentage > 0, a
// sample of the rest: its n held entries are cut into k = n·Percentage/100
// buckets of equal rank length and one random entry is taken from each
// (BookKeeper's even spread); k ≥ n reads them all.
func (c *LedgerChecker) entriesToRead(p quorum.Params, idx int, first, last int64) func(yield func(int64) bool) {
	return func(yield func(int64) bool) {
		if last < first {
			return
		}
		held := func(e int64) bool { return p.WriteSetPosition(e, idx) >= 0 }
		// A bookie holds one entry of every E consecutive ones at least
		// (Qw ≥ 1), so both ends are found within E steps.
		lo, hi := int64(-1), int64(-1)
		for e := first; e <= last && e < first+int64(p.EnsembleSize); e++ {
			if held(e) {
				lo = e
				break
			}
		}
		if lo < 0 {
			return
		}
		for e := last; e >= lo && e > last-int64(p.EnsembleSize); e-- {
			if held(e) {
				hi = e
				break
			}
		}
		pct := min(max(c.Percentage, 0), 100)
		if pct == 0 || hi-lo < 2 {
			if yield(lo) && hi != lo {
				yield(hi)
			}
			return
		}
		var n int64
		for e := lo; e <= hi; e++ {
			if held(e) {
				n++
			}
		}
		k := n * int64(pct) / 100
		all := k >= n
		var bucket, pick int64 = -1, -1 // rank length of a bucket, current pick
		if !all && k > 0 {
			bucket = n / k
		}
		rank := int64(-1)
		for e := lo; e <= hi; e++ {
			if !held(e) {
				continue
			}
			rank++
			take := all || e == lo || e == hi
			if !take && bucket > 0 && rank < k*bucket {
				if rank%bucket == 0 {
					pick = rank + c.randN(bucket)
				}
				take = rank == pick
			}
			if take && !yield(e) {
				return
			}
		}
	}
}

func (c *LedgerChecker) randN(n int64) int64 {
	if c.Rand != nil {
		return c.Rand(n)
	}
	return rand.Int64N(n)
}
