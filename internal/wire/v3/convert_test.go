package v3

// Conversions between the wire types and the generated protocolpb types, and
// the oracle the differential tests compare against: proto.Unmarshal of the
// generated types, after javaClosedEnums.

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/foliodb/folio/internal/wire"
	pb "github.com/foliodb/folio/internal/wire/v3/protocolpb"
)

// oracleRequest decodes b the reference way: proto.Unmarshal into the
// generated Request, with Java's closed-enum rule applied first.
func oracleRequest(b []byte) (wire.Request, error) {
	var m pb.Request
	if err := proto.Unmarshal(javaClosedEnums(b, requestSchema), &m); err != nil {
		return wire.Request{}, err
	}
	return fromPBRequest(&m), nil
}

func oracleResponse(b []byte) (wire.Response, error) {
	var m pb.Response
	if err := proto.Unmarshal(javaClosedEnums(b, responseSchema), &m); err != nil {
		return wire.Response{}, err
	}
	return fromPBResponse(&m), nil
}

// marshalPB is deterministic proto.Marshal: the reference bytes.
func marshalPB(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("proto.Marshal: %v", err))
	}
	return b
}

// schema tells javaClosedEnums where the enum fields are: enums maps a field
// number to its validity test, subs a message field to its schema.
type schema struct {
	enums map[protowire.Number]func(int32) bool
	subs  map[protowire.Number]*schema
}

var (
	headerSchema = &schema{enums: map[protowire.Number]func(int32) bool{
		1: validVersion,
		2: func(v int32) bool { return wire.Op(v).Valid() },
	}}
	statusOnly = func(v int32) bool { return validStatus(wire.Status(v)) }
	subStatus  = &schema{enums: map[protowire.Number]func(int32) bool{1: statusOnly}}

	requestSchema = &schema{subs: map[protowire.Number]*schema{
		1: headerSchema,
		100: {enums: map[protowire.Number]func(int32) bool{
			100: func(v int32) bool { return validReadFlag(wire.ReadFlag(v)) },
		}},
		101: {enums: map[protowire.Number]func(int32) bool{
			100: func(v int32) bool { return validAddFlag(wire.AddFlag(v)) },
		}},
	}}
	responseSchema = &schema{
		enums: map[protowire.Number]func(int32) bool{2: statusOnly},
		subs: map[protowire.Number]*schema{
			1: headerSchema, 100: subStatus, 101: subStatus, 103: subStatus, 104: subStatus,
			105: subStatus, 107: subStatus, 108: subStatus,
		},
	}
)

// javaClosedEnums rewrites b so that proto.Unmarshal, which treats proto2
// enums as open, gives what Java's proto2 parser gives: every varint field
// holding a value outside its enum is removed (Java keeps it as an unknown
// field, so it neither sets nor overwrites the field). Where b does not
// parse it is returned unchanged: proto.Unmarshal then fails on it as well.
func javaClosedEnums(b []byte, s *schema) []byte {
	out, ok := filterEnums(b, s)
	if !ok {
		return b
	}
	return out
}

func filterEnums(b []byte, s *schema) ([]byte, bool) {
	out := []byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber || typ == protowire.EndGroupType {
			return nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, false
		}
		raw := b[:n+m]
		val := b[n : n+m]
		b = b[n+m:]
		if valid := s.enums[num]; valid != nil && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(val)
			if !valid(int32(v)) {
				continue
			}
		}
		if sub := s.subs[num]; sub != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(val)
			fv, ok := filterEnums(v, sub)
			if !ok {
				return nil, false
			}
			out = protowire.AppendTag(out, num, typ)
			out = protowire.AppendBytes(out, fv)
			continue
		}
		out = append(out, raw...)
	}
	return out, true
}

func fromPBHeader(h *pb.BKPacketHeader) wire.Header {
	if h == nil {
		return wire.Header{}
	}
	out := wire.Header{TxnID: h.GetTxnId(), Priority: h.GetPriority(), HasPriority: h.Priority != nil}
	if h.Version != nil {
		out.Version = int32(*h.Version)
	}
	if h.Operation != nil {
		out.Op = wire.Op(*h.Operation)
	}
	return out
}

func toPBHeader(h *wire.Header) *pb.BKPacketHeader {
	out := &pb.BKPacketHeader{
		Version:   pb.ProtocolVersion(h.Version).Enum(),
		Operation: pb.OperationType(h.Op).Enum(),
		TxnId:     proto.Uint64(h.TxnID),
	}
	if h.HasPriority || h.Priority != 0 {
		out.Priority = proto.Uint32(h.Priority)
	}
	return out
}

