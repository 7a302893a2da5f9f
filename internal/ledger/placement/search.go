package placement

import (
	"math/rand/v2"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// searchBudget bounds the nodes one placement search visits. Real
// topologies are found on the first path (the preference order is the
// greedy choice); the bound only stops a proof that no ensemble exists
// from running long on a large topology with many distinct locations, and
// the search then reports failure as if none existed.
const searchBudget = 50_000

// search fills the empty ("") positions of ens, in index order, with
// bookies from cands (distinct, none already in ens) so that every write
// set of quorum qw whose members are all placed satisfies ok. Bookies with
// the same class are interchangeable for ok and pref, so one bookie per
// class is tried at each position. Classes are tried in increasing pref
// (ties in random order), so the first ensemble found is the greedy one;
// on a dead end it backtracks. It reports false when no filling exists
// (or the budget ran out). ens is filled in place only on success.
func search(rnd *rand.Rand, ens []metadata.BookieID, qw int, cands []metadata.BookieID,
	class func(metadata.BookieID) string,
	ok func(members []metadata.BookieID) bool,
	pref func(ens []metadata.BookieID, idx int, b metadata.BookieID) int,
) bool {
	cur := slices.Clone(ens)
	var holes []int
	for i, b := range cur {
		if b == "" {
			holes = append(holes, i)
		}
	}
	pool := slices.Clone(cands)
	rnd.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	used := map[metadata.BookieID]bool{}
	budget := searchBudget
	members := make([]metadata.BookieID, 0, qw)
	// setsOK checks the complete write sets containing idx.
	setsOK := func(idx int) bool {
		e := len(cur)
		for d := range qw {
			s := idx - d
			members = members[:0]
			complete := true
			for k := range qw {
				b := cur[((s+k)%e+e)%e]
				if b == "" {
					complete = false
					break
				}
				members = append(members, b)
			}
			if complete && !ok(members) {
				return false
			}
		}
		return true
	}
	var dfs func(h int) bool
	dfs = func(h int) bool {
		if h == len(holes) {
			return true
		}
		if budget--; budget < 0 {
			return false
		}
		idx := holes[h]
		// One representative per class, in preference order.
		type opt struct {
			b metadata.BookieID
			p int
		}
		var opts []opt
		seen := map[string]bool{}
		for _, b := range pool {
			if used[b] {
				continue
			}
			c := class(b)
			if seen[c] {
				continue
			}
			seen[c] = true
			p := 0
			if pref != nil {
				p = pref(cur, idx, b)
			}
			opts = append(opts, opt{b, p})
		}
		slices.SortStableFunc(opts, func(a, b opt) int { return a.p - b.p })
		for _, o := range opts {
			cur[idx] = o.b
			used[o.b] = true
			if setsOK(idx) && dfs(h+1) {
				return true
			}
			used[o.b] = false
			cur[idx] = ""
		}
		return false
	}
	if !dfs(0) {
		return false
	}
	copy(ens, cur)
	return true
}

// writeSetsOf calls f with the members of each of the E distinct write sets
// of ensemble (entries 0..E-1), stopping when f returns false.
func writeSetsOf(ensemble []metadata.BookieID, qw int, f func(members []metadata.BookieID) bool) bool {
	e := len(ensemble)
	members := make([]metadata.BookieID, 0, qw)
	for s := range e {
		members = members[:0]
		for k := range qw {
			members = append(members, ensemble[(s+k)%e])
		}
		if !f(members) {
			return false
		}
	}
	return true
}

// nearSame counts the placed positions within distance qw-1 of idx (so
// sharing a write set with it) whose key equals key(b).
func nearSame(ens []metadata.BookieID, idx, qw int, b metadata.BookieID, key func(metadata.BookieID) string) int {
	e := len(ens)
	k := key(b)
	n := 0
	seen := map[int]bool{idx: true}
	for d := 1; d < qw; d++ {
		for _, j := range []int{((idx+d)%e + e) % e, ((idx-d)%e + e) % e} {
			if seen[j] {
				continue
			}
			seen[j] = true
			if ens[j] != "" && key(ens[j]) == k {
				n++
			}
		}
	}
	return n
}

// pathParts splits a network location "/a/b" into its two levels; ok is
// false when it has not exactly two non-empty levels.
func pathParts(loc string) (a, b string, ok bool) {
	if len(loc) < 2 || loc[0] != '/' {
		return "", "", false
	}
	rest := loc[1:]
	for i := range len(rest) {
		if rest[i] == '/' {
			a, b = rest[:i], rest[i+1:]
			if a == "" || b == "" {
				return "", "", false
			}
			for j := range len(b) {
				if b[j] == '/' {
					return "", "", false
				}
			}
			return a, b, true
		}
	}
	return "", "", false
}

// countDistinct is the number of distinct keys of bs.
func countDistinct(bs []metadata.BookieID, key func(metadata.BookieID) string) int {
	seen := map[string]bool{}
	for _, b := range bs {
		seen[key(b)] = true
	}
	return len(seen)
}
