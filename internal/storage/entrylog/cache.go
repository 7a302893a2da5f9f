package entrylog

// entryKey identifies an entry in the caches.
type entryKey struct{ ledgerID, entryID int64 }

// entryOverheadBytes is charged per cached entry on top of its body, for
// the map slot and bookkeeping, so that many tiny entries cannot blow the
// memory bound.
const entryOverheadBytes = 64

// arenaChunkBytes is the size of the slabs entry bodies are copied into, so
// an add does not allocate per entry. Bodies larger than a quarter chunk get
// their own allocation.
const arenaChunkBytes = 1 << 20

type cachedEntry struct {
	key  entryKey
	body []byte // aliases an arena chunk or its own allocation
}

// generation is one half of the write cache: the active generation takes
// adds; a frozen one is being flushed and is immutable.
type generation struct {
	entries []cachedEntry
	pos     entryIndex // key -> index in entries
	bytes   int64      // charged bytes (bodies + overhead)
	chunks  [][]byte   // arena slabs; the last one is being filled
	// dropped holds ledgers deleted while this generation was frozen; their
	// placements are not handed to apply.
	dropped map[int64]struct{}
}

func newGeneration(free [][]byte) *generation {
	g := &generation{pos: newEntryIndex()}
	if len(free) > 0 {
		g.chunks = append(g.chunks, free[len(free)-1][:0])
	}
	return g
}

// copyIn copies body into the arena and returns the copy.
func (g *generation) copyIn(body []byte, free *[][]byte) []byte {
	if len(body) > arenaChunkBytes/4 {
		return append([]byte(nil), body...)
	}
	if n := len(g.chunks); n > 0 {
		c := g.chunks[n-1]
		if cap(c)-len(c) >= len(body) {
			start := len(c)
			c = append(c, body...)
			g.chunks[n-1] = c
			return c[start:len(c):len(c)]
		}
	}
	var c []byte
	if f := *free; len(f) > 0 {
		c = f[len(f)-1][:0]
		*free = f[:len(f)-1]
	} else {
		c = make([]byte, 0, arenaChunkBytes)
	}
	c = append(c, body...)
	g.chunks = append(g.chunks, c)
	return c[0:len(body):len(body)]
}

// put adds or replaces an entry.
func (g *generation) put(k entryKey, body []byte, free *[][]byte) {
	cp := g.copyIn(body, free)
	if i, ok := g.pos.get(k); ok {
		// The old copy stays in the arena until the generation is released;
		// its bytes stay charged, which over-counts and so stays safe.
		g.entries[i].body = cp
		g.bytes += int64(len(body))
		return
	}
	g.pos.set(k, len(g.entries))
	g.entries = append(g.entries, cachedEntry{key: k, body: cp})
	g.bytes += int64(len(body)) + entryOverheadBytes
}

func (g *generation) get(k entryKey) ([]byte, bool) {
	if g == nil {
		return nil, false
	}
	i, ok := g.pos.get(k)
	if !ok {
		return nil, false
	}
	return g.entries[i].body, true
}

// removeLedger deletes a ledger's entries from an active generation.
func (g *generation) removeLedger(ledgerID int64) {
	kept := g.entries[:0]
	g.pos = newEntryIndex()
	for _, e := range g.entries {
		if e.key.ledgerID == ledgerID {
			g.bytes -= int64(len(e.body)) + entryOverheadBytes
			continue
		}
		g.pos.set(e.key, len(kept))
		kept = append(kept, e)
	}
	clear(g.entries[len(kept):])
	g.entries = kept
}

