package wire

// Protocol is the encoding a connection speaks.
type Protocol uint8

const (
	// ProtocolV3 is the protobuf encoding (BookkeeperProtocol.proto).
	ProtocolV3 Protocol = 3
	// ProtocolV2 is the binary "pre-v3" encoding.
	ProtocolV2 Protocol = 2
)

func (p Protocol) String() string {
	switch p {
	case ProtocolV3:
		return "v3"
	case ProtocolV2:
		return "v2"
	}
	return "unknown-protocol"
}

// Op is a bookie operation, numbered as BookKeeper's v3 OperationType. v2
// opcodes are translated to these values by the v2 codec.
type Op int32

const (
	OpReadEntry                Op = 1
	OpAddEntry                 Op = 2
	OpRangeReadEntry           Op = 3 // declared by BookKeeper, never implemented
	OpRangeAddEntry            Op = 4 // declared by BookKeeper, never implemented
	OpAuth                     Op = 5
	OpWriteLAC                 Op = 6
	OpReadLAC                  Op = 7
	OpGetBookieInfo            Op = 8
	OpStartTLS                 Op = 9
	OpForceLedger              Op = 10
	OpGetListOfEntriesOfLedger Op = 11
	OpBatchReadEntry           Op = 12 // v2 only
)

// Valid reports whether o is one of the OperationType values of 4.17. A v3
// message carrying any other value does not parse (proto2 closed enum).
func (o Op) Valid() bool { return o >= OpReadEntry && o <= OpBatchReadEntry }

func (o Op) String() string {
	switch o {
	case OpReadEntry:
		return "READ_ENTRY"
	case OpAddEntry:
		return "ADD_ENTRY"
	case OpRangeReadEntry:
		return "RANGE_READ_ENTRY"
	case OpRangeAddEntry:
		return "RANGE_ADD_ENTRY"
	case OpAuth:
		return "AUTH"
	case OpWriteLAC:
		return "WRITE_LAC"
	case OpReadLAC:
		return "READ_LAC"
	case OpGetBookieInfo:
		return "GET_BOOKIE_INFO"
	case OpStartTLS:
		return "START_TLS"
	case OpForceLedger:
		return "FORCE_LEDGER"
	case OpGetListOfEntriesOfLedger:
		return "GET_LIST_OF_ENTRIES_OF_LEDGER"
	case OpBatchReadEntry:
		return "BATCH_READ_ENTRY"
	}
	return "UNKNOWN_OP"
}

// Protocol versions carried in a v3 BKPacketHeader.
const (
	VersionOne   int32 = 1
	VersionTwo   int32 = 2
	VersionThree int32 = 3
)

// HighPriority is the priority the Java client puts on recovery traffic, and
// what a v2 FLAG_HIGH_PRIORITY becomes in Header.Priority.
const HighPriority uint32 = 100

// LastAddConfirmed is the entry id that asks for the last entry (or LAC) and
// that means "no entry" in LAC fields.
const LastAddConfirmed int64 = -1

// MasterKeyLength is the length of a ledger master key: SHA-1(“ledger”‖password).
// v2 packets carry exactly this many key bytes.
const MasterKeyLength = 20

// Header is the packet header of a message.
//
// v3: the BKPacketHeader (Version is a ProtocolVersion, normally 3). v2: the
// packet header int; Version is its version byte (0, 1 or 2), TxnID is the
// BATCH_READ requestId (zero for other ops), and a v2 FLAG_HIGH_PRIORITY is
// Priority = HighPriority.
type Header struct {
	Version     int32
	Op          Op
	TxnID       uint64
	Priority    uint32
	HasPriority bool // v3 only: priority was present on the wire
}

// ReadFlag is ReadRequest.Flag: a single value, not a bit set.
type ReadFlag int32

const (
	ReadFlagNone           ReadFlag = 0
	ReadFlagFenceLedger    ReadFlag = 1
	ReadFlagEntryPiggyback ReadFlag = 2
)

// AddFlag is AddRequest.Flag.
type AddFlag int32

const (
	AddFlagNone        AddFlag = 0
	AddFlagRecoveryAdd AddFlag = 1
)

// WriteFlagDeferredSync is the AddRequest.writeFlags bit that lets a bookie
// acknowledge before the entry is durable; FORCE_LEDGER makes it durable.
const WriteFlagDeferredSync int32 = 1

// GetBookieInfoRequest.requested bits.
const (
	BookieInfoTotalDiskCapacity int64 = 0x1
	BookieInfoFreeDiskSpace     int64 = 0x2
)

// ReadRequest reads one entry (EntryID = -1: the highest stored entry),
// fences the ledger (Flag = ReadFlagFenceLedger, with MasterKey) or long-polls
// the LAC (HasPreviousLAC, with TimeoutMs).
type ReadRequest struct {
	LedgerID       int64
	EntryID        int64
	MasterKey      []byte // nil when absent; aliases the frame
	PreviousLAC    int64
	TimeoutMs      int64
	Flag           ReadFlag
	HasMasterKey   bool
	HasPreviousLAC bool
	HasTimeout     bool
}

// AddRequest stores Body, a digested entry (internal/digest). The bookie takes
// the ledger and entry ids from Body's first 16 bytes; v2 carries no others, so
// the v2 decoder fills LedgerID and EntryID from Body.
type AddRequest struct {
	LedgerID      int64
	EntryID       int64
	MasterKey     []byte // aliases the frame
	Body          []byte // aliases the frame
	WriteFlags    int32
	Flag          AddFlag
	HasWriteFlags bool
}

// AuthMessage is the AUTH request and response payload.
type AuthMessage struct {
	PluginName string
	Payload    []byte // never nil when encoded: proto2 requires the field
}

