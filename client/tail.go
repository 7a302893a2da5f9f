package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
)

// LACAndEntry is the answer of ReadLastAddConfirmedAndEntry: the last add
// confirmed the bookies reported, and Entry, the entry asked for, when it
// is at or below that LAC (nil for "no new entry").
type LACAndEntry struct {
	LAC   int64  // the last add confirmed the bookies reported
	Entry *Entry // the entry asked for, or nil
}

// tailPollTimeout is the long-poll timeout Tail uses: also how soon it
// notices that the ledger was closed while no entry came.
const tailPollTimeout = time.Second

// v2PollInterval is how often the v2 fallback of
// ReadLastAddConfirmedAndEntry asks for the LAC.
const v2PollInterval = 50 * time.Millisecond

// tailRetryPause is how long Tail waits before it retries after a read
// error its caller went on from.
const tailRetryPause = 100 * time.Millisecond

// ReadLastAddConfirmedAndEntry waits up to timeout for entry next to be
// confirmed and returns it with the LAC (BookKeeper's
// readLastAddConfirmedAndEntry, spec/protocol.md §3.4). If next is at or
// below the known LAC, it reads the entry at once. Otherwise it long-polls
// the bookies of the last ensemble (READ_ENTRY -1 with previousLAC =
// next−1, timeOut and ENTRY_PIGGYBACK, in parallel): each answers as soon
// as its LAC passes next−1, with entry next piggybacked if it stores it; if
// the answer did not carry it, the entry is read from its replicas. When
// E − Qa + 1 bookies answer that their LAC did not move before the
// timeout, it returns "no new entry": Entry nil and the known LAC.
//
// A timeout longer than three quarters of Config.ReadEntryTimeout is
// served by several successive long polls, so that no bookie request
// outlives the client's read timeout.
//
// With Config.UseV2WireProtocol (the v2 protocol has no long poll) it
// falls back to polling ReadLastAddConfirmed every 50 ms until the LAC
// reaches next or the timeout passes.
//
// For a CLOSED ledger it returns at once: the entry if next ≤ the last
// entry, otherwise Entry nil with the last entry id as LAC.
func (r *ReadHandle) ReadLastAddConfirmedAndEntry(ctx context.Context, next int64, timeout time.Duration) (_ LACAndEntry, err error) {
	defer func() { err = r.c.closedError(err) }()
	if next < 0 {
		return LACAndEntry{}, fmt.Errorf("client: ledger %d: bad entry id %d", r.id, next)
	}
	deadline := r.c.clock.Now().Add(timeout)
	for {
		md, lac := r.snapshot()
		if next <= lac {
			entries, err := r.readChunk(ctx, next, next, nil, true)
			if md, lac := r.snapshot(); errors.Is(err, ErrReadBeyondLAC) && md.IsClosed() {
				// Closed below a LAC seen before: next is past the end.
				return LACAndEntry{LAC: lac}, nil
			}
			if err != nil {
				return LACAndEntry{LAC: lac}, err
			}
			_, lac = r.snapshot()
			return LACAndEntry{LAC: lac, Entry: &entries[0]}, nil
		}
		if md.IsClosed() {
			return LACAndEntry{LAC: lac}, nil
		}
		wait := deadline.Sub(r.c.clock.Now())
		if wait <= 0 {
			return LACAndEntry{LAC: lac}, nil
		}
		if r.c.cfg.UseV2WireProtocol {
			if err := r.pollV2(ctx, next, min(wait, v2PollInterval)); err != nil {
				return LACAndEntry{LAC: lac}, err
			}
			continue
		}
		wait = min(wait, r.c.cfg.ReadEntryTimeout*3/4)
		res, err := r.longPoll(ctx, md, next-1, wait)
		if err != nil {
			return LACAndEntry{LAC: lac}, err
		}
		if res.Entry != nil {
			r.adoptLength(res.Entry.Length)
		}
		if res.Entry != nil && res.Entry.EntryID == next {
			lac = r.adopt(nil, res.LAC)
			if next > lac {
				// The handle learnt of a close below next meanwhile: next
				// is past the end, whatever the bookies answered.
				return LACAndEntry{LAC: lac}, nil
			}
			r.c.metrics.entriesRead.Add(1)
			return LACAndEntry{LAC: lac, Entry: &Entry{ID: next, Payload: res.Entry.Payload}}, nil
		}
		r.adopt(nil, res.LAC)
		// Either the LAC moved (the loop reads the entry from its
		// replicas) or nothing came in time (the loop sees the deadline
		// passed, or polls again for the rest of a long timeout).
	}
}

// pollV2 is the v2 fallback: one LAC read, then a pause if it did not
// reach next.
func (r *ReadHandle) pollV2(ctx context.Context, next int64, pause time.Duration) error {
	lac, err := r.ReadLastAddConfirmed(ctx)
	if err != nil || lac >= next {
		return err
	}
	return clock.Sleep(ctx, r.c.clock, pause)
}

func (r *ReadHandle) longPoll(ctx context.Context, md *metadata.LedgerMetadata, prev int64, wait time.Duration) (ledger.LongPollComplete, error) {
	m := ledger.NewLongPollLAC(ledger.LongPollConfig{
		LedgerID:    r.id,
		Metadata:    md,
		Verifier:    r.dig,
		PreviousLAC: prev,
		TimeoutMs:   max(1, wait.Milliseconds()),
	})
	var res ledger.LongPollComplete
	err := r.c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		if lc, ok := eff.(ledger.LongPollComplete); ok {
			res = lc
		}
	})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return res, publicError(fmt.Errorf("client: ledger %d: long poll: %w", r.id, err))
	}
	return res, nil
}

// Tail iterates over the entries of the ledger from entry from on, as they
// are confirmed: it reads what is at or below the LAC, then long-polls for
// the next entry (ReadLastAddConfirmedAndEntry) and re-reads the metadata
// whenever a poll comes back empty. It ends after the last entry once the
// ledger is CLOSED, or when ctx is done (without yielding ctx's error). A
// read error is yielded with a zero Entry; if the caller goes on, Tail
// retries after a short pause. Once the client is closed, Tail yields an
// error matching ErrClientClosed and ends.
func (r *ReadHandle) Tail(ctx context.Context, from int64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		next := max(from, 0)
		fail := func(err error) bool {
			err = r.c.closedError(err)
			if ctx.Err() != nil || !yield(Entry{}, err) || errors.Is(err, ErrClientClosed) {
				return false
			}
			return clock.Sleep(ctx, r.c.clock, tailRetryPause) == nil
		}
		for ctx.Err() == nil {
			md, lac := r.snapshot()
			if next <= lac {
				hi := min(lac, next+maxReadChunk-1)
				// Unconfirmed: a close below a LAC seen before cuts the
				// range at the end (or fails it, if it starts past the
				// end), and the tail ends there.
				buf, err := r.readChunk(ctx, next, hi, nil, false)
				for _, e := range buf {
					if !yield(e, nil) {
						return
					}
					next = e.ID + 1
				}
				if md, lac := r.snapshot(); md.IsClosed() && next > lac {
					return
				}
				if err != nil && !fail(err) {
					return
				}
				continue
			}
			if md.IsClosed() {
				return
			}
			res, err := r.ReadLastAddConfirmedAndEntry(ctx, next, tailPollTimeout)
			switch {
			case err != nil:
				if !fail(err) {
					return
				}
			case res.Entry != nil:
				if !yield(*res.Entry, nil) {
					return
				}
				next++
			default:
				if _, err := r.refresh(ctx); err != nil && !fail(err) {
					return
				}
			}
		}
	}
}
