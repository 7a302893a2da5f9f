package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// LedgerState is a ledger's state as stored in its metadata (Java's
// org.apache.bookkeeper.client.api.LedgerMetadata.State). States only move
// forward: OPEN, then IN_RECOVERY, then CLOSED.
type LedgerState int32

// Ledger states, numbered as BookKeeper's LedgerMetadataFormat.State.
const (
	LedgerStateOpen       LedgerState = 1
	LedgerStateInRecovery LedgerState = 2
	LedgerStateClosed     LedgerState = 3
)

// String returns the state as Java names it: OPEN, IN_RECOVERY, CLOSED.
func (s LedgerState) String() string { return metadata.LedgerState(s).String() }

// Ensemble is one segment of a ledger: the bookies that store the entries
// from FirstEntryID up to the next ensemble's FirstEntryID (exclusive).
// Bookies[i] is the bookie at index i of the ensemble (Java's
// getAllEnsembles() map entry: first entry id → List<BookieId>).
type Ensemble struct {
	FirstEntryID int64    // the first entry the ensemble stores
	Bookies      []string // bookie ids, in ensemble order
}

// LedgerMetadata is a snapshot of a ledger's metadata (Java's
// org.apache.bookkeeper.client.api.LedgerMetadata). It is an immutable
// value: its accessors return copies, so it may be kept and shared between
// goroutines freely. The zero value describes no ledger (LedgerID 0,
// State 0).
//
// The password is deliberately not exposed (Java's getPassword is an
// admin-only detail); HasPassword tells whether one is stored.
type LedgerMetadata struct {
	id            int64
	formatVersion int
	ensembleSize  int
	writeQuorum   int
	ackQuorum     int
	state         LedgerState
	lastEntryID   int64
	length        int64
	ensembles     []Ensemble
	hasPassword   bool
	digestType    DigestType
	custom        map[string][]byte
	ctime         int64
	cToken        int64
}

// newLedgerMetadata copies md into a public value. md is not retained.
func newLedgerMetadata(id int64, md *metadata.LedgerMetadata) LedgerMetadata {
	m := LedgerMetadata{
		id:            id,
		formatVersion: md.FormatVersion,
		ensembleSize:  md.EnsembleSize,
		writeQuorum:   md.WriteQuorum,
		ackQuorum:     md.AckQuorum,
		state:         LedgerState(md.State),
		lastEntryID:   md.LastEntryID,
		length:        md.Length,
		hasPassword:   md.HasPassword,
		digestType:    DigestType(md.DigestType),
		ctime:         -1,
		cToken:        md.CToken,
		ensembles:     make([]Ensemble, len(md.Ensembles)),
	}
	if md.FormatVersion == 0 {
		// Built in memory by this client (a new ledger): it is stored as
		// format 3, the only format Folio writes.
		m.formatVersion = 3
	}
	if md.State != metadata.LedgerClosed {
		m.lastEntryID, m.length = -1, 0
	}
	if md.StoreCtime {
		m.ctime = md.Ctime
	}
	for i, s := range md.Ensembles {
		b := make([]string, len(s.Ensemble))
		for j, id := range s.Ensemble {
			b[j] = string(id)
		}
		m.ensembles[i] = Ensemble{FirstEntryID: s.FirstEntryID, Bookies: b}
	}
	if len(md.CustomMetadata) > 0 {
		m.custom = make(map[string][]byte, len(md.CustomMetadata))
		for k, v := range md.CustomMetadata {
			m.custom[k] = bytes.Clone(v)
		}
	}
	return m
}

// LedgerID returns the ledger's id (Java's getLedgerId).
func (m LedgerMetadata) LedgerID() int64 { return m.id }

// FormatVersion returns the metadata format version the value was read in:
// 1, 2 or 3 (Java's getMetadataFormatVersion). Folio writes format 3.
func (m LedgerMetadata) FormatVersion() int { return m.formatVersion }

// EnsembleSize returns the number of bookies in each ensemble (Java's
// getEnsembleSize).
func (m LedgerMetadata) EnsembleSize() int { return m.ensembleSize }

// WriteQuorumSize returns the number of bookies each entry is written to
// (Java's getWriteQuorumSize).
func (m LedgerMetadata) WriteQuorumSize() int { return m.writeQuorum }

// AckQuorumSize returns the number of acknowledgements an append waits for
// (Java's getAckQuorumSize).
func (m LedgerMetadata) AckQuorumSize() int { return m.ackQuorum }

