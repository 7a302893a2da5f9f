package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// batchFrameOverhead is the part of a BATCH_READ answer frame that is not
// entries (prefix, header, rc, ledger, start entry, request id), and
// batchEntryOverhead what each entry adds besides its body: the bookie's
// accounting (spec/wire-protocol.md §3.4).
const (
	batchFrameOverhead = 36
	batchEntryOverhead = 4
	// entryHeaderSize is a stored entry body's header before the digest
	// (ledger id, entry id, LAC, length).
	entryHeaderSize = 32
)

// BatchRead reads up to maxCount entries from first on, at most maxBytes
// of answer (Java's ReadHandle.batchRead / batchReadAsync). It returns at
// least one entry, consecutive from first, or an error; fewer than
// maxCount when:
//
//   - the LAC known to the handle comes first: entries past it are never
//     returned (Java's batch path asks the bookie for maxCount whatever
//     the LAC and may return unconfirmed entries; Folio does not);
//   - first's fragment ends first: one request covers one ensemble's
//     entries (ask again from the next entry for the rest);
//   - maxBytes comes first, counted as the bookie counts its answer frame:
//     36 bytes, plus per entry 4 and its stored body (32 header bytes, the
//     digest, the payload). The first entry is always returned, even if
//     larger. maxBytes 0, or above the frame limit (Config.MaxFrameSize),
//     means the frame limit (as Java);
//   - the bookie answering does not have a later entry (it stops there,
//     silently, as Java's bookie does); ask again from the next entry.
//
// With Config.UseV2WireProtocol (and not Config.DisableBatchRead) on a
// ledger whose fragment has EnsembleSize == WriteQuorumSize, it sends one
// BATCH_READ_ENTRY to one replica of first's write set, moving to the next
// replica on an error or a body that fails verification, and asking the
// next one also after each speculative-read delay while none has answered
// with a batch that verified. A bookie that answers EBADREQ (it does not
// serve batch reads) gets single reads on that connection from then on; if
// no replica can serve the batch (EBADREQ, a dropped connection as a 4.16
// bookie does on the unknown opcode, errors, timeouts), the range is read
// with single reads, whose rules decide each entry. If the first error to
// arrive among the replicas' answers to that failed batch, explicit "no
// such entry" answers aside, is a lost or refused connection
// (ErrBookieUnavailable: what a 4.16 bookie's drop looks like, but also
// what a bookie that is down or restarting gives), the handle reads single
// entries for every later BatchRead, for the rest of its life, as Java's
// notSupportBatch: it cannot tell such a bookie from one that was down, so
// a short outage of the write set's bookies (with E == Qw, the whole
// ensemble) turns batch reads off for the handle. Without v2, or with
// E > Qw (a bookie then stores no run of consecutive entries longer than
// Qw: Java reads single entries too), it reads single entries.
//
// Single reads follow the same cuts: the range is read chunk by chunk, each
// chunk asking only for the entries that may still fit within maxBytes
// (estimated from the entries' average size, plus one), and reading stops
// at the first entry that would pass it. An error after at least one entry
// was read returns the entries before it, without the error (ask again from
// the next entry to see it), as the batch answer of a bookie that cannot
// give a later entry ends there.
//
// Errors: first < 0, maxCount ≤ 0 or maxBytes < 0 is an invalid argument
// (nothing is read); first past the known LAC is ErrReadBeyondLAC
// (ReadLastAddConfirmed learns a newer one; Java's BKReadException), as is
// first past the end of a ledger the handle learns was closed; an entry
// that does not exist is ErrNoSuchEntry only when enough of its bookies
// say so (as for Read). The entries returned are on their way to the LAC
// cache: LastAddConfirmed moves to the highest LAC they carry.
func (r *ReadHandle) BatchRead(ctx context.Context, first int64, maxCount int, maxBytes int) (_ []Entry, err error) {
	defer func() { err = r.c.closedError(err) }()
	switch {
	case first < 0:
		return nil, fmt.Errorf("client: ledger %d: batch read from negative entry %d", r.id, first)
	case maxCount <= 0:
		return nil, fmt.Errorf("client: ledger %d: batch read of %d entries: need at least 1", r.id, maxCount)
	case maxBytes < 0:
		return nil, fmt.Errorf("client: ledger %d: batch read with a negative size bound %d", r.id, maxBytes)
	}
	if _, lac := r.snapshot(); first > lac {
		return nil, fmt.Errorf("%w: ledger %d: batch read from entry %d, LAC is %d", ErrReadBeyondLAC, r.id, first, lac)
	}
	md, err := r.refresh(ctx)
	if err != nil {
		return nil, err
	}
	_, lac := r.snapshot()
	if first > lac {
		// A close learnt by the refresh lowered the LAC below first.
		return nil, fmt.Errorf("%w: ledger %d is closed at entry %d, batch read from entry %d", ErrReadBeyondLAC, r.id, lac, first)
	}
	last := lac
	if n := int64(maxCount); n <= lac-first {
		last = first + n - 1
	}
	last = min(last, fragmentEnd(md, first))
	frame := r.c.cfg.MaxFrameSize
	if frame <= 0 {
		frame = wire.MaxFrameSize
	}
	size := int64(maxBytes)
	if size == 0 || size > int64(frame) {
		size = int64(frame)
	}
	r.mu.Lock()
	noBatch := r.mu.noBatch
	r.mu.Unlock()
	if r.c.cfg.UseV2WireProtocol && !r.c.cfg.DisableBatchRead && !noBatch && md.EnsembleSize == md.WriteQuorum {
		out, fallback, err := r.batchRead(ctx, md, first, last, size)
		if !fallback {
			return out, err
		}
		if errors.Is(err, transport.ErrBookieUnavailable) {
			// As Java's notSupportBatch: a 4.16 bookie drops the
			// connection on the unknown opcode, and every request on that
			// connection with it; do not ask again on this handle.
			r.mu.Lock()
			r.mu.noBatch = true
			r.mu.Unlock()
		}
		r.c.log.Debug("batch read failed on every replica, reading single entries", "ledger", r.id, "first", first, "err", err)
	}
	return r.batchReadSingles(ctx, first, last, size)
}

