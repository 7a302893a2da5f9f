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

// maxWindowGap bounds how far past a ledger's window an entry may land and
// still extend it. A bookie in an ensemble of E with write quorum Qw sees
// gaps below E; the bound keeps sparse ids (explicit ids far apart) from
// costing more than entryOverheadBytes per entry: at most 16 four-byte
// slots are added per entry.
const maxWindowGap = 16

func newEntryIndex() entryIndex {
	return entryIndex{ledgers: make(map[int64]*ledgerPositions)}
}

func (x *entryIndex) ledger(ledgerID int64, create bool) *ledgerPositions {
	if x.last != nil && x.lastID == ledgerID {
		return x.last
	}
	lp := x.ledgers[ledgerID]
	if lp == nil {
		if !create {
			return nil
		}
		lp = &ledgerPositions{}
		x.ledgers[ledgerID] = lp
	}
	x.lastID, x.last = ledgerID, lp
	return lp
}

// get returns the position of k.
func (x *entryIndex) get(k entryKey) (int, bool) {
	if lp := x.ledger(k.ledgerID, false); lp != nil {
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
	lp := x.ledger(k.ledgerID, true)
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

// removeLedger forgets every key of the ledger.
func (x *entryIndex) removeLedger(ledgerID int64) {
	delete(x.ledgers, ledgerID)
	if x.lastID == ledgerID {
		x.last = nil
	}
	for k := range x.spill {
		if k.ledgerID == ledgerID {
			delete(x.spill, k)
		}
	}
}