// State returns the ledger's state (Java's getState).
func (m LedgerMetadata) State() LedgerState { return m.state }

// IsClosed reports whether the ledger is CLOSED (Java's isClosed).
func (m LedgerMetadata) IsClosed() bool { return m.state == LedgerStateClosed }

// LastEntryID returns the id of the ledger's last entry once it is closed,
// -1 for a closed empty ledger and for a ledger not closed yet (Java's
// getLastEntryId).
func (m LedgerMetadata) LastEntryID() int64 { return m.lastEntryID }

// Length returns the total payload bytes of a closed ledger (digests
// excluded), 0 while it is not closed (Java's getLength).
func (m LedgerMetadata) Length() int64 { return m.length }

// HasPassword reports whether the metadata stores a password and digest
// type (Java's hasPassword). Ledgers written by Folio or by Java since
// format 2 always do.
func (m LedgerMetadata) HasPassword() bool { return m.hasPassword }

// DigestType returns the ledger's entry digest (Java's getDigestType); 0
// when !HasPassword.
func (m LedgerMetadata) DigestType() DigestType { return m.digestType }

// Ctime returns the ledger's creation time (Java's getCtime, stored when
// the creator had storeSystemTimeAsLedgerCreationTime; Folio always stores
// it), or the zero time when the metadata has none.
func (m LedgerMetadata) Ctime() time.Time {
	if m.ctime < 0 {
		return time.Time{}
	}
	return time.UnixMilli(m.ctime)
}

// CtimeMillis returns the creation time in milliseconds since the epoch as
// stored, -1 when absent (Java's getCtime on etcd).
func (m LedgerMetadata) CtimeMillis() int64 { return m.ctime }

// CToken returns the creator token, which makes a retried create
// recognise its own write (Java's getCToken): set by Java on ZooKeeper,
// and by Folio for ledgers created under a chosen id
// (LedgerOptions.LedgerID); 0 otherwise.
func (m LedgerMetadata) CToken() int64 { return m.cToken }

// CustomMetadata returns a copy of the application's metadata given at
// create (Java's getCustomMetadata); nil when there is none.
func (m LedgerMetadata) CustomMetadata() map[string][]byte {
	if m.custom == nil {
		return nil
	}
	c := make(map[string][]byte, len(m.custom))
	for k, v := range m.custom {
		c[k] = bytes.Clone(v)
	}
	return c
}

// Ensembles returns a copy of the ledger's ensembles in ascending
// FirstEntryID order; the last is the current one (Java's getAllEnsembles).
func (m LedgerMetadata) Ensembles() []Ensemble {
	c := make([]Ensemble, len(m.ensembles))
	for i, e := range m.ensembles {
		c[i] = Ensemble{FirstEntryID: e.FirstEntryID, Bookies: slices.Clone(e.Bookies)}
	}
	return c
}

// EnsembleAt returns the bookies storing entryID: those of the last
// ensemble whose FirstEntryID ≤ entryID (Java's getEnsembleAt). It returns
// nil for a negative entryID or a zero LedgerMetadata.
func (m LedgerMetadata) EnsembleAt(entryID int64) []string {
	if entryID < 0 {
		return nil
	}
	for i := len(m.ensembles) - 1; i >= 0; i-- {
		if m.ensembles[i].FirstEntryID <= entryID {
			return slices.Clone(m.ensembles[i].Bookies)
		}
	}
	return nil
}

// Equal reports whether m and o describe the same metadata.
func (m LedgerMetadata) Equal(o LedgerMetadata) bool {
	return m.id == o.id && m.formatVersion == o.formatVersion && m.ensembleSize == o.ensembleSize &&
		m.writeQuorum == o.writeQuorum && m.ackQuorum == o.ackQuorum && m.state == o.state &&
		m.lastEntryID == o.lastEntryID && m.length == o.length && m.hasPassword == o.hasPassword &&
		m.digestType == o.digestType && m.ctime == o.ctime && m.cToken == o.cToken &&
		maps.EqualFunc(m.custom, o.custom, bytes.Equal) &&
		slices.EqualFunc(m.ensembles, o.ensembles, func(a, b Ensemble) bool {
			return a.FirstEntryID == b.FirstEntryID && slices.Equal(a.Bookies, b.Bookies)
		})
}

