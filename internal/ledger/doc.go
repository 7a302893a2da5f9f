// Package ledger is the BookKeeper client protocol as pure state machines
// (DESIGN.md §5): the writer of one ledger (pending adds with ordered
// acknowledgement, LAC piggybacking, ensemble change, fencing, close), the
// LAC read with the coverage rule, entry reads with failover through the
// write set, and ledger recovery (fence, find the end, rewrite, close).
//
// # Step and Ready
//
// Every machine follows etcd-io/raft's RawNode split and implements
// Machine (machine.go). Inputs are method calls that never block:
// Step(Event) for everything that comes back from the outside world (a
// bookie's answer, a request the shell timed out, the result of a metadata
// read or compare-and-set, a new set of writable bookies, a Tick of the
// machine's TickInterval), plus a few commands specific to the machine
// (Writer.Append, Writer.Close, Start). Each input only changes memory and queues effects.
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
// One shell, internal/ledgerexec, carries out the I/O effects for the
// client, the admin tools and the simulator alike. Every Event type is
// declared in event.go and every Effect type in effect.go (listed by
// Events and Effects), so a shell can test that it handles them all.
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
//
// # The Writer's states
//
// Writer (writer.go) keeps its state in a few fields rather than one enum:
// appendErr (nil while WRITING), changing (an ensemble change runs), meta
// (the one metadata operation outstanding) and close (none, wanted,
// running, done). As states and transitions:
//
//	                Append: SendAdd to the write set
//	                AddResponse ok: ack; adds at the head with Qa acks → AddComplete, in order
//	                 ┌────┐
//	                 v    │
//	NewWriter ──> WRITING ┘
//	                │  AddResponse with an error that is not EFENCED/EUA/EBADREQ (the
//	                │  bookie is recorded failed); or Append after such an error for an
//	                │  entry already acknowledged
//	                v
//	              CHANGING (no AddComplete until it ends) ── runEnsembleChange, on the
//	                │                                        writer's copy of the metadata:
//	                ├─ copy CLOSED ──────────> stop(ErrLedgerClosed) ──> STOPPED
//	                ├─ copy IN_RECOVERY ─────> stop(ErrLedgerFenced) ──> STOPPED (no close)
//	                ├─ failed bookies already out of the stored ensemble: resend
//	                │  pending adds to it, acknowledge ──────────────────> WRITING
//	                ├─ no replacement (placement), or the last fragment starts
//	                │  beyond LAC+1 ──────────> failEnsembleChange ──> STOPPED, close wanted
//	                └─ WriteMetadata(new ensemble from LAC+1)
//	                     MetadataWritten ok: failures still in the stored ensemble
//	                       → runEnsembleChange again; else resend, acknowledge → WRITING
//	                     MetadataWritten ErrBadVersion → ReadMetadata
//	                       MetadataRead ok → runEnsembleChange (on the read copy)
//	                     any other metadata error, or a MetadataRead error ──>
//	                       failEnsembleChange ──> STOPPED, close wanted
//
//	WRITING or CHANGING ── AddResponse EFENCED/EUA/EBADREQ for an add short of Qa acks ──>
//	    STOPPED: every pending add fails (ErrLedgerFenced for EFENCED, else ErrLedgerClosed),
//	    Append fails at once; close wanted unless the writer's copy is IN_RECOVERY
//	WRITING or CHANGING ── Close ──> STOPPED (pending adds fail with ErrLedgerClosed), close wanted
//
//	close wanted ── once no ensemble change and no metadata operation runs ──> CLOSING:
//	    runClose on the writer's copy:
//	      CLOSED at the writer's end ──────> CloseComplete ok ─────────────> DONE
//	      CLOSED at another end ───────────> CloseComplete ErrMetadataVersion > DONE
//	      OPEN or IN_RECOVERY ─> WriteMetadata(CLOSED at visibleLAC: the acknowledged end)
//	        MetadataWritten ok ──> CloseComplete ──────────────────────────> DONE
//	        MetadataWritten ErrBadVersion ──> ReadMetadata
//	          MetadataRead ok ──> runClose (on the read copy)
//	          MetadataRead error ──> CloseComplete(LAC, err) ──────────────> DONE
//	        any other error ──> CloseComplete(LAC, err) ───────────────────> DONE
//	DONE: Close queues the same CloseComplete again.
//
// WritableBookies replaces the writable set in every state. With
// DeferredSync, a bookie failure goes straight to failEnsembleChange.
//
// The writer options (writer_options.go) add three edges. AddQuorumTimeout:
// a Tick that finds an add pending for more than the timeout without Qa
// acks goes WRITING or CHANGING ──> STOPPED as an EFENCED/EUA/EBADREQ
// would, with ErrAddQuorumTimeout. DelayEnsembleChange: a bookie error goes
// to CHANGING only once the add it failed has more than Qw − Qa failures
// in its write set (or the bookie is read-only); before that it is recorded
// for the add and the writer stays WRITING. MaxEnsembleChanges: entering
// CHANGING, or another round after MetadataWritten, past the limit goes to
// failEnsembleChange with ErrTooManyEnsembleChanges.
//
// AckedAdhering (EnforceMinNumFaultDomainsForWrite) changes what "has its
// quorum" means on every edge above (pipeline.quorate): Qa acks from
// bookies, in the current ensemble, that meet the placement policy's
// fault-domain rule. An add short of it stays pending, times out under
// AddQuorumTimeout, and under DelayEnsembleChange goes to CHANGING once the
// write-set members that have not failed for it cannot meet the rule. The
// same holds for a Recovery's rewrites, except that a rewrite every
// write-set member stored counts as written even short of the rule
// (RecoveryConfig.AckedAdhering: Java's would wait forever).
//
// # Recovery's states
//
// Recovery (recovery.go) moves through its phase field, in one direction:
//
//	Start ──> MARK, on the metadata it was given:
//	            CLOSED ─────────────────────────> RecoveryComplete (nothing to do) ──> DONE
//	            IN_RECOVERY ────────────────────> FENCE (join the recovery in progress)
//	            OPEN ──> WriteMetadata(IN_RECOVERY)
//	              MetadataWritten ok ───────────> FENCE
//	              MetadataWritten ErrBadVersion ─> ReadMetadata
//	                MetadataRead ok ──> MARK again, on the read copy
//	              any other metadata error, or a MetadataRead error ──> failed ──> DONE
//
//	FENCE: the metadata is snapshotted (every later read uses the snapshot's
//	  ensembles); a fencing ReadLAC of -1 to the last ensemble; ReadResponses
//	  for entry -1 go to it
//	    LAC found (coverage rule) ──> start = max(LAC, first entry of the last
//	      fragment - 1) (LAC alone with Unsafe.StartAtLACOnly); rewrites carry
//	      start as their LAC (their own LAC with Unsafe.PiggybackRecoveryLAC) ──> READ
//	    LAC read failed ─────────────────────────> failed ───────────────────────> DONE
//
//	READ: fencing SendReads (plain with Unsafe.NoFenceOnRecoveryReads) of
//	  ReadAhead entries past the last decided one, each to its write set in the
//	  snapshot, and of the start entry when its length is needed (length probe)
//	    ReadResponse: a valid copy ─> entry found; NegativeThreshold (Qw-Qa+1)
//	      "no such entry/ledger" ─> entry absent; every copy answered, neither ─> failed
//	    entries decided, in order: found ─> SendAdd(Recovery) to its write set in
//	      the recovery's current ensemble, read further ahead; absent ─> the end is
//	      the entry before, reading stops
//	    AddResponse ok ─> ack (the recovery LAC moves over entries with Qa acks)
//	    AddResponse EFENCED/EUA/EBADREQ ─────────> failed ───────────────────────> DONE
//	    AddResponse other error ─> the bookie is replaced in memory only (placement;
//	      an ensemble from recovery LAC + 1, written at close) and the pending
//	      rewrites resent; no replacement ───────> failed ───────────────────────> DONE
//	    end found, every rewrite acknowledged, no length probe pending ──> CLOSE
//
//	CLOSE: runClose on the recovery's copy of the metadata:
//	    CLOSED ──> RecoveryComplete with the stored end (someone closed first) ──> DONE
//	    OPEN ────> failed (ErrMetadataVersion) ──────────────────────────────────> DONE
//	    IN_RECOVERY ──> WriteMetadata(CLOSED at the recovery LAC, with the ensembles
//	      rewrites moved to; one starting below the stored last fragment ─> failed)
//	        MetadataWritten ok ──> RecoveryComplete ─────────────────────────────> DONE
//	        MetadataWritten ErrBadVersion ──> ReadMetadata
//	          MetadataRead ok ──> CLOSE again, on the read copy
//	        any other metadata error (or MetadataRead error) ──> failed ─────────> DONE
//
//	DONE: one RecoveryComplete was queued (failed: with ErrLedgerRecovery, the
//	  ledger left IN_RECOVERY for anyone to recover again); every later event is
//	  ignored. WritableBookies replaces the writable set in every phase before DONE;
//	  answers a phase does not expect (a rewrite's outside READ, an entry read's
//	  outside READ, a LAC read's after FENCE) are ignored.
package ledger
