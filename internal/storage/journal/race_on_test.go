//go:build race

package journal

// raceEnabled: the race detector makes sync.Pool drop items at random and
// adds allocations, so allocation counts are only checked without -race.
const raceEnabled = true
