package client

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
)

// maxReadChunk bounds the entries one read machine has in flight: a larger
// range is read chunk after chunk.
const maxReadChunk = 512

// Entry is one entry read from a ledger.
type Entry struct {
	ID      int64  // the entry id
	Payload []byte // the entry's data, digest-verified
}

// ReadHandle reads a ledger. It is safe for concurrent use.
type ReadHandle struct {
	c        *Client
	id       int64
	dig      *digest.Digester
	password []byte

	mu struct {
		sync.Mutex
		md  *metadata.LedgerMetadata
		lac int64
		// length is the highest ledger length learnt from bookies (LAC
		// reads, long polls, entries read) while the ledger is open.
		length int64
		// sticky is the ensemble index of the sticky bookie
		// (Config.StickyReadsEnabled); stickySet once it was picked.
		sticky    int
		stickySet bool
		// noBatch: a batch read found no replica reachable (Java's
		// notSupportBatch); BatchRead reads single entries from then on.
		noBatch bool
	}
}

// LastAddConfirmed returns the last add confirmed known to the handle,
// without asking anyone (Java's getLastAddConfirmed): -1 before anything
// was confirmed. Every LAC read (ReadLastAddConfirmed,
// TryReadLastAddConfirmed), long poll (ReadLastAddConfirmedAndEntry, Tail)
// and read (the LAC the entries carry) moves it forward, never back, while
// the ledger is open; once the handle sees the ledger CLOSED it is the
// last entry id.
func (r *ReadHandle) LastAddConfirmed() int64 {
	_, lac := r.snapshot()
	return lac
}

// Length returns the ledger length in bytes known to the handle, without
// asking anyone (Java's getLength): the metadata's length once the handle
// sees the ledger CLOSED; while it is open, the highest length learnt from
// LAC reads, long polls and entries read. As Java's, it is the length
// through the entry that carried the LAC (a bookie's last entry), not
// through the LAC's entry: it can be ahead of LastAddConfirmed by the
// entries in between, or behind it. It never goes down while the ledger
// is open.
func (r *ReadHandle) Length() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.md.IsClosed() {
		return r.mu.md.Length
	}
	return r.mu.length
}

// adoptLength records a ledger length learnt from a bookie.
func (r *ReadHandle) adoptLength(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.length = max(r.mu.length, n)
}

// adoptEntries records what entries read from bookies say: the LAC each
// carries (a LAC their writer had confirmed) and the length through each.
func (r *ReadHandle) adoptEntries(entries []digest.Entry) {
	lac, length := int64(-1), int64(0)
	for _, e := range entries {
		lac, length = max(lac, e.LAC), max(length, e.Length)
	}
	r.adopt(nil, lac)
	r.adoptLength(length)
}

// stickyFor returns whether reads of md's fragments are sticky and to
// which ensemble index (Config.StickyReadsEnabled; only with E == Qw, as
// Java). The index is picked at random on first use.
func (r *ReadHandle) stickyFor(md *metadata.LedgerMetadata) (bool, int) {
	if !r.c.cfg.StickyReadsEnabled || md.EnsembleSize != md.WriteQuorum || md.EnsembleSize <= 0 {
		return false, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.stickySet {
		r.mu.sticky, r.mu.stickySet = rand.IntN(md.EnsembleSize), true
	}
	return true, r.mu.sticky
}

// stickyFailed moves the sticky bookie to the next of the ensemble if it
// is among the bookies that failed a read of entry id (Java's
// recordReadErrorOnBookie; Java moves on whichever bookie failed, Folio
// only when the sticky one did, so that a speculative request's failure
// elsewhere does not move it).
func (r *ReadHandle) stickyFailed(md *metadata.LedgerMetadata, id int64, failed []metadata.BookieID) {
	on, idx := r.stickyFor(md)
	if !on || len(failed) == 0 {
		return
	}
	ens := md.EnsembleAt(id)
	if idx >= len(ens) || !slices.Contains(failed, ens[idx]) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.sticky == idx {
		r.mu.sticky = (idx + 1) % md.EnsembleSize
	}
}

// newExecutor returns an executor with its own queue, for one machine.
func (r *ReadHandle) newExecutor() *ledgerexec.Executor {
	return r.c.newExecutor(r.id, r.dig, r.password, nil, nil)
}

// ID returns the ledger id.
func (r *ReadHandle) ID() int64 { return r.id }

// IsClosed reports whether the ledger was CLOSED when last looked at
// (open, or the last ReadLastAddConfirmed or read).
func (r *ReadHandle) IsClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.md.IsClosed()
}

