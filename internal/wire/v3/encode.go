package v3

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/foliodb/folio/internal/wire"
)

// AppendRequest appends req encoded as a v3 Request payload (no frame
// prefix) to dst. It writes req.Header and the sub-messages in req.Has (and
// req.Context), in field-number order: the bytes equal deterministic
// proto.Marshal of the same message. It fails, returning dst unchanged,
// when req cannot be sent as a valid v3 message (see the package doc).
func AppendRequest(dst []byte, req *wire.Request) ([]byte, error) {
	if err := checkRequest(req); err != nil {
		return dst, fmt.Errorf("v3 Request: %w", err)
	}
	dst = appendHeader(dst, &req.Header)
	has := req.Has
	if has&wire.BodyRead != 0 {
		r := &req.Read
		dst = appendMessageTag(dst, fieldRead, sizeReadRequest(r))
		dst = appendVarintField(dst, 1, uint64(r.LedgerID))
		dst = appendVarintField(dst, 2, uint64(r.EntryID))
		if r.HasMasterKey || r.MasterKey != nil {
			dst = appendBytesField(dst, 3, r.MasterKey)
		}
		if r.HasPreviousLAC || r.PreviousLAC != 0 {
			dst = appendVarintField(dst, 4, uint64(r.PreviousLAC))
		}
		if r.HasTimeout || r.TimeoutMs != 0 {
			dst = appendVarintField(dst, 5, uint64(r.TimeoutMs))
		}
		if r.Flag != wire.ReadFlagNone {
			dst = appendVarintField(dst, fieldFlag, uint64(int64(r.Flag)))
		}
	}
	if has&wire.BodyAdd != 0 {
		a := &req.Add
		dst = appendMessageTag(dst, fieldAdd, sizeAddRequest(a))
		dst = appendVarintField(dst, 1, uint64(a.LedgerID))
		dst = appendVarintField(dst, 2, uint64(a.EntryID))
		dst = appendBytesField(dst, 3, a.MasterKey)
		dst = appendBytesField(dst, 4, a.Body)
		if a.HasWriteFlags || a.WriteFlags != 0 {
			dst = appendVarintField(dst, 5, uint64(int64(a.WriteFlags)))
		}
		if a.Flag != wire.AddFlagNone {
			dst = appendVarintField(dst, fieldFlag, uint64(int64(a.Flag)))
		}
	}
	if has&wire.BodyAuth != 0 {
		dst = appendMessageTag(dst, fieldAuth, sizeAuth(&req.Auth))
		dst = AppendAuthMessage(dst, &req.Auth)
	}
	if has&wire.BodyWriteLAC != 0 {
		w := &req.WriteLAC
		dst = appendMessageTag(dst, fieldWriteLAC, sizeWriteLACRequest(w))
		dst = appendVarintField(dst, 1, uint64(w.LedgerID))
		dst = appendVarintField(dst, 2, uint64(w.LAC))
		dst = appendBytesField(dst, 3, w.MasterKey)
		dst = appendBytesField(dst, 4, w.Body)
	}
	if has&wire.BodyReadLAC != 0 {
		dst = appendLedgerIDMessage(dst, fieldReadLAC, req.ReadLACLedgerID)
	}
	if has&wire.BodyGetBookieInfo != 0 {
		g := &req.GetBookieInfo
		if g.HasRequested || g.Requested != 0 {
			dst = appendMessageTag(dst, fieldGetBookieInfo, sizeVarintField(1, uint64(g.Requested)))
			dst = appendVarintField(dst, 1, uint64(g.Requested))
		} else {
			dst = appendMessageTag(dst, fieldGetBookieInfo, 0)
		}
	}
	if has&wire.BodyStartTLS != 0 {
		dst = appendMessageTag(dst, fieldStartTLS, 0)
	}
	if has&wire.BodyForceLedger != 0 {
		dst = appendLedgerIDMessage(dst, fieldForceLedger, req.ForceLedgerID)
	}
	if has&wire.BodyGetListOfEntries != 0 {
		dst = appendLedgerIDMessage(dst, fieldListEntries, req.ListEntriesLedgerID)
	}
	for i := range req.Context {
		p := &req.Context[i]
		dst = appendMessageTag(dst, fieldContext, sizeStringField(1, p.Key)+sizeStringField(2, p.Value))
		dst = appendStringField(dst, 1, p.Key)
		dst = appendStringField(dst, 2, p.Value)
	}
	return dst, nil
}

