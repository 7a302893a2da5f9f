package placement

import (
	"math/rand/v2"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// searchBudget bounds the nodes one placement search visits, and
// searchRestarts how many times a search that ran out of budget is retried
// from a fresh random order before giving up, so the worst case of a
// placement is a few thousand cheap nodes (milliseconds), whatever the
// topology. Real topologies are found on the first path (the preference
// order is the greedy choice); the symmetry reduction (interchangeable
// classes, fresh classes of a group), the partial write-set checks and the
// policies' counting bounds prove most impossible requests at once.
const (
	searchBudget   = 2048
	searchRestarts = 3
)

// searchResult is the outcome of a search.
type searchResult int

const (
	found      searchResult = iota
	impossible              // the search proved no filling exists
	exhausted               // the budget ran out first: nothing proved
)

// searchSpec describes a placement search.
type searchSpec struct {
	qw int
	// class: bookies of one class are interchangeable for ok and pref.
	class func(metadata.BookieID) string
	// group (nil: none): classes of one group that no member of the
	// ensemble uses are interchangeable too (ok and pref compare classes
	// only for equality), so only the one with the most bookies left is
	// tried. Without it every class is a choice at every node: only
	// single-hole searches (replacements, one node) may leave it nil.
	group func(metadata.BookieID) string
	// ok reports whether members, a write set with missing members not
	// placed yet, can still satisfy the constraint (exactly, when missing
	// is 0; optimistically otherwise).
	ok func(members []metadata.BookieID, missing int) bool
	// pref orders the choices at index idx (lower first); nil: random.
	pref func(ens []metadata.BookieID, idx int, b metadata.BookieID) int
}

// search fills the empty ("") positions of ens, in index order, with
// bookies from cands (distinct, none already in ens) so that every write
// set of quorum sp.qw satisfies sp.ok. Choices are tried in increasing
// pref (ties in random order), so the first ensemble found is the greedy
// one; on a dead end it backtracks. ens is filled in place only when the
// result is found. steps is the number of nodes visited.
func search(rnd *rand.Rand, ens []metadata.BookieID, cands []metadata.BookieID, sp searchSpec) (res searchResult, steps int) {
	for range searchRestarts {
		r, n := searchOnce(rnd, ens, cands, sp)
		steps += n
		if r != exhausted {
			return r, steps
		}
	}
	return exhausted, steps
}

func searchOnce(rnd *rand.Rand, ens []metadata.BookieID, cands []metadata.BookieID, sp searchSpec) (searchResult, int) {
	cur := slices.Clone(ens)
	var holes []int
	for i, b := range cur {
		if b == "" {
			holes = append(holes, i)
		}
	}
	// Classes in random order, each with its bookies in random order.
	type class struct {
		members []metadata.BookieID
		next    int // members[:next] are placed
		inUse   int // members of cur in the class
		group   int
	}
	pool := slices.Clone(cands)
	rnd.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	var classes []*class
	byName := map[string]*class{}
	groups := map[string]int{}
	for _, b := range pool {
		name := sp.class(b)
		c := byName[name]
		if c == nil {
			c = &class{group: -1}
			if sp.group != nil {
				g, ok := groups[sp.group(b)]
				if !ok {
					g = len(groups)
					groups[sp.group(b)] = g
				}
				c.group = g
			}
			byName[name] = c
			classes = append(classes, c)
		}
		c.members = append(c.members, b)
	}
	for _, b := range cur {
		if c := byName[sp.class(b)]; b != "" && c != nil {
			c.inUse++
		}
	}
	steps, out := 0, false
	members := make([]metadata.BookieID, 0, sp.qw)
	// setsOK checks the write sets containing idx, complete or not.
	setsOK := func(idx int) bool {
		e := len(cur)
		for d := range sp.qw {
			s := idx - d
			members = members[:0]
			missing := 0
			for k := range sp.qw {
				if b := cur[((s+k)%e+e)%e]; b == "" {
					missing++
				} else {
					members = append(members, b)
				}
			}
			if !sp.ok(members, missing) {
				return false
			}
		}
		return true
	}
	type opt struct {
		c *class
		p int
	}
	fresh := make([]*class, len(groups))
	var dfs func(h int) bool
	dfs = func(h int) bool {
		if h == len(holes) {
			return true
		}
		if steps++; steps > searchBudget {
			out = true
			return false
		}
		idx := holes[h]
		var opts []opt
		clear(fresh)
		for _, c := range classes {
			left := len(c.members) - c.next
			switch {
			case left == 0:
			case c.group >= 0 && c.inUse == 0:
				if f := fresh[c.group]; f == nil || len(f.members)-f.next < left {
					fresh[c.group] = c
				}
			default:
				opts = append(opts, opt{c: c})
			}
		}
		for _, c := range fresh {
			if c != nil {
				opts = append(opts, opt{c: c})
			}
		}
		if sp.pref != nil {
			for i := range opts {
				opts[i].p = sp.pref(cur, idx, opts[i].c.members[opts[i].c.next])
			}
			slices.SortStableFunc(opts, func(a, b opt) int { return a.p - b.p })
		}
		for _, o := range opts {
			c := o.c
			cur[idx] = c.members[c.next]
			c.next++
			c.inUse++
			if setsOK(idx) && dfs(h+1) {
				return true
			}
			if out {
				return false
			}
			c.next--
			c.inUse--
			cur[idx] = ""
		}
		return false
	}
	if !dfs(0) {
		if out {
			return exhausted, steps
		}
		return impossible, steps
	}
	copy(ens, cur)
	return found, steps
}

// spanBound reports whether an ensemble of size e with write quorum qw can
// give every write set need distinct keys, by counting: a member is in qw
// write sets (all e when e ≤ qw), so key k is in at most
// min(e, qw·avail(k)) of them, and the e write sets need need·e.
func spanBound(e, qw, need int, cands []metadata.BookieID, key func(metadata.BookieID) string) bool {
	avail := map[string]int{}
	for _, b := range cands {
		avail[key(b)]++
	}
	total := 0
	for _, n := range avail {
		total += min(e, min(qw, e)*n)
	}
	return total >= need*e
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
	count := func(j int) {
		if ens[j] != "" && key(ens[j]) == k {
			n++
		}
	}
	if 2*(qw-1) >= e-1 {
		for j := range e {
			if j != idx {
				count(j)
			}
		}
		return n
	}
	for d := 1; d < qw; d++ {
		count((idx + d) % e)
		count(((idx-d)%e + e) % e)
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
