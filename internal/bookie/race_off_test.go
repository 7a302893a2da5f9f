//go:build !race

package bookie

const raceEnabled = false
