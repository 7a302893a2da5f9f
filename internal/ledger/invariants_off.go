//go:build !invariants

package ledger

// invariants is false in ordinary builds: see invariants.go.
const invariants = false
