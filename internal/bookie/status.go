package bookie

import (
	"context"
	"errors"
	"time"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/wire"
)

// statusOf is the one table from storage errors to the status a client
// receives. Only the store's explicit negatives become ENOLEDGER and
// ENOENTRY; anything it cannot name (I/O errors, a cancelled wait, a
// corrupt entry log) is EIO, which recovery never counts as "absent"
// (spec/protocol.md §7, items 4 and 5).
func statusOf(err error) wire.Status {
	switch {
	case err == nil:
		return wire.StatusOK
	case errors.Is(err, storage.ErrNoLedger):
		return wire.StatusNoLedger
	case errors.Is(err, storage.ErrNoEntry):
		return wire.StatusNoEntry
	case errors.Is(err, storage.ErrFenced):
		return wire.StatusFenced
	case errors.Is(err, storage.ErrUnauthorized):
		return wire.StatusUnauthorized
	case errors.Is(err, storage.ErrTooManyRequests):
		return wire.StatusTooManyRequests
	case errors.Is(err, storage.ErrReadOnly):
		return wire.StatusReadOnly
	case errors.Is(err, storage.ErrUnknownLedgerState):
		// v2 cannot carry it: the v2 encoder sends EIO (wire.Status.V2Code).
		return wire.StatusUnknownLedgerState
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return wire.StatusIOError
	}
	return wire.StatusIOError
}

// isNegative reports whether err is one of the store's explicit negatives.
func isNegative(err error) bool {
	return errors.Is(err, storage.ErrNoLedger) || errors.Is(err, storage.ErrNoEntry)
}

// statusLogged maps err and logs the failures worth an operator's attention
// (I/O errors and unknown states), with the ledger and entry ids.
func (b *Bookie) statusLogged(err error, what string, ledgerID, entryID int64) wire.Status {
	st := statusOf(err)
	if st == wire.StatusIOError || st == wire.StatusUnknownLedgerState {
		b.log.Warn("storage operation failed", "op", what, "ledger", ledgerID, "entry", entryID, "status", st.String(), "err", err)
	}
	return st
}

// fillStatus sets resp to an answer of status st to req, in req's protocol:
// the per-operation reply shape (v3: header version THREE with operation and
// txnId, and the sub-response with its required fields; v2: the request's
// version and ids echoed).
func (b *Bookie) fillStatus(req *wire.Request, resp *wire.Response, st wire.Status) {
	*resp = wire.Response{Protocol: req.Protocol, Status: st}
	h := &resp.Header
	h.Op = req.Header.Op
	h.TxnID = req.Header.TxnID
	if req.Protocol == wire.ProtocolV3 {
		h.Version = wire.VersionThree
	} else {
		h.Version = req.Header.Version
	}
	switch req.Header.Op {
	case wire.OpReadEntry:
		resp.Has = wire.BodyRead
		resp.Read = wire.ReadResponse{Status: st, LedgerID: req.Read.LedgerID, EntryID: req.Read.EntryID}
	case wire.OpAddEntry:
		resp.Has = wire.BodyAdd
		resp.Add = wire.AddResponse{Status: st, LedgerID: req.Add.LedgerID, EntryID: req.Add.EntryID}
	case wire.OpWriteLAC:
		resp.Has = wire.BodyWriteLAC
		resp.WriteLAC = wire.LedgerStatusResponse{Status: st, LedgerID: req.WriteLAC.LedgerID}
	case wire.OpReadLAC:
		resp.Has = wire.BodyReadLAC
		resp.ReadLAC = wire.ReadLACResponse{Status: st, LedgerID: req.ReadLACLedgerID}
	case wire.OpForceLedger:
		resp.Has = wire.BodyForceLedger
		resp.ForceLedger = wire.LedgerStatusResponse{Status: st, LedgerID: req.ForceLedgerID}
	case wire.OpGetBookieInfo:
		resp.Has = wire.BodyGetBookieInfo
		resp.GetBookieInfo = wire.GetBookieInfoResponse{Status: st}
	case wire.OpGetListOfEntriesOfLedger:
		resp.Has = wire.BodyGetListOfEntries
		resp.ListEntries = wire.ListEntriesResponse{Status: st, LedgerID: req.ListEntriesLedgerID}
	case wire.OpBatchReadEntry:
		if req.Protocol == wire.ProtocolV2 {
			resp.Has = wire.BodyBatchRead
			resp.BatchRead = wire.BatchReadResponse{Status: st, LedgerID: req.BatchRead.LedgerID, StartEntryID: req.BatchRead.StartEntryID}
		}
	}
}

// answerStatus answers req with status st in the per-operation shape.
// The request holds no in-flight slot.
func (b *Bookie) answerStatus(req *wire.Request, respond Responder, kind RequestKind, st wire.Status, start time.Time) {
	var resp wire.Response
	b.fillStatus(req, &resp, st)
	b.finish(kind, &resp, respond, start, false)
}

// answerEcho answers with the request header copied verbatim and a status
// only, no sub-response: Java's reply to unsupported operations, START_TLS
// without TLS, and the like (spec §2.5).
func (b *Bookie) answerEcho(req *wire.Request, respond Responder, kind RequestKind, st wire.Status, start time.Time) {
	resp := wire.Response{Protocol: req.Protocol, Header: req.Header, Status: st}
	if req.Protocol == wire.ProtocolV2 {
		b.fillStatus(req, &resp, st)
	}
	b.finish(kind, &resp, respond, start, false)
}

// AuthDisabledPlugin is the auth plugin name of a bookie (and client)
// without authentication; a Java client that receives it in an AUTH reply
// considers the handshake done.
const AuthDisabledPlugin = "AuthDisabledPlugin"

// answerAuth answers AUTH as a Java bookie with auth disabled does, whatever
// plugin the client named (spec §4): v3 echoes the request header with EOK;
// v2 writes version 2 and has no rc. The payload is empty, not absent
// (proto2 requires it).
func (b *Bookie) answerAuth(req *wire.Request, respond Responder, start time.Time) {
	resp := wire.Response{Protocol: req.Protocol, Status: wire.StatusOK, Has: wire.BodyAuth}
	resp.Auth = wire.AuthMessage{PluginName: AuthDisabledPlugin, Payload: []byte{}}
	if req.Protocol == wire.ProtocolV3 {
		resp.Header = req.Header
	} else {
		resp.Header = wire.Header{Version: 2, Op: wire.OpAuth}
	}
	b.finish(KindAuth, &resp, respond, start, false)
}
