//go:build !race

package ledgerstore

const raceEnabled = false