// String summarises the metadata for logs.
func (m LedgerMetadata) String() string {
	return fmt.Sprintf("ledger %d {state %s, ensemble %d, write quorum %d, ack quorum %d, last entry %d, length %d, digest %s, %d ensembles, format %d}",
		m.id, m.state, m.ensembleSize, m.writeQuorum, m.ackQuorum, m.lastEntryID, m.length, m.digestType, len(m.ensembles), m.formatVersion)
}

// LedgerMetadata reads a ledger's metadata from the metadata store (Java's
// BookKeeper.getLedgerMetadata, over LedgerManager.readLedgerMetadata). It
// needs no password. An absent ledger, or a negative id, gives
// ErrNoSuchLedger (Java's NoSuchLedgerExistsException, code -7).
func (c *Client) LedgerMetadata(ctx context.Context, id int64) (LedgerMetadata, error) {
	if id < 0 {
		return LedgerMetadata{}, fmt.Errorf("%w: ledger id %d is negative", ErrNoSuchLedger, id)
	}
	if c.isClosed() {
		return LedgerMetadata{}, ErrClientClosed
	}
	md, _, err := c.md.ReadLedger(ctx, id)
	if err != nil {
		return LedgerMetadata{}, publicError(fmt.Errorf("client: ledger metadata %d: %w", id, err))
	}
	return newLedgerMetadata(id, md), nil
}

// WatchLedgerMetadata yields a ledger's current metadata, then each newer
// version as the metadata store reports it (Java's
// LedgerManager.registerLedgerMetadataListener with a
// LedgerMetadataListener). It uses the store's watch (an etcd watch, a
// ZooKeeper data watch), never polling. Consecutive changes may be
// coalesced into the newest one.
//
// The sequence ends after it yields the CLOSED metadata, when the ledger is
// deleted (after yielding ErrNoSuchLedger), when ctx ends (yielding
// ctx.Err()), when the watch fails (yielding the error), or when the loop
// stops. A ledger absent at the start (or a negative id) yields
// ErrNoSuchLedger; a closed client, an error.
func (c *Client) WatchLedgerMetadata(ctx context.Context, id int64) iter.Seq2[LedgerMetadata, error] {
	return func(yield func(LedgerMetadata, error) bool) {
		if id < 0 {
			yield(LedgerMetadata{}, fmt.Errorf("%w: ledger id %d is negative", ErrNoSuchLedger, id))
			return
		}
		if c.isClosed() {
			yield(LedgerMetadata{}, ErrClientClosed)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel) // the client closing ends the watch
		defer stop()
		events, err := c.md.WatchLedger(ctx, id)
		if err != nil {
			yield(LedgerMetadata{}, c.watchErr(ctx, id, err))
			return
		}
		for {
			var ev metadata.LedgerEvent
			var ok bool
			select {
			case ev, ok = <-events:
			case <-ctx.Done():
				yield(LedgerMetadata{}, c.watchErr(ctx, id, ctx.Err()))
				return
			}
			switch {
			case !ok:
				// The driver closes the channel when ctx ends or it is closed.
				yield(LedgerMetadata{}, c.watchErr(ctx, id, fmt.Errorf("metadata watch ended")))
				return
			case ev.Err != nil:
				yield(LedgerMetadata{}, c.watchErr(ctx, id, ev.Err))
				return
			case ev.Deleted:
				yield(LedgerMetadata{}, fmt.Errorf("%w: ledger %d was deleted", ErrNoSuchLedger, id))
				return
			}
			m := newLedgerMetadata(id, ev.Metadata)
			if !yield(m, nil) || m.IsClosed() {
				return
			}
		}
	}
}

// watchErr names the ledger in a watch error, reporting a closed client as
// ErrClientClosed rather than as the cancellation it caused.
func (c *Client) watchErr(ctx context.Context, id int64, err error) error {
	if c.ctx.Err() != nil && ctx.Err() != nil {
		return ErrClientClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return publicError(fmt.Errorf("client: watch ledger metadata %d: %w", id, err))
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.closed
}

// Metadata returns the ledger's metadata as this handle last knew it
// (Java's ReadHandle.getLedgerMetadata): as read at open, or as refreshed
// by a later read or ReadLastAddConfirmed that found the ledger closed.
func (r *ReadHandle) Metadata() LedgerMetadata {
	md, _ := r.snapshot()
	return newLedgerMetadata(r.id, md)
}

// Metadata returns the ledger's metadata as the writer holds it (Java's
// WriteHandle.getLedgerMetadata): the ensembles after every ensemble
// change it made and, once closed, the close values.
func (w *WriteHandle) Metadata() LedgerMetadata {
	return *w.meta.Load()
}
