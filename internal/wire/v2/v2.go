package v2

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/v3"
)

// Protocol versions of the packet header.
const (
	// LowestVersion is the oldest version a bookie serves (legacy headers).
	LowestVersion int32 = 0
	// CurrentVersion is the version clients send.
	CurrentVersion int32 = 2
)

// SupportedVersion reports whether a bookie serves packet-header version v;
// it answers any other version with wire.StatusBadVersion.
func SupportedVersion(v int32) bool { return v >= LowestVersion && v <= CurrentVersion }

// v2 opcodes.
const (
	opAdd       = 1
	opRead      = 2
	opAuth      = 3
	opBatchRead = 7
)

// Packet-header flags.
const (
	flagDoFencing    = 0x0001
	flagRecoveryAdd  = 0x0002
	flagHighPriority = 0x0004
)

// Fixed sizes of the layouts.
const (
	headerSize = 4
	// addMinSize: header, key and the body's ledgerId and entryId, which the
	// decoder reads (Java's decoder throws on a shorter ADD).
	addMinSize           = headerSize + wire.MasterKeyLength + 16
	readSize             = headerSize + 16
	batchReadSize        = headerSize + 8 + 8 + 8 + 4 + 8
	addResponseSize      = headerSize + 4 + 16
	readResponseSize     = headerSize + 4 + 16
	batchReadResponseMin = headerSize + 4 + 24
)

// ErrUnencodable is returned by the encoders for a message that protocol v2
// cannot express: an operation it lacks, a key that is not 20 bytes, write
// flags, a version outside 0..255, flags on a version-0 header, an ADD whose
// ids disagree with its body.
var ErrUnencodable = errors.New("message cannot be encoded in protocol v2")

// header is a decoded packet header.
type header struct {
	version uint8
	opcode  uint8
	flags   uint16
}

func parseHeader(h uint32) header {
	v := uint8(h >> 24)
	if v == 0 {
		// Legacy: the int is the opcode; Java takes its low byte.
		return header{opcode: uint8(h)}
	}
	return header{version: v, opcode: uint8(h >> 16), flags: uint16(h)}
}

// keyCarried reports whether a fencing READ or BATCH_READ of this version
// carries a master key: Java tests its signed version byte for >= 2.
func keyCarried(version uint8) bool { return int8(version) >= 2 }

func opFromV2(opcode uint8) (wire.Op, error) {
	switch opcode {
	case opAdd:
		return wire.OpAddEntry, nil
	case opRead:
		return wire.OpReadEntry, nil
	case opAuth:
		return wire.OpAuth, nil
	case opBatchRead:
		return wire.OpBatchReadEntry, nil
	}
	return 0, fmt.Errorf("%w: v2 opcode %d", wire.ErrUnknownOp, opcode)
}

func opToV2(op wire.Op) (uint8, bool) {
	switch op {
	case wire.OpAddEntry:
		return opAdd, true
	case wire.OpReadEntry:
		return opRead, true
	case wire.OpAuth:
		return opAuth, true
	case wire.OpBatchReadEntry:
		return opBatchRead, true
	}
	return 0, false
}

// appendHeader appends the packet header. Version 0 has no room for flags.
func appendHeader(dst []byte, version int32, opcode uint8, flags uint16) ([]byte, error) {
	if version < 0 || version > 0xff {
		return dst, fmt.Errorf("%w: version %d does not fit the header byte", ErrUnencodable, version)
	}
	if version == 0 {
		if flags != 0 {
			return dst, fmt.Errorf("%w: a version-0 header has no flags (0x%04x wanted)", ErrUnencodable, flags)
		}
		return binary.BigEndian.AppendUint32(dst, uint32(opcode)), nil
	}
	return binary.BigEndian.AppendUint32(dst, uint32(version)<<24|uint32(opcode)<<16|uint32(flags)), nil
}

func truncated(what string, have, want int) error {
	return fmt.Errorf("%w: v2 %s of %d bytes, needs at least %d", wire.ErrTruncated, what, have, want)
}

func be64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }
func be32(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }

