package bookie

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/wire"
)

// addOp is one add in the store's hands. It is its own
// storage.AddCompletion and carries its response, so the add path allocates
// nothing in steady state (the ops are pooled).
type addOp struct {
	b       *Bookie
	req     *wire.Request
	respond Responder
	start   time.Time
	kind    RequestKind
	resp    wire.Response
}

var addOpPool = sync.Pool{New: func() any { return new(addOp) }}

// add serves ADD_ENTRY (spec §2.5.1, §3.2; protocol.md §1.10). The caller
// holds an in-flight slot for it.
//
// The ledger and entry ids are the body's first 16 bytes, not the
// AddRequest fields; the reply echoes the AddRequest's. Read-only mode
// refuses normal adds and accepts recovery and high-priority adds, which
// repair ledgers (protocol.md §6.9). The key check, the fence check and
// their atomicity with Fence are the store's (storage.Store.AddEntry).
func (b *Bookie) add(req *wire.Request, respond Responder, start time.Time) {
	a := &req.Add
	kind := kindOf(req)
	recovery := a.Flag == wire.AddFlagRecoveryAdd
	if b.ReadOnly() && !recovery && req.Header.Priority == 0 {
		b.answerCounted(req, respond, kind, wire.StatusReadOnly, start)
		return
	}
	if len(a.Body) < 16 {
		b.answerCounted(req, respond, kind, wire.StatusBadRequest, start)
		return
	}
	ledgerID := int64(binary.BigEndian.Uint64(a.Body))
	entryID := int64(binary.BigEndian.Uint64(a.Body[8:]))
	if ledgerID < 0 || entryID < 0 {
		// Negative ids are the journal's meta-entries in Java; no client
		// sends them.
		b.answerCounted(req, respond, kind, wire.StatusBadRequest, start)
		return
	}
	op := addOpPool.Get().(*addOp)
	op.b, op.req, op.respond, op.start, op.kind = b, req, respond, start, kind
	opts := storage.AddOptions{
		Recovery:     recovery,
		DeferredSync: req.Protocol == wire.ProtocolV3 && a.WriteFlags&wire.WriteFlagDeferredSync != 0,
	}
	b.metrics.EntryBytes(true, len(a.Body))
	b.store.AddEntry(ledgerID, entryID, a.MasterKey, a.Body, opts, op)
}

// AddComplete implements storage.AddCompletion: the entry is durable (err
// nil) or the add failed.
func (op *addOp) AddComplete(err error) {
	b, req := op.b, op.req
	var st wire.Status
	if err != nil {
		st = b.statusLogged(err, "add", int64(binary.BigEndian.Uint64(req.Add.Body)), int64(binary.BigEndian.Uint64(req.Add.Body[8:])))
	}
	b.fillStatus(req, &op.resp, st)
	b.finish(op.kind, &op.resp, op.respond, op.start, true)
	*op = addOp{}
	addOpPool.Put(op)
}

// answerCounted answers a request that holds an in-flight slot without
// doing any work.
func (b *Bookie) answerCounted(req *wire.Request, respond Responder, kind RequestKind, st wire.Status, start time.Time) {
	var resp wire.Response
	b.fillStatus(req, &resp, st)
	b.finish(kind, &resp, respond, start, true)
}
