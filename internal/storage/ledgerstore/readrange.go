package ledgerstore

import (
	"errors"
	"fmt"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/storage/entrylog"
	"github.com/foliodb/folio/internal/storage/index"
)

// maxRangeEntries bounds one ReadEntries run whatever the caller asks, so a
// request with no count bound and tiny entries cannot make it build an
// unbounded list.
const maxRangeEntries = 1 << 16

var _ storage.RangeReader = (*Store)(nil)

// ReadEntries implements storage.RangeReader. It takes the run's index
// locations in one index iteration, serves the entries the caches hold
// (write cache, then read cache), and reads the others with one
// entrylog.ReadMany: sorted by (log, offset), records that lie together
// read at once (at most twice the run's record bytes plus one gap are
// read: about 2 × maxBytes). The order of checks per entry is the one
// readEntry follows (caches, then the index), so an entry flushed during
// the call is found in one or the other.
func (s *Store) ReadEntries(ledgerID, firstEntryID int64, maxCount int, maxBytes, perEntryBytes int64) ([][]byte, error) {
	if firstEntryID < 0 {
		// -1 is "the last entry": nothing follows it.
		b, err := s.ReadEntry(ledgerID, firstEntryID)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	}
	// A deletion during the call may let the answer combine the old
	// ledger's entries (index locations, cached bodies taken before) with
	// a new ledger's of the same id (taken after): then only the first
	// entry is answered, by a single read, and the reader asks again for
	// the rest. The count is taken before lookup: a deletion counted
	// already holds the ledger's lock until it is complete, so lookup sees
	// it done; any later one changes the count.
	deletions := s.deletions.Load()
	l, err := s.lookup(ledgerID)
	if err != nil {
		return nil, err
	}
	defer s.ledgers.release(l)
	s.at("readentries:lookedup")
	if maxCount <= 0 || maxCount > maxRangeEntries {
		maxCount = maxRangeEntries
	}
	sh := s.shardFor(ledgerID)
	indexed := make(map[int64]entrylog.Location)
	err = sh.ix.Entries(ledgerID, firstEntryID, func(id int64, loc entrylog.Location) bool {
		if id != firstEntryID+int64(len(indexed)) {
			return false
		}
		indexed[id] = loc
		return len(indexed) < maxCount
	})
	if err != nil {
		return nil, err
	}

	// Pick the run: cached bodies now, locations for the rest.
	type slot struct {
		body []byte
		want int // index in wants, or -1
	}
	var slots []slot
	var wants []entrylog.Want
	var stop error // why the run ended early (not absence, not a bound)
	var total int64
	for id := firstEntryID; len(slots) < maxCount; id++ {
		s.at("readentries:slot")
		var sl slot
		var size int64
		if b, ok := sh.el.ReadCachedEntry(ledgerID, id); ok {
			sl, size = slot{body: b, want: -1}, int64(len(b))
		} else {
			loc, ok := indexed[id]
			if !ok {
				// Not in the snapshot: absent, or flushed since it was
				// taken (the cache check above came after the snapshot).
				var err error
				loc, err = sh.ix.Get(ledgerID, id)
				if errors.Is(err, index.ErrNoEntry) {
					if id == firstEntryID {
						return nil, fmt.Errorf("%w: ledger %d entry %d", storage.ErrNoEntry, ledgerID, id)
					}
					break
				}
				if err != nil {
					if id == firstEntryID {
						return nil, err
					}
					stop = err
					break
				}
			}
			sl, size = slot{want: len(wants)}, int64(loc.Size)
			wants = append(wants, entrylog.Want{EntryID: id, Loc: loc})
		}
		if id != firstEntryID && total+perEntryBytes+size > maxBytes {
			if sl.want >= 0 {
				wants = wants[:len(wants)-1]
			}
			break
		}
		total += perEntryBytes + size
		slots = append(slots, sl)
	}

	s.at("readentries:located")
	res := sh.el.ReadMany(ledgerID, wants)
	if s.deletions.Load() != deletions {
		b, err := s.readEntry(sh, ledgerID, firstEntryID)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	}
	out := make([][]byte, 0, len(slots))
	for i, sl := range slots {
		if sl.want < 0 {
			out = append(out, sl.body)
			continue
		}
		r := res[sl.want]
		if errors.Is(r.Err, entrylog.ErrLogRemoved) {
			// Compacted away since the lookup: the single read looks the
			// entry up again.
			s.at("readentries:reread")
			r.Body, r.Err = s.readEntry(sh, ledgerID, firstEntryID+int64(i))
			if s.deletions.Load() != deletions {
				// A deletion since the count: the read may have found a
				// successor's entry. Answer the entries before it, or
				// this one alone if it is the first.
				if i > 0 {
					return out, nil
				}
				if r.Err != nil {
					return nil, r.Err
				}
				return [][]byte{r.Body}, nil
			}
		}
		if r.Err != nil {
			if i == 0 {
				return nil, r.Err
			}
			if !errors.Is(r.Err, storage.ErrNoEntry) {
				stop = r.Err
			}
			return out, stop
		}
		out = append(out, r.Body)
	}
	return out, stop
}