// WriteLACRequest stores an explicit LAC body (digest.LACBody layout).
type WriteLACRequest struct {
	LedgerID  int64
	LAC       int64
	MasterKey []byte
	Body      []byte
}

// GetBookieInfoRequest asks for disk figures (BookieInfo* bits).
type GetBookieInfoRequest struct {
	Requested    int64
	HasRequested bool
}

// BatchReadRequest is v2 BATCH_READ_ENTRY: up to MaxCount entries (≤ 0: no
// limit) from StartEntryID on, the response frame at most MaxSize bytes. The
// request id travels in Header.TxnID.
type BatchReadRequest struct {
	LedgerID     int64
	StartEntryID int64
	MaxCount     int32
	MaxSize      int64
	MasterKey    []byte // present only when Fence
	Fence        bool
}

// ContextPair is one entry of a v3 requestContext (logging context).
type ContextPair struct {
	Key, Value string
}

// Body names a sub-message of a Request or Response.
type Body uint16

// The sub-messages. A v3 message may carry several; exactly the one matching
// Header.Op is meaningful.
const (
	BodyRead Body = 1 << iota
	BodyAdd
	BodyAuth
	BodyWriteLAC
	BodyReadLAC
	BodyGetBookieInfo
	BodyStartTLS
	BodyForceLedger
	BodyGetListOfEntries
	BodyBatchRead
)

// BodyOf returns the sub-message that carries op's request or response, and
// false for ops that have none (RANGE_*; BATCH_READ over v3).
func BodyOf(op Op) (Body, bool) {
	switch op {
	case OpReadEntry:
		return BodyRead, true
	case OpAddEntry:
		return BodyAdd, true
	case OpAuth:
		return BodyAuth, true
	case OpWriteLAC:
		return BodyWriteLAC, true
	case OpReadLAC:
		return BodyReadLAC, true
	case OpGetBookieInfo:
		return BodyGetBookieInfo, true
	case OpStartTLS:
		return BodyStartTLS, true
	case OpForceLedger:
		return BodyForceLedger, true
	case OpGetListOfEntriesOfLedger:
		return BodyGetListOfEntries, true
	case OpBatchReadEntry:
		return BodyBatchRead, true
	}
	return 0, false
}

// Request is one request from a client to a bookie. Has records which
// sub-messages are present; the others hold zero values. It is a plain value
// so a connection can decode into one Request after another without
// allocating.
type Request struct {
	Protocol Protocol
	Header   Header
	Has      Body

	Read                ReadRequest
	Add                 AddRequest
	Auth                AuthMessage
	WriteLAC            WriteLACRequest
	ReadLACLedgerID     int64 // ReadLacRequest.ledgerId
	GetBookieInfo       GetBookieInfoRequest
	ForceLedgerID       int64 // ForceLedgerRequest.ledgerId
	ListEntriesLedgerID int64 // GetListOfEntriesOfLedgerRequest.ledgerId
	BatchRead           BatchReadRequest

	Context []ContextPair // v3 requestContext; allocated only when present
}

// ReadResponse answers READ_ENTRY (v2: READ).
type ReadResponse struct {
	Status                Status
	LedgerID              int64
	EntryID               int64
	Body                  []byte
	MaxLAC                int64
	LACUpdateTimestampMs  int64
	HasBody               bool
	HasMaxLAC             bool
	HasLACUpdateTimestamp bool
}

// AddResponse answers ADD_ENTRY.
type AddResponse struct {
	Status   Status
	LedgerID int64
	EntryID  int64
}

// ReadLACResponse answers READ_LAC.
type ReadLACResponse struct {
	Status           Status
	LedgerID         int64
	LACBody          []byte
	LastEntryBody    []byte
	HasLACBody       bool
	HasLastEntryBody bool
}

// GetBookieInfoResponse answers GET_BOOKIE_INFO. Folio sends only the two disk
// figures; the other optional fields of the schema are decoded and dropped.
type GetBookieInfoResponse struct {
	Status               Status
	TotalDiskCapacity    int64
	FreeDiskSpace        int64
	HasTotalDiskCapacity bool
	HasFreeDiskSpace     bool
}

// LedgerStatusResponse is the shape shared by WRITE_LAC and FORCE_LEDGER
// responses: a status and a ledger id.
type LedgerStatusResponse struct {
	Status   Status
	LedgerID int64
}

// ListEntriesResponse answers GET_LIST_OF_ENTRIES_OF_LEDGER.
type ListEntriesResponse struct {
	Status       Status
	LedgerID     int64
	Availability []byte // AvailabilityOfEntriesOfLedger encoding
	HasAvail     bool
}

// BatchReadResponse answers v2 BATCH_READ_ENTRY. Entries[i] is entry
// StartEntryID+i; the request id travels in Header.TxnID.
type BatchReadResponse struct {
	Status       Status
	LedgerID     int64
	StartEntryID int64
	Entries      [][]byte
}

// Response is one response from a bookie. Status is the top-level status (v2:
// the rc); the sub-response matching Header.Op carries the details. For a v2
// AUTH response, which has no rc, Status is StatusOK.
type Response struct {
	Protocol Protocol
	Header   Header
	Status   Status
	Has      Body

	Read          ReadResponse
	Add           AddResponse
	Auth          AuthMessage
	WriteLAC      LedgerStatusResponse
	ReadLAC       ReadLACResponse
	GetBookieInfo GetBookieInfoResponse
	ForceLedger   LedgerStatusResponse
	ListEntries   ListEntriesResponse
	BatchRead     BatchReadResponse
}