// batchReadSingles is BatchRead with single reads: first … last chunk by
// chunk, counting the answer frame as the bookie counts a batch (see
// entryFrameSize), and stopping at the first entry that would pass size (the
// first entry is always returned). Each chunk asks only for the entries
// that may still fit, estimated from the average entry of the ledger as the
// handle knows it, then from those read, plus one: with entries of even
// size one chunk finds the cut. An error after at least one entry was read
// returns the entries before it, without the error, as a batch answer ends
// at an entry its bookie cannot give.
func (r *ReadHandle) batchReadSingles(ctx context.Context, first, last, size int64) ([]Entry, error) {
	minEntry := r.entryFrameSize(0)
	est := minEntry
	if n, lac := r.Length(), r.LastAddConfirmed(); n > 0 && lac >= 0 {
		est = max(minEntry, r.entryFrameSize(int(min(n/(lac+1), int64(wire.MaxFrameSize)))))
	}
	var out []Entry
	total := int64(batchFrameOverhead)
	for lo := first; lo <= last && (len(out) == 0 || total+minEntry <= size); {
		fit := max(0, (size-total)/est) + 1
		hi := lo + min(fit, maxReadChunk, last-lo+1) - 1
		got, err := r.readChunk(ctx, lo, hi, nil, true)
		for _, e := range got {
			f := r.entryFrameSize(len(e.Payload))
			if len(out) > 0 && total+f > size {
				return out, nil
			}
			total += f
			out = append(out, e)
		}
		if err != nil {
			if len(out) > 0 {
				r.c.log.Debug("batch read: single read failed after a prefix", "ledger", r.id, "first", first, "entries", len(out), "err", err)
				return out, nil
			}
			return nil, r.c.closedError(err)
		}
		if len(out) > 0 {
			est = max(minEntry, (total-batchFrameOverhead)/int64(len(out)))
		}
		lo = hi + 1
	}
	return out, nil
}

// entryFrameSize is what an entry of payload n bytes adds to a batch
// answer frame as the bookie counts it: the per-entry overhead and its
// stored body (header, digest, payload).
func (r *ReadHandle) entryFrameSize(n int) int64 {
	return int64(batchEntryOverhead + entryHeaderSize + r.dig.Size() + n)
}

// fragmentEnd returns the last entry of the fragment holding entry id
// (math.MaxInt64 for the last fragment).
func fragmentEnd(md *metadata.LedgerMetadata, id int64) int64 {
	end := int64(1<<63 - 1)
	for i := len(md.Ensembles) - 1; i >= 0; i-- {
		if md.Ensembles[i].FirstEntryID <= id {
			return end
		}
		end = md.Ensembles[i].FirstEntryID - 1
	}
	return end
}