// AppendResponse appends resp encoded as a v3 Response payload to dst, with
// the rules of AppendRequest.
func AppendResponse(dst []byte, resp *wire.Response) ([]byte, error) {
	if err := checkResponse(resp); err != nil {
		return dst, fmt.Errorf("v3 Response: %w", err)
	}
	dst = appendHeader(dst, &resp.Header)
	dst = appendVarintField(dst, fieldStatus, uint64(int64(resp.Status)))
	has := resp.Has
	if has&wire.BodyRead != 0 {
		r := &resp.Read
		dst = appendMessageTag(dst, fieldRead, sizeReadResponse(r))
		dst = appendVarintField(dst, 1, uint64(int64(r.Status)))
		dst = appendVarintField(dst, 2, uint64(r.LedgerID))
		dst = appendVarintField(dst, 3, uint64(r.EntryID))
		if r.HasBody || r.Body != nil {
			dst = appendBytesField(dst, 4, r.Body)
		}
		if r.HasMaxLAC || r.MaxLAC != 0 {
			dst = appendVarintField(dst, 5, uint64(r.MaxLAC))
		}
		if r.HasLACUpdateTimestamp || r.LACUpdateTimestampMs != 0 {
			dst = appendVarintField(dst, 6, uint64(r.LACUpdateTimestampMs))
		}
	}
	if has&wire.BodyAdd != 0 {
		a := &resp.Add
		dst = appendMessageTag(dst, fieldAdd, sizeVarintField(1, uint64(int64(a.Status)))+
			sizeVarintField(2, uint64(a.LedgerID))+sizeVarintField(3, uint64(a.EntryID)))
		dst = appendVarintField(dst, 1, uint64(int64(a.Status)))
		dst = appendVarintField(dst, 2, uint64(a.LedgerID))
		dst = appendVarintField(dst, 3, uint64(a.EntryID))
	}
	if has&wire.BodyAuth != 0 {
		dst = appendMessageTag(dst, fieldAuth, sizeAuth(&resp.Auth))
		dst = AppendAuthMessage(dst, &resp.Auth)
	}
	if has&wire.BodyWriteLAC != 0 {
		dst = appendLedgerStatus(dst, fieldWriteLAC, &resp.WriteLAC)
	}
	if has&wire.BodyReadLAC != 0 {
		r := &resp.ReadLAC
		dst = appendMessageTag(dst, fieldReadLAC, sizeReadLACResponse(r))
		dst = appendVarintField(dst, 1, uint64(int64(r.Status)))
		dst = appendVarintField(dst, 2, uint64(r.LedgerID))
		if r.HasLACBody || r.LACBody != nil {
			dst = appendBytesField(dst, 3, r.LACBody)
		}
		if r.HasLastEntryBody || r.LastEntryBody != nil {
			dst = appendBytesField(dst, 4, r.LastEntryBody)
		}
	}
	if has&wire.BodyGetBookieInfo != 0 {
		g := &resp.GetBookieInfo
		dst = appendMessageTag(dst, fieldGetBookieInfo, sizeGetBookieInfoResponse(g))
		dst = appendVarintField(dst, 1, uint64(int64(g.Status)))
		if g.HasTotalDiskCapacity || g.TotalDiskCapacity != 0 {
			dst = appendVarintField(dst, 2, uint64(g.TotalDiskCapacity))
		}
		if g.HasFreeDiskSpace || g.FreeDiskSpace != 0 {
			dst = appendVarintField(dst, 3, uint64(g.FreeDiskSpace))
		}
	}
	if has&wire.BodyStartTLS != 0 {
		dst = appendMessageTag(dst, fieldStartTLS, 0)
	}
	if has&wire.BodyForceLedger != 0 {
		dst = appendLedgerStatus(dst, fieldForceLedger, &resp.ForceLedger)
	}
	if has&wire.BodyGetListOfEntries != 0 {
		l := &resp.ListEntries
		size := sizeVarintField(1, uint64(int64(l.Status))) + sizeVarintField(2, uint64(l.LedgerID))
		if l.HasAvail || l.Availability != nil {
			size += sizeBytesField(3, len(l.Availability))
		}
		dst = appendMessageTag(dst, fieldListEntries, size)
		dst = appendVarintField(dst, 1, uint64(int64(l.Status)))
		dst = appendVarintField(dst, 2, uint64(l.LedgerID))
		if l.HasAvail || l.Availability != nil {
			dst = appendBytesField(dst, 3, l.Availability)
		}
	}
	return dst, nil
}

// AppendAuthMessage appends m encoded as an AuthMessage (no tag, no length)
// to dst: the payload of a v2 AUTH packet. Both fields are required, so both
// are always written, a nil Payload as an empty one.
func AppendAuthMessage(dst []byte, m *wire.AuthMessage) []byte {
	dst = appendStringField(dst, 1, m.PluginName)
	return appendBytesField(dst, 2, m.Payload)
}