// DecodeRequest decodes a v2 request payload (the frame without its length
// prefix) into req, overwriting all of it. req's byte fields alias payload.
// Errors wrap wire.ErrMalformed: wire.ErrUnknownOp for an opcode other than
// ADD, READ, AUTH and BATCH_READ, wire.ErrTruncated for a payload shorter
// than its layout, and the errors of the AuthMessage decoder. Any version
// decodes (see the package doc); the bookie checks SupportedVersion.
func DecodeRequest(payload []byte, req *wire.Request) error {
	*req = wire.Request{Protocol: wire.ProtocolV2}
	if len(payload) < headerSize {
		return truncated("request", len(payload), headerSize)
	}
	h := parseHeader(binary.BigEndian.Uint32(payload))
	op, err := opFromV2(h.opcode)
	if err != nil {
		return err
	}
	req.Header.Version = int32(h.version)
	req.Header.Op = op
	if h.flags&flagHighPriority != 0 && op != wire.OpAuth {
		req.Header.Priority = wire.HighPriority
	}
	switch op {
	case wire.OpAddEntry:
		if len(payload) < addMinSize {
			return truncated("ADD", len(payload), addMinSize)
		}
		a := &req.Add
		a.MasterKey = payload[headerSize : headerSize+wire.MasterKeyLength : headerSize+wire.MasterKeyLength]
		a.Body = payload[headerSize+wire.MasterKeyLength:]
		a.LedgerID = be64(a.Body)
		a.EntryID = be64(a.Body[8:])
		if h.flags&flagRecoveryAdd != 0 {
			a.Flag = wire.AddFlagRecoveryAdd
		}
		req.Has = wire.BodyAdd
	case wire.OpReadEntry:
		if len(payload) < readSize {
			return truncated("READ", len(payload), readSize)
		}
		r := &req.Read
		r.LedgerID = be64(payload[4:])
		r.EntryID = be64(payload[12:])
		if h.flags&flagDoFencing != 0 {
			r.Flag = wire.ReadFlagFenceLedger
			if keyCarried(h.version) {
				if len(payload) < readSize+wire.MasterKeyLength {
					return truncated("fencing READ", len(payload), readSize+wire.MasterKeyLength)
				}
				r.MasterKey = payload[readSize : readSize+wire.MasterKeyLength : readSize+wire.MasterKeyLength]
				r.HasMasterKey = true
			}
		}
		req.Has = wire.BodyRead
	case wire.OpBatchReadEntry:
		if len(payload) < batchReadSize {
			return truncated("BATCH_READ", len(payload), batchReadSize)
		}
		b := &req.BatchRead
		b.LedgerID = be64(payload[4:])
		b.StartEntryID = be64(payload[12:])
		req.Header.TxnID = binary.BigEndian.Uint64(payload[20:])
		b.MaxCount = be32(payload[28:])
		b.MaxSize = be64(payload[32:])
		if h.flags&flagDoFencing != 0 {
			b.Fence = true
			if keyCarried(h.version) {
				if len(payload) < batchReadSize+wire.MasterKeyLength {
					return truncated("fencing BATCH_READ", len(payload), batchReadSize+wire.MasterKeyLength)
				}
				b.MasterKey = payload[batchReadSize : batchReadSize+wire.MasterKeyLength : batchReadSize+wire.MasterKeyLength]
			}
		}
		req.Has = wire.BodyBatchRead
	case wire.OpAuth:
		if err := v3.DecodeAuthMessage(payload[headerSize:], &req.Auth); err != nil {
			return err
		}
		req.Has = wire.BodyAuth
	}
	return nil
}

