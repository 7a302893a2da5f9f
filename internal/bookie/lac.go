package bookie

import (
	"github.com/foliodb/folio/internal/wire"
)

// writeLAC serves WRITE_LAC (spec §2.5.5): refused in read-only mode; the
// store checks the key, keeps the body unchanged, raises the known LAC
// (waking long polls) and returns once durable. Fenced ledgers accept it,
// as in Java.
func (b *Bookie) writeLAC(req *wire.Request, resp *wire.Response) {
	w := &req.WriteLAC
	if b.ReadOnly() {
		b.fillStatus(req, resp, wire.StatusReadOnly)
		return
	}
	err := b.store.SetExplicitLAC(b.ctx, w.LedgerID, w.MasterKey, w.Body)
	b.fillStatus(req, resp, b.statusLogged(err, "write LAC", w.LedgerID, w.LAC))
}

// readLAC serves READ_LAC (spec §2.5.5): the explicit-LAC body and the
// highest stored entry, each when present. Unlike Java, a failed lookup is
// never turned into ENOENTRY: if either lookup failed for a reason other
// than an explicit negative, the reply is that failure's status (EIO,
// EUNKNOWNLEDGERSTATE), since a reader may take "empty" as the truth
// (protocol.md §7 item 4). ENOLEDGER only when the store knows neither;
// ENOENTRY when the ledger is known but has neither.
func (b *Bookie) readLAC(req *wire.Request, resp *wire.Response) {
	ledgerID := req.ReadLACLedgerID
	lacBody, lacErr := b.store.ExplicitLAC(ledgerID)
	lastBody, lastErr := b.store.ReadEntry(ledgerID, wire.LastAddConfirmed)
	for _, err := range [...]error{lacErr, lastErr} {
		if err != nil && !isNegative(err) {
			b.fillStatus(req, resp, b.statusLogged(err, "read LAC", ledgerID, wire.LastAddConfirmed))
			return
		}
	}
	if lacErr != nil && lastErr != nil {
		st := wire.StatusNoEntry
		if statusOf(lacErr) == wire.StatusNoLedger && statusOf(lastErr) == wire.StatusNoLedger {
			st = wire.StatusNoLedger
		}
		b.fillStatus(req, resp, st)
		return
	}
	b.fillStatus(req, resp, wire.StatusOK)
	rl := &resp.ReadLAC
	if lacErr == nil {
		rl.LACBody, rl.HasLACBody = lacBody, true
	}
	if lastErr == nil {
		rl.LastEntryBody, rl.HasLastEntryBody = lastBody, true
	}
}

// forceLedger serves FORCE_LEDGER (spec §2.5.6): everything acknowledged
// for the ledger becomes durable before the reply. No key is checked.
func (b *Bookie) forceLedger(req *wire.Request, resp *wire.Response) {
	err := b.store.Force(b.ctx, req.ForceLedgerID)
	b.fillStatus(req, resp, b.statusLogged(err, "force ledger", req.ForceLedgerID, wire.LastAddConfirmed))
}
