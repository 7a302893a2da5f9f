//go:build race

package ledgerstore

// raceEnabled: the race detector changes allocation behaviour (sync.Pool
// drops items), so allocation counts are checked only without -race.
const raceEnabled = true
