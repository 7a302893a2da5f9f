package client

import (
	"time"

	"context"
	"fmt"
	"iter"
	"sync"

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
	ID      int64
	Payload []byte
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
	}
}

// newExecutor returns an executor with its own queue, for one machine.
func (r *ReadHandle) newExecutor() *ledgerexec.Executor {
	return r.c.newExecutor(r.id, r.dig, r.password, nil)
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
	m, err := ledger.NewRead(ledger.ReadConfig{LedgerID: r.id, Metadata: md, Verifier: r.dig, First: lo, Last: hi,
		Avoid: r.c.health.avoidSet(), SpeculativeTimeout: r.c.cfg.SpeculativeReadTimeout})
	if err != nil {
		return out, err
	}
	var res ledger.ReadComplete
	start := time.Now()
	err = r.c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		switch e := eff.(type) {
		case ledger.EntryComplete:
			out = append(out, Entry{ID: e.Entry.EntryID, Payload: e.Entry.Payload})
		case ledger.ReadComplete:
			res = e
		}
	})
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
// them in chunks; the range must be at or below the known LAC, as for
// Read. An error is yielded once, with a zero Entry, and ends the
// iteration.
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
		var buf []Entry
		for lo := first; lo <= last; lo += maxReadChunk {
			hi := min(last, lo+maxReadChunk-1)
			var err error
			buf, err = r.readChunk(ctx, lo, hi, buf[:0], true)
			for _, e := range buf {
				if !yield(e, nil) {
					return
				}
			}
			if err != nil {
				yield(Entry{}, err)
				return
			}
		}
	}
}

// Close releases the handle. It does not close the ledger.
func (r *ReadHandle) Close() error { return nil }