// AppendRequest appends the v2 payload of req to dst (no length prefix).
// Header.Version is written as is (clients send CurrentVersion); Header.Op
// selects the layout and Header.Priority > 0 sets HIGH_PRIORITY.
//
//   - ADD: Add.Body must be at least 16 bytes and start with Add.LedgerID and
//     Add.EntryID; Add.MasterKey must be 20 bytes; WriteFlags must be 0.
//   - READ: Flag ReadFlagFenceLedger sets DO_FENCING and then, from version 2
//     on, needs a 20-byte MasterKey. Long-poll fields and the piggyback flag
//     are dropped, as Java's v2 client drops them (a plain READ is sent).
//   - BATCH_READ: Header.TxnID is the requestId; Fence as for READ.
//   - AUTH: flags are always 0.
//
// It fails with ErrUnencodable, returning dst unchanged, for anything v2
// cannot express.
func AppendRequest(dst []byte, req *wire.Request) ([]byte, error) {
	opcode, ok := opToV2(req.Header.Op)
	if !ok {
		return dst, fmt.Errorf("%w: operation %v", ErrUnencodable, req.Header.Op)
	}
	var prio uint16
	if req.Header.Priority > 0 {
		prio = flagHighPriority
	}
	version := req.Header.Version
	var err error
	switch opcode {
	case opAdd:
		a := &req.Add
		if len(a.MasterKey) != wire.MasterKeyLength {
			return dst, fmt.Errorf("%w: ADD master key of %d bytes, v2 carries exactly %d", ErrUnencodable, len(a.MasterKey), wire.MasterKeyLength)
		}
		if len(a.Body) < 16 {
			return dst, fmt.Errorf("%w: ADD body of %d bytes has no ledger and entry ids", ErrUnencodable, len(a.Body))
		}
		if be64(a.Body) != a.LedgerID || be64(a.Body[8:]) != a.EntryID {
			return dst, fmt.Errorf("%w: ADD of ledger %d entry %d, but the body is of ledger %d entry %d",
				ErrUnencodable, a.LedgerID, a.EntryID, be64(a.Body), be64(a.Body[8:]))
		}
		if a.WriteFlags != 0 {
			return dst, fmt.Errorf("%w: write flags 0x%x (v2 has no deferred sync)", ErrUnencodable, a.WriteFlags)
		}
		flags := prio
		if a.Flag == wire.AddFlagRecoveryAdd {
			flags |= flagRecoveryAdd
		}
		if dst, err = appendHeader(dst, version, opAdd, flags); err != nil {
			return dst, err
		}
		dst = append(dst, a.MasterKey...)
		return append(dst, a.Body...), nil
	case opRead:
		r := &req.Read
		flags := prio
		fence := r.Flag == wire.ReadFlagFenceLedger
		if fence {
			flags |= flagDoFencing
		}
		withKey := fence && version >= 0 && version <= 0xff && keyCarried(uint8(version))
		if withKey && len(r.MasterKey) != wire.MasterKeyLength {
			return dst, fmt.Errorf("%w: fencing READ master key of %d bytes, v2 carries exactly %d", ErrUnencodable, len(r.MasterKey), wire.MasterKeyLength)
		}
		if dst, err = appendHeader(dst, version, opRead, flags); err != nil {
			return dst, err
		}
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.LedgerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.EntryID))
		if withKey {
			dst = append(dst, r.MasterKey...)
		}
		return dst, nil
	case opBatchRead:
		b := &req.BatchRead
		flags := prio
		if b.Fence {
			flags |= flagDoFencing
		}
		withKey := b.Fence && version >= 0 && version <= 0xff && keyCarried(uint8(version))
		if withKey && len(b.MasterKey) != wire.MasterKeyLength {
			return dst, fmt.Errorf("%w: fencing BATCH_READ master key of %d bytes, v2 carries exactly %d", ErrUnencodable, len(b.MasterKey), wire.MasterKeyLength)
		}
		if dst, err = appendHeader(dst, version, opBatchRead, flags); err != nil {
			return dst, err
		}
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.LedgerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.StartEntryID))
		dst = binary.BigEndian.AppendUint64(dst, req.Header.TxnID)
		dst = binary.BigEndian.AppendUint32(dst, uint32(b.MaxCount))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.MaxSize))
		if withKey {
			dst = append(dst, b.MasterKey...)
		}
		return dst, nil
	default: // opAuth
		if dst, err = appendHeader(dst, version, opAuth, 0); err != nil {
			return dst, err
		}
		return v3.AppendAuthMessage(dst, &req.Auth), nil
	}
}