// batchRead runs one BatchRead machine over first … last. fallback reports
// that the range should be read with single reads instead.
func (r *ReadHandle) batchRead(ctx context.Context, md *metadata.LedgerMetadata, first, last, size int64) (_ []Entry, fallback bool, _ error) {
	sticky, stickyIdx := r.stickyFor(md)
	m, err := ledger.NewBatchRead(ledger.BatchReadConfig{LedgerID: r.id, Metadata: md, Verifier: r.dig,
		First: first, MaxCount: int(min(last-first+1, 1<<31-1)), MaxSize: size,
		Avoid: r.c.health.avoidSet(), Sticky: sticky, StickyIndex: stickyIdx, Speculation: r.c.cfg.speculation()})
	if err != nil {
		return nil, false, err
	}
	var res ledger.BatchReadComplete
	start := time.Now()
	err = r.c.run(ctx, r.newExecutor(), m, m.Start, func(eff ledger.Effect) {
		if e, ok := eff.(ledger.BatchReadComplete); ok {
			res = e
		}
	})
	r.stickyFailed(md, first, res.Failed)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if res.Fallback {
			return nil, true, err
		}
		observe(r.c.metrics.read, start, err)
		return nil, false, publicError(fmt.Errorf("client: ledger %d: batch read: %w", r.id, err))
	}
	r.adoptEntries(res.Entries)
	out := make([]Entry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = Entry{ID: e.EntryID, Payload: e.Payload}
	}
	r.c.metrics.entriesRead.Add(float64(len(out)))
	observe(r.c.metrics.read, start, nil)
	return out, false, nil
}

// readChunkBatched reads lo … hi (at or below the LAC) for Entries. Where
// BatchRead would use BATCH_READ_ENTRY (UseV2WireProtocol, batch reads not
// disabled, E == Qw: every bookie of a fragment holds all of it) it asks
// for the chunk with as few batch requests as the answers' frame size
// allows, one fragment at a time, instead of one request per entry; the
// bookie reads such a run from its entry log in one go. Otherwise, or once
// a batch read asks for the fallback (a bookie that answers EBADREQ or
// drops the connection: as BatchRead, the handle then stops asking), it
// reads the rest with single reads (readChunk), whose rules decide each
// entry.
func (r *ReadHandle) readChunkBatched(ctx context.Context, lo, hi int64) ([]Entry, error) {
	if !r.c.cfg.UseV2WireProtocol || r.c.cfg.DisableBatchRead {
		return r.readChunk(ctx, lo, hi, nil, true)
	}
	frame := int64(r.c.cfg.MaxFrameSize)
	if frame <= 0 {
		frame = wire.MaxFrameSize
	}
	var out []Entry
	for lo <= hi {
		r.mu.Lock()
		noBatch := r.mu.noBatch
		r.mu.Unlock()
		md, err := r.refresh(ctx)
		if err != nil {
			return out, err
		}
		if md.IsClosed() && hi > md.LastEntryID {
			// As readChunk: a close learnt by the refresh ends the ledger
			// before the entries the LAC promised.
			return out, fmt.Errorf("%w: ledger %d is closed at entry %d, entries up to %d asked", ErrReadBeyondLAC, r.id, md.LastEntryID, hi)
		}
		if noBatch || md.EnsembleSize != md.WriteQuorum {
			return r.readChunk(ctx, lo, hi, out, true)
		}
		got, fallback, err := r.batchRead(ctx, md, lo, min(hi, fragmentEnd(md, lo)), frame)
		if fallback {
			if errors.Is(err, transport.ErrBookieUnavailable) {
				r.mu.Lock()
				r.mu.noBatch = true
				r.mu.Unlock()
			}
			r.c.log.Debug("entries: batch read failed on every replica, reading single entries", "ledger", r.id, "first", lo, "err", err)
			return r.readChunk(ctx, lo, hi, out, true)
		}
		if err != nil {
			return out, err
		}
		if len(got) == 0 || got[0].ID != lo {
			// Not expected of a batch answer (its first entry is always
			// there): let the single reads decide.
			return r.readChunk(ctx, lo, hi, out, true)
		}
		out = append(out, got...)
		lo += int64(len(got))
	}
	return out, nil
}