func (r *ReadHandle) snapshot() (*metadata.LedgerMetadata, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.md, r.mu.lac
}

// adopt records newer metadata and a LAC, and returns the handle's LAC.
// While the ledger is open the LAC only moves forward. Once it is CLOSED
// the LAC is its last entry, exactly: a LAC learnt before the close may be
// above the end (two recoveries that picked different ends, a writer that
// closed over a recovery), and entries past the end are not part of the
// ledger, whatever bookies hold.
func (r *ReadHandle) adopt(md *metadata.LedgerMetadata, lac int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if md != nil && !r.mu.md.IsClosed() {
		// CLOSED is final: an older OPEN copy from a metadata read that
		// finished late never replaces it.
		r.mu.md = md
	}
	if r.mu.md.IsClosed() {
		r.mu.lac = r.mu.md.LastEntryID
	} else {
		r.mu.lac = max(r.mu.lac, lac)
	}
	return r.mu.lac
}

// refresh re-reads the metadata of a ledger that was not closed: the
// writer may have changed its ensembles or closed it since.
func (r *ReadHandle) refresh(ctx context.Context) (*metadata.LedgerMetadata, error) {
	md, _ := r.snapshot()
	if md.IsClosed() {
		return md, nil
	}
	md, _, err := r.c.md.ReadLedger(ctx, r.id)
	if err != nil {
		return nil, publicError(fmt.Errorf("client: ledger %d: read metadata: %w", r.id, err))
	}
	r.adopt(md, -1)
	return md, nil
}

// ReadLastAddConfirmed returns the ledger's last add confirmed. For a
// CLOSED ledger that is the metadata's last entry id, without asking the
// bookies (as BookKeeper does); for an open one it asks the bookies of the
// last ensemble with the coverage rule. The result never goes down while
// the ledger is open; once it is closed it is the last entry id, even if a
// LAC seen before was higher.
func (r *ReadHandle) ReadLastAddConfirmed(ctx context.Context) (int64, error) {
	md, err := r.refresh(ctx)
	if err != nil {
		return -1, r.c.closedError(err)
	}
	if md.IsClosed() {
		return md.LastEntryID, nil
	}
	lac, err := r.readLAC(ctx, md)
	return lac, r.c.closedError(err)
}

func (r *ReadHandle) readLAC(ctx context.Context, md *metadata.LedgerMetadata) (int64, error) {
	m := ledger.NewReadLAC(ledger.ReadLACConfig{
		LedgerID:   r.id,
		Metadata:   md,
		Verifier:   r.dig,
		UseReadLAC: !r.c.cfg.UseV2WireProtocol,
	})
	var res ledger.LACComplete
	err := r.c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		if lc, ok := eff.(ledger.LACComplete); ok {
			res = lc
		}
	})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return -1, publicError(fmt.Errorf("client: ledger %d: read LAC: %w", r.id, err))
	}
	r.adoptLength(res.Length)
	return r.adopt(nil, res.LAC), nil
}

