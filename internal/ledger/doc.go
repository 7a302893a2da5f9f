// Package ledger is the BookKeeper client protocol as pure state machines
// (DESIGN.md §5): the writer of one ledger (pending adds with ordered
// acknowledgement, LAC piggybacking, ensemble change, fencing, close), the
// LAC read with the coverage rule, entry reads with failover through the
// write set, and ledger recovery (fence, find the end, rewrite, close).
//
// # Step and Ready
//
// Every machine follows etcd-io/raft's RawNode split. Inputs are method
// calls that never block: Step(Event) for everything that comes back from
// the outside world (a bookie's answer, a request the shell timed out, the
// result of a metadata read or compare-and-set, a new set of writable
// bookies), plus a few commands specific to the machine (Writer.Append,
// Writer.Close, Start). Each input only changes memory and queues effects.
// Ready returns the queued effects, in the order they arose, and forgets
// them: the caller owns the slice and must carry the effects out in order:
//
//	for {
//		for _, eff := range m.Ready() {
//			switch eff := eff.(type) {
//			case ledger.SendAdd:       // digest and send to each bookie; later Step(AddResponse)
//			case ledger.SendRead:      // later Step(ReadResponse)
//			case ledger.SendReadLAC:   // later Step(ReadLACResponse)
//			case ledger.WriteMetadata: // CAS; later Step(MetadataWritten)
//			case ledger.ReadMetadata:  // later Step(MetadataRead)
//			case ledger.AddComplete, ledger.CloseComplete, ...: // deliver to the application
//			}
//		}
//		m.Step(<-events)
//	}
//
// There is no Advance: effects are handed over by Ready and nothing in the
// machine waits for them to be "applied". A machine asks for at most one
// metadata operation at a time, so results need no tag.
//
// Machines hold no goroutines, sockets, clocks or randomness of their own
// (internal/lint checks the imports). Timeouts are the shell's business: it
// reports a request that took too long as a response whose Err is
// ErrTimeout (or any error that is not a bookie status). A machine is not
// safe for concurrent use; the shell runs each on one ordered executor, as
// BookKeeper runs a ledger handle on one ordered thread.
//
// # Requests
//
// The Send* effects name the operation and the protocol facts (entry id,
// piggybacked LAC, cumulative length, fence and recovery flags); the shell
// builds the wire.Request: it digests entry bodies with the ledger's
// digest.Digester, adds the master key and picks the protocol version. A
// response event names the bookie and the entry id the request asked for
// (the shell knows them from txn matching), not what the bookie echoed.
//
// # Errors
//
// Completions carry the sentinels of errors.go (some are the wire package's
// status sentinels), matched with errors.Is. A broken internal invariant
// panics: it is a programmer error, and continuing could acknowledge data
// that is not durable.
package ledger
