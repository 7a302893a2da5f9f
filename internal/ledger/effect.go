package ledger

import (
	"fmt"
	"strings"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
)

// Effect is an output of a machine, returned by Ready. Every Effect type
// is declared in this file: the requests a shell carries out (Send*,
// WriteMetadata, ReadMetadata, BookieSlow) and the completions it hands to
// the application (*Complete).
type Effect interface{ isEffect() }

// SendAdd asks the shell to send ADD_ENTRY for EntryID to each of Bookies.
// The body is digest.Digester.AppendEntry(ledgerID, EntryID, LAC, Length,
// Payload): LAC is the piggybacked last add confirmed and Length the
// cumulative ledger length including this entry. A resend to a replacement
// bookie carries the same values, so the body is the same bytes. Recovery
// sets AddFlagRecoveryAdd (the bookie skips its fence check). Payload is
// shared and must not be modified. Each bookie's answer comes back as an
// AddResponse.
type SendAdd struct {
	Bookies  []metadata.BookieID
	EntryID  int64
	LAC      int64
	Length   int64
	Payload  []byte
	Recovery bool
	// DeferredSync sets WriteFlagDeferredSync: the bookie may answer
	// before the entry is durable (spec §1.8).
	DeferredSync bool
}

// SendRead asks the shell to send READ_ENTRY of EntryID (-1: the bookie's
// last entry) to each of Bookies. Fence sets ReadFlagFenceLedger with the
// master key (and, as Java does, high priority): the bookie fences the
// ledger durably before it answers. Answers come back as ReadResponse.
type SendRead struct {
	Bookies []metadata.BookieID
	EntryID int64
	Fence   bool
}

// SendBatchRead asks the shell to send one BATCH_READ_ENTRY (v2) to Bookie:
// up to MaxCount entries from StartEntryID on, the answer frame at most
// MaxSize bytes. The answer comes back as a BatchReadResponse.
type SendBatchRead struct {
	Bookie       metadata.BookieID
	StartEntryID int64
	MaxCount     int32
	MaxSize      int64
}

// SendReadLAC asks the shell to send READ_LAC to each of Bookies (v3 only).
// Answers come back as ReadLACResponse.
type SendReadLAC struct {
	Bookies []metadata.BookieID
}

// WriteMetadata asks the shell to compare-and-set the ledger's metadata to
// Metadata if the stored version is still Expected, and to Step a
// MetadataWritten. Metadata belongs to the machine: do not modify it.
type WriteMetadata struct {
	Metadata *metadata.LedgerMetadata
	Expected metadata.Version
}

// ReadMetadata asks the shell to read the ledger's metadata and Step a
// MetadataRead.
type ReadMetadata struct{}

// AddComplete reports the outcome of the add of EntryID. With Err nil the
// entry is acknowledged: it and every lower entry are on Qa bookies of their
// write sets in metadata that the store holds. AddCompletes of one writer
// come in entry order; acknowledgements are contiguous from entry 0.
type AddComplete struct {
	EntryID int64
	Err     error
}

// CloseComplete reports the end of the writer's close (asked by Close, or
// started by the writer itself after an unrecoverable error): the ledger is
// CLOSED at LastEntryID and Length, or Err says why not.
type CloseComplete struct {
	LastEntryID int64
	Length      int64
	Err         error
}

// LACComplete reports the result of a ReadLAC: the highest LAC seen among
// covering answers, and the ledger length the answer carrying it gave,
// which is the length through entry EntryID (the entry that carried the
// LAC; -1 if none did), not through entry LAC.
type LACComplete struct {
	LAC     int64
	Length  int64
	EntryID int64
	Err     error
}

// EntryComplete delivers one entry of a Read, in ascending entry order.
type EntryComplete struct {
	Entry digest.Entry
}

// ReadComplete ends a Read: Err nil when every entry of the range was
// delivered by an EntryComplete, otherwise the error of the first entry
// that could not be read (entries before it were delivered).
type ReadComplete struct {
	Err error
}

