package v3

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/foliodb/folio/internal/wire"
)

// DecodeRequest decodes a v3 Request payload (a frame without its length
// prefix) into *req, which it resets first. On success req.Protocol is
// wire.ProtocolV3 and req.Has names the sub-messages present. Bytes fields
// alias payload, which must stay unmodified while req is in use; strings and
// req.Context are copies. Errors wrap wire.ErrTruncated, wire.ErrBadEncoding
// or wire.ErrMissingField; after an error *req holds partial values.
func DecodeRequest(payload []byte, req *wire.Request) error {
	*req = wire.Request{Protocol: wire.ProtocolV3}
	var seen requestSeen
	if err := decodeRequest(payload, req, &seen); err != nil {
		return fmt.Errorf("v3 Request: %w", err)
	}
	return seen.check(req)
}

// DecodeResponse decodes a v3 Response payload into *resp, which it resets
// first, with the rules of DecodeRequest.
func DecodeResponse(payload []byte, resp *wire.Response) error {
	*resp = wire.Response{Protocol: wire.ProtocolV3}
	var seen responseSeen
	if err := decodeResponse(payload, resp, &seen); err != nil {
		return fmt.Errorf("v3 Response: %w", err)
	}
	return seen.check(resp)
}

// DecodeAuthMessage decodes an AuthMessage (the payload of a v2 AUTH packet,
// or the authRequest/authResponse of v3) into *m, which it resets first.
// m.Payload aliases b.
func DecodeAuthMessage(b []byte, m *wire.AuthMessage) error {
	*m = wire.AuthMessage{}
	var seen uint8
	if err := decodeAuth(b, m, &seen); err != nil {
		return fmt.Errorf("AuthMessage: %w", err)
	}
	return checkRequired("AuthMessage", seen, authRequired)
}

// field is one field read by consumeField. Only varint and length-delimited
// fields carry a value: BookKeeper's schema has no other kind, so any other
// wire type is an unknown field whichever number it has.
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64 // the value of a varint field
	b   []byte // the value of a length-delimited field; aliases the input
}

// consumeField reads the field at the start of b (len(b) > 0) into *f and
// returns its encoded length. It accepts and rejects exactly what
// proto.Unmarshal does at the level of one message: field numbers 1 to
// 2^29-1, varints of at most 10 bytes, groups skipped whole (protowire's
// recursion limit), no stray end-group tag, no wire type 6 or 7.
func consumeField(b []byte, f *field) (int, error) {
	tag, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, parseError(n)
	}
	num := tag >> 3
	if num < uint64(protowire.MinValidNumber) || num > uint64(protowire.MaxValidNumber) {
		return 0, fmt.Errorf("%w: field number %d", wire.ErrBadEncoding, num)
	}
	f.num, f.typ = protowire.Number(num), protowire.Type(tag&7)
	var m int
	switch f.typ {
	case protowire.VarintType:
		f.u, m = protowire.ConsumeVarint(b[n:])
	case protowire.BytesType:
		f.b, m = protowire.ConsumeBytes(b[n:])
	case protowire.EndGroupType:
		return 0, fmt.Errorf("%w: end-group tag of field %d outside a group", wire.ErrBadEncoding, num)
	default:
		m = protowire.ConsumeFieldValue(f.num, f.typ, b[n:])
	}
	if m < 0 {
		return 0, parseError(m)
	}
	return n + m, nil
}

// Required fields. Each decoder sets bit i of its seen mask when it reads
// required field names[i]; checkRequired names the first one missing.
var (
	headerRequired       = []string{"version", "operation", "txnId"}
	readRequired         = []string{"ledgerId", "entryId"}
	addRequired          = []string{"ledgerId", "entryId", "masterKey", "body"}
	authRequired         = []string{"authPluginName", "payload"}
	writeLACRequired     = []string{"ledgerId", "lac", "masterKey", "body"}
	ledgerIDRequired     = []string{"ledgerId"}
	contextRequired      = []string{"key", "value"}
	requestRequired      = []string{"header"}
	responseRequired     = []string{"header", "status"}
	statusLedgerRequired = []string{"status", "ledgerId"}
	statusEntryRequired  = []string{"status", "ledgerId", "entryId"}
	statusOnlyRequired   = []string{"status"}
)

