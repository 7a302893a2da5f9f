// Package bookie is the request semantics of a BookKeeper 4.17 bookie: what
// each operation a Java (or Folio) client sends does to the storage engine and
// what it answers (spec/wire-protocol.md §2.5, §3, §4, §6; spec/protocol.md
// §1.10, §4.2, §5, §6.9).
//
// The package is pure (DESIGN.md §8): no sockets, no files, no wall clock.
// It takes decoded requests (package wire) and hands back responses through a
// Responder; package bookie/server owns the listener, the connections and the
// codecs. Time comes from an injected clock.Clock (long-poll expiry and latency),
// storage from a storage.Store.
//
// # Concurrency
//
// Handle is asynchronous and never blocks on I/O itself, except for the
// bounded wait of Store.AddEntry when the storage queue is full (which is the
// back-pressure the connection's reader should feel). Adds are queued to the
// store from the caller's goroutine, so the adds of one connection reach the
// store in the order they were read. Every other operation that touches
// storage runs on its own goroutine (Config.Go), so reads, fences and long
// polls proceed concurrently and are answered in any order, as the Java
// bookie does (spec/wire-protocol.md §7.2). A waiting long poll holds no
// goroutine: the store's LAC watch or a Clock timer starts its answer
// (longpoll.go).
//
// # Safety rules kept here
//
//   - An add is acknowledged only when the store reports it durable (unless
//     the client asked for DEFERRED_SYNC).
//   - A fence read answers only after the fence is durable, whatever the read
//     finds, and an unknown ledger is created fenced.
//   - "No such ledger" and "no such entry" are answered only when the store
//     says so; any other failure is EIO (or EUNKNOWNLEDGERSTATE), never a
//     negative that recovery could count (spec/protocol.md §7, items 4 and 5).
//   - READ_LAC does not copy Java's false ENOENTRY after a failed lookup.
//
// The one table between storage errors and status codes is statusOf.
package bookie