// TryReadLastAddConfirmed asks the bookies of the last ensemble for their
// LAC without the coverage rule (Java's tryReadLastAddConfirmed): it
// returns as soon as a verified answer carries a LAC above the handle's
// cached LastAddConfirmed; otherwise it waits for every bookie's answer
// (or its timeout) and takes the highest LAC among the valid ones
// (explicit "nothing here" answers count as -1), or fails if there was
// none. It works with fewer bookies up than ReadLastAddConfirmed, but an
// early answer is one bookie's view, so it can be lower than the ledger's
// real LAC (never higher: a bookie only knows LACs the writer confirmed).
// The handle's cached LastAddConfirmed moves forward with the answer and
// the result is that cached value (so it never goes down); for a CLOSED
// ledger it is the last entry id, without asking the bookies.
func (r *ReadHandle) TryReadLastAddConfirmed(ctx context.Context) (int64, error) {
	md, err := r.refresh(ctx)
	if err != nil {
		return -1, r.c.closedError(err)
	}
	if md.IsClosed() {
		return md.LastEntryID, nil
	}
	_, known := r.snapshot()
	m := ledger.NewReadLAC(ledger.ReadLACConfig{
		LedgerID:   r.id,
		Metadata:   md,
		Verifier:   r.dig,
		UseReadLAC: !r.c.cfg.UseV2WireProtocol,
		Try:        true,
		KnownLAC:   known,
	})
	var res ledger.LACComplete
	err = r.c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		if lc, ok := eff.(ledger.LACComplete); ok {
			res = lc
		}
	})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return -1, r.c.closedError(publicError(fmt.Errorf("client: ledger %d: try read LAC: %w", r.id, err)))
	}
	r.adoptLength(res.Length)
	return r.adopt(nil, res.LAC), nil
}

// Read returns the entries first … last (inclusive), which must be at or
// below the last add confirmed known to the handle (ErrReadBeyondLAC
// otherwise; ReadLastAddConfirmed learns a newer one). On error it returns
// the entries read before the one that failed.
func (r *ReadHandle) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	if _, lac := r.snapshot(); last > lac {
		return nil, fmt.Errorf("%w: ledger %d: entries %d..%d asked, LAC is %d", ErrReadBeyondLAC, r.id, first, last, lac)
	}
	return r.read(ctx, first, last, true)
}

// ReadUnconfirmed returns the entries first … last (inclusive) whatever the
// LAC: what the bookies have. An entry past the end fails with
// ErrNoSuchEntry only when its bookies say so explicitly.
func (r *ReadHandle) ReadUnconfirmed(ctx context.Context, first, last int64) ([]Entry, error) {
	return r.read(ctx, first, last, false)
}

// read reads first … last chunk by chunk; confirmed as for readChunk.
func (r *ReadHandle) read(ctx context.Context, first, last int64, confirmed bool) ([]Entry, error) {
	if first < 0 || last < first {
		return nil, fmt.Errorf("client: ledger %d: bad read range %d..%d", r.id, first, last)
	}
	out := make([]Entry, 0, min(last-first+1, 1<<16))
	for lo := first; lo <= last; lo += maxReadChunk {
		hi := min(last, lo+maxReadChunk-1)
		var err error
		out, err = r.readChunk(ctx, lo, hi, out, confirmed)
		if err != nil {
			return out, r.c.closedError(err)
		}
	}
	return out, nil
}

// readChunk reads lo … hi with one read machine, appending to out. Entries
// past a closed ledger's end are not part of it, whatever bookies hold:
// with confirmed (the range was checked against a LAC that the close may
// since have lowered) any of them in the range fails the read with
// ErrReadBeyondLAC before anything is read; otherwise the range is cut at
// the end, and fails with ErrNoSuchEntry if it starts past it.
func (r *ReadHandle) readChunk(ctx context.Context, lo, hi int64, out []Entry, confirmed bool) ([]Entry, error) {
	md, err := r.refresh(ctx)
	if err != nil {
		return out, err
	}
	if md.IsClosed() && hi > md.LastEntryID {
		if confirmed {
			return out, fmt.Errorf("%w: ledger %d is closed at entry %d, entries up to %d asked", ErrReadBeyondLAC, r.id, md.LastEntryID, hi)
		}
		if lo > md.LastEntryID {
			return out, fmt.Errorf("%w: ledger %d is closed at entry %d", ErrNoSuchEntry, r.id, md.LastEntryID)
		}
		hi = md.LastEntryID
	}
	spec := r.c.cfg.speculation()
	sticky, stickyIdx := r.stickyFor(md)
	m, err := ledger.NewRead(ledger.ReadConfig{LedgerID: r.id, Metadata: md, Verifier: r.dig, First: lo, Last: hi,
		Avoid: r.c.health.avoidSet(), SpeculativeTimeout: spec.First, SpeculativeMax: spec.Max,
		SpeculativeMultiplier: spec.Multiplier, Sticky: sticky, StickyIndex: stickyIdx})
	if err != nil {
		return out, err
	}
	var res ledger.ReadComplete
	var lac, length int64 = -1, 0
	start := time.Now()
	err = r.c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		switch e := eff.(type) {
		case ledger.EntryComplete:
			out = append(out, Entry{ID: e.Entry.EntryID, Payload: e.Entry.Payload})
			lac, length = max(lac, e.Entry.LAC), max(length, e.Entry.Length)
		case ledger.ReadComplete:
			res = e
		}
	})
	r.stickyFailed(md, lo, m.Failed())
	r.adopt(nil, lac)
	r.adoptLength(length)
	if err == nil {
		err = res.Err
	}
	r.c.metrics.entriesRead.Add(float64(len(out)))
	observe(r.c.metrics.read, start, err)
	if err != nil {
		return out, publicError(fmt.Errorf("client: ledger %d: read: %w", r.id, err))
	}
	return out, nil
}

