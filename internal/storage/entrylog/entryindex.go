package entrylog

// entryIndex maps an entry's key to its position in a write-cache
// generation's entries.
//
// It replaces a map[entryKey]int, which cost a bookie 8 % of its CPU with
// 100-byte entries: a 64 MiB generation then holds ~400k keys, and every
// add probed a map far larger than the CPU caches. A bookie receives each
// ledger's entries nearly in order (all of them, or two of every three for
// E3 Qw2), so each ledger keeps a dense window of positions indexed by
// entryID - base: an add is one small map lookup (the ledgers written at
// once, usually the same as the last add's) and a slice store. Keys that do
// not fit the window (an entry far before or after the ledger's others, a
// negative id) go to an ordinary map, so any key works, just slower.
type entryIndex struct {
	ledgers map[int64]*ledgerPositions
	spill   map[entryKey]int // keys outside their ledger's window; nil until needed

	lastID int64 // the ledger looked up last, a one-entry cache
	last   *ledgerPositions
}

// ledgerPositions is one ledger's window: pos[i] holds 1 + the position of
// entry base+i, 0 if absent.
type ledgerPositions struct {
	base int64
	pos  []int32
}

// maxWindowGap bounds how many empty slots an entry may skip past a
// ledger's window and still extend it (further, it goes to the spill map).
// A bookie in an ensemble of E with write quorum Qw skips E-Qw slots
// between its stripes, so 7 keeps the windows dense for E - Qw ≤ 7 (E9
// Qw2, E10 Qw3, ...); wider stripes spill every other entry to the map,
// which is correct, only slower. The bound is
// what keeps the window within the entryOverheadBytes charged per entry
// even for sparse ids spaced just inside it: an entry adds at most
// maxWindowGap+1 = 8 four-byte slots (32 B), and append's growth at most
// doubles a slice's capacity over its length, so a window's backing array
// is at most 64 B per entry it holds.
const maxWindowGap = 7

func newEntryIndex() entryIndex {
	return entryIndex{ledgers: make(map[int64]*ledgerPositions)}
}

// get returns the position of k. It only reads x (the one-entry cache is
// written by set alone), so an index no longer written to, a frozen
// generation's, may be read without the writer's lock.
func (x *entryIndex) get(k entryKey) (int, bool) {
	lp := x.last
	if lp == nil || x.lastID != k.ledgerID {
		lp = x.ledgers[k.ledgerID]
	}
	if lp != nil {
		if off := k.entryID - lp.base; off >= 0 && off < int64(len(lp.pos)) && lp.pos[off] != 0 {
			return int(lp.pos[off]) - 1, true
		}
	}
	i, ok := x.spill[k]
	return i, ok
}

// set records that k is at position i (i < 2^31-1: a generation is bounded
// in bytes, with at least entryOverheadBytes charged per entry). k must not
// be present, or be present at position i already.
func (x *entryIndex) set(k entryKey, i int) {
	lp := x.last
	if lp == nil || x.lastID != k.ledgerID {
		lp = x.ledgers[k.ledgerID]
		if lp == nil {
			lp = &ledgerPositions{}
			x.ledgers[k.ledgerID] = lp
		}
		x.lastID, x.last = k.ledgerID, lp
	}
	if len(lp.pos) == 0 && k.entryID >= 0 {
		lp.base = k.entryID
	}
	off := k.entryID - lp.base
	if k.entryID < 0 || off < 0 || off > int64(len(lp.pos))+maxWindowGap {
		if x.spill == nil {
			x.spill = make(map[entryKey]int)
		}
		x.spill[k] = i
		return
	}
	for int64(len(lp.pos)) <= off {
		lp.pos = append(lp.pos, 0)
	}
	lp.pos[off] = int32(i + 1)
}
