// Package quorum holds the write-set and coverage arithmetic of BookKeeper's
// round-robin distribution schedule (spec/protocol.md §1.2, §4.3, §4.4): which
// bookie indexes of an ensemble store an entry, when enough bookies have
// answered that no ack quorum could still form, and how many explicit
// negatives prove an entry absent. It is pure arithmetic over ensemble
// indexes; callers map indexes to bookies.
//
// Notation: E = ensemble size, Qw = write quorum, Qa = ack quorum, with
// E ≥ Qw ≥ Qa ≥ 1. Functions panic on arguments outside that range: they are
// programmer errors, since metadata.Validate rejects such ledgers.
package quorum

import "fmt"

// Params are a ledger's quorum sizes.
type Params struct {
	EnsembleSize int // E
	WriteQuorum  int // Qw
	AckQuorum    int // Qa
}

// Validate reports sizes outside E ≥ Qw ≥ Qa ≥ 1: the check for sizes that
// come from a user or a store (metadata.Validate applies the same rule to a
// ledger's metadata).
func (p Params) Validate() error {
	if p.AckQuorum < 1 || p.WriteQuorum < p.AckQuorum || p.EnsembleSize < p.WriteQuorum {
		return fmt.Errorf("quorum: invalid sizes E=%d Qw=%d Qa=%d: want E ≥ Qw ≥ Qa ≥ 1", p.EnsembleSize, p.WriteQuorum, p.AckQuorum)
	}
	return nil
}

// Check panics unless Validate passes: an assertion for sizes a caller has
// already validated, not a check of configuration.
func (p Params) Check() {
	if err := p.Validate(); err != nil {
		panic(err.Error())
	}
}

// WriteSetIndex returns the bookie index at position i (0 ≤ i < Qw) of entry
// entryID's write set: (entryID + i) mod E, computed in 64 bits (Java casts
// to int first, which breaks for ids ≥ 2^31). entryID must be ≥ 0.
func (p Params) WriteSetIndex(entryID int64, i int) int {
	return int((uint64(entryID)%uint64(p.EnsembleSize) + uint64(i)) % uint64(p.EnsembleSize))
}

// AppendWriteSet appends the Qw bookie indexes of entryID's write set to dst,
// in write-set order, and returns the extended slice.
func (p Params) AppendWriteSet(dst []int, entryID int64) []int {
	for i := range p.WriteQuorum {
		dst = append(dst, p.WriteSetIndex(entryID, i))
	}
	return dst
}

// WriteSet returns entryID's write set as a new slice.
func (p Params) WriteSet(entryID int64) []int {
	return p.AppendWriteSet(make([]int, 0, p.WriteQuorum), entryID)
}

// WriteSetPosition returns the position of bookie index idx in entryID's
// write set, or -1 if the bookie at idx does not store entryID.
func (p Params) WriteSetPosition(entryID int64, idx int) int {
	first := int(uint64(entryID) % uint64(p.EnsembleSize))
	pos := (idx - first + p.EnsembleSize) % p.EnsembleSize
	if pos < p.WriteQuorum {
		return pos
	}
	return -1
}

// NegativeThreshold is Qw − Qa + 1: the number of explicit negatives
// (NoSuchEntry/NoSuchLedger) from one write set that prove its entry was
// never acknowledged, because at most Qa − 1 of its members can then hold it
// (spec §4.4). It is also the number of answers each write set needs for
// coverage.
func (p Params) NegativeThreshold() int { return p.WriteQuorum - p.AckQuorum + 1 }

// Coverage tracks which bookies of one ensemble have answered a request sent
// to all of them (a LAC read, a fence) and decides the coverage rule of spec
// §4.3: every one of the E write sets has fewer than Qa members whose answer
// is unknown, i.e. at least Qw − Qa + 1 known members. Once it holds, no ack
// quorum of any write set can form without one of the answering bookies.
//
// A known answer is an OK or an explicit negative; errors and missing replies
// are unknown and never count (an off-by-one here once made recovery succeed
// wrongly: f373cb5976).
type Coverage struct {
	p     Params
	known []bool // by bookie index
}

// NewCoverage returns a Coverage with no answers known.
func NewCoverage(p Params) *Coverage {
	p.Check()
	return &Coverage{p: p, known: make([]bool, p.EnsembleSize)}
}

// Know records that the bookie at index idx gave a known answer.
func (c *Coverage) Know(idx int) { c.known[idx] = true }

// Known reports whether the bookie at index idx gave a known answer.
func (c *Coverage) Known(idx int) bool { return c.known[idx] }

// Covered reports whether the coverage rule holds.
func (c *Coverage) Covered() bool { return Covered(c.p, c.known) }

// Covered reports whether known (by bookie index, length E) satisfies the
// coverage rule: in each write set W_i = {i, …, i+Qw−1 mod E} fewer than Qa
// members are unknown.
func Covered(p Params, known []bool) bool {
	for first := range p.EnsembleSize {
		unknown := 0
		for i := range p.WriteQuorum {
			if !known[(first+i)%p.EnsembleSize] {
				unknown++
			}
		}
		if unknown >= p.AckQuorum {
			return false
		}
	}
	return true
}
