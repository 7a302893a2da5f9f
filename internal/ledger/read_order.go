package ledger

import (
	"cmp"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/metadata"
)

// Speculation is the speculative-read schedule of a Read or BatchRead
// (Java's DefaultSpeculativeRequestExecutionPolicy): the first Tick comes
// First after the start, and each later one the previous interval times
// Multiplier, capped at Max. First zero: no speculative reads. Max below
// First, or Multiplier ≤ 1: every interval is First (the constant
// schedule of Java's defaults, where first = max = speculativeReadTimeout).
type Speculation struct {
	First, Max time.Duration
	Multiplier float64
}

// next returns the interval after cur: cur times Multiplier, at least
// cur + 1ns (a multiplier just above 1 makes no progress on a small
// interval after rounding), at most Max (also when the product would
// overflow). It is monotone and reaches Max. cur ≤ 0 (no speculation) stays.
func (s Speculation) next(cur time.Duration) time.Duration {
	if cur <= 0 || s.Max <= cur || s.Multiplier <= 1 {
		return cur
	}
	f := float64(cur) * s.Multiplier
	if f >= float64(s.Max) {
		return s.Max
	}
	return min(max(time.Duration(f), cur+1), s.Max)
}

// readOrder returns the replicas of entry id in the order a read asks
// them. With sticky ≥ 0 (Java's stickyReadsEnabled; the shell sets it only
// when E == Qw, so every bookie of the ensemble stores every entry) it is
// the write set of index sticky: the sticky bookie first, then the next
// ones in ensemble order; avoid is not applied, so that reads stay on one
// bookie until it fails (the shell then moves sticky on). Otherwise it is
// the entry's write set, with the bookies avoid reports moved to the end
// (stable).
func readOrder(q quorum.Params, ensemble []metadata.BookieID, id int64, sticky int, avoid func(metadata.BookieID) bool) []metadata.BookieID {
	var out []metadata.BookieID
	if sticky >= 0 && q.EnsembleSize == q.WriteQuorum {
		for _, idx := range q.WriteSet(int64(sticky % q.EnsembleSize)) {
			out = append(out, ensemble[idx])
		}
		return out
	}
	for _, idx := range q.WriteSet(id) {
		out = append(out, ensemble[idx])
	}
	if avoid != nil {
		slices.SortStableFunc(out, func(a, b metadata.BookieID) int {
			return cmp.Compare(b2i(avoid(a)), b2i(avoid(b)))
		})
	}
	return out
}

// stickyIndex is readOrder's sticky argument: index when on, -1 when off.
func stickyIndex(on bool, index int) int {
	if !on {
		return -1
	}
	return max(index, 0)
}
