//go:build invariants

package ledger

// invariants is true in builds with the invariants tag: see invariants.go.
const invariants = true