// checkRequest refuses what a proto2 parser would reject or change.
func checkRequest(req *wire.Request) error {
	if err := checkHeader("Request.header", &req.Header); err != nil {
		return err
	}
	if err := checkHas(req.Has); err != nil {
		return err
	}
	if req.Has&wire.BodyRead != 0 && req.Read.Flag != wire.ReadFlagNone && !validReadFlag(req.Read.Flag) {
		return fmt.Errorf("%w: Request.readRequest.flag %d is not a ReadRequest.Flag", wire.ErrBadEncoding, req.Read.Flag)
	}
	if req.Has&wire.BodyAdd != 0 && req.Add.Flag != wire.AddFlagNone && !validAddFlag(req.Add.Flag) {
		return fmt.Errorf("%w: Request.addRequest.flag %d is not an AddRequest.Flag", wire.ErrBadEncoding, req.Add.Flag)
	}
	return nil
}

func checkResponse(resp *wire.Response) error {
	if err := checkHeader("Response.header", &resp.Header); err != nil {
		return err
	}
	if err := checkHas(resp.Has); err != nil {
		return err
	}
	if err := checkStatus("Response.status", resp.Status); err != nil {
		return err
	}
	has := resp.Has
	for _, c := range [...]struct {
		body wire.Body
		name string
		st   wire.Status
	}{
		{wire.BodyRead, "Response.readResponse.status", resp.Read.Status},
		{wire.BodyAdd, "Response.addResponse.status", resp.Add.Status},
		{wire.BodyWriteLAC, "Response.writeLacResponse.status", resp.WriteLAC.Status},
		{wire.BodyReadLAC, "Response.readLacResponse.status", resp.ReadLAC.Status},
		{wire.BodyGetBookieInfo, "Response.getBookieInfoResponse.status", resp.GetBookieInfo.Status},
		{wire.BodyForceLedger, "Response.forceLedgerResponse.status", resp.ForceLedger.Status},
		{wire.BodyGetListOfEntries, "Response.getListOfEntriesOfLedgerResponse.status", resp.ListEntries.Status},
	} {
		if has&c.body == 0 {
			continue
		}
		if err := checkStatus(c.name, c.st); err != nil {
			return err
		}
	}
	return nil
}

// checkHeader: version and operation are required enums; a value outside
// the enum would reach the peer as a missing required field.
func checkHeader(name string, h *wire.Header) error {
	if !validVersion(h.Version) {
		return fmt.Errorf("%w: %s.version %d is not a ProtocolVersion", wire.ErrMissingField, name, h.Version)
	}
	if !h.Op.Valid() {
		return fmt.Errorf("%w: %s.operation %d is not an OperationType", wire.ErrMissingField, name, int32(h.Op))
	}
	return nil
}

func checkStatus(name string, s wire.Status) error {
	if !validStatus(s) {
		return fmt.Errorf("%w: %s %d is not a StatusCode", wire.ErrMissingField, name, int32(s))
	}
	return nil
}

// checkHas refuses sub-messages v3 has no field for (BATCH_READ is v2 only).
func checkHas(has wire.Body) error {
	if extra := has &^ allV3Bodies; extra != 0 {
		return fmt.Errorf("%w: sub-message set %#x has no v3 encoding", wire.ErrBadEncoding, uint16(extra))
	}
	return nil
}

func appendHeader(dst []byte, h *wire.Header) []byte {
	size := sizeVarintField(fieldVersion, uint64(int64(h.Version))) +
		sizeVarintField(fieldOperation, uint64(int64(h.Op))) +
		sizeVarintField(fieldTxnID, h.TxnID)
	if h.HasPriority || h.Priority != 0 {
		size += sizeVarintField(fieldPriority, uint64(h.Priority))
	}
	dst = appendMessageTag(dst, fieldHeader, size)
	dst = appendVarintField(dst, fieldVersion, uint64(int64(h.Version)))
	dst = appendVarintField(dst, fieldOperation, uint64(int64(h.Op)))
	dst = appendVarintField(dst, fieldTxnID, h.TxnID)
	if h.HasPriority || h.Priority != 0 {
		dst = appendVarintField(dst, fieldPriority, uint64(h.Priority))
	}
	return dst
}

func sizeReadRequest(r *wire.ReadRequest) int {
	n := sizeVarintField(1, uint64(r.LedgerID)) + sizeVarintField(2, uint64(r.EntryID))
	if r.HasMasterKey || r.MasterKey != nil {
		n += sizeBytesField(3, len(r.MasterKey))
	}
	if r.HasPreviousLAC || r.PreviousLAC != 0 {
		n += sizeVarintField(4, uint64(r.PreviousLAC))
	}
	if r.HasTimeout || r.TimeoutMs != 0 {
		n += sizeVarintField(5, uint64(r.TimeoutMs))
	}
	if r.Flag != wire.ReadFlagNone {
		n += sizeVarintField(fieldFlag, uint64(int64(r.Flag)))
	}
	return n
}