func checkRequired(msg string, seen uint8, names []string) error {
	if seen == 1<<len(names)-1 {
		return nil
	}
	for i, name := range names {
		if seen&(1<<i) == 0 {
			return fmt.Errorf("%w: %s.%s", wire.ErrMissingField, msg, name)
		}
	}
	return nil
}

// requestSeen records the required fields read in a Request and in each of
// its sub-messages (sub[i]: field 100+i); repeated sub-messages merge, so
// their bits accumulate.
type requestSeen struct {
	top, header uint8
	sub         [9]uint8
}

// subMessage describes sub-message field 100+i of a Request or Response.
type subMessage struct {
	body     wire.Body
	name     string
	required []string
}

var requestSubs = [9]subMessage{
	{wire.BodyRead, "Request.readRequest", readRequired},
	{wire.BodyAdd, "Request.addRequest", addRequired},
	{wire.BodyAuth, "Request.authRequest", authRequired},
	{wire.BodyWriteLAC, "Request.writeLacRequest", writeLACRequired},
	{wire.BodyReadLAC, "Request.readLacRequest", ledgerIDRequired},
	{wire.BodyGetBookieInfo, "Request.getBookieInfoRequest", nil},
	{wire.BodyStartTLS, "Request.startTLSRequest", nil},
	{wire.BodyForceLedger, "Request.forceLedgerRequest", ledgerIDRequired},
	{wire.BodyGetListOfEntries, "Request.getListOfEntriesOfLedgerRequest", ledgerIDRequired},
}

// check applies proto2's required rules to the merged message.
func (s *requestSeen) check(req *wire.Request) error {
	if err := checkRequired("Request", s.top, requestRequired); err != nil {
		return err
	}
	if err := checkRequired("Request.header", s.header, headerRequired); err != nil {
		return err
	}
	return checkSubs(req.Has, &requestSubs, &s.sub)
}

// checkSubs checks the required fields of each sub-message present.
func checkSubs(has wire.Body, subs *[9]subMessage, seen *[9]uint8) error {
	for i := range subs {
		if has&subs[i].body == 0 {
			continue
		}
		if err := checkRequired(subs[i].name, seen[i], subs[i].required); err != nil {
			return err
		}
	}
	return nil
}

func decodeRequest(b []byte, req *wire.Request, s *requestSeen) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.BytesType {
			continue // every field of Request is a message
		}
		switch f.num {
		case fieldHeader:
			s.top |= 1
			err = decodeHeader(f.b, &req.Header, &s.header)
		case fieldRead:
			req.Has |= wire.BodyRead
			err = decodeReadRequest(f.b, &req.Read, &s.sub[0])
		case fieldAdd:
			req.Has |= wire.BodyAdd
			err = decodeAddRequest(f.b, &req.Add, &s.sub[1])
		case fieldAuth:
			req.Has |= wire.BodyAuth
			err = decodeAuth(f.b, &req.Auth, &s.sub[2])
		case fieldWriteLAC:
			req.Has |= wire.BodyWriteLAC
			err = decodeWriteLACRequest(f.b, &req.WriteLAC, &s.sub[3])
		case fieldReadLAC:
			req.Has |= wire.BodyReadLAC
			err = decodeLedgerIDMessage(f.b, &req.ReadLACLedgerID, &s.sub[4])
		case fieldGetBookieInfo:
			req.Has |= wire.BodyGetBookieInfo
			err = decodeGetBookieInfoRequest(f.b, &req.GetBookieInfo)
		case fieldStartTLS:
			req.Has |= wire.BodyStartTLS
			err = decodeEmpty(f.b)
		case fieldForceLedger:
			req.Has |= wire.BodyForceLedger
			err = decodeLedgerIDMessage(f.b, &req.ForceLedgerID, &s.sub[7])
		case fieldListEntries:
			req.Has |= wire.BodyGetListOfEntries
			err = decodeLedgerIDMessage(f.b, &req.ListEntriesLedgerID, &s.sub[8])
		case fieldContext:
			// A repeated message: each occurrence is a new element, complete
			// on its own. Failing on an incomplete one at once (rather than
			// after the whole parse, as proto does: same outcome) bounds the
			// slice by payload/7 elements.
			req.Context = append(req.Context, wire.ContextPair{})
			err = decodeContextPair(f.b, &req.Context[len(req.Context)-1])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func decodeHeader(b []byte, h *wire.Header, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.VarintType {
			continue
		}
		switch f.num {
		case fieldVersion:
			if v := int32(f.u); validVersion(v) {
				h.Version = v
				*seen |= 1
			}
		case fieldOperation:
			if op := wire.Op(int32(f.u)); op.Valid() {
				h.Op = op
				*seen |= 2
			}
		case fieldTxnID:
			h.TxnID = f.u
			*seen |= 4
		case fieldPriority:
			h.Priority = uint32(f.u)
			h.HasPriority = true
		}
	}
	return nil
}