// BatchReadComplete ends a BatchRead: Entries, consecutive from the
// range's first entry, at least one when Err is nil. With Err set,
// Fallback reports that a bookie could not serve batch reads (or lost its
// connection on one, as a bookie without them does): the shell should
// read the range with single reads instead. Failed lists the bookies that
// answered with an error, in the order they did.
type BatchReadComplete struct {
	Entries  []digest.Entry
	Err      error
	Fallback bool
	Failed   []metadata.BookieID
}

// RecoveryComplete ends a recovery: the CLOSED metadata and its version
// (written by this recovery or adopted from whoever closed first), or Err
// (wrapping ErrLedgerRecovery or a refusal such as ErrUnauthorized) with the
// ledger left IN_RECOVERY.
type RecoveryComplete struct {
	Metadata *metadata.LedgerMetadata
	Version  metadata.Version
	Err      error
}

// SendForce asks the shell to send FORCE_LEDGER to each of Bookies; the
// answers come back as ForceResponse with ID.
type SendForce struct {
	ID      int64
	Bookies []metadata.BookieID
}

// SendWriteLAC asks the shell to send WRITE_LAC with LAC (body
// digest.Digester.AppendLAC) to each of Bookies. Answers are not stepped.
type SendWriteLAC struct {
	Bookies []metadata.BookieID
	LAC     int64
}

// SendLongPoll asks the shell to send a long-poll READ_ENTRY (entry -1,
// previousLAC, timeOut, ENTRY_PIGGYBACK) to each of Bookies. Answers come
// back as LongPollResponse.
type SendLongPoll struct {
	Bookies     []metadata.BookieID
	PreviousLAC int64
	TimeoutMs   int64
}

// BookieSlow reports a bookie that did not answer a read within the
// speculative delay; the shell orders reads away from it for a while.
type BookieSlow struct {
	Bookie metadata.BookieID
}

// ForceComplete ends force ID: Err nil when every entry up to LAC is
// durable on every bookie of its write set. LAC is the writer's LAC after
// it.
type ForceComplete struct {
	ID  int64
	LAC int64
	Err error
}

// LongPollComplete ends a LongPollLAC: LAC is above the PreviousLAC asked
// about when something new was confirmed (Entry is then entry
// PreviousLAC+1 if an answer carried it), or equal to it for "no new entry".
type LongPollComplete struct {
	LAC   int64
	Entry *digest.Entry
	Err   error
}

// Effects returns one value of every Effect type, I/O requests first, then
// completions. Shells test against it that they handle every effect
// (effect_test.go checks that the list is complete).
func Effects() []Effect {
	return []Effect{
		SendAdd{}, SendRead{}, SendBatchRead{}, SendReadLAC{}, SendForce{}, SendWriteLAC{}, SendLongPoll{},
		WriteMetadata{}, ReadMetadata{}, BookieSlow{},
		AddComplete{}, CloseComplete{}, ForceComplete{}, LACComplete{}, LongPollComplete{},
		EntryComplete{}, ReadComplete{}, BatchReadComplete{}, RecoveryComplete{},
	}
}

func (SendAdd) isEffect()           {}
func (SendRead) isEffect()          {}
func (SendReadLAC) isEffect()       {}
func (SendBatchRead) isEffect()     {}
func (BatchReadComplete) isEffect() {}
func (WriteMetadata) isEffect()     {}
func (ReadMetadata) isEffect()      {}
func (AddComplete) isEffect()       {}
func (CloseComplete) isEffect()     {}
func (LACComplete) isEffect()       {}
func (EntryComplete) isEffect()     {}
func (ReadComplete) isEffect()      {}
func (RecoveryComplete) isEffect()  {}
func (SendForce) isEffect()         {}
func (SendWriteLAC) isEffect()      {}
func (SendLongPoll) isEffect()      {}
func (BookieSlow) isEffect()        {}
func (ForceComplete) isEffect()     {}
func (LongPollComplete) isEffect()  {}

// The String methods give the one-line form used in traces.

func (e SendAdd) String() string {
	kind := "add"
	if e.Recovery {
		kind = "recovery-add"
	}
	return fmt.Sprintf("send %s e%d lac=%d len=%d -> %s", kind, e.EntryID, e.LAC, e.Length, bookieList(e.Bookies))
}

