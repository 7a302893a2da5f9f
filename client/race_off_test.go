//go:build !race

package client_test

// raceEnabled: the race detector changes allocation behaviour (sync.Pool
// drops items at random), so allocation tests skip under it.
const raceEnabled = false
