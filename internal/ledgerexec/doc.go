// Package ledgerexec is the one shell around the protocol machines of
// internal/ledger: it carries out their I/O effects — builds the wire
// requests (digesting entry bodies, adding the master key and the flags),
// sends them to bookies, runs metadata operations — and turns every answer
// back into the machine's Event. The client (over internal/transport and
// the metadata driver), the admin tools (through the client) and the
// simulator (over its simulated network and the memory driver) all use the
// same Executor, so the simulator runs the code that production runs
// between the machines and the sockets.
//
// The Executor depends on two small interfaces, Bookies and Store, plus,
// for Run, a clock.Clock that times the machines' Ticks. It holds no
// goroutines: answers come back on whatever goroutine the Bookies and
// Store implementations call back on, and are handed to Config.Emit. Run
// and Queue are the ordered loop the client drives a machine with; the
// simulator, single-threaded, steps its machines from its own event loop
// and only calls Do.
package ledgerexec