func (e SendRead) String() string {
	kind := "read"
	if e.Fence {
		kind = "fence-read"
	}
	return fmt.Sprintf("send %s e%d -> %s", kind, e.EntryID, bookieList(e.Bookies))
}

func (e SendBatchRead) String() string {
	return fmt.Sprintf("send batch-read e%d max=%d size=%d -> %s", e.StartEntryID, e.MaxCount, e.MaxSize, e.Bookie)
}

func (e SendReadLAC) String() string { return "send read-lac -> " + bookieList(e.Bookies) }

func (e WriteMetadata) String() string {
	return fmt.Sprintf("write metadata expected=v%d: %s", e.Expected, FormatMetadata(e.Metadata))
}

func (ReadMetadata) String() string { return "read metadata" }

func (e AddComplete) String() string {
	return fmt.Sprintf("add e%d complete: %s", e.EntryID, errString(e.Err))
}

func (e CloseComplete) String() string {
	if e.Err != nil {
		return "close complete: " + errString(e.Err)
	}
	return fmt.Sprintf("close complete: last=%d len=%d", e.LastEntryID, e.Length)
}

func (e LACComplete) String() string {
	if e.Err != nil {
		return "lac complete: " + errString(e.Err)
	}
	return fmt.Sprintf("lac complete: lac=%d len=%d", e.LAC, e.Length)
}

func (e EntryComplete) String() string {
	return fmt.Sprintf("entry e%d: %q (lac=%d len=%d)", e.Entry.EntryID, e.Entry.Payload, e.Entry.LAC, e.Entry.Length)
}

func (e ReadComplete) String() string { return "read complete: " + errString(e.Err) }

func (e BatchReadComplete) String() string {
	if e.Err != nil {
		return fmt.Sprintf("batch-read complete: %s fallback=%v", errString(e.Err), e.Fallback)
	}
	return fmt.Sprintf("batch-read complete: %d entries from e%d", len(e.Entries), e.Entries[0].EntryID)
}

func (e RecoveryComplete) String() string {
	if e.Err != nil {
		return "recovery complete: " + errString(e.Err)
	}
	return fmt.Sprintf("recovery complete v%d: %s", e.Version, FormatMetadata(e.Metadata))
}

func (e SendForce) String() string {
	return fmt.Sprintf("send force #%d -> %s", e.ID, bookieList(e.Bookies))
}

func (e SendWriteLAC) String() string {
	return fmt.Sprintf("send write-lac lac=%d -> %s", e.LAC, bookieList(e.Bookies))
}

func (e SendLongPoll) String() string {
	return fmt.Sprintf("send long-poll prev=%d timeout=%dms -> %s", e.PreviousLAC, e.TimeoutMs, bookieList(e.Bookies))
}

func (e BookieSlow) String() string { return "bookie slow: " + string(e.Bookie) }

func (e ForceComplete) String() string {
	return fmt.Sprintf("force #%d complete: lac=%d %s", e.ID, e.LAC, errString(e.Err))
}

func (e LongPollComplete) String() string {
	if e.Err != nil {
		return "long-poll complete: " + errString(e.Err)
	}
	if e.Entry != nil {
		return fmt.Sprintf("long-poll complete: lac=%d entry e%d", e.LAC, e.Entry.EntryID)
	}
	return fmt.Sprintf("long-poll complete: lac=%d", e.LAC)
}

// FormatMetadata renders the protocol-relevant part of ledger metadata on
// one line: state, close values when CLOSED, and the ensembles.
func FormatMetadata(md *metadata.LedgerMetadata) string {
	if md == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString(md.State.String())
	if md.State == metadata.LedgerClosed {
		fmt.Fprintf(&b, " last=%d len=%d", md.LastEntryID, md.Length)
	}
	b.WriteString(" {")
	for i, s := range md.Ensembles {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", s.FirstEntryID, bookieList(s.Ensemble))
	}
	b.WriteByte('}')
	return b.String()
}

func bookieList(bs []metadata.BookieID) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = string(b)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