func status(s *pb.StatusCode) wire.Status {
	if s == nil {
		return 0
	}
	return wire.Status(*s)
}

func pbStatus(s wire.Status) *pb.StatusCode { return pb.StatusCode(s).Enum() }

// present returns a pointer to v when it should be encoded (has or non-zero),
// nil otherwise: the encoder's presence rule.
func present[T comparable](has bool, v T) *T {
	var zero T
	if has || v != zero {
		return &v
	}
	return nil
}

// presentBytes is present for bytes: encoded when has or non-nil, and then
// never nil (proto2 writes a non-nil empty slice as an empty field).
func presentBytes(has bool, v []byte) []byte {
	if !has && v == nil {
		return nil
	}
	if v == nil {
		return []byte{}
	}
	return v
}

func requiredBytes(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

func fromPBRequest(m *pb.Request) wire.Request {
	r := wire.Request{Protocol: wire.ProtocolV3, Header: fromPBHeader(m.Header)}
	if x := m.ReadRequest; x != nil {
		r.Has |= wire.BodyRead
		r.Read = wire.ReadRequest{
			LedgerID: x.GetLedgerId(), EntryID: x.GetEntryId(),
			MasterKey: x.MasterKey, HasMasterKey: x.MasterKey != nil,
			PreviousLAC: x.GetPreviousLAC(), HasPreviousLAC: x.PreviousLAC != nil,
			TimeoutMs: x.GetTimeOut(), HasTimeout: x.TimeOut != nil,
		}
		if x.Flag != nil { // GetFlag would return the default, FENCE_LEDGER
			r.Read.Flag = wire.ReadFlag(*x.Flag)
		}
	}
	if x := m.AddRequest; x != nil {
		r.Has |= wire.BodyAdd
		r.Add = wire.AddRequest{
			LedgerID: x.GetLedgerId(), EntryID: x.GetEntryId(),
			MasterKey: x.MasterKey, Body: x.Body,
			WriteFlags: x.GetWriteFlags(), HasWriteFlags: x.WriteFlags != nil,
		}
		if x.Flag != nil {
			r.Add.Flag = wire.AddFlag(*x.Flag)
		}
	}
	if x := m.AuthRequest; x != nil {
		r.Has |= wire.BodyAuth
		r.Auth = wire.AuthMessage{PluginName: x.GetAuthPluginName(), Payload: x.Payload}
	}
	if x := m.WriteLacRequest; x != nil {
		r.Has |= wire.BodyWriteLAC
		r.WriteLAC = wire.WriteLACRequest{LedgerID: x.GetLedgerId(), LAC: x.GetLac(), MasterKey: x.MasterKey, Body: x.Body}
	}
	if x := m.ReadLacRequest; x != nil {
		r.Has |= wire.BodyReadLAC
		r.ReadLACLedgerID = x.GetLedgerId()
	}
	if x := m.GetBookieInfoRequest; x != nil {
		r.Has |= wire.BodyGetBookieInfo
		r.GetBookieInfo = wire.GetBookieInfoRequest{Requested: x.GetRequested(), HasRequested: x.Requested != nil}
	}
	if m.StartTLSRequest != nil {
		r.Has |= wire.BodyStartTLS
	}
	if x := m.ForceLedgerRequest; x != nil {
		r.Has |= wire.BodyForceLedger
		r.ForceLedgerID = x.GetLedgerId()
	}
	if x := m.GetListOfEntriesOfLedgerRequest; x != nil {
		r.Has |= wire.BodyGetListOfEntries
		r.ListEntriesLedgerID = x.GetLedgerId()
	}
	for _, p := range m.RequestContext {
		r.Context = append(r.Context, wire.ContextPair{Key: p.GetKey(), Value: p.GetValue()})
	}
	return r
}

func toPBRequest(r *wire.Request) *pb.Request {
	m := &pb.Request{Header: toPBHeader(&r.Header)}
	if r.Has&wire.BodyRead != 0 {
		x := &r.Read
		m.ReadRequest = &pb.ReadRequest{
			LedgerId: proto.Int64(x.LedgerID), EntryId: proto.Int64(x.EntryID),
			MasterKey:   presentBytes(x.HasMasterKey, x.MasterKey),
			PreviousLAC: present(x.HasPreviousLAC, x.PreviousLAC),
			TimeOut:     present(x.HasTimeout, x.TimeoutMs),
		}
		if x.Flag != 0 {
			m.ReadRequest.Flag = pb.ReadRequest_Flag(x.Flag).Enum()
		}
	}
	if r.Has&wire.BodyAdd != 0 {
		x := &r.Add
		m.AddRequest = &pb.AddRequest{
			LedgerId: proto.Int64(x.LedgerID), EntryId: proto.Int64(x.EntryID),
			MasterKey: requiredBytes(x.MasterKey), Body: requiredBytes(x.Body),
			WriteFlags: present(x.HasWriteFlags, x.WriteFlags),
		}
		if x.Flag != 0 {
			m.AddRequest.Flag = pb.AddRequest_Flag(x.Flag).Enum()
		}
	}
	if r.Has&wire.BodyAuth != 0 {
		m.AuthRequest = toPBAuth(&r.Auth)
	}
	if r.Has&wire.BodyWriteLAC != 0 {
		x := &r.WriteLAC
		m.WriteLacRequest = &pb.WriteLacRequest{
			LedgerId: proto.Int64(x.LedgerID), Lac: proto.Int64(x.LAC),
			MasterKey: requiredBytes(x.MasterKey), Body: requiredBytes(x.Body),
		}
	}
	if r.Has&wire.BodyReadLAC != 0 {
		m.ReadLacRequest = &pb.ReadLacRequest{LedgerId: proto.Int64(r.ReadLACLedgerID)}
	}
	if r.Has&wire.BodyGetBookieInfo != 0 {
		m.GetBookieInfoRequest = &pb.GetBookieInfoRequest{
			Requested: present(r.GetBookieInfo.HasRequested, r.GetBookieInfo.Requested),
		}
	}
	if r.Has&wire.BodyStartTLS != 0 {
		m.StartTLSRequest = &pb.StartTLSRequest{}
	}
	if r.Has&wire.BodyForceLedger != 0 {
		m.ForceLedgerRequest = &pb.ForceLedgerRequest{LedgerId: proto.Int64(r.ForceLedgerID)}
	}
	if r.Has&wire.BodyGetListOfEntries != 0 {
		m.GetListOfEntriesOfLedgerRequest = &pb.GetListOfEntriesOfLedgerRequest{LedgerId: proto.Int64(r.ListEntriesLedgerID)}
	}
	for _, p := range r.Context {
		m.RequestContext = append(m.RequestContext, &pb.ContextPair{Key: proto.String(p.Key), Value: proto.String(p.Value)})
	}
	return m
}

func toPBAuth(a *wire.AuthMessage) *pb.AuthMessage {
	return &pb.AuthMessage{AuthPluginName: proto.String(a.PluginName), Payload: requiredBytes(a.Payload)}
}

func fromPBResponse(m *pb.Response) wire.Response {
	r := wire.Response{Protocol: wire.ProtocolV3, Header: fromPBHeader(m.Header), Status: status(m.Status)}
	if x := m.ReadResponse; x != nil {
		r.Has |= wire.BodyRead
		r.Read = wire.ReadResponse{
			Status: status(x.Status), LedgerID: x.GetLedgerId(), EntryID: x.GetEntryId(),
			Body: x.Body, HasBody: x.Body != nil,
			MaxLAC: x.GetMaxLAC(), HasMaxLAC: x.MaxLAC != nil,
			LACUpdateTimestampMs: x.GetLacUpdateTimestamp(), HasLACUpdateTimestamp: x.LacUpdateTimestamp != nil,
		}
	}
	if x := m.AddResponse; x != nil {
		r.Has |= wire.BodyAdd
		r.Add = wire.AddResponse{Status: status(x.Status), LedgerID: x.GetLedgerId(), EntryID: x.GetEntryId()}
	}
	if x := m.AuthResponse; x != nil {
		r.Has |= wire.BodyAuth
		r.Auth = wire.AuthMessage{PluginName: x.GetAuthPluginName(), Payload: x.Payload}
	}
	if x := m.WriteLacResponse; x != nil {
		r.Has |= wire.BodyWriteLAC
		r.WriteLAC = wire.LedgerStatusResponse{Status: status(x.Status), LedgerID: x.GetLedgerId()}
	}
	if x := m.ReadLacResponse; x != nil {
		r.Has |= wire.BodyReadLAC
		r.ReadLAC = wire.ReadLACResponse{
			Status: status(x.Status), LedgerID: x.GetLedgerId(),
			LACBody: x.LacBody, HasLACBody: x.LacBody != nil,
			LastEntryBody: x.LastEntryBody, HasLastEntryBody: x.LastEntryBody != nil,
		}
	}
	if x := m.GetBookieInfoResponse; x != nil {
		// Fields 4-7 are not carried by the wire type.
		r.Has |= wire.BodyGetBookieInfo
		r.GetBookieInfo = wire.GetBookieInfoResponse{
			Status:            status(x.Status),
			TotalDiskCapacity: x.GetTotalDiskCapacity(), HasTotalDiskCapacity: x.TotalDiskCapacity != nil,
			FreeDiskSpace: x.GetFreeDiskSpace(), HasFreeDiskSpace: x.FreeDiskSpace != nil,
		}
	}
	if m.StartTLSResponse != nil {
		r.Has |= wire.BodyStartTLS
	}
	if x := m.ForceLedgerResponse; x != nil {
		r.Has |= wire.BodyForceLedger
		r.ForceLedger = wire.LedgerStatusResponse{Status: status(x.Status), LedgerID: x.GetLedgerId()}
	}
	if x := m.GetListOfEntriesOfLedgerResponse; x != nil {
		r.Has |= wire.BodyGetListOfEntries
		r.ListEntries = wire.ListEntriesResponse{
			Status: status(x.Status), LedgerID: x.GetLedgerId(),
			Availability: x.AvailabilityOfEntriesOfLedger, HasAvail: x.AvailabilityOfEntriesOfLedger != nil,
		}
	}
	return r
}

func toPBResponse(r *wire.Response) *pb.Response {
	m := &pb.Response{Header: toPBHeader(&r.Header), Status: pbStatus(r.Status)}
	if r.Has&wire.BodyRead != 0 {
		x := &r.Read
		m.ReadResponse = &pb.ReadResponse{
			Status: pbStatus(x.Status), LedgerId: proto.Int64(x.LedgerID), EntryId: proto.Int64(x.EntryID),
			Body:               presentBytes(x.HasBody, x.Body),
			MaxLAC:             present(x.HasMaxLAC, x.MaxLAC),
			LacUpdateTimestamp: present(x.HasLACUpdateTimestamp, x.LACUpdateTimestampMs),
		}
	}
	if r.Has&wire.BodyAdd != 0 {
		x := &r.Add
		m.AddResponse = &pb.AddResponse{Status: pbStatus(x.Status), LedgerId: proto.Int64(x.LedgerID), EntryId: proto.Int64(x.EntryID)}
	}
	if r.Has&wire.BodyAuth != 0 {
		m.AuthResponse = toPBAuth(&r.Auth)
	}
	if r.Has&wire.BodyWriteLAC != 0 {
		m.WriteLacResponse = &pb.WriteLacResponse{Status: pbStatus(r.WriteLAC.Status), LedgerId: proto.Int64(r.WriteLAC.LedgerID)}
	}
	if r.Has&wire.BodyReadLAC != 0 {
		x := &r.ReadLAC
		m.ReadLacResponse = &pb.ReadLacResponse{
			Status: pbStatus(x.Status), LedgerId: proto.Int64(x.LedgerID),
			LacBody:       presentBytes(x.HasLACBody, x.LACBody),
			LastEntryBody: presentBytes(x.HasLastEntryBody, x.LastEntryBody),
		}
	}
	if r.Has&wire.BodyGetBookieInfo != 0 {
		x := &r.GetBookieInfo
		m.GetBookieInfoResponse = &pb.GetBookieInfoResponse{
			Status:            pbStatus(x.Status),
			TotalDiskCapacity: present(x.HasTotalDiskCapacity, x.TotalDiskCapacity),
			FreeDiskSpace:     present(x.HasFreeDiskSpace, x.FreeDiskSpace),
		}
	}
	if r.Has&wire.BodyStartTLS != 0 {
		m.StartTLSResponse = &pb.StartTLSResponse{}
	}
	if r.Has&wire.BodyForceLedger != 0 {
		m.ForceLedgerResponse = &pb.ForceLedgerResponse{Status: pbStatus(r.ForceLedger.Status), LedgerId: proto.Int64(r.ForceLedger.LedgerID)}
	}
	if r.Has&wire.BodyGetListOfEntries != 0 {
		x := &r.ListEntries
		m.GetListOfEntriesOfLedgerResponse = &pb.GetListOfEntriesOfLedgerResponse{
			Status: pbStatus(x.Status), LedgerId: proto.Int64(x.LedgerID),
			AvailabilityOfEntriesOfLedger: presentBytes(x.HasAvail, x.Availability),
		}
	}
	return m
}