// Entries iterates over the entries first … last (inclusive), reading
// them in chunks of up to 512 entries; the range must be at or below the
// known LAC, as for Read. An error is yielded once, with a zero Entry, and
// ends the iteration.
//
// Read-ahead: while the caller consumes one chunk, the next
// Config.ReadAheadChunks chunks (1 by default) are read on a goroutine of
// the iteration's own, so a sequential scan does not wait a round trip
// per chunk. At most ReadAheadChunks chunks are held beyond the one being
// consumed. When the caller stops (break) or ctx ends, the read-ahead is
// cancelled and the iteration returns only once its goroutine has ended.
func (r *ReadHandle) Entries(ctx context.Context, first, last int64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if _, lac := r.snapshot(); last > lac {
			yield(Entry{}, fmt.Errorf("%w: ledger %d: entries %d..%d asked, LAC is %d", ErrReadBeyondLAC, r.id, first, last, lac))
			return
		}
		if first < 0 || last < first {
			yield(Entry{}, fmt.Errorf("client: ledger %d: bad read range %d..%d", r.id, first, last))
			return
		}
		for c := range r.chunks(ctx, first, last) {
			for _, e := range c.entries {
				if !yield(e, nil) {
					return
				}
			}
			if c.err != nil {
				yield(Entry{}, r.c.closedError(c.err))
				return
			}
		}
	}
}

// chunk is one chunk of an Entries iteration: its entries, and the error
// that ended it early (the last chunk).
type chunk struct {
	entries []Entry
	err     error
}

// chunks reads first … last chunk by chunk, in order. With read-ahead
// (Config.ReadAheadChunks > 0) a goroutine reads ahead and hands chunks
// over a channel whose buffer, with the chunk the goroutine holds, makes
// ReadAheadChunks chunks ahead of the consumer; the sequence's end
// cancels it and waits for it.
func (r *ReadHandle) chunks(ctx context.Context, first, last int64) iter.Seq[chunk] {
	read := func(ctx context.Context, lo int64) chunk {
		hi := min(last, lo+maxReadChunk-1)
		es, err := r.readChunkBatched(ctx, lo, hi)
		return chunk{es, err}
	}
	ahead := r.c.cfg.ReadAheadChunks
	if ahead <= 0 {
		return func(yield func(chunk) bool) {
			for lo := first; lo <= last; lo += maxReadChunk {
				c := read(ctx, lo)
				if !yield(c) || c.err != nil {
					return
				}
			}
		}
	}
	return func(yield func(chunk) bool) {
		// stop is the consumer's end; ctx's own end reaches the reads and
		// comes back as a chunk's error, which the consumer yields.
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan chunk, ahead-1)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			defer close(ch)
			for lo := first; lo <= last; lo += maxReadChunk {
				c := read(ctx, lo)
				select {
				case ch <- c:
				case <-stop:
					return
				}
				if c.err != nil {
					return
				}
			}
		}()
		defer func() {
			close(stop)
			cancel()
			<-done
		}()
		for c := range ch {
			if !yield(c) {
				return
			}
		}
	}
}

// Close releases the handle. It does not close the ledger.
func (r *ReadHandle) Close() error { return nil }
