package ledger

import "time"

// Machine is the contract of every protocol machine of this package
// (Writer, Recovery, Read, ReadLAC, LongPollLAC), after etcd-io/raft's
// RawNode: Step feeds one Event, Ready hands over the effects queued since
// the last call, in order, and Done reports that the machine's final
// completion has been queued (for a Writer: its close finished). Commands
// specific to a machine (Start, Writer.Append, Writer.Close, Writer.Force)
// are methods of its own type.
//
// Time reaches a machine only as Tick events: a shell steps one Tick each
// TickInterval (zero: the machine wants none). What a tick does is the
// machine's business, so the timer policy is written once, here, and not
// in each shell. Request timeouts stay with the transport, which reports a
// request that took too long as a response whose Err is ErrTimeout.
type Machine interface {
	Step(Event)
	Ready() []Effect
	Done() bool
	TickInterval() time.Duration
}

var (
	_ Machine = (*Writer)(nil)
	_ Machine = (*Recovery)(nil)
	_ Machine = (*Read)(nil)
	_ Machine = (*ReadLAC)(nil)
	_ Machine = (*LongPollLAC)(nil)
	_ Machine = (*BatchRead)(nil)
)
