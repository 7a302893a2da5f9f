//go:build race

package client_test

// raceEnabled: see race_off_test.go.
const raceEnabled = true
