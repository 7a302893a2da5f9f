package ledgerexec

import "github.com/foliodb/folio/internal/wire"

// The wire requests a client sends about a ledger's entries are built here
// and nowhere else (internal/lint checks it): the Executor and the tools
// that copy or inspect entries outside a machine (internal/rereplication,
// internal/admin) send the same fields and flags for the same operation.
// Each constructor returns a request for the transport to fill in the
// protocol, version and transaction id; the slices it is given are
// referenced, not copied.

// AddFlags are an add's options.
type AddFlags uint8

const (
	// AddRecovery marks a recovery add (RECOVERY_ADD): recovery and
	// re-replication rewrite entries a fenced bookie must still take.
	AddRecovery AddFlags = 1 << iota
	// AddDeferredSync asks for DEFERRED_SYNC (the bookie acknowledges
	// before the journal sync; FORCE_LEDGER syncs).
	AddDeferredSync
	// AddHighPriority sends the add at wire.HighPriority, which a Java
	// bookie that is read-only but takes high-priority writes accepts.
	// The ledger recovery's write-back sets it with AddRecovery, as the
	// Java client does; re-replication (Java's LedgerFragmentReplicator)
	// sends RECOVERY_ADD without it.
	AddHighPriority
)

// AddRequest returns the ADD_ENTRY request storing body (a digested entry,
// digest.Digester.AppendEntry) as entry entryID of ledger ledgerID, under
// masterKey (digest.MasterKey of the ledger's password).
func AddRequest(ledgerID, entryID int64, masterKey, body []byte, flags AddFlags) wire.Request {
	req := wire.Request{
		Header: wire.Header{Op: wire.OpAddEntry},
		Has:    wire.BodyAdd,
		Add:    wire.AddRequest{LedgerID: ledgerID, EntryID: entryID, MasterKey: masterKey, Body: body},
	}
	if flags&AddDeferredSync != 0 {
		req.Add.WriteFlags, req.Add.HasWriteFlags = wire.WriteFlagDeferredSync, true
	}
	if flags&AddRecovery != 0 {
		req.Add.Flag = wire.AddFlagRecoveryAdd
	}
	if flags&AddHighPriority != 0 {
		req.Header.Priority = wire.HighPriority
	}
	return req
}

// ReadRequest returns the READ_ENTRY request for entry entryID of ledger
// ledgerID: a plain read, which neither fences nor waits.
func ReadRequest(ledgerID, entryID int64) wire.Request {
	return wire.Request{
		Header: wire.Header{Op: wire.OpReadEntry},
		Has:    wire.BodyRead,
		Read:   wire.ReadRequest{LedgerID: ledgerID, EntryID: entryID},
	}
}

// FenceReadRequest returns the fencing READ_ENTRY request (FENCE_LEDGER,
// with masterKey, at wire.HighPriority) for entry entryID of ledger
// ledgerID: the bookie fences the ledger before it answers.
func FenceReadRequest(ledgerID, entryID int64, masterKey []byte) wire.Request {
	req := ReadRequest(ledgerID, entryID)
	req.Read.Flag = wire.ReadFlagFenceLedger
	req.Read.MasterKey, req.Read.HasMasterKey = masterKey, true
	req.Header.Priority = wire.HighPriority
	return req
}

// LongPollRequest returns the long-poll READ_ENTRY request for ledger
// ledgerID: answered once the bookie's LAC passes previousLAC (with the
// entry after it piggybacked) or after timeoutMs.
func LongPollRequest(ledgerID, previousLAC, timeoutMs int64) wire.Request {
	return wire.Request{
		Header: wire.Header{Op: wire.OpReadEntry},
		Has:    wire.BodyRead,
		Read: wire.ReadRequest{LedgerID: ledgerID, EntryID: -1, Flag: wire.ReadFlagEntryPiggyback,
			PreviousLAC: previousLAC, HasPreviousLAC: true, TimeoutMs: timeoutMs, HasTimeout: true},
	}
}

// BatchReadRequest returns the v2 BATCH_READ_ENTRY request for up to
// maxCount entries of ledger ledgerID from startEntryID on, the answer
// frame at most maxSize bytes: a plain read, which neither fences nor
// waits. The transport sets the request id.
func BatchReadRequest(ledgerID, startEntryID int64, maxCount int32, maxSize int64) wire.Request {
	return wire.Request{
		Header:    wire.Header{Op: wire.OpBatchReadEntry},
		Has:       wire.BodyBatchRead,
		BatchRead: wire.BatchReadRequest{LedgerID: ledgerID, StartEntryID: startEntryID, MaxCount: maxCount, MaxSize: maxSize},
	}
}

// ReadLACRequest returns the READ_LAC request for ledger ledgerID: the
// bookie's explicit LAC and its last stored entry. It never fences.
func ReadLACRequest(ledgerID int64) wire.Request {
	return wire.Request{
		Header:          wire.Header{Op: wire.OpReadLAC},
		Has:             wire.BodyReadLAC,
		ReadLACLedgerID: ledgerID,
	}
}

// forceRequest returns the FORCE_LEDGER request for ledger ledgerID.
func forceRequest(ledgerID int64) wire.Request {
	return wire.Request{Header: wire.Header{Op: wire.OpForceLedger}, Has: wire.BodyForceLedger, ForceLedgerID: ledgerID}
}

// writeLACRequest returns the WRITE_LAC request storing body (a digested
// LAC, digest.Digester.AppendLAC) as ledger ledgerID's explicit LAC.
func writeLACRequest(ledgerID, lac int64, masterKey, body []byte) wire.Request {
	return wire.Request{
		Header:   wire.Header{Op: wire.OpWriteLAC},
		Has:      wire.BodyWriteLAC,
		WriteLAC: wire.WriteLACRequest{LedgerID: ledgerID, LAC: lac, MasterKey: masterKey, Body: body},
	}
}
