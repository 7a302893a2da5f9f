// Package lint holds tests that keep the import rules of DESIGN.md §8:
// dependencies point down the layer list, nothing imports the command tree,
// and the pure packages (ledger, bookie, storage, and the codecs) do no
// network or OS I/O and read no wall clock. It also keeps the concurrency
// rules of docs/design/threads.md: internal/ledger and below start no
// goroutine, import neither sync nor sync/atomic and use no global
// math/rand; internal/bookie starts goroutines only through Config.Go;
// every file that starts goroutines is named in docs/design/threads.md. And
// constructors and configuration checks return errors, never panic
// (config_test.go); `make test` builds with the invariants tag
// (make_test.go). Only internal/ledgerexec builds ADD, READ and READ_LAC
// requests (request_test.go). It has no code of its own.
package lint