// readCache holds entry bodies read ahead from entry logs, keyed by
// (ledger, entry) and consulted before the index, as BookKeeper's
// DbLedgerStorage read cache is; bounded in bytes, evicting the oldest
// insertion first.
//
// Contract (what it may hold, and why a hit is correct without the index):
//   - Only bodies that verified (CRC, ids, length) in a record at the
//     location the index held for that entry when the fill started
//     (Store.ReadAhead's caller passes index locations; Store.Read's target
//     is not cached). So the cache never holds a record the index did not
//     know: no leftover of a failed flush, no unjournaled record.
//   - An entry's bytes never change while its ledger lives: the writer
//     chooses them, recovery and re-replication write the same bytes again,
//     compaction copies them. So a body cached once stays the entry's body.
//     Defensively, an Add of the same (ledger, entry) removes the cached
//     copy, a fill never caches an entry that is in the write cache, and a
//     fill that overlapped a flush's release of the write cache is not
//     cached at all (Store.fillEpoch), so even a rewrite with different
//     bytes is never shadowed by an older copy.
//   - DropLedger (ledger deletion, before the index deletion) and
//     ForgetCached (after it) remove the ledger's entries, and a fill that
//     overlapped either is not cached (fillEpoch): a fill that walked the
//     index before its deletion cannot cache after ForgetCached, so a
//     deleted and re-created ledger id never sees the old ledger's entries.
//   - Relocation by compaction changes where an entry is, not its bytes:
//     no invalidation.
type readCache struct {
	maxBytes int64
	bytes    int64
	m        map[entryKey][]byte
	fifo     []entryKey // insertion order; head is fifo[head]
	head     int
}

func newReadCache(maxBytes int64) *readCache {
	return &readCache{maxBytes: maxBytes, m: make(map[entryKey][]byte)}
}

func (c *readCache) get(k entryKey) ([]byte, bool) {
	b, ok := c.m[k]
	return b, ok
}

// put stores body (owned by the cache from now on; it must not alias a
// larger buffer, whose bytes would not be charged).
func (c *readCache) put(k entryKey, body []byte) {
	size := int64(len(body)) + entryOverheadBytes
	if c.maxBytes <= 0 || size > c.maxBytes {
		return
	}
	if _, ok := c.m[k]; ok {
		return
	}
	for c.bytes+size > c.maxBytes && c.head < len(c.fifo) {
		old := c.fifo[c.head]
		c.head++
		if b, ok := c.m[old]; ok {
			c.bytes -= int64(len(b)) + entryOverheadBytes
			delete(c.m, old)
		}
	}
	if c.head > len(c.fifo)/2 {
		c.fifo = append(c.fifo[:0], c.fifo[c.head:]...)
		c.head = 0
	}
	c.m[k] = body
	c.fifo = append(c.fifo, k)
	c.bytes += size
	c.compact()
}

// readCacheSlack is how many stale fifo slots beyond twice the live keys
// are tolerated before compact rewrites the fifo.
const readCacheSlack = 1024

// compact bounds the fifo when keys leave m without byte pressure (remove,
// removeLedger): their slots are otherwise dropped only as eviction passes
// them, and a cache that never fills would keep every key ever put. The
// rewrite keeps the live keys in insertion order, dropping stale slots and
// the duplicates a removed and re-put key leaves (its oldest slot is
// dropped, so it is no longer evicted early); it runs when at least half the
// slots are stale, so its cost is amortised over the puts and removes that
// made them.
func (c *readCache) compact() {
	if len(c.fifo)-c.head <= 2*len(c.m)+readCacheSlack {
		return
	}
	seen := make(map[entryKey]int, len(c.m)) // key -> slots left to skip
	for _, k := range c.fifo[c.head:] {
		if _, ok := c.m[k]; ok {
			seen[k]++
		}
	}
	kept := c.fifo[:0]
	for _, k := range c.fifo[c.head:] {
		n, ok := seen[k]
		if !ok {
			continue
		}
		if n > 1 { // a later slot of the same key follows
			seen[k] = n - 1
			continue
		}
		kept = append(kept, k)
	}
	clear(c.fifo[len(kept):])
	c.fifo = kept
	c.head = 0
}

// remove forgets one entry. Its key stays in fifo and is skipped at
// eviction (not in m) until compact drops it; a later put of the same key
// appends it again, and the earlier fifo slot then evicts it early, which
// only costs a miss.
func (c *readCache) remove(k entryKey) {
	if b, ok := c.m[k]; ok {
		c.bytes -= int64(len(b)) + entryOverheadBytes
		delete(c.m, k)
		c.compact()
	}
}

func (c *readCache) removeLedger(ledgerID int64) {
	for k, b := range c.m {
		if k.ledgerID == ledgerID {
			c.bytes -= int64(len(b)) + entryOverheadBytes
			delete(c.m, k)
		}
	}
	// Stale keys left in fifo are skipped at eviction (not in m) until
	// compact drops them.
	c.compact()
}