func decodeReadRequest(b []byte, r *wire.ReadRequest, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			r.LedgerID = int64(f.u)
			*seen |= 1
		case f.num == 2 && f.typ == protowire.VarintType:
			r.EntryID = int64(f.u)
			*seen |= 2
		case f.num == 3 && f.typ == protowire.BytesType:
			r.MasterKey = f.b
			r.HasMasterKey = true
		case f.num == 4 && f.typ == protowire.VarintType:
			r.PreviousLAC = int64(f.u)
			r.HasPreviousLAC = true
		case f.num == 5 && f.typ == protowire.VarintType:
			r.TimeoutMs = int64(f.u)
			r.HasTimeout = true
		case f.num == fieldFlag && f.typ == protowire.VarintType:
			if fl := wire.ReadFlag(int32(f.u)); validReadFlag(fl) {
				r.Flag = fl
			}
		}
	}
	return nil
}

func decodeAddRequest(b []byte, a *wire.AddRequest, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			a.LedgerID = int64(f.u)
			*seen |= 1
		case f.num == 2 && f.typ == protowire.VarintType:
			a.EntryID = int64(f.u)
			*seen |= 2
		case f.num == 3 && f.typ == protowire.BytesType:
			a.MasterKey = f.b
			*seen |= 4
		case f.num == 4 && f.typ == protowire.BytesType:
			a.Body = f.b
			*seen |= 8
		case f.num == 5 && f.typ == protowire.VarintType:
			a.WriteFlags = int32(f.u)
			a.HasWriteFlags = true
		case f.num == fieldFlag && f.typ == protowire.VarintType:
			if fl := wire.AddFlag(int32(f.u)); validAddFlag(fl) {
				a.Flag = fl
			}
		}
	}
	return nil
}

// authDisabledPlugin is the plugin name of every AUTH exchange with auth
// disabled; decoding it returns this constant instead of allocating.
const authDisabledPlugin = "AuthDisabledPlugin"

func decodeAuth(b []byte, m *wire.AuthMessage, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			if string(f.b) == authDisabledPlugin {
				m.PluginName = authDisabledPlugin
			} else {
				m.PluginName = string(f.b)
			}
			*seen |= 1
		case 2:
			m.Payload = f.b
			*seen |= 2
		}
	}
	return nil
}

func decodeWriteLACRequest(b []byte, w *wire.WriteLACRequest, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			w.LedgerID = int64(f.u)
			*seen |= 1
		case f.num == 2 && f.typ == protowire.VarintType:
			w.LAC = int64(f.u)
			*seen |= 2
		case f.num == 3 && f.typ == protowire.BytesType:
			w.MasterKey = f.b
			*seen |= 4
		case f.num == 4 && f.typ == protowire.BytesType:
			w.Body = f.b
			*seen |= 8
		}
	}
	return nil
}