// DecodeResponse decodes a v2 response payload into resp, overwriting all of
// it. resp.Status and the sub-response's Status both hold the rc (EOK for
// AUTH, which has none). A READ body is kept only when rc is EOK (Java's
// client ignores it otherwise); BATCH_READ entries are decoded whatever the
// rc. Errors wrap wire.ErrMalformed: wire.ErrUnknownOp for an opcode outside
// ADD, READ, AUTH and BATCH_READ, wire.ErrTruncated for a short payload or an
// entry running past the end, and an unknown rc is an error too (the Java
// client closes the connection on it).
func DecodeResponse(payload []byte, resp *wire.Response) error {
	*resp = wire.Response{Protocol: wire.ProtocolV2}
	if len(payload) < headerSize {
		return truncated("response", len(payload), headerSize)
	}
	h := parseHeader(binary.BigEndian.Uint32(payload))
	op, err := opFromV2(h.opcode)
	if err != nil {
		return err
	}
	resp.Header.Version = int32(h.version)
	resp.Header.Op = op
	if op == wire.OpAuth {
		if err := v3.DecodeAuthMessage(payload[headerSize:], &resp.Auth); err != nil {
			return err
		}
		resp.Has = wire.BodyAuth
		return nil
	}
	min := addResponseSize
	if op == wire.OpBatchReadEntry {
		min = batchReadResponseMin
	}
	if len(payload) < min {
		return truncated(op.String()+" response", len(payload), min)
	}
	status, err := wire.StatusFromV2(be32(payload[4:]))
	if err != nil {
		return err
	}
	resp.Status = status
	ledgerID, entryID := be64(payload[8:]), be64(payload[16:])
	switch op {
	case wire.OpAddEntry:
		// Bytes after the fixed part are ignored, as Java does.
		resp.Add = wire.AddResponse{Status: status, LedgerID: ledgerID, EntryID: entryID}
		resp.Has = wire.BodyAdd
	case wire.OpReadEntry:
		r := &resp.Read
		r.Status, r.LedgerID, r.EntryID = status, ledgerID, entryID
		if status == wire.StatusOK {
			r.Body = payload[readResponseSize:]
			r.HasBody = true
		}
		resp.Has = wire.BodyRead
	case wire.OpBatchReadEntry:
		b := &resp.BatchRead
		b.Status, b.LedgerID, b.StartEntryID = status, ledgerID, entryID
		resp.Header.TxnID = binary.BigEndian.Uint64(payload[24:])
		rest := payload[batchReadResponseMin:]
		// Count first, so that Entries is allocated once and never larger
		// than the payload warrants.
		n := 0
		for p := rest; len(p) > 0; n++ {
			if len(p) < 4 {
				return fmt.Errorf("%w: BATCH_READ response entry %d: %d bytes left for a 4-byte length", wire.ErrTruncated, n, len(p))
			}
			l := be32(p)
			if l < 0 || int64(l) > int64(len(p)-4) {
				return fmt.Errorf("%w: BATCH_READ response entry %d of %d bytes, %d left", wire.ErrTruncated, n, l, len(p)-4)
			}
			p = p[4+int(l):]
		}
		if n > 0 {
			b.Entries = make([][]byte, n)
			for i := range b.Entries {
				l := int(be32(rest))
				b.Entries[i] = rest[4 : 4+l : 4+l]
				rest = rest[4+l:]
			}
		}
		resp.Has = wire.BodyBatchRead
	}
	return nil
}

// AppendResponse appends the v2 payload of resp to dst (no length prefix).
// The header gets Header.Version and the v2 opcode of Header.Op, flags 0.
// The rc is resp.Status, or the sub-response's Status when resp.Status is
// EOK (either may carry the error), translated by wire.Status.V2Code, which
// sends EUNKNOWNLEDGERSTATE as EIO. A READ body is sent only with rc EOK;
// BATCH_READ entries are sent as given (a bookie sends none with an error).
// It fails with ErrUnencodable, returning dst unchanged, for an operation v2
// lacks, a version outside 0..255 or an entry too large for an int32 length.
func AppendResponse(dst []byte, resp *wire.Response) ([]byte, error) {
	opcode, ok := opToV2(resp.Header.Op)
	if !ok {
		return dst, fmt.Errorf("%w: operation %v", ErrUnencodable, resp.Header.Op)
	}
	start := len(dst)
	var err error
	if dst, err = appendHeader(dst, resp.Header.Version, opcode, 0); err != nil {
		return dst, err
	}
	rc := func(sub wire.Status) int32 {
		if resp.Status != wire.StatusOK {
			return resp.Status.V2Code()
		}
		return sub.V2Code()
	}
	switch opcode {
	case opAdd:
		a := &resp.Add
		dst = binary.BigEndian.AppendUint32(dst, uint32(rc(a.Status)))
		dst = binary.BigEndian.AppendUint64(dst, uint64(a.LedgerID))
		return binary.BigEndian.AppendUint64(dst, uint64(a.EntryID)), nil
	case opRead:
		r := &resp.Read
		code := rc(r.Status)
		dst = binary.BigEndian.AppendUint32(dst, uint32(code))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.LedgerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.EntryID))
		if code == 0 {
			dst = append(dst, r.Body...)
		}
		return dst, nil
	case opBatchRead:
		b := &resp.BatchRead
		for i, e := range b.Entries {
			if int64(len(e)) > 1<<31-1 {
				return dst[:start], fmt.Errorf("%w: BATCH_READ entry %d of %d bytes", ErrUnencodable, i, len(e))
			}
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(rc(b.Status)))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.LedgerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.StartEntryID))
		dst = binary.BigEndian.AppendUint64(dst, resp.Header.TxnID)
		for _, e := range b.Entries {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(e)))
			dst = append(dst, e...)
		}
		return dst, nil
	default: // opAuth: no rc
		return v3.AppendAuthMessage(dst, &resp.Auth), nil
	}
}
