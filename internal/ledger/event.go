package ledger

import "github.com/foliodb/folio/internal/metadata"

// Event is an input to a machine's Step. Every Event type is declared in
// this file.
type Event interface{ isEvent() }

// AddResponse is a bookie's answer to an ADD_ENTRY (normal or recovery) for
// EntryID. Err is nil when the bookie stored the entry durably, its
// *wire.StatusError otherwise, or a transport error (ErrTimeout, a lost
// connection) when no answer came.
type AddResponse struct {
	Bookie  metadata.BookieID
	EntryID int64
	Err     error
}

// ReadResponse is a bookie's answer to a READ_ENTRY of EntryID (-1 for the
// "last entry" read, fenced or not). Body is the entry body as stored
// (digested, see internal/digest); the machine verifies it. The machine does
// not keep Body past Step except as the payload of an entry it delivers.
type ReadResponse struct {
	Bookie  metadata.BookieID
	EntryID int64
	Body    []byte
	Err     error
}

// BatchReadResponse is a bookie's answer to a BATCH_READ_ENTRY from
// StartEntryID: Bodies[i] is entry StartEntryID+i as stored (digested).
// Err is the bookie's status for the first entry, a transport error, or
// ErrBatchReadUnsupported. The machine does not keep Bodies past Step
// except as the payloads of the entries it delivers.
type BatchReadResponse struct {
	Bookie       metadata.BookieID
	StartEntryID int64
	Bodies       [][]byte
	Err          error
}

// ReadLACResponse is a bookie's answer to a READ_LAC: its explicit LAC body
// and its last entry body, either of which may be absent (nil).
type ReadLACResponse struct {
	Bookie        metadata.BookieID
	LACBody       []byte
	LastEntryBody []byte
	Err           error
}

// MetadataWritten is the result of the compare-and-set a WriteMetadata
// effect asked for: the new version, or an error (metadata.ErrBadVersion
// when someone else wrote first; anything else is a store failure).
type MetadataWritten struct {
	Version metadata.Version
	Err     error
}

// MetadataRead is the result of a ReadMetadata effect. The machine takes
// ownership of Metadata.
type MetadataRead struct {
	Metadata *metadata.LedgerMetadata
	Version  metadata.Version
	Err      error
}

// WritableBookies replaces the machine's view of the writable bookies (the
// registrations in the metadata store) that ensemble changes choose from.
// The shell sends it at start and whenever the set changes.
type WritableBookies struct {
	Bookies []metadata.BookieID
}

// ForceResponse is a bookie's answer to the FORCE_LEDGER of force ID.
type ForceResponse struct {
	ID     int64
	Bookie metadata.BookieID
	Err    error
}

// LongPollResponse is a bookie's answer to a long poll: its maxLAC, and the
// piggybacked entry EntryID (-1: none) with its body.
type LongPollResponse struct {
	Bookie    metadata.BookieID
	MaxLAC    int64
	HasMaxLAC bool
	EntryID   int64
	Body      []byte
	Err       error
}

// Tick tells a machine that one of its TickIntervals passed. The machine
// decides what that means (a Read asks the next replica of slow entries, a
// Writer sends its explicit LAC); machines with no timers ignore it.
type Tick struct{}

// Events returns one value of every Event type (effect_test.go checks that
// the list is complete).
func Events() []Event {
	return []Event{
		AddResponse{}, ReadResponse{}, BatchReadResponse{}, ReadLACResponse{}, ForceResponse{}, LongPollResponse{},
		MetadataWritten{}, MetadataRead{}, WritableBookies{}, Tick{},
	}
}

func (AddResponse) isEvent()       {}
func (ReadResponse) isEvent()      {}
func (BatchReadResponse) isEvent() {}
func (ReadLACResponse) isEvent()   {}
func (MetadataWritten) isEvent()   {}
func (MetadataRead) isEvent()      {}
func (WritableBookies) isEvent()   {}
func (ForceResponse) isEvent()     {}
func (LongPollResponse) isEvent()  {}
func (Tick) isEvent()              {}
