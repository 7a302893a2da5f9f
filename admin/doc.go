// Package admin is the Go API of a BookKeeper cluster's operator: what
// Java programs do with org.apache.bookkeeper.client.BookKeeperAdmin and
// what `folio shell` runs. It lists bookies with their state and disk
// space, recovers a failed bookie's data or one ledger (with a dry run and
// a query that change nothing), decommissions a bookie, inspects a ledger
// entry by entry on its bookies, and reads and switches AutoRecovery
// (under-replicated ledgers, the auditor, the lost-bookie recovery delay).
//
// An Admin is made from the same settings as a client (Config.Client: the
// metadata service URI and its security, the bookies' TLS):
//
//	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: uri}})
//	if err != nil { … }
//	defer a.Close()
//	bookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{})
//
// Every operation takes a context; long ones (RecoverBookie,
// DecommissionBookie) report progress through an optional callback in
// their options. Errors match the sentinels below with errors.Is (an
// unknown ledger is ErrNoSuchLedger, the client's own sentinel, so one
// check covers both packages); the cause stays in the chain.
//
// Each method's doc comment names the BookKeeperAdmin method (or shell
// command) it corresponds to.
package admin