func sizeAddRequest(a *wire.AddRequest) int {
	n := sizeVarintField(1, uint64(a.LedgerID)) + sizeVarintField(2, uint64(a.EntryID)) +
		sizeBytesField(3, len(a.MasterKey)) + sizeBytesField(4, len(a.Body))
	if a.HasWriteFlags || a.WriteFlags != 0 {
		n += sizeVarintField(5, uint64(int64(a.WriteFlags)))
	}
	if a.Flag != wire.AddFlagNone {
		n += sizeVarintField(fieldFlag, uint64(int64(a.Flag)))
	}
	return n
}

func sizeAuth(m *wire.AuthMessage) int {
	return sizeStringField(1, m.PluginName) + sizeBytesField(2, len(m.Payload))
}

func sizeWriteLACRequest(w *wire.WriteLACRequest) int {
	return sizeVarintField(1, uint64(w.LedgerID)) + sizeVarintField(2, uint64(w.LAC)) +
		sizeBytesField(3, len(w.MasterKey)) + sizeBytesField(4, len(w.Body))
}

func sizeReadResponse(r *wire.ReadResponse) int {
	n := sizeVarintField(1, uint64(int64(r.Status))) + sizeVarintField(2, uint64(r.LedgerID)) +
		sizeVarintField(3, uint64(r.EntryID))
	if r.HasBody || r.Body != nil {
		n += sizeBytesField(4, len(r.Body))
	}
	if r.HasMaxLAC || r.MaxLAC != 0 {
		n += sizeVarintField(5, uint64(r.MaxLAC))
	}
	if r.HasLACUpdateTimestamp || r.LACUpdateTimestampMs != 0 {
		n += sizeVarintField(6, uint64(r.LACUpdateTimestampMs))
	}
	return n
}

func sizeReadLACResponse(r *wire.ReadLACResponse) int {
	n := sizeVarintField(1, uint64(int64(r.Status))) + sizeVarintField(2, uint64(r.LedgerID))
	if r.HasLACBody || r.LACBody != nil {
		n += sizeBytesField(3, len(r.LACBody))
	}
	if r.HasLastEntryBody || r.LastEntryBody != nil {
		n += sizeBytesField(4, len(r.LastEntryBody))
	}
	return n
}

func sizeGetBookieInfoResponse(g *wire.GetBookieInfoResponse) int {
	n := sizeVarintField(1, uint64(int64(g.Status)))
	if g.HasTotalDiskCapacity || g.TotalDiskCapacity != 0 {
		n += sizeVarintField(2, uint64(g.TotalDiskCapacity))
	}
	if g.HasFreeDiskSpace || g.FreeDiskSpace != 0 {
		n += sizeVarintField(3, uint64(g.FreeDiskSpace))
	}
	return n
}

// appendLedgerIDMessage appends a ReadLacRequest, ForceLedgerRequest or
// GetListOfEntriesOfLedgerRequest as field num.
func appendLedgerIDMessage(dst []byte, num protowire.Number, ledgerID int64) []byte {
	dst = appendMessageTag(dst, num, sizeVarintField(1, uint64(ledgerID)))
	return appendVarintField(dst, 1, uint64(ledgerID))
}

// appendLedgerStatus appends a WriteLacResponse or ForceLedgerResponse as
// field num.
func appendLedgerStatus(dst []byte, num protowire.Number, r *wire.LedgerStatusResponse) []byte {
	dst = appendMessageTag(dst, num, sizeVarintField(1, uint64(int64(r.Status)))+sizeVarintField(2, uint64(r.LedgerID)))
	dst = appendVarintField(dst, 1, uint64(int64(r.Status)))
	return appendVarintField(dst, 2, uint64(r.LedgerID))
}

// appendMessageTag appends the tag and length of an embedded message of size
// bytes; the caller appends its fields.
func appendMessageTag(dst []byte, num protowire.Number, size int) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(size))
}

// appendVarintField appends a varint field. Signed values are passed
// sign-extended to 64 bits (uint64(int64(v))), as protobuf encodes int32,
// int64 and enums: -1 takes ten bytes.
func appendVarintField(dst []byte, num protowire.Number, v uint64) []byte {
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

func appendBytesField(dst []byte, num protowire.Number, v []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, v)
}

func appendStringField(dst []byte, num protowire.Number, v string) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, v)
}

func sizeVarintField(num protowire.Number, v uint64) int {
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeBytesField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func sizeStringField(num protowire.Number, v string) int {
	return sizeBytesField(num, len(v))
}