// decodeLedgerIDMessage decodes ReadLacRequest, ForceLedgerRequest and
// GetListOfEntriesOfLedgerRequest: one required int64 ledgerId = 1.
func decodeLedgerIDMessage(b []byte, ledgerID *int64, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.num == 1 && f.typ == protowire.VarintType {
			*ledgerID = int64(f.u)
			*seen |= 1
		}
	}
	return nil
}

func decodeGetBookieInfoRequest(b []byte, g *wire.GetBookieInfoRequest) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.num == 1 && f.typ == protowire.VarintType {
			g.Requested = int64(f.u)
			g.HasRequested = true
		}
	}
	return nil
}

// decodeEmpty checks a message without fields (StartTLSRequest,
// StartTLSResponse): its content is unknown fields that must still parse.
func decodeEmpty(b []byte) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func decodeContextPair(b []byte, p *wire.ContextPair) error {
	var seen uint8
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			p.Key = string(f.b)
			seen |= 1
		case 2:
			p.Value = string(f.b)
			seen |= 2
		}
	}
	return checkRequired("Request.requestContext", seen, contextRequired)
}

// responseSeen is requestSeen for a Response.
type responseSeen struct {
	top, header uint8
	sub         [9]uint8
}

var responseSubs = [9]subMessage{
	{wire.BodyRead, "Response.readResponse", statusEntryRequired},
	{wire.BodyAdd, "Response.addResponse", statusEntryRequired},
	{wire.BodyAuth, "Response.authResponse", authRequired},
	{wire.BodyWriteLAC, "Response.writeLacResponse", statusLedgerRequired},
	{wire.BodyReadLAC, "Response.readLacResponse", statusLedgerRequired},
	{wire.BodyGetBookieInfo, "Response.getBookieInfoResponse", statusOnlyRequired},
	{wire.BodyStartTLS, "Response.startTLSResponse", nil},
	{wire.BodyForceLedger, "Response.forceLedgerResponse", statusLedgerRequired},
	{wire.BodyGetListOfEntries, "Response.getListOfEntriesOfLedgerResponse", statusLedgerRequired},
}

func (s *responseSeen) check(resp *wire.Response) error {
	if err := checkRequired("Response", s.top, responseRequired); err != nil {
		return err
	}
	if err := checkRequired("Response.header", s.header, headerRequired); err != nil {
		return err
	}
	return checkSubs(resp.Has, &responseSubs, &s.sub)
}

func decodeResponse(b []byte, resp *wire.Response, s *responseSeen) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.num == fieldStatus {
			if f.typ == protowire.VarintType {
				if st := wire.Status(int32(f.u)); validStatus(st) {
					resp.Status = st
					s.top |= 2
				}
			}
			continue
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fieldHeader:
			s.top |= 1
			err = decodeHeader(f.b, &resp.Header, &s.header)
		case fieldRead:
			resp.Has |= wire.BodyRead
			err = decodeReadResponse(f.b, &resp.Read, &s.sub[0])
		case fieldAdd:
			resp.Has |= wire.BodyAdd
			err = decodeAddResponse(f.b, &resp.Add, &s.sub[1])
		case fieldAuth:
			resp.Has |= wire.BodyAuth
			err = decodeAuth(f.b, &resp.Auth, &s.sub[2])
		case fieldWriteLAC:
			resp.Has |= wire.BodyWriteLAC
			err = decodeLedgerStatus(f.b, &resp.WriteLAC, &s.sub[3])
		case fieldReadLAC:
			resp.Has |= wire.BodyReadLAC
			err = decodeReadLACResponse(f.b, &resp.ReadLAC, &s.sub[4])
		case fieldGetBookieInfo:
			resp.Has |= wire.BodyGetBookieInfo
			err = decodeGetBookieInfoResponse(f.b, &resp.GetBookieInfo, &s.sub[5])
		case fieldStartTLS:
			resp.Has |= wire.BodyStartTLS
			err = decodeEmpty(f.b)
		case fieldForceLedger:
			resp.Has |= wire.BodyForceLedger
			err = decodeLedgerStatus(f.b, &resp.ForceLedger, &s.sub[7])
		case fieldListEntries:
			resp.Has |= wire.BodyGetListOfEntries
			err = decodeListEntriesResponse(f.b, &resp.ListEntries, &s.sub[8])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeStatusField handles field 1 of every sub-response, a required
// StatusCode: a value outside the enum is an unknown field.
func decodeStatusField(f *field, st *wire.Status, seen *uint8) {
	if v := wire.Status(int32(f.u)); validStatus(v) {
		*st = v
		*seen |= 1
	}
}

func decodeReadResponse(b []byte, r *wire.ReadResponse, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			decodeStatusField(&f, &r.Status, seen)
		case f.num == 2 && f.typ == protowire.VarintType:
			r.LedgerID = int64(f.u)
			*seen |= 2
		case f.num == 3 && f.typ == protowire.VarintType:
			r.EntryID = int64(f.u)
			*seen |= 4
		case f.num == 4 && f.typ == protowire.BytesType:
			r.Body = f.b
			r.HasBody = true
		case f.num == 5 && f.typ == protowire.VarintType:
			r.MaxLAC = int64(f.u)
			r.HasMaxLAC = true
		case f.num == 6 && f.typ == protowire.VarintType:
			r.LACUpdateTimestampMs = int64(f.u)
			r.HasLACUpdateTimestamp = true
		}
	}
	return nil
}

