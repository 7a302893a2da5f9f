package harness

import "testing"

// The output of `readledger -ledgerid L -bookie B -fe 0 -le 60` that
// exited -1 in a make compat run (BookKeeper 4.17.3 against a Folio bookie),
// cut down to the lines readLedgerCloseRace looks at.
const readLedgerRaceOutput = `--------- Lid=9007199254740992001, Eid=1 ---------
--------- Lid=9007199254740992001, Eid=2 ---------
Failed to read entry 3 -- No such entry
com.google.common.util.concurrent.UncheckedExecutionException: Executor is shutting down
	at org.apache.bookkeeper.tools.cli.commands.bookie.ReadLedgerCommand.apply(ReadLedgerCommand.java:138)
Caused by: java.util.concurrent.RejectedExecutionException: Executor is shutting down
	at org.apache.bookkeeper.common.util.SingleThreadExecutor.execute(SingleThreadExecutor.java:208)
	at org.apache.bookkeeper.proto.BookieClientImpl.close(BookieClientImpl.java:610)
	at org.apache.bookkeeper.tools.cli.commands.bookie.ReadLedgerCommand.readledger(ReadLedgerCommand.java:222)
`

func TestReadLedgerCloseRace(t *testing.T) {
	for _, c := range []struct {
		cmd, out string
		want     bool
	}{
		{"readledger -ledgerid 1 -bookie 127.0.0.1:3181 -fe 0 -le 60", readLedgerRaceOutput, true},
		// Another command, or readledger without -bookie (the client
		// path has no such race), or another failure: not accepted.
		{"ledgermetadata -ledgerid 1", readLedgerRaceOutput, false},
		{"readledger -ledgerid 1 -fe 0 -le 60", readLedgerRaceOutput, false},
		{"readledger -ledgerid 1 -bookie 127.0.0.1:3181 -fe 0 -le 60",
			"java.util.concurrent.RejectedExecutionException: Executor is shutting down\n\tat org.apache.bookkeeper.client.LedgerHandle.asyncReadEntries", false},
		{"readledger -ledgerid 1 -bookie 127.0.0.1:3181 -fe 0 -le 60", "Failed to read entry 3 -- No such entry\n", false},
	} {
		if got := readLedgerCloseRace(c.cmd, c.out); got != c.want {
			t.Errorf("readLedgerCloseRace(%q, …) = %v, want %v", c.cmd, got, c.want)
		}
	}
}
