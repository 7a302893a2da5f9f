// Package sim is Folio's deterministic simulator (DESIGN.md §7.3, issue 8):
// the real protocol machines of internal/ledger with the client's own effect
// executor (internal/ledgerexec: request building and answer parsing), the
// real bookie request logic of internal/bookie over the real storage engine
// (internal/storage/ledgerstore on Pebble's in-memory vfs) and the memory
// metadata driver, wired together by a simulated network, all driven by one
// seeded event loop in virtual time. A failure replays exactly from its
// seed.
//
// # Determinism
//
// Everything that decides what happens next runs on the goroutine that
// calls Run, one event at a time, in (virtual time, sequence) order:
//
//   - Random streams seeded from Config.Seed make every choice: the
//     schedule's (which action each step takes, and when: Generate), each
//     step's (its action's details, and crash losses), each client's, each
//     link's (delays, losses), each bookie's, and the world's (its set-up,
//     the liveness phase). Placement draws from its own source seeded from
//     the same seed. Separate streams keep a part's draws the same when
//     steps it takes no part in are removed, which is what makes Minimize
//     work.
//   - Time is a virtual duration since the start. The components' clock
//     (worldClock, a clock.Clock) reads it, and its timers are events of the
//     loop. Nothing reads the wall clock.
//   - The bookie's spawned work (bookie.Config.Go) and the store's
//     off-goroutine completions (ledgerstore.Config.Go) are queued as events.
//     The store runs with Manual and ManualJournal: group commits, write-cache
//     flushes and checkpoints are events of the loop. A fence read makes the
//     journal commit at once (fenceStore), since Fence waits for its record.
//   - Pebble still owns goroutines (its WAL writer, file cleaner). Automatic
//     compactions and table statistics are off, and a crash image takes the
//     index directories at their synced state only, so nothing Pebble does in
//     the background reaches the trace or the random stream.
//   - A long-poll read waits in the bookie's own code, as in production: on
//     the store's LAC watch (woken on the loop when an add or WRITE_LAC
//     raises the LAC) and a timer of the world's clock (an event). Either
//     ends in work the bookie spawns, which is an event too.
//   - Machines' Ticks (a writer's AddQuorumTimeout, a read's speculative
//     requests) are stepped by ledgerexec.TickFunc on the world's clock:
//     each Tick is an event of the loop, as the client's loops step them
//     on a real clock.
//   - Crash images walk the file system in sorted order and draw losses of
//     unsynced blocks from the seeded source (Pebble's own CrashClone ranges
//     over a map, so it is used only for its exact 0% and 100% views).
//   - No map iteration order reaches the trace: maps are read through sorted
//     keys.
//
// Pebble's, the bookie's (store watch) and the metadata driver's goroutines
// exist, but none of them takes a decision the trace can see.
//
// # Phases
//
// A run has a safety phase (Config.Steps workload and fault actions, with
// invariants checked as events happen) and a liveness phase: every fault is
// healed, every ledger is closed (by its writer, or by recovery retried until
// it succeeds) within a bounded virtual time, and the expensive end checks
// read every acknowledged entry back from the bookies' stores.
//
// # Schedules, minimising, scripts
//
// Config.Schedule replays an explicit safety phase (schedule.go) instead of
// the seed's. Minimize (minimize.go) reduces a failing run to a short
// schedule breaking the same invariant, and Script renders a run's
// protocol-level interleaving on the violating ledger as a datadriven
// script for internal/ledger's interaction driver (script.go); see
// docs/testing.md.
//
// # Invariants
//
// Named after the TLA+ model of the BookKeeper protocol
// (Vanlightly/bookkeeper-tlaplus) and DESIGN.md §6; see check.go. The mixed
// workload also exercises issue 21's paths (explicit entry ids, the writer
// options, TryReadLastAddConfirmed, batch reads, sticky and speculative
// reads), held to the same invariants plus LACNeverAhead and
// ExplicitIDsRefuseOnlyDuplicates.
package sim
