// Package client is Folio's Go client for BookKeeper ledgers: create a
// ledger, append to it (pipelined, acknowledged once an ack quorum of
// bookies stored the entry and every lower one), close it, open it with or
// without recovery, and read it. It speaks BookKeeper 4.17's wire protocol
// (v3 by default, v2 by option) and metadata layout, so it works with Folio
// and Java bookies alike.
//
//	c, err := client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})
//	w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: pw}) // E=3, Qw=2, Qa=2, CRC32C
//	id, err := w.Append(ctx, []byte("hello"))
//	err = w.Close(ctx)
//	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: pw})
//	entries, err := r.Read(ctx, 0, id)
//
// # Ledger metadata and listing
//
// LedgerMetadata reads a ledger's metadata as an immutable value (ensembles,
// quorums, state, last entry, length, digest type, custom metadata, ctime,
// format version); WriteHandle.Metadata and ReadHandle.Metadata give the
// handle's view without a store round trip. WatchLedgerMetadata follows a
// ledger's changes until it is closed or deleted (Java's
// LedgerMetadataListener), and ListLedgers streams every ledger id in
// ascending order, a page at a time.
//
// # Explicit entry ids and chosen ledger ids
//
// CreateLedgerAdv returns a WriteAdvHandle (Java's WriteAdvHandle), whose
// WriteAt and WriteAtAsync take the entry id from the application: entries
// may be written in any order and each is sent at once, but they are
// acknowledged in id order, each only after every lower id. A duplicate or
// negative id fails with ErrDuplicateEntryID or ErrInvalidEntryID and
// disturbs nothing. LedgerOptions.LedgerID creates the ledger under a
// chosen id (Java's CreateAdvBuilder.withLedgerId), for CreateLedger too;
// a taken id fails with ErrLedgerExists.
//
// # Reading
//
// A ReadHandle reads with Read (up to the LAC it knows), ReadUnconfirmed,
// Entries (an iterator that reads the next chunk ahead while the caller
// consumes one, Config.ReadAheadChunks) and BatchRead (Java's batchRead: one
// BATCH_READ_ENTRY request with Config.UseV2WireProtocol, single reads
// otherwise or from bookies that do not serve it). ReadLastAddConfirmed
// asks a covering set of bookies, TryReadLastAddConfirmed takes the first
// answer; LastAddConfirmed and Length return what the handle learnt so
// far without asking. Tail follows an open ledger with long polls.
// Speculative reads back off (Config.FirstSpeculativeReadTimeout, …) and
// reads can stick to one bookie (Config.StickyReadsEnabled), as Java's.
//
// # Design
//
// The protocol lives in internal/ledger as pure state machines (the writer
// with ordered acknowledgement and ensemble change, the LAC read with the
// coverage rule, entry reads with failover, recovery). This package is the
// shell that runs them (DESIGN.md §5): each write handle has one goroutine,
// its ordered executor, which steps the writer with appends, bookie answers
// and metadata results; reads and recovery run their machine on the
// calling goroutine. The effects are carried out by internal/ledgerexec,
// the executor the simulator runs too. Bookie I/O goes through
// internal/transport; metadata through the driver the URI names (importing
// this package links the etcd driver).
//
// # Errors
//
// Errors match the sentinels of errors.go with errors.Is; Code gives the
// BookKeeper return code of each. An append that fails with
// ErrLedgerFenced, ErrLedgerClosed or ErrTimeout has an unknown outcome: the
// entry may or may not be in the ledger, as in BookKeeper.
//
// # Logging and metrics
//
// Config.Logger (slog) receives connection and ledger events.
// Config.Metrics receives operation latencies and counts through the
// Metrics interface; the client itself depends on no metrics library.
// Package clientprom records them in Prometheus under BookKeeper's
// bookkeeper_client_* names:
//
//	c, err := client.New(ctx, client.Config{
//		MetadataServiceURI: uri,
//		Metrics:            clientprom.New(prometheus.DefaultRegisterer),
//	})
package client