func decodeAddResponse(b []byte, a *wire.AddResponse, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.VarintType {
			continue
		}
		switch f.num {
		case 1:
			decodeStatusField(&f, &a.Status, seen)
		case 2:
			a.LedgerID = int64(f.u)
			*seen |= 2
		case 3:
			a.EntryID = int64(f.u)
			*seen |= 4
		}
	}
	return nil
}

// decodeLedgerStatus decodes WriteLacResponse and ForceLedgerResponse.
func decodeLedgerStatus(b []byte, r *wire.LedgerStatusResponse, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.VarintType {
			continue
		}
		switch f.num {
		case 1:
			decodeStatusField(&f, &r.Status, seen)
		case 2:
			r.LedgerID = int64(f.u)
			*seen |= 2
		}
	}
	return nil
}

func decodeReadLACResponse(b []byte, r *wire.ReadLACResponse, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			decodeStatusField(&f, &r.Status, seen)
		case f.num == 2 && f.typ == protowire.VarintType:
			r.LedgerID = int64(f.u)
			*seen |= 2
		case f.num == 3 && f.typ == protowire.BytesType:
			r.LACBody = f.b
			r.HasLACBody = true
		case f.num == 4 && f.typ == protowire.BytesType:
			r.LastEntryBody = f.b
			r.HasLastEntryBody = true
		}
	}
	return nil
}

// decodeGetBookieInfoResponse reads status and the two disk figures; fields
// 4-7 (journalIoUtil, ledgerIoUtil, cpuUsedRate, writeBytePerSecond) are
// skipped, as wire.GetBookieInfoResponse does not carry them.
func decodeGetBookieInfoResponse(b []byte, g *wire.GetBookieInfoResponse, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.typ != protowire.VarintType {
			continue
		}
		switch f.num {
		case 1:
			decodeStatusField(&f, &g.Status, seen)
		case 2:
			g.TotalDiskCapacity = int64(f.u)
			g.HasTotalDiskCapacity = true
		case 3:
			g.FreeDiskSpace = int64(f.u)
			g.HasFreeDiskSpace = true
		}
	}
	return nil
}

func decodeListEntriesResponse(b []byte, l *wire.ListEntriesResponse, seen *uint8) error {
	for len(b) > 0 {
		var f field
		n, err := consumeField(b, &f)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			decodeStatusField(&f, &l.Status, seen)
		case f.num == 2 && f.typ == protowire.VarintType:
			l.LedgerID = int64(f.u)
			*seen |= 2
		case f.num == 3 && f.typ == protowire.BytesType:
			l.Availability = f.b
			l.HasAvail = true
		}
	}
	return nil
}
