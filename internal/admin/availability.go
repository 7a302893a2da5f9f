package admin

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Availability is the set of entry ids a bookie holds of one ledger, as
// answered to GET_LIST_OF_ENTRIES_OF_LEDGER: sorted, disjoint runs.
type Availability struct {
	Runs []Run
}

// Run is the entries First … Last, inclusive.
type Run struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// AvailabilityOfEntriesOfLedger layout (Java's
// org.apache.bookkeeper.util.AvailabilityOfEntriesOfLedger; spec
// §2.5.8): a 64-byte header (int32 version 0, int32 group count, zeros),
// then 24 bytes per group (int64 firstSequenceStart, int64
// lastSequenceStart, int32 sequenceSize, int32 sequencePeriod). A group is
// the sequences of sequenceSize consecutive entries starting every
// sequencePeriod ids from firstSequenceStart to lastSequenceStart; period 0
// means a single sequence.
const (
	availHeaderSize = 64
	availGroupSize  = 24
	// maxAvailRuns bounds the runs one answer may expand to, so a corrupt
	// or hostile answer cannot exhaust memory.
	maxAvailRuns = 1 << 22
)

// DecodeAvailability decodes an AvailabilityOfEntriesOfLedger.
func DecodeAvailability(b []byte) (Availability, error) {
	var a Availability
	if len(b) < availHeaderSize {
		return a, fmt.Errorf("entry availability: %d bytes, want at least %d", len(b), availHeaderSize)
	}
	if v := int32(binary.BigEndian.Uint32(b)); v != 0 {
		return a, fmt.Errorf("entry availability: unknown version %d", v)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[4:])))
	if n < 0 || int64(len(b)) != availHeaderSize+n*availGroupSize {
		return a, fmt.Errorf("entry availability: %d groups do not fit %d bytes", n, len(b))
	}
	for g := range n {
		p := b[availHeaderSize+g*availGroupSize:]
		first := int64(binary.BigEndian.Uint64(p))
		last := int64(binary.BigEndian.Uint64(p[8:]))
		size := int64(int32(binary.BigEndian.Uint32(p[16:])))
		period := int64(int32(binary.BigEndian.Uint32(p[20:])))
		if first < 0 || last < first || size < 1 || period < 0 || (period == 0 && last != first) || (period > 0 && period < size) {
			return a, fmt.Errorf("entry availability: malformed group %d (%d..%d size %d period %d)", g, first, last, size, period)
		}
		for s := first; s <= last; s += period {
			if len(a.Runs) >= maxAvailRuns {
				return a, fmt.Errorf("entry availability: more than %d runs", maxAvailRuns)
			}
			if k := len(a.Runs); k > 0 && s <= a.Runs[k-1].Last {
				return a, fmt.Errorf("entry availability: groups overlap or are unsorted at entry %d", s)
			}
			a.Runs = append(a.Runs, Run{First: s, Last: s + size - 1})
			if period == 0 {
				break
			}
		}
	}
	return a, nil
}

// Has reports whether entry id is held.
func (a Availability) Has(id int64) bool {
	i, found := slices.BinarySearchFunc(a.Runs, id, func(r Run, id int64) int {
		switch {
		case r.Last < id:
			return -1
		case r.First > id:
			return 1
		}
		return 0
	})
	_ = i
	return found
}

// Count is the number of entries held.
func (a Availability) Count() int64 {
	var n int64
	for _, r := range a.Runs {
		n += r.Last - r.First + 1
	}
	return n
}

// Max is the highest entry held, -1 when none.
func (a Availability) Max() int64 {
	if len(a.Runs) == 0 {
		return -1
	}
	return a.Runs[len(a.Runs)-1].Last
}
